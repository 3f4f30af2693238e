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

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.planning.horizon.model import block_values
from fleetplan.planning.horizon.policy_check import check_under_policy, checked_policy
from fleetplan.planning.horizon.schedule import (
    DEFAULT_GAP,
    PROVEN_GAP,
    Solved,
    check_budgets,
    explain_infeasible,
    periods_for,
    solve_schedule,
)
from fleetplan.planning.horizon.spec import (
    HorizonSpec,
    Scenario,
    as_spec,
    load_horizon,
    parse_horizon,
)
from fleetplan.solvers.base import relative_gap


def horizon_kinds() -> list[str]:
    """The kinds planning over time knows (those whose planning registration names a horizon side)."""
    from fleetplan.planning.kinds import PLANNING_KINDS

    return [name for name, entry in PLANNING_KINDS.items() if entry.horizon_path]


def check_horizon_kind(instance: Any) -> None:
    """Refuse an instance of a kind planning over time is not built for (one error naming ``kind``)."""
    if getattr(instance, "kind", None) not in horizon_kinds():
        raise InstanceError("kind", f"planning over time is built for {', '.join(horizon_kinds())}, not "
                                    f"{getattr(instance, 'kind', type(instance).__name__)}")


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
    spec = as_spec(horizon)
    check_horizon_kind(instance)
    if isinstance(mip_rel_gap, bool) or not isinstance(mip_rel_gap, (int, float)) or not 0 <= mip_rel_gap < 1:
        raise InstanceError("mip_rel_gap", f"{mip_rel_gap!r}: a fraction from 0 to 1")
    time_limit = check_time_limit(time_limit)
    deadline = None if time_limit is None else started + time_limit
    scenarios = spec.scenario_list()
    kind = periods_for(instance, spec, scenarios)
    policy = checked_policy(kind, instance.kind, policy)
    check_budgets(spec, kind)
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
            result.message += check_under_policy(result, kind, policy, seed, threads)
    if stochastic and len(scenarios) > 1 and result.mode == "two-stage" and result.status != "error":
        from fleetplan.planning.horizon.stochastic import stochastic_values

        result.stochastic = stochastic_values(spec, instance, scenarios, result.cost, deadline, threads, seed,
                                              mip_rel_gap, recourse_bound=result.bound)
    if marginal and result.status != "error":
        from fleetplan.planning.horizon.marginal import horizon_marginal_values

        result.marginal = horizon_marginal_values(spec, instance, result, deadline, threads, seed, mip_rel_gap)
    result.wall_s = time.perf_counter() - started
    return result


def _read_schedule(result: HorizonResult, spec: HorizonSpec, kind: Any, scenarios: list[Scenario],
                   solved: Solved) -> None:
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
    from fleetplan.instances.glossary import fmt_bytes, fmt_number
    from fleetplan.planning.horizon.placement import is_storage_item

    # Bytes of storage as GB/TB, other units as amounts: never 3.20272e+11 in a sentence.
    shown = ", ".join(f"{fmt_bytes(units) if is_storage_item(item) else fmt_number(units)} {item} "
                      f"in {result.period_name} {period}"
                      + (f" ({scenario})" if len(result.scenarios) > 1 else "")
                      for (scenario, period, item), units in first)
    return f"orders: {shown}{' ...' if len(orders) > 3 else ''}"


__all__ = ["HorizonResult", "HorizonSpec", "load_horizon", "parse_horizon", "plan_horizon"]
