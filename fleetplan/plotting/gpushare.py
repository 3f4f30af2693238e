"""Pictures of the ``gpushare`` simulator, in the manner of the FGD paper's Figures 7 and 9
(Weng, Yang et al., USENIX ATC 2023): the share of the cluster's GPUs allocated, and fragmented,
as the arrived GPU demand grows to 130 % of the cluster's.

* :func:`plot_run` — one run (one policy): both curves.
* :func:`plot_policies` — several policies on one trace: allocation and fragmentation side by
  side, one line per policy (the mean over seeds when several are given).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.plotting.style import (
    LEGEND_SIZE,
    PANEL_TITLE_SIZE,
    grid,
    line_style,
    new_figure,
    save,
)
from fleetplan.plotting.style import title as suptitle
from fleetplan.sim.engine import SimResult


def plot_run(result: SimResult, path: str | Path | None = None) -> Any:
    """One policy's GPU allocation and fragmentation against the arrived GPU demand."""
    return plot_policies({result.scheduler: [result]}, path,
                         title=f"gpushare: {result.scheduler}, seed {result.seed}")


def plot_policies(runs: Mapping[str, Sequence[SimResult | Mapping[str, Any]]], path: str | Path | None = None, *,
                  title: str = "gpushare: GPU allocation and fragmentation as tasks arrive") -> Any:
    """Figures 7 and 9: per policy the mean over its runs of the allocated and fragmented GPU
    shares (each run a :class:`SimResult` or a mapping with its curve columns)."""
    figure, axes = new_figure(11, 4.2, 1, 2, sharex=True)
    panels = (("allocated_gpu_pct", "(a) GPUs allocated [% of the cluster]"),
              ("fragmentation_gpu_pct", "(b) GPUs fragmented [% of the cluster]"))
    for index, (policy, results) in enumerate(runs.items()):
        series = [r.series if isinstance(r, SimResult) else r for r in results]
        x = np.asarray(series[0]["arrived_pct"], dtype=float)
        for ax, (key, _) in zip(axes, panels, strict=True):
            values = np.mean([np.asarray(s[key], dtype=float)[: len(x)] for s in series], axis=0)
            ax.plot(x, values, label=policy, lw=1.6, markevery=10, markersize=4, **line_style(index))
    for ax, (_, label) in zip(axes, panels, strict=True):
        ax.set_title(label, fontsize=PANEL_TITLE_SIZE)
        ax.set_xlabel("arrived GPU demand [% of the cluster's GPUs]")
        grid(ax)
    axes[0].plot([0, 100], [0, 100], color="0.7", lw=0.8, ls=":", label="all placed")
    axes[0].legend(fontsize=LEGEND_SIZE, loc="upper left")
    suptitle(figure, title)
    save(figure, path)
    return figure


def plot_files(result: SimResult, folder: str | Path) -> list[Path]:
    """``simulate gpushare --out DIR``: the run's two curves."""
    path = Path(folder) / "gpushare.png"
    plot_run(result, path)
    return [path]


__all__ = ["plot_files", "plot_policies", "plot_run"]
