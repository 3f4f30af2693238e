"""The judge of the ``placement`` kind: Tetris's objective, constraints and metrics (MAST §3.3, §5.6).

Objective (Figure 4; minimised), over the recurring jobs Tetris plans for::

    w1 * sum_job w_job * sum_{table in job} size(table) * [R(job) != R(table)]      (1)
  + w2 * sum_{GPU type g, priority p} w_p * sum_region [                            (2)
          (D[r,g,p] / sum_r D[r,g,p] - S[r,g] / sum_r S[r,g])^2                     (7)
        + (D[r,g,p] / sum_r D[r,g,p]) * sigmoid(max(0, D[r,g,p] - S[r,g]) / tau) ]   (8)
  + w3 * sum_region (B[r] / sum_r B[r] - C[r] / sum_r C[r])^2                      (3, 9)

D is GPU demand (GPU-hours of ML jobs whose R(job) is the region), S GPU supply, B the bytes of
tables homed in a region, C its storage capacity. An ML job whose tables are split (R(job) is
none) reads all its tables across regions in (1) and adds no demand in (2), as §3.3 says.
Expression 8 is read from the figure as the region's *share* of the demand times the sigmoid of
its overload, so that it lies in [0.5, 1] per (type, priority) like (7) lies in [0, 2]; a
(type, priority) with no demand contributes nothing.

Two settings of the instance change these readings (the defaults are the figure as
written, so that a plan scores what it scored before):

* ``split_ml_demand="largest_region"``: a split ML job's GPU-hours count in D (Expressions 2, 7,
  8) in the region holding most of its bytes (ties: the lowest region index), as the metric
  ``hp_demand_supply_max_split_counted`` counts them, so splitting a job no longer hides its
  demand. Expression 1, CPU (5) and home training (6) still see the job as placed nowhere.
* ``overload_form="combined_high_priority"``: Expression 8 compares the high-priority levels'
  *summed* demand with the supply, per (region, GPU type): one slice per GPU type,
  ``W_H * sum_r (D_H[r,g] / sum_r D_H[r,g]) * sigmoid(max(0, D_H[r,g] - S[r,g]) / tau)`` with
  D_H the sum of D over the high levels and W_H the sum of their w_p (so that with every level
  present the term spans what the per-level terms spanned together); the other levels keep
  their own slices, and Expression 7 stays per level. The metric
  ``overload_combined_high_priority`` is this sum over GPU types without the weight.

Hard constraints: storage (4) — every byte stored in a region (home tables and replicas) fits
its capacity; CPU (5) — each application's CPU-hours per region within its capacity;
home training (6) — the share of high-priority recurring ML GPU-hours whose R(job) has the job's
GPU type is at least ``home_training_threshold``; the daily move quota in bytes; no replica in a
table's own home region.
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.base import Evaluation, Violation
from fleetplan.instances.placement import (
    KIND,
    ML,
    NO_REGION,
    PRIORITY_LEVELS,
    PlacementArrays,
    PlacementInstance,
    PlacementPlan,
)
from fleetplan.lazy import lazy_module

sp = lazy_module("scipy.sparse")

# Relative slack when checking capacities: sums of floats in another order differ by ~1e-12.
TOLERANCE = 1e-9
MAX_LISTED = 20


def job_regions(arrays: PlacementArrays, home: np.ndarray) -> np.ndarray:
    """R(job) for every job given the tables' home regions (§3.3); -1 for none.

    Spark/Presto: the region with most of the job's tables; ties to more bytes, then to the
    lower region index. ML: the common region of all its tables, else -1.

    >>> from fleetplan.instances import generate
    >>> instance = generate("placement", {"regions": 3, "tables": 20, "jobs": 20}, seed=0)
    >>> arrays = instance.arrays()
    >>> int(job_regions(arrays, arrays.table_home).min()) >= -1
    True
    """
    if home.shape == arrays.table_home.shape and np.array_equal(home, arrays.table_home):
        # Today's placement is read by `solve` three times (today's plan judged for the
        # comparison, the climb's starting state, the climb's log): about 0.6 s each at 10^6
        # tables. Kept with the arrays, a copy given (callers may change theirs).
        today = arrays.once("today_regions", lambda: regions_of_jobs(
            arrays.table_home, arrays.job_ptr, arrays.job_tables, arrays.job_kind, arrays.table_size,
            arrays.num_regions))
        return today.copy()
    return regions_of_jobs(home, arrays.job_ptr, arrays.job_tables, arrays.job_kind,
                           arrays.table_size, arrays.num_regions)


def regions_of_jobs(home: np.ndarray, job_ptr: np.ndarray, job_tables: np.ndarray,
                    job_kind: np.ndarray, table_size: np.ndarray, num_regions: int) -> np.ndarray:
    """:func:`job_regions` over plain arrays (the generator uses it before an instance exists)."""
    num_jobs = len(job_kind)
    region = np.full(num_jobs, NO_REGION, dtype=np.int64)
    if num_jobs == 0:
        return region
    pair_home = home[job_tables]
    starts = job_ptr[:-1]
    low = np.minimum.reduceat(pair_home, starts)
    high = np.maximum.reduceat(pair_home, starts)
    is_ml = job_kind == ML
    region[is_ml] = np.where(low[is_ml] == high[is_ml], low[is_ml], NO_REGION)
    majority = ~is_ml & (low != high)
    region[~is_ml & (low == high)] = low[~is_ml & (low == high)]
    if majority.any():
        pair_job = np.repeat(np.arange(num_jobs, dtype=np.int64), np.diff(job_ptr))
        pick = majority[pair_job]
        keys = pair_job[pick] * num_regions + pair_home[pick]
        unique, inverse = np.unique(keys, return_inverse=True)
        count = np.bincount(inverse)
        size = np.bincount(inverse, weights=table_size[job_tables[pick]])
        job, reg = unique // num_regions, unique % num_regions
        order = np.lexsort((reg, -size, -count, job))
        job, reg = job[order], reg[order]
        first = np.concatenate([[True], job[1:] != job[:-1]])
        region[job[first]] = reg[first]
    return region


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # = 1 / (1 + exp(-x)), without overflow


def largest_regions(arrays: PlacementArrays, home: np.ndarray, jobs: np.ndarray) -> np.ndarray:
    """The region holding most of each of ``jobs``' bytes (ties: the lowest region index)."""
    num_regions = arrays.num_regions
    if jobs.size == 0:
        return np.zeros(0, dtype=np.int64)
    position = np.full(arrays.num_jobs, -1, dtype=np.int64)
    position[jobs] = np.arange(jobs.size)
    pick = position[arrays.pair_job] >= 0
    tables = arrays.job_tables[pick]
    key = position[arrays.pair_job[pick]] * num_regions + home[tables]
    by_region = np.bincount(key, weights=arrays.table_size[tables], minlength=jobs.size * num_regions)
    return by_region.reshape(jobs.size, num_regions).argmax(axis=1)


def demand_regions(arrays: PlacementArrays, home: np.ndarray, region: np.ndarray) -> np.ndarray:
    """The region where each job's GPU demand counts in Expression 2: R(job), except that under
    ``split_ml_demand="largest_region"`` a split ML job counts in its largest region
    (:func:`largest_regions`). The same array as ``region`` under the default."""
    if arrays.split_ml_demand == "ignored":
        return region
    counted = region.copy()
    split = np.flatnonzero((region < 0) & (arrays.job_kind == ML))
    counted[split] = largest_regions(arrays, home, split)
    return counted


def overload_slices(arrays: PlacementArrays, demand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expression 8's demand (R, G, P) and weights (P,) under ``overload_form``: D and w_p as they
    are (per priority), or the high levels' demand summed into the first high level's column
    with the sum of their w_p (the other high columns empty, weight 0)."""
    if arrays.overload_form == "per_priority":
        return demand, arrays.w_priority
    return combine_high(demand, arrays.high_priority), combined_weights(arrays.w_priority, arrays.high_priority)


def combine_high(demand: np.ndarray, high: np.ndarray) -> np.ndarray:
    """``demand`` (..., P) with the ``high`` levels summed into the first of them (the others 0)."""
    levels = np.flatnonzero(high)
    out = demand.copy()
    if levels.size > 1:
        out[..., levels[0]] = demand[..., levels].sum(axis=-1)
        out[..., levels[1:]] = 0.0
    return out


def combined_weights(w_priority: np.ndarray, high: np.ndarray) -> np.ndarray:
    """w_p with the ``high`` levels' weights summed onto the first of them (the others 0)."""
    levels = np.flatnonzero(high)
    out = np.asarray(w_priority, dtype=float).copy()
    if levels.size > 1:
        out[levels[0]] = out[levels].sum()
        out[levels[1:]] = 0.0
    return out


def gpu_demand(arrays: PlacementArrays, region: np.ndarray) -> np.ndarray:
    """D[r, g, p]: GPU-hours of planned ML jobs placed in region r, by GPU type and priority
    (``region``: where each job's demand counts, :func:`demand_regions`)."""
    use = arrays.planned & (arrays.job_kind == ML) & (region >= 0)
    num_types = len(arrays.gpu_types)
    cell = (region[use] * num_types + arrays.job_gpu_type[use]) * PRIORITY_LEVELS + arrays.job_priority[use]
    flat = np.bincount(cell, weights=arrays.job_gpu_hours[use],
                       minlength=arrays.num_regions * num_types * PRIORITY_LEVELS).astype(float)
    return flat.reshape(arrays.num_regions, num_types, PRIORITY_LEVELS)


def gpu_terms(arrays: PlacementArrays, demand: np.ndarray) -> tuple[float, float]:
    """Expressions 7 and 8 summed over regions, GPU types and priorities, weighted by w_p."""
    supply = arrays.gpu_supply
    total = demand.sum(axis=0)
    active = total > 0
    share = np.divide(demand, total, out=np.zeros_like(demand), where=active)
    supply_total = supply.sum(axis=0)
    supply_share = np.divide(supply, supply_total, out=np.zeros_like(supply), where=supply_total > 0)
    balance = (np.square(share - supply_share[:, :, None]).sum(axis=0) * active) @ arrays.w_priority
    demand, weight = overload_slices(arrays, demand)
    if weight is not arrays.w_priority:  # combined high priorities: their own shares
        total = demand.sum(axis=0)
        share = np.divide(demand, total, out=np.zeros_like(demand), where=total > 0)
    over = np.maximum(0.0, demand - supply[:, :, None]) / arrays.sigmoid_scale
    overload = (share * sigmoid(over)).sum(axis=0) @ weight
    return float(balance.sum()), float(overload.sum())


def storage_balance(arrays: PlacementArrays, home_bytes: np.ndarray) -> float:
    """Expression 9 summed over regions: (share of bytes - share of capacity)^2."""
    total = home_bytes.sum()
    capacity = arrays.storage_capacity.sum()
    share = home_bytes / total if total > 0 else np.zeros_like(home_bytes)
    capacity_share = arrays.storage_capacity / capacity if capacity > 0 else np.zeros_like(home_bytes)
    return float(np.square(share - capacity_share).sum())


def cross_region_bytes(arrays: PlacementArrays, home: np.ndarray, region: np.ndarray,
                       weighted: bool = True, crossing: np.ndarray | None = None) -> float:
    """Expression 1 without w1: bytes planned jobs read from a region other than R(job).

    ``crossing`` (:func:`pair_cross`, when the caller has it) saves recomputing it."""
    pair_job = arrays.pair_job
    if crossing is None:
        crossing = pair_cross(arrays, home, region)
    cross = arrays.planned[pair_job] & crossing
    size = arrays.table_size[arrays.job_tables]
    if weighted:
        size = size * arrays.job_weight[pair_job]
    return float(size[cross].sum())


def pair_cross(arrays: PlacementArrays, home: np.ndarray, region: np.ndarray) -> np.ndarray:
    """For every (job, table) pair: does the job read the table from another region than R(job)?"""
    return region[arrays.pair_job] != home[arrays.job_tables]


def objective_terms(arrays: PlacementArrays, home: np.ndarray) -> dict[str, float]:
    """The weighted terms of the objective for a home assignment (their sum is the objective)."""
    region = job_regions(arrays, home)
    balance, overload = gpu_terms(arrays, gpu_demand(arrays, demand_regions(arrays, home, region)))
    home_bytes = np.bincount(home, weights=arrays.table_size, minlength=arrays.num_regions)
    return {
        "traffic": arrays.w_traffic * cross_region_bytes(arrays, home, region),
        "gpu_balance": arrays.w_gpu * balance,
        "gpu_overload": arrays.w_gpu * overload,
        "storage_balance": arrays.w_storage * storage_balance(arrays, home_bytes),
    }


def hosting_regions(arrays: PlacementArrays, home: np.ndarray, replica_table: np.ndarray,
                    replica_region: np.ndarray, jobs: np.ndarray) -> sp.csr_matrix:
    """Boolean (len(jobs), regions) matrix: the region holds a copy of every table of the job and
    has supply of its GPU type — data-GPU collocation (§3.1), counting replicas."""
    num_tables, num_regions = arrays.num_tables, arrays.num_regions
    rows = np.concatenate([np.arange(num_tables), replica_table])
    cols = np.concatenate([home, replica_region])
    presence = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                             shape=(num_tables, num_regions))
    presence.data[:] = 1.0  # a replica in the home region must not count twice
    starts, ends = arrays.job_ptr[jobs], arrays.job_ptr[jobs + 1]
    lengths = ends - starts
    pair_rows = np.repeat(np.arange(len(jobs)), lengths)
    offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    pair_tables = arrays.job_tables[np.repeat(starts, lengths) + offsets]
    incidence = sp.csr_matrix((np.ones(len(pair_rows), dtype=np.float32), (pair_rows, pair_tables)),
                              shape=(len(jobs), num_tables))
    present = (incidence @ presence).tocoo()
    has_type = arrays.gpu_supply[present.col, arrays.job_gpu_type[jobs][present.row]] > 0
    ok = (present.data >= lengths[present.row] - 0.5) & has_type
    return sp.csr_matrix((np.ones(int(ok.sum()), dtype=bool), (present.row[ok], present.col[ok])),
                         shape=(len(jobs), num_regions))


def fidelity_metrics(arrays: PlacementArrays, home: np.ndarray, region: np.ndarray,
                     terms: dict[str, float], demand: np.ndarray | None = None) -> dict[str, float]:
    """Readings of Figure 4 and §5.6 that the objective alone can hide.

    * A split ML job (no R(job)) adds no GPU demand in Expression 2, so splitting hides demand:
      ``hp_gpu_hours_split_share`` is the share of high-priority GPU-hours in split jobs, and
      ``hp_demand_supply_max_split_counted`` the §5.6 maximum with each split job's demand
      counted in the region holding most of its bytes.
    * §5.6's ratio divides all GPU types' demand by all types' supply; per GPU type,
      ``hp_demand_supply_max_per_type`` is max over (region, type with supply) of demand/supply,
      ``hp_gpu_hours_without_their_type`` the high-priority GPU-hours placed where their type
      is absent, and ``hp_demand_supply_total_max_type`` the fleet-wide ratio of the worst type
      (above 1, no placement can bring the per-type maximum to 1).
    * Expression 8 is applied per priority level by default; the combined high-priority form
      (all high levels' demand against the supply, split jobs left out) is reported as
      ``overload_combined_high_priority``; ``overload_form`` makes the objective use it.
    * Expression 8 is at least sigmoid(0) = 1/2 times demand shares summing to 1 for every
      slice with demand: ``objective_constant_floor`` is that constant (w2 times the sum of
      w_p/2 over those slices, of Expression 8's slices under ``overload_form``) and
      ``objective_above_floor`` the objective minus it; relative gaps are best read against
      the latter. ``demand``: the objective's D (:func:`gpu_demand` of the demand regions).
    """
    high = arrays.high_priority_ml
    num_regions, num_types = arrays.num_regions, len(arrays.gpu_types)
    hours = arrays.job_gpu_hours
    supply = arrays.gpu_supply  # (R, G)
    split = high & (region < 0)
    hp_total = float(hours[high].sum())
    # Region holding most of each job's bytes (ties: the lower index).
    counted = region.copy()
    split_jobs = np.flatnonzero(split)
    if split_jobs.size:
        counted[split_jobs] = largest_regions(arrays, home, split_jobs)
    all_supply = supply.sum(axis=1)
    with_gpus = all_supply > 0
    demand_counted = np.bincount(counted[high], weights=hours[high], minlength=num_regions).astype(float)
    placed = high & (region >= 0)
    cell = region[placed] * num_types + arrays.job_gpu_type[placed]
    per_type = np.bincount(cell, weights=hours[placed], minlength=num_regions * num_types).astype(float).reshape(
        num_regions, num_types)
    has_type = supply > 0
    type_total = np.bincount(arrays.job_gpu_type[high], weights=hours[high], minlength=num_types)
    supply_total = supply.sum(axis=0)
    # Combined high priorities: Expression 8 on their summed demand per (region, type).
    share = np.divide(per_type, per_type.sum(axis=0), out=np.zeros_like(per_type), where=per_type.sum(axis=0) > 0)
    combined = float((share * sigmoid(np.maximum(0.0, per_type - supply) / arrays.sigmoid_scale)).sum())
    if demand is None:
        demand = gpu_demand(arrays, demand_regions(arrays, home, region))  # (R, G, P)
    demand, weight = overload_slices(arrays, demand)
    active = demand.sum(axis=0) > 0  # (G, P)
    floor = float(arrays.w_gpu * 0.5 * (active * weight[None, :]).sum())
    objective = float(sum(terms.values()))
    return {
        "hp_gpu_hours_split_share": float(hours[split].sum() / hp_total) if hp_total > 0 else 0.0,
        "hp_demand_supply_max_split_counted": float((demand_counted[with_gpus] / all_supply[with_gpus]).max())
        if with_gpus.any() else 0.0,
        "hp_demand_supply_max_per_type": float((per_type[has_type] / supply[has_type]).max()) if has_type.any() else 0.0,
        "hp_gpu_hours_without_their_type": float(per_type[~has_type].sum()),
        "hp_demand_supply_total_max_type": float(max(
            (type_total[g] / supply_total[g] for g in range(num_types) if supply_total[g] > 0), default=0.0)),
        "overload_combined_high_priority": combined,
        "objective_constant_floor": floor,
        "objective_above_floor": objective - floor,
    }


def _share(weights: np.ndarray, good: np.ndarray) -> float:
    total = weights.sum()
    return float(weights[good].sum() / total) if total > 0 else 1.0


def evaluate(instance: PlacementInstance, plan: PlacementPlan) -> Evaluation:
    """Judge a placement plan: the Figure 4 objective and its terms, violations, §5.6 metrics.

    >>> from fleetplan.instances import generate
    >>> from fleetplan.instances.placement import PlacementPlan
    >>> instance = generate("placement", {"regions": 4, "tables": 50, "jobs": 60}, seed=1)
    >>> plan = PlacementPlan.from_arrays(instance, instance.arrays().table_home)
    >>> evaluation = evaluate(instance, plan)
    >>> evaluation.feasible, evaluation.metrics["bytes_moved"]
    (True, 0.0)
    """
    arrays = instance.arrays()
    home = plan.home_array(instance)
    replica_table, replica_region, replica_bytes = plan.replica_arrays(instance)
    region = job_regions(arrays, home)
    demand = gpu_demand(arrays, demand_regions(arrays, home, region))
    balance, overload = gpu_terms(arrays, demand)
    num_regions = arrays.num_regions
    home_bytes = np.bincount(home, weights=arrays.table_size, minlength=num_regions)
    crossing = pair_cross(arrays, home, region)
    traffic = cross_region_bytes(arrays, home, region, crossing=crossing)
    terms = {
        "traffic": arrays.w_traffic * traffic,
        "gpu_balance": arrays.w_gpu * balance,
        "gpu_overload": arrays.w_gpu * overload,
        "storage_balance": arrays.w_storage * storage_balance(arrays, home_bytes),
    }
    violations: list[Violation] = []

    stored = home_bytes + np.bincount(replica_region, weights=replica_bytes, minlength=num_regions).astype(float)
    capacity = arrays.storage_capacity
    for r in np.flatnonzero(stored > capacity * (1 + TOLERANCE) + 1e-6)[:MAX_LISTED]:
        violations.append(Violation(
            constraint="storage", where=arrays.region_ids[r], amount=float(stored[r] - capacity[r]),
            message=f"{stored[r]:.6g} bytes stored (homes and replicas) of {capacity[r]:.6g}"))

    placed = arrays.planned & (region >= 0)
    cpu = np.bincount(arrays.job_app[placed] * num_regions + region[placed],
                      weights=arrays.job_cpu_hours[placed], minlength=len(arrays.app_ids) * num_regions).astype(float)
    cpu = cpu.reshape(len(arrays.app_ids), num_regions)
    over = np.argwhere(cpu > arrays.cpu_capacity * (1 + TOLERANCE) + 1e-9)
    for a, r in over[:MAX_LISTED]:
        violations.append(Violation(
            constraint="cpu", where=f"{arrays.app_ids[a]}/{arrays.region_ids[r]}",
            amount=float(cpu[a, r] - arrays.cpu_capacity[a, r]),
            message=f"{cpu[a, r]:.6g} CPU-hours of {arrays.cpu_capacity[a, r]:.6g}"))

    high = arrays.high_priority_ml
    hp_hours = arrays.job_gpu_hours[high]
    hp_region, hp_type = region[high], arrays.job_gpu_type[high]
    at_home = (hp_region >= 0) & (arrays.gpu_supply[np.maximum(hp_region, 0), hp_type] > 0)
    home_rate = _share(hp_hours, at_home)
    if home_rate < arrays.home_training_threshold - TOLERANCE:
        violations.append(Violation(
            constraint="home_training", where="high-priority ML jobs",
            amount=float(arrays.home_training_threshold - home_rate),
            message=f"{home_rate:.4%} of high-priority GPU-hours train in their home region, "
                    f"below the threshold {arrays.home_training_threshold:.4%}"))

    moved = home != arrays.table_home
    bytes_moved = float(arrays.table_size[moved].sum())
    if bytes_moved > arrays.move_quota_bytes * (1 + TOLERANCE) + 1e-6:
        violations.append(Violation(
            constraint="move_quota", where="tables", amount=bytes_moved - arrays.move_quota_bytes,
            message=f"{bytes_moved:.6g} bytes moved, daily quota {arrays.move_quota_bytes:.6g}"))
    at_own_home = replica_region == home[replica_table]
    for index in np.flatnonzero(at_own_home)[:MAX_LISTED]:
        violations.append(Violation(
            constraint="replica_at_home", where=arrays.table_ids[replica_table[index]],
            amount=float(replica_bytes[index]), message="a replica in the table's own home region"))

    # §5.6 metrics: high-priority GPU demand/supply per region (regions that have GPUs).
    supply = arrays.gpu_supply.sum(axis=1)
    hp_demand = np.bincount(hp_region[hp_region >= 0], weights=hp_hours[hp_region >= 0],
                            minlength=num_regions).astype(float)
    with_gpus = supply > 0
    ratio = hp_demand[with_gpus] / supply[with_gpus]
    hp_type_demand = high_priority_type_demand(arrays, hp_region, hp_type, hp_hours)
    unserved = np.maximum(hp_type_demand - arrays.gpu_supply, 0.0)
    ml = np.flatnonzero(arrays.job_kind == ML)
    hosts = hosting_regions(arrays, home, replica_table, replica_region, ml)
    collocated = np.diff(hosts.indptr) > 0
    ml_hours = arrays.job_gpu_hours[ml]
    ml_high = high[ml]
    ml_first = ~arrays.job_recurring[ml]
    metrics = {
        "hp_demand_supply_max": float(ratio.max()) if ratio.size else 0.0,
        "hp_demand_supply_std": float(ratio.std()) if ratio.size else 0.0,
        "hp_demand_supply_overall": float(hp_demand.sum() / supply.sum()) if supply.sum() > 0 else 0.0,
        "hp_gpu_hours_in_regions_without_gpus": float(hp_demand[~with_gpus].sum()),
        "home_training_rate": home_rate,
        "collocation_rate": _share(ml_hours[ml_high], collocated[ml_high]),
        "collocation_rate_first_time": _share(ml_hours[ml_first], collocated[ml_first]),
        "collocation_rate_jobs": float(collocated.mean()) if ml.size else 1.0,
        "candidate_regions_mean": float(np.diff(hosts.indptr).mean()) if ml.size else 0.0,
        "ml_jobs_no_feasible_region": float((~collocated).sum()),
        "hp_ml_jobs_no_feasible_region": float((~collocated & ml_high).sum()),
        "ml_jobs_split": float(((region < 0) & (arrays.job_kind == ML) & arrays.planned).sum()),
        "cross_region_bytes": cross_region_bytes(arrays, home, region, weighted=False, crossing=crossing),
        "home_bytes": float(home_bytes.sum()),
        "replica_bytes": float(replica_bytes.sum()),
        "replica_storage_overhead": float(replica_bytes.sum() / home_bytes.sum()) if home_bytes.sum() > 0 else 0.0,
        "storage_utilization_max": float((stored / np.maximum(capacity, 1e-300)).max()),
        "hp_gpu_hours_unserved": float(unserved.sum()),
        "storage_over_capacity_bytes": float(np.maximum(stored - capacity, 0.0).sum()),
        "bytes_moved": bytes_moved,
        "tables_moved": float(moved.sum()),
        "moves_listed": float(len(plan.moves)),
    }
    metrics.update(fidelity_metrics(arrays, home, region, terms, demand))
    if np.isfinite(arrays.move_quota_bytes):
        metrics["move_quota_bytes"] = arrays.move_quota_bytes
    breakdown = plan_breakdown(arrays, home, region, demand, hp_demand, home_bytes, replica_region,
                               replica_bytes, stored, crossing)
    breakdown["region_gpu_types"]["hp_gpu_demand"] = hp_type_demand.ravel().tolist()
    breakdown["region_gpu_types"]["hp_gpu_hours_unserved"] = unserved.ravel().tolist()
    verdict = Evaluation(kind=KIND, objective=float(sum(terms.values())), sense="min", terms=terms,
                         violations=violations, metrics=metrics)
    verdict.breakdown = breakdown  # built here as lists of plain values: no need to validate 10^5 items
    return verdict


def high_priority_type_demand(arrays: PlacementArrays, hp_region: np.ndarray, hp_type: np.ndarray,
                              hp_hours: np.ndarray) -> np.ndarray:
    """(regions, GPU types): GPU-hours of high-priority ML jobs placed in each region on each
    type (§5.6's demand; jobs whose tables are split have no region and count nowhere)."""
    placed = hp_region >= 0
    num_types = len(arrays.gpu_types)
    cells = hp_region[placed] * num_types + hp_type[placed]
    return np.bincount(cells, weights=hp_hours[placed],
                       minlength=arrays.num_regions * num_types).astype(float).reshape(arrays.num_regions, num_types)


def plan_breakdown(arrays: PlacementArrays, home: np.ndarray, region: np.ndarray, demand: np.ndarray,
                   hp_demand: np.ndarray, home_bytes: np.ndarray, replica_region: np.ndarray,
                   replica_bytes: np.ndarray, stored: np.ndarray,
                   crossing: np.ndarray | None = None) -> dict[str, dict[str, list]]:
    """The plan per region, per (region, GPU type) and per job, column-wise.

    ``regions``: GPU supply and the demand of planned ML jobs placed there (Expression 2's D,
    all types and priorities; ``hp_gpu_demand`` the high-priority part of §5.6), tables and
    bytes homed there, replica bytes, storage used (homes and replicas, constraint 4) and
    capacity. ``region_gpu_types``: D and S per GPU type. ``jobs``: R(job) (§3.3; null when an
    ML job's tables are split) and the bytes it reads from other regions.
    """
    num_regions, num_types = arrays.num_regions, len(arrays.gpu_types)
    type_demand = demand.sum(axis=2)  # (regions, types)
    names = np.array([*arrays.region_ids, None], dtype=object)  # index -1 is "no region"
    cross = pair_cross(arrays, home, region) if crossing is None else crossing
    read_elsewhere = np.bincount(arrays.pair_job, weights=arrays.table_size[arrays.job_tables] * cross,
                                 minlength=arrays.num_jobs)
    return {
        "regions": {
            "id": list(arrays.region_ids),
            "gpu_supply": arrays.gpu_supply.sum(axis=1).tolist(),
            "gpu_demand": type_demand.sum(axis=1).tolist(),
            "hp_gpu_demand": hp_demand.tolist(),
            "tables": np.bincount(home, minlength=num_regions).tolist(),
            "home_bytes": home_bytes.tolist(),
            "replica_bytes": np.bincount(replica_region, weights=replica_bytes, minlength=num_regions).tolist(),
            "storage_used_bytes": stored.tolist(),
            "storage_capacity_bytes": arrays.storage_capacity.tolist(),
        },
        "region_gpu_types": {
            "id": [f"{r}/{g}" for r in arrays.region_ids for g in arrays.gpu_types],
            "region": np.repeat(names[:-1], num_types).tolist(),
            "gpu_type": list(arrays.gpu_types) * num_regions,
            "gpu_demand": type_demand.ravel().tolist(),
            "gpu_supply": arrays.gpu_supply.ravel().tolist(),
        },
        "jobs": {
            "id": list(arrays.job_ids),
            "region": names[region].tolist(),
            "cross_region_bytes": read_elsewhere.tolist(),
        },
    }
