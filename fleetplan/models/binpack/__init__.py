"""The exact RMS placement model (MAST, OSDI 2024, §4.1 Table 1, §4.3): data shared by the CP-SAT
model (:mod:`fleetplan.models.binpack.cpsat`) and the HiGHS MIP (:mod:`fleetplan.models.binpack.mip`).

One model places a set of pending workloads on a region given what is free and which running
jobs are alive. With one workload it is the single-workload placement RMS computes (§4.3); with
several it is the batch — Table 1's "ideal" solution (9), which jointly places a set of workloads
and may leave one region or cluster free for a later workload.

Variables (both back-ends)::

    z[w]      1 if workload w is placed (fixed to 1 for the single-workload model)
    y[j, c]   job j runs in cluster c              sum_c y[j, c] = z[w(j)]
    x[j, m]   tasks of job j on machine m (integer) sum_m x[j, m] = tasks[j] * z[w(j)]
              x[j, m] <= fit[j, m] * u[j, m],  u[j, m] <= y[j, cluster(m)]
    v[j, k]   job j uses rack k                    v[j, k] >= u[j, m] for m in rack k
    p[r, w]   running job r preempted for workload w (only if priority(r) > priority(w))
              sum_w p[r, w] <= 1,  p[r, w] <= z[w]
    capacity  used0[m] - sum_r hold[r, m] * p[r] + sum_j demand[j] * x[j, m] <= capacity[m]

Objectives, lexicographic (each stage keeps the previous optima): (0, batch only) most
workloads placed; (1) preempted counts per priority level from the highest priority down — one
weighted sum with weight ``base ** (6 - level)``, ``base`` exceeding the number of preemptible
jobs, so it is exactly lexicographic; (2) youth of the preempted jobs (longer running first);
(3) machines used; (4) racks used. That is the judge's :func:`score_key` order.

Only running jobs that are alive, hold something on the model's machines and have a lower
priority than some workload enter the model: preempting any other job frees nothing useful.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.binpack import PRIORITY_LEVELS, BinpackInstance, tasks_that_fit, youth


@dataclass
class BinpackModelData:
    """The arrays of one exact model (local indices; ``machines``/``running`` map back)."""

    workloads: list[int]  # instance workload indices
    job_workload: np.ndarray  # (J,) local workload index
    job_index: list[tuple[int, int]]  # (instance workload, job) per local job
    demand: np.ndarray  # (J, 3)
    tasks: np.ndarray  # (J,)
    workload_priority: np.ndarray  # (W,)
    machines: np.ndarray  # (M,) instance machine rows
    cluster: np.ndarray  # (M,)
    rack: np.ndarray  # (M,)
    headroom: np.ndarray  # (M, 3) capacity minus what alive running jobs hold
    fit: np.ndarray  # (J, M) tasks that fit on the machine's whole capacity (0: wrong hardware)
    running: np.ndarray  # (R,) instance running rows that may be preempted
    running_level: np.ndarray  # (R,)
    running_youth: np.ndarray  # (R,)
    hold_running: np.ndarray  # (H,) local running index
    hold_machine: np.ndarray  # (H,) local machine index
    hold_amount: np.ndarray  # (H, 3)
    pairs: np.ndarray  # (P, 2) (local running, local workload) allowed preemptions
    level_base: int  # > number of preemptible jobs: weights base ** (6 - level) are lexicographic
    clusters: np.ndarray  # local cluster ids present

    @property
    def level_weights(self) -> np.ndarray:
        return np.array([self.level_base ** (PRIORITY_LEVELS - 1 - p) for p in range(PRIORITY_LEVELS)],
                        dtype=object)


# Model building cost per (job, machine) cell, CPU seconds: CP-SAT 87 us, Pyomo 125 us (measured
# on 4 clusters x 1,200 machines x 20 workloads, 9,800 cells; benchmarks/results/reliability.md "Time
# limits"). A solver does not start a model it cannot build in the time it has.
CPSAT_BUILD_S_PER_CELL = 90e-6
PYOMO_BUILD_S_PER_CELL = 125e-6


def cell_count(instance: BinpackInstance, workloads: list[int]) -> int:
    """An upper bound on the model's (job, machine) cells: per job, the machines of its
    hardware (without building the dense fit matrix :func:`prepare` makes)."""
    per_hardware = np.bincount(instance.arrays().machine_hardware, minlength=len(instance.hardware_types))
    hw_index = {h: i for i, h in enumerate(instance.hardware_types)}
    return int(sum(per_hardware[hw_index[job.hardware]] for w in workloads for job in instance.workloads[w].jobs))


def prepare(instance: BinpackInstance, workloads: list[int], free: np.ndarray | None = None,
            alive: np.ndarray | None = None) -> BinpackModelData:
    """The model's data for ``workloads`` given ``free`` (M, 3) and ``alive`` running jobs
    (defaults: the instance as loaded)."""
    a = instance.arrays()
    free = a.free if free is None else free
    alive = np.ones(a.num_running, dtype=bool) if alive is None else alive
    hw_index = {h: i for i, h in enumerate(instance.hardware_types)}
    job_index, job_workload, demand, tasks, job_hw = [], [], [], [], []
    for local, w in enumerate(workloads):
        for j, spec in enumerate(instance.workloads[w].jobs):
            job_index.append((w, j))
            job_workload.append(local)
            demand.append(instance.job_demand(w, j))
            tasks.append(spec.tasks)
            job_hw.append(hw_index[spec.hardware])
    demand_arr = np.asarray(demand, dtype=float).reshape(-1, 3)
    job_hw_arr = np.asarray(job_hw, dtype=np.int64)
    machines = np.flatnonzero(np.isin(a.machine_hardware, job_hw_arr))
    # Headroom: free plus what preemptible (alive) jobs hold is recovered through p below.
    headroom = free[machines]
    fit = np.zeros((len(job_index), machines.size), dtype=np.int64)
    for k in range(len(job_index)):
        ok = a.machine_hardware[machines] == job_hw_arr[k]
        fit[k, ok] = tasks_that_fit(a.capacity[machines[ok]], demand_arr[k])
    priorities = np.array([instance.workloads[w].priority for w in workloads], dtype=np.int64)
    local_machine = np.full(a.num_machines, -1, dtype=np.int64)
    local_machine[machines] = np.arange(machines.size)
    rows = np.flatnonzero(alive[a.hold_job] & (local_machine[a.hold_machine] >= 0)
                          & (a.running_priority[a.hold_job] > (priorities.min() if priorities.size else 99)))
    running = np.unique(a.hold_job[rows])
    local_running = np.full(a.num_running, -1, dtype=np.int64)
    local_running[running] = np.arange(running.size)
    pairs = np.array([(r, w) for r in range(running.size) for w in range(len(workloads))
                      if a.running_priority[running[r]] > priorities[w]], dtype=np.int64).reshape(-1, 2)
    return BinpackModelData(
        workloads=list(workloads), job_workload=np.asarray(job_workload, dtype=np.int64), job_index=job_index,
        demand=demand_arr, tasks=np.asarray(tasks, dtype=np.int64), workload_priority=priorities,
        machines=machines, cluster=a.machine_cluster[machines], rack=a.machine_rack[machines],
        headroom=headroom, fit=fit, running=running, running_level=a.running_priority[running],
        running_youth=np.asarray(youth(a.running_age[running]), dtype=float),
        hold_running=local_running[a.hold_job[rows]], hold_machine=local_machine[a.hold_machine[rows]],
        hold_amount=a.hold_amount[rows], pairs=pairs, level_base=int(running.size) + 1,
        clusters=np.unique(a.machine_cluster[machines]),
    )


@dataclass
class ModelSolution:
    """What an exact model decided: per local job the machines and tasks, per workload the
    preempted running jobs (instance rows), and whether each workload is placed."""

    placed: np.ndarray  # (W,) bool
    job_machines: list[np.ndarray]  # instance machine rows per local job
    job_tasks: list[np.ndarray]
    preempted: list[np.ndarray]  # instance running rows per local workload


def read_solution(data: BinpackModelData, placed: np.ndarray, x: np.ndarray, p: np.ndarray) -> ModelSolution:
    """Turn variable values (z (W,), x (J, M), p (P,)) into a :class:`ModelSolution`."""
    x = np.rint(x).astype(np.int64)
    job_machines, job_tasks = [], []
    for k in range(len(data.job_index)):
        used = np.flatnonzero(x[k] > 0)
        job_machines.append(data.machines[used])
        job_tasks.append(x[k, used])
    chosen = data.pairs[np.rint(p).astype(bool)] if data.pairs.size else np.zeros((0, 2), dtype=np.int64)
    preempted = [np.sort(data.running[chosen[chosen[:, 1] == w, 0]]) for w in range(len(data.workloads))]
    return ModelSolution(placed=np.rint(placed).astype(bool), job_machines=job_machines, job_tasks=job_tasks,
                         preempted=preempted)


def memory_scale(data: BinpackModelData) -> float:
    """A power of ten that makes every memory amount of the model integral (CP-SAT needs
    integers); 1e6 at most, beyond which amounts are rounded conservatively."""
    values = np.concatenate([data.demand[:, 2], data.headroom[:, 2], data.hold_amount[:, 2]])
    for scale in (1.0, 10.0, 100.0, 1000.0, 1e4, 1e5):
        if np.allclose(values * scale, np.rint(values * scale), rtol=0, atol=1e-9):
            return scale
    return 1e6
