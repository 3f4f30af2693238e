"""The end of a command: once its outputs are in place its exit code is decided (see
:mod:`fleetplan.cli.entry`). A leaf module (standard library only), imported by the entry point
and by the commands that write outputs."""

from __future__ import annotations

import os
import signal
import sys

# True in the command's own process once ``entry.run()`` drives it; main() called from a
# program (or a test) in-process leaves that program's handlers as main() set them.
in_console = False
# The code settled so far: settling it again keeps the signal already noted.
_settled: int | None = None


def settle(code: int) -> None:
    """The command's outputs are in place and its exit code is ``code``: from now on a first
    Ctrl-C or SIGTERM is noted and the command goes on to its end (a few lines of report, the
    process's teardown), a second ends the process at once; either way with ``code``.

    Only in the command's own process (see :func:`fleetplan.cli.entry.run`); elsewhere it does
    nothing."""
    global _settled
    if not in_console or _settled == code:
        return
    _settled = code
    received: list[int] = []

    def note(signum: int, frame: object) -> None:
        received.append(signum)
        if len(received) > 1:
            flush_and_leave(code)

    signal.signal(signal.SIGINT, note)
    signal.signal(signal.SIGTERM, note)


def flush_and_leave(code: int) -> None:
    """End the process now with ``code``, what is buffered for stdout and stderr written first."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
