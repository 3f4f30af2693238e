"""The ``binpack`` kind: one region's Regional ML Scheduler placing workloads (MAST, OSDI 2024, §4.3).

A region holds ML dynamic clusters (§2) of machines, each with a rack, a hardware type, GPUs,
CPU cores and memory. Running jobs hold resources on machines; what is free on a machine is its
capacity minus the holdings. Pending workloads (one GMS pass's queue, in GMS order, §4.2) are
each made of jobs, and a job of homogeneous tasks (per-task GPUs, CPU cores, memory and one
hardware type) that must be placed all or nothing (gang scheduling, §2). A job lives in one
dynamic cluster; a workload's jobs may use different clusters (§4.3).

File layout. Machines, running jobs and their holdings are stored *column-wise*
(``"machines": {"id": [...], "cluster": [...], ...}``) so that MAST's largest region — 20 dynamic
clusters, 64,000 CPU machines and 20,000 GPUs on 8-GPU machines (§4.3.1) — loads as a handful
of numpy arrays in seconds. A holding names its running job and machine by row number
(0-based) in ``running`` and ``machines``. Workloads are small and stored as objects.

Modelling choices the paper leaves open (documented here, used by the judge):

* Priority levels are 0 (highest) to 6 (lowest), MAST's seven levels (§4.2). A running job may be
  preempted only for a workload of strictly higher priority (lower number).
* Preempting a running job frees *all* its holdings (its checkpoint is saved, §2).
* The score of a plan (§4.3: no preemption beats preemption; then lower priorities, fewer jobs,
  jobs running longer) is the cost :func:`preemption_cost`: each preempted job costs
  ``LEVEL_BASE ** (7 - priority)`` plus its *youth* ``1 / (1 + hours running)`` in (0, 1]. With
  ``LEVEL_BASE = 64`` this orders plans lexicographically (counts per level from the highest
  priority down, then youth) while fewer than 64 jobs of one level are preempted by one plan;
  the judge also reports each level's count so that the exact order can always be checked.
  A workload left unplaced costs ``UNPLACED_COST`` (more than any preemption).
* Racks are numbered within the region; racks with close numbers are close (§4.3 "same or
  nearby racks").

Example
-------
>>> instance = BinpackInstance.model_validate({
...     "kind": "binpack", "clusters": ["c0"], "hardware_types": ["gpu"],
...     "machines": {"id": ["m0", "m1"], "cluster": ["c0", "c0"], "rack": [0, 1],
...                  "hardware": ["gpu", "gpu"], "gpus": [8, 8], "cpus": [64, 64],
...                  "memory_gb": [512.0, 512.0]},
...     "running": {"id": ["r0"], "workload": ["w0"], "tenant": ["t0"], "priority": [6],
...                 "start_hours": [-2.0],
...                 "holdings": {"job": [0], "machine": [1], "gpus": [4], "cpus": [8],
...                              "memory_gb": [64.0]}},
...     "workloads": [{"id": "w1", "tenant": "t1", "priority": 1, "jobs": [
...         {"id": "train", "tasks": 2, "hardware": "gpu", "gpus_per_task": 8,
...          "cpus_per_task": 16, "memory_gb_per_task": 128.0}]}]})
>>> instance.arrays().free[:, 0].tolist()
[8.0, 4.0]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import Field, PrivateAttr, model_validator

from fleetplan.instances.base import InstanceBase, InstanceError, PlanBase, StrictModel
from fleetplan.instances.columns import check_same_length as _same_length
from fleetplan.instances.columns import first_true as _first
from fleetplan.instances.columns import id_index as _unique
from fleetplan.instances.columns import lookup_ids as _lookup

KIND = "binpack"
PRIORITY_LEVELS = 7
LEVEL_BASE = 64.0
UNPLACED_COST = LEVEL_BASE ** 8
RESOURCES = ("gpus", "cpus", "memory_gb")
GPU, CPU, MEM = 0, 1, 2
# Float slack when comparing summed resources (memory is fractional).
TOLERANCE = 1e-9


def level_weight(priority: np.ndarray | int) -> np.ndarray | float:
    """Cost of preempting one job of ``priority`` (before youth): ``LEVEL_BASE ** (7 - p)``."""
    return LEVEL_BASE ** (PRIORITY_LEVELS - np.asarray(priority, dtype=float))


def youth(age_hours: np.ndarray | float) -> np.ndarray | float:
    """Youth of a running job, in (0, 1]: preempting a newly started job costs more (§4.3)."""
    return 1.0 / (1.0 + np.maximum(np.asarray(age_hours, dtype=float), 0.0))


def preemption_cost(priority: np.ndarray, age_hours: np.ndarray) -> np.ndarray:
    """Per-job cost of preempting running jobs (see the module docstring)."""
    return level_weight(priority) + youth(age_hours)


def tasks_that_fit(free: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """How many tasks of per-task ``demand`` (3,) fit in each row of ``free`` (..., 3)."""
    fit = None
    for k in range(3):  # column by column: a min over a short last axis is slow in numpy
        if demand[k] > 0:
            q = np.floor((free[..., k] + TOLERANCE) / demand[k])
            fit = q if fit is None else np.minimum(fit, q, out=fit)
    if fit is None:  # a task demanding nothing: no bound from this machine
        return np.full(free.shape[:-1], np.iinfo(np.int32).max, dtype=np.int64)
    return np.maximum(fit, 0.0, out=fit).astype(np.int64)


# --- the file schema -----------------------------------------------------------------------

class MachineColumns(StrictModel):
    """Machines column-wise: row i is machine i."""

    id: list[str]
    cluster: list[str] = Field(description="ML dynamic cluster (one of ``clusters``)")
    rack: list[int] = Field(description="rack number in the region; close numbers are close racks")
    hardware: list[str] = Field(description="hardware type (one of ``hardware_types``)")
    gpus: list[int]
    cpus: list[int] = Field(description="CPU cores")
    memory_gb: list[float]


class HoldingColumns(StrictModel):
    """What running jobs hold, column-wise: row k puts ``job`` on ``machine`` (row numbers)."""

    job: list[int] = Field(default_factory=list, description="row number in ``running``")
    machine: list[int] = Field(default_factory=list, description="row number in ``machines``")
    gpus: list[int] = Field(default_factory=list)
    cpus: list[int] = Field(default_factory=list)
    memory_gb: list[float] = Field(default_factory=list)


class RunningColumns(StrictModel):
    """Running jobs column-wise: row j is running job j."""

    id: list[str] = Field(default_factory=list)
    workload: list[str] = Field(default_factory=list)
    tenant: list[str] = Field(default_factory=list)
    priority: list[int] = Field(default_factory=list, description="0 (highest) to 6 (lowest)")
    start_hours: list[float] = Field(default_factory=list, description="start time, hours "
                                     "(the instance's clock is ``now_hours``)")
    holdings: HoldingColumns = Field(default_factory=HoldingColumns)


class JobSpec(StrictModel):
    """One job of a workload: ``tasks`` homogeneous tasks, placed all or nothing."""

    id: str = Field(min_length=1)
    tasks: int = Field(ge=1)
    hardware: str
    gpus_per_task: int = Field(ge=0, description="0 for a CPU job")
    cpus_per_task: int = Field(gt=0)
    memory_gb_per_task: float = Field(gt=0)


class Workload(StrictModel):
    """A pending training workload: its jobs are scheduled together (§2)."""

    id: str = Field(min_length=1)
    tenant: str = ""
    priority: int = Field(ge=0, le=PRIORITY_LEVELS - 1, description="0 (highest) to 6 (lowest)")
    jobs: list[JobSpec] = Field(min_length=1)


@dataclass(frozen=True, eq=False)
class BinpackArrays:
    """Column-wise view of a binpack instance: what the judge and the solvers compute with.

    Resources are columns (GPUs, CPU cores, memory GB) of float arrays. Holdings are also
    indexed per running job as CSR: job j holds rows ``hold_order[hold_ptr[j]:hold_ptr[j+1]]``.
    """

    cluster_ids: list[str]
    hardware_ids: list[str]
    machine_ids: list[str]
    machine_cluster: np.ndarray  # (M,) cluster index
    machine_rack: np.ndarray  # (M,)
    machine_hardware: np.ndarray  # (M,) hardware index
    capacity: np.ndarray  # (M, 3)
    used: np.ndarray  # (M, 3) held by running jobs
    running_ids: list[str]
    running_priority: np.ndarray  # (R,)
    running_age: np.ndarray  # (R,) hours running at now
    hold_job: np.ndarray  # (H,)
    hold_machine: np.ndarray  # (H,)
    hold_amount: np.ndarray  # (H, 3)
    hold_ptr: np.ndarray  # (R + 1,)
    hold_order: np.ndarray  # (H,) holding rows sorted by job
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def free(self) -> np.ndarray:
        return self.capacity - self.used

    @property
    def num_machines(self) -> int:
        return len(self.machine_ids)

    @property
    def num_running(self) -> int:
        return len(self.running_ids)

    @property
    def machine_index(self) -> dict[str, int]:
        if "machine_index" not in self._cache:
            self._cache["machine_index"] = {m: i for i, m in enumerate(self.machine_ids)}
        return self._cache["machine_index"]

    @property
    def running_index(self) -> dict[str, int]:
        if "running_index" not in self._cache:
            self._cache["running_index"] = {r: i for i, r in enumerate(self.running_ids)}
        return self._cache["running_index"]

    def holdings_of(self, jobs: np.ndarray) -> np.ndarray:
        """Holding rows of the running jobs ``jobs``."""
        jobs = np.asarray(jobs, dtype=np.int64)
        if jobs.size == 0:
            return np.zeros(0, dtype=np.int64)
        counts = self.hold_ptr[jobs + 1] - self.hold_ptr[jobs]
        starts = np.repeat(self.hold_ptr[jobs] - np.cumsum(counts) + counts, counts)
        return self.hold_order[starts + np.arange(int(counts.sum()))]


class BinpackInstance(InstanceBase):
    """One region's machines, its running jobs and the pending workloads to place."""

    kind: Literal["binpack"] = KIND
    clusters: list[str] = Field(min_length=1, description="the region's ML dynamic clusters")
    hardware_types: list[str] = Field(min_length=1)
    now_hours: float = Field(default=0.0, description="the clock: a running job's age is "
                             "now_hours - start_hours")
    machines: MachineColumns
    running: RunningColumns = Field(default_factory=RunningColumns)
    workloads: list[Workload] = Field(min_length=1, description="pending workloads in GMS order "
                                      "(one GMS pass, §4.2)")

    _arrays: BinpackArrays | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _validate_columns(self) -> BinpackInstance:
        self._arrays = build_arrays(self)
        return self

    def arrays(self) -> BinpackArrays:
        """The instance as numpy arrays (built once, when the instance is validated)."""
        if self._arrays is None:
            self._arrays = build_arrays(self)
        return self._arrays

    def job_demand(self, w: int, j: int) -> np.ndarray:
        """Per-task demand (3,) of job ``j`` of workload ``w``."""
        job = self.workloads[w].jobs[j]
        return np.array([job.gpus_per_task, job.cpus_per_task, job.memory_gb_per_task], dtype=float)

    def hardware_index(self, name: str) -> int:
        return self.hardware_types.index(name)


def build_arrays(instance: BinpackInstance) -> BinpackArrays:
    """Validate cross-references and capacities with vectorised checks and build the arrays."""
    clusters = _unique(instance.clusters, "clusters")
    hardware = _unique(instance.hardware_types, "hardware_types")
    m = instance.machines
    num_machines = len(m.id)
    _same_length(m, ("cluster", "rack", "hardware", "gpus", "cpus", "memory_gb"), num_machines,
                 "machines", "machines")
    _unique(m.id, "machines.id")
    cluster = _lookup(m.cluster, clusters, "machines.cluster", "cluster")
    hw = _lookup(m.hardware, hardware, "machines.hardware", "hardware type")
    rack = np.asarray(m.rack, dtype=np.int64).reshape(num_machines)
    if (rack < 0).any():
        raise InstanceError(f"machines.rack[{_first(rack < 0)}]", "must be >= 0")
    capacity = np.column_stack([np.asarray(m.gpus, dtype=float).reshape(num_machines),
                                np.asarray(m.cpus, dtype=float).reshape(num_machines),
                                np.asarray(m.memory_gb, dtype=float).reshape(num_machines)])
    for r, name in enumerate(RESOURCES):
        if (capacity[:, r] < 0).any():
            raise InstanceError(f"machines.{name}[{_first(capacity[:, r] < 0)}]", "must be >= 0")

    run = instance.running
    num_running = len(run.id)
    _same_length(run, ("workload", "tenant", "priority", "start_hours"), num_running, "running",
                 "running jobs")
    _unique(run.id, "running.id")
    priority = np.asarray(run.priority, dtype=np.int64).reshape(num_running)
    bad = (priority < 0) | (priority >= PRIORITY_LEVELS)
    if bad.any():
        raise InstanceError(f"running.priority[{_first(bad)}]", f"must be 0..{PRIORITY_LEVELS - 1}")
    start = np.asarray(run.start_hours, dtype=float).reshape(num_running)
    if (start > instance.now_hours).any():
        raise InstanceError(f"running.start_hours[{_first(start > instance.now_hours)}]",
                            f"a running job cannot start after now_hours ({instance.now_hours})")

    h = run.holdings
    num_holdings = len(h.job)
    _same_length(h, ("machine", "gpus", "cpus", "memory_gb"), num_holdings, "running.holdings", "holdings")
    job = np.asarray(h.job, dtype=np.int64).reshape(num_holdings)
    machine = np.asarray(h.machine, dtype=np.int64).reshape(num_holdings)
    bad = (job < 0) | (job >= num_running)
    if bad.any():
        raise InstanceError(f"running.holdings.job[{_first(bad)}]",
                            f"running job row {job[_first(bad)]} does not exist ({num_running} running jobs)")
    bad = (machine < 0) | (machine >= num_machines)
    if bad.any():
        raise InstanceError(f"running.holdings.machine[{_first(bad)}]",
                            f"machine row {machine[_first(bad)]} does not exist ({num_machines} machines)")
    amount = np.column_stack([np.asarray(h.gpus, dtype=float).reshape(num_holdings),
                              np.asarray(h.cpus, dtype=float).reshape(num_holdings),
                              np.asarray(h.memory_gb, dtype=float).reshape(num_holdings)])
    for r, name in enumerate(RESOURCES):
        column = amount[:, r]
        if (column < 0).any():
            raise InstanceError(f"running.holdings.{name}[{_first(column < 0)}]", "must be >= 0")
        over = column > capacity[machine, r] + TOLERANCE
        if over.any():
            k = _first(over)
            raise InstanceError(f"running.holdings.{name}[{k}]",
                                f"running job '{run.id[job[k]]}' holds {column[k]:g} {name} on machine "
                                f"'{m.id[machine[k]]}', which has {capacity[machine[k], r]:g}")
    used = np.zeros((num_machines, 3))
    np.add.at(used, machine, amount)
    for r, name in enumerate(RESOURCES):
        over = used[:, r] > capacity[:, r] * (1 + TOLERANCE) + TOLERANCE
        if over.any():
            i = _first(over)
            raise InstanceError(f"machines.{name}[{i}]", f"running jobs hold {used[i, r]:g} {name} on "
                                f"machine '{m.id[i]}', which has {capacity[i, r]:g}")
    keys = np.sort(job * max(num_machines, 1) + machine)
    if (keys[1:] == keys[:-1]).any():
        key = int(keys[1:][keys[1:] == keys[:-1]][0])
        raise InstanceError("running.holdings", f"running job '{run.id[key // num_machines]}' holds machine "
                            f"'{m.id[key % num_machines]}' twice")

    workload_ids: dict[str, int] = {}
    for w, workload in enumerate(instance.workloads):
        if workload.id in workload_ids:
            raise InstanceError(f"workloads[{w}].id", f"duplicate id '{workload.id}'")
        workload_ids[workload.id] = w
        seen: set[str] = set()
        for j, spec in enumerate(workload.jobs):
            if spec.id in seen:
                raise InstanceError(f"workloads[{w}].jobs[{j}].id", f"duplicate job id '{spec.id}'")
            seen.add(spec.id)
            if spec.hardware not in hardware:
                raise InstanceError(f"workloads[{w}].jobs[{j}].hardware",
                                    f"unknown hardware type '{spec.hardware}'")

    order = np.argsort(job, kind="stable")
    counts = np.bincount(job, minlength=num_running)
    return BinpackArrays(
        cluster_ids=list(instance.clusters), hardware_ids=list(instance.hardware_types),
        machine_ids=list(m.id), machine_cluster=cluster, machine_rack=rack, machine_hardware=hw,
        capacity=capacity, used=used, running_ids=list(run.id), running_priority=priority,
        running_age=instance.now_hours - start, hold_job=job, hold_machine=machine,
        hold_amount=amount, hold_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        hold_order=order.astype(np.int64),
    )


# --- the plan ------------------------------------------------------------------------------

class JobPlacement(StrictModel):
    """Where one job runs: its cluster, the machines and tasks on each, and whom it preempts."""

    job: str
    cluster: str
    machines: list[str] = Field(default_factory=list)
    tasks: list[int] = Field(default_factory=list, description="tasks on each of ``machines``")
    preempted: list[str] = Field(default_factory=list, description="running jobs preempted for it")


class WorkloadPlacement(StrictModel):
    """One pending workload: placed (every job listed) or left waiting (no jobs)."""

    workload: str
    placed: bool
    jobs: list[JobPlacement] = Field(default_factory=list)
    score: float | None = Field(default=None, description="the solver's preemption cost of this "
                                "workload (the judge checks it)")
    reason: str = Field(default="", description="why the workload was left waiting")


class BinpackPlan(PlanBase):
    """The placement of each pending workload (a workload left out stays waiting)."""

    kind: Literal["binpack"] = KIND
    workloads: list[WorkloadPlacement] = Field(default_factory=list)


__all__ = [
    "KIND", "LEVEL_BASE", "PRIORITY_LEVELS", "RESOURCES", "UNPLACED_COST", "BinpackArrays",
    "BinpackInstance", "BinpackPlan", "JobPlacement", "JobSpec", "Workload", "WorkloadPlacement",
    "build_arrays", "level_weight", "preemption_cost", "tasks_that_fit", "youth",
]
