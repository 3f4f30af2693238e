"""Running OR-Tools CP-SAT so that Ctrl-C and SIGTERM end the command as the guide says.

CP-SAT installs its own SIGINT handler for the length of ``Solve`` (the ``catch_sigint_signal``
parameter, on by default): a Ctrl-C then only stops the search, ``Solve`` returns its best
solution, and the command carries on and exits 0 as if the time limit had come — instead of
the one line "fleetplan: interrupted" and exit 130 (:mod:`fleetplan.cli.entry`). OR-Tools' own
MathOpt layer turns that parameter off for the same reason.

:func:`solve_interruptibly` turns it off and runs ``Solve`` in a worker thread (it releases the
GIL) while the main thread waits in short joins, with its own handlers for SIGINT and SIGTERM
that only note the signal: an exception raised in the main thread while the worker is inside
CP-SAT makes the process abort at exit ("terminate called without an active exception", seen
with OR-Tools 9.15). On a signal the search is stopped (``StopSearch`` is thread-safe), the
worker joined, the previous handlers restored, and the signal raised again, so the entry
point's handling (:mod:`fleetplan.cli.entry`) runs as for any other moment of the command.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

# How often the main thread wakes up to let Python's signal handlers run (seconds).
POLL_S = 0.05


def solve_interruptibly(solver: Any, model: Any, callback: Any = None) -> int:
    """``solver.solve(model[, callback])`` that a signal interrupts: returns the status code,
    or re-raises the interrupt after stopping the search.

    >>> from ortools.sat.python import cp_model
    >>> model = cp_model.CpModel()
    >>> x = model.new_int_var(0, 3, "x")
    >>> model.maximize(x)
    >>> solver = cp_model.CpSolver()
    >>> solver.status_name(solve_interruptibly(solver, model)), solver.value(x)
    ('OPTIMAL', 3)
    """
    solver.parameters.catch_sigint_signal = False
    arguments = (model,) if callback is None else (model, callback)
    if threading.current_thread() is not threading.main_thread():
        return solver.solve(*arguments)  # signals are delivered to the main thread only
    outcome: dict[str, Any] = {}
    received: list[int] = []

    def run() -> None:
        try:
            outcome["code"] = solver.solve(*arguments)
        except BaseException as error:  # noqa: BLE001 - handed to the main thread below
            outcome["error"] = error

    def note(signum: int, frame: object) -> None:
        if previous.get(signum) is not signal.SIG_IGN:  # an ignored signal stays ignored
            received.append(signum)

    previous: dict[int, Any] = {}
    previous.update({number: signal.signal(number, note) for number in (signal.SIGINT, signal.SIGTERM)})
    try:
        worker = threading.Thread(target=run, name="cp-sat", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(POLL_S)
            if received:
                solver.stop_search()
                worker.join()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if received:
        signal.raise_signal(received[0])  # the restored handler: KeyboardInterrupt, or SIGTERM's
    if "error" in outcome:
        raise outcome["error"]
    return outcome["code"]
