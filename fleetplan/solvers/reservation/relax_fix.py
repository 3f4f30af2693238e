"""Relax-and-fix: a warm start and a bound for the aggregated RAS MIP (MAST §2, "RAS formulates
a MIP").

The model (:mod:`fleetplan.models.reservation`) has two kinds of integer: the ML reservations'
datacenter binaries ``y[r, d]`` (compactness) and the server counts ``x``. With the valid
inequalities of :mod:`fleetplan.models.reservation.cuts` the hard part is the binaries; the
counts' LP relaxation is nearly integral once they are fixed. So, each step on the model with
those rows and within a share of the time:

1. the LP relaxation by dual simplex; its optimum is a bound, and its counts rounded up with
   the supply repaired (:func:`rounded_counts`) are the first candidate plan (above
   ``LARGE_COLUMNS`` columns, where simplex took more than 600 s at 10^6 servers, see
   :func:`_large` instead);
2. the *binary MIP*: the same model with the counts continuous and only ``y`` integer, solved
   by HiGHS (from the rounded plan) for ``Y_SHARE`` of the step's time. It is a relaxation of
   the model, so its proven dual bound is a bound on the model's optimum too;
3. the *count MIP*: ``y`` fixed to the binary MIP's (or, without one, to the datacenters the LP
   uses at all) and each count within ``WIDTH`` of the binary MIP's (or the LP's) fractional
   value, solved by HiGHS for the time left: the relaxation-enforced neighbourhood (RENS) of
   that point.

The best integer point (its auxiliaries re-read at their least values by
:func:`~fleetplan.models.reservation.full_solution`, so a fixed ``y`` whose datacenter ends up
empty costs nothing) and the best bound are returned. HiGHS runs with presolve off throughout
(with it on, its root cut loop ignored the interrupt: a 20 s limit ran 57 s of wall here), and
both MIPs run in a child process killed at the deadline (:mod:`.bounded`). At 10^5 servers x
200 reservations (benchmarks/results/reservation.md) a 150 s solve gave: LP 50,562 (49,581
without the cuts), binary MIP optimal at 50,794.6 (bound 50,782.3), count MIP 51,022.5, where
the LP's rounded plan was 51,956 and the greedy's 59,650.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from fleetplan.models.reservation import ReservationModel, full_solution, satisfies
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.reservation.bounded import bounded_mip, solved_relaxation

# Share of the time left that the three steps may use together.
SHARE = 0.5
# Share of the steps' time (from their start) after which the binary MIP stops.
Y_SHARE = 0.7
# Relative gap at which the binary MIP stops.
Y_GAP = 2e-4
# Counts may move this far beyond the floor and ceiling of the fractional point in the count MIP.
WIDTH = 1
# A datacenter binary counts as used by the LP above this value.
USED = 1e-6
# Above this many columns the model's LP is not solved (255 s of CPU by the interior point
# method at 10^6 servers, 157,057 columns; simplex did not finish in 600 s): the bound comes
# from the datacenter relaxation and the plan from the LP restricted to its support.
LARGE_COLUMNS = 60_000


@dataclasses.dataclass
class RelaxFix:
    """The best integer point found (every column; None if none) and the best proven bound on
    the model's objective (constant included; None if the LP was not solved)."""

    values: np.ndarray | None
    bound: float | None


def relax_and_fix(model: ReservationModel, deadline: Deadline, threads: int, seed: int, log: list[str],
                  lp=None, share: float = SHARE, arrays=None, start: np.ndarray | None = None,
                  large_columns: int = LARGE_COLUMNS, search_rounds: int | None = None) -> RelaxFix:
    """The three steps of the module docstring on ``lp`` (the model's LinearProgram, by default;
    the solvers pass it with :func:`~fleetplan.models.reservation.cuts.with_cuts` rows), within
    ``share`` of the time left; above ``large_columns`` columns, :func:`_large` instead (its
    neighbourhood search stopped after ``search_rounds`` sub-MIPs, when given)."""

    lp = model.lp if lp is None else lp
    ys, xs = lp.names["y"], lp.names["x"]
    budget = deadline.share(share)
    started = time.perf_counter()
    stop_at = None if budget is None else started + budget
    if lp.num_cols > large_columns:
        if arrays is None:
            log.append("relax-and-fix: the model is too large for its LP and no region was given")
            return RelaxFix(None, None)
        return _large(model, arrays, lp, stop_at, threads, seed, log, started, start, search_rounds)
    relaxation = solved_relaxation(lp, stop_at, threads, seed)
    if relaxation is None:
        log.append(f"relax-and-fix: the LP relaxation was not solved in time ({time.perf_counter() - started:.1f} s)")
        return RelaxFix(None, None)
    point = np.asarray(relaxation.getSolution().col_value)
    bound = relaxation.getInfo().objective_function_value + model.constant
    best = full_solution(model, rounded_counts(model, point[xs]))
    if not satisfies(model, best) or not satisfies(dataclasses.replace(model, lp=lp), best):
        best = None
    log.append(f"relax-and-fix: LP {bound:.6g}, rounded "
               + ("breaks a row" if best is None else f"{_objective(model, best):.6g}")
               + f" in {time.perf_counter() - started:.1f} s")
    centre, pattern = point, point[ys] > USED
    if ys.stop > ys.start:
        integrality = lp.integrality.copy()
        integrality[xs] = 0
        stop_y = None if stop_at is None else started + Y_SHARE * budget
        binary = bounded_mip(dataclasses.replace(lp, integrality=integrality), stop_y, threads, seed, Y_GAP, best)
        dual = binary.bound + model.constant
        if math.isfinite(dual) and dual > bound:
            bound = dual
        if binary.values is not None:
            centre = binary.values
            pattern = centre[ys] > 0.5
        log.append(f"relax-and-fix: binary MIP {binary.status}, {binary.objective + model.constant:.6g}, "
                   f"bound {dual:.6g}, in {time.perf_counter() - started:.1f} s")
    lower, upper = lp.col_lower.copy(), lp.col_upper.copy()
    lower[ys] = upper[ys] = pattern.astype(float)
    lower[xs] = np.maximum(np.floor(centre[xs] + 1e-9) - WIDTH, lp.col_lower[xs])
    upper[xs] = np.minimum(np.ceil(centre[xs] - 1e-9) + WIDTH, lp.col_upper[xs])
    hint = None
    rounded = full_solution(model, rounded_counts(model, centre[xs]))
    if satisfies(model, rounded):
        if best is None or lp.cost @ rounded < lp.cost @ best:
            best = rounded
        if np.all(rounded[ys] <= pattern):  # a start for the count MIP, its binaries as fixed there
            hint = rounded.copy()
            hint[ys] = pattern
    counts = bounded_mip(dataclasses.replace(lp, col_lower=lower, col_upper=upper), stop_at, threads, seed, 1e-4, hint)
    if counts.values is not None:
        values = full_solution(model, np.round(counts.values[xs]))
        log.append(f"relax-and-fix: count MIP ({int(pattern.sum())} of {pattern.size} datacenter binaries on) "
                   f"{_objective(model, values):.6g} in {time.perf_counter() - started:.1f} s")
        if satisfies(model, values) and (best is None or lp.cost @ values < lp.cost @ best):
            best = values
    else:
        log.append(f"relax-and-fix: the count MIP found no point in {time.perf_counter() - started:.1f} s")
    return RelaxFix(best, bound)


def _large(model: ReservationModel, arrays, lp, stop_at: float | None, threads: int, seed: int, log: list[str],
           started: float, start: np.ndarray | None, search_rounds: int | None = None) -> RelaxFix:
    """Above LARGE_COLUMNS: the LP of the datacenter relaxation
    (:mod:`fleetplan.models.reservation.relaxation`) gives a bound and the price of a server
    moved (its budget row's dual); the plan is the feasible ``start`` (all columns) improved by
    the large-neighbourhood search of :mod:`.neighbourhood` until ``stop_at`` (or
    ``search_rounds`` sub-MIPs; without either, until it improves nothing), whose Lagrangian
    pass (:mod:`.lagrangian`) gives the better bound when it finishes (at 10^6 servers, 600 s,
    medians of three: 1.30 % above it with one thread, 0.85 % with two; the greedy's plan was
    8.9 % above the relaxation's bound). Without a feasible start: the model's LP with every
    count fixed to 0 outside the keys whose (reservation, type, datacenter) the relaxation uses
    and today's keys, rounded up (at 10^6 servers it did not finish in the time)."""
    from fleetplan.models.reservation.relaxation import datacenter_relaxation

    relaxed = datacenter_relaxation(model, arrays)
    highs = solved_relaxation(relaxed, stop_at, threads, seed)
    if highs is None:
        log.append(f"relax-and-fix: the datacenter relaxation was not solved in {time.perf_counter() - started:.1f} s")
        return RelaxFix(None, None)
    bound = highs.getInfo().objective_function_value + model.constant
    point = np.asarray(highs.getSolution().col_value)[relaxed.names["x"]]
    log.append(f"relax-and-fix: datacenter relaxation ({relaxed.num_cols} columns) LP {bound:.6g} "
               f"in {time.perf_counter() - started:.1f} s")
    if start is not None and satisfies(model, start):
        from fleetplan.solvers.reservation.lagrangian import budget_price
        from fleetplan.solvers.reservation.neighbourhood import improve

        price = budget_price(relaxed, np.asarray(highs.getSolution().row_dual))
        searched = improve(model, arrays, start, stop_at, seed, log, rounds=search_rounds, price=price,
                           threads=threads)
        return RelaxFix(searched.values, bound if searched.bound is None else max(bound, searched.bound))
    groups = model.groups
    code = (model.key_res * arrays.num_types + groups.type[model.key_group]) * arrays.num_dcs + groups.dc[model.key_group]
    used_codes = np.unique(code)[point > USED]
    keep = np.isin(code, used_codes) | (model.key_c0 > 0)
    xs = lp.names["x"]
    if start is not None:
        keep |= start[xs] > 0
    upper = lp.col_upper.copy()
    upper[xs] = np.where(keep, upper[xs], 0.0)
    restricted = solved_relaxation(dataclasses.replace(lp, col_upper=upper), stop_at, threads, seed,
                                   presolve_rules_off=True)
    if restricted is None:
        log.append(f"relax-and-fix: the restricted LP ({int(keep.sum())} of {keep.size} counts free) was not "
                   f"solved in {time.perf_counter() - started:.1f} s")
        return RelaxFix(None, bound)
    values = full_solution(model, rounded_counts(model, np.asarray(restricted.getSolution().col_value)[xs]))
    feasible = satisfies(model, values)
    log.append(f"relax-and-fix: restricted LP ({int(keep.sum())} of {keep.size} counts free) "
               f"{restricted.getInfo().objective_function_value + model.constant:.6g}, rounded "
               + (f"{_objective(model, values):.6g}" if feasible else "breaks a row")
               + f" in {time.perf_counter() - started:.1f} s")
    return RelaxFix(values if feasible else None, bound)


def _objective(model: ReservationModel, values: np.ndarray) -> float:
    return float(model.lp.cost @ values + model.constant)


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


