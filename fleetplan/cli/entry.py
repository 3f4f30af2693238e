"""The ``fleetplan`` console script's entry point (and ``python -m fleetplan``'s).

Ctrl-C or SIGTERM at any moment ends with one line and the documented exit code (130 for an
interrupt, 143 for SIGTERM), never a traceback, and an output being written is removed (outputs
go through a temporary file that is unlinked on the way out):

* from the first line of this module, while the toolkit is still loading, a signal ends the
  process at once with that line (there is nothing to clean up yet);
* from :func:`main` on, SIGINT raises ``KeyboardInterrupt`` and SIGTERM :class:`Terminated`, so
  ``finally`` blocks remove temporary files and stop child processes first;
* once the command's outputs are in place (:func:`~fleetplan.cli.settling.settle`, called by
  a command right after its last write, and by :func:`main` when the command returns), its
  exit code is decided: a first signal is noted and the command finishes its last lines with
  that code, a second ends the process at once with it. Files and exit code agree: never 143
  beside a plan just written.

What remains before this module's first line is Python's own start-up: the interpreter, its
``site`` module (the virtual environment's path files) and the two package ``__init__`` modules
this one sits in (timed in benchmarks/results/harness.md, "Before the first line of fleetplan's
code"; a loaded machine multiplies it). A Ctrl-C there gets Python's own ``KeyboardInterrupt``
traceback and a SIGTERM ends the process silently; no fleetplan code has run and nothing was
written.
"""

from __future__ import annotations

import os
import signal
import sys
import time

# The earliest reading this package can take itself: a fallback for the process's start when
# the system does not say when the process started (see command_start).
IMPORTED = time.perf_counter()


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

import atexit  # noqa: E402 - after the handlers, on purpose
import threading  # noqa: E402

from fleetplan.cli import settling  # noqa: E402
from fleetplan.cli.settling import flush_and_leave, settle  # noqa: E402

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(BaseException):
    """Raised in the main thread when SIGTERM arrives, so ``finally`` blocks clean up."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


# The most start-up (interpreter, ``site``, the package's ``__init__`` modules) that is taken to be
# this command's: more, and the process ran before this command was its task (a fork server, a
# program that imports and calls main) and the command's clock starts at IMPORTED instead.
MAX_START_UP_S = 10.0


def process_age() -> float | None:
    """Seconds since this process started, or None where the system does not say: on Linux
    ``/proc/self/stat`` field 22 (the start in clock ticks after boot) against ``/proc/uptime``
    (seconds after boot), both on the boot-time clock, so suspend and containers' time
    namespaces shift both alike; 10 ms resolution."""
    try:
        with open("/proc/self/stat") as stat:
            start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/uptime") as uptime:
            now = float(uptime.read().split()[0])
        return max(now - start_ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError):
        return None


def command_start() -> float:
    """When the command started, as a ``time.perf_counter()`` reading: the process's start
    (:func:`process_age`), so ``--time-limit`` counts Python's own start-up and imports too
    (0.03-0.05 s on a quiet machine, several tenths on a loaded one); :data:`IMPORTED` where
    the process's age is unknown or more than :data:`MAX_START_UP_S` before that (the process
    was not started for this command), and never after it (the two clocks' rounding)."""
    now = time.perf_counter()
    age = process_age()
    if age is None:
        return IMPORTED
    started = now - age
    if started < IMPORTED - MAX_START_UP_S:
        return IMPORTED
    return min(started, IMPORTED)


def main(argv: list[str] | None = None) -> int:
    started = command_start() if argv is None else time.perf_counter()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _on_sigterm)
    # Past `ulimit -f`, the kernel's default is to kill the process (SIGXFSZ) in mid-write;
    # ignored, the write fails with EFBIG and the command says so in one line.
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        from fleetplan.cli.app import main as cli_main

        code = cli_main(argv, started=started)
        settle(code)
        return code
    except KeyboardInterrupt:
        sys.stderr.write("fleetplan: interrupted\n")
        return EXIT_INTERRUPTED
    except Terminated:
        sys.stderr.write("fleetplan: terminated\n")
        return EXIT_TERMINATED


def _redeliver(unraisable: object) -> None:
    """``sys.unraisablehook`` of the command's process: an interruption raised where Python
    cannot pass it on (an import lock's weakref callback, a ``__del__``) was printed as
    "Exception ignored ... Traceback" and lost; it is sent again once this hook has returned,
    and the handler raises it where the command's code runs."""
    error = getattr(unraisable, "exc_value", None)
    if not isinstance(error, (KeyboardInterrupt, Terminated)):
        sys.__unraisablehook__(unraisable)  # type: ignore[arg-type]
        return
    signum = signal.SIGINT if isinstance(error, KeyboardInterrupt) else signal.SIGTERM
    threading.Thread(target=_send_after_hook, args=(threading.main_thread().ident, signum),
                     name="fleetplan-redeliver", daemon=True).start()


def _send_after_hook(main: int, signum: int) -> None:
    # Sent from inside the hook, the handler would run there and its exception be ignored
    # again: wait until the main thread's stack no longer holds the hook.
    import _thread

    while any(frame.f_code is _redeliver.__code__ for frame in _stack(main)):
        time.sleep(0.001)
    _thread.interrupt_main(signum)


def _stack(thread: int | None):
    frame = sys._current_frames().get(thread)
    while frame is not None:
        yield frame
        frame = frame.f_back


def run() -> None:
    """Console-script wrapper: run :func:`main`, then end the process with its code.

    Python's own teardown resets the signal handlers to the system's default before it frees
    the modules (a tenth of a second and more with numpy and the solvers loaded): a SIGTERM
    then killed the process silently, after its plan was written. So the process ends here
    instead: non-daemon threads are joined and the at-exit functions run (Dask and
    multiprocessing clean up there) under :func:`settle`'s handlers, and the modules are not
    torn down. After an interrupt the command has already cleaned up (``finally`` blocks
    removed its temporary files, ``bench`` stopped its children), so it leaves at once."""
    settling.in_console = True
    sys.unraisablehook = _redeliver
    code = main()
    if code not in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        # main() has settled the code. What Python's teardown would do before freeing the
        # modules; multiprocessing's child processes end the same way (BaseProcess._bootstrap).
        for finish in (getattr(threading, "_shutdown", None), getattr(atexit, "_run_exitfuncs", None)):
            if finish is not None:
                finish()
    flush_and_leave(code)


if __name__ == "__main__":
    run()
