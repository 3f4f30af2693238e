"""The event-driven MAST fast-path simulation (MAST §4.2-4.3, §5.6's simulator).

Events (:class:`~fleetplan.sim.engine.EventQueue`): ``arrive`` (a workload is submitted),
``scan`` (a GMS-scan pass every ``scan_minutes``: the scheduler places pending workloads in
<priority, credit> order), ``finish`` (a run ends; stale after a preemption, by epoch) and
``replicated`` (a workload's data reached a region). Per-workload state is numpy arrays; the
regions' machines are the RMS states of :mod:`fleetplan.sim.mast.rms`.

Preemption (§2): a preempted workload keeps the work up to its last checkpoint (checkpoints every
``checkpoint_minutes`` of useful work since it started), loses the rest, and when it runs again
first spends ``restart_minutes`` restoring. Both losses are *wasted* GPU-hours, so at the end::

    GPU-hours run = GPU-hours of finished work + wasted + work done by unfinished workloads
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from fleetplan.instances.binpack import PRIORITY_LEVELS
from fleetplan.sim.engine import EventQueue
from fleetplan.sim.mast.rms import Region, job_shape, make_templates
from fleetplan.sim.mast.scenario import MastScenario, build_fleet
from fleetplan.sim.mast.trace import (
    Trace,
    build_tenants,
    cpus_per_gpu,
    explicit_trace,
    generate_trace,
    largest_cluster_gpus,
)
from fleetplan.solvers.binpack import WorkloadOutcome

FUTURE, PENDING, REPLICATING, RUNNING, DONE, DROPPED = range(6)
LOWEST = 6


class MastSim:
    """State of one run. The scheduler (:mod:`.schedulers`) decides; this class keeps books."""

    def __init__(self, scenario: MastScenario, seed: int, trace: Trace | None = None, source: str | None = None):
        from fleetplan.sim.mast.gms import GmsParameters

        rng = np.random.default_rng(seed)
        self.scenario = s = scenario
        self.fleet = fleet = build_fleet(s, rng)
        self.tenants = build_tenants(s, fleet, rng)
        if trace is None:
            trace = explicit_trace(s, fleet, self.tenants, source) if s.workloads is not None else \
                generate_trace(s, fleet, self.tenants, rng)
        self.trace = t = trace
        # The clock starts warmup hours before the measured trace (generated traces only).
        self.offset = 0.0 if s.workloads is not None else float(s.warmup_hours)
        self.horizon = self.offset + float(s.hours)
        shapes = sorted({(fleet.hardware[h], int(g)) for h, g in zip(t.hardware.tolist(), t.gpus.tolist(),
                                                                     strict=True)})
        templates, self.template_index = make_templates(shapes, cpus_per_gpu(s))
        self.regions = [Region(r, fleet, templates, s.cpus_per_machine) for r in range(fleet.num_regions)]
        self.gms_params = GmsParameters(s.age_weight, s.fair_share_weight, s.age_cap_hours, s.window_hours)
        W, R, H = t.size, fleet.num_regions, len(fleet.hardware)
        self.hw_names = fleet.hardware
        self.level = self.tenants.priority[t.tenant]  # the tenant's level (metrics group by it)
        self.status = np.full(W, FUTURE, dtype=np.int8)
        self.remaining = t.duration.astype(float).copy()
        self.overhead = np.zeros(W)
        self.region_of = np.full(W, -1, dtype=np.int64)
        self.bound = np.full(W, -1, dtype=np.int64)
        self.run_start = np.zeros(W)
        self.run_priority = np.full(W, LOWEST, dtype=np.int64)
        self.epoch = np.zeros(W, dtype=np.int64)
        self.queued_at = np.zeros(W)
        self.within = np.zeros(W, dtype=bool)
        # Start of the current within-quota stretch of a wait (nan: over quota, or not scanned);
        # the SLO clock of a within-quota workload runs from it (§2: the latency guarantee is
        # for workloads within their tenant's quota).
        self.within_since = np.full(W, np.nan)
        self.fresh = np.zeros(W, dtype=bool)
        self.data = t.data.copy()
        self.cpus = t.gpus * cpus_per_gpu(s)
        self.cluster_max = largest_cluster_gpus(fleet, per_region=True)  # (R, H)
        self.running_gpus = np.zeros((R, H))
        self.queued_gpus = np.zeros((R, H))
        T = len(self.tenants.names)
        self.tenant_gpus = np.zeros(T)
        self.tenant_cpus = np.zeros(T)
        self.window_slots = max(1, int(round(s.window_hours * 60 / s.scan_minutes)))
        self.window = np.zeros((self.window_slots, T))
        self.last_scan = 0.0
        # books
        self.gpu_hours_run = 0.0
        self.wasted = 0.0
        self.finished_work = 0.0
        self.unfinished_work = 0.0
        self.preemptions = np.zeros(7, dtype=np.int64)  # by the victim's tenant level
        self.data_moves = 0
        self.dropped = 0
        self.bucket = s.series_minutes / 60.0
        nb = max(1, math.ceil(s.hours / self.bucket - 1e-9))
        self.alloc_area = np.zeros(nb)
        self.alloc_now = 0.0
        self.clock = 0.0
        self.ev_w: list[int] = []
        self.ev_queued: list[float] = []
        self.ev_start: list[float] = []
        self.ev_within: list[bool] = []
        self.ev_since: list[float] = []
        self.queue = EventQueue()
        self._best_keys: dict[int, tuple] = {}
        self.events = 0
        self.passes = 0

    # --- helpers for schedulers -------------------------------------------------------------
    def candidates(self, pending: np.ndarray) -> list[list[int]]:
        """Per pending workload, the regions holding its data with a large enough cluster of its
        GPU type (one vectorised pass)."""
        t = self.trace
        mask = self.data[pending] & (self.cluster_max[:, t.hardware[pending]].T >= t.gpus[pending][:, None])
        rows, cols = np.nonzero(mask)
        return [c.tolist() for c in np.split(cols, np.searchsorted(rows, np.arange(1, pending.size)))]

    def capable(self, w: int) -> np.ndarray:
        """(R,) regions with a dynamic cluster of the workload's GPU type large enough."""
        return self.cluster_max[:, self.trace.hardware[w]] >= self.trace.gpus[w]

    def mark(self, w: int, within: bool, now: float) -> None:
        """Record a GMS pass's quota verdict on pending ``w``: a wait that is within quota at its
        first pass counts from its start; one that becomes within quota later, from that pass."""
        self.within[w] = within
        if not within:
            self.within_since[w] = np.nan
        elif np.isnan(self.within_since[w]):
            self.within_since[w] = self.queued_at[w] if self.fresh[w] else now
        self.fresh[w] = False

    def best_free_key(self, w: int) -> tuple:
        """The best score any plan of ``w`` can have (§4.3's order, the binpack ``option_key``):
        no preemption, one machine per 8-GPU task (or one machine), the fewest racks."""
        gpus = int(self.trace.gpus[w])
        key = self._best_keys.get(gpus)
        if key is None:
            tasks = job_shape(gpus, 1.0)["tasks"]
            racks = -(-tasks // self.scenario.machines_per_rack)
            key = self._best_keys[gpus] = ((0,) * PRIORITY_LEVELS + (0.0, tasks, racks),)
        return key

    def template(self, w: int, priority: int) -> int:
        return self.template_index[(self.hw_names[self.trace.hardware[w]], int(self.trace.gpus[w]), int(priority))]

    def pressure(self, regions: np.ndarray, w: int, queued: bool) -> np.ndarray:
        """Demand / supply of the workload's GPU type in ``regions`` (running, plus bound queues)."""
        h = self.trace.hardware[w]
        demand = self.running_gpus[regions, h] + (self.queued_gpus[regions, h] if queued else 0.0)
        return demand / np.maximum(self.fleet.gpus[regions, h], 1e-9)

    def replicate(self, w: int, now: float, region: int) -> None:
        """Start copying ``w``'s data to ``region`` (§4.3: when every RMS abandons the auction)."""
        self.status[w] = REPLICATING
        self.data_moves += 1
        self.queue.push(now + self.scenario.replication_hours, "replicated", (w, region))

    # --- accounting --------------------------------------------------------------------------
    def _advance(self, now: float) -> None:
        """Integrate allocated GPUs over [clock, now) into the series buckets (measured hours)."""
        b = min(now, self.horizon)
        a = max(self.clock, self.offset) - self.offset
        b_m = b - self.offset
        while b_m > a:
            i = min(int(a / self.bucket), self.alloc_area.size - 1)
            edge = min(b_m, (i + 1) * self.bucket) if i < self.alloc_area.size - 1 else b_m
            self.alloc_area[i] += self.alloc_now * (edge - a)
            a = edge
        self.clock = max(self.clock, b)

    def _hold(self, w: int, r: int, sign: float) -> None:
        g = float(self.trace.gpus[w])
        self.running_gpus[r, self.trace.hardware[w]] += sign * g
        self.tenant_gpus[self.trace.tenant[w]] += sign * g
        self.tenant_cpus[self.trace.tenant[w]] += sign * self.cpus[w]
        self.alloc_now += sign * g

    def start(self, w: int, r: int, outcome: WorkloadOutcome, template: int, now: float, priority: int,
              within: bool, record: bool = True) -> None:
        """Run ``w`` in region ``r`` on the applied plan; preempt whom it names."""
        region = self.regions[r]
        victims = region.preempted_workloads(outcome).tolist()
        region.start(w, outcome, template)
        for v in victims:
            self._preempt(v, now)
        if self.bound[w] >= 0 and self.status[w] == PENDING:
            self.queued_gpus[self.bound[w], self.trace.hardware[w]] -= self.trace.gpus[w]
        self.status[w] = RUNNING
        self.region_of[w] = r
        self.run_start[w] = now
        self.run_priority[w] = priority
        self.epoch[w] += 1
        self._hold(w, r, +1.0)
        self.queue.push(now + self.overhead[w] + self.remaining[w], "finish", (w, int(self.epoch[w])))
        if record:
            self.ev_w.append(w)
            self.ev_queued.append(float(self.queued_at[w]))
            self.ev_start.append(now)
            self.ev_within.append(bool(within))
            self.ev_since.append(float(self.within_since[w]))
        self.within_since[w] = np.nan

    def _segment(self, w: int, now: float) -> tuple[float, float, float]:
        """The current run of ``w`` up to ``now``: (hours, restore hours, useful hours)."""
        e = max(now - self.run_start[w], 0.0)
        o = min(e, self.overhead[w])
        return e, o, e - o

    def _preempt(self, v: int, now: float) -> None:
        g = float(self.trace.gpus[v])
        e, o, p = self._segment(v, now)
        c = self.scenario.checkpoint_minutes / 60.0
        saved = min(math.floor(p / c + 1e-9) * c, self.remaining[v])
        self.gpu_hours_run += g * e
        self.wasted += g * (o + p - saved)
        self.remaining[v] -= saved
        self.overhead[v] = self.scenario.restart_minutes / 60.0
        self._hold(v, int(self.region_of[v]), -1.0)
        self.preemptions[self.level[v]] += 1
        self.status[v] = PENDING
        self.queued_at[v] = now
        self.fresh[v] = True
        self.region_of[v] = -1
        self.epoch[v] += 1
        if self.bound[v] >= 0:
            self.queued_gpus[self.bound[v], self.trace.hardware[v]] += g

    def _finish(self, w: int, epoch: int, now: float) -> None:
        if self.status[w] != RUNNING or epoch != self.epoch[w]:
            return
        g = float(self.trace.gpus[w])
        e, o, _ = self._segment(w, now)
        self.gpu_hours_run += g * e
        self.wasted += g * o
        self.finished_work += g * float(self.trace.duration[w])
        self.regions[int(self.region_of[w])].release(w)
        self._hold(w, int(self.region_of[w]), -1.0)
        self.remaining[w] = 0.0
        self.status[w] = DONE
        self.region_of[w] = -1

    def _close(self) -> None:
        """Stop at the horizon: running work is counted up to it."""
        g = self.trace.gpus.astype(float)
        for w in np.flatnonzero(self.status == RUNNING).tolist():
            e, o, p = self._segment(w, self.horizon)
            self.gpu_hours_run += g[w] * e
            self.wasted += g[w] * o
            self.unfinished_work += g[w] * (self.trace.duration[w] - self.remaining[w] + p)
        waiting = (self.status == PENDING) | (self.status == REPLICATING)
        self.unfinished_work += float((g * (self.trace.duration - self.remaining))[waiting].sum())

    # --- the run -----------------------------------------------------------------------------
    def place_initial(self) -> None:
        """Workloads already running when the trace starts: each in the first region holding its
        data (else any) with free room, without preemption; none fits: dropped."""
        used = np.zeros(len(self.tenants.names))
        for w in np.flatnonzero(self.trace.initial).tolist():
            t, g = self.trace.tenant[w], self.trace.gpus[w]
            within = used[t] + g <= self.tenants.gpu_quota[t]
            priority = int(self.tenants.priority[t]) if within else LOWEST
            used[t] += g if within else 0
            template = self.template(w, priority)
            capable = self.capable(w)
            order = np.concatenate([np.flatnonzero(capable & self.data[w]), np.flatnonzero(capable & ~self.data[w])])
            hw = int(self.trace.hardware[w])
            for r in order.tolist():
                if not self.regions[r].may_fit(hw, int(g), priority, False):
                    continue
                outcome = self.regions[r].place(template, preemption=False)
                if outcome.placed:
                    self.data[w, r] = True
                    self.bound[w] = r
                    self.start(w, r, outcome, template, 0.0, priority, within, record=False)
                    break
            else:
                self.status[w] = DROPPED
                self.dropped += 1

    def run(self, scheduler, progress: Callable[[float, float], None] | None = None) -> None:
        s = self.scenario
        for r in self.regions:
            r.cache.clear()
        if self.trace.initial.any():
            self.place_initial()
        for w in np.flatnonzero(~self.trace.initial).tolist():
            self.queue.push(float(self.trace.arrival[w]), "arrive", w)
        self.queue.push(0.0, "scan", None)
        period = s.scan_minutes / 60.0
        while self.queue and self.queue.peek_time() < self.horizon:
            now, kind, payload = self.queue.pop()
            self._advance(now)
            self.events += 1
            if kind == "arrive":
                w = payload
                self.status[w] = PENDING
                self.queued_at[w] = now
                self.fresh[w] = True
                scheduler.on_arrival(self, w, now)
            elif kind == "finish":
                self._finish(payload[0], payload[1], now)
            elif kind == "replicated":
                w, r = payload
                self.data[w, r] = True
                if self.status[w] == REPLICATING:
                    self.status[w] = PENDING
            elif kind == "scan":
                self._window(now)
                scheduler.scan(self, now, self.passes)
                self.passes += 1
                if progress is not None:
                    progress(now, self.horizon)
                self.queue.push(self.passes * period, "scan", None)  # k * period: no drift
        self._advance(self.horizon)
        self._close()

    def _window(self, now: float) -> None:
        """Per-tenant GPU-hours over the last ``window_hours`` (eq. 11's window average)."""
        self.window[self.passes % self.window_slots] = self.tenant_gpus * (now - self.last_scan)
        self.last_scan = now

    def gms(self, pending: np.ndarray):
        """One GMS-scan pass (§4.2) over ``pending`` workloads."""
        from fleetplan.sim.mast.gms import gms_scan

        t = self.trace
        return gms_scan(tenant=t.tenant[pending], age_hours=self.clock - self.queued_at[pending],
                        gpus=t.gpus[pending], cpus=self.cpus[pending], tenant_priority=self.tenants.priority,
                        tenant_gpu_quota=self.tenants.gpu_quota, tenant_cpu_quota=self.tenants.cpu_quota,
                        tenant_gpus_used=np.maximum(self.tenant_gpus, 0.0),
                        tenant_cpus_used=np.maximum(self.tenant_cpus, 0.0),
                        tenant_window_usage=self.gms_params.window_average(self.window.sum(axis=0)),
                        params=self.gms_params)


__all__ = ["DONE", "DROPPED", "FUTURE", "PENDING", "REPLICATING", "RUNNING", "MastSim"]
