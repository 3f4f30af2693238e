"""Large-neighbourhood search for the aggregated RAS MIP (MAST §2) where the whole model is too
large for HiGHS: the primal side of ``mip-highs`` above ``LARGE_COLUMNS`` columns (issue 27
item 3).

At 10^6 servers x 1,000 reservations the model's LP alone takes minutes, so the plan there was
the greedy's, 8.9 % above the datacenter relaxation's bound. The reservations are coupled only
by the supply rows (a third of the servers were free in that region) and the disruption budget
(all of it used), so most of what the greedy leaves is inside a reservation — its buffer over
its fault domains, its storage ratio, its datacenters — and a small group of reservations
re-planned together, the others fixed, recovers it. :func:`improve` takes the reservations of a
random order ``SIZE`` at a time; for each group it solves the sub-model's LP, then the sub-MIP
within the floor and ceiling of that LP's counts (the relaxation-induced neighbourhood, RENS;
the whole sub-MIP from the current plan found no improvement in 5-10 s at 10^6, RENS one in
about a second) in a child process killed at its deadline (:mod:`.bounded`), and keeps the
result when it keeps every row and costs less. After each such pass, a pass over the ML
reservations one at a time: the reservation's whole sub-MIP (not RENS: the group LP's floor and
ceiling keep a reservation in the datacenters its fractional binaries chose), the current plan
as its start (a Lagrangian bound per reservation put 92 % of the room the groups' local optimum
left on the ML ones), which took 316,205 to 315,077 in 134 s at 10^6 (297 reservations, 128
improved; measured with the moves priced, not the budget row). The
plan never gets worse than the start. The passes alternate (measured: choosing the kind that gained
more per second in its last pass ended at the same place, 2.10 %, as it chose groups again).
Measured at 10^6 servers (benchmarks/results/reservation.md, "RAS at 10^6: what the primal
side tried"): in ``mip-highs`` with a 600 s limit, groups alone went from the greedy's 339,095
to 316,053 in 569 s, 2.25 % above the datacenter relaxation's bound (one pass, about 150 s, does
most of it); with the passes of single ML reservations, to 315,534 (2.09 %).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from fleetplan.models.reservation import ReservationModel, full_solution
from fleetplan.solvers.reservation.bounded import bounded_mip

# Reservations re-planned together: at 10^6 servers a RENS sub-MIP of 20 took about a second,
# one of 50 took 22 s.
SIZE = 20
# Seconds a sub-MIP may run (it keeps its best point when stopped).
PER_S = 3.0
# Seconds a single reservation's whole sub-MIP may run (it starts from the current plan).
SINGLE_S = 1.5
# Relative gap at which a sub-MIP stops.
SUB_GAP = 1e-4


def column_reservation(model: ReservationModel, arrays) -> np.ndarray:
    """The reservation each column of ``model.lp`` belongs to (every column has one: counts,
    moves, totals, shortfalls, spread, datacenter binaries and ratio terms are per reservation)."""
    lp = model.lp
    owner = np.full(lp.num_cols, -1, dtype=np.int64)
    owner[lp.names["x"]] = model.key_res
    owner[lp.names["m"]] = model.key_res[model.key_c0 > 0]
    owner[lp.names["T"]] = np.arange(arrays.num_reservations)
    owner[lp.names["s"]] = np.arange(_size(lp, "s"))  # elastic models only
    if _size(lp, "z"):
        owner[lp.names["z"]] = np.flatnonzero(~arrays.res_ml)
    key_dc = model.groups.dc[model.key_group]
    for name, chosen in (("y", arrays.res_ml), ("e", ~np.isnan(arrays.res_ratio))):
        if _size(lp, name):  # one column per (reservation, datacenter) pair, in build's order
            keys = np.flatnonzero(chosen[model.key_res])
            pairs = np.unique(model.key_res[keys] * arrays.num_dcs + key_dc[keys])
            owner[lp.names[name]] = pairs // arrays.num_dcs
    return owner


def _size(lp, name: str) -> int:
    block = lp.names[name]
    return block.stop - block.start


def improve(model: ReservationModel, arrays, values: np.ndarray, stop_at: float | None, seed: int,
            log: list[str], size: int = SIZE, per: float = PER_S, rounds: int | None = None) -> np.ndarray:
    """A plan (every column) no worse than ``values`` (a feasible point of the model), improved
    by the search of the module docstring until ``stop_at`` (``time.perf_counter()``) or, when
    given, ``rounds`` sub-MIPs (groups and single reservations alike)."""
    from fleetplan.models.reservation import satisfies

    if stop_at is None and rounds is None:
        raise ValueError("improve needs a deadline or a number of rounds")
    started = time.perf_counter()
    lp = model.lp
    owner = column_reservation(model, arrays)
    csc = lp.matrix.tocsc()
    rng = np.random.default_rng(seed)
    best = float(lp.cost @ values)
    first = best
    order = np.zeros(0, dtype=np.int64)
    ml = np.flatnonzero(arrays.res_ml)
    single = False
    pass_best, pass_started = best, time.perf_counter()
    tried = kept = singles = kept_singles = 0
    while (stop_at is None or time.perf_counter() < stop_at) and (rounds is None or tried < rounds):
        if order.size == 0:
            if tried:  # a pass just ended
                log.append(f"  pass of {'single ML reservations' if single else 'groups'}: {pass_best + model.constant:.6g}"
                           f" -> {best + model.constant:.6g} in {time.perf_counter() - pass_started:.1f} s")
                pass_best, pass_started = best, time.perf_counter()
            single = not single and tried > 0 and ml.size > 0  # groups first, then the kinds in turn
            order = rng.permutation(ml) if single else rng.permutation(arrays.num_reservations)
        step = 1 if single else size
        chosen, order = order[:step], order[step:]
        tried += 1
        singles += single
        cols, sub = _restricted(lp, csc, values, np.isin(owner, chosen))
        found = _whole(sub, values[cols], stop_at, SINGLE_S, seed) if single else _rens(sub, stop_at, per, seed)
        if found is None:
            continue
        trial = values.copy()
        trial[cols] = found
        trial = full_solution(model, np.round(trial[lp.names["x"]]))
        objective = float(lp.cost @ trial)
        if objective < best - 1e-9 and satisfies(model, trial):
            values, best = trial, objective
            kept += 1
            kept_singles += single
    log.append(f"neighbourhood search: {tried - singles} groups of {size} reservations, {kept - kept_singles} "
               f"improved; {singles} single ML reservations, {kept_singles} improved; "
               f"{first + model.constant:.6g} -> {best + model.constant:.6g} in {time.perf_counter() - started:.1f} s")
    return values


def _restricted(lp, csc, values: np.ndarray, free: np.ndarray):
    """The model with the columns not ``free`` fixed at ``values``: the free columns and the
    rows that hold one, the fixed columns' share moved into the row bounds."""
    from fleetplan.models.linear import LinearProgram

    cols, fixed = np.flatnonzero(free), np.flatnonzero(~free)
    matrix = csc[:, cols].tocsr()
    rows = np.flatnonzero(np.diff(matrix.indptr) > 0)
    constant = csc[:, fixed] @ values[fixed]
    sub = LinearProgram(cost=lp.cost[cols].copy(), matrix=matrix[rows],
                        row_lower=lp.row_lower[rows] - constant[rows], row_upper=lp.row_upper[rows] - constant[rows],
                        col_lower=lp.col_lower[cols].copy(), col_upper=lp.col_upper[cols].copy(),
                        integrality=lp.integrality[cols].copy())
    return cols, sub


def _whole(sub, start: np.ndarray, stop_at: float | None, per: float, seed: int) -> np.ndarray | None:
    """The sub-model's MIP from ``start`` (its columns of the current plan, a feasible point);
    its best point, or None."""
    left = per if stop_at is None else min(per, max(stop_at - time.perf_counter(), 0.01))
    return bounded_mip(sub, time.perf_counter() + left, 1, seed, SUB_GAP, start).values


def _rens(sub, stop_at: float | None, per: float, seed: int) -> np.ndarray | None:
    """The sub-model's LP, then its MIP with every integer column within the floor and ceiling
    of the LP's value; the MIP's best point, or None."""
    from fleetplan.solvers import highs as runner
    from fleetplan.solvers.highs import interrupt_at

    def left() -> float:
        return per if stop_at is None else min(per, max(stop_at - time.perf_counter(), 0.01))

    linear = runner.new_highs(left(), 1, seed)
    runner.pass_lp(linear, sub, "simplex")
    linear.setOptionValue("solve_relaxation", True)
    interrupt_at(linear, stop_at)
    linear.run()
    solution = linear.getSolution()
    if linear.modelStatusToString(linear.getModelStatus()) != "Optimal" or not solution.value_valid:
        return None
    point = np.asarray(solution.col_value)
    integer = sub.integrality > 0
    lower, upper = sub.col_lower.copy(), sub.col_upper.copy()
    lower[integer] = np.maximum(np.floor(point[integer] + 1e-9), lower[integer])
    upper[integer] = np.minimum(np.ceil(point[integer] - 1e-9), upper[integer])
    return bounded_mip(dataclasses.replace(sub, col_lower=lower, col_upper=upper), time.perf_counter() + left(),
                       1, seed, SUB_GAP).values
