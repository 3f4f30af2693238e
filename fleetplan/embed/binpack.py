"""One region kept between RMS calls: MAST's Regional ML Scheduler as the GMS calls it (§4.2-4.3).

The GMS hands RMS one workload (or one pass's worth) at a time; RMS places it against the
region as it is *now* — machines that failed or came back, jobs that finished, the ones it
placed a moment ago — and its plan takes effect. A :class:`BinpackSession` keeps that region:

>>> import fleetplan
>>> region = fleetplan.generate("binpack", {"clusters": 2, "machines": 32, "workloads": 2}, seed=0)
>>> session = fleetplan.session(region)                       # the region, without its queue
>>> result = session.solve(region.workloads[0])               # one workload, as MAST calls RMS
>>> result.status, result.plan.workloads[0].placed
('feasible', True)
>>> session.running_ids[-1]                                   # it runs now: workload/job
'w1/job0'
>>> stopped = session.fail_machines(["m0"])                   # a machine fails: its jobs stop
>>> session.finish([session.running_ids[0]])                  # a job finishes

Each :meth:`solve` (or :meth:`place`, its other name: MAST's word for an RMS call) is
``fleetplan.solve`` on the region now plus the workloads given (the same
:class:`~fleetplan.solvers.SolveResult`, judged by the same ``evaluate``), without what a cold
call pays: the region is never validated again (changes are checked as they come, with numpy),
no lists of machine ids are made, and ``rms-greedy`` keeps its grouping of the machines by
cluster, hardware and rack from the last call (:meth:`RegionState.refreshed
<fleetplan.solvers.binpack.RegionState.refreshed>`). Its plan is the cold call's, exactly
(the greedy is deterministic; tests compare them after random sequences of changes).

A placed job becomes the running job ``"<workload>/<job>"`` (priority of its workload, started
now); the running jobs it preempted leave the region (they are the caller's to queue again).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from fleetplan.embed.locking import serialised
from fleetplan.instances.base import InstanceError, validate_model
from fleetplan.instances.binpack import KIND, BinpackInstance, BinpackPlan, Workload
from fleetplan.instances.binpack.columns import ColumnBinpackInstance, RegionColumns
from fleetplan.solvers import warm
from fleetplan.solvers.base import Progress, SolveResult, check_time_limit, get_solver, solve


class BinpackSession:
    """A region (MAST §4.3) kept between RMS calls; see the module docstring.

    Parameters
    ----------
    region : a binpack instance (or its dict); its pending workloads are not placed — pass
        them to :meth:`solve`
    solver : a binpack solver (default ``rms-greedy``, the one MAST runs)
    time_limit, seed, threads, **options : as for :func:`fleetplan.solve`, used every call
    """

    kind: ClassVar[str] = KIND  # the problem kind it holds

    def __init__(self, region: BinpackInstance | dict[str, Any], *, solver: str | None = None,
                 time_limit: float | None = None, seed: int = 0, threads: int = 1, **options: Any) -> None:
        if isinstance(region, dict):
            from fleetplan.instances import instance_from_data

            region = instance_from_data(region, "instance")
        if not isinstance(region, BinpackInstance):
            raise InstanceError("kind", f"is '{getattr(region, 'kind', '?')}'; a binpack instance is needed")
        self._spec = get_solver("binpack", solver)
        self._options = self._spec.check_options(options)
        self.time_limit = check_time_limit(time_limit)
        self.seed, self.threads, self.name = seed, threads, region.name
        a = region.arrays()
        run = region.running
        self._region = RegionColumns(
            cluster_ids=list(a.cluster_ids), hardware_ids=list(a.hardware_ids), machine_ids=list(a.machine_ids),
            machine_cluster=a.machine_cluster.copy(), machine_rack=a.machine_rack.copy(),
            machine_hardware=a.machine_hardware.copy(),
            capacity=a.capacity.copy(), running_ids=list(a.running_ids), running_workload=list(run.workload),
            running_tenant=list(run.tenant), running_priority=a.running_priority.copy(),
            running_start=np.asarray(run.start_hours, dtype=float).reshape(len(a.running_ids)),
            hold_job=a.hold_job.copy(), hold_machine=a.hold_machine.copy(), hold_amount=a.hold_amount.copy(),
            now_hours=float(region.now_hours), machine_index=dict(a.machine_index))
        self._installed = a.capacity.copy()  # what a machine has when in service
        self._hardware = {name: h for h, name in enumerate(a.hardware_ids)}
        self._warm = warm.WarmStart()
        self.calls = 0
        self._lock = threading.RLock()  # calls from several threads run one at a time

    def summary(self) -> dict[str, Any]:
        """What the session holds now, in a few numbers (the service's answer about it)."""
        return {"running": len(self.running_ids), "machines": len(self.machine_ids), "calls": self.calls}

    @classmethod
    def from_instance(cls, instance: BinpackInstance | dict[str, Any], **kwargs: Any) -> BinpackSession:
        return cls(instance, **kwargs)

    # --- what the session holds ---------------------------------------------------------------
    @property
    def running_ids(self) -> list[str]:
        return list(self._region.running_ids)

    @property
    def machine_ids(self) -> list[str]:
        return list(self._region.machine_ids)

    @property
    def now_hours(self) -> float:
        return self._region.now_hours

    @property
    def free(self) -> np.ndarray:
        """(machines, 3): free GPUs, CPU cores and memory of each machine now."""
        return self._region.arrays().free

    @serialised
    def instance(self, workloads: Any = ()) -> ColumnBinpackInstance:
        """The region now with ``workloads`` pending (a file of it is what :meth:`place` solves)."""
        return ColumnBinpackInstance.from_region(self._region, self._workloads(workloads), self.name)

    # --- changes ----------------------------------------------------------------------------------
    def _running_rows(self, ids: Sequence[str], what: str) -> np.ndarray:
        index = {job: r for r, job in enumerate(self._region.running_ids)}
        return _rows(ids, index, what, "running job")

    def _machine_rows(self, ids: Sequence[str], what: str) -> np.ndarray:
        return _rows(ids, self._region.machine_index, what, "machine")

    def _drop_running(self, rows: np.ndarray) -> None:
        """Running jobs ``rows`` leave; their holdings become free."""
        region = self._region
        keep = np.ones(len(region.running_ids), dtype=bool)
        keep[rows] = False
        renumber = np.cumsum(keep) - 1
        kept_holdings = keep[region.hold_job]
        region.hold_job = renumber[region.hold_job[kept_holdings]].astype(np.int64)
        region.hold_machine = region.hold_machine[kept_holdings]
        region.hold_amount = region.hold_amount[kept_holdings]
        for name in ("running_ids", "running_workload", "running_tenant"):
            setattr(region, name, [value for value, kept in zip(getattr(region, name), keep.tolist(), strict=True) if kept])
        region.running_priority = region.running_priority[keep]
        region.running_start = region.running_start[keep]

    @serialised
    def finish(self, running_ids: Sequence[str]) -> None:
        """Running jobs finished (or were stopped by the caller): their machines' resources free."""
        self._drop_running(self._running_rows(list(running_ids), "finish"))

    @serialised
    def fail_machines(self, machine_ids: Sequence[str]) -> list[str]:
        """Machines fail or go into maintenance: they hold nothing and offer nothing until
        :meth:`restore_machines`. The running jobs on them stop; their ids are returned."""
        rows = self._machine_rows(list(machine_ids), "fail_machines")
        region = self._region
        hit = np.unique(region.hold_job[np.isin(region.hold_machine, rows)])
        stopped = [region.running_ids[r] for r in hit.tolist()]
        self._drop_running(hit)
        region.capacity = region.capacity.copy()
        region.capacity[rows] = 0.0
        return stopped

    @serialised
    def restore_machines(self, machine_ids: Sequence[str]) -> None:
        """Machines come back into service with what they had."""
        rows = self._machine_rows(list(machine_ids), "restore_machines")
        self._region.capacity = self._region.capacity.copy()
        self._region.capacity[rows] = self._installed[rows]

    @serialised
    def advance(self, hours: float) -> None:
        """The clock moves on (running jobs age: RMS spares the newly started, §4.3)."""
        if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not np.isfinite(hours) or hours < 0:
            raise InstanceError("hours", f"{hours!r} is not allowed: must be a finite number >= 0")
        self._region.now_hours += float(hours)

    # --- placing -------------------------------------------------------------------------------
    def _workloads(self, workloads: Any) -> list[Workload]:
        if isinstance(workloads, (dict, Workload)):
            workloads = [workloads]
        checked: list[Workload] = []
        seen: set[str] = set()
        running = set(self._region.running_ids)
        for w, item in enumerate(workloads):
            try:
                # A Workload object is checked again: it may have been changed since it was made.
                data = item.model_dump() if isinstance(item, Workload) else item
                workload = validate_model(Workload, data)
            except InstanceError as error:
                raise InstanceError(f"workloads[{w}]" + (f".{error.path}" if error.path else ""), error.reason) from None
            if workload.id in seen:
                raise InstanceError(f"workloads[{w}].id", f"duplicate id '{workload.id}'")
            seen.add(workload.id)
            job_ids: set[str] = set()
            for j, job in enumerate(workload.jobs):
                if job.id in job_ids:
                    raise InstanceError(f"workloads[{w}].jobs[{j}].id", f"duplicate job id '{job.id}'")
                job_ids.add(job.id)
                if job.hardware not in self._hardware:
                    raise InstanceError(f"workloads[{w}].jobs[{j}].hardware", f"unknown hardware type '{job.hardware}'")
                if f"{workload.id}/{job.id}" in running:
                    raise InstanceError(f"workloads[{w}].id", f"'{workload.id}/{job.id}' is running already")
            checked.append(workload)
        return checked

    @serialised
    def solve(self, workloads: Any, *, apply: bool = True, time_limit: float | None = None,
              progress: Progress | None = None) -> SolveResult:
        """Place ``workloads`` (one workload — a dict as in the instance file or a
        :class:`~fleetplan.instances.binpack.Workload` — or a list of them, in GMS order) against
        the region now. With ``apply`` (default) the plan takes effect: placed jobs run, the
        jobs they preempt leave. ``time_limit``: this call's (default: the session's)."""
        instance = self.instance(workloads)
        if not instance.workloads:
            raise InstanceError("workloads", "give at least one workload to place")
        with warm.hints(self._warm) as hints:
            result = solve(instance, self._spec.name, time_limit=self.time_limit if time_limit is None else time_limit,
                           seed=self.seed, threads=self.threads, progress=progress, **self._options)
        result.stats["warm_hints_used"] = float(hints.offered)
        self.calls += 1
        if apply and result.plan is not None and result.evaluation is not None and result.evaluation.feasible:
            self._apply(instance, result.plan)
        return result

    def place(self, workloads: Any, *, apply: bool = True, time_limit: float | None = None,
              progress: Progress | None = None) -> SolveResult:
        """:meth:`solve` by MAST's name for an RMS call (place the workloads GMS hands over)."""
        return self.solve(workloads, apply=apply, time_limit=time_limit, progress=progress)

    def _apply(self, instance: BinpackInstance, plan: BinpackPlan) -> None:
        region = self._region
        by_id = {workload.id: workload for workload in instance.workloads}
        preempted = [job for entry in plan.workloads if entry.placed for placement in entry.jobs
                     for job in placement.preempted]
        if preempted:
            self._drop_running(self._running_rows(preempted, "preempted"))
        ids, workload_ids, tenants, priorities = [], [], [], []
        jobs, machines, amounts = [], [], []
        for entry in plan.workloads:
            if not entry.placed:
                continue
            workload = by_id[entry.workload]
            specs = {job.id: job for job in workload.jobs}
            for placement in entry.jobs:
                spec = specs[placement.job]
                demand = np.array([spec.gpus_per_task, spec.cpus_per_task, spec.memory_gb_per_task], dtype=float)
                row = len(region.running_ids) + len(ids)
                ids.append(f"{workload.id}/{spec.id}")
                workload_ids.append(workload.id)
                tenants.append(workload.tenant)
                priorities.append(workload.priority)
                machines.extend(region.machine_index[m] for m in placement.machines)
                jobs.extend([row] * len(placement.machines))
                amounts.extend(np.asarray(placement.tasks, dtype=float)[:, None] * demand[None, :])
        if not ids:
            return
        region.running_ids = region.running_ids + ids
        region.running_workload = region.running_workload + workload_ids
        region.running_tenant = region.running_tenant + tenants
        region.running_priority = np.concatenate([region.running_priority, np.asarray(priorities, dtype=np.int64)])
        region.running_start = np.concatenate([region.running_start, np.full(len(ids), region.now_hours)])
        region.hold_job = np.concatenate([region.hold_job, np.asarray(jobs, dtype=np.int64)])
        region.hold_machine = np.concatenate([region.hold_machine, np.asarray(machines, dtype=np.int64)])
        region.hold_amount = np.concatenate([region.hold_amount, np.asarray(amounts, dtype=float).reshape(-1, 3)])


def _rows(ids: Sequence[str], index: dict[str, int], what: str, noun: str) -> np.ndarray:
    """The rows of ``ids`` in ``index``, sorted and once each; an unknown id is an
    :class:`InstanceError` naming ``what[k]``."""
    rows = []
    for k, name in enumerate(ids):
        if name not in index:
            raise InstanceError(f"{what}[{k}]", f"unknown {noun} {name!r}")
        rows.append(index[name])
    return np.unique(np.asarray(rows, dtype=np.int64))
