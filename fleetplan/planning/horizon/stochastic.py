"""What scenarios are worth: the value of the stochastic solution and the expected value of
perfect information (Birge and Louveaux, *Introduction to Stochastic Programming*, §4.1-4.2).

* RP, the recourse problem: the two-stage plan's expected cost (orders up to the decision
  period shared, later ones per scenario);
* WS, wait-and-see: the expected cost if each scenario were known in advance
  (``sum_s p_s z_s``, each ``z_s`` its own optimum);
* EEV: the plan for the mean scenario (each period's demand multiplier averaged by probability)
  fixes the shared orders, then each scenario adapts its later orders at least cost;
  its expected cost (infinite when the mean plan's shared orders leave a scenario unservable).

``EVPI = RP - WS`` is what a perfect forecast would save; ``VSS = EEV - RP`` what planning with
the scenarios saves over planning for the mean.

Each solve stops within its gap, so each value is also given as the range the solves' costs and
bounds prove (``evpi_range``, ``vss_range``): a VSS of -2,000 from two solves each within 1% of
2,100,000 says nothing, and its range says so. With every gap closed the range is the value.
"""

from __future__ import annotations

import math
from typing import Any

from fleetplan.planning.horizon.spec import Demand, HorizonSpec, Scenario


def mean_scenario(spec: HorizonSpec, scenarios: list[Scenario]) -> Scenario | None:
    """The probability-weighted mean demand (None when the scenarios' new jobs differ: there is
    no mean of two different job lists)."""
    T = spec.periods
    first = scenarios[0].demand.new_jobs
    if any(s.demand.new_jobs != first for s in scenarios[1:]):
        return None
    classes = sorted({name for s in scenarios for name in s.demand.classes})
    multipliers = [sum(s.probability * s.demand.multiplier(t + 1, None) for s in scenarios) for t in range(T)]
    per_class = {name: [sum(s.probability * s.demand.multiplier(t + 1, name) for s in scenarios) for t in range(T)]
                 for name in classes}
    demand = Demand(multipliers=multipliers, classes=per_class, new_jobs=first)
    return Scenario(name="mean", probability=1.0, demand=demand)


def stochastic_values(spec: HorizonSpec, instance: Any, scenarios: list[Scenario], recourse_cost: float | None,
                      deadline: float | None, threads: int, seed: int, mip_rel_gap: float,
                      recourse_bound: float | None = None) -> dict[str, Any]:
    """RP, WS, EEV, EVPI and VSS (module docstring), each from an exact solve."""
    from fleetplan.planning.horizon.schedule import periods_for, solve_schedule

    shared = spec.shared_until()
    recourse_bound = recourse_cost if recourse_bound is None else recourse_bound
    per_scenario: dict[str, float | None] = {}
    per_scenario_bound: dict[str, float | None] = {}
    for scenario in scenarios:
        alone = Scenario(name=scenario.name, probability=1.0, demand=scenario.demand)
        solved = solve_schedule(spec, periods_for(instance, spec, [alone]), [1.0], spec.periods, deadline, threads,
                                seed, mip_rel_gap)
        per_scenario[scenario.name] = solved.cost
        per_scenario_bound[scenario.name] = solved.bound if solved.cost is not None else None
    known = all(v is not None for v in per_scenario.values())
    wait_and_see = sum(s.probability * per_scenario[s.name] for s in scenarios) if known else None  # type: ignore[operator]
    wait_and_see_bound = (sum(s.probability * per_scenario_bound[s.name] for s in scenarios)  # type: ignore[operator]
                          if known and all(v is not None for v in per_scenario_bound.values()) else None)
    out: dict[str, Any] = {"recourse": recourse_cost, "recourse_bound": recourse_bound, "wait_and_see": wait_and_see,
                           "wait_and_see_bound": wait_and_see_bound, "per_scenario": per_scenario,
                           "decision_period": shared}
    out["evpi"] = (_tidy(recourse_cost - wait_and_see, recourse_cost) if recourse_cost is not None
                   and wait_and_see is not None else None)
    out["evpi_range"] = _range(recourse_bound, recourse_cost, wait_and_see_bound, wait_and_see)
    mean = mean_scenario(spec, scenarios)
    if mean is None:
        out.update(mean_value=None, expected_mean_value=None, vss=None,
                   note="the scenarios' new jobs differ: no mean scenario, so no VSS")
        return out
    mean_kind = periods_for(instance, spec, [mean])
    mean_solved = solve_schedule(spec, mean_kind, [1.0], spec.periods, deadline, threads, seed, mip_rel_gap)
    out["mean_value"] = mean_solved.cost
    if mean_solved.values is None or mean_solved.model is None:
        out.update(expected_mean_value=None, vss=None, note="the mean scenario alone cannot be served")
        return out
    fixed = {(i, t): float(round(mean_solved.values[mean_solved.model.order_column[i, t, 0]])
                           if mean_kind.integer else mean_solved.values[mean_solved.model.order_column[i, t, 0]])
             for i in range(len(mean_kind.items)) for t in range(shared)}
    kind = periods_for(instance, spec, scenarios)
    recourse = solve_schedule(spec, kind, [s.probability for s in scenarios], shared, deadline, threads, seed,
                              mip_rel_gap, fixed_orders=lambda i, t: fixed.get((i, t)))
    eev = recourse.cost if recourse.values is not None else math.inf
    eev_bound = recourse.bound if recourse.values is not None and recourse.bound is not None else eev
    out["expected_mean_value"] = eev
    out["vss_range"] = _range(eev_bound, eev, recourse_bound, recourse_cost)
    out["mean_orders"] = {f"{mean_kind.items[i]}@{t + 1}": units for (i, t), units in fixed.items() if units}
    out["vss"] = _tidy(eev - recourse_cost, recourse_cost) if recourse_cost is not None else None
    if not math.isfinite(eev):
        out["note"] = "the mean scenario's shared orders leave some scenario unservable: VSS is unbounded"
    return out


def _tidy(difference: float, scale: float) -> float:
    """A difference of two solves' costs, 0 where it is within their tolerance of 0 (a gap of
    -1e-10 is rounding, not a negative value of information)."""
    return 0.0 if math.isfinite(difference) and abs(difference) <= 1e-9 * max(1.0, abs(scale)) else difference


def _range(low_a: float | None, high_a: float | None, low_b: float | None,
           high_b: float | None) -> list[float] | None:
    """What ``a - b`` may be when ``a`` lies in [low_a, high_a] and ``b`` in [low_b, high_b]."""
    if None in (low_a, high_a, low_b, high_b):
        return None
    low, high = low_a - high_b, high_a - low_b  # type: ignore[operator]
    scale = max(abs(high_a), 1.0)  # type: ignore[arg-type]
    return [_tidy(low, scale), _tidy(high, scale)]
