"""The planner's pictures: plans compared metric by metric, and a what-if sweep's metrics
against the varied value (one panel per metric, units on the axes).

>>> from fleetplan.planning.compare import Comparison
>>> table = Comparison("allocation", ["a", "b"], [{"metric": "min_time_share", "unit": "fraction",
...     "better": "higher", "meaning": "", "values": [0.4, 0.5], "changes": [0.1], "verdicts": ["better"]}])
>>> figure = plot_comparison(table)
>>> len(figure.axes)
1
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from fleetplan.plotting.style import PALETTE, save

# At most this many metrics get a panel (the first ones: service metrics lead the table).
MAX_PANELS = 12
VERDICT_COLOURS = {None: "#8c8c8c", "same": "#8c8c8c", "not comparable": "#8c8c8c", "better": "#2a9d4b",
                   "worse": "#d1495b"}
COLOURS = PALETTE


def _figure(panels: int, columns: int, width: float, height: float,
            layout: str | None = "constrained") -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    rows = max(1, math.ceil(panels / columns))
    figure = Figure(figsize=(width * min(columns, panels), height * rows), layout=layout)
    if layout is None:  # fixed margins: half the drawing time of a layout engine's passes
        figure.subplots_adjust(left=0.1, right=0.98, bottom=0.3 / rows, top=1 - 0.25 / rows, wspace=0.32,
                               hspace=0.45)
    axes = [figure.add_subplot(rows, min(columns, panels), index + 1) for index in range(panels)]
    return figure, axes


def plot_comparison(table: Any, path: str | os.PathLike[str] | None = None) -> Any:
    """One small bar panel per metric (plans as bars, the better direction in the title)."""
    drawable = [row for row in table.rows if any(_finite(v) for v in row["values"])]
    # Metrics on which the plans differ first: a panel of equal bars says little.
    decisive = [row for row in drawable if row["metric"] in getattr(table, "decisive", ())]
    differ = [row for row in drawable if row not in decisive and (
        any(word not in (None, "same", "not comparable") for word in row["verdicts"])
        or (row["changes"] and any(change not in (None, 0.0) for change in row["changes"])))]
    rows = (decisive + differ + [row for row in drawable if row not in differ and row not in decisive])[:MAX_PANELS]
    figure, axes = _figure(len(rows), 3, 3.6, 2.4)
    for ax, row in zip(axes, rows, strict=True):
        scale, unit = _axis_unit(row["unit"] or "value", row["values"])
        values = [0.0 if v is None or not math.isfinite(v) else v * scale for v in row["values"]]
        # The reference plan neutral; each other plan green where better, red where worse.
        shades = [VERDICT_COLOURS[None]] + [VERDICT_COLOURS.get(word, VERDICT_COLOURS[None])
                                            for word in row["verdicts"]]
        ax.barh(range(len(values)), values, color=shades)
        ax.set_yticks(range(len(values)), table.columns, fontsize=8)
        ax.invert_yaxis()
        arrow = {"higher": " (higher is better)", "lower": " (lower is better)"}.get(row["better"], "")
        ax.set_title(f"{row['metric']}{arrow}", fontsize=8)
        ax.set_xlabel(unit, fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        for index, (value, raw) in enumerate(zip(values, row["values"], strict=True)):
            ax.text(value, index, f" {value:.4g}" if raw is not None else " -", va="center", fontsize=7)
        ax.margins(x=0.25)
        if min(values) >= 0:
            ax.set_xlim(left=0, right=max(values) * 1.3 if max(values) > 0 else 1.0)
    figure.suptitle(f"{table.kind} plans compared (first: {table.columns[0]})", fontsize=10)
    if path is not None:
        save(figure, path)
    return figure


def plot_sweep(rows: Sequence[dict[str, Any]], varied: Sequence[str], metrics: Sequence[str],
               units: dict[str, str], path: str | os.PathLike[str] | None = None, title: str = "",
               frontier: Sequence[str] = ()) -> Any:
    """One panel per metric against the first varied field (one line per value of a second);
    a metric in ``frontier`` also has its ``frontier_<metric>`` column drawn dashed (the best
    any allocation reaches at that point)."""
    figure, axes = _figure(len(metrics), 2, 4.6, 3.0, layout=None)
    x_name = varied[0]
    series_name = varied[1] if len(varied) > 1 else None
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row.get(series_name) if series_name else None, []).append(row)
    for ax, metric in zip(axes, metrics, strict=True):
        unit = units.get(metric) or "value"
        scale, unit = _axis_unit(unit, [row.get(metric) for row in rows])
        seen: list[float] = []
        for index, (key, members) in enumerate(sorted(groups.items(), key=lambda item: (not _finite(item[0]), item[0] if _finite(item[0]) else str(item[0])))):
            members = sorted(members, key=lambda row: row[x_name])
            xs = [row[x_name] for row in members if _finite(row.get(metric))]
            ys = [row[metric] * scale for row in members if _finite(row.get(metric))]
            seen += ys
            label = None if series_name is None else f"{series_name} = {key}"
            if label is None and metric in frontier:
                label = "the solver's plan"
            ax.plot(xs, ys, marker="o", markersize=3, color=COLOURS[index % len(COLOURS)], label=label)
            if metric in frontier:
                best = [(row[x_name], row[f"frontier_{metric}"] * scale) for row in members
                        if _finite(row.get(f"frontier_{metric}"))]
                if best:
                    ax.plot([x for x, _ in best], [y for _, y in best], ls="--", color=COLOURS[index % len(COLOURS)],
                            alpha=0.8, label="best any allocation reaches" if index == 0 else None)
                    seen += [y for _, y in best]
        if seen and max(seen) == min(seen):  # a flat line: say so, with the value on a sane axis
            ax.set_ylim(min(seen) - 1, max(seen) + 1)
            ax.text(0.5, 0.9, f"constant: {seen[0]:g}", transform=ax.transAxes, ha="center", fontsize=8)
        ax.set_xlabel(x_name, fontsize=8)
        ax.set_ylabel(f"{metric} ({unit})", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if series_name or metric in frontier:
            ax.legend(fontsize=7)
    figure.suptitle(title or f"what if: {', '.join(varied)}", fontsize=10)
    if path is not None:
        save(figure, path)
    return figure


def plot_sizing(result: Any, before: dict[str, float] | None = None, units: dict[str, str] | None = None,
                path: str | os.PathLike[str] | None = None) -> Any:
    """A sizing at a glance: what is bought (units per item), each target's metric before and
    after the purchase against the target (dashed), and the cost against the proven bound.

    ``result`` is a :class:`~fleetplan.planning.sizing.SizingResult`; ``before`` the metrics of
    the instance as it is under the same policy (None: not drawn); ``units`` each metric's unit.
    """
    units = units or {}
    bought = {name: value for name, value in result.additions.items() if value}
    targets = list(result.targets)
    figure, axes = _figure(2 + len(targets), 3, 3.8, 2.6)
    ax = axes[0]
    if bought:
        names = list(bought)
        ax.barh(range(len(names)), [bought[n] for n in names], color=COLOURS[0])
        ax.set_yticks(range(len(names)), names, fontsize=8)
        ax.invert_yaxis()
        for index, name in enumerate(names):
            unit = result.units.get(name, "")
            plural = "s" if unit in ("GPU", "server", "machine") and bought[name] != 1 else ""
            ax.text(bought[name], index, f" {bought[name]:,.4g} {unit}{plural}", va="center", fontsize=7)
        ax.margins(x=0.35)
    else:
        ax.text(0.5, 0.5, "nothing to buy", ha="center", va="center", transform=ax.transAxes)
        ax.set_yticks([])
    ax.set_title("purchase", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)
    ax = axes[1]
    cost, bound = result.cost or 0.0, result.bound
    ax.barh([0], [cost], color=COLOURS[0], height=0.5)
    ax.set_ylim(-0.7, 0.5)
    if bound is not None and math.isfinite(bound):
        ax.axvline(bound, color="black", ls="--", lw=1.2)
        ax.text(bound, -0.5, f" proven bound {bound:,.6g}", fontsize=7, va="center")
    gap = "-" if result.gap is None else ("0%" if result.gap < 1e-6 else f"{100 * result.gap:.3g}%")
    ax.set_title(f"cost {cost:,.6g} ({result.status}, gap {gap})", fontsize=9)
    ax.set_yticks([])
    ax.set_xlim(0, max(cost, bound or 0.0, 1e-9) * 1.3)
    ax.tick_params(axis="x", labelsize=7)
    for ax, target in zip(axes[2:], targets, strict=True):
        scale, unit = _axis_unit(units.get(target.metric) or "value", [target.value])
        after = result.metrics.get(target.metric)
        labels, values = [], []
        if before is not None:
            labels.append("today")
            values.append(before.get(target.metric))
        labels.append("sized")
        values.append(after)
        shown = [0.0 if not _finite(v) else v * scale for v in values]
        met = [_finite(v) and target.holds({target.metric: v}) for v in values]
        ax.barh(range(len(shown)), shown, color=[VERDICT_COLOURS["better"] if ok else VERDICT_COLOURS["worse"]
                                                for ok in met])
        ax.set_yticks(range(len(shown)), labels, fontsize=8)
        ax.invert_yaxis()
        ax.axvline(target.value * scale, color="black", ls="--", lw=1.2)
        for index, value in enumerate(shown):
            ax.text(value, index, f" {value:.4g}", va="center", fontsize=7)
        ax.set_title(f"{target} (dashed; green: met)", fontsize=8)
        ax.set_xlabel(unit, fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.margins(x=0.25)
    figure.suptitle(f"{result.kind} sizing under {result.policy or 'the default policy'}", fontsize=10)
    if path is not None:
        save(figure, path)
    return figure


def plot_size_sweep(sweep: Any, path: str | os.PathLike[str] | None = None, title: str = "") -> Any:
    """The basket against the varied target, price or budget: units of each item stacked per
    value (left), the cost and its proven bound (right); a value with no purchase is marked."""
    figure, (basket, money) = _figure(2, 2, 5.2, 3.4)
    xs = list(range(len(sweep.rows)))
    labels = [f"{row[sweep.field]:g}" for row in sweep.rows]
    bottom = [0.0] * len(xs)
    for index, item in enumerate(sweep.items):
        heights = [float(row.get(item) or 0.0) for row in sweep.rows]
        basket.bar(xs, heights, bottom=bottom, color=COLOURS[index % len(COLOURS)], label=item)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    for x, row in zip(xs, sweep.rows, strict=True):
        if row["status"] in ("infeasible", "time_limit", "error") and row.get("cost") is None:
            basket.text(x, 0, row["status"], rotation=90, ha="center", va="bottom", fontsize=7)
    basket.set_ylim(0, max([*bottom, 1.0]) * 1.3)  # room for the legend above the bars
    basket.set_xticks(xs, labels, fontsize=8)
    basket.set_xlabel(sweep.field, fontsize=8)
    basket.set_ylabel("units bought", fontsize=8)
    basket.legend(fontsize=7)
    basket.set_title("the cheapest basket", fontsize=9)
    costs = [row.get("cost") for row in sweep.rows]
    bounds = [row.get("bound") for row in sweep.rows]
    money.plot([x for x, c in zip(xs, costs, strict=True) if _finite(c)], [c for c in costs if _finite(c)],
               marker="o", color=COLOURS[0], label="cost")
    money.plot([x for x, b in zip(xs, bounds, strict=True) if _finite(b)], [b for b in bounds if _finite(b)],
               ls="--", color="black", label="proven bound")
    money.set_xticks(xs, labels, fontsize=8)
    money.set_xlabel(sweep.field, fontsize=8)
    money.set_ylabel("cost", fontsize=8)
    money.legend(fontsize=7)
    money.grid(alpha=0.3)
    money.set_title("cost and its bound", fontsize=9)
    figure.suptitle(title or f"sizing against {sweep.field}", fontsize=10)
    if path is not None:
        save(figure, path)
    return figure


def _axis_unit(unit: str, values: Sequence[Any]) -> tuple[float, str]:
    """A readable axis: fractions in percent, seconds in minutes, hours or days."""
    if unit == "fraction":
        return 100.0, "%"
    if unit == "s":
        largest = max((abs(v) for v in values if _finite(v)), default=0.0)
        for name, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
            if largest >= 3 * size:
                return 1.0 / size, name
    return 1.0, unit


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
