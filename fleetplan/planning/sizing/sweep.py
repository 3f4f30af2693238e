"""Sweeps over sizing itself: the cheapest basket as a target, a price or the budget moves.

``size_sweep(instance, targets, buy, "target.min_time_share=0.2:0.6:0.1")`` sizes once per value
of the varied field and tabulates the basket. Fields:

* ``target.METRIC`` — the value of that target (which must be among ``targets``);
* ``price.NAME`` — the unit price of a purchasable (which must be among ``buy``);
* ``budget`` — the most the purchase may cost.

Each point is a whole :func:`fleetplan.planning.size` (its own bound and status), so a row that
is ``infeasible`` at a tight target is proven so, and a row's basket is judged like any sizing's.

>>> import fleetplan
>>> gavel = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
>>> table = size_sweep(gavel, ["min_time_share>=1"], ["v100=3", "k80=1"], "price.k80=1,4")
>>> [(row["price.k80"], row["k80"], row["v100"]) for row in table.rows]
[(1, 1, 0), (4, 0, 1)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fleetplan.errors import InstanceError
from fleetplan.instances.base import finite_or_none
from fleetplan.planning.sizing import Purchase, parse_purchase, size
from fleetplan.planning.targets import Target, parse_target, parse_targets


@dataclass
class SizeSweep:
    """One row per value: the varied value, status, cost, bound, gap and units of each item."""

    field: str
    items: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)


def size_sweep(instance: Any, targets: Sequence[str | Target], buy: Sequence[str | Purchase], vary: str,
               **options: Any) -> SizeSweep:
    """Size ``instance`` once per value of ``vary`` (module docstring); ``options`` go to
    :func:`~fleetplan.planning.size` (budget, policy, time_limit, ...)."""
    from fleetplan.instances import as_instance
    from fleetplan.planning.whatif import parse_vary

    instance = as_instance(instance)
    parsed = parse_vary(vary)
    goal = [t if isinstance(t, Target) else None for t in targets]
    goal = goal if all(goal) else parse_targets([str(t) for t in targets], instance.kind)
    purchases = [parse_purchase(item) for item in buy]
    kind, _, name = parsed.path.partition(".")
    if kind == "target":
        if name not in {t.metric for t in goal}:
            raise InstanceError("--vary", f"'{parsed.path}': no --target on {name} to vary "
                                          f"(targets: {', '.join(t.metric for t in goal)})")
        op = next(t.op for t in goal if t.metric == name)
        for value in parsed.values:  # every value a valid target before the first sizing runs
            try:
                parse_target(f"{name}{op}{float(value)!r}", instance.kind)
            except InstanceError as error:
                raise InstanceError("--vary", f"'{parsed.path}={value:g}': {error.reason}") from None
    elif kind == "price":
        if name not in {p.name for p in purchases}:
            raise InstanceError("--vary", f"'{parsed.path}': no --buy {name} to price "
                                          f"(buy: {', '.join(p.name for p in purchases)})")
        if any(value <= 0 for value in parsed.values):
            raise InstanceError("--vary", f"'{parsed.path}': a price must be positive")
    elif parsed.path == "budget":
        if any(value < 0 for value in parsed.values):
            raise InstanceError("--vary", "'budget': a budget must not be negative")
    else:
        raise InstanceError("--vary", f"'{parsed.path}': a sizing sweep varies target.METRIC, price.NAME or budget")
    sweep = SizeSweep(parsed.path, [p.name for p in purchases])
    for value in parsed.values:
        point_targets, point_buy, point_options = list(goal), list(purchases), dict(options)
        if kind == "target":
            point_targets = [replace(t, value=float(value)) if t.metric == name else t for t in goal]
        elif kind == "price":
            point_buy = [replace(p, price=float(value)) if p.name == name else p for p in purchases]
        else:
            point_options["budget"] = float(value)
        result = size(instance, point_targets, point_buy, **point_options)
        # An infeasible point's bound is +inf (no purchase passes): null here, as in size's own
        # JSON (JSON has no infinity; the CSV's empty cell is the table's "-").
        row: dict[str, Any] = {parsed.path: value, "status": result.status, "cost": result.cost,
                               "bound": finite_or_none(result.bound), "gap": result.gap}
        row.update({item: result.additions.get(item, 0) if result.success else None for item in sweep.items})
        sweep.rows.append(row)
    return sweep
