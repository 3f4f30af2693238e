"""Seeded generator of Tetris placement instances with the shapes MAST reports (§2, §3, §4.2, §5).

What follows the paper, and what is this generator's own assumption:

* Uneven hardware (Figure 2): regions differ in size, each has a random subset of the GPU
  types, and some regions are short of GPUs. [shape from the paper; numbers ours]
* A table read by jobs is shared by 3 / 17 / 45 jobs at P50 / P90 / P99 (§2, Figure 3); tables
  nobody reads today are cold (they only use storage). [paper]
* ML workloads use 16 / 64 / 128 GPUs at P50 / P90 / P99 and run 20 min / 6.7 h / 66 h (§5.1),
  capped at 24 h of daily demand. [paper; the cap is ours]
* Priorities 0..6 follow §4.2's mix 3 / 20 / 16 / 54 / 0.2 / 0.5 / 0.02 %, the 6 % without a
  priority at the lowest level. [paper]
* 70 % of ML jobs are first-time (§3.1, §5.1); high-priority jobs are more often recurring
  ("typically retrained daily"). Spark/Presto pipelines are recurring. [paper; the split ours]
* Table sizes follow the replication sizes of §3.4: 565 MB / 103 GB / 7.5 TB at P50/P90/P99.
* Teams own tables and jobs; jobs mostly read their own team's tables and a team uses one GPU
  type (§3.1: "jobs from the same team frequently share input tables and require the same
  types of hardware"). ML jobs read 1 / 4 / 10 tables at P50/P90/P99, analytics jobs 3 / 12 /
  40. [ours]
* The ``manual`` placement (§5.6's V0): each team puts all its tables in one region chosen by
  users, skewed to a few popular regions (Zipf). GPU supply per region is then scaled so that
  the most overloaded region's high-priority demand/supply is ``v0_max_overload`` (2.63 in
  the paper) while the fleet-wide ratio is ``load``. [the target is the paper's V0]
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from fleetplan.instances.base import InstanceError, StrictModel
from fleetplan.instances.placement import ML, PRIORITY_LEVELS, PlacementInstance
from fleetplan.instances.placement.evaluate import regions_of_jobs
from fleetplan.instances.resources import Estimate

GPU_TYPE_NAMES = ("h100", "a100", "v100", "mi300", "l40", "t4", "p100", "k80")
# §4.2: 3%, 20%, 16%, 54%, 0.2%, 0.5%, 0.02%; the 6% without a priority count as the lowest.
PRIORITY_MIX = np.array([3.0, 20.0, 16.0, 54.0, 0.2, 0.5, 0.02 + 6.0])
TABLE_READERS = ((0.0, 1.0), (0.5, 3.0), (0.9, 17.0), (0.99, 45.0), (1.0, 200.0))
ML_GPUS = ((0.0, 1.0), (0.5, 16.0), (0.9, 64.0), (0.99, 128.0), (1.0, 1024.0))
ML_HOURS = ((0.0, 0.05), (0.5, 1 / 3), (0.9, 6.7), (0.99, 66.0), (1.0, 200.0))
TABLE_BYTES = ((0.0, 1e6), (0.5, 565e6), (0.9, 103e9), (0.99, 7.5e12), (1.0, 50e12))
ML_TABLES = ((0.0, 1.0), (0.5, 1.0), (0.9, 4.0), (0.99, 10.0), (1.0, 20.0))
ANALYTICS_TABLES = ((0.0, 1.0), (0.5, 3.0), (0.9, 12.0), (0.99, 40.0), (1.0, 100.0))


class PlacementParams(StrictModel):
    """Parameters of :func:`generate` (``fleetplan generate placement --regions R --tables T
    --jobs J --seed K``)."""

    regions: int = Field(default=8, ge=2, le=50)
    tables: int = Field(default=1000, ge=1, le=2_000_000)
    jobs: int = Field(default=1000, ge=1, le=2_000_000)
    gpu_types: int = Field(default=3, ge=1, le=len(GPU_TYPE_NAMES))
    applications: int = Field(default=8, ge=1, le=1000)
    tables_per_team: float = Field(default=40.0, gt=0, description="mean tables a team owns")
    ml_share: float = Field(default=0.4, ge=0, le=1, description="share of jobs that are ML training")
    first_time_share: float = Field(default=0.7, ge=0, le=1, description="share of ML jobs seen "
                                    "for the first time (§5.1)")
    popularity_skew: float = Field(default=1.2, ge=0, description="Zipf exponent of users' manual "
                                   "region choice (0: uniform)")
    load: float = Field(default=0.7, gt=0, description="fleet-wide high-priority GPU "
                        "demand/supply")
    v0_max_overload: float = Field(default=2.63, gt=0, description="target high-priority "
                                   "demand/supply of the most overloaded region in V0 (§5.6)")
    storage_headroom: float = Field(default=3.0, ge=1, description="total storage capacity over "
                                    "the bytes of all tables")
    move_quota_share: float | None = Field(default=0.2, ge=0, description="daily move quota as a "
                                           "share of all bytes; null: unlimited")
    dr_policy: str = Field(default="partner", pattern="^(partner|largest_gpu_supply|none)$")


def quantile_sample(rng: np.random.Generator, size: int, points: tuple) -> np.ndarray:
    """Draw from the distribution whose quantiles are ``points`` ((q, value), ...), log-linear
    between them, so the named percentiles are reproduced exactly."""
    qs = np.array([q for q, _ in points])
    logs = np.log(np.array([v for _, v in points]))
    return np.exp(np.interp(rng.random(size), qs, logs))


def _integers(values: np.ndarray) -> np.ndarray:
    return np.maximum(1, np.rint(values)).astype(np.int64)


def _region_supply_shape(rng: np.random.Generator, regions: int, types: int) -> np.ndarray:
    """Relative GPU supply (regions, types): uneven sizes, a subset of types each, and about a
    fifth of the regions short of GPUs (Figure 2)."""
    size = rng.lognormal(0.0, 0.6, regions)
    has = rng.random((regions, types)) < 0.6
    for g in range(types):  # every type exists somewhere
        if not has[:, g].any():
            has[rng.integers(regions), g] = True
    for r in range(regions):
        if not has[r].any():
            has[r, rng.integers(types)] = True
    short = rng.random(regions) < 0.2
    short[np.argmax(size)] = False
    size = np.where(short, size * 0.05, size)
    shape = has * rng.dirichlet(np.ones(types), regions) * size[:, None]
    return shape / shape.sum()


def _bipartite(rng: np.random.Generator, table_team: np.ndarray, readers: np.ndarray,
               job_team: np.ndarray, wants: np.ndarray, cross: np.ndarray,
               team_weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Match table stubs (a table repeated once per reader) with job stubs (a job repeated once
    per table it reads) inside teams: a team's job stubs are spread evenly over its table
    stubs in random order; a job stub crosses to a random team with probability ``cross``."""
    teams = len(team_weight)
    table_stub = np.repeat(np.arange(len(readers)), readers)
    table_stub = table_stub[np.lexsort((rng.random(len(table_stub)), table_team[table_stub]))]
    table_count = np.bincount(table_team[table_stub], minlength=teams)
    table_start = np.concatenate([[0], np.cumsum(table_count)[:-1]])
    job_stub = np.repeat(np.arange(len(wants)), wants)
    team = job_team[job_stub].copy()
    crossing = rng.random(len(job_stub)) < cross[job_stub]
    team[crossing] = rng.choice(teams, size=int(crossing.sum()), p=team_weight)
    order = np.lexsort((rng.random(len(job_stub)), team))
    job_stub, team = job_stub[order], team[order]
    job_count = np.bincount(team, minlength=teams)
    rank = np.arange(len(job_stub)) - np.concatenate([[0], np.cumsum(job_count)[:-1]])[team]
    has = table_count[team] > 0
    pick = np.where(has, table_start[team] + rank * table_count[team] // np.maximum(job_count[team], 1),
                    rng.integers(max(len(table_stub), 1), size=len(job_stub)))
    if len(table_stub) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    pairs = np.unique(job_stub * len(readers) + table_stub[pick])
    return pairs // len(readers), pairs % len(readers)


def estimate(params: PlacementParams) -> Estimate:
    """Memory and time to generate and save ``params``' instance (measured: 0.3 kB per table,
    1.2 kB per job, 10 us per table or job; :mod:`fleetplan.instances.resources`)."""
    return Estimate(memory_bytes=300.0 * params.tables + 1_200.0 * params.jobs,
                    seconds=10e-6 * (params.tables + params.jobs),
                    what=f"tables = {params.tables:,}, jobs = {params.jobs:,}", sizes=("tables", "jobs"))


def generate(params: PlacementParams | None = None, seed: int = 0) -> PlacementInstance:
    """A seeded Tetris instance whose ``tables.home`` is the users' manual placement (V0).

    >>> instance = generate(PlacementParams(regions=4, tables=100, jobs=80), seed=3)
    >>> arrays = instance.arrays()
    >>> arrays.num_regions, arrays.num_tables, arrays.num_jobs
    (4, 100, 80)
    """
    p = params or PlacementParams()
    rng = np.random.default_rng(seed)
    R, T, J, G = p.regions, p.tables, p.jobs, p.gpu_types
    supply_shape = _region_supply_shape(rng, R, G)

    # Teams, their manually chosen regions (skewed) and GPU types.
    teams = max(1, int(round(T / p.tables_per_team)))
    popularity = 1.0 / np.arange(1, R + 1) ** p.popularity_skew
    popularity = popularity[rng.permutation(R)]
    team_region = rng.choice(R, size=teams, p=popularity / popularity.sum())
    available = supply_shape[team_region] > 0
    team_gpu = np.array([rng.choice(np.flatnonzero(row)) if rng.random() < 0.9 else rng.integers(G)
                         for row in available], dtype=np.int64)
    team_weight = rng.lognormal(0.0, 1.0, teams)
    team_weight /= team_weight.sum()
    team_app = np.arange(teams) % p.applications

    # Tables: owner team (contiguous), size, home = the team's region, readers.
    table_team = np.sort(rng.choice(teams, size=T, p=team_weight))
    size = np.round(quantile_sample(rng, T, TABLE_BYTES))
    home = team_region[table_team]

    # Jobs: kind, team, priority, recurring, GPU needs, tables wanted.
    is_ml = rng.random(J) < p.ml_share
    kind = np.where(is_ml, ML, 1 + (rng.random(J) < 0.5)).astype(np.int64)
    job_team = rng.choice(teams, size=J, p=team_weight)
    priority = rng.choice(PRIORITY_LEVELS, size=J, p=PRIORITY_MIX / PRIORITY_MIX.sum())
    high = priority <= 2
    # Recurring share of ML jobs is 1 - first_time_share overall, twice as likely when high.
    base = (1 - p.first_time_share) / (2 * high.mean() + (1 - high.mean())) if J else 0.0
    recurring = np.where(is_ml, rng.random(J) < np.minimum(1.0, base * np.where(high, 2.0, 1.0)), True)
    gpu_type = np.where(is_ml, np.where(rng.random(J) < 0.9, team_gpu[job_team], rng.integers(G, size=J)), -1)
    gpu_hours = np.where(is_ml, _integers(quantile_sample(rng, J, ML_GPUS))
                         * np.minimum(24.0, quantile_sample(rng, J, ML_HOURS)), 0.0)
    gpu_hours = np.round(gpu_hours, 3)
    cpu_hours = np.round(np.where(is_ml, 0.1, 1.0) * rng.lognormal(3.0, 1.0, J), 3)
    wants = np.where(is_ml, _integers(quantile_sample(rng, J, ML_TABLES)),
                     _integers(quantile_sample(rng, J, ANALYTICS_TABLES)))
    # Tables nobody reads are cold: read only as many as the jobs' reads can share 3/17/45-wise.
    readers = _integers(quantile_sample(rng, T, TABLE_READERS))
    read = np.zeros(T, dtype=bool)
    read_count = int(np.searchsorted(np.cumsum(readers[rng.permutation(T)]), wants.sum())) + 1
    read[rng.permutation(T)[:min(T, read_count)]] = True
    readers = np.where(read, readers, 0)
    cross = np.where(is_ml, 0.03, 0.2)
    job_of_pair, table_of_pair = _bipartite(rng, table_team, readers, job_team, wants, cross, team_weight)
    lonely = np.setdiff1d(np.arange(J), job_of_pair)  # every job reads at least one table
    if lonely.size:
        fallback = np.searchsorted(table_team, job_team[lonely])
        fallback = np.where(fallback < T, fallback, rng.integers(T, size=lonely.size))
        fallback = np.where(table_team[np.minimum(fallback, T - 1)] == job_team[lonely], fallback,
                            rng.integers(T, size=lonely.size))
        job_of_pair = np.concatenate([job_of_pair, lonely])
        table_of_pair = np.concatenate([table_of_pair, fallback])
    order = np.lexsort((table_of_pair, job_of_pair))
    job_of_pair, table_of_pair = job_of_pair[order], table_of_pair[order]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(job_of_pair, minlength=J))])

    # V0 high-priority demand per region decides the GPU supply (see the module docstring).
    pair_home = home[table_of_pair]
    low = np.minimum.reduceat(pair_home, ptr[:-1]) if J else np.zeros(0, dtype=np.int64)
    top = np.maximum.reduceat(pair_home, ptr[:-1]) if J else np.zeros(0, dtype=np.int64)
    hp = is_ml & recurring & high & (low == top)
    demand = np.bincount(low[hp], weights=gpu_hours[hp], minlength=R)
    if demand.sum() <= 0:
        demand = np.ones(R)
    supply = _calibrate_supply(supply_shape, demand, p.load, p.v0_max_overload)
    # Expression 6 keeps today's training-at-home rate from dropping by more than a point.
    hp_all = is_ml & recurring & high
    at_home = hp_all & (low == top) & (supply[low, np.maximum(gpu_type, 0)] > 0)
    hp_hours = gpu_hours[hp_all].sum()
    rate = gpu_hours[at_home].sum() / hp_hours if hp_hours > 0 else 1.0
    threshold = max(0.0, float(np.floor((rate - 0.01) * 1000) / 1000))

    # Storage and CPU capacities leave today's placement feasible with room to move.
    total_bytes = size.sum()
    storage_weight = rng.lognormal(0.0, 0.4, R)
    home_bytes = np.bincount(home, weights=size, minlength=R)
    capacity = np.maximum(1.25 * home_bytes, p.storage_headroom * total_bytes * storage_weight / storage_weight.sum())
    capacity = np.ceil(capacity)
    job_app = team_app[job_team]
    region_v0 = np.where(recurring, regions_of_jobs(home, ptr, table_of_pair, kind, size, R), -1)
    cpu_v0 = np.zeros((p.applications, R))
    np.add.at(cpu_v0, (job_app[region_v0 >= 0], region_v0[region_v0 >= 0]), cpu_hours[region_v0 >= 0])
    cpu_total = np.bincount(job_app, weights=cpu_hours, minlength=p.applications)
    cpu_capacity = np.ceil(np.maximum(1.5 * cpu_v0 + 1.0, 2.0 * cpu_total[:, None] / R))

    gpu_names = list(GPU_TYPE_NAMES[:G])
    region_ids = [f"region{r}" for r in range(R)]
    app_ids = [f"app{a}" for a in range(p.applications)]
    cross_bytes_scale = float(size[table_of_pair].sum()) or 1.0
    positive = supply[supply > 0]
    flat_tables = table_of_pair.tolist()
    bounds = ptr.tolist()
    data = {
        "kind": "placement",
        "name": f"tetris-{R}r-{T}t-{J}j-seed{seed}",
        "gpu_types": gpu_names,
        "applications": app_ids,
        "regions": [{
            "id": region_ids[r],
            "gpu_supply": {gpu_names[g]: float(supply[r, g]) for g in range(G) if supply[r, g] > 0},
            "storage_capacity_bytes": float(capacity[r]),
            "cpu_capacity": {app_ids[a]: float(cpu_capacity[a, r]) for a in range(p.applications)},
            "dr_partner": region_ids[(r + 1) % R],
        } for r in range(R)],
        "tables": {"id": [f"t{i}" for i in range(T)], "size_bytes": size.tolist(),
                   "home": [region_ids[r] for r in home.tolist()]},
        "jobs": {
            "id": [f"j{i}" for i in range(J)],
            "kind": [("ml", "spark", "presto")[k] for k in kind.tolist()],
            "tables": [flat_tables[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)],
            "gpu_type": [gpu_names[g] if g >= 0 else None for g in gpu_type.tolist()],
            "gpu_hours": gpu_hours.tolist(), "cpu_hours": cpu_hours.tolist(),
            "priority": priority.tolist(), "application": [app_ids[a] for a in job_app.tolist()],
            "recurring": recurring.tolist(),
        },
        # w1 per byte so that reading everything across regions costs 1, like a GPU slice.
        "weights": {"traffic": 1.0 / cross_bytes_scale, "gpu_balance": 1.0, "storage_balance": 1.0,
                    "priority": [8.0, 4.0, 2.0, 1.0, 0.5, 0.25, 0.125]},
        "sigmoid_scale_gpu_hours": float(np.round(positive.mean() / 4, 3)) if positive.size else 1.0,
        "high_priority_levels": [0, 1, 2],
        "home_training_threshold": threshold,
        "daily_move_quota_bytes": None if p.move_quota_share is None else float(np.ceil(p.move_quota_share * total_bytes)),
        "dr_policy": {"kind": p.dr_policy},
    }
    return PlacementInstance.model_validate(data)


def _calibrate_supply(shape: np.ndarray, demand: np.ndarray, load: float, target: float) -> np.ndarray:
    """Scale region supplies so that V0's worst high-priority demand/supply is ``target`` and
    the fleet-wide ratio is ``load``: supply shares are bent away from (alpha < 0) or towards
    (alpha > 0) the demand shares, alpha found by bisection on the worst ratio."""
    if target <= load:
        raise InstanceError("v0_max_overload", f"must exceed load ({load})")
    region_share = shape.sum(axis=1)
    demand_share = (demand + 0.05 * demand.mean()) / (demand + 0.05 * demand.mean()).sum()

    def shares(alpha: float) -> np.ndarray:
        bent = np.where(region_share > 0, region_share ** (1 - alpha) * demand_share ** alpha, 0.0)
        return bent / bent.sum()

    def worst(alpha: float) -> float:
        s = shares(alpha)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(s > 0, (demand / demand.sum()) / s, 0.0)
        return float(ratio.max() * load)

    low, high = -4.0, 1.0
    if worst(low) < target:
        alpha = low
    else:
        for _ in range(60):
            middle = (low + high) / 2
            if worst(middle) > target:
                low = middle
            else:
                high = middle
        alpha = (low + high) / 2
    total = demand.sum() / load
    per_region = shares(alpha) * total
    within = np.divide(shape, region_share[:, None], out=np.zeros_like(shape), where=region_share[:, None] > 0)
    return np.round(per_region[:, None] * within, 3)
