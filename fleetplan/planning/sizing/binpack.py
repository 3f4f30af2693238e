"""Sizing a binpack region: machines to add per cluster so that every pending workload places
(``unplaced_workloads<=0``), without preempting anything where ``preempted_jobs<=0`` is asked.

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

The sized instance is then solved by ``batch-cpsat`` (placing all pending workloads jointly), or
the policy named, and judged. Where preemption is allowed (no ``preempted_jobs`` target) the model
above is a *restriction* (what it buys places everything without preempting) and the same model
with every preemptible holding counted as free a *relaxation* (its optimum bounds the cost); the
purchases between them are checked cheapest first (:mod:`.lattice`), as are the purchases from the
model's bound when the policy named misses where the model does not.
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
    check_max_points,
    check_targets,
    relative_gap,
    time_left,
)
from fleetplan.planning.sizing.lattice import search_lattice
from fleetplan.planning.targets import Target

sp = lazy_module("scipy.sparse")


def size_binpack(instance: Any, targets: Sequence[Target], purchases: Sequence[Purchase], *, budget: float | None,
                 policy: str | None, time_limit: float | None, threads: int, seed: int, started: float,
                 mip_rel_gap: float = 1e-6, max_points: int = 200) -> SizingResult:
    """:func:`fleetplan.planning.size` for the binpack kind (module docstring)."""
    from fleetplan.instances.binpack import tasks_that_fit

    check_max_points(max_points)
    arrays = instance.arrays()
    jobs = [(w, j, job) for w, workload in enumerate(instance.workloads) for j, job in enumerate(workload.jobs)]
    if not jobs:
        raise InstanceError("workloads", "there is no pending workload to size for")
    offers = _offers(arrays, purchases)
    templates = machine_templates(arrays, {instance.hardware_index(job.hardware) for _, _, job in jobs})
    # What may be bought: per offered cluster and hardware a template exists for, up to MAX
    # copies (a unit of the purchase lattice), each a candidate machine of the MIP.
    units = [(c, h, capacity, price, int(min(cap, _most_needed(jobs, instance, h, capacity))))
             for c, (price, cap) in offers.items() for h, capacity in templates.get(c, {}).items()]
    cand_unit = [u for u, unit in enumerate(units) for _ in range(unit[4])]
    cand_cluster = [units[u][0] for u in cand_unit]
    cand_hardware = [units[u][1] for u in cand_unit]
    cand_price = np.array([units[u][3] for u in cand_unit], dtype=float)
    n_new = len(cand_unit)
    cluster = np.concatenate([arrays.machine_cluster, np.array(cand_cluster, dtype=np.int64)])
    hardware = np.concatenate([arrays.machine_hardware, np.array(cand_hardware, dtype=np.int64)])
    new_capacity = np.array([units[u][2] for u in cand_unit], dtype=float).reshape(n_new, 3)
    demand = np.array([[job.gpus_per_task, job.cpus_per_task, job.memory_gb_per_task] for _, _, job in jobs], dtype=float)
    tasks = np.array([job.tasks for _, _, job in jobs], dtype=float)
    job_hw = np.array([instance.hardware_index(job.hardware) for _, _, job in jobs])

    def mip(free: np.ndarray) -> tuple[Any, dict[str, Any], np.ndarray]:
        room = np.vstack([free, new_capacity])
        fit = np.stack([tasks_that_fit(room, demand[i]) for i in range(len(jobs))]).astype(float)
        fit = np.where(hardware[None, :] == job_hw[:, None], np.minimum(fit, tasks[:, None]), 0.0)
        lp, layout = _model(len(arrays.cluster_ids), cluster, fit, demand, tasks, free, new_capacity, cand_price,
                            cand_cluster, offers, budget)
        return lp, layout, fit

    from fleetplan.planning.sizing.mip import solve_sizing_mip

    result = SizingResult(status="error", kind="binpack", targets=list(targets))
    deadline = None if time_limit is None else started + time_limit
    lp, layout, fit = mip(np.maximum(arrays.capacity - arrays.used, 0.0))
    outcome = solve_sizing_mip(lp, time_left(time_limit, started), threads, seed, mip_rel_gap)
    result.log += outcome["log"]
    result.stats.update(columns=float(lp.num_cols), rows=float(lp.num_rows), candidate_machines=float(n_new))
    bound = outcome["bound"]
    preemptible = _preemptible_room(arrays, instance, targets)
    if preemptible is not None:
        # Preemption may free what lower-priority running jobs hold: the no-preemption model's
        # purchases place every workload, but its optimum bounds nothing; the relaxation that
        # counts every preemptible holding as free does.
        relaxed_lp, _, _ = mip(preemptible)
        relaxed = solve_sizing_mip(relaxed_lp, time_left(time_limit, started), threads, seed, mip_rel_gap)
        result.log += [line.replace("sizing MIP", "sizing relaxation (preemptible holdings free)")
                       for line in relaxed["log"]]
        bound = relaxed["bound"] if relaxed["values"] is not None or relaxed["status"] == "time_limit" else math.inf
    solver = policy or "batch-cpsat"
    from fleetplan.solvers import solve

    def judge(purchase: np.ndarray) -> tuple:
        chosen = np.repeat(np.arange(len(units)), purchase)
        sized = sized_instance(instance, np.array([units[u][0] for u in chosen], dtype=np.int64),
                               np.array([units[u][1] for u in chosen], dtype=np.int64),
                               np.array([units[u][2] for u in chosen], dtype=float).reshape(len(chosen), 3))
        forward = solve(sized, solver, time_limit=time_left(time_limit, started), seed=seed,
                                  threads=threads)
        if forward.evaluation is None:
            return False, (sized, None, {}, check_targets(targets, {}))
        metrics = dict(forward.evaluation.metrics)
        checks = check_targets(targets, metrics)
        within = all(sum(purchase[u] for u in range(len(units)) if units[u][0] == c) <= cap
                     for c, (_, cap) in offers.items())
        return within and all(checks.values()), (sized, forward.plan, metrics, checks)

    price = np.array([unit[3] for unit in units], dtype=float)
    incumbent = None
    if outcome["values"] is not None:
        bought = np.rint(outcome["values"][layout["b"]]).astype(np.int64)
        purchase = np.bincount(np.array(cand_unit, dtype=np.int64)[bought > 0], minlength=len(units))
        passes, payload = judge(purchase)
        if passes:
            incumbent = (purchase, payload)
    if incumbent is not None and bound is not None and price @ incumbent[0] <= bound * (1 + mip_rel_gap) + 1e-9:
        found, proven, payload = incumbent[0], outcome["status"] == "optimal", incumbent[1]
    elif bound is not None and math.isinf(bound):
        found, proven, payload = None, True, None
    else:
        search = search_lattice(price, [unit[4] for unit in units], judge, lower_bound=bound or 0.0,
                                incumbent_cost=None if incumbent is None else float(price @ incumbent[0]),
                                max_cost=budget, max_points=max_points, deadline=deadline)
        result.log += search.log
        result.stats["points_checked"] = float(search.checked)
        bound = search.bound
        if search.found is not None:
            found, proven, payload = search.found, True, search.payload
        elif incumbent is not None:
            found, proven, payload = incumbent[0], search.proven, incumbent[1]
        else:
            found, proven, payload = None, search.exhausted, None
    result.policy = solver
    if found is None:
        result.status = "infeasible" if proven else "time_limit"
        result.bound = bound
        short = [f"{instance.workloads[w].id}/{job.id}" for (w, j, job), row in zip(jobs, fit, strict=True)
                 if row.sum() < job.tasks]
        who = f"; jobs that fit nowhere even with every machine bought: {', '.join(short[:5])}" if short else ""
        result.message = (f"no purchase within the limits meets {', '.join(map(str, targets))} under {solver}{who}"
                          if proven else "the limits ran out before a purchase was found that meets every target "
                          f"under {solver}")
        return result
    result.additions = {arrays.cluster_ids[c]: int(sum(found[u] for u in range(len(units)) if units[u][0] == c))
                        for c in offers}
    result.units = dict.fromkeys(result.additions, "machine")
    result.cost = float(price @ found)
    result.bound = min(bound, result.cost) if bound is not None else None
    result.gap = relative_gap(result.cost, result.bound)
    result.sized_instance, result.plan, result.metrics, result.checks = payload
    result.status = "optimal" if proven else ("time_limit" if outcome["status"] == "time_limit" else "feasible")
    if proven:
        result.gap = 0.0 if (result.gap or 0.0) <= mip_rel_gap + 1e-9 else result.gap
    result.message = f"the sized instance meets {', '.join(map(str, targets))} under {solver} (solved and judged)"
    return result


def _preemptible_room(arrays: Any, instance: Any, targets: Sequence[Target]) -> np.ndarray | None:
    """Free capacity with every holding some pending workload may preempt counted as free (None
    when the targets forbid preempting, or nothing is preemptible)."""
    if any(target.metric == "preempted_jobs" for target in targets) or not arrays.num_running:
        return None
    highest = min(workload.priority for workload in instance.workloads)  # 0 is the highest priority
    jobs = np.flatnonzero(arrays.running_priority > highest)
    if not jobs.size:
        return None
    rows = arrays.holdings_of(jobs)
    freed = np.zeros_like(arrays.used)
    np.add.at(freed, arrays.hold_machine[rows], arrays.hold_amount[rows])
    return np.maximum(arrays.capacity - arrays.used + freed, 0.0)


def _offers(arrays: Any, purchases: Sequence[Purchase]) -> dict[int, tuple[float, float]]:
    offers = {}
    for item in purchases:
        if item.name not in arrays.cluster_ids:
            raise InstanceError("--buy", f"unknown cluster '{item.name}' (clusters: {', '.join(arrays.cluster_ids)})")
        offers[arrays.cluster_ids.index(item.name)] = (1.0 if item.price is None else item.price,
                                                       math.inf if item.maximum is None else math.floor(item.maximum))
    return offers


def machine_templates(arrays: Any, hardware: set[int]) -> dict[int, dict[int, np.ndarray]]:
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
