"""The judge of the ``binpack`` kind: capacities, gangs, hardware, preemption rules and the
RMS score (MAST, OSDI 2024, §2, §4.3). Written independently of every solver.

Objective (minimised)::

    UNPLACED_COST * (workloads left waiting)
  + sum over preempted running jobs of  LEVEL_BASE ** (7 - priority) + 1 / (1 + hours running)

so a plan that preempts nothing beats any plan that preempts; then fewer jobs of the highest
priority level, and so on down to the lowest; then older jobs before newly started ones (§4.3).
The terms are ``unplaced``, ``preempted_p0`` .. ``preempted_p6`` (level weights) and ``youth``;
:func:`score_key` gives the exact lexicographic order (counts, not weights) with the packing
tie-breaks the exact models use: machines used, then racks used.

Constraints (each a :class:`Violation`): ``capacity`` — no machine over its GPUs, CPU cores or
memory once the preempted jobs are gone and the new tasks are added; ``gang`` — a placed
workload places every task of every job, an unplaced one places none; ``hardware`` — tasks on
machines of the job's hardware type; ``cluster`` — a job's machines in its cluster;
``priority`` — only running jobs of strictly lower priority than the workload are preempted;
``preempted_twice``; ``score`` — a score the solver states equals the judge's.
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.base import Evaluation, InstanceError, Violation
from fleetplan.instances.binpack import (
    KIND,
    PRIORITY_LEVELS,
    RESOURCES,
    TOLERANCE,
    UNPLACED_COST,
    BinpackInstance,
    BinpackPlan,
    level_weight,
    youth,
)

MAX_LISTED = 20


class Resolved:
    """A plan turned into arrays: task rows (workload, job, machine, tasks) and preemptions."""

    def __init__(self, instance: BinpackInstance, plan: BinpackPlan):
        arrays = instance.arrays()
        workload_index = {w.id: i for i, w in enumerate(instance.workloads)}
        cluster_index = {c: i for i, c in enumerate(arrays.cluster_ids)}
        machine_index = arrays.machine_index
        running_index = arrays.running_index
        self.placed = np.zeros(len(instance.workloads), dtype=bool)
        self.listed = np.zeros(len(instance.workloads), dtype=bool)
        self.stated_score: dict[int, float] = {}
        rows_w, rows_j, rows_m, rows_t = [], [], [], []
        self.job_cluster: dict[tuple[int, int], int] = {}
        self.preempt_job: list[int] = []
        self.preempt_by: list[int] = []
        for p, entry in enumerate(plan.workloads):
            where = f"workloads[{p}]"
            if entry.workload not in workload_index:
                raise InstanceError(f"{where}.workload", f"unknown workload '{entry.workload}'")
            w = workload_index[entry.workload]
            if self.listed[w]:
                raise InstanceError(f"{where}.workload", f"workload '{entry.workload}' is listed twice")
            self.listed[w] = True
            self.placed[w] = entry.placed
            if entry.score is not None:
                self.stated_score[w] = entry.score
            job_index = {job.id: j for j, job in enumerate(instance.workloads[w].jobs)}
            for q, job in enumerate(entry.jobs):
                at = f"{where}.jobs[{q}]"
                if job.job not in job_index:
                    raise InstanceError(f"{at}.job", f"workload '{entry.workload}' has no job '{job.job}'")
                j = job_index[job.job]
                if (w, j) in self.job_cluster:
                    raise InstanceError(f"{at}.job", f"job '{job.job}' is listed twice")
                if job.cluster not in cluster_index:
                    raise InstanceError(f"{at}.cluster", f"unknown cluster '{job.cluster}'")
                self.job_cluster[(w, j)] = cluster_index[job.cluster]
                if len(job.tasks) != len(job.machines):
                    raise InstanceError(f"{at}.tasks", f"has {len(job.tasks)} entries for "
                                        f"{len(job.machines)} machines")
                for k, (name, tasks) in enumerate(zip(job.machines, job.tasks, strict=True)):
                    if name not in machine_index:
                        raise InstanceError(f"{at}.machines[{k}]", f"unknown machine '{name}'")
                    if tasks < 1:
                        raise InstanceError(f"{at}.tasks[{k}]", "must be >= 1")
                    rows_w.append(w)
                    rows_j.append(j)
                    rows_m.append(machine_index[name])
                    rows_t.append(tasks)
                for k, name in enumerate(job.preempted):
                    if name not in running_index:
                        raise InstanceError(f"{at}.preempted[{k}]", f"unknown running job '{name}'")
                    self.preempt_job.append(running_index[name])
                    self.preempt_by.append(w)
        self.row_workload = np.asarray(rows_w, dtype=np.int64)
        self.row_job = np.asarray(rows_j, dtype=np.int64)
        self.row_machine = np.asarray(rows_m, dtype=np.int64)
        self.row_tasks = np.asarray(rows_t, dtype=np.int64)
        self.preempt_job_arr = np.asarray(self.preempt_job, dtype=np.int64)
        self.preempt_by_arr = np.asarray(self.preempt_by, dtype=np.int64)


def demand_table(instance: BinpackInstance) -> tuple[dict[tuple[int, int], int], np.ndarray, np.ndarray, np.ndarray]:
    """Flat index of every (workload, job), its per-task demand (n, 3), tasks and hardware."""
    index: dict[tuple[int, int], int] = {}
    demand, tasks, hardware = [], [], []
    hw = {h: i for i, h in enumerate(instance.hardware_types)}
    for w, workload in enumerate(instance.workloads):
        for j, job in enumerate(workload.jobs):
            index[(w, j)] = len(demand)
            demand.append((job.gpus_per_task, job.cpus_per_task, job.memory_gb_per_task))
            tasks.append(job.tasks)
            hardware.append(hw[job.hardware])
    return (index, np.asarray(demand, dtype=float).reshape(-1, 3), np.asarray(tasks, dtype=np.int64),
            np.asarray(hardware, dtype=np.int64))


def evaluate(instance: BinpackInstance, plan: BinpackPlan) -> Evaluation:
    """Judge a binpack plan.

    >>> from fleetplan.instances.binpack.generate import BinpackParams, generate
    >>> instance = generate(BinpackParams(clusters=2, machines=16), seed=0)
    >>> evaluation = evaluate(instance, BinpackPlan())
    >>> evaluation.terms["unplaced"] == len(instance.workloads) * UNPLACED_COST
    True
    """
    arrays = instance.arrays()
    resolved = Resolved(instance, plan)
    flat, demand, tasks_needed, job_hw = demand_table(instance)
    violations: list[Violation] = []
    priorities = np.array([w.priority for w in instance.workloads], dtype=np.int64)

    # Gang: every task of every job of a placed workload, none of an unplaced one.
    flat_rows = np.array([flat[(w, j)] for w, j in zip(resolved.row_workload.tolist(),
                                                       resolved.row_job.tolist(), strict=True)], dtype=np.int64)
    placed_tasks = np.bincount(flat_rows, weights=resolved.row_tasks, minlength=len(tasks_needed))
    for f, (w, j) in enumerate(flat):
        want = tasks_needed[f] if resolved.placed[w] else 0
        if placed_tasks[f] != want:
            name = f"{instance.workloads[w].id}/{instance.workloads[w].jobs[j].id}"
            violations.append(Violation(
                constraint="gang", where=name, amount=float(abs(placed_tasks[f] - want)),
                message=f"{int(placed_tasks[f])} of {int(tasks_needed[f])} tasks placed "
                        f"({'placed' if resolved.placed[w] else 'unplaced'} workload)"))
    for w in range(len(instance.workloads)):
        if not resolved.placed[w] and any(by == w for by in resolved.preempt_by):
            violations.append(Violation(constraint="gang", where=instance.workloads[w].id, amount=1.0,
                                        message="an unplaced workload preempts running jobs"))

    # Hardware and cluster of each task row.
    if flat_rows.size:
        wrong_hw = arrays.machine_hardware[resolved.row_machine] != job_hw[flat_rows]
        cluster_of_row = np.array([resolved.job_cluster[(w, j)] for w, j in zip(
            resolved.row_workload.tolist(), resolved.row_job.tolist(), strict=True)], dtype=np.int64)
        wrong_cluster = arrays.machine_cluster[resolved.row_machine] != cluster_of_row
        for constraint, mask in (("hardware", wrong_hw), ("cluster", wrong_cluster)):
            for row in np.flatnonzero(mask)[:MAX_LISTED].tolist():
                w, j = int(resolved.row_workload[row]), int(resolved.row_job[row])
                violations.append(Violation(
                    constraint=constraint, where=f"{instance.workloads[w].jobs[j].id}@"
                    f"{arrays.machine_ids[resolved.row_machine[row]]}", amount=float(resolved.row_tasks[row]),
                    message=f"{constraint} of the machine differs from the job's"))

    # Preemption rules.
    preempted = resolved.preempt_job_arr
    counts = np.bincount(preempted, minlength=arrays.num_running)
    for r in np.flatnonzero(counts > 1)[:MAX_LISTED].tolist():
        violations.append(Violation(constraint="preempted_twice", where=arrays.running_ids[r],
                                    amount=float(counts[r] - 1)))
    if preempted.size:
        bad = arrays.running_priority[preempted] <= priorities[resolved.preempt_by_arr]
        for k in np.flatnonzero(bad)[:MAX_LISTED].tolist():
            r, w = int(preempted[k]), int(resolved.preempt_by_arr[k])
            violations.append(Violation(
                constraint="priority", where=arrays.running_ids[r], amount=1.0,
                message=f"priority {arrays.running_priority[r]} preempted for workload "
                        f"'{instance.workloads[w].id}' of priority {priorities[w]}"))

    # Capacity after preemption.
    gone = np.unique(preempted)
    load = arrays.used.copy()
    rows = arrays.holdings_of(gone)
    np.subtract.at(load, arrays.hold_machine[rows], arrays.hold_amount[rows])
    if flat_rows.size:
        np.add.at(load, resolved.row_machine, demand[flat_rows] * resolved.row_tasks[:, None])
    excess = load - arrays.capacity
    over = excess > TOLERANCE * np.maximum(arrays.capacity, 1.0)
    for i, r in list(zip(*np.nonzero(over), strict=True))[:MAX_LISTED]:
        violations.append(Violation(constraint="capacity", where=f"{arrays.machine_ids[i]}.{RESOURCES[r]}",
                                    amount=float(excess[i, r]),
                                    message=f"{load[i, r]:g} of {arrays.capacity[i, r]:g} {RESOURCES[r]}"))
    if int(over.sum()) > MAX_LISTED:
        violations.append(Violation(constraint="capacity", where="more machines",
                                    amount=float(excess[over][MAX_LISTED:].sum()),
                                    message=f"{int(over.sum()) - MAX_LISTED} more over-full resources"))

    # Terms and the solver's stated scores.
    level_count = np.bincount(arrays.running_priority[preempted], minlength=PRIORITY_LEVELS) \
        if preempted.size else np.zeros(PRIORITY_LEVELS, dtype=np.int64)
    unplaced = int((~resolved.placed).sum())
    job_youth = youth(arrays.running_age[preempted]) if preempted.size else np.zeros(0)
    terms = {"unplaced": unplaced * UNPLACED_COST}
    for p in range(PRIORITY_LEVELS):
        terms[f"preempted_p{p}"] = float(level_count[p] * level_weight(p))
    terms["youth"] = float(job_youth.sum())
    per_cost = level_weight(arrays.running_priority[preempted]) + job_youth if preempted.size else np.zeros(0)
    workload_cost = np.bincount(resolved.preempt_by_arr, weights=per_cost, minlength=len(instance.workloads))
    for w, stated in resolved.stated_score.items():
        if abs(stated - workload_cost[w]) > 1e-6 * max(1.0, abs(workload_cost[w])):
            violations.append(Violation(constraint="score", where=instance.workloads[w].id,
                                        amount=float(abs(stated - workload_cost[w])),
                                        message=f"stated {stated:.9g}, judged {workload_cost[w]:.9g}"))

    metrics = _metrics(instance, resolved, flat_rows, demand, level_count, unplaced, gone, job_youth)
    verdict = Evaluation(kind=KIND, objective=float(sum(terms.values())), sense="min", terms=terms,
                         violations=violations, metrics=metrics)
    # Per workload, column-wise: placed or not, the running jobs it preempts
    # and their cost (level weight plus youth, the terms above).
    preempts = np.bincount(resolved.preempt_by_arr, minlength=len(instance.workloads)) if preempted.size \
        else np.zeros(len(instance.workloads), dtype=np.int64)
    verdict.breakdown = {"workloads": {
        "id": [w.id for w in instance.workloads], "priority": priorities.tolist(),
        "placed": [bool(p) for p in resolved.placed], "preempted_jobs": preempts.tolist(),
        "preemption_cost": workload_cost.tolist()}}
    return verdict


def _metrics(instance: BinpackInstance, resolved: Resolved, flat_rows: np.ndarray, demand: np.ndarray,
             level_count: np.ndarray, unplaced: int, gone: np.ndarray, job_youth: np.ndarray) -> dict[str, float]:
    arrays = instance.arrays()
    pairs = resolved.row_workload * 1_000_003 + resolved.row_job
    machines_used = len(np.unique(pairs * (arrays.num_machines + 1) + resolved.row_machine)) if pairs.size else 0
    racks = arrays.machine_rack[resolved.row_machine]
    racks_used = len(np.unique(pairs * (int(arrays.machine_rack.max(initial=0)) + 1) + racks)) if pairs.size else 0
    jobs_placed = len(np.unique(pairs)) if pairs.size else 0
    rows = arrays.holdings_of(gone)
    gpu_total = float(arrays.capacity[:, 0].sum())
    placed_gpus = float((demand[flat_rows, 0] * resolved.row_tasks).sum()) if flat_rows.size else 0.0
    used_after = float(arrays.used[:, 0].sum()) - float(arrays.hold_amount[rows, 0].sum()) + placed_gpus
    metrics = {
        "placed_workloads": float(len(instance.workloads) - unplaced),
        "unplaced_workloads": float(unplaced),
        "preempted_jobs": float(level_count.sum()),
        "preempted_gpus": float(arrays.hold_amount[rows, 0].sum()),
        "preempted_youth": float(job_youth.sum()),
        "placed_gpus": placed_gpus,
        "machines_used": float(machines_used),
        "racks_used": float(racks_used),
        "rack_spread": float(racks_used - jobs_placed),
        "gpu_allocation_before": float(arrays.used[:, 0].sum()) / gpu_total if gpu_total else 0.0,
        "gpu_allocation_after": used_after / gpu_total if gpu_total else 0.0,
        "gpus_idle": gpu_total - used_after,
    }
    for p in range(PRIORITY_LEVELS):
        metrics[f"preempted_count_p{p}"] = float(level_count[p])
    return metrics


def score_key(evaluation: Evaluation) -> tuple[float, ...]:
    """The exact lexicographic order of plans (smaller is better): workloads left waiting, then
    preempted counts per level from priority 0 down to 6, then youth, machines used, racks used.

    Youth is rounded to 1e-9 so that sums in another order compare equal.
    """
    return score_key_from_metrics(evaluation.metrics)


def score_key_from_metrics(metrics: dict[str, float]) -> tuple[float, ...]:
    """:func:`score_key` from an evaluation's metrics (as a results table keeps them)."""
    return (metrics["unplaced_workloads"], *(metrics[f"preempted_count_p{p}"] for p in range(PRIORITY_LEVELS)),
            round(metrics["preempted_youth"], 9), metrics["machines_used"], metrics["racks_used"])


# What the float objective is, for the reader: the score encodes the order in one float.
SCORE_NOTE = ("the RMS score encodes the order (workloads waiting, then preemptions per priority from 0, then "
              "youth) in one float; it loses the youth tie-break from about 31 waiting workloads and a whole "
              "priority-6 preemption from about 2,048, so plans are ranked by the exact key")

_KEY_PARTS = ("workloads waiting", *(f"priority-{p} preemptions" for p in range(PRIORITY_LEVELS)), "youth",
              "machines used", "racks used")


def key_difference(before: tuple[float, ...], after: tuple[float, ...]) -> tuple[str, str | None]:
    """How ``after`` compares with ``before`` in the exact order: ``(text, verdict)`` with the
    first component that differs (``"+4 priority-5 preemptions"``) and better/worse, or
    ``("same", "same")``."""
    for part, old, new in zip(_KEY_PARTS, before, after, strict=True):
        if old != new:
            delta = new - old
            amount = f"{delta:+.3g}" if part == "youth" else f"{delta:+,.0f}"
            return f"{amount} {part}", "better" if new < old else "worse"
    return "same", "same"


def preemptions_by_priority(metrics: dict[str, float]) -> str:
    """``"p3 1, p5 4"`` (priority 0 is the highest), or ``"none"``."""
    shown = [f"p{p} {metrics.get(f'preempted_count_p{p}', 0):.0f}" for p in range(PRIORITY_LEVELS)
             if metrics.get(f"preempted_count_p{p}", 0) > 0]
    return ", ".join(shown) or "none"
