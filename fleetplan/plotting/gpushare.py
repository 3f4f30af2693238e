"""Pictures of the ``gpushare`` simulator, in the manner of the FGD paper's Figures 7 and 9
(Weng, Yang et al., USENIX ATC 2023): the share of the cluster's GPUs allocated, and fragmented,
as the arrived GPU demand grows to 130 % of the cluster's.

* :func:`plot_run` — one run (one policy): both curves.
* :func:`plot_policies` — several policies on one trace: allocation and fragmentation side by
  side, one line per policy (the mean over seeds when several are given).
* :func:`plot_sensitivity` — Figures 11-14: per trace family the GPUs left unallocated at 100 % of
  arrivals, one bar per policy and trace variant, the paper's own runs marked beside.
* :func:`plot_gpushare` — a plan (``fleetplan plot``): per GPU model the GPU milli allocated,
  idle but fragmented and idle and usable; per task class (CPU, sharing, one GPU, several)
  the tasks placed and pending.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def plot_sensitivity(families: Sequence[tuple[str, str, Sequence[tuple[str, str]]]],
                     ours: Mapping[tuple[str, str], Sequence[float]],
                     paper: Mapping[tuple[str, str], Sequence[float]] | None = None,
                     path: str | Path | None = None, *, title: str | None = None) -> Any:
    """Figures 11-14: one panel per ``(figure, axis label, ((trace, tick label), ...))`` of
    ``families``; per trace one bar per policy, the mean over seeds of ``ours[(trace, policy)]``
    (GPUs unallocated at 100 % of arrivals, % of the cluster's) with its standard deviation, and
    a black mark at the mean of ``paper[(trace, policy)]`` where the paper's runs have one."""
    policies = list(dict.fromkeys(policy for _, policy in ours))
    figure, axes = new_figure(12, 7.2, 2, 2)
    width = 0.8 / max(len(policies), 1)
    for ax, (name, axis, traces) in zip(np.ravel(axes), families, strict=False):
        x = np.arange(len(traces))
        for index, policy in enumerate(policies):
            values = [np.asarray(ours.get((trace, policy), []), dtype=float) for trace, _ in traces]
            means = [v.mean() if v.size else np.nan for v in values]
            spread = [v.std(ddof=1) if v.size > 1 else 0.0 for v in values]
            at = x - 0.4 + width * (index + 0.5)
            ax.bar(at, means, width, yerr=spread, color=colour(index), label=policy, capsize=1.5,
                   error_kw={"lw": 0.7})
            if paper:
                theirs = [np.mean(paper[(trace, policy)]) if paper.get((trace, policy)) else np.nan
                          for trace, _ in traces]
                ax.plot(at, theirs, ls="none", marker="_", markersize=9, mew=2, color="black",
                        label="the paper's runs" if index == 0 else None)
        ax.set_xticks(x, [label for _, label in traces])
        ax.set_xlabel(axis)
        ax.set_ylabel("GPUs unallocated [%]")
        ax.set_title(name, fontsize=PANEL_TITLE_SIZE)
        grid(ax, "y")
    handles, labels = np.ravel(axes)[0].get_legend_handles_labels()
    # below the panels: inside, it would hide the tallest bars
    figure.legend(handles, labels, fontsize=LEGEND_SIZE, ncol=len(labels), loc="outside lower center")
    suptitle(figure, title or "GPUs unallocated when the arrived demand reaches 100 % of the cluster's")
    save(figure, path)
    return figure


def plot_gpushare(instance: Any, plan: Any, path: str | Path | None = None) -> Any:
    """A plan: GPUs per model (allocated, fragmented, usable idle) and tasks per class."""
    from fleetplan.instances.gpushare.evaluate import evaluate

    verdict = evaluate(instance, plan)
    a = instance.arrays()
    nodes = verdict.breakdown["nodes"]
    used = np.asarray(nodes["gpu_milli_used"], dtype=float)
    fragmented = np.asarray(nodes["fragmentation_milli"], dtype=float)
    capacity = a.node_gpus * 1000.0
    idle = np.maximum(capacity - used, 0.0)
    figure, axes = new_figure(11, 4.2, 1, 2)
    models = [m for m in a.models if m] or a.models
    rows = [np.flatnonzero(np.asarray(a.models)[a.node_model] == m) for m in models]
    x = np.arange(len(models))
    allocated = np.array([used[r].sum() for r in rows]) / 1000
    lost = np.array([np.minimum(fragmented[r], idle[r]).sum() for r in rows]) / 1000
    usable = np.array([idle[r].sum() for r in rows]) / 1000 - lost
    axes[0].bar(x, allocated, color=colour(0), label="allocated")
    axes[0].bar(x, lost, bottom=allocated, color=colour(1), label="idle, fragmented")
    axes[0].bar(x, usable, bottom=allocated + lost, color="0.85", label="idle, usable")
    axes[0].set_xticks(x, models, rotation=30, ha="right")
    axes[0].set_ylim(0, max(float((allocated + lost + usable).max(initial=0)), 1.0) * 1.2)
    axes[0].set_ylabel("GPUs")
    axes[0].set_title("(a) GPUs per model: allocated, fragmented, usable", fontsize=PANEL_TITLE_SIZE)
    axes[0].legend(fontsize=LEGEND_SIZE)
    grid(axes[0], "y")
    placed = np.zeros(a.num_tasks, dtype=bool)
    index = {t: j for j, t in enumerate(a.task_ids)}
    placed[[index[t] for t in plan.assignments.task]] = True
    classes = {"CPU": a.task_num_gpu == 0, "sharing": (a.task_num_gpu == 1) & (a.task_gpu_milli < 1000),
               "one GPU": (a.task_num_gpu == 1) & (a.task_gpu_milli == 1000), "several GPUs": a.task_num_gpu > 1}
    x = np.arange(len(classes))
    done = np.array([(mask & placed).sum() for mask in classes.values()])
    waiting = np.array([(mask & ~placed).sum() for mask in classes.values()])
    axes[1].bar(x, done, color=colour(0), label="placed")
    axes[1].bar(x, waiting, bottom=done, color=colour(1), label="pending")
    axes[1].set_xticks(x, list(classes))
    axes[1].set_ylim(0, max(float((done + waiting).max(initial=0)), 1.0) * 1.2)  # room for the legend
    axes[1].set_ylabel("tasks")
    axes[1].set_title("(b) tasks placed and pending per class", fontsize=PANEL_TITLE_SIZE)
    axes[1].legend(fontsize=LEGEND_SIZE)
    grid(axes[1], "y")
    m = verdict.metrics
    suptitle(figure, f"{instance.name or 'gpushare'}: {plan.solver or 'plan'} — {100 * m['gpu_allocated_share']:.1f}% "
                     f"of the GPUs allocated, {100 * m['fragmentation_share']:.1f}% fragmented")
    save(figure, path)
    return figure


def plot_files(result: SimResult, folder: str | Path) -> list[Path]:
    """``simulate gpushare --out DIR``: the run's two curves."""
    path = Path(folder) / "gpushare.png"
    plot_run(result, path)
    return [path]


__all__ = ["plot_files", "plot_gpushare", "plot_policies", "plot_run"]
