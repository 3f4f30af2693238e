"""Run a HiGHS MIP so that it cannot outlast its deadline (the reservation solvers keep
their time limit for the whole run).

HiGHS checks its time limit and the interrupt callbacks only at some points of branch-and-bound;
its root work (cut separation, the RENS and RINS sub-MIPs) can run on, past the limit by seconds,
and with presolve on by several times the limit (benchmarks/results/reservation.md, "RAS
reservations" and "Cuts, binary MIP, datacenter relaxation", has both). So :func:`run_bounded` runs ``highs.run()`` in a
forked child process that sends each improving solution and the dual bound back through a
pipe, and kills the child ``GRACE_S`` after the deadline if it has not returned by then; the
parent then has the last solution and bound the child reported (a bound HiGHS proved: it only
rises during the search). The interrupt callback still stops the child at the deadline in the
usual case. Without a deadline, or where ``fork`` is not available, HiGHS runs in-process.
"""

from __future__ import annotations

import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np

# HiGHS 1.14 presolve rules that substitute columns out of equality rows (bits of
# ``presolve_rule_off``: 8 free-column substitution, 9 doubleton equation, 12 aggregator). With
# all three on, it eliminates the T[r] equality rows wrongly and proves false optima: on the
# property test's instances 0-599 (433 feasible), 30 got "optimal" plans above CP-SAT's optimum
# (#78: 2.64 against 1.0, bound 2.64) and none with these three rules off (as with presolve off).
# Regression: tests/test_reservation_exact.py::test_bounds_below_every_feasible_plan_on_found_instances.
PRESOLVE_RULES_OFF = (1 << 8) | (1 << 9) | (1 << 12)
# Seconds the child may run past the deadline before it is killed.
GRACE_S = 0.5


@dataclass
class Bounded:
    """What a run returned: HiGHS's model status (``"Killed at the deadline"`` when the child
    was killed), the best solution (all columns; None if none), its objective and the dual bound
    (both as HiGHS reports them, offset included)."""

    status: str
    values: np.ndarray | None
    objective: float
    bound: float


def _in_process(highs) -> Bounded:
    highs.run()
    info = highs.getInfo()
    values = np.asarray(highs.getSolution().col_value) if info.primal_solution_status == 2 else None
    return Bounded(highs.modelStatusToString(highs.getModelStatus()), values,
                   float(info.objective_function_value), float(info.mip_dual_bound))


def reap(pid: int) -> None:
    """Kill the child if it still runs, and wait for it (its CPU then counts in os.times())."""
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def start_child(work: Callable[[Connection], None]) -> tuple[int, Connection]:
    """Fork a child process that runs ``work(send)`` (``send``: its end of a pipe) and exits;
    return the child's pid and the parent's receiving end. The caller reaps it (:func:`reap`).
    os.fork, not multiprocessing.Process: a bench cell runs in a daemonic worker, and
    multiprocessing refuses children to daemonic processes."""
    import multiprocessing

    receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
    pid = os.fork()
    if pid == 0:  # the child
        try:
            receive.close()
            work(send)
        finally:
            send.close()
            os._exit(0)
    send.close()
    return pid, receive


def run_bounded(highs, stop_at: float | None, grace: float = GRACE_S) -> Bounded:
    """``highs.run()`` on the MIP ``highs`` holds, returning by ``stop_at + grace`` (module
    docstring); ``stop_at`` is a ``time.perf_counter()`` value."""
    if stop_at is None or not can_fork():
        return _in_process(highs)

    def child(send: Connection) -> None:
        last = [-math.inf]

        def improving(event) -> None:
            out = event.data_out
            send.send(("solution", np.array(out.mip_solution, dtype=float), float(out.objective_function_value)))

        def progress(event) -> None:
            bound = float(event.data_out.mip_dual_bound)
            if bound > last[0]:
                last[0] = bound
                send.send(("bound", bound))

        highs.cbMipImprovingSolution += improving
        highs.cbMipInterrupt += progress
        send.send(("end", _in_process(highs)))

    pid, receive = start_child(child)
    result = Bounded("Killed at the deadline", None, math.inf, -math.inf)
    try:
        while True:
            wait = stop_at + grace - time.perf_counter()
            if wait <= 0 or not receive.poll(wait):
                break
            try:
                message = receive.recv()
            except EOFError:
                break
            if message[0] == "end":
                result = message[1]
                break
            if message[0] == "solution" and message[2] < result.objective:
                result.values, result.objective = message[1], message[2]
            elif message[0] == "bound":
                result.bound = max(result.bound, message[1])
    finally:
        reap(pid)
        receive.close()
    return result


def highs_solution(values: np.ndarray):
    """``values`` (every column) as a HiGHS start."""
    import highspy

    solution = highspy.HighsSolution()
    solution.col_value = values.tolist()
    solution.value_valid = True
    return solution


def bounded_mip(lp, stop_at: float | None, threads: int, seed: int, gap: float,
                start: np.ndarray | None = None) -> Bounded:
    """The MIP ``lp`` (a LinearProgram) by HiGHS, presolve off (HiGHS 1.14's proved false optima
    here: :data:`PRESOLVE_RULES_OFF`), to the relative ``gap``, from ``start`` when given, run by
    :func:`run_bounded` until ``stop_at`` (a ``time.perf_counter()`` value; None: no limit)."""
    from fleetplan.solvers import highs as runner
    from fleetplan.solvers.highs import interrupt_at

    left = None if stop_at is None else max(stop_at - time.perf_counter(), 0.01)
    highs = runner.new_highs(left, threads, seed)
    runner.pass_lp(highs, lp, "simplex")
    highs.setOptionValue("solver", "choose")
    highs.setOptionValue("presolve", "off")
    highs.setOptionValue("mip_rel_gap", gap)
    if start is not None:
        highs.setSolution(highs_solution(start))
    interrupt_at(highs, stop_at)
    return run_bounded(highs, stop_at)


def solved_relaxation(lp, stop_at: float | None, threads: int, seed: int, presolve_rules_off: bool = False):
    """``lp``'s LP relaxation (a LinearProgram; integrality ignored) by simplex until
    ``stop_at`` (a ``time.perf_counter()`` value; None: no limit): the solved ``Highs`` object,
    from which the caller reads what it needs (objective, point, row duals), or None when it
    stopped short of an optimum. ``presolve_rules_off``: without :data:`PRESOLVE_RULES_OFF`."""
    from fleetplan.solvers import highs as runner
    from fleetplan.solvers.highs import interrupt_at

    highs = runner.new_highs(None if stop_at is None else max(stop_at - time.perf_counter(), 0.01), threads, seed)
    runner.pass_lp(highs, lp, "simplex")
    highs.setOptionValue("solve_relaxation", True)
    if presolve_rules_off:
        highs.setOptionValue("presolve_rule_off", PRESOLVE_RULES_OFF)
    interrupt_at(highs, stop_at)
    highs.run()
    if highs.modelStatusToString(highs.getModelStatus()) != "Optimal" or not highs.getSolution().value_valid:
        return None
    return highs
