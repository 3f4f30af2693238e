"""Pictures of the ``cluster`` simulator (Gavel §7, Astraea §6).

* :func:`plot_run` — one run (``fleetplan simulate cluster --plot/--out``): the JCT distribution,
  each tenant's fairness over time, GPU utilisation over time;
* :func:`plot_jct_cdf` — JCT distributions of several runs (Gavel Figure 9b): every curve has
  its own marker and dash, and curves that coincide are named as such, so none hides another;
* :func:`plot_jct_vs_load` — average JCT against the input job rate (Gavel Figure 9a);
* :func:`plot_tenant_ltgf` — each tenant's LTGF per window (Astraea Figure 11) as the windows
  themselves, not box plots: a value above the drawn range is a triangle at its edge and counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.plotting.style import (
    LEGEND_SIZE,
    PANEL_TITLE_SIZE,
    colour,
    grid,
    line_style,
    new_figure,
    save,
)
from fleetplan.plotting.style import title as suptitle
from fleetplan.sim.engine import SimResult

# Fairness ratios are drawn up to this value; windows above it are marked at the edge.
RHO_SHOWN = 3.0


def _coinciding(curves: Mapping[str, np.ndarray]) -> list[list[str]]:
    """Groups of labels whose curves are identical (two or more)."""
    groups: list[list[str]] = []
    for label, values in curves.items():
        for group in groups:
            other = curves[group[0]]
            if other.shape == values.shape and np.allclose(other, values, rtol=1e-9, atol=0):
                group.append(label)
                break
        else:
            groups.append([label])
    return [group for group in groups if len(group) > 1]


def _cdf_panel(ax: Any, curves: Mapping[str, np.ndarray]) -> None:
    """JCT distributions in hours (log x), one styled curve each, coincidences said."""
    for index, (label, hours) in enumerate(curves.items()):
        if not len(hours):
            continue
        fraction = np.arange(1, len(hours) + 1) / len(hours)
        style = line_style(index)
        ax.plot(hours, fraction, label=label, lw=1.6, ms=5, markevery=max(1, len(hours) // 8),
                markerfacecolor="none", **style)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("share of finished jobs")
    ax.set_ylim(0, 1.02)
    grid(ax)
    same = _coinciding(curves)
    if same:
        note = "; ".join(" = ".join(group) for group in same)
        ax.text(0.02, 0.97, f"coincide: {note}", transform=ax.transAxes, va="top", fontsize=LEGEND_SIZE,
                bbox={"facecolor": "white", "edgecolor": "0.7", "alpha": 0.9})
    ax.legend(fontsize=LEGEND_SIZE, loc="lower right")


def plot_jct_cdf(runs: Mapping[str, Any], path: str | Path | None = None, title: str = "") -> Any:
    """CDF of job completion times, one curve per run (``runs[label]``: a ClusterRun)."""
    figure, ax = new_figure(6.5, 4.2)
    curves = {label: np.sort(run.jct[np.isfinite(run.jct)]) / 3600.0 for label, run in runs.items()}
    _cdf_panel(ax, curves)
    ax.set_title(title or "job completion times", fontsize=PANEL_TITLE_SIZE)
    save(figure, path)
    return figure


def plot_jct_vs_load(points: Mapping[str, list[tuple[float, float, float]]], path: str | Path | None = None,
                     title: str = "") -> Any:
    """Average JCT (hours) against input job rate (jobs/hour): ``points[label] = [(rate, mean,
    std), ...]``, the band one standard deviation over seeds (Gavel Figure 9a)."""
    figure, ax = new_figure(6.5, 4.2)
    for index, (label, rows) in enumerate(points.items()):
        rows = sorted(rows)
        rate = np.array([r[0] for r in rows])
        mean = np.array([r[1] for r in rows]) / 3600.0
        std = np.array([r[2] for r in rows]) / 3600.0
        style = line_style(index)
        ax.plot(rate, mean, label=label, **style)
        ax.fill_between(rate, mean - std, mean + std, alpha=0.2, color=style["color"], lw=0)
    ax.set_xlabel("input job rate (jobs/hour)")
    ax.set_ylabel("average JCT (hours)")
    ax.set_title(title or "average JCT against load", fontsize=PANEL_TITLE_SIZE)
    grid(ax)
    ax.legend(fontsize=LEGEND_SIZE)
    save(figure, path)
    return figure


def _rho_strip(ax: Any, columns: list[tuple[str, np.ndarray]], window_h: float) -> None:
    """Each tenant's per-window rho as dots (jittered), values above :data:`RHO_SHOWN` as
    triangles at the edge with their count, the fair share at 1."""
    rng = np.random.default_rng(0)  # jitter only: the same picture every time

    for k, (_name, values) in enumerate(columns):
        shown = np.minimum(values, RHO_SHOWN)
        above = values > RHO_SHOWN
        x = k + rng.uniform(-0.28, 0.28, len(values))
        ax.scatter(x[~above], shown[~above], s=9, alpha=0.55, color=colour(0), lw=0)
        if above.any():

            ax.scatter(x[above], np.full(int(above.sum()), RHO_SHOWN), marker="^", s=16, color=colour(1), lw=0)
            ax.text(k, RHO_SHOWN * 1.04, f"{int(above.sum())}", ha="center", fontsize=7, color=colour(1))
        below = values < 1 - 1e-6
        ax.text(k, -0.17, f"{100 * below.mean():.0f}%", ha="center", fontsize=7, color="0.3")
    ax.axhline(1.0, color="black", ls="--", lw=1)
    ax.set_xticks(range(len(columns)), [name.replace("tenant", "T") for name, _ in columns],
                  rotation=45 if len(columns) > 10 else 0)
    ax.set_ylim(-0.25, RHO_SHOWN * 1.12)
    ax.set_ylabel(f"rho per {window_h:g} h window (1: fair share)")
    note = (f"each dot a window with demand; triangles: above {RHO_SHOWN:g} (count above), "
            "% under a tenant: windows below its fair share")
    ax.set_xlabel(f"tenant — {note}", fontsize=LEGEND_SIZE)
    grid(ax, "y")


def plot_tenant_ltgf(run: Any, path: str | Path | None = None, title: str = "") -> Any:
    """Each tenant's LTGF rho^tenant per window (Astraea Figure 11), every window drawn."""
    columns = []
    for k, name in enumerate(run.trace.tenant_names):
        col = run.tenant_rho[:, k] if run.tenant_rho.size else np.zeros(0)
        col = col[np.isfinite(col)]
        if len(col):
            columns.append((name, col))
    figure, ax = new_figure(max(6.0, 0.5 * len(columns) + 3), 4.5)
    _rho_strip(ax, columns, run.window_s / 3600)
    ax.set_title(title or f"tenant fairness over windows, {run.result.scheduler}", fontsize=PANEL_TITLE_SIZE)
    save(figure, path)
    return figure


def plot_run(result: SimResult, path: str | Path | None = None, title: str = "") -> Any:
    """One run: the JCT distribution (from its percentiles), each tenant's rho per window over
    time (lines; above :data:`RHO_SHOWN` at the edge), GPU utilisation over time."""
    figure, (jct, fairness, usage) = new_figure(15, 4.4, 1, 3)
    percentiles = result.groups.get("jct_percentile", {})
    if percentiles:
        hours = np.array([percentiles[str(q)]["jct_s"] for q in range(101)]) / 3600.0
        jct.plot(hours, np.arange(101) / 100.0, color=colour(0), lw=1.8)
        jct.set_xscale("log")
        jct.set_ylim(0, 1.02)
        finished = result.metrics.get("jobs_finished", 0)
        jct.set_title(f"JCT of the {finished:.0f} finished jobs (median {np.median(hours):.3g} h)",
                      fontsize=PANEL_TITLE_SIZE)
    else:
        jct.text(0.5, 0.5, "no job finished", ha="center", transform=jct.transAxes)
        jct.set_title("JCT distribution", fontsize=PANEL_TITLE_SIZE)
    jct.set_xlabel("job completion time (hours, log scale)")
    jct.set_ylabel("share of finished jobs")
    grid(jct)

    time_h = np.asarray(result.series.get("time", []), dtype=float) / 3600.0
    tenants = [key for key in result.series if key.startswith("ltgf_")]
    for index, key in enumerate(tenants):
        values = np.asarray(result.series[key], dtype=float)
        fairness.plot(time_h, np.minimum(values, RHO_SHOWN), lw=1.0, alpha=0.8, color=colour(index),
                      label=key[len("ltgf_"):] if len(tenants) <= 8 else None)
        above = values > RHO_SHOWN
        if above.any():
            fairness.scatter(time_h[above], np.full(int(above.sum()), RHO_SHOWN), marker="^", s=12,
                             color=colour(index))
    fairness.axhline(1.0, color="black", ls="--", lw=1)
    fairness.set_ylim(0, RHO_SHOWN * 1.08)
    fairness.set_xlabel("simulated time (hours)")
    fairness.set_ylabel(f"tenant rho per window (1: fair share; ^: above {RHO_SHOWN:g})")
    unfair = result.metrics.get("tenant_unfairness_ratio")
    fairness.set_title(f"per-tenant fairness over time ({len(tenants)} tenants"
                       + (f"; {100 * unfair:.0f}% of windows below fair share)" if unfair is not None else ")"),
                       fontsize=PANEL_TITLE_SIZE)
    if 0 < len(tenants) <= 8:
        fairness.legend(fontsize=LEGEND_SIZE, ncol=2)
    grid(fairness)

    if len(time_h):
        usage.plot(time_h, 100 * np.asarray(result.series["utilization"], dtype=float), color=colour(2), lw=1.4)
    usage.set_ylim(0, 105)
    usage.set_xlabel("simulated time (hours)")
    usage.set_ylabel("GPUs busy (%)")
    usage.set_title(f"GPU utilisation (run: {100 * result.metrics.get('utilization', 0):.1f}%)",
                    fontsize=PANEL_TITLE_SIZE)
    grid(usage)
    suptitle(figure, title or f"cluster / {result.scheduler} (seed {result.seed}): {result.message}")
    save(figure, path)
    return figure


def plot_files(result: SimResult, folder: str | Path) -> list[Path]:
    """``simulate cluster --out DIR``: the run's figure."""
    path = Path(folder) / "cluster.png"
    plot_run(result, path)
    return [path]


__all__ = ["RHO_SHOWN", "plot_files", "plot_jct_cdf", "plot_jct_vs_load", "plot_run", "plot_tenant_ltgf"]
