"""The ``fleetplan`` console script's entry point (and ``python -m fleetplan``'s).

Ctrl-C or SIGTERM at any moment ends with one line and the documented exit code (130 for an
interrupt, 143 for SIGTERM), never a traceback, and an output being written is removed (outputs
go through a temporary file that is unlinked on the way out):

* from the first line of this module, while the toolkit is still loading, a signal ends the
  process at once with that line (there is nothing to clean up yet);
* from :func:`main` on, SIGINT raises ``KeyboardInterrupt`` and SIGTERM :class:`Terminated`, so
  ``finally`` blocks remove temporary files and stop child processes first.

What remains before this module's first line is Python's own start-up: the interpreter, its
``site`` module (the virtual environment's path files) and the two package ``__init__`` modules
this one sits in, about 30-50 ms on a quiet machine (several times that on a loaded one). A
Ctrl-C there gets Python's own ``KeyboardInterrupt`` traceback and a SIGTERM ends the process
silently; no fleetplan code has run and nothing was written.
"""

from __future__ import annotations

import os
import signal
import sys


def _leave_at_once(signum: int, frame: object) -> None:
    # During start-up: say it in one line and end without unwinding imports half done.
    interrupted = signum == signal.SIGINT
    os.write(2, b"fleetplan: interrupted\n" if interrupted else b"fleetplan: terminated\n")
    os._exit(130 if interrupted else 143)


# Only in the command's own process (the console script, or `python -m fleetplan[.cli]`): a
# program that imports this module keeps its handlers.
if sys.argv and os.path.basename(sys.argv[0]) in ("fleetplan", "__main__.py"):
    signal.signal(signal.SIGINT, _leave_at_once)
    signal.signal(signal.SIGTERM, _leave_at_once)

import time  # noqa: E402 - after the handlers, on purpose

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(BaseException):
    """Raised in the main thread when SIGTERM arrives, so ``finally`` blocks clean up."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


def process_age() -> float:
    """Seconds since this process started (Linux's ``/proc/self/stat``, 10 ms ticks; 0 where
    unknown): ``--time-limit`` counts Python's own start-up and imports too."""
    try:
        with open("/proc/self/stat") as stat:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as uptime:
            now = float(uptime.read().split()[0])
        return max(now - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return 0.0


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter() - (process_age() if argv is None else 0.0)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Past `ulimit -f`, the kernel's default is to kill the process (SIGXFSZ) in mid-write;
    # ignored, the write fails with EFBIG and the command says so in one line.
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        from fleetplan.cli.app import main as cli_main

        return cli_main(argv, started=started)
    except KeyboardInterrupt:
        sys.stderr.write("fleetplan: interrupted\n")
        return EXIT_INTERRUPTED
    except Terminated:
        sys.stderr.write("fleetplan: terminated\n")
        return EXIT_TERMINATED


def run() -> None:
    """Console-script wrapper: exit with :func:`main`'s code.

    After an interrupt the command has already cleaned up (``finally`` blocks removed its
    temporary files, ``bench`` stopped its children): the process then ends at once instead of
    tearing down every loaded module, which took over a second after ``bench``."""
    code = main()
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
