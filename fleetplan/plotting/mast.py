"""Pictures of the ``mast`` simulator (MAST §5.5-5.6).

* :func:`plot_run` — one run (``fleetplan simulate mast --plot/--out``): per priority level the
  waits (whole wait and the SLO's within-quota start latency, median and 95th percentile, with
  the SLO drawn) and what is still waiting at the end; the SLO violation rate per level with its
  counts (a panel that says "no violation" rather than lines at 0% on a 0-0.05% axis); and over
  time the GPU allocation rate and the scheduling events.
* :func:`plot_compare` — §5.6's comparison: SLO violations over the trace for MAST and the
  federated scheduler, all within-quota workloads and high-priority (levels 0-2) ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.plotting.style import (
    LEGEND_SIZE,
    PANEL_TITLE_SIZE,
    PRIORITY_COLOURS,
    colour,
    grid,
    line_style,
    new_figure,
    save,
)
from fleetplan.plotting.style import title as suptitle
from fleetplan.sim.engine import SimResult

LEVELS = 7


def _clock(result: SimResult, start_hour: float) -> np.ndarray:
    return np.asarray(result.series["time"], dtype=float) + start_hour


def _level_values(result: SimResult, name: str) -> np.ndarray:
    groups = result.groups.get("priority", {})
    return np.array([groups.get(str(p), {}).get(name, math.nan) for p in range(LEVELS)], dtype=float)


def _waits_panel(ax: Any, result: SimResult) -> None:
    """Median and P95 of the whole wait and of the within-quota start latency per level, on a
    log axis when they span more than 30x, the SLO as a line, waiting workloads written above."""
    x = np.arange(LEVELS)
    bars = [("wait_p50_minutes", "whole wait, median", 0), ("wait_p95_minutes", "whole wait, P95", 1),
            ("latency_p50_minutes", "start latency within quota, median", 2),
            ("latency_p95_minutes", "start latency within quota, P95", 3)]
    width = 0.2
    values = {name: _level_values(result, name) for name, _, _ in bars}
    for offset, (name, label, index) in enumerate(bars):
        heights = values[name]
        ax.bar(x + (offset - 1.5) * width, np.where(np.isfinite(heights) & (heights > 0), heights, np.nan), width,
               label=label, color=colour(index), alpha=0.9 if "P95" in label else 0.6)
    finite = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in values.values()])
    slo = result.metrics.get("slo_minutes")
    if finite.size and finite.max() > 30 * max(finite.min(), 1e-3):
        ax.set_yscale("log")
        ax.set_ylabel("minutes (log scale)")
    else:
        ax.set_ylabel("minutes")
    if slo:
        ax.axhline(slo, color="black", ls="--", lw=1, label=f"SLO {slo:g} min (within quota)")
    waiting = _level_values(result, "waiting_at_end")
    low, top = ax.get_ylim()
    top = top * 4 if ax.get_yscale() == "log" else top * 1.2  # room for the counts above the bars
    ax.set_ylim(low, top)
    for p in range(LEVELS):
        if waiting[p] > 0:
            ax.text(p, top, f"{waiting[p]:.0f}\nwaiting", ha="center", va="top", fontsize=7, color=colour(1))
    ax.set_xticks(x, [f"P{p}" for p in range(LEVELS)])
    ax.set_xlabel("priority level (P0 highest)")
    ax.set_title(f"waits per priority (overall P95 whole wait {result.metrics.get('wait_p95_minutes', math.nan):.0f} "
                 f"min; {result.metrics.get('waiting_at_end', 0):.0f} still waiting at the end)",
                 fontsize=PANEL_TITLE_SIZE)
    grid(ax, "y")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.12), ncol=2, frameon=False)


def _violations_panel(ax: Any, result: SimResult) -> None:
    """SLO violation rate per level with counts; a clear "no violation" when there is none."""
    rate = _level_values(result, "slo_violation_rate")
    within = _level_values(result, "within_quota_events")
    x = np.arange(LEVELS)
    shown = np.where(np.isfinite(rate), 100 * rate, 0.0)
    ax.bar(x, shown, 0.6, color=PRIORITY_COLOURS)
    top = max(5.0, 1.25 * float(shown.max()))
    ax.set_ylim(0, top)
    for p in range(LEVELS):
        label = "-" if not np.isfinite(rate[p]) else f"{100 * rate[p]:.1f}%"
        ax.text(p, shown[p] + top * 0.02, f"{label}\nof {within[p]:.0f}", ha="center", va="bottom", fontsize=7)
    if np.nanmax(np.where(np.isfinite(rate), rate, 0.0)) == 0:
        ax.text(0.5, 0.6, "no SLO violation at any level", ha="center", transform=ax.transAxes,
                fontsize=PANEL_TITLE_SIZE, color="0.3")
    ax.set_xticks(x, [f"P{p}" for p in range(LEVELS)])
    ax.set_xlabel("priority level (P0 highest); under each: within-quota events")
    ax.set_ylabel("SLO violation rate (%)")
    ax.set_title(f"SLO violations per priority (all: {100 * result.metrics.get('slo_violation_rate', 0):.2f}%)",
                 fontsize=PANEL_TITLE_SIZE)
    grid(ax, "y")


def _time_panel(ax: Any, result: SimResult, start_hour: float) -> None:
    t = _clock(result, start_hour)
    ax.plot(t, 100 * np.asarray(result.series["gpu_allocation_rate"], dtype=float), color=colour(2), lw=2,
            label="GPU allocation rate (%)")
    ax.set_ylim(0, 105)
    ax.set_ylabel("GPU allocation rate (%)")
    ax.set_xlabel("hour of the day" if start_hour else "hours into the trace")
    events = ax.twinx()
    events.bar(t, np.asarray(result.series["scheduling_events"], dtype=float),
               width=0.8 * (t[1] - t[0]) if len(t) > 1 else 0.4, color=colour(0), alpha=0.35,
               label="scheduling events per bucket")
    events.set_ylabel("scheduling events per bucket")
    ax.set_zorder(events.get_zorder() + 1)
    ax.patch.set_visible(False)
    lines, labels = ax.get_legend_handles_labels()
    more, more_labels = events.get_legend_handles_labels()
    ax.legend(lines + more, labels + more_labels, fontsize=LEGEND_SIZE, loc="lower left")
    ax.set_title(f"allocation over time (run: {100 * result.metrics.get('gpu_allocation_rate', 0):.1f}%)",
                 fontsize=PANEL_TITLE_SIZE)
    grid(ax, "y")


def plot_run(result: SimResult, path: str | Path | None = None, *, start_hour: float = 0.0,
             title: str | None = None) -> Any:
    """One run: waits and SLO violations per priority level, allocation over time."""
    figure, (waits, violations, over_time) = new_figure(17, 5.2, 1, 3)
    _waits_panel(waits, result)
    _violations_panel(violations, result)
    _time_panel(over_time, result, start_hour)
    suptitle(figure, title or f"mast / {result.scheduler} (seed {result.seed}): "
                              f"{result.metrics.get('workloads', 0):.0f} workloads, "
                              f"{result.metrics.get('regions', 0):.0f} regions")
    save(figure, path)
    return figure


def plot_compare(results: Mapping[str, SimResult], path: str | Path | None = None, *, start_hour: float = 0.0,
                 title: str | None = None) -> Any:
    """§5.6: SLO violation rate over the trace for each scheduler (all / priority 0-2)."""
    figure, axes = new_figure(11, 4.2, 1, 2, sharey=True)
    for index, (name, result) in enumerate(results.items()):
        t = _clock(result, start_hour)
        style = line_style(index)
        axes[0].plot(t, 100 * np.asarray(result.series["slo_violation_rate"], dtype=float), ms=3, label=name,
                     **style)
        axes[1].plot(t, 100 * np.asarray(result.series["slo_violation_rate_high"], dtype=float), ms=3, label=name,
                     **style)
    axes[0].set_title("within-quota workloads, all priorities", fontsize=PANEL_TITLE_SIZE)
    axes[1].set_title("within-quota workloads, priority 0-2", fontsize=PANEL_TITLE_SIZE)
    axes[0].set_ylabel("SLO violation rate (%)")
    for ax in axes:
        ax.set_xlabel("hour of the day" if start_hour else "hours into the trace")
        grid(ax)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=LEGEND_SIZE)
    suptitle(figure, title or "MAST vs federated (MAST §5.6)")
    save(figure, path)
    return figure


def plot_files(result: SimResult, folder: str | Path) -> list[Path]:
    """``simulate mast --out DIR``: the run's figure."""
    path = Path(folder) / "mast.png"
    plot_run(result, path)
    return [path]


__all__ = ["plot_compare", "plot_files", "plot_run"]
