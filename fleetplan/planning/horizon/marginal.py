"""The prices that bind over a horizon, by re-solving: what one more unit of budget in a period
is worth (per unit of money, with the step one unit of the cheapest item in that period), and
what one period less lead time for an item saves. Each saving comes with the range the two
solves' costs and bounds prove (``saving_range``): within their gaps a saving is not known
better than that."""

from __future__ import annotations

from typing import Any

from fleetplan.planning.horizon.spec import HorizonSpec


def horizon_marginal_values(spec: HorizonSpec, instance: Any, result: Any, deadline: float | None, threads: int,
                            seed: int, mip_rel_gap: float) -> dict[str, Any]:
    """``{"budget": {period: {...}}, "lead_time": {item: {...}}}``: each re-solve's cost and the
    saving against ``result.cost`` (a binding budget's value per unit of money)."""
    from fleetplan.planning.horizon.schedule import periods_for, solve_schedule

    scenarios = spec.scenario_list()
    probabilities = [s.probability for s in scenarios]

    def cost_of(changed: HorizonSpec) -> tuple[float | None, float | None]:
        solved = solve_schedule(changed, periods_for(instance, changed, scenarios), probabilities,
                                changed.shared_until(), deadline, threads, seed, mip_rel_gap)
        return solved.cost, solved.bound

    def saving_range(cost: float | None, bound: float | None) -> list[float] | None:
        # what the change saves, as the two solves' costs and bounds prove it
        if None in (cost, bound, result.cost, result.bound):
            return None
        return [result.bound - cost, result.cost - bound]  # type: ignore[operator]

    out: dict[str, Any] = {"budget": {}, "lead_time": {}}
    for t in range(spec.periods):
        budget = spec.budget_of(t + 1)
        if budget is None:
            continue
        step = min(spec.price(name, t + 1) for name in spec.buy)
        spent = max((row["capex"] + (row["opex"] if spec.budget_covers == "capex+opex" else 0.0))
                    for row in result.periods if row["period"] == t + 1)
        if budget - spent >= step - 1e-9:  # one more unit fits already: the budget does not bind
            continue
        budgets = [spec.budget_of(p + 1) for p in range(spec.periods)]
        budgets[t] = budget + step
        changed = spec.model_copy(update={"budget": budgets})
        cost, bound = cost_of(changed)
        saving = None if cost is None or result.cost is None else result.cost - cost
        out["budget"][t + 1] = {"step": step, "cost": cost, "saving": saving, "saving_range": saving_range(cost, bound),
                                "per_unit": None if saving is None or step <= 0 else saving / step}
    for name, option in spec.buy.items():
        if option.lead_time == 0:
            continue
        buy = dict(spec.buy)
        buy[name] = option.model_copy(update={"lead_time": option.lead_time - 1})
        cost, bound = cost_of(spec.model_copy(update={"buy": buy}))
        out["lead_time"][name] = {"lead_time": option.lead_time - 1, "cost": cost,
                                  "saving": None if cost is None or result.cost is None else result.cost - cost,
                                  "saving_range": saving_range(cost, bound)}
    return out
