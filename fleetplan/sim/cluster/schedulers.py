"""Schedulers of the cluster simulator other than Gavel: Astraea and the baselines it is compared
with (Astraea §6.1.5), plus plain FIFO.

* ``fifo`` - non-preemptive, strict arrival order (head-of-line blocking), each job on the
  fastest type with room.
* ``yarn-cs`` - YARN capacity scheduler: static tenant quotas, FIFO inside each tenant (a job
  larger than its tenant's quota may run when the tenant runs nothing else, or it would wait
  forever).
* ``tiresias-las`` - Tiresias' discretised 2D-LAS: attained service in GPU-seconds sorts jobs
  into queues (thresholds ``tiresias_thresholds``, 3,250 and 7,200 GPU-s as in Tiresias's own
  simulator), preemptive at lease ends; a job that does not fit is skipped (Tiresias §4; no
  starvation promotion). Inside a queue the order is Tiresias's code's (``tiresias_order``
  ``"tiresias"``, the default): a new job joins the tail of the first queue, a demoted job the
  tail of the next, and after every pass the jobs left waiting move behind the running ones,
  so a job that was passed over does not preempt the jobs that ran in its place.
  ``"submit"`` orders each queue by submit time instead (fleetplan's earlier model).
* ``themis-ftf`` - Themis finish-time fairness as Astraea §6.1.5 runs it: at every lease end the
  jobs with the worst estimated rho = T_shared / (N * T_alone) (Astraea §4.1.2) get GPUs first;
  remaining time is estimated from the requested steps with a lognormal error of
  ``themis_error`` (canceled and failed jobs are estimated from the steps they asked for).
* ``astraea`` - Astraea's two-phase LTGF scheduler (Algorithms 1-2): the tenant with the lowest
  rho^tenant (eq. 12, with eq. 16's fair share = quota, as §6.1.1 runs it) is served first,
  then its job with the lowest rho^job (eq. 15), newly submitted jobs first (§6.1.1);
  ``astraea-eq8`` uses eq. 8's fair share min(demand, quota) in phase 1 instead.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim.cluster.engine import Decision, Scheduler


class FifoScheduler(Scheduler):
    name = "fifo"

    def __init__(self, scenario, trace, seed):
        super().__init__(scenario, trace, seed)
        self.lease = np.inf

    def decide(self, decision: Decision) -> None:
        sim = decision.sim
        cands = decision.candidates
        for m in cands[np.lexsort((cands, sim.trace.submit[cands]))]:
            if not self.fastest_fitting(decision, int(m)):
                break


class YarnCapacityScheduler(Scheduler):
    name = "yarn-cs"

    def __init__(self, scenario, trace, seed):
        super().__init__(scenario, trace, seed)
        self.lease = np.inf

    def decide(self, decision: Decision) -> None:
        sim = decision.sim
        tenant = sim.trace.tenant
        run = sim.active[sim.held[sim.active] > 0]
        used = np.bincount(tenant[run], weights=sim.held[run], minlength=sim.T)
        blocked = np.zeros(sim.T, dtype=bool)
        cands = decision.candidates
        for m in cands[np.lexsort((cands, sim.trace.submit[cands]))]:
            m = int(m)
            k = tenant[m]
            if blocked[k]:
                continue
            g = sim.trace.gpus[m]
            fits_quota = used[k] + g <= sim.quota[k] + 1e-9 or used[k] == 0
            if fits_quota and self.fastest_fitting(decision, m):
                used[k] += g
            else:
                blocked[k] = True


class TiresiasScheduler(Scheduler):
    name = "tiresias-las"

    def __init__(self, scenario, trace, seed):
        super().__init__(scenario, trace, seed)
        self.thresholds = np.array(sorted(scenario.tiresias_thresholds), dtype=float)
        self.order = scenario.tiresias_order
        # Tiresias's queues: job ids in queue order, and each known job's queue.
        self.queues: list[list[int]] = [[] for _ in range(len(self.thresholds) + 1)]
        self.level: dict[int, int] = {}

    def decide(self, decision: Decision) -> None:
        if self.order == "submit":
            self._decide_by_submit(decision)
        else:
            self._decide_tiresias(decision)

    def _decide_by_submit(self, decision: Decision) -> None:
        sim = decision.sim
        cands = decision.candidates
        queue = np.searchsorted(self.thresholds, sim.attained[cands], side="right")
        free = decision.free_total()
        for m in cands[np.lexsort((cands, sim.trace.submit[cands], queue))]:
            g = sim.trace.gpus[m]
            if g <= free and self.fastest_fitting(decision, int(m)):
                free -= g
                if free == 0:
                    break

    def _update_queues(self, sim) -> None:
        """Tiresias's bookkeeping before a pass: ended jobs leave, new jobs join the tail of the
        first queue (in arrival order), jobs past a threshold join the tail of their new queue."""
        active = sim.active
        alive = set(active.tolist())
        for q, members in enumerate(self.queues):
            if any(m not in alive for m in members):
                self.queues[q] = [m for m in members if m in alive]
        for m in self.level.keys() - alive:
            del self.level[m]
        levels = np.searchsorted(self.thresholds, sim.attained[active], side="right")
        for m, q in zip(active.tolist(), levels.tolist(), strict=True):
            old = self.level.get(m)
            if old is None:
                self.level[m] = q
                self.queues[q].append(m)
            elif q > old:
                self.queues[old].remove(m)
                self.level[m] = q
                self.queues[q].append(m)

    def _decide_tiresias(self, decision: Decision) -> None:
        sim = decision.sim
        self._update_queues(sim)
        candidate = set(decision.candidates.tolist())
        free = decision.free_total()
        gpus = sim.trace.gpus
        for members in self.queues:
            for m in members:
                if free <= 0:
                    break
                if m in candidate and gpus[m] <= free and self.fastest_fitting(decision, m):
                    free -= gpus[m]
        # Jobs left waiting move behind the running ones (Tiresias's dlas loop, after each pass).
        running = set(decision.placed) | {m for m in sim.running.tolist() if m not in candidate}
        for q, members in enumerate(self.queues):
            self.queues[q] = [m for m in members if m in running] + [m for m in members if m not in running]


class ThemisScheduler(Scheduler):
    name = "themis-ftf"

    def __init__(self, scenario, trace, seed):
        super().__init__(scenario, trace, seed)
        rng = np.random.default_rng([seed, 4411])
        sigma = float(scenario.themis_error)
        self.estimate = trace.steps_requested * rng.lognormal(0.0, sigma, len(trace)) if sigma > 0 \
            else trace.steps_requested.astype(float)
        self.fastest = trace.throughput.max(axis=1)

    def rho(self, sim, jobs: np.ndarray) -> np.ndarray:
        """Estimated finish-time fairness rho = T_shared / (N * T_alone) (Astraea §4.1.2)."""
        done = sim.trace.steps[jobs] - sim.left[jobs]
        remaining = np.maximum(self.estimate[jobs] - done, 0.0) / self.fastest[jobs]
        alone = np.maximum(self.estimate[jobs], done) / self.fastest[jobs]
        shared = sim.now - sim.trace.submit[jobs] + remaining
        return shared / (max(len(sim.active), 1) * np.maximum(alone, 1e-9))

    def decide(self, decision: Decision) -> None:
        sim = decision.sim
        cands = decision.candidates
        rho = self.rho(sim, cands)
        free = decision.free_total()
        for m in cands[np.lexsort((cands, -rho))]:
            g = sim.trace.gpus[m]
            if g <= free and self.fastest_fitting(decision, int(m)):
                free -= g
                if free == 0:
                    break


class AstraeaScheduler(Scheduler):
    name = "astraea"
    tenant_share = "quota"  # eq. 16; "demand" is eq. 8

    def decide(self, decision: Decision) -> None:
        sim = decision.sim
        free = decision.free_total()
        cands = decision.candidates
        gpus = sim.trace.gpus
        cands = cands[gpus[cands] <= free]
        if len(cands) == 0:
            return
        tenant = sim.trace.tenant[cands]
        # Algorithm 2: reward = -rho^job (eq. 15); newly submitted jobs first (§6.1.1)
        rho_job = sim.attained[cands] / np.maximum(sim.fair_job[cands], 1e-9)
        new = ~sim.ever_ran[cands]
        key = np.where(new, sim.trace.submit[cands], rho_job)
        order = np.lexsort((cands, key, ~new, tenant))
        cands, tenant = cands[order], tenant[order]
        bounds = np.searchsorted(tenant, np.arange(sim.T + 1)).tolist()
        queue = cands.tolist()
        demand = gpus[cands].tolist()
        pointer, end = bounds[:-1], bounds[1:]
        fair = sim.tenant_fair_quota if self.tenant_share == "quota" else sim.tenant_fair
        fair = np.maximum(fair, 1e-9).tolist()
        alloc = sim.tenant_alloc.tolist()
        rho = [a / f for a, f in zip(alloc, fair, strict=True)]  # eq. 12
        live = [p for p in range(sim.T) if pointer[p] < end[p]]
        lease = min(self.lease, 1e12)
        single_type = len(sim.trace.worker_types) == 1
        while free > 0 and live:
            p = min(live, key=rho.__getitem__)  # Phase 1 (ties: lowest tenant index)
            k = pointer[p]  # Phase 2: the tenant's best job
            pointer[p] = k + 1
            g = demand[k]
            if g <= free:
                m = queue[k]
                placed = decision.place(m, 0) if single_type else self.fastest_fitting(decision, m)
                if placed:
                    free -= g
                    alloc[p] += g * lease  # Algorithm 1 lines 14-15
                    rho[p] = alloc[p] / fair[p]
            if pointer[p] >= end[p]:
                live.remove(p)


class AstraeaEq8Scheduler(AstraeaScheduler):
    name = "astraea-eq8"
    tenant_share = "demand"
