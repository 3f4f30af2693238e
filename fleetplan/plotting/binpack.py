"""Pictures of the ``binpack`` kind (RMS, MAST §4.3).

* :func:`plot_binpack` — a plan (``fleetplan plot``): per cluster the GPUs held by running jobs
  that stay, preempted by priority, taken by the placed workloads and left free; and each
  pending workload's GPUs, placed or waiting, with its priority;
* :func:`plot_comparison_report` — the greedy's gap to the exact optimum and the batch model's
  gain over one-at-a-time placement (``python -m fleetplan.benchmarks.experiments.binpack``).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.instances.binpack import PRIORITY_LEVELS
from fleetplan.instances.outputs import save_figure
from fleetplan.plotting.style import (
    LEGEND_SIZE,
    PANEL_TITLE_SIZE,
    PRIORITY_COLOURS,
    colour,
    grid,
    new_figure,
    save,
)
from fleetplan.plotting.style import title as suptitle
from fleetplan.solvers.binpack.compare import WORSE_LABELS

# Beyond this many pending workloads the workload panel shows no labels.
MAX_WORKLOAD_LABELS = 40


def cluster_gpus(instance: Any, plan: Any) -> dict[str, np.ndarray]:
    """Per cluster (in the instance's order): GPUs held by running jobs that keep running, GPUs
    of the preempted jobs per priority (clusters x levels), GPUs the placed workloads take, and
    GPUs left free after the plan; with the capacity."""
    from fleetplan.instances.binpack.evaluate import Resolved, demand_table

    arrays = instance.arrays()
    resolved = Resolved(instance, plan)
    clusters = len(arrays.cluster_ids)
    capacity = np.bincount(arrays.machine_cluster, weights=arrays.capacity[:, 0], minlength=clusters)
    held = np.bincount(arrays.machine_cluster, weights=arrays.used[:, 0], minlength=clusters)
    preempted = np.zeros((clusters, PRIORITY_LEVELS))
    gone = np.unique(resolved.preempt_job_arr)
    for job in gone.tolist():
        rows = arrays.holdings_of(np.array([job]))
        level = int(arrays.running_priority[job])
        np.add.at(preempted[:, level], arrays.machine_cluster[arrays.hold_machine[rows]], arrays.hold_amount[rows, 0])
    flat, demand, _, _ = demand_table(instance)
    placed = np.zeros(clusters)
    if resolved.row_machine.size:
        index = np.array([flat[(w, j)] for w, j in zip(resolved.row_workload.tolist(), resolved.row_job.tolist(),
                                                          strict=True)], dtype=np.int64)
        np.add.at(placed, arrays.machine_cluster[resolved.row_machine], demand[index, 0] * resolved.row_tasks)
    stays = held - preempted.sum(axis=1)
    return {"capacity": capacity, "stays": stays, "preempted": preempted, "placed": placed,
            "free": capacity - stays - placed}


def plot_binpack(instance: Any, plan: Any, path: str | Path | None = None) -> Any:
    """The plan per cluster (GPUs) and per pending workload (placed or waiting)."""
    from fleetplan.instances import evaluate

    gpus = cluster_gpus(instance, plan)
    evaluation = evaluate(instance, plan)
    workloads = evaluation.breakdown["workloads"]
    arrays = instance.arrays()
    names = arrays.cluster_ids
    figure, (by_cluster, by_workload) = new_figure(14, 5.6, 1, 2, gridspec_kw={"width_ratios": [3, 2]})
    # Two bars per cluster: before (running jobs, the ones to be preempted by priority, free)
    # and after (the jobs that stay, the placed workloads, free).
    y = np.arange(len(names)) * 1.0
    height = 0.38
    before_y, after_y = y - height / 2 - 0.02, y + height / 2 + 0.02
    left = np.zeros(len(names))
    by_cluster.barh(before_y, gpus["stays"], height, color="0.75", label="held by running jobs that stay")
    by_cluster.barh(after_y, gpus["stays"], height, color="0.75")
    left += gpus["stays"]
    for level in range(PRIORITY_LEVELS):
        amount = gpus["preempted"][:, level]
        if amount.any():
            by_cluster.barh(before_y, amount, height, left=left, color=PRIORITY_COLOURS[level], hatch="//",
                            edgecolor="white", label=f"preempted by the plan, priority {level}")
            left += amount
    by_cluster.barh(before_y, gpus["capacity"] - left, height, left=left, color="white", edgecolor="0.5",
                    label="free")
    by_cluster.barh(after_y, gpus["placed"], height, left=gpus["stays"], color=colour(2),
                    label="taken by the placed workloads")
    by_cluster.barh(after_y, gpus["free"], height, left=gpus["stays"] + gpus["placed"], color="white",
                    edgecolor="0.5")
    for row, total in enumerate(gpus["capacity"]):
        by_cluster.text(total, before_y[row], " before", va="center", fontsize=7, color="0.4")
        by_cluster.text(total, after_y[row], f" after: {gpus['free'][row]:.0f} free", va="center", fontsize=7)
    by_cluster.set_yticks(y, names)
    by_cluster.invert_yaxis()
    by_cluster.set_xlabel("GPUs")
    by_cluster.set_xlim(0, gpus["capacity"].max() * 1.22)
    by_cluster.set_title("GPUs per cluster, before and after the plan", fontsize=PANEL_TITLE_SIZE)
    by_cluster.legend(fontsize=LEGEND_SIZE, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    grid(by_cluster, "x")
    # Each pending workload: its GPUs, green when placed, red when waiting, its priority.
    need = np.array([sum(job.tasks * job.gpus_per_task for job in workload.jobs) for workload in instance.workloads],
                    dtype=float)
    placed = np.array(workloads["placed"], dtype=bool)
    priority = workloads["priority"]
    rows = np.arange(len(need))
    by_workload.barh(rows, need, color=[colour(2) if ok else colour(1) for ok in placed])
    labelled = len(need) <= MAX_WORKLOAD_LABELS
    if labelled:
        by_workload.set_yticks(rows, [f"{name} (P{p})" for name, p in zip(workloads["id"], priority, strict=True)],
                               fontsize=LEGEND_SIZE)
        for row, ok in enumerate(placed):
            preempts = workloads["preempted_jobs"][row]
            note = ("placed" + (f", preempts {preempts}" if preempts else "")) if ok else "waiting"
            by_workload.text(need[row], row, f" {note}", va="center", fontsize=LEGEND_SIZE)
        by_workload.set_xlim(0, need.max() * 1.6 if len(need) else 1)
    else:
        by_workload.set_yticks([])
    by_workload.invert_yaxis()
    by_workload.set_xlabel("GPUs the workload needs")
    by_workload.set_title(f"pending workloads: {placed.sum()} placed (green), {(~placed).sum()} waiting (red)",
                          fontsize=PANEL_TITLE_SIZE)
    grid(by_workload, "x")
    from fleetplan.instances.binpack.evaluate import preemptions_by_priority

    suptitle(figure, f"{instance.name or 'binpack'}: {plan.solver or 'plan'} — preempted by priority: "
                     f"{preemptions_by_priority(evaluation.metrics)}")
    save(figure, path)
    return figure


def plot_comparison_report(report: dict[str, Any], path: str | Path | None = None) -> Any:
    """Draw the greedy's gap to the exact optimum and the batch model's gain over one-at-a-time
    placement (MAST §4.3, Table 1) from a :mod:`fleetplan.benchmarks.experiments.binpack` report."""
    from matplotlib.ticker import MaxNLocator

    gap = report["greedy_gap"]
    batch = report.get("batch_loss")
    figure, axes = new_figure(14, 10.5 if batch else 5.2, 2 if batch else 1, 2, squeeze=False)
    # (a) How often the greedy equals the optimum, by kind of region, and where it loses.
    ax = axes[0, 0]
    cases = ("no plan", "fits without preemption", "needs preemption")
    equal = [gap["by_case"].get(f"{c}:equal", 0) for c in cases]
    worse = [gap["by_case"].get(f"{c}:worse", 0) for c in cases]
    rows = [f"{c}\n({e + w} regions)" for c, e, w in zip(cases, equal, worse, strict=True)]
    ax.barh(rows, equal, color=colour(2), label="greedy equals the exact optimum")
    ax.barh(rows, worse, left=equal, color=colour(1), label="greedy worse")
    for y, (e, w) in enumerate(zip(equal, worse, strict=True)):
        text = (f"{e} equal" + (f", {w} worse" if w else "")) if e + w else "none"
        ax.text(e + w + 1, y, text, va="center", fontsize=10)
    ax.invert_yaxis()
    ax.set_xlim(0, max(e + w for e, w in zip(equal, worse, strict=True)) * 1.45 + 1)
    ax.set_xlabel("regions")
    ax.set_title(f"(a) rms-greedy against the CP-SAT optimum: equal in {gap['greedy_equal']} of "
                 f"{gap['compared']} regions", fontsize=11)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    # (b) Where the greedy is worse: by how much (extra jobs preempted, extra racks).
    ax = axes[0, 1]
    lost = gap["cases"]
    if lost:
        reasons = Counter(WORSE_LABELS.get(c["worse_in"], c["worse_in"]) for c in lost)
        values = sorted({c["extra_preempted"] for c in lost} | {c["extra_racks"] for c in lost})
        xs = list(range(int(min(values)), int(max(values)) + 1))
        width = 0.4
        for shift, key, label, color in ((-width / 2, "extra_preempted", "jobs preempted", colour(1)),
                                         (width / 2, "extra_racks", "racks used", colour(0))):
            counts = Counter(int(c[key]) for c in lost)
            ax.bar([x + shift for x in xs], [counts.get(x, 0) for x in xs], width, color=color,
                   label=f"{label}: greedy minus optimum")
        ax.set_xticks(xs)
        ax.set_xlim(xs[0] - 1, xs[-1] + 1)
        ax.set_ylim(0, ax.get_ylim()[1] * (1.25 + 0.08 * len(reasons)))  # room for the reasons' box
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("greedy minus exact optimum (jobs, or racks)")
        ax.set_ylabel("regions where the greedy is worse")
        why = "\n".join(f"{n} with {r}" for r, n in reasons.most_common())
        ax.set_title(f"(b) the {len(lost)} regions where the greedy is worse, by the first difference "
                     "in the score:", fontsize=11)
        ax.text(0.98, 0.97, why, ha="right", va="top", fontsize=9, transform=ax.transAxes,
                bbox={"facecolor": "white", "edgecolor": "0.7"})
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    else:
        ax.text(0.5, 0.5, "the greedy equals the optimum in every region", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
    if batch:
        regions = batch["per_region"]
        for column, what, short, unit in ((0, "placed_workloads", "placed", "workloads placed"),
                                          (1, "preempted_jobs", "preempted", "jobs preempted")):
            ax = axes[1, column]
            diffs = {name: [r[f"batch-cpsat:{what}"] - r[f"{name}:{what}"] for r in regions]
                     for name in ("rms-greedy", "cpsat")}
            low = int(min(min(d) for d in diffs.values()))
            high = int(max(max(d) for d in diffs.values()))
            xs = list(range(low, high + 1))
            width = 0.4
            for shift, (name, color) in zip((-width / 2, width / 2), (("rms-greedy", colour(3)),
                                                                      ("cpsat", colour(5))), strict=True):
                counts = Counter(int(d) for d in diffs[name])
                total = int(sum(diffs[name]))
                ax.bar([x + shift for x in xs], [counts.get(x, 0) for x in xs], width, color=color,
                       label=f"one at a time by {name} (total {total:+d})")
            ax.set_xticks(xs)
            ax.set_xlim(xs[0] - 1, xs[-1] + 1)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel(f"batch-cpsat minus one-at-a-time ({unit} per region)")
            ax.set_ylabel("regions")
            totals = batch["totals"]
            ax.set_title(f"({'cd'[column]}) {unit}: batch model against one at a time, {len(regions)} regions x "
                         f"{batch['params']['workloads']} workloads\n(totals: batch-cpsat "
                         f"{totals[f'batch-cpsat:{short}']}, cpsat "
                         f"{totals[f'cpsat:{short}']}, rms-greedy "
                         f"{totals[f'rms-greedy:{short}']})", fontsize=10)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    if path is not None:
        save_figure(figure, path, dpi=150)
    return figure



__all__ = ["cluster_gpus", "plot_binpack", "plot_comparison_report"]
