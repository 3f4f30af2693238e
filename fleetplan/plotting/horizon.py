"""Pictures of a purchase schedule over time: the installed fleet by type against demand
(stacked), the orders as bars with their arrivals, the cost per period, and per scenario the
service each period's plan reaches against its target (bands across scenarios).

>>> from fleetplan.planning.horizon import HorizonResult
>>> result = HorizonResult("optimal", "allocation", items=["g"], scenarios=[{"name": "base", "probability": 1}],
...     schedule=[{"scenario": "base", "period": 1, "item": "g", "ordered": 1, "arriving": 1, "retiring": 0,
...                "installed": 2, "unit_price": 1.0, "capex": 1.0, "opex": 0.0}],
...     periods=[{"scenario": "base", "period": 1, "capex": 1.0, "opex": 0.0, "spend": 1.0, "budget": None,
...               "discount": 1.0, "demand": 2.0, "fleet": {"g": 2.0}, "metrics": {"min_time_share": 1.0},
...               "checks": {"min_time_share>=1": True}}])
>>> len(plot_horizon(result).axes)  # four panels, and the demand's own axis beside the fleet
5
"""

from __future__ import annotations

import os
import re
from typing import Any

from fleetplan.plotting.style import PALETTE, save


def plot_horizon(result: Any, path: str | os.PathLike[str] | None = None) -> Any:
    """Four panels (module docstring); the fleet and orders of the most probable scenario."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(12, 8), layout="constrained")
    axes = [figure.add_subplot(2, 2, index + 1) for index in range(4)]
    scenario = max(result.scenarios, key=lambda s: s["probability"])["name"]
    period_name = result.period_name
    rows = [row for row in result.periods if row["scenario"] == scenario]
    periods = [row["period"] for row in rows]
    _fleet(axes[0], result, rows, periods, scenario)
    _orders(axes[1], result, scenario, periods)
    _costs(axes[2], result, rows, periods)
    _service(axes[3], result, periods)
    for ax in axes:
        ax.set_xlabel(period_name)
        ax.set_xticks(periods)
        ax.grid(alpha=0.3)
    title = f"{result.status}: discounted total {_money(result.cost, result.currency)}"
    if result.gap is not None:
        title += f", proven within {100 * result.gap:.2g}%" if result.gap > 1e-9 else " (proven optimal)"
    if len(result.scenarios) > 1:
        title += f" — {result.mode}, {len(result.scenarios)} scenarios"
    figure.suptitle(title)
    if path is not None:
        save(figure, path)
    return figure


def colour_of(result: Any) -> Any:
    """One colour per GPU type in every panel: an item (``h100``, ``region1/h100``) takes its type's."""
    types = list(result.periods[0].get("fleet") or {}) if result.periods else []
    for item in result.items:
        name = item.rpartition("/")[2]
        if name not in types:
            types.append(name)

    def colour(name: str) -> str:
        return PALETTE[types.index(name.rpartition("/")[2]) % len(PALETTE)]

    return colour


def _fleet(ax: Any, result: Any, rows: list[dict], periods: list[int], scenario: str) -> None:
    types = list(rows[0]["fleet"]) if rows and rows[0].get("fleet") else []
    colour = colour_of(result)
    bottom = [0.0] * len(rows)
    for name in types:
        heights = [row["fleet"].get(name, 0.0) for row in rows]
        ax.bar(periods, heights, bottom=bottom, width=0.7, color=colour(name), label=name)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    # Demand in its own units on its own axis: what the jobs would hold at once, which a
    # time-sharing fleet need not match.
    demand_axis = ax.twinx()
    for s in result.scenarios:
        demand = [row["demand"] for row in result.periods if row["scenario"] == s["name"]]
        style = "-" if s["name"] == scenario else ":"
        demand_axis.plot(periods, demand, style, marker="o", markersize=3, color="black",
                         linewidth=1.6 if s["name"] == scenario else 1.0,
                         label=f"demand, {s['name']}" if len(result.scenarios) > 1 else "demand")
    demand_axis.set_ylim(bottom=0)
    demand_axis.set_ylabel("demand: GPUs the jobs ask for at once (lines)")
    ax.set_ylabel(f"{result.unit or 'units'} installed" + (f", {scenario}" if len(result.scenarios) > 1 else "")
                  + " (bars)")
    ax.set_title("installed fleet by type against demand", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()
    more_handles, more_labels = demand_axis.get_legend_handles_labels()
    ax.legend(handles + more_handles, labels + more_labels, fontsize=7, loc="upper left")


def _orders(ax: Any, result: Any, scenario: str, periods: list[int]) -> None:
    """Every scenario's orders when they fit side by side (hatched per scenario), else the most
    probable one's."""
    names = [s["name"] for s in result.scenarios]
    shown = names if len(names) * len(result.items) <= 9 else [scenario]
    groups = [(name, item) for name in shown for item in result.items]
    width = 0.8 / max(len(groups), 1)
    hatches = ("", "//", "..", "xx", "\\\\", "++", "oo", "**", "--")
    colour_for = colour_of(result)
    for index, (name, item) in enumerate(groups):
        entries = [row for row in result.schedule if row["scenario"] == name and row["item"] == item]
        offsets = [row["period"] - 0.4 + width * (index + 0.5) for row in entries]
        colour = colour_for(item)
        label = item if len(shown) == 1 else f"{item}, {name}"
        ax.bar(offsets, [row["ordered"] for row in entries], width=width, color=colour,
               hatch=hatches[shown.index(name) % len(hatches)], edgecolor="white", label=f"{label} ordered")
        arrivals = [(row["period"] - 0.4 + width * (index + 0.5), row["arriving"]) for row in entries
                    if row["arriving"] > 0]
        if arrivals:
            ax.scatter([x for x, _ in arrivals], [a for _, a in arrivals], marker="v", color="black", zorder=3,
                       s=18, label="arriving" if index == 0 else None)
    ax.set_ylabel(f"{result.unit or 'units'}")
    ax.set_title("orders (bars) and arrivals (triangles)" + (f", {scenario}" if shown == [scenario]
                                                              and len(names) > 1 else ""), fontsize=10)
    ax.legend(fontsize=7)


def _costs(ax: Any, result: Any, rows: list[dict], periods: list[int]) -> None:
    capex = [row["capex"] for row in rows]
    opex = [row["opex"] for row in rows]
    ax.bar(periods, capex, width=0.7, color="#555555", label="capex")
    ax.bar(periods, opex, bottom=capex, width=0.7, color="#bbbbbb", label="opex")
    budgeted = [(p, row["budget"]) for p, row in zip(periods, rows, strict=True) if row["budget"] is not None]
    if budgeted:
        ax.hlines([b for _, b in budgeted], [p - 0.45 for p, _ in budgeted], [p + 0.45 for p, _ in budgeted],
                  color="#d1495b", linestyles="--", label="capital budget")
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: amount(value)))
    ax.set_ylabel(f"cost per period{f' ({result.currency})' if result.currency else ''}")
    scenario = rows[0]["scenario"] if rows and len(result.scenarios) > 1 else None
    ax.set_title("spending per period (undiscounted)" + (f", {scenario}" if scenario else ""), fontsize=10)
    ax.legend(fontsize=7)


def _service(ax: Any, result: Any, periods: list[int]) -> None:
    first = next(iter(result.periods[0]["checks"]), "") if result.periods else ""
    match = re.match(r"^([A-Za-z_0-9]+)(>=|<=)(.+)$", first)
    if match is None:
        return
    metric, op, value = match.group(1), match.group(2), float(match.group(3))
    series = {s["name"]: [row["metrics"].get(metric, float("nan")) for row in result.periods
                          if row["scenario"] == s["name"]] for s in result.scenarios}
    if len(series) > 1:
        low = [min(v[t] for v in series.values()) for t in range(len(periods))]
        high = [max(v[t] for v in series.values()) for t in range(len(periods))]
        ax.fill_between(periods, low, high, color=PALETTE[2], alpha=0.25, label="range over scenarios")
    for index, (name, values) in enumerate(series.items()):
        ax.plot(periods, values, marker="o", color=PALETTE[(index + 2) % len(PALETTE)], label=name)
    policy = next((row["policy"] for row in result.periods if row.get("policy")), None)
    under = {}
    if policy:  # the policy that runs, judged on each period: where it falls short of the schedule's
        under = {s["name"]: [(row.get("policy_metrics") or {}).get(metric, float("nan")) for row in result.periods
                             if row["scenario"] == s["name"]] for s in result.scenarios}
        for index, (name, values) in enumerate(under.items()):
            ax.plot(periods, values, marker="x", linestyle=":", color=PALETTE[(index + 2) % len(PALETTE)],
                    label=f"{name} under {policy}" if len(under) > 1 else f"under {policy}")
    ax.axhline(value, color="#d1495b", linestyle="--", label=f"target {op} {value:g}")
    finite = [v for values in [*series.values(), *under.values()] for v in values if v == v]
    ax.set_ylim(0, max([value, *finite]) * 1.15 if finite or value else 1.0)
    ax.ticklabel_format(axis="y", useOffset=False)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} per period, judged" + (f" (x: {policy}'s own plan)" if policy else ""), fontsize=10)
    ax.legend(fontsize=7)


def _money(value: float | None, currency: str) -> str:
    if value is None:
        return "-"
    return f"{amount(value)}{f' {currency}' if currency else ''}"


def amount(value: float) -> str:
    """Money and counts as people write them: ``2,110,970``, ``39.4``, ``0.25``."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.4g}"
