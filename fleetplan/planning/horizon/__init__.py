"""Planning over time: a purchase schedule over periods, with lead times, lifetimes, budgets,
falling prices, retirements and demand scenarios.

``plan_horizon(instance, horizon)`` builds one copy of the kind's sizing model per period and
scenario, links them by the installed base and minimises the discounted cost
(:mod:`.model`), solves it exactly with HiGHS (its bound and gap), then judges every period's
plan on that period's instance with the kind's judge. With scenarios it also reports the value
of the stochastic solution and the expected value of perfect information (:mod:`.stochastic`);
with ``marginal=True`` what one more unit of budget per period and one period less lead time
are worth, by re-solving.

>>> import fleetplan
>>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
>>> horizon = {"periods": 3, "targets": ["min_time_share>=0.6"], "demand": {"multipliers": [1, 2, 2]},
...            "buy": {"k80": {"price": 1.0, "lead_time": 1}}}
>>> result = plan_horizon(instance, horizon)
>>> result.status, result.cost, result.orders()
('optimal', 2.0, {('base', 1, 'k80'): 2.0})
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.planning.horizon.model import (
    HorizonModel,
    block_values,
    build_horizon_model,
    usable_matrix,
)
from fleetplan.planning.horizon.spec import HorizonSpec, Scenario, load_horizon, parse_horizon
from fleetplan.solvers.base import relative_gap

# Stop the search once the schedule is proven within 1% of the cheapest: closing the last tenth of a
# percent cost 65 s instead of 2 s at 300 jobs, 8 quarters and 3 scenarios (benchmarks/results/
# planning.md). The status says optimal only when the gap closes.
DEFAULT_GAP = 0.01
PROVEN_GAP = 1e-6

def horizon_kinds() -> list[str]:
    """The kinds planning over time knows (those whose planning registration names a horizon side)."""
    from fleetplan.planning.kinds import PLANNING_KINDS

    return [name for name, entry in PLANNING_KINDS.items() if entry.horizon_path]


@dataclass
class HorizonResult:
    """What :func:`plan_horizon` returns.

    ``cost`` is the expected discounted total (capex + opex - salvage, the existing fleet's opex
    included), ``bound`` a proven lower bound on it, ``gap`` their distance. ``schedule`` has a
    row per scenario, period and item (what is ordered, arrives, retires, is installed, and at
    what price); ``periods`` a row per scenario and period (capex, opex, budget, the judge's
    metrics and whether each target holds). ``stochastic`` (with scenarios) holds the
    recourse problem's cost, the wait-and-see and mean-value costs, VSS and EVPI; ``marginal``
    the prices that bind.
    """

    status: str
    kind: str
    message: str = ""
    cost: float | None = None
    bound: float | None = None
    gap: float | None = None
    currency: str = ""
    period_name: str = "period"
    unit: str = ""
    items: list[str] = field(default_factory=list)
    scenarios: list[dict[str, Any]] = field(default_factory=list)
    mode: str = "deterministic"
    shared_until: int = 0
    schedule: list[dict[str, Any]] = field(default_factory=list)
    periods: list[dict[str, Any]] = field(default_factory=list)
    stochastic: dict[str, Any] | None = None
    marginal: dict[str, Any] | None = None
    plans: dict[tuple[str, int], Any] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0

    @property
    def success(self) -> bool:
        return self.status in ("optimal", "feasible", "time_limit") and bool(self.schedule)

    def orders(self) -> dict[tuple[str, int, str], float]:
        """``{(scenario, period, item): units}`` for every order placed."""
        return {(row["scenario"], row["period"], row["item"]): row["ordered"] for row in self.schedule
                if row["ordered"] > 0}

    def table(self) -> list[dict[str, Any]]:
        """The schedule as a list of flat rows (``pandas.DataFrame(result.table())``)."""
        return [dict(row) for row in self.schedule]

    def to_dict(self) -> dict[str, Any]:
        def number(value: float | None) -> float | None:
            return value if value is not None and math.isfinite(value) else None

        return {"kind": self.kind, "status": self.status, "message": self.message, "cost": number(self.cost),
                "bound": number(self.bound), "gap": number(self.gap), "currency": self.currency,
                "period_name": self.period_name, "unit": self.unit, "items": self.items,
                "scenarios": self.scenarios, "mode": self.mode, "shared_until": self.shared_until,
                "schedule": self.schedule, "periods": self.periods, "stochastic": self.stochastic,
                "marginal": self.marginal, "log": self.log, "stats": self.stats, "wall_s": self.wall_s}


@dataclass
class _Solved:
    status: str
    model: HorizonModel | None
    values: np.ndarray | None
    cost: float | None
    bound: float | None
    log: list[str]
    solve_s: float


def plan_horizon(instance: Any, horizon: Any, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
                 mip_rel_gap: float = DEFAULT_GAP, stochastic: bool = True, marginal: bool = False,
                 policy: str | None = "default") -> HorizonResult:
    """The cheapest purchase schedule over the horizon that meets every period's targets.

    Parameters
    ----------
    instance : the base instance (allocation), or a dict in its file's layout; its fleet is the
        existing fleet in period 1, its jobs the base demand
    horizon : a :class:`HorizonSpec`, a dict in the horizon file's layout, or a path to one
    time_limit : seconds for everything (the main solve gets what the extra solves leave)
    mip_rel_gap : the relative gap between the schedule's cost and its proven bound at which the
        search stops (default 1%); the status is ``optimal`` only when the gap closes (1e-6),
        ``feasible`` with the gap otherwise
    stochastic : with scenarios (two-stage), also solve the wait-and-see and mean-value problems
        for VSS and EVPI
    marginal : re-solve with one more unit of budget per binding period and one period less
        lead time per item
    policy : allocation: the policy the planner runs (``"default"``: the kind's default,
        max-min fairness; None: no check). Every period's instance is also solved by it and
        judged: the schedule guarantees that *an* allocation meets the targets, and each period
        row says (``policy_checks``) whether the policy's own does; a miss is named in the message

    Returns a :class:`HorizonResult`; every period's plan is judged by the kind's judge.

    >>> import fleetplan
    >>> result = plan_horizon(fleetplan.load_instance("examples/allocation-gavel-4.1.json"),
    ...                       {"periods": 2, "targets": ["min_time_share>=0.6"],
    ...                        "demand": {"multipliers": [1, 2]}, "buy": {"k80": {"price": 1.0, "price_decline": 0.1}}})
    >>> result.status, result.orders(), [row["checks"] for row in result.periods]
    ('optimal', {('base', 2, 'k80'): 2.0}, [{'min_time_share>=0.6': True}, {'min_time_share>=0.6': True}])
    """
    from fleetplan.instances import instance_from_data
    from fleetplan.solvers.base import check_time_limit

    started = time.perf_counter()
    if isinstance(instance, dict):
        instance = instance_from_data(instance, "instance")
    spec = _spec(horizon)
    if getattr(instance, "kind", None) not in horizon_kinds():
        raise InstanceError("kind", f"planning over time is built for {', '.join(horizon_kinds())}, not "
                                    f"{getattr(instance, 'kind', type(instance).__name__)}")
    if isinstance(mip_rel_gap, bool) or not isinstance(mip_rel_gap, (int, float)) or not 0 <= mip_rel_gap < 1:
        raise InstanceError("mip_rel_gap", f"{mip_rel_gap!r}: a fraction from 0 to 1")
    time_limit = check_time_limit(time_limit)
    deadline = None if time_limit is None else started + time_limit
    scenarios = spec.scenario_list()
    kind = periods_for(instance, spec, scenarios)
    policy = _checked_policy(kind, instance.kind, policy)
    _check_budgets(spec, kind)
    result = HorizonResult(status="error", kind=instance.kind, currency=spec.currency, period_name=spec.period_name,
                           unit=kind.unit, items=list(kind.items),
                           scenarios=[{"name": s.name, "probability": s.probability} for s in scenarios],
                           mode="deterministic" if len(scenarios) == 1 else spec.scenarios.mode,  # type: ignore[union-attr]
                           shared_until=spec.shared_until())
    solved = solve_schedule(spec, kind, [s.probability for s in scenarios], spec.shared_until(), deadline, threads,
                            seed, mip_rel_gap)
    result.log += solved.log
    result.stats["solve_s"] = solved.solve_s
    if solved.model is not None:
        result.stats.update(columns=float(solved.model.lp.num_cols), rows=float(solved.model.lp.num_rows))
    if solved.values is None:
        result.status = solved.status
        result.bound = solved.bound
        result.message = (explain_infeasible(spec, kind, scenarios) if solved.status == "infeasible"
                          else "the time limit ran out before any schedule was found")
        result.wall_s = time.perf_counter() - started
        return result
    assert solved.model is not None
    _read_schedule(result, spec, kind, scenarios, solved)
    result.cost, result.bound = solved.cost, solved.bound
    if not solved.model.exact:
        relaxed = solve_schedule(spec, kind, [s.probability for s in scenarios], spec.shared_until(), deadline,
                                 threads, seed, mip_rel_gap, role="relaxation")
        result.bound = relaxed.bound if relaxed.bound is not None else 0.0
        result.log.append("a target's reference moves with the purchase: the bound is the relaxation's")
    if result.bound is not None and result.cost is not None:
        result.bound = min(result.bound, result.cost)
        result.gap = relative_gap(result.cost, result.bound)
    missed = [row for row in result.periods if not all(row["checks"].values())]
    if missed:
        row = missed[0]
        result.status = "error"
        result.message = (f"the judge finds a target missed in {spec.period_name} {row['period']} ({row['scenario']}): "
                          f"{', '.join(name for name, ok in row['checks'].items() if not ok)}")
    else:
        proven = solved.status == "optimal" and result.gap is not None and result.gap <= PROVEN_GAP
        result.status = "optimal" if proven else ("time_limit" if solved.status == "time_limit" else "feasible")
        result.message = (f"every {spec.period_name}'s plan meets its targets (judged); "
                          f"{_order_summary(result)}")
        if policy is not None:
            result.message += _check_under_policy(result, kind, policy, seed, threads)
    if stochastic and len(scenarios) > 1 and result.mode == "two-stage" and result.status != "error":
        from fleetplan.planning.horizon.stochastic import stochastic_values

        result.stochastic = stochastic_values(spec, instance, scenarios, result.cost, deadline, threads, seed,
                                              mip_rel_gap, recourse_bound=result.bound)
    if marginal and result.status != "error":
        from fleetplan.planning.horizon.marginal import horizon_marginal_values

        result.marginal = horizon_marginal_values(spec, instance, result, deadline, threads, seed, mip_rel_gap)
    result.wall_s = time.perf_counter() - started
    return result


# From this many jobs in a period the policy's solves of the periods run in forked processes.
POLICY_PARALLEL_JOBS = 1000


def _checked_policy(kind: Any, kind_name: str, policy: str | None) -> str | None:
    """The policy to check each period under (None: none), its name checked before solving."""
    if policy is None or not hasattr(kind, "policy_outcome"):
        if policy not in (None, "default"):
            raise InstanceError("policy", f"a {kind_name} plan has no policy to check (no allocation policy runs it)")
        return None
    from fleetplan.solvers import get_solver

    if policy == "default":
        return get_solver(kind_name, None).name
    if not isinstance(policy, str):
        raise InstanceError("policy", f"expected a solver name, got {type(policy).__name__}")
    try:
        return get_solver(kind_name, policy).name
    except InstanceError as error:
        raise InstanceError("policy", error.reason) from None


def _check_under_policy(result: HorizonResult, kind: Any, policy: str, seed: int, threads: int) -> str:
    """Solve every period by ``policy``, judge it, keep its checks in the period rows, and the
    message's note: where the policy's own allocation misses a target the schedule met."""
    from fleetplan.runs.shared import free_workers, run_shared

    def outcome_of(row: dict[str, Any]) -> dict[str, Any]:
        judged = result.plans[(row["scenario"], row["period"])]
        return kind.policy_outcome(row["period"] - 1, judged["instance"], policy, seed=seed, threads=threads)

    # The periods' solves are independent: on large fleets they are shared over the free cores
    # (forked processes hold the period instances already); a small fleet's solve is faster
    # than a fork.
    first = result.plans[(result.periods[0]["scenario"], result.periods[0]["period"])]["instance"]
    workers = free_workers(len(result.periods)) if len(first.jobs) >= POLICY_PARALLEL_JOBS else 1
    misses = []
    for row, outcome in zip(result.periods, run_shared(outcome_of, result.periods, workers), strict=True):
        row.update(policy=policy, policy_metrics=outcome["metrics"], policy_checks=outcome["checks"])
        missed = [name for name, ok in outcome["checks"].items() if not ok]
        if missed or not outcome["metrics"]:
            misses.append((row, missed))
    if not misses:
        return f"; {policy}'s own allocation meets them too in every {result.period_name}"
    row, missed = misses[0]
    where = f"{result.period_name} {row['period']}" + (f" ({row['scenario']})" if len(result.scenarios) > 1 else "")
    shown = ", ".join(f"{name} ({_measured_text(row['policy_metrics'], name)})" for name in missed) or "no plan"
    more = f" and {len(misses) - 1} other {result.period_name}(s)" if len(misses) > 1 else ""
    return (f"; but under {policy}, the policy that runs, {where}{more} miss: {shown} — the schedule meets the "
            f"targets with the model's allocation, not the policy's (size --policy answers one period exactly)")


def _measured_text(metrics: dict[str, float], target: str) -> str:
    metric = target.split(">=")[0].split("<=")[0].strip()
    value = metrics.get(metric)
    return "-" if value is None else f"{metric} {value:.4g}"


def _spec(horizon: Any) -> HorizonSpec:
    import os

    if isinstance(horizon, HorizonSpec):
        return horizon
    if isinstance(horizon, dict):
        return parse_horizon(horizon, "horizon")
    if isinstance(horizon, (str, os.PathLike)):
        return load_horizon(horizon)
    raise InstanceError("horizon", f"expected a HorizonSpec, a dict or a horizon file's path, got "
                                   f"{type(horizon).__name__}")


def periods_for(instance: Any, spec: HorizonSpec, scenarios: list[Scenario]) -> Any:
    """The kind's side of the horizon model for ``instance`` (its planning registration's
    ``horizon_path``)."""
    from fleetplan.planning.kinds import _load, planning_kind

    return _load(planning_kind(instance.kind).horizon_path)(instance, spec, scenarios)


def solve_schedule(spec: HorizonSpec, kind: Any, probabilities: Sequence[float], shared_until: int,
                   deadline: float | None, threads: int, seed: int, mip_rel_gap: float, role: str = "restriction",
                   fixed_orders: Any = None) -> _Solved:
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
        return _Solved("infeasible", model, None, None, None, ["horizon LP relaxation: infeasible"], relaxed_s)
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
    return _Solved(outcome["status"], model, values, cost, bound, log, float(outcome["solve_s"]) + relaxed_s)


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


def _read_schedule(result: HorizonResult, spec: HorizonSpec, kind: Any, scenarios: list[Scenario],
                   solved: _Solved) -> None:
    """The schedule and the period rows, every period's plan judged."""
    model, values = solved.model, solved.values
    assert model is not None and values is not None
    T = spec.periods
    usable = model.usable
    orders = np.zeros((len(kind.items), T, len(scenarios)))
    for index in np.ndindex(orders.shape):
        column = model.order_column[index]
        orders[index] = values[column] if column >= 0 else 0.0
    if kind.integer:
        orders = np.rint(orders)
    else:
        orders = np.where(np.abs(orders) < 1e-9, 0.0, orders)
    opex_rate = np.array([spec.buy[name].opex_per_hour * spec.hours_per_period for name in kind.items])
    for s, scenario in enumerate(scenarios):
        for t in range(T):
            in_use = (usable[:, :, t] * orders[:, :, s]).sum(axis=1)
            before = (usable[:, :, t - 1] * orders[:, :, s]).sum(axis=1) if t else np.zeros(len(kind.items))
            arriving = np.array([orders[i, t - spec.buy[name].lead_time, s] if t - spec.buy[name].lead_time >= 0
                                 else 0.0 for i, name in enumerate(kind.items)])
            existing = kind.existing(t)
            existing_before = kind.existing(t - 1) if t else existing
            capex = opex = 0.0
            for i, name in enumerate(kind.items):
                price = spec.price(name, t + 1)
                retiring = max(before[i] + arriving[i] - in_use[i], 0.0) + max(existing_before[i] - existing[i], 0.0)
                result.schedule.append({
                    "scenario": scenario.name, "period": t + 1, "item": name, "ordered": _clean(orders[i, t, s]),
                    "arriving": _clean(arriving[i]), "retiring": _clean(retiring),
                    "installed": _clean(existing[i] + in_use[i]), "unit_price": price,
                    "capex": float(price * orders[i, t, s]), "opex": float(opex_rate[i] * in_use[i])})
                capex += float(price * orders[i, t, s])
                opex += float(opex_rate[i] * in_use[i])
            opex += kind.existing_opex(t)
            block = model.blocks[t][s]
            judged = kind.judge(t, s, block, block_values(model, values, t, s), in_use)
            result.plans[(scenario.name, t + 1)] = judged
            result.periods.append({
                "scenario": scenario.name, "period": t + 1, "capex": capex, "opex": opex,
                "spend": capex + opex, "budget": spec.budget_of(t + 1), "discount": spec.discount(t + 1),
                "demand": kind.demand_gpus(t, s), "fleet": kind.fleet(t, in_use),
                "metrics": judged["metrics"], "checks": judged["checks"]})


def _clean(value: float) -> float:
    rounded = round(float(value))
    return float(rounded) if abs(value - rounded) < 1e-6 else float(value)


def _order_summary(result: HorizonResult) -> str:
    orders = result.orders()
    if not orders:
        return "nothing to order"
    first = sorted(orders.items(), key=lambda item: (item[0][1], item[0][0]))[:3]
    shown = ", ".join(f"{units:g} {item} in {result.period_name} {period}"
                      + (f" ({scenario})" if len(result.scenarios) > 1 else "")
                      for (scenario, period, item), units in first)
    return f"orders: {shown}{' ...' if len(orders) > 3 else ''}"


def _check_budgets(spec: HorizonSpec, kind: Any) -> None:
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


__all__ = ["HorizonResult", "HorizonSpec", "load_horizon", "parse_horizon", "plan_horizon"]
