"""Seeded generator of RMS regions with the shapes MAST reports (§2, §4.2, §4.3.1, §5.1, §5.2).

What follows the paper, and what is this generator's own assumption:

* A region of ML dynamic clusters with GPU and CPU machines (§2); MAST's largest RMS region has
  about 20 dynamic clusters, 64,000 CPU machines and 20,000 GPUs (§4.3.1): ``clusters=20
  machines=2500 gpus_per_machine=8 cpu_machines=64000``. [paper]
* Nearly full: running jobs hold ``load`` of the GPUs (MAST averages 98% GPU allocation, §5.2,
  Figure 5) and of the CPU machines' cores. [paper]
* GPU jobs use 16 / 64 / 128 GPUs at P50 / P90 / P99 (§5.1); below 8 GPUs a job is one task,
  above it tasks of 8 GPUs (one per machine). CPU jobs use 72 / 180 / 205 machines at P50 /
  P90 / P99 (§5.1's machines per workload). [paper; the task shapes ours]
* Priorities 0..6 follow §4.2's mix 3 / 20 / 16 / 54 / 0.2 / 0.5 / 0.02 %, the 6 % without a
  priority at the lowest level; running jobs have run a uniform fraction of a duration drawn
  at 20 min / 6.7 h / 66 h (P50 / P90 / P99, §5.1). [paper]
* Each cluster has one GPU type (RAS's hardware preference, §2); clusters differ in size
  (lognormal); racks hold ``machines_per_rack`` machines; running jobs are placed first-fit
  from a random rack of a random cluster, which leaves the fragmentation RMS must work with.
  About 70 % of pending workloads use GPUs (§5.1); a workload has 1 to ``max_jobs_per_workload``
  jobs of the same hardware. [ours]
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from fleetplan.instances.base import StrictModel
from fleetplan.instances.binpack import PRIORITY_LEVELS, BinpackInstance, tasks_that_fit
from fleetplan.instances.resources import Estimate

# §4.2: 3%, 20%, 16%, 54%, 0.2%, 0.5%, 0.02%; the 6% without a priority count as the lowest.
PRIORITY_MIX = np.array([3.0, 20.0, 16.0, 54.0, 0.2, 0.5, 0.02 + 6.0])
JOB_GPUS = ((0.0, 1.0), (0.5, 16.0), (0.9, 64.0), (0.99, 128.0), (1.0, 512.0))
CPU_JOB_MACHINES = ((0.0, 1.0), (0.5, 72.0), (0.9, 180.0), (0.99, 205.0), (1.0, 400.0))
DURATION_HOURS = ((0.0, 0.05), (0.5, 1 / 3), (0.9, 6.7), (0.99, 66.0), (1.0, 200.0))
GPU_TYPE_NAMES = ("gpu-h100", "gpu-a100", "gpu-v100", "gpu-mi300")
GPU_MACHINE_CPUS, GPU_MACHINE_MEMORY = 192, 2048.0
CPU_MACHINE_CPUS, CPU_MACHINE_MEMORY = 72, 256.0
CPU_TASK_CORES = (18, 36, 72)


class BinpackParams(StrictModel):
    """Parameters of :func:`generate` (``fleetplan generate binpack --clusters C --machines M
    --gpus-per-machine 8 --load 0.9 --seed K``)."""

    clusters: int = Field(default=4, ge=1, le=200, description="ML dynamic clusters in the region")
    machines: int = Field(default=64, ge=0, le=100_000, description="GPU machines in the region")
    gpus_per_machine: int = Field(default=8, ge=1, le=16, description="GPUs on each GPU machine")
    cpu_machines: int = Field(default=0, ge=0, le=500_000, description="CPU machines in the region")
    machines_per_rack: int = Field(default=4, ge=1, le=64, description="machines in each rack")
    gpu_types: int = Field(default=1, ge=1, le=len(GPU_TYPE_NAMES), description="GPU hardware types; "
                           "clusters take them in turn, one type per cluster")
    load: float = Field(default=0.9, ge=0, le=1, description="share of GPUs (and CPU cores) held by "
                        "running jobs")
    workloads: int = Field(default=4, ge=1, le=100_000, description="pending workloads (one GMS pass)")
    max_jobs_per_workload: int = Field(default=2, ge=1, le=16, description="most jobs in one pending "
                                       "workload (each has 1 to this many)")
    pending_priority: int | None = Field(default=None, ge=0, le=PRIORITY_LEVELS - 1,
                                         description="priority of every pending workload; null: "
                                         "§4.2's mix")
    gpu_scale: float = Field(default=1.0, gt=0, le=1, description="GPU sizes of jobs multiplied by "
                             "this (small regions need small jobs)")


def quantile_sample(rng: np.random.Generator, size: int, points: tuple) -> np.ndarray:
    """Draw from the distribution whose quantiles are ``points`` ((q, value), ...), log-linear
    between them, so the named percentiles are reproduced exactly."""
    qs = np.array([q for q, _ in points])
    logs = np.log(np.array([v for _, v in points]))
    return np.exp(np.interp(rng.random(size), qs, logs))


def _gpu_shape(gpus: float, per_machine: int) -> tuple[int, int]:
    """(tasks, GPUs per task) of a job of about ``gpus`` GPUs: one task below a machine,
    whole-machine tasks above it."""
    g = max(1, int(round(gpus)))
    if g < per_machine:
        g = 1 << int(np.floor(np.log2(g)))
        return 1, min(g, per_machine)
    return max(1, int(round(g / per_machine))), per_machine


def _split(rng: np.random.Generator, total: int, parts: int) -> np.ndarray:
    weights = rng.lognormal(0.0, 0.4, parts)
    counts = np.floor(weights / weights.sum() * total).astype(np.int64)
    counts[np.argsort(-weights)[: total - int(counts.sum())]] += 1
    return counts


def _job_demand(rng: np.random.Generator, gpu: bool, p: BinpackParams, gpus_hint: float) -> tuple[int, list]:
    """(tasks, [gpus, cpus, memory] per task) of one generated job."""
    if gpu:
        tasks, per_task = _gpu_shape(gpus_hint * p.gpu_scale, p.gpus_per_machine)
        share = per_task / p.gpus_per_machine
        cpus = max(1, int(GPU_MACHINE_CPUS * share * rng.uniform(0.25, 0.75)))
        memory = float(round(GPU_MACHINE_MEMORY * share * rng.uniform(0.25, 0.75)))
        return tasks, [per_task, cpus, memory]
    cores = int(rng.choice(CPU_TASK_CORES))
    machines = max(1, int(round(quantile_sample(rng, 1, CPU_JOB_MACHINES)[0] * p.gpu_scale)))
    tasks = max(1, machines * CPU_MACHINE_CPUS // cores // 2)
    return tasks, [0, cores, float(round(CPU_MACHINE_MEMORY * cores / CPU_MACHINE_CPUS * 0.8))]


def estimate(params: BinpackParams) -> Estimate:
    """Memory and time to generate and save ``params``' instance (measured: 1.4 kB per GPU
    machine, 0.9 kB per CPU machine, 2.5 kB per pending job; the time grows with the square
    of a cluster's machines, each running job scanning its cluster once: 113 s of CPU for
    100,000 machines in one cluster, load 3; :mod:`fleetplan.instances.resources`)."""
    jobs = params.workloads * (1 + params.max_jobs_per_workload) / 2
    squares = (params.machines ** 2 + params.cpu_machines ** 2) / params.clusters
    return Estimate(memory_bytes=1_400.0 * params.machines + 900.0 * params.cpu_machines + 2_500.0 * jobs,
                    seconds=1.1e-8 * squares + 20e-6 * (params.machines + params.cpu_machines) + 60e-6 * jobs,
                    what=f"machines = {params.machines:,}, cpu_machines = {params.cpu_machines:,}, "
                         f"workloads = {params.workloads:,}",
                    sizes=("machines", "cpu_machines", "workloads"))


def generate(params: BinpackParams | None = None, seed: int = 0) -> BinpackInstance:
    """A seeded, nearly full RMS region with pending workloads.

    >>> instance = generate(BinpackParams(clusters=2, machines=16, load=0.9), seed=1)
    >>> arrays = instance.arrays()
    >>> arrays.num_machines, len(instance.clusters)
    (16, 2)
    >>> bool(0.5 < arrays.used[:, 0].sum() / arrays.capacity[:, 0].sum() <= 1.0)
    True
    """
    p = params or BinpackParams()
    rng = np.random.default_rng(seed)
    C = p.clusters
    gpu_counts = _split(rng, p.machines, C)
    cpu_counts = _split(rng, p.cpu_machines, C)
    cluster_type = np.arange(C) % p.gpu_types
    hardware_types = [GPU_TYPE_NAMES[t] for t in range(p.gpu_types)] + (["cpu"] if p.cpu_machines else [])
    cluster_col, rack_col, hw_col = [], [], []
    next_rack = 0
    for c in range(C):
        for count, hw in ((int(gpu_counts[c]), int(cluster_type[c])), (int(cpu_counts[c]), p.gpu_types)):
            cluster_col.append(np.full(count, c))
            rack_col.append(next_rack + np.arange(count) // p.machines_per_rack)
            hw_col.append(np.full(count, hw))
            next_rack += -(-count // p.machines_per_rack)
    cluster = np.concatenate(cluster_col).astype(np.int64)
    rack = np.concatenate(rack_col).astype(np.int64)
    hw = np.concatenate(hw_col).astype(np.int64)
    is_gpu = hw < p.gpu_types
    M = len(cluster)
    capacity = np.where(is_gpu[:, None], [[p.gpus_per_machine, GPU_MACHINE_CPUS, GPU_MACHINE_MEMORY]],
                        [[0, CPU_MACHINE_CPUS, CPU_MACHINE_MEMORY]]).astype(float)
    free = capacity.copy()
    groups = {(c, h): np.flatnonzero((cluster == c) & (hw == h)) for c in range(C) for h in range(len(hardware_types))}

    running: dict[str, list] = {k: [] for k in ("id", "workload", "tenant", "priority", "start_hours")}
    holdings: dict[str, list] = {k: [] for k in ("job", "machine", "gpus", "cpus", "memory_gb")}
    for gpu, target_column in ((True, 0), (False, 1)):
        machines_of_kind = is_gpu if gpu else ~is_gpu
        total = capacity[machines_of_kind, target_column].sum()
        # Held capacity is counted as jobs are placed (integers, so exactly the sum it replaces):
        # summing every machine per placed job made generation quadratic (85 s at 600,000
        # machines).
        held = total - free[machines_of_kind, target_column].sum()
        options = [key for key, rows in groups.items() if rows.size and (key[1] < p.gpu_types) == gpu]
        failures = 0
        while total > 0 and failures < 400:
            if held >= p.load * total:
                break
            tasks, demand = _job_demand(rng, gpu, p, float(quantile_sample(rng, 1, JOB_GPUS)[0]))
            demand_arr = np.asarray(demand, dtype=float)
            c, h = options[int(rng.integers(len(options)))]
            rows = groups[(c, h)]
            rows = np.roll(rows, -int(rng.integers(rows.size)))
            fit = tasks_that_fit(free[rows], demand_arr)
            if fit.sum() < tasks:  # near full: a smaller job of the same shape, else another draw
                failures += 1
                tasks = int(fit.sum()) // 2
                if tasks < 1:
                    continue
            take = np.minimum(fit, np.maximum(0, tasks - (np.cumsum(fit) - fit)))
            chosen = np.flatnonzero(take)
            r = len(running["id"])
            running["id"].append(f"r{r}")
            running["workload"].append(f"rw{r}")
            running["tenant"].append(f"t{int(rng.integers(8))}")
            running["priority"].append(int(rng.choice(PRIORITY_LEVELS, p=PRIORITY_MIX / PRIORITY_MIX.sum())))
            age = float(quantile_sample(rng, 1, DURATION_HOURS)[0] * rng.random())
            running["start_hours"].append(-round(age, 4))
            amount = take[chosen, None] * demand_arr[None, :]
            free[rows[chosen]] -= amount
            held += amount[:, target_column].sum()
            holdings["job"].extend([r] * len(chosen))
            holdings["machine"].extend(rows[chosen].tolist())
            holdings["gpus"].extend(amount[:, 0].astype(int).tolist())
            holdings["cpus"].extend(amount[:, 1].astype(int).tolist())
            holdings["memory_gb"].extend(amount[:, 2].tolist())

    workloads = []
    gpu_kinds = [h for h in range(p.gpu_types) if gpu_counts[cluster_type == h].sum() > 0]
    for w in range(p.workloads):
        gpu = not p.cpu_machines or (bool(gpu_kinds) and rng.random() < 0.7)
        h = int(rng.choice(gpu_kinds)) if gpu and gpu_kinds else len(hardware_types) - 1
        priority = p.pending_priority if p.pending_priority is not None else \
            int(rng.choice(PRIORITY_LEVELS, p=PRIORITY_MIX / PRIORITY_MIX.sum()))
        jobs = []
        for j in range(int(rng.integers(1, p.max_jobs_per_workload + 1))):
            hint = float(quantile_sample(rng, 1, JOB_GPUS)[0]) / (1 if j == 0 else 4)
            tasks, demand = _job_demand(rng, gpu, p, hint)
            jobs.append({"id": f"job{j}", "tasks": tasks, "hardware": hardware_types[h],
                         "gpus_per_task": int(demand[0]), "cpus_per_task": int(demand[1]),
                         "memory_gb_per_task": float(demand[2])})
        workloads.append({"id": f"w{w}", "tenant": f"t{int(rng.integers(8))}", "priority": priority,
                          "jobs": jobs})

    # GMS order (§4.2): highest priority first; within a priority, the drawn (credit) order.
    workloads.sort(key=lambda workload: workload["priority"])
    data = {
        "kind": "binpack", "name": f"binpack-c{C}-m{p.machines}-cpu{p.cpu_machines}-s{seed}",
        "clusters": [f"dc{c}" for c in range(C)], "hardware_types": hardware_types, "now_hours": 0.0,
        "machines": {"id": [f"m{i}" for i in range(M)], "cluster": [f"dc{c}" for c in cluster.tolist()],
                     "rack": rack.tolist(), "hardware": [hardware_types[h] for h in hw.tolist()],
                     "gpus": capacity[:, 0].astype(int).tolist(), "cpus": capacity[:, 1].astype(int).tolist(),
                     "memory_gb": capacity[:, 2].tolist()},
        "running": {**running, "holdings": holdings},
        "workloads": workloads,
    }
    return BinpackInstance.model_validate(data)
