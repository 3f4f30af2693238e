"""One region's RMS in the simulation: the ``binpack`` greedy on a state that lives over time.

:class:`~fleetplan.solvers.binpack.RegionState` holds one GMS pass: free resources per machine
plus the running jobs of its instance (what preemption may take). In the simulation jobs start
and finish between passes, so this module keeps, per region:

* the ``RegionState`` of the region's machines, whose ``free`` / ``group_free`` arrays are kept
  current: :func:`~fleetplan.solvers.binpack.place_workload` takes resources when it places a
  workload and :meth:`Region.release` gives them back when it finishes (the state's own
  ``undo`` of a plan that preempted nothing);
* the running jobs, re-installed as the state's running-job arrays (holdings per machine,
  priorities, ages) by :meth:`Region.sync` only when a preemption plan is needed and the set
  changed since the last pass — the same arrays ``RegionState.__init__`` builds from an instance.

Pending workloads are single-job workloads; the region's binpack instance lists one *template*
workload per (GPU type, GPUs, priority) the trace needs, and ``place_workload`` is called with a
template's index (MAST §4.3: RMS places a workload by its jobs' shapes and its priority).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fleetplan.instances.binpack import PRIORITY_LEVELS, BinpackInstance, Workload, youth
from fleetplan.sim.mast.scenario import GPUS_PER_MACHINE, Fleet
from fleetplan.solvers.binpack import (
    JobOption,
    NegativeCache,
    RegionState,
    WorkloadOutcome,
    place_workload,
)

MEMORY_GB_PER_GPU = 128.0


def job_shape(gpus: int, cpus_per_gpu: float) -> dict:
    """One job of ``gpus`` GPUs: whole 8-GPU machines, or one task of fewer GPUs."""
    per_task = GPUS_PER_MACHINE if gpus >= GPUS_PER_MACHINE else gpus
    return {"tasks": max(1, gpus // per_task), "gpus_per_task": per_task,
            "cpus_per_task": max(1, int(round(per_task * cpus_per_gpu))),
            "memory_gb_per_task": per_task * MEMORY_GB_PER_GPU}


def make_templates(shapes: list[tuple[str, int]], cpus_per_gpu: float) -> tuple[list[Workload], dict]:
    """Template workloads for every (hardware, GPUs) shape at every priority, and their index."""
    workloads, index = [], {}
    for hw, gpus in shapes:
        for p in range(PRIORITY_LEVELS):
            index[(hw, gpus, p)] = len(workloads)
            workloads.append(Workload(id=f"{hw}-{gpus}-p{p}", priority=p, jobs=[
                {"id": "train", "hardware": hw, **job_shape(gpus, cpus_per_gpu)}]))
    return workloads, index


class Region:
    """One region: its RMS state, negative cache and running jobs (workload -> plan)."""

    def __init__(self, index: int, fleet: Fleet, templates: list[Workload], cpus_per_machine: int):
        cols = fleet.machines[index]
        m = len(cols["cluster"])
        self.index = index
        self.name = fleet.region_names[index]
        self.instance = BinpackInstance.model_validate({
            "kind": "binpack", "clusters": fleet.clusters[index], "hardware_types": fleet.hardware,
            "machines": {"id": [f"m{i}" for i in range(m)], "cluster": cols["cluster"], "rack": cols["rack"],
                         "hardware": cols["hardware"], "gpus": [GPUS_PER_MACHINE] * m,
                         "cpus": [cpus_per_machine] * m, "memory_gb": [GPUS_PER_MACHINE * MEMORY_GB_PER_GPU] * m},
            "workloads": templates})
        self.state = RegionState(self.instance)
        self.cache = NegativeCache()
        self.running: dict[int, JobOption] = {}
        self.dirty = False
        self.synced_pass = -1
        self.synced_ids = np.zeros(0, dtype=np.int64)
        self._demand = [self.instance.job_demand(t, 0) for t in range(len(templates))]
        self._template_of: dict[int, int] = {}
        self._amount: dict[int, np.ndarray] = {}
        # groups (dynamic cluster, hardware) of each hardware type, for the quick room check
        self._hw_groups = {}
        for (_, hw), g in self.state.group_index.items():
            self._hw_groups.setdefault(hw, []).append(g)
        self._hw_groups = {hw: np.array(gs, dtype=np.int64) for hw, gs in self._hw_groups.items()}
        self._room: dict[int, np.ndarray] | None = None
        self._fit: dict[int, tuple[float, float]] | None = None

    # --- placing ----------------------------------------------------------------------------
    def may_fit(self, hw: int, gpus: int, priority: int, preemption: bool) -> bool:
        """A necessary condition for a plan, checked before RMS runs: some dynamic cluster has
        whole free machines (or, for a job under 8 GPUs, a machine with room) of type ``hw`` for
        ``gpus``; with preemption, some cluster has ``gpus`` GPUs free or held by lower levels
        (as of the last :meth:`sync`). The maxima are recomputed only after a change."""
        if preemption:
            if self._room is None:
                self._room = {}
                for h, groups in self._hw_groups.items():
                    free = self.state.group_free[groups, 0]
                    held = self.state.group_held[groups, :, 0]
                    # tail[g, p] = free + what levels p+1.. hold
                    tail = free[:, None] + np.concatenate([np.cumsum(held[:, ::-1], axis=1)[:, ::-1][:, 1:],
                                                           np.zeros((groups.size, 1))], axis=1)
                    self._room[h] = tail.max(axis=0)
            room = self._room.get(hw)
            return room is not None and bool(room[priority] >= gpus - 1e-9)
        if hw not in self.state.hw_layout:
            return False
        if self._fit is None:
            self._fit = {}
            gpus_free = self.state.free[:, 0]
            for h, layout in self.state.hw_layout.items():
                free = gpus_free[layout["rows"]]
                whole = np.add.reduceat(np.floor((free + 1e-9) / GPUS_PER_MACHINE), layout["group_start"])
                self._fit[h] = (float(whole.max()), float(free.max()))
        whole, most = self._fit[hw]
        # An 8-GPU task takes a whole machine; a smaller job is one task on one machine.
        return whole * GPUS_PER_MACHINE >= gpus if gpus >= GPUS_PER_MACHINE else most >= gpus - 1e-9

    def place(self, template: int, preemption: bool) -> WorkloadOutcome:
        """RMS's plan for a template workload, applied to the state (undo it if it loses)."""
        outcome = place_workload(self.state, template, preemption=preemption, cache=self.cache)
        if outcome.placed:
            self._room = self._fit = None
        return outcome

    def undo(self, outcome: WorkloadOutcome, template: int) -> None:
        for option in reversed(outcome.options):
            self.state.undo(option, self._demand[template])
        self._room = self._fit = None

    def preempted_workloads(self, outcome: WorkloadOutcome) -> np.ndarray:
        """Workload ids the (applied) plan preempts (rows of the last :meth:`sync`)."""
        rows = np.concatenate([o.preempted for o in outcome.options]) if outcome.options else np.zeros(0, int)
        return self.synced_ids[rows.astype(np.int64)]

    def start(self, w: int, outcome: WorkloadOutcome, template: int) -> None:
        """Record the winning plan as workload ``w``'s holdings; its preempted jobs leave."""
        for v in self.preempted_workloads(outcome).tolist():
            self.running.pop(v, None)  # the state freed their holdings when the plan was applied
            self._amount.pop(v, None)
            self._template_of.pop(v, None)
        option = outcome.options[0]
        self.running[w] = dataclasses.replace(option, preempted=np.zeros(0, dtype=np.int64))
        self._template_of[w] = template
        self._amount[w] = option.tasks[:, None] * self._demand[template][None, :]
        self.dirty = True

    def release(self, w: int) -> None:
        """``w`` finished: its holdings become free (undoing a plan that preempted nothing)."""
        option = self.running.pop(w)
        self._amount.pop(w)
        self.state.undo(option, self._demand[self._template_of.pop(w)])
        self._room = self._fit = None
        self.dirty = True

    def demand_of(self, template: int) -> np.ndarray:
        return self._demand[template]

    # --- running jobs for preemption --------------------------------------------------------
    def sync(self, pass_id: int, now: float, priority: np.ndarray, start: np.ndarray) -> None:
        """Install the running jobs as the state's preemption candidates (once per pass, and
        only if they changed): holdings, priority (what each runs at) and hours running."""
        if self.synced_pass == pass_id or (not self.dirty and self.synced_pass >= 0):
            self.synced_pass = pass_id
            return
        state = self.state
        ids = np.fromiter(self.running, dtype=np.int64, count=len(self.running))
        options = [self.running[w] for w in ids.tolist()]
        counts = np.array([o.rows.size for o in options], dtype=np.int64)
        if options:
            rows = np.concatenate([o.rows for o in options]).astype(np.int64)
            amount = np.concatenate([self._amount[w] for w in ids.tolist()])
        else:
            rows, amount = np.zeros(0, dtype=np.int64), np.zeros((0, 3))
        job = np.repeat(np.arange(ids.size), counts)
        a = dataclasses.replace(
            state.arrays, running_ids=[str(w) for w in ids.tolist()], running_priority=priority[ids].astype(np.int64),
            running_age=np.maximum(now - start[ids], 0.0), hold_job=job, hold_machine=rows, hold_amount=amount,
            hold_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            hold_order=np.arange(rows.size, dtype=np.int64), _cache={})
        # The same derived arrays RegionState.__init__ builds from an instance's running jobs.
        state.arrays = a
        state.alive = np.ones(ids.size, dtype=bool)
        state.youth = youth(a.running_age)
        groups = len(state.group_keys)
        hold_group = state.machine_group[rows]
        order = np.argsort(hold_group, kind="stable")
        ptr = np.concatenate([[0], np.cumsum(np.bincount(hold_group, minlength=groups))])
        state.group_holdings = {key: order[ptr[g]:ptr[g + 1]] for g, key in enumerate(state.group_keys)}
        state.group_held = np.zeros((groups, PRIORITY_LEVELS, 3))
        np.add.at(state.group_held, (hold_group, a.running_priority[job]), amount)
        state._rank = np.full(ids.size, -1, dtype=np.int64)
        self.synced_ids = ids
        self._room = self._fit = None
        self.synced_pass = pass_id
        self.dirty = False


__all__ = ["MEMORY_GB_PER_GPU", "Region", "job_shape", "make_templates"]
