"""The event loop of the cluster simulator: jobs as arrays, GPUs on servers, decisions on a grid.

Time jumps from event to event (arrival, completion, lease expiry); a scheduler decides only on
multiples of its scheduling interval (Gavel: the round; Astraea: 10 s, Astraea §6.1.3), at the
first grid point after something changed, so idle time costs nothing. At a decision, running jobs
whose lease (Gavel: round) expired compete again with the pending ones (Astraea §5.1.2): the
scheduler re-places them through :meth:`Decision.place`; a renewed job keeps its GPUs, a job
not re-placed is preempted and pays ``checkpoint_s`` of no progress when it resumes.

Placement is consolidated (Astraea §5, Gavel §5): a job that fits on one server takes the
best-fitting one; a larger job takes whole servers first. A multi-GPU job spread over more
servers than it needs runs at its unconsolidated throughput.

Fairness integrals of Astraea §4.2 are kept as the simulation runs: GPU service time allocated
to every job and tenant (eqs. 2, 11), and the fair service time of every job (eqs. 13-14) and
tenant (eqs. 8-9, and eq. 16's quota variant), accumulated per time window for the per-tenant
LTGF series.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from fleetplan.sim.cluster.traces import Trace

PENDING, RUNNING, DONE, FUTURE = 1, 2, 3, 0
EPS = 1e-9


class Cluster:
    """Servers of ``server_size`` GPUs per worker type; ``free`` GPUs per server."""

    def __init__(self, types: list[str], gpus: dict[str, int], server_size: int, strict: bool):
        self.types = types
        self.size = server_size
        self.strict = strict
        counts = [int(gpus.get(t, 0)) for t in types]
        sizes, owner = [], []
        for j, count in enumerate(counts):
            full, rest = divmod(count, server_size)
            sizes += [server_size] * full + ([rest] if rest else [])
            owner += [j] * (full + (1 if rest else 0))
        self.capacity = np.array(sizes, dtype=int)
        self.server_type = np.array(owner, dtype=int)
        self.free = self.capacity.copy()
        self.reserved = np.zeros_like(self.free)
        self.total = np.array(counts, dtype=int)
        self.slices = [np.flatnonzero(self.server_type == j) for j in range(len(types))]

    def free_of_type(self, j: int) -> int:
        return int(self.free[self.slices[j]].sum())

    def find(self, j: int, g: int, avoid_reserved: bool) -> tuple[list[tuple[int, int]], bool] | None:
        """Servers for ``g`` GPUs of type ``j``: (list of (server, count), consolidated) or None."""
        servers = self.slices[j]
        free = self.free[servers]
        if avoid_reserved:
            free = np.maximum(free - self.reserved[servers], 0)
        if free.sum() < g:
            return None
        if g <= self.size:
            fits = free >= g
            if fits.any():
                k = int(np.argmin(np.where(fits, free, 1 << 40)))
                return [(int(servers[k]), g)], True
        order = np.argsort(-free, kind="stable")
        taken, need = [], g
        for k in order:
            if need == 0 or free[k] == 0:
                break
            c = int(min(free[k], need))
            taken.append((int(servers[k]), c))
            need -= c
        consolidated = len(taken) <= math.ceil(g / self.size)
        if self.strict and not consolidated:
            return None
        return taken, consolidated

    def take(self, alloc: list[tuple[int, int]]) -> None:
        for s, c in alloc:
            unreserved = self.free[s] - self.reserved[s]
            if c > unreserved:
                self.reserved[s] -= c - max(unreserved, 0)
            self.free[s] -= c
        if (self.free < 0).any():
            raise AssertionError("placement over-committed a server")

    def give_back(self, alloc: list[tuple[int, int]]) -> None:
        for s, c in alloc:
            self.free[s] += c


class Decision:
    """What a scheduler sees at a decision: the candidates and a way to place them."""

    def __init__(self, sim: Sim, candidates: np.ndarray, renewing: np.ndarray):
        self.sim = sim
        self.now = sim.now
        self.candidates = candidates  # pending + lease-expired running jobs
        self.renewing = renewing  # bool per job: lease expired this decision
        self.placed: dict[int, tuple[int, list[tuple[int, int]], bool]] = {}

    def free(self, j: int) -> int:
        return self.sim.cluster.free_of_type(j)

    def free_total(self) -> int:
        return int(self.sim.cluster.free.sum())

    def place(self, m: int, j: int) -> bool:
        """Run job m on type j from now on; False if it cannot be placed (or is already placed)."""
        sim, cluster = self.sim, self.sim.cluster
        if m in self.placed or sim.trace.throughput[m, j] <= 0:
            return False
        g = int(sim.trace.gpus[m])
        old = sim.alloc.get(m)
        if self.renewing[m] and old is not None and sim.run_type[m] == j \
                and all(cluster.free[s] >= c for s, c in old):
            cluster.take(old)
            self.placed[m] = (j, old, bool(sim.consolidated[m]))
            return True
        found = cluster.find(j, g, avoid_reserved=True) or cluster.find(j, g, avoid_reserved=False)
        if found is None:
            return False
        cluster.take(found[0])
        self.placed[m] = (j, found[0], found[1])
        return True


class Scheduler:
    """Base class: ``interval`` (decision grid), ``lease`` (inf: never preempts), ``decide``."""

    name = "base"
    fluid = False
    # a lease-based scheduler renews every expiring lease when no waiting job can fit anyway
    renews_when_nothing_fits = True

    def __init__(self, scenario, trace: Trace, seed: int):
        self.scenario = scenario
        self.interval = float(scenario.interval_s)
        self.lease = float(scenario.lease_s)

    def start(self, sim: Sim) -> None:
        """Called once before the loop."""

    def decide(self, decision: Decision) -> None:
        raise NotImplementedError

    def decide_fluid(self, sim: Sim) -> None:
        """Fluid schedulers set ``sim.rate`` and ``sim.held`` of every active job directly."""
        raise NotImplementedError

    def fastest_fitting(self, decision: Decision, m: int) -> bool:
        """Place m on its fastest type with room (heterogeneity-greedy placement of baselines)."""
        sim = decision.sim
        g = sim.trace.gpus[m]
        for j in sim.type_order[m]:
            if sim.trace.throughput[m, j] > 0 and decision.free(j) >= g and decision.place(m, int(j)):
                return True
        return False


class Sim:
    """State of one run. Arrays are per job; ``alloc`` maps running jobs to their GPUs."""

    def __init__(self, trace: Trace, scenario, scheduler: Scheduler):
        self.trace = trace
        self.scenario = scenario
        self.scheduler = scheduler
        n, n_types = trace.throughput.shape
        self.n = n
        gpus = dict(scenario.cluster)
        self.cluster = Cluster(trace.worker_types, gpus, scenario.server_size, scenario.strict_consolidation)
        self.M = int(self.cluster.total.sum())
        self.now = 0.0
        self.status = np.full(n, FUTURE, dtype=np.int8)
        self.left = trace.steps.astype(float).copy()
        self.rate = np.zeros(n)
        self.held = np.zeros(n)  # GPUs held now (fractional in the fluid baseline)
        self.run_type = np.full(n, -1, dtype=int)
        self.consolidated = np.ones(n, dtype=bool)
        self.lease_end = np.full(n, np.inf)
        self.resume_at = np.zeros(n)  # no progress before this (checkpoint restore)
        self.ever_ran = np.zeros(n, dtype=bool)
        self.first_start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.run_time = np.zeros(n)  # wall seconds holding GPUs
        self.time_on_type = np.zeros((n, n_types))
        self.attained = np.zeros(n)  # GPU-seconds (eq. 2)
        self.fair_job = np.zeros(n)  # eq. 14
        self.preemptions = np.zeros(n, dtype=int)
        self.overhead = np.zeros(n)
        self.active_integral = 0.0  # integral of the number of active jobs (Gavel FTF)
        self.active_at_arrival = np.zeros(n)
        self.active_at_finish = np.zeros(n)
        self.alloc: dict[int, list[tuple[int, int]]] = {}
        self.type_order = np.argsort(-trace.throughput, axis=1, kind="stable")
        n_tenants = len(trace.tenant_names)
        self.T = n_tenants
        self.quota = self._quotas()
        self.tenant_alloc = np.zeros(n_tenants)
        self.tenant_fair = np.zeros(n_tenants)  # eq. 9 with eq. 8
        self.tenant_fair_quota = np.zeros(n_tenants)  # eq. 9 with eq. 16
        self.window = float(scenario.window_s)
        self.win_alloc: list[np.ndarray] = []
        self.win_fair: list[np.ndarray] = []
        self.win_busy: list[float] = []
        self.next_arrival = 0
        self.active = np.zeros(0, dtype=int)
        self.refresh_active()
        self.events = 0
        self.busy_integral = 0.0

    def _quotas(self) -> np.ndarray:
        """Tenant quotas (eq. 6): the trace's, else equal shares of the cluster."""
        if self.scenario.quotas:
            return np.array([float(self.scenario.quotas.get(t, 0.0)) for t in self.trace.tenant_names])
        if self.trace.tenant_quota is not None and abs(self.trace.tenant_quota.sum() - self.M) < 0.5:
            return self.trace.tenant_quota.astype(float)
        if self.trace.tenant_quota is not None:
            q = self.trace.tenant_quota.astype(float)
            return q * self.M / q.sum()
        return np.full(self.T, self.M / self.T)

    # --- time --------------------------------------------------------------------------

    def refresh_active(self) -> None:
        """Recompute what depends on the set of active jobs (arrivals, ends): the fair shares
        of eqs. 8, 13 and 14 are constant until it changes."""
        self.active = np.flatnonzero((self.status == PENDING) | (self.status == RUNNING))
        act = self.active
        tenants = self.trace.tenant[act]
        demand = self.trace.gpus[act].astype(float)
        tenant_demand = np.bincount(tenants, weights=demand, minlength=self.T)
        tenant_jobs = np.bincount(tenants, minlength=self.T)
        self._fair_tenant = np.minimum(tenant_demand, self.quota)  # eq. 8
        # eq. 13 with equal job weights, capped by the job's demand (eq. 14)
        share = self._fair_tenant[tenants] / np.maximum(tenant_jobs[tenants], 1)
        self._fair_rate = np.minimum(demand, share)
        self.refresh_running()

    def refresh_running(self) -> None:
        """Recompute what depends on the set of running jobs (decisions, ends)."""
        run = self.active[self.status[self.active] == RUNNING]
        self.running = run
        self._held = self.held[run]
        self._busy = float(self._held.sum())
        self._tenant_held = np.bincount(self.trace.tenant[run], weights=self._held, minlength=self.T)
        self._run_type = self.run_type[run]
        self._resume = self.resume_at[run]
        self._rate = self.rate[run]
        self._resuming = bool((self._resume > self.now).any())

    def advance(self, t: float) -> None:
        """Progress running jobs and accumulate fairness integrals from ``now`` to ``t``."""
        while t > self.now + EPS:
            w = int(self.now // self.window)
            end = min(t, (w + 1) * self.window)
            self._segment(self.now, end, w)
            self.now = end
        self.now = max(self.now, t)

    def _segment(self, t0: float, t1: float, w: int) -> None:
        dt = t1 - t0
        while len(self.win_alloc) <= w:
            self.win_alloc.append(np.zeros(self.T))
            self.win_fair.append(np.zeros(self.T))
            self.win_busy.append(0.0)
        act = self.active
        if len(act) == 0:
            return
        self.active_integral += dt * len(act)
        run = self.running
        if len(run):
            if self._resuming:
                effective = np.clip(t1 - np.maximum(t0, self._resume), 0.0, dt)
                self.left[run] -= self._rate * effective
                self._resuming = bool((self._resume > t1).any())
            else:
                self.left[run] -= self._rate * dt
            self.run_time[run] += dt
            self.attained[run] += self._held * dt
            if not self.scheduler.fluid:
                self.time_on_type[run, self._run_type] += dt
            busy = self._busy * dt
            self.busy_integral += busy
            self.win_busy[w] += busy
            tenant_held = self._tenant_held * dt
            self.tenant_alloc += tenant_held
            self.win_alloc[w] += tenant_held
        fair_tenant = self._fair_tenant
        self.tenant_fair += fair_tenant * dt
        self.tenant_fair_quota += self.quota * dt
        self.win_fair[w] += fair_tenant * dt
        self.fair_job[act] += self._fair_rate * dt

    # --- changes -----------------------------------------------------------------------

    def admit_arrivals(self) -> bool:
        submit = self.trace.submit
        start = self.next_arrival
        while self.next_arrival < self.n and submit[self.next_arrival] <= self.now + EPS:
            self.next_arrival += 1
        if self.next_arrival == start:
            return False
        new = np.arange(start, self.next_arrival)
        self.status[new] = PENDING
        self.active_at_arrival[new] = self.active_integral
        self.events += len(new)
        return True

    def finish_jobs(self) -> bool:
        run = self.running
        done = run[self.left[run] <= 1e-9 * np.maximum(self.trace.steps[run], 1.0)]
        for m in done:
            self.status[m] = DONE
            self.finish[m] = self.now
            self.active_at_finish[m] = self.active_integral
            self.left[m] = 0.0
            self.rate[m] = 0.0
            self.held[m] = 0.0
            self.lease_end[m] = np.inf
            alloc = self.alloc.pop(int(m), None)
            if alloc:
                self.cluster.give_back(alloc)
        self.events += len(done)
        return len(done) > 0

    def next_completion(self) -> float:
        run = self.running
        if len(run) == 0:
            return math.inf
        rate = self._rate
        with np.errstate(divide="ignore"):
            ends = np.maximum(self._resume, self.now) + np.where(rate > 0, self.left[run] / rate, np.inf)
        return float(ends.min())

    def decide(self) -> None:
        """One scheduling decision at ``now`` (Astraea §5.1.2 steps 1-3)."""
        sched = self.scheduler
        if sched.fluid:
            sched.decide_fluid(self)
            self.refresh_running()
            self.events += 1
            return
        act = self.active
        running = self.running
        expiring = running[self.lease_end[running] <= self.now + EPS]
        pending = act[self.status[act] == PENDING]
        gpus = self.trace.gpus
        if sched.renews_when_nothing_fits and (len(self.cluster.types) == 1 or not self.cluster.free.any()) and (
                len(pending) == 0
                or gpus[pending].min() > self.cluster.free.sum() + gpus[expiring].sum()):
            # No waiting job could take any GPU even if every expiring lease were revoked, and no
            # faster free type tempts a running job: every renewal succeeds in place (what the
            # full decision would do, without its cost).
            self.lease_end[expiring] = self.now + sched.lease
            self.events += 1
            return
        renewing = np.zeros(self.n, dtype=bool)
        renewing[expiring] = True
        for m in expiring:
            alloc = self.alloc[int(m)]
            self.cluster.give_back(alloc)
            for s, c in alloc:
                self.cluster.reserved[s] += c
        candidates = np.concatenate([pending, expiring])
        candidates.sort()
        decision = Decision(self, candidates, renewing)
        if len(candidates):
            sched.decide(decision)
        self.cluster.reserved[:] = 0
        self.events += 1
        for m in expiring:
            m = int(m)
            if m not in decision.placed:
                self._stop(m)
        trace = self.trace
        for m, (j, alloc, consolidated) in decision.placed.items():
            old = self.alloc.get(m)
            if renewing[m] and old is alloc:
                self.lease_end[m] = self.now + sched.lease
                continue
            if renewing[m]:  # moved: checkpoint and restart elsewhere
                self._stop(m)
            self.status[m] = RUNNING
            self.alloc[m] = alloc
            self.run_type[m] = j
            self.consolidated[m] = consolidated
            self.rate[m] = trace.throughput[m, j] if consolidated else trace.throughput_unconsolidated[m, j]
            self.held[m] = trace.gpus[m]
            self.lease_end[m] = self.now + sched.lease
            if self.ever_ran[m]:
                self.resume_at[m] = self.now + self.scenario.checkpoint_s
                self.overhead[m] += self.scenario.checkpoint_s
            else:
                self.resume_at[m] = self.now
                self.ever_ran[m] = True
                self.first_start[m] = self.now
        self.refresh_running()

    def _stop(self, m: int) -> None:
        """Preempt m: its GPUs were already handed back at the start of the decision."""
        self.alloc.pop(m, None)
        self.status[m] = PENDING
        self.rate[m] = 0.0
        self.held[m] = 0.0
        self.run_type[m] = -1
        self.lease_end[m] = np.inf
        self.preemptions[m] += 1

    def grid(self, t: float) -> float:
        step = self.scheduler.interval
        if step <= 0:
            return t
        return math.ceil(t / step - 1e-9) * step

    def run(self, until: float = math.inf, progress: Callable[[float, float], None] | None = None) -> None:
        """Run to the end of the trace (or ``until`` seconds); ``progress(now, until)`` after
        every step (what a time limit checks: :meth:`fleetplan.sim.engine.SimulatorSpec.run`)."""
        sched = self.scheduler
        sched.start(self)
        if self.n == 0:
            return
        step = sched.interval
        decision_at = self.grid(float(self.trace.submit[0]))
        last_decision = -math.inf
        while True:
            if progress is not None:
                progress(self.now, until)
            t_done = self.next_completion()
            t = min(t_done, decision_at)
            if t == math.inf or t > until:
                if until < math.inf:
                    self.advance(until)
                break
            self.advance(t)
            finished = t_done <= t + EPS and self.finish_jobs()
            if finished:
                self.refresh_active()
            decided = decision_at <= t + EPS
            if decided:
                if self.admit_arrivals():
                    self.refresh_active()
                self.decide()
                last_decision = self.now
            if self.next_arrival >= self.n and len(self.active) == 0:
                break
            trigger = float(self.trace.submit[self.next_arrival]) if self.next_arrival < self.n else math.inf
            if finished and not decided and (sched.fluid or (self.status[self.active] == PENDING).any()):
                trigger = self.now  # freed GPUs matter only to waiting jobs (or a fluid re-solve)
            if len(self.running) and sched.lease < math.inf:
                trigger = min(trigger, float(self.lease_end[self.running].min()))
            decision_at = self.grid(trigger) if trigger < math.inf else math.inf
            if decision_at <= last_decision + EPS:
                decision_at = last_decision + step if step > 0 else self.now + EPS
            if decision_at == math.inf and self.next_completion() == math.inf:
                break  # nothing will ever change: jobs that can never be placed
