"""Sizing a binpack region: machines to add per cluster so that every pending workload places
without preempting anything (``unplaced_workloads<=0``, ``preempted_jobs<=0``).

New machines are copies of the cluster's most common machine of the hardware the jobs need
(free, in new racks). The MIP places every job of every pending workload at once — the batch
of MAST's Table 1 (9), preemption switched off — on today's free capacity and on candidate
machines, paying for a candidate when anything runs on it::

    minimize   sum_c price_c * sum_{m candidate in c} b[m]
    subject to sum_c y[j, c] = 1                          (a job runs in one cluster)
               sum_m x[j, m] = tasks[j],  x[j, m] <= fit[j, m] * y[j, cluster(m)]
               sum_j demand[j] x[j, m] <= free[m]          (today's machines: what is free)
               sum_j demand[j] x[j, m] <= capacity[m] b[m] (candidates), b[m] >= b[m + 1]
               sum_{m in c} b[m] <= MAX_c

The sized instance is then solved by ``batch-cpsat`` (placing all pending workloads jointly) and
judged: every workload placed, no job preempted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.lazy import lazy_module
from fleetplan.planning.sizing import (
    Purchase,
    SizingResult,
    check_targets,
    describe_misses,
    relative_gap,
    time_left,
)
from fleetplan.planning.targets import Target

sp = lazy_module("scipy.sparse")


def size_binpack(instance: Any, targets: Sequence[Target], purchases: Sequence[Purchase], *, budget: float | None,
                 policy: str | None, time_limit: float | None, threads: int, seed: int, started: float,
                 mip_rel_gap: float = 1e-6) -> SizingResult:
    """:func:`fleetplan.planning.size` for the binpack kind (module docstring)."""
    from fleetplan.instances.binpack import tasks_that_fit

    for target in targets:
        if target.value != 0:
            raise InstanceError("--target", f"only {target.metric}<=0 can be sized for")
    arrays = instance.arrays()
    jobs = [(w, j, job) for w, workload in enumerate(instance.workloads) for j, job in enumerate(workload.jobs)]
    if not jobs:
        raise InstanceError("workloads", "there is no pending workload to size for")
    offers = _offers(arrays, purchases)
    templates = _templates(arrays, {instance.hardware_index(job.hardware) for _, _, job in jobs})
    # Candidate machines: per offered cluster and hardware a template exists for, up to MAX.
    cand_cluster, cand_hardware, cand_capacity, cand_price = [], [], [], []
    for c, (price, cap) in offers.items():
        for h, capacity in templates.get(c, {}).items():
            need = _most_needed(jobs, instance, h, capacity)
            for _ in range(int(min(cap, need))):
                cand_cluster.append(c)
                cand_hardware.append(h)
                cand_capacity.append(capacity)
                cand_price.append(price)
    n_old, n_new = arrays.num_machines, len(cand_cluster)
    cluster = np.concatenate([arrays.machine_cluster, np.array(cand_cluster, dtype=np.int64)])
    hardware = np.concatenate([arrays.machine_hardware, np.array(cand_hardware, dtype=np.int64)])
    capacity = np.vstack([arrays.capacity, np.array(cand_capacity).reshape(n_new, 3)]) if n_new else arrays.capacity
    free = np.maximum(arrays.capacity - arrays.used, 0.0)
    demand = np.array([[job.gpus_per_task, job.cpus_per_task, job.memory_gb_per_task] for _, _, job in jobs], dtype=float)
    tasks = np.array([job.tasks for _, _, job in jobs], dtype=float)
    job_hw = np.array([instance.hardware_index(job.hardware) for _, _, job in jobs])
    room = np.vstack([free, capacity[n_old:]])
    fit = np.stack([tasks_that_fit(room, demand[i]) for i in range(len(jobs))]).astype(float)
    fit = np.where(hardware[None, :] == job_hw[:, None], np.minimum(fit, tasks[:, None]), 0.0)
    lp, layout = _model(len(arrays.cluster_ids), cluster, fit, demand, tasks, free, capacity[n_old:],
                        np.array(cand_price, dtype=float), cand_cluster, offers, budget)
    from fleetplan.planning.sizing.allocation import _solve_mip

    result = SizingResult(status="error", kind="binpack", targets=list(targets))
    outcome = _solve_mip(lp, time_left(time_limit, started), threads, seed, mip_rel_gap)
    result.log += outcome["log"]
    result.stats.update(columns=float(lp.num_cols), rows=float(lp.num_rows), candidate_machines=float(n_new))
    if outcome["values"] is None:
        result.status = "time_limit" if outcome["status"] == "time_limit" else "infeasible"
        result.bound = outcome["bound"]
        short = [f"{instance.workloads[w].id}/{job.id}" for (w, j, job), row in zip(jobs, fit, strict=True)
                 if row.sum() < job.tasks]
        who = f"; jobs that fit nowhere even with every machine bought: {', '.join(short[:5])}" if short else ""
        result.message = (f"no purchase within the limits places every pending workload without preempting{who}"
                          if result.status == "infeasible" else "the time limit ran out before any purchase was found")
        return result
    bought = np.rint(outcome["values"][layout["b"]]).astype(np.int64)
    sized = sized_instance(instance, np.array(cand_cluster, dtype=np.int64)[bought > 0],
                           np.array(cand_hardware, dtype=np.int64)[bought > 0], capacity[n_old:][bought > 0])
    result.additions = {arrays.cluster_ids[c]: int(sum(b for b, cc in zip(bought, cand_cluster, strict=True) if cc == c))
                        for c in offers}
    result.cost = float(np.dot(bought, cand_price)) if n_new else 0.0
    result.bound = outcome["bound"]
    result.gap = relative_gap(result.cost, result.bound)
    import fleetplan

    solver = policy or "batch-cpsat"
    forward = fleetplan.solve(sized, solver, time_limit=time_left(time_limit, started), seed=seed, threads=threads)
    result.sized_instance, result.policy = sized, solver
    if forward.evaluation is None:
        result.status = "feasible"
        result.message = f"{solver} found no plan on the sized instance ({forward.status}); the sizing model has one"
        return result
    result.plan = forward.plan
    result.metrics = dict(forward.evaluation.metrics)
    result.checks = check_targets(targets, result.metrics)
    if not all(result.checks.values()):
        result.status = "feasible"
        result.message = (f"under {solver} the sized instance misses {describe_misses(targets, result.metrics)} "
                          "(the sizing model places every workload on it)")
        return result
    proven = outcome["status"] == "optimal" and (result.gap or 0) <= mip_rel_gap + 1e-9
    result.status = "optimal" if proven else ("time_limit" if outcome["status"] == "time_limit" else "feasible")
    result.message = f"the sized instance places every pending workload without preempting under {solver} (judged)"
    return result


def _offers(arrays: Any, purchases: Sequence[Purchase]) -> dict[int, tuple[float, float]]:
    offers = {}
    for item in purchases:
        if item.name not in arrays.cluster_ids:
            raise InstanceError("--buy", f"unknown cluster '{item.name}' (clusters: {', '.join(arrays.cluster_ids)})")
        offers[arrays.cluster_ids.index(item.name)] = (1.0 if item.price is None else item.price,
                                                       math.inf if item.maximum is None else math.floor(item.maximum))
    return offers


def _templates(arrays: Any, hardware: set[int]) -> dict[int, dict[int, np.ndarray]]:
    """Per cluster and hardware: the capacity of its most common machine (what a bought machine
    is a copy of)."""
    out: dict[int, dict[int, np.ndarray]] = {}
    for c in range(len(arrays.cluster_ids)):
        for h in hardware:
            rows = np.flatnonzero((arrays.machine_cluster == c) & (arrays.machine_hardware == h))
            if rows.size:
                kinds, counts = np.unique(arrays.capacity[rows], axis=0, return_counts=True)
                out.setdefault(c, {})[h] = kinds[int(np.argmax(counts))]
    return out


def _most_needed(jobs: list, instance: Any, hardware: int, capacity: np.ndarray) -> int:
    """Machines of this capacity that hold every task of every job of this hardware, one job per
    machine at worst: more are never needed."""
    from fleetplan.instances.binpack import tasks_that_fit

    total = 0
    for _, _, job in jobs:
        if instance.hardware_index(job.hardware) != hardware:
            continue
        per = int(tasks_that_fit(capacity[None, :], np.array([job.gpus_per_task, job.cpus_per_task,
                                                              job.memory_gb_per_task], dtype=float))[0])
        if per > 0:
            total += math.ceil(job.tasks / per)
    return total


def _model(n_clusters: int, cluster: np.ndarray, fit: np.ndarray, demand: np.ndarray, tasks: np.ndarray,
           free: np.ndarray, new_capacity: np.ndarray, price: np.ndarray, cand_cluster: list[int],
           offers: dict[int, tuple[float, float]], budget: float | None) -> tuple[Any, dict[str, Any]]:
    from fleetplan.models.linear import INF, LinearProgram

    n_jobs, n_machines = fit.shape
    n_old = free.shape[0]
    n_new = n_machines - n_old
    cells = np.argwhere(fit > 0)  # (j, m) pairs that can hold tasks
    n_x, n_y = len(cells), n_jobs * n_clusters
    x0, y0, b0 = 0, n_x, n_x + n_y
    n = b0 + n_new
    rows, cols, vals, lower, upper = [], [], [], [], []

    def block(count: int, low: Any, high: Any) -> int:
        start = len(lower)
        lower.extend(np.broadcast_to(low, (count,)).tolist())
        upper.extend(np.broadcast_to(high, (count,)).tolist())
        return start

    def add(r: Any, c: Any, v: Any) -> None:
        r, c = np.asarray(r, dtype=np.int64), np.asarray(c, dtype=np.int64)
        rows.append(r)
        cols.append(c)
        vals.append(np.broadcast_to(np.asarray(v, dtype=float), r.shape))

    j_of, m_of = cells[:, 0], cells[:, 1]
    start = block(n_jobs, 1.0, 1.0)  # sum_c y = 1
    add(start + np.repeat(np.arange(n_jobs), n_clusters), y0 + np.arange(n_y), 1.0)
    start = block(n_jobs, tasks, tasks)  # sum_m x = tasks
    add(start + j_of, x0 + np.arange(n_x), 1.0)
    start = block(n_x, -INF, 0.0)  # x - fit y <= 0
    add(start + np.arange(n_x), x0 + np.arange(n_x), 1.0)
    add(start + np.arange(n_x), y0 + j_of * n_clusters + cluster[m_of], -fit[j_of, m_of])
    for resource in range(3):
        start = block(n_old, -INF, free[:, resource])
        old = m_of < n_old
        add(start + m_of[old], x0 + np.flatnonzero(old), demand[j_of[old], resource])
        if n_new:
            start = block(n_new, -INF, 0.0)
            new = ~old
            add(start + (m_of[new] - n_old), x0 + np.flatnonzero(new), demand[j_of[new], resource])
            add(start + np.arange(n_new), b0 + np.arange(n_new), -new_capacity[:, resource])
    for a in range(n_new - 1):  # symmetry: candidates of one cluster are bought in order
        if cand_cluster[a] == cand_cluster[a + 1] and np.array_equal(new_capacity[a], new_capacity[a + 1]):
            start = block(1, 0.0, INF)
            add([start, start], [b0 + a, b0 + a + 1], [1.0, -1.0])
    for c, (_, cap) in offers.items():
        members = [a for a in range(n_new) if cand_cluster[a] == c]
        if members and math.isfinite(cap):
            start = block(1, -INF, cap)
            add([start] * len(members), b0 + np.array(members), 1.0)
    if budget is not None and n_new:
        start = block(1, -INF, budget)
        add([start] * n_new, b0 + np.arange(n_new), price)
    cost = np.zeros(n)
    cost[b0:] = price
    matrix = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(len(lower), n))
    col_upper = np.concatenate([fit[j_of, m_of], np.ones(n_y), np.ones(n_new)])
    lp = LinearProgram(cost=cost, matrix=matrix, row_lower=np.array(lower), row_upper=np.array(upper),
                       col_lower=np.zeros(n), col_upper=col_upper, sense="min", integrality=np.ones(n, dtype=np.int8))
    lp.check()
    return lp, {"b": slice(b0, n)}


def sized_instance(instance: Any, cluster: np.ndarray, hardware: np.ndarray, capacity: np.ndarray) -> Any:
    """``instance`` with one new free machine per row (its cluster, hardware and capacity), each
    bought machine in a new rack of its own cluster."""
    from fleetplan.instances import instance_from_data

    arrays = instance.arrays()
    data = instance.model_dump()
    machines = data["machines"]
    rack = max(machines["rack"], default=-1) + 1
    for number, (c, h, cap) in enumerate(zip(cluster, hardware, capacity, strict=True)):
        machines["id"].append(f"bought{number:05d}")
        machines["cluster"].append(arrays.cluster_ids[c])
        machines["rack"].append(rack + number // 8)
        machines["hardware"].append(arrays.hardware_ids[h])
        machines["gpus"].append(int(cap[0]) if float(cap[0]).is_integer() else float(cap[0]))
        machines["cpus"].append(int(cap[1]) if float(cap[1]).is_integer() else float(cap[1]))
        machines["memory_gb"].append(float(cap[2]))
    data["name"] = f"{instance.name}-sized" if instance.name else "sized"
    return instance_from_data(data)
