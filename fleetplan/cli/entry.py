"""The ``fleetplan`` console script's entry point.

It imports nothing heavy before installing the signal handlers, so Ctrl-C or SIGTERM at any
moment — even while Python is still loading the toolkit — ends with one line and the documented
exit code (130 for an interrupt, 143 for SIGTERM), never a traceback, and an output being
written is removed (outputs go through a temporary file that is unlinked on the way out).
"""

from __future__ import annotations

import os
import signal
import sys
import time

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
    """Console-script wrapper: exit with :func:`main`'s code."""
    sys.exit(main())


if __name__ == "__main__":
    run()
