"""The ParSync simulator: N schedulers over a shared cluster state (ParSync §4.3, §5, §6).

Each scheduler keeps a local copy of the slot state (``free`` or ``taken``), refreshed from the
master either whole every G (StateSync) or one partition at a time every G/P (ParSync: DiffSyn,
scheduler i starting from partition i*P/N; SameSyn, the ablation of §5.2: all from partition 0).
A scheduler takes a batch, spends ``decision_time`` per task choosing slots in its local view
(marking them taken there), then commits them to the master, which grants each request whose
slot is free and rejects the rest, in FIFO order (one FIFO queue per master partition when
``master_time_ms > 0``). Rejected tasks are rescheduled; the next batch starts only when the
whole batch is committed. A granted slot stays busy for the task's duration; its release
reaches a local view only through a later synchronisation, which is exactly the staleness the
paper studies.

The simulation is event-driven (:class:`~fleetplan.sim.engine.EventQueue`), vectorised per
batch (no Python loop per slot or per task) and deterministic for a seed.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import numpy as np

from fleetplan.sim.engine import EventQueue, SimResult
from fleetplan.sim.parsync.report import build_result
from fleetplan.sim.parsync.scenario import Scenario, parse_scheduler

#: sigma of the 'production' lognormal task duration: with mean 5 s, 88% of tasks end within
#: 10 s, close to §2's Figure 1b (87%).
PRODUCTION_SIGMA = 1.0

Progress = Callable[[float, float], None]

#: Quality-first samples a partition by rejection (see ``_Run._weighted_by_rejection``) when the
#: free slots of its view hold at least this share of its weight and number at least
#: REJECTION_MIN_SLACK x the tasks; otherwise by Efraimidis-Spirakis keys over its free slots.
REJECTION_MIN_SHARE = 0.05
REJECTION_MIN_SLACK = 4


class _Run:
    """The state of one simulation: numpy arrays for slots, Python lists for per-scheduler scalars."""

    def __init__(self, sc: Scenario, sync: str, strategy: str, seed: int) -> None:
        self.sc, self.sync, self.strategy = sc, sync, strategy
        self.rng = np.random.default_rng(seed)
        S, P, N = sc.slots, sc.partitions, sc.schedulers
        self.S, self.P, self.N, self.ps = S, P, N, S // P
        # slots: quality, sampling weight, preference (the top preferred_share of scores)
        self.score = self.rng.normal(sc.score_mean, math.sqrt(sc.score_variance), S)
        self.weight = np.maximum(self.score, 1e-9) ** sc.score_power
        cut = np.quantile(self.score, 1.0 - sc.preferred_share) if sc.preferred_share < 1 else -np.inf
        self.preferred = self.score >= cut
        self.busy_until = np.zeros(S)                      # master state
        self.local_free = np.ones((N, S), dtype=bool)      # every scheduler's view
        self.free_count = np.full((N, P), self.ps, dtype=np.int64)
        part_scores = self.score.reshape(P, self.ps).sum(axis=1)
        self.score_sum = np.tile(part_scores, (N, 1))
        self.last_sync = np.zeros((N, P))
        self.rows = np.arange(N)
        # weighted sampling by rejection (see sample): each partition's cumulative weights, and
        # the weight of the slots free in each scheduler's view, kept like score_sum
        self.track_score = strategy in ("quality-first", "adaptive")   # only they read score_sum
        self.track_weight = self.track_score and sc.score_power > 0
        weight3 = self.weight.reshape(P, self.ps)
        self.cumw = np.cumsum(weight3, axis=1)
        self.weight_sum = np.tile(weight3.sum(axis=1), (N, 1))
        # master FIFO queues
        self.mps = S // sc.master_partitions
        self.master_free = np.zeros(sc.master_partitions)
        # schedulers
        self.queue: list[deque[float]] = [deque() for _ in range(N)]
        self.busy = [False] * N
        self.starved: set[int] = set()
        self.cur_submit = [0.0] * N
        self.cur_left = [0] * N
        self.cur_stet = [0.0] * N
        self.cur_finish = [0.0] * N
        self.round_granted = [0] * N
        self.awaiting = [0] * N
        self.first_commit = [True] * N
        self.ema = [0.0] * N
        self.submitted = [0] * N
        self.committed = [0] * N
        # time of the load profile
        self.plen = sc.duration_s / len(sc.phases)
        self.end_time = sc.duration_s + sc.drain_s
        self.dt = sc.metrics_interval_s
        self.nb = int(math.ceil(self.end_time / self.dt - 1e-9))
        nb = self.nb
        self.b_granted = np.zeros((nb, N))
        self.b_conflicts = np.zeros((nb, N))
        self.b_preferred = np.zeros((nb, N))
        self.b_score = np.zeros((nb, N))
        self.b_delay = np.zeros((nb, N))
        self.b_backlog = np.full((nb, N), np.nan)
        self.b_util = np.full(nb, np.nan)
        self.b_submitted = np.zeros(nb)
        self.records: list[tuple[int, int, float, int]] = []   # (bucket, scheduler, delay, tasks)
        self.jobs: list[tuple[float, float, float, float]] = []  # (submit, JSD, JCT, STET)
        self.decisions = 0
        self.quality_decisions = 0
        self.first_round_conflicts = 0
        self.last_commit = 0.0
        # staleness (§5.1): time-integral, min and max of each scheduler's average staleness
        self.as_int = np.zeros(N)
        self.as_min = np.full(N, np.inf)
        self.as_max = np.zeros(N)
        self.as_from = -1.0
        self.as_last = 0.0
        self.events = 0

    # -- load ---------------------------------------------------------------------------------
    def load(self, t: float, i: int) -> float:
        """Scheduler i's load at t (group A of §5.2's Figure 4 follows ``phases_a``)."""
        phases = self.sc.phases_a if i < self.sc.schedulers_a else self.sc.phases
        return phases[min(int(t / self.plen), len(phases) - 1)]

    def interval(self, load: float) -> float:
        """Seconds between two batches of one scheduler at this load."""
        return self.sc.batch_size * self.N / (self.sc.rate * load)

    # -- local views -------------------------------------------------------------------------
    def sync_partitions(self, parts: np.ndarray, t: float) -> None:
        """Scheduler i refreshes partition parts[i] of its view.

        Each distinct partition is read from the master once, all of them in one (u, S/P)
        pass; the copy into the views is a loop over schedulers on purpose (each row a view of
        1/P of the state, where one (N, S/P) fancy-indexed assignment measured 3x slower).
        No BLAS here: a float-bool ``@`` of a 20,000-slot partition ran OpenBLAS's threads,
        which spun on the shared cores (5x the CPU of the whole run at Figure 3's scale)."""
        ps = self.ps
        uniq, inv = np.unique(parts, return_inverse=True)
        busy = self.busy_until.reshape(self.P, ps)
        segs = (busy if uniq.size == self.P else busy[uniq]) <= t
        self.free_count[self.rows, parts] = np.count_nonzero(segs, axis=1)[inv]
        if self.track_score:
            self.score_sum[self.rows, parts] = self._free_sums(self.score, uniq, segs)[inv]
        if self.track_weight:
            self.weight_sum[self.rows, parts] = self._free_sums(self.weight, uniq, segs)[inv]
        for i, (p, j) in enumerate(zip(parts.tolist(), inv.tolist(), strict=True)):
            self.local_free[i, p * ps:(p + 1) * ps] = segs[j]
        self.last_sync[self.rows, parts] = t

    def _free_sums(self, values: np.ndarray, parts: np.ndarray, free: np.ndarray) -> np.ndarray:
        """Per partition in ``parts``, the sum of ``values`` over its slots free in ``free``.

        A product and a row sum, not ``@`` or einsum: these give the sums the earlier ``@`` gave
        (bit for bit on the regression scenarios), so published runs reproduce."""
        values = values.reshape(self.P, self.ps)
        return ((values if parts.size == self.P else values[parts]) * free).sum(axis=1)

    def sync_all(self, t: float) -> None:
        free = self.busy_until <= t
        self.local_free[:] = free
        self.free_count[:] = free.reshape(self.P, self.ps).sum(axis=1)
        if self.track_score:
            self.score_sum[:] = (self.score * free).reshape(self.P, self.ps).sum(axis=1)
        if self.track_weight:
            self.weight_sum[:] = (self.weight * free).reshape(self.P, self.ps).sum(axis=1)
        self.last_sync[:] = t

    def take(self, i: int, slots: np.ndarray) -> None:
        """Mark slots taken in scheduler i's view (by its own request or by someone else)."""
        row = self.local_free[i]   # a row view: 1-D fancy indexing is the fast path
        row[slots] = False
        parts = slots // self.ps
        self.free_count[i] -= np.bincount(parts, minlength=self.P)
        if self.track_score:
            self.score_sum[i] -= np.bincount(parts, weights=self.score[slots], minlength=self.P)
        if self.track_weight:
            self.weight_sum[i] -= np.bincount(parts, weights=self.weight[slots], minlength=self.P)

    def sample(self, i: int, a: int, b: int, n_free: int, k: int, weighted: bool) -> np.ndarray:
        """Up to k distinct locally free slots in [a, b): uniform, or by weight without replacement."""
        seg = self.local_free[i, a:b]
        if n_free <= k:
            return a + np.flatnonzero(seg)
        if weighted and self.sc.score_power > 0:
            p = a // self.ps
            share = self.weight_sum[i, p] / self.cumw[p, -1]
            if share >= REJECTION_MIN_SHARE and REJECTION_MIN_SLACK * k <= n_free:
                return a + self._weighted_by_rejection(seg, p, share, k)
            idx = np.flatnonzero(seg)
            # Efraimidis-Spirakis: the k smallest Exp(1)/w are a weighted sample without replacement
            keys = self.rng.exponential(size=idx.size) / self.weight[a + idx]
            return a + idx[np.argpartition(keys, k - 1)[:k]]
        density = n_free / (b - a)
        if density >= 0.02:
            # rejection sampling avoids scanning a mostly free range
            cand = self.rng.integers(0, b - a, int(k / density * 1.5) + 16)
            cand = cand[seg[cand]][: 2 * k]   # duplicates are rare: dedupe a short prefix only
            _, first = np.unique(cand, return_index=True)
            if first.size >= k:
                first.sort()
                return a + cand[first[:k]]
        return a + self.rng.choice(np.flatnonzero(seg), k, replace=False)

    def _weighted_by_rejection(self, seg: np.ndarray, p: int, share: float, k: int) -> np.ndarray:
        """k distinct free slots of partition p (offsets), drawn by weight without replacement.

        Draws from the partition's fixed weights (a binary search in its cumulative weights)
        and keeps, in draw order, the first k distinct draws that are free in the view: an
        i.i.d. sequence restricted to the free slots, whose first k distinct values are a
        successive (weighted, without replacement) sample, the same distribution as the
        Efraimidis-Spirakis keys, at O(k / share) instead of O(slots in the partition).
        """
        cw = self.cumw[p]
        total = cw[-1]
        kept = np.empty(0, dtype=np.int64)
        need = k
        while True:
            draws = np.searchsorted(cw, self.rng.random(int(need / share * 1.25) + 16) * total,
                                    side="right")
            np.minimum(draws, self.ps - 1, out=draws)   # u * total rounding up to total
            kept = np.concatenate((kept, draws[seg[draws]]))
            _, first = np.unique(kept, return_index=True)
            if first.size >= k:
                first.sort()
                return kept[first[:k]]
            need = k - first.size

    def pick(self, i: int, k: int, strategy: str) -> np.ndarray:
        """The slots scheduler i requests for k tasks (§4.1 random, §5.2 Latency-/Quality-first)."""
        fc = self.free_count[i]
        if strategy == "random":
            return self.sample(i, 0, self.S, int(fc.sum()), k, weighted=False)
        if strategy == "latency-first":
            # freshest partition first; ties (StateSync) in random order
            order = np.lexsort((self.rng.random(self.P), -self.last_sync[i]))
            weighted = False
        else:
            mean = np.where(fc > 0, self.score_sum[i] / np.maximum(fc, 1), -np.inf)
            order = np.argsort(-mean, kind="stable")
            weighted = True
        out: list[np.ndarray] = []
        need = k
        for p in order.tolist():
            n = int(fc[p])
            if n == 0:
                continue
            got = self.sample(i, p * self.ps, (p + 1) * self.ps, n, need, weighted)
            out.append(got)
            need -= got.size
            if need == 0:
                break
        return np.concatenate(out) if out else np.empty(0, dtype=np.int64)

    # -- scheduler life cycle ------------------------------------------------------------------
    def start(self, i: int, t: float, q: EventQueue) -> None:
        """Decide the rest of the current batch, or take the next one, or go idle."""
        if self.cur_left[i] == 0:
            if not self.queue[i]:
                self.busy[i] = False
                return
            self.cur_submit[i] = self.queue[i].popleft()
            self.cur_left[i] = self.sc.batch_size
            self.cur_stet[i] = 0.0
            self.cur_finish[i] = 0.0
        self.busy[i] = True
        strategy = self.strategy
        if strategy == "adaptive":
            strategy = "quality-first" if self.ema[i] < self.sc.tau_s else "latency-first"
        factor = self.sc.quality_scan_factor if strategy == "quality-first" else 1.0
        self.decisions += 1
        self.quality_decisions += strategy == "quality-first"
        q.push(t + self.cur_left[i] * self.sc.decision_time_ms * 1e-3 * factor, "decided", (i, strategy))

    def decided(self, t: float, payload: tuple[int, str], q: EventQueue) -> None:
        i, strategy = payload
        slots = self.pick(i, self.cur_left[i], strategy)
        if slots.size == 0:
            self.starved.add(i)   # nothing free in its view: retry after its next synchronisation
            return
        self.take(i, slots)
        self.round_granted[i] = 0
        if self.sc.master_time_ms == 0:
            self.awaiting[i] = 1
            self.resolve(t, (i, slots), q)
            return
        groups = slots // self.mps
        order = np.argsort(groups, kind="stable")
        groups, slots = groups[order], slots[order]
        cuts = np.flatnonzero(np.diff(groups)) + 1
        self.awaiting[i] = cuts.size + 1
        for g, part in zip(groups[np.r_[0, cuts]].tolist(), np.split(slots, cuts), strict=True):
            done = max(t, self.master_free[g]) + part.size * self.sc.master_time_ms * 1e-3
            self.master_free[g] = done
            q.push(done, "master", (i, part))

    def resolve(self, t: float, payload: tuple[int, np.ndarray], q: EventQueue) -> None:
        """The master grants each request whose slot is free now, rejects the rest."""
        i, slots = payload
        free = self.busy_until[slots] <= t
        granted = slots[free]
        n, g = slots.size, granted.size
        b = min(int(t / self.dt), self.nb - 1)
        if self.first_commit[i]:
            self.first_round_conflicts += n - g
        self.b_conflicts[b, i] += n - g
        if g:
            if self.sc.task_duration == "fixed":
                dur = np.broadcast_to(self.sc.task_duration_s, (g,))
            else:
                mu = math.log(self.sc.task_duration_s) - PRODUCTION_SIGMA**2 / 2
                dur = self.rng.lognormal(mu, PRODUCTION_SIGMA, g)
            pref = self.preferred[granted]
            if self.sc.alpha < 1:
                dur = np.where(pref, dur * self.sc.alpha, dur)
            self.busy_until[granted] = t + dur
            stale = granted[self.local_free[i][granted]]   # a sync while the request queued
            if stale.size:
                self.take(i, stale)
            delay = t - self.cur_submit[i]
            self.b_granted[b, i] += g
            self.b_preferred[b, i] += np.count_nonzero(pref)
            self.b_score[b, i] += self.score[granted].sum()
            self.b_delay[b, i] += delay * g
            self.records.append((b, i, delay, g))
            self.cur_stet[i] += float(dur.sum())
            self.cur_finish[i] = max(self.cur_finish[i], t + float(dur.max()))
            self.round_granted[i] += g
            self.committed[i] += g
            self.last_commit = t
            a = self.sc.ema_alpha
            self.ema[i] = delay if self.ema[i] == 0 else (1 - a) * self.ema[i] + a * delay
        self.awaiting[i] -= 1
        if self.awaiting[i]:
            return
        self.first_commit[i] = False
        self.cur_left[i] -= self.round_granted[i]
        if self.cur_left[i] == 0:
            s = self.cur_submit[i]
            self.jobs.append((s, t - s, self.cur_finish[i] - s, self.cur_stet[i]))
        self.start(i, t, q)

    # -- the clock -------------------------------------------------------------------------------
    def sync_tick(self, t: float, k: int, q: EventQueue) -> None:
        if self.as_from < 0 and t >= self.sc.sync_gap_s - 1e-12:
            self.as_from = self.as_last = t
        if self.as_from >= 0:
            before = t - self.last_sync.mean(axis=1)
            span = t - self.as_last
            self.as_int += (before - span / 2) * span   # AS grows with slope 1 between ticks
            self.as_max = np.maximum(self.as_max, before)
            self.as_last = t
        if self.sync == "statesync":
            self.sync_all(t)
        else:
            step = self.P // self.N if self.sync == "parsync" else 0
            self.sync_partitions((self.rows * step + k) % self.P, t)
        if self.as_from >= 0:
            self.as_min = np.minimum(self.as_min, t - self.last_sync.mean(axis=1))
        for i in sorted(self.starved):
            self.starved.discard(i)
            self.start(i, t, q)
        gap = self.sc.sync_gap_s if self.sync == "statesync" else self.sc.sync_gap_s / self.P
        q.push((k + 1) * gap, "sync", k + 1)

    def arrive(self, t: float, i: int, q: EventQueue) -> None:
        load = self.load(t, i)
        if load > 0:
            self.queue[i].append(t)
            self.submitted[i] += self.sc.batch_size
            self.b_submitted[min(int(t / self.dt), self.nb - 1)] += self.sc.batch_size
            if not self.busy[i]:
                self.start(i, t, q)
            nxt = t + self.interval(load)
        else:
            nxt = (int(t / self.plen) + 1) * self.plen
        if nxt < self.sc.duration_s - 1e-12:
            q.push(nxt, "arrive", i)

    def sample_tick(self, t: float, b: int, q: EventQueue) -> None:
        self.b_util[b] = np.count_nonzero(self.busy_until > t) / self.S
        self.b_backlog[b] = [len(self.queue[i]) * self.sc.batch_size + self.cur_left[i]
                             for i in range(self.N)]
        if b + 1 < self.nb:
            q.push((b + 2) * self.dt, "sample", b + 1)

    def drained(self, t: float) -> bool:
        return t >= self.sc.duration_s and sum(self.committed) == sum(self.submitted)

    def run(self, progress: Progress | None) -> float:
        q = EventQueue()
        self.sync_all(0.0)
        for i in range(self.N):
            first = self.load(0.0, i)
            offset = self.interval(first) / self.N if first > 0 and self.sc.stagger else 0.0
            q.push(i * offset, "arrive", i)
        gap = self.sc.sync_gap_s if self.sync == "statesync" else self.sc.sync_gap_s / self.P
        q.push(gap, "sync", 1)
        q.push(self.dt, "sample", 0)
        handlers = {"arrive": self.arrive, "decided": self.decided, "master": self.resolve,
                    "sync": self.sync_tick, "sample": self.sample_tick}
        t = 0.0
        next_report = 0.0
        while q and q.peek_time() <= self.end_time:
            t, kind, payload = q.pop()
            handlers[kind](t, payload, q)
            self.events += 1
            if progress is not None and t >= next_report:
                progress(t, self.end_time)
                next_report = t + 1.0
            if kind in ("decided", "master", "sample") and self.drained(t):
                break
        if self.as_from >= 0 and t > self.as_last:
            span = t - self.as_last
            self.as_int += (t - self.last_sync.mean(axis=1) - span / 2) * span
            self.as_last = t
        if progress is not None:
            progress(t, self.end_time)
        return t


def simulate(scenario: Scenario, scheduler: str, seed: int = 0, *,
             progress: Progress | None = None) -> SimResult:
    """Simulate ``scenario`` with ``scheduler`` = ``SYNC-STRATEGY`` (ParSync §4.3, §5.2, §6).

    SYNC is ``statesync`` (whole state every G), ``parsync`` (DiffSyn: one partition every G/P,
    scheduler i from partition i*P/N) or ``samesyn`` (all schedulers the same partition);
    STRATEGY is ``latency-first``, ``quality-first``, ``adaptive`` (EMA of delay vs tau) or
    ``random`` (§4.1's uniform baseline). ``progress(t, end)`` is called about once per
    simulated second.
    """
    sync, strategy = parse_scheduler(scheduler)
    scenario.check_sync(sync)
    run = _Run(scenario, sync, strategy, seed)
    end = run.run(progress)
    return build_result(run, scheduler, seed, end)
