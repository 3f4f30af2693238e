"""Relax-and-fix: a warm start for the aggregated RAS MIP (MAST §2, "RAS formulates a MIP").

The hard part of the aggregated model (:mod:`fleetplan.models.reservation`) is the ML
reservations' datacenter binaries ``y[r, d]`` (compactness). Relax-and-fix solves the LP
relaxation, fixes every ``y`` to 1 where the LP uses the datacenter at all (``y > 0``) and to 0
elsewhere, and solves what is left — integer counts only, whose LP relaxation is nearly
integral — as a MIP. The LP's own point is feasible for that restriction, so the sub-MIP is
feasible whenever the model's LP is (barring a sub-MIP with no integer point, which then gives
no start). The counts found are re-read with every auxiliary at its least value
(:func:`~fleetplan.models.reservation.full_solution`), so a fixed ``y`` whose datacenter ends up
unused costs nothing.

The LP's counts rounded (:func:`rounded_counts`) are the first candidate and the sub-MIP's
start. At 10^5 servers x 200 reservations (benchmarks/RESULTS.md, RAS section) the rounded
plan is 52,872 in 1.8 s of CPU, against 59,650 for the greedy in 2.7 s; the best bound known
there is 50,686.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from fleetplan.models.reservation import ReservationModel, full_solution
from fleetplan.solvers.deadline import Deadline

# Share of the time left that the LP relaxation and the sub-MIP may use together.
SHARE = 0.5
# A datacenter binary counts as used by the LP above this value.
USED = 1e-6


def _interrupt_at(highs, stop_at: float | None) -> None:
    """Stop simplex and branch-and-bound at ``stop_at`` (HiGHS checks its own limit only
    between phases)."""
    if stop_at is None:
        return

    def interrupt(event) -> None:
        if time.perf_counter() > stop_at:
            event.interrupt()

    highs.cbSimplexInterrupt += interrupt
    highs.cbMipInterrupt += interrupt


def relax_and_fix(model: ReservationModel, deadline: Deadline, threads: int, seed: int,
                  log: list[str]) -> np.ndarray | None:
    """Every column's value of the better of the rounded LP point and the sub-MIP's plan
    (module docstring), or None when the model has no datacenter binaries, its LP is not solved
    in time, or neither gives a point that keeps the model's rows."""
    from fleetplan.solvers import highs as runner

    lp = model.lp
    ys, xs = lp.names["y"], lp.names["x"]
    if ys.stop == ys.start:
        return None
    budget = deadline.share(SHARE)
    stop_at = None if budget is None else time.perf_counter() + budget
    started = time.perf_counter()
    relaxation = runner.new_highs(budget, threads, seed)
    runner.pass_lp(relaxation, lp, "simplex")
    relaxation.setOptionValue("solve_relaxation", True)
    _interrupt_at(relaxation, stop_at)
    relaxation.run()
    solution = relaxation.getSolution()
    if relaxation.modelStatusToString(relaxation.getModelStatus()) != "Optimal" or not solution.value_valid:
        log.append("relax-and-fix: the LP relaxation was not solved in time")
        return None
    point = np.asarray(solution.col_value)
    used = point[ys] > USED
    rounded = full_solution(model, rounded_counts(model, point[xs]))
    if not satisfies(model, rounded):
        rounded = None
    bound = relaxation.getInfo().objective_function_value + model.constant
    log.append(f"relax-and-fix: LP {bound:.6g}, rounded "
               + ("breaks a row" if rounded is None else f"{float(lp.cost @ rounded + model.constant):.6g}")
               + f" in {time.perf_counter() - started:.1f} s")
    lower, upper = lp.col_lower.copy(), lp.col_upper.copy()
    lower[ys] = upper[ys] = used.astype(float)
    restricted = dataclasses.replace(lp, col_lower=lower, col_upper=upper)
    left = None if stop_at is None else max(stop_at - time.perf_counter(), 0.01)
    sub = runner.new_highs(left, threads, seed)
    runner.pass_lp(sub, restricted, "simplex")
    sub.setOptionValue("solver", "choose")
    # Presolve off: with it on, HiGHS finds better counts here (51,353 against 52,824 in 20 s of
    # CPU at 10^5 servers) but its root cut loop ignores the interrupt (a solve under a 180 s
    # limit still ran after 6.5 minutes and was stopped), and the solver's time limit comes first.
    sub.setOptionValue("presolve", "off")
    sub.setOptionValue("mip_rel_gap", 1e-3)
    if rounded is not None:
        hint = rounded.copy()
        hint[ys] = used  # the restriction's binaries (a datacenter the rounding left empty stays on)
        sub.setSolution(_highs_solution(hint))
    _interrupt_at(sub, stop_at)
    sub.run()
    found = sub.getSolution()
    if not found.value_valid:
        log.append(f"relax-and-fix: the sub-MIP ({int(used.sum())} of {used.size} datacenter binaries "
                   f"on) found no point in {time.perf_counter() - started:.1f} s")
        return rounded
    values = full_solution(model, np.round(np.asarray(found.col_value)[xs]))
    log.append(f"relax-and-fix: sub-MIP ({int(used.sum())} of {used.size} datacenter binaries on) "
               f"{float(lp.cost @ values + model.constant):.6g} in {time.perf_counter() - started:.1f} s")
    return values if rounded is None or lp.cost @ values < lp.cost @ rounded else rounded


def satisfies(model: ReservationModel, values: np.ndarray, tolerance: float = 1e-6) -> bool:
    """Whether ``values`` keep every row and column bound of the model."""
    lp = model.lp
    activity = lp.matrix @ values
    slack = tolerance * np.maximum(1.0, np.abs(activity))
    return bool(np.all(activity >= lp.row_lower - slack) and np.all(activity <= lp.row_upper + slack)
                and np.all(values >= lp.col_lower - tolerance) and np.all(values <= lp.col_upper + tolerance))


def rounded_counts(model: ReservationModel, x: np.ndarray) -> np.ndarray:
    """The LP's counts rounded up — which keeps every guarantee, request and move row, since
    they only gain — then, in a group whose supply that exceeds, the keys rounded up most taken
    back down one server each until the supply holds. The judge decides if the result is feasible."""
    counts = np.ceil(x - 1e-9)
    over = np.bincount(model.key_group, weights=counts, minlength=model.groups.available.size) \
        - model.groups.available
    raised = counts - x
    for group in np.flatnonzero(over > 0).tolist():
        keys = np.flatnonzero((model.key_group == group) & (raised > 1e-9))
        keys = keys[np.argsort(-raised[keys], kind="stable")][:int(over[group])]
        counts[keys] -= 1
    return counts


def _highs_solution(values: np.ndarray):
    import highspy

    solution = highspy.HighsSolution()
    solution.col_value = values.tolist()
    solution.value_valid = True
    return solution
