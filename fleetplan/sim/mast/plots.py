"""Figures of MAST runs (matplotlib is imported when a plot is drawn).

* :func:`plot` — one run: SLO violation rate over the day per priority group, with the GPU
  allocation rate.
* :func:`plot_compare` — §5.6's comparison: SLO violations over the trace for MAST and the
  federated scheduler, all within-quota workloads and high-priority (levels 0-2) ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from fleetplan.instances.outputs import save_figure
from fleetplan.sim.engine import SimResult


def _clock(result: SimResult, start_hour: float) -> np.ndarray:
    return np.asarray(result.series["time"], dtype=float) + start_hour


def plot(result: SimResult, path: str | Path, *, start_hour: float = 0.0, title: str | None = None) -> Path:
    """One run: SLO violation rate by priority group over time (left), allocation rate (right axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result.series
    t = _clock(result, start_hour)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(t, 100 * np.asarray(s["slo_violation_rate"], dtype=float), "k-o", ms=3, label="all within quota")
    ax.plot(t, 100 * np.asarray(s["slo_violation_rate_high"], dtype=float), "r-s", ms=3, label="priority 0-2")
    ax.plot(t, 100 * np.asarray(s["slo_violation_rate_p3"], dtype=float), "b--", lw=1, label="priority 3")
    ax.set_ylabel("SLO violation rate [%]")
    ax.set_xlabel("hour of the day" if start_hour else "hours into the trace")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    right = ax.twinx()
    right.plot(t, 100 * np.asarray(s["gpu_allocation_rate"], dtype=float), color="0.6", lw=2, label="GPU allocation")
    right.set_ylabel("GPU allocation rate [%]")
    right.set_ylim(0, 105)
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], loc="upper left", fontsize=8)
    ax.set_title(title or f"MAST simulator: {result.scheduler} (seed {result.seed})")
    fig.tight_layout()
    out = Path(path)
    save_figure(fig, out, dpi=110)
    plt.close(fig)
    return out


def plot_compare(results: Mapping[str, SimResult], path: str | Path, *, start_hour: float = 0.0,
                 title: str | None = None) -> Path:
    """§5.6: SLO violation rate over the trace for each scheduler (all / priority 0-2)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    colors = {"mast": "tab:blue", "federated": "tab:red"}
    for name, result in results.items():
        t = _clock(result, start_hour)
        c = colors.get(name)
        axes[0].plot(t, 100 * np.asarray(result.series["slo_violation_rate"], dtype=float), "-o", ms=3, color=c,
                     label=name)
        axes[1].plot(t, 100 * np.asarray(result.series["slo_violation_rate_high"], dtype=float), "-o", ms=3,
                     color=c, label=name)
    axes[0].set_title("within-quota workloads, all priorities", fontsize=10)
    axes[1].set_title("within-quota workloads, priority 0-2", fontsize=10)
    axes[0].set_ylabel("SLO violation rate [%]")
    for ax in axes:
        ax.set_xlabel("hour of the day" if start_hour else "hours into the trace")
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.suptitle(title or "MAST vs federated (MAST §5.6)")
    fig.tight_layout()
    out = Path(path)
    save_figure(fig, out, dpi=110)
    plt.close(fig)
    return out


__all__ = ["plot", "plot_compare"]
