"""Feasibility first for the RAS heuristics (MAST §2): a start from the LP
relaxation, and a repair of guarantee shortfalls by a small MIP.

The climb of :mod:`fleetplan.solvers.reservation.heuristics` lowers a cost that is the judge's
objective plus a large penalty per RRU short, so it repairs before it improves — but by single
block moves, and a repair that needs several reservations to trade servers at once (one gives
up a fault domain's servers the other needs, and takes another domain's) is a valley it cannot
cross: on 16 tiny regions with a feasible plan the climb found none on 6. Here:

* :func:`relaxation_start`: the aggregated model's LP relaxation (with the valid inequalities
  of :mod:`fleetplan.models.reservation.cuts`), its counts rounded up with the supply repaired
  (:func:`~fleetplan.solvers.reservation.relax_fix.rounded_counts`): a plan near the LP bound
  in the time of one LP (timed at 10^5 servers in benchmarks/results/reservation.md, "Cuts, binary
  MIP, datacenter relaxation"). Skipped above ``LARGE_COLUMNS``, where that LP takes minutes.
* :func:`repair`: the *elastic* model (a shortfall per reservation; total shortfall first, then
  the servers moved) solved exactly, first with only the short reservations' counts free and
  the others fixed where they are (a small MIP: the free pool is usually enough), then, if
  that leaves a shortfall, with every count free. An optimum with no shortfall is a feasible
  plan; an optimum with a shortfall *proves* the region infeasible within the disruption budget
  (the elastic model is a relaxation only of the guarantee rows, which it prices), and the
  message names the reservation and the RRU it is short.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fleetplan.models.reservation import build, full_solution, satisfies
from fleetplan.models.reservation.cuts import with_cuts
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.reservation.relax_fix import LARGE_COLUMNS, rounded_counts

# Per server moved in the repair's objective: far below one RRU of shortfall, so the repair
# buys the guarantee first and moves as few servers as that allows.
MOVE_WEIGHT = 1e-4
# A shortfall below this (RRU) is rounding.
SHORT = 1e-6


@dataclasses.dataclass
class Repair:
    """What :func:`repair` found: ``status`` feasible (the state now holds a plan without
    shortfall), infeasible (proven: no plan within the budget), time_limit (stopped with a
    shortfall left) or unchanged (nothing was short); ``message`` says which reservation is
    short and by how much."""

    status: str
    message: str = ""


def set_counts(state, keys_res: np.ndarray, keys_group: np.ndarray, x: np.ndarray) -> None:
    """Load counts ``x`` of the model's keys into a :class:`RasState` (its totals recomputed)."""
    counts = np.zeros_like(state.x)
    counts[keys_res, keys_group] = np.round(x).astype(counts.dtype)
    state.x = counts
    state.free = state.groups.available - counts.sum(axis=0)
    state.moved = state.forced + int(np.maximum(0, state.c0 - counts).sum())
    state._totals()


def _highs_mip(lp, deadline: Deadline, threads: int, seed: int, start: np.ndarray | None, log: list[str],
               name: str):
    from fleetplan.solvers.reservation.bounded import bounded_mip

    stop_at = None if deadline.time_limit is None else deadline.started + deadline.time_limit
    ran = bounded_mip(lp, stop_at, threads, seed, 1e-9, start)  # presolve off: it proved false optima here
    log.append(f"repair ({name}): HiGHS {ran.status}")
    return ran


def repair(state, deadline: Deadline, threads: int, seed: int, log: list[str]) -> Repair:
    """Make the state's plan keep every guarantee (module docstring); the state changes only
    when a plan without shortfall is found."""
    from fleetplan.solvers.reservation.state import shortfalls

    short = shortfalls(state)
    arrays = state.arrays
    if short.max(initial=0.0) <= SHORT and state.moved <= arrays.budget:
        return Repair("unchanged")
    model = build(arrays, state.groups, elastic=True)
    if model.forced > arrays.budget:
        return Repair("infeasible", f"disruption budget: {model.forced} servers sit today in reservations that "
                                    f"do not accept their type and must move, more than the budget of "
                                    f"{arrays.budget:.0f}")
    lp = model.lp
    cost = lp.cost.copy()
    cost[lp.names["m"]] = MOVE_WEIGHT
    current = state.x[model.key_res, model.key_group].astype(float)
    start = full_solution(model, current)
    short_res = np.flatnonzero(short > SHORT)
    outcome, last = None, ""
    for name, free_keys in (("the short reservations", np.isin(model.key_res, short_res)),
                            ("every reservation", np.ones(model.num_keys, dtype=bool))):
        if deadline.expired():
            break
        if not free_keys.any():
            continue
        lower, upper = lp.col_lower.copy(), lp.col_upper.copy()
        xs = lp.names["x"]
        fixed = ~free_keys
        lower[xs][fixed] = current[fixed]
        upper[xs][fixed] = current[fixed]
        sub = dataclasses.replace(lp, cost=cost, col_lower=lower, col_upper=upper)
        outcome, last = _highs_mip(sub, deadline, threads, seed, start, log, name), name
        if outcome.values is None:
            continue
        shortfall = outcome.values[lp.names["s"]]
        if shortfall.sum() <= SHORT * max(1, shortfall.size):
            set_counts(state, model.key_res, model.key_group, outcome.values[xs])
            log.append(f"repair: every guarantee holds after the MIP over {name} "
                       f"({int(free_keys.sum())} of {model.num_keys} counts free), {state.moved} servers moved")
            return Repair("feasible")
    if outcome is not None and outcome.values is None and outcome.status == "Infeasible" \
            and last == "every reservation":
        # The elastic model prices every guarantee, so only the budget row can make it infeasible.
        return Repair("infeasible", f"no assignment keeps the disruption budget of {arrays.budget:.0f} servers "
                                    f"(largest shortfall today {short.max():.6g} RRU, reservation "
                                    f"'{arrays.res_ids[int(np.argmax(short))]}' short by that much)")
    if outcome is None or outcome.values is None:
        return Repair("time_limit", f"no plan keeps every guarantee: the repair found none before the time "
                                    f"limit (largest shortfall today {short.max():.6g} RRU, reservation "
                                    f"'{arrays.res_ids[int(np.argmax(short))]}')")
    shortfall = outcome.values[lp.names["s"]]
    r = int(np.argmax(shortfall))
    budget = f" within the disruption budget of {arrays.budget:.0f} servers" if np.isfinite(arrays.budget) else ""
    if outcome.status == "Optimal" and last == "every reservation":
        return Repair("infeasible", f"reservation '{arrays.res_ids[r]}' is short by {shortfall[r]:.6g} RRU at "
                                    f"best{budget} (all reservations: {shortfall.sum():.6g} RRU)")
    return Repair("time_limit", f"no plan keeps every guarantee before the time limit: reservation "
                                f"'{arrays.res_ids[r]}' is short by {shortfall[r]:.6g} RRU in the best plan "
                                f"found{budget}")


def relaxation_start(state, deadline: Deadline, threads: int, seed: int, log: list[str]) -> bool:
    """Replace the state's plan with the LP relaxation's rounded counts when they keep every row
    and cost less (the climb's cost: objective plus shortfall penalty); returns whether it did."""
    from fleetplan.solvers.reservation.bounded import solved_relaxation
    from fleetplan.solvers.reservation.state import penalty

    arrays = state.arrays
    model = build(arrays, state.groups)
    if model.lp.num_cols > LARGE_COLUMNS:
        log.append(f"relaxation start: skipped ({model.lp.num_cols} columns, above {LARGE_COLUMNS})")
        return False
    lp = with_cuts(model, arrays)
    remaining = deadline.remaining()
    highs = solved_relaxation(lp, None if remaining is None else deadline.started + deadline.time_limit, threads, seed)
    if highs is None:
        log.append("relaxation start: the LP relaxation was not solved in time")
        return False
    bound = highs.getInfo().objective_function_value + model.constant
    point = np.asarray(highs.getSolution().col_value)
    counts = rounded_counts(model, point[lp.names["x"]])
    values = full_solution(model, counts)
    if not satisfies(model, values):
        log.append(f"relaxation start: LP {bound:.6g}; its rounded counts break a row, not used")
        return False
    before = state.objective() + penalty(state)
    saved = (state.x.copy(), state.free.copy(), state.moved)
    set_counts(state, model.key_res, model.key_group, counts)
    after = state.objective() + penalty(state)
    if after >= before:
        state.x, state.free, state.moved = saved
        state._totals()
        log.append(f"relaxation start: LP {bound:.6g}, rounded {after:.6g}, no better than {before:.6g}; not used")
        return False
    log.append(f"relaxation start: LP {bound:.6g} (a bound on the optimum), rounded plan {after:.6g} "
               f"(from {before:.6g})")
    state.lp_bound = bound
    return True
