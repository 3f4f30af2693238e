"""Building and solving the horizon model: the LP relaxation first (a proven bound, and its
orders rounded up as a starting schedule), then the MIP to the gap asked; and what to say when
no schedule exists (which period, which cause)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.planning.horizon.model import HorizonModel, build_horizon_model, usable_matrix
from fleetplan.planning.horizon.spec import HorizonSpec, Scenario

# Stop the search once the schedule is proven within 1% of the cheapest: closing the last tenth of a
# percent cost 65 s instead of 2 s at 300 jobs, 8 quarters and 3 scenarios (benchmarks/results/
# planning.md). The status says optimal only when the gap closes.
DEFAULT_GAP = 0.01
PROVEN_GAP = 1e-6


@dataclass
class Solved:
    """One solve of the horizon model: status, the model, its values, cost and proven bound."""

    status: str
    model: HorizonModel | None
    values: np.ndarray | None
    cost: float | None
    bound: float | None
    log: list[str]
    solve_s: float


def periods_for(instance: Any, spec: HorizonSpec, scenarios: list[Scenario]) -> Any:
    """The kind's side of the horizon model for ``instance`` (its planning registration's
    ``horizon_path``)."""
    from fleetplan.planning.kinds import planning_kind

    return planning_kind(instance.kind).horizon_periods(instance, spec, scenarios)


def solve_schedule(spec: HorizonSpec, kind: Any, probabilities: Sequence[float], shared_until: int,
                   deadline: float | None, threads: int, seed: int, mip_rel_gap: float, role: str = "restriction",
                   fixed_orders: Any = None) -> Solved:
    """Build and solve the horizon model: its status, values, cost (the constant included) and
    proven bound.

    The LP relaxation is solved first: its optimum is a proven bound (and its infeasibility
    proves the MIP's), and its orders rounded up, completed by the model with those orders
    fixed, give HiGHS a starting schedule — on large horizons the branch and bound then only
    has to prove it within the gap, instead of finding it first."""
    from fleetplan.planning.sizing.mip import solve_sizing_mip

    model = build_horizon_model(spec, kind, probabilities, shared_until, role=role, fixed_orders=fixed_orders)
    log: list[str] = []
    relaxed, start, relaxed_s = _relaxation_and_start(model, kind.integer, deadline, threads, seed)
    if relaxed["status"] == "infeasible":
        return Solved("infeasible", model, None, None, None, ["horizon LP relaxation: infeasible"], relaxed_s)
    lp_bound = None if relaxed["objective"] is None else float(relaxed["objective"]) + model.constant
    if kind.integer:
        log.append("horizon start: the LP's orders rounded up " + ("complete a schedule" if start is not None
                                                                    else "complete none"))
    outcome = solve_sizing_mip(model.lp, _seconds(deadline), threads, seed, mip_rel_gap, start=start)
    log += [line.replace("sizing MIP", "horizon MIP") for line in outcome["log"]]
    values = outcome["values"]
    cost = None if values is None else float(outcome["objective"]) + model.constant
    bound = None if outcome["bound"] is None else float(outcome["bound"]) + model.constant
    if lp_bound is not None and (bound is None or lp_bound > bound):
        bound = lp_bound
    return Solved(outcome["status"], model, values, cost, bound, log, float(outcome["solve_s"]) + relaxed_s)


def _relaxation_and_start(model: HorizonModel, integer: bool, deadline: float | None, threads: int,
                          seed: int) -> tuple[dict[str, Any], np.ndarray | None, float]:
    """The LP relaxation's outcome and, for whole units, a starting schedule: every order rounded
    up (to its minimum where it has one) and the rest re-solved from the relaxation's basis with
    the orders fixed (the fixed orders install whole units, so an LP completes the schedule unless
    a gate — a type a purchase opens — comes out fractional; then the MIP does). None when that
    is infeasible (a budget the rounding breaks)."""
    from fleetplan.planning.sizing.mip import solve_sizing_mip
    from fleetplan.solvers import highs as runner

    highs = runner.new_highs(_seconds(deadline), threads, seed)
    runner.pass_lp(highs, _relaxation(model.lp), "simplex")
    first = runner.run(highs)
    relaxed = {"status": first.status, "objective": first.objective}
    if first.values is None or not integer:
        return relaxed, None, first.solve_s
    lower, upper = _rounded_orders(model, first.values)
    changed = np.flatnonzero((lower != model.lp.col_lower) | (upper != model.lp.col_upper))
    highs.changeColsBounds(len(changed), changed.astype(np.int32), lower[changed], upper[changed])
    second = runner.run(highs)
    solve_s = first.solve_s + second.solve_s
    values = second.values
    integral = np.flatnonzero(model.lp.integrality)
    if values is not None and np.all(np.abs(values[integral] - np.rint(values[integral])) <= 1e-6):
        values = values.copy()
        values[integral] = np.rint(values[integral])
        return relaxed, values, solve_s
    if second.status == "infeasible":
        return relaxed, None, solve_s
    fixed = dataclasses.replace(model.lp, col_lower=lower, col_upper=upper)
    return relaxed, solve_sizing_mip(fixed, _seconds(deadline), threads, seed, 1e-2)["values"], solve_s


def _rounded_orders(model: HorizonModel, relaxed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column bounds with every order fixed to the relaxation's rounded up (and its minimum)."""
    lower, upper = model.lp.col_lower.copy(), model.lp.col_upper.copy()
    for index in np.ndindex(model.order_column.shape):
        column = model.order_column[index]
        if column < 0:
            continue
        value = min(math.ceil(relaxed[column] - 1e-6), upper[column])
        binary = model.binary_column[index]
        if binary >= 0:
            # its two rows: order - minimum * y >= 0 and order - most * y <= 0
            minimum = float(np.abs(model.lp.matrix[:, binary].data).min())
            value = 0 if value <= 0 else max(value, math.ceil(minimum - 1e-9))
            lower[binary] = upper[binary] = float(value > 0)
        lower[column] = upper[column] = max(float(value), lower[column])
    return lower, np.maximum(upper, lower)


def _seconds(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.perf_counter(), 0.01)


def _relaxation(lp: Any) -> Any:
    return dataclasses.replace(lp, integrality=None)


def check_budgets(spec: HorizonSpec, kind: Any) -> None:
    """A budget that covers opex must at least pay the existing fleet's."""
    if spec.budget_covers != "capex+opex":
        return
    for t in range(spec.periods):
        budget = spec.budget_of(t + 1)
        if budget is not None and kind.existing_opex(t) > budget + 1e-9:
            field_name = f"budget[{t}]" if isinstance(spec.budget, list) else "budget"
            raise InstanceError(field_name, f"{budget:g} cannot cover the existing fleet's opex in {spec.period_name} "
                                            f"{t + 1} ({kind.existing_opex(t):g})")


def explain_infeasible(spec: HorizonSpec, kind: Any, scenarios: list[Scenario]) -> str:
    """Which period cannot be served and why: a period that no purchase arriving in time can
    serve (with its shortfall), else the budgets."""
    from fleetplan.planning.horizon.model import order_upper
    from fleetplan.planning.sizing.mip import solve_sizing_mip

    T = spec.periods
    usable = usable_matrix(spec, kind.items)
    upper = order_upper(spec, kind, len(scenarios))
    for t in range(T):
        for s, scenario in enumerate(scenarios):
            add_cap = (usable[:, :, t] * upper).sum(axis=1)
            block = kind.block(t, s, add_cap, "relaxation")
            alone = solve_sizing_mip(block.lp, 60.0, 1, 0, 1e-6)
            if alone["values"] is None and alone["status"] == "infeasible":
                where = f"{spec.period_name} {t + 1}" + (f" ({scenario.name})" if len(scenarios) > 1 else "")
                shortfall = kind.shortfall(t, s, add_cap) if hasattr(kind, "shortfall") else ""
                return (f"{where} cannot be served: even every unit that can arrive by then "
                        f"({', '.join(f'{c:g} {n}' for n, c in zip(kind.items, add_cap, strict=True))} on top of the "
                        f"existing fleet) misses its targets{shortfall}")
    if spec.budget is not None:
        # built only when a budget may be the cause: every period alone was servable
        upper_model = build_horizon_model(spec.model_copy(update={"budget": None}), kind,
                                          [s.probability for s in scenarios], spec.shared_until())
        unbudgeted = solve_sizing_mip(upper_model.lp, 60.0, 1, 0, 1e-4)
        if unbudgeted["values"] is not None:
            return ("the budgets cannot pay for a schedule that meets every period's targets (without them one "
                    f"costs {unbudgeted['objective'] + upper_model.constant:,.6g})")
    return "no schedule meets every period's targets together (each period alone can be served)"
