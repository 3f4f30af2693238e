"""The Regional ML Scheduler's greedy bin-packer (MAST, OSDI 2024, §4.3): ``rms-greedy``.

For each pending workload in GMS order (one GMS pass, §4.2), and for each of its jobs, RMS
computes a placement plan in every ML dynamic cluster of the region and keeps the cluster with
the best score (exhaustive search, §1/§4.3):

1. *Without preemption*: the cluster's free machines of the job's hardware type, sorted by rack,
   are allocated in a batch of the same or nearby racks — the run of consecutive racks spanning
   the fewest rack numbers that holds every task, the roomiest on ties — and inside it the machines
   with the most free resources first, so the fewest machines are used.
2. *With preemption*, when the free machines are short: running jobs of lower priority than the
   workload that hold machines of the cluster are scanned from the lowest priority and, within a
   priority, the longest running, until the resources they would free plus the free ones hold
   the job; the scanned jobs are then re-sorted by size, largest first, and the shortest prefix
   of that order that still frees enough is preempted — §4.3's example: a job needs 10 GPUs,
   the scan finds jobs freeing 4, 5 and 12; only the 12 goes.
3. *Score* (§4.3): no preemption beats any preemption; then fewer preempted jobs of the highest
   priority level, and so on down (lower priorities preferred); then older jobs (newly started
   ones are spared). Ties go to fewer machines, then fewer racks. The workload's score is the
   sum of its jobs'. The exact order is the tuple ``key`` below; the number the judge reports
   is :func:`fleetplan.instances.binpack.preemption_cost`.
4. *Negative cache* (§4.3): when a job cannot be placed anywhere, its scheduling properties
   (hardware type, the workload's priority) are stored with its size (per-task GPUs, CPU cores,
   memory, tasks); a later job with the same properties and a size at least as large in each
   fails at once. The cache lives for one GMS pass (one solve). A failure stays a failure while
   placements only take resources away from the failed job's priority; a placement that preempts
   for a higher priority can leave free what the lower priority could not preempt, so it drops
   the entries of lower priorities (in GMS order, highest priority first, there are none). The
   hit rate is reported.

A workload is all or nothing: if one of its jobs fails, the tentative placements of the others
are undone and the workload waits. Per-machine work is numpy over the cluster's machine arrays;
the Python loops are over clusters, jobs and candidate jobs' prefix sums only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from fleetplan.instances.binpack import (
    PRIORITY_LEVELS,
    RESOURCES,
    TOLERANCE,
    UNPLACED_COST,
    BinpackInstance,
    BinpackPlan,
    JobPlacement,
    WorkloadPlacement,
    level_weight,
    tasks_that_fit,
    youth,
)
from fleetplan.solvers import warm
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.deadline import Deadline

_NEVER = np.iinfo(np.int64).max


@dataclass
class JobOption:
    """One job's plan in one cluster: machines (rows), tasks on each, running jobs preempted."""

    cluster: int
    rows: np.ndarray
    tasks: np.ndarray
    preempted: np.ndarray
    key: tuple
    cost: float


@dataclass
class NegativeCache:
    """Failed job sizes of one GMS pass (§4.3): "if it later attempts to allocate a job of the
    same or larger size, the cache signals that the allocation will fail".

    Keyed by the properties that decide where a job may go and whom it may preempt (hardware
    type, the workload's priority, preemption on or off); each key keeps the minimal failed sizes
    (per-task GPUs, CPU cores, memory, and tasks). A job at least as large in all four as a failed
    one cannot fit either: every placement of it would hold the smaller job.
    """

    failed: dict[tuple, np.ndarray] = field(default_factory=dict)
    lookups: int = 0
    hits: int = 0

    def hit(self, shape: tuple, size: np.ndarray) -> bool:
        self.lookups += 1
        known = self.failed.get(shape)
        if known is not None and bool((size >= known).all(axis=1).any()):
            self.hits += 1
            return True
        return False

    def add(self, shape: tuple, size: np.ndarray) -> None:
        known = self.failed.get(shape)
        if known is None:
            self.failed[shape] = size[None, :].copy()
            return
        # Keep the frontier: drop the sizes the new failure is at most as large as.
        keep = ~(known >= size).all(axis=1)
        self.failed[shape] = np.vstack([known[keep], size[None, :]])

    def clear(self) -> None:
        """Start a new GMS pass (the counters are kept)."""
        self.failed.clear()

    def preempted_for(self, priority: int) -> None:
        """A workload of ``priority`` preempted running jobs: what they held and it left free is
        now open to workloads of lower priority that could not preempt them, so their entries
        go. (In GMS order — highest priority first — no such entry exists yet.)"""
        for shape in [shape for shape in self.failed if shape[1] > priority]:
            del self.failed[shape]

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0


def option_key(counts: np.ndarray, youth_sum: float, machines: int, racks: int) -> tuple:
    """The score order of §4.3 as a tuple (smaller is better)."""
    return (*counts.tolist(), round(youth_sum, 12), machines, racks)


class RegionState:
    """What RMS knows of the region during one pass: free resources and live running jobs."""

    def __init__(self, instance: BinpackInstance, layout: RegionState | None = None):
        a = self.arrays = instance.arrays()
        self.instance = instance
        if layout is None:
            self._layout(a)
        else:  # the machines' grouping only: the same machines, clusters, types and racks
            for name in ("groups", "group_keys", "group_index", "machine_group", "group_take", "group_racks",
                         "hw_layout"):
                setattr(self, name, getattr(layout, name))
        self._running(a)

    def refreshed(self, instance: BinpackInstance) -> RegionState:
        """A state of ``instance`` — a region with these machines (ids, clusters, hardware, racks:
        capacities, holdings and running jobs may differ) — that keeps this state's grouping of
        the machines, the part that does not change between calls of a scheduler (MAST calls RMS
        once per workload, :class:`fleetplan.embed.BinpackSession`)."""
        return RegionState(instance, layout=self)

    def same_machines(self, instance: BinpackInstance) -> bool:
        """Whether ``instance`` has this state's machines in the same rows: same clusters,
        hardware types and racks (what :meth:`refreshed` keeps)."""
        a, b = self.arrays, instance.arrays()
        return (a.cluster_ids == b.cluster_ids and a.hardware_ids == b.hardware_ids
                and all(x is y or np.array_equal(x, y) for x, y in (
                    (a.machine_cluster, b.machine_cluster), (a.machine_hardware, b.machine_hardware),
                    (a.machine_rack, b.machine_rack))))

    def _layout(self, a) -> None:
        """The machines grouped by (cluster, hardware type), rack by rack."""
        order = np.lexsort((a.machine_rack, a.machine_hardware, a.machine_cluster))
        keys = a.machine_cluster[order] * max(len(a.hardware_ids), 1) + a.machine_hardware[order]
        bounds = np.flatnonzero(np.diff(keys)) + 1
        self.groups: dict[tuple[int, int], np.ndarray] = {}
        for rows in np.split(order, bounds):
            if rows.size:
                self.groups[(int(a.machine_cluster[rows[0]]), int(a.machine_hardware[rows[0]]))] = rows
        group_of_machine = np.full(a.num_machines, -1, dtype=np.int64)
        self.group_keys = list(self.groups)
        for g, key in enumerate(self.group_keys):
            group_of_machine[self.groups[key]] = g
        self.group_index = {key: g for g, key in enumerate(self.group_keys)}
        self.machine_group = group_of_machine
        # Static per-group layout: a slice when the group's rows are contiguous (generated
        # regions are stored cluster by cluster, rack by rack) so reading free room is a view;
        # rack boundaries and numbers for the rack-batched allocation.
        self.group_take: dict[tuple[int, int], slice | np.ndarray] = {}
        self.group_racks: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        for key, rows in self.groups.items():
            contiguous = rows[-1] - rows[0] + 1 == rows.size and bool((np.diff(rows) == 1).all())
            self.group_take[key] = slice(int(rows[0]), int(rows[-1]) + 1) if contiguous else rows
            racks = a.machine_rack[rows]
            starts = np.concatenate([[0], np.flatnonzero(np.diff(racks)) + 1])
            self.group_racks[key] = (starts, racks[starts])
        self.hw_layout = {hw: self._hw_layout(hw) for hw in {key[1] for key in self.groups}}

    def _running(self, a) -> None:
        """Free resources and the running jobs (what preemption may take), per machine and group."""
        self.free = a.free.copy()
        self.alive = np.ones(a.num_running, dtype=bool)
        self.youth = youth(a.running_age)
        # Holding rows on each group's machines, to find preemption candidates fast.
        hold_group = self.machine_group[a.hold_machine]
        order_h = np.argsort(hold_group, kind="stable")
        counts = np.bincount(hold_group, minlength=len(self.group_keys)) if hold_group.size else \
            np.zeros(len(self.group_keys), dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(counts)])
        self.group_holdings = {key: order_h[ptr[g]:ptr[g + 1]] for g, key in enumerate(self.group_keys)}
        # Per group: free resources, and what live running jobs hold per priority level. They
        # rule clusters out before any per-machine work (a necessary condition only).
        self.group_free = np.zeros((len(self.group_keys), 3))
        np.add.at(self.group_free, self.machine_group, self.free)
        self.group_held = np.zeros((len(self.group_keys), PRIORITY_LEVELS, 3))
        np.add.at(self.group_held, (hold_group, a.running_priority[a.hold_job]), a.hold_amount)
        # Scratch index arrays, reset after each use (allocating them per call costs more).
        self._local = np.full(a.num_machines, -1, dtype=np.int64)
        self._rank = np.full(a.num_running, -1, dtype=np.int64)

    def _hw_layout(self, hw: int) -> dict:
        """One hardware type's machines as one array, cluster by cluster, rack by rack, with the
        group and rack boundaries: the whole no-preemption search for a job is then a fixed
        number of numpy calls, whatever the number of clusters."""
        keys = [key for key in self.group_index if key[1] == hw]
        rows = np.concatenate([self.groups[key] for key in keys])
        sizes = np.array([self.groups[key].size for key in keys])
        group_start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        rack_start = np.concatenate([self.group_racks[key][0] + offset for key, offset in zip(keys, group_start,
                                                                                               strict=True)])
        rack_number = np.concatenate([self.group_racks[key][1] for key in keys])
        racks_per_group = np.array([self.group_racks[key][0].size for key in keys])
        rack_group = np.repeat(np.arange(len(keys)), racks_per_group)
        group_rack_end = np.cumsum(racks_per_group)
        return {"keys": keys, "rows": rows, "group_start": group_start, "rack_start": rack_start,
                "group_first_rack": np.concatenate([[0], np.cumsum(racks_per_group)[:-1]]),
                "rack_number": rack_number, "rack_group": rack_group,
                "rack_end": group_rack_end[rack_group], "machines": rows.size}

    def free_option(self, hw: int, demand: np.ndarray, tasks: int) -> JobOption | None:
        """The best plan without preemption over every cluster at once (§4.3's exhaustive search
        with the rack-batched allocation of :meth:`allocate`, vectorised over clusters; ties go
        to the first cluster, as in a loop over them)."""
        layout = self.hw_layout.get(hw)
        if layout is None:
            return None
        need = demand * tasks - TOLERANCE
        if not any((self.group_free[self.group_index[key]] >= need).all() for key in layout["keys"]):
            return None  # no cluster has the free resources in total (most attempts, when full)
        fit = tasks_that_fit(self.free[layout["rows"]], demand)
        if not (np.add.reduceat(fit, layout["group_start"]) >= tasks).any():
            return None
        starts, number = layout["rack_start"], layout["rack_number"]
        n = starts.size
        rack_cap = np.add.reduceat(fit, starts)
        cum = np.concatenate([[0], np.cumsum(rack_cap)])
        ends = np.searchsorted(cum, cum[:-1] + tasks, side="left")
        valid = ends <= layout["rack_end"]  # a window stays inside its cluster
        clipped = np.minimum(ends, n)
        length = np.where(valid, number[clipped - 1] - number, _NEVER)
        room = np.where(valid, cum[clipped] - cum[:-1], -1)
        group = layout["rack_group"]
        # Per cluster, the window of fewest rack numbers, then most room, then first: one
        # integer key per window and a minimum per cluster (cheaper than sorting every rack).
        top = int(room.max()) + 2
        span = int(np.where(valid, length, 0).max()) + 1
        if span * top * n < 2 ** 62:
            key = np.where(valid, (np.where(valid, length, 0) * top + (top - 1 - room)) * n + np.arange(n), _NEVER)
            per_group = np.minimum.reduceat(key, layout["group_first_rack"])
            first = (per_group[per_group < _NEVER] % n).astype(np.int64)
        else:  # keys too wide for int64: sort instead
            order = np.lexsort((-room, length, group))
            first = order[np.concatenate([[True], group[order][1:] != group[order][:-1]])]
            first = first[valid[first]]
        lo = starts[first]
        hi = np.where(ends[first] < n, starts[np.minimum(ends[first], n - 1)], layout["machines"])
        sizes = hi - lo
        window = np.repeat(np.arange(first.size), sizes)
        position = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))
        ordered = np.lexsort((-fit[position], window))  # roomiest first inside each window
        position, window = position[ordered], window[ordered]
        f = fit[position]
        before = np.cumsum(f) - f
        before -= np.repeat(before[np.concatenate([[0], np.cumsum(sizes)[:-1]])], sizes)
        take = np.minimum(f, np.maximum(0, tasks - before))
        keep = take > 0
        machines = np.bincount(window[keep], minlength=first.size)
        rack = self.arrays.machine_rack[layout["rows"][position[keep]]]
        pairs = np.unique(window[keep] * (int(rack.max()) + 1) + rack)
        racks = np.bincount(pairs // (int(rack.max()) + 1), minlength=first.size)
        best = int(np.lexsort((np.arange(first.size), racks, machines))[0])
        mine = keep & (window == best)
        cluster = layout["keys"][int(group[first[best]])][0]
        return self._finish(cluster, (layout["rows"][position[mine]], take[mine]), np.zeros(0, dtype=np.int64))

    # --- the two steps of §4.3 ----------------------------------------------------------------
    def allocate(self, key: tuple[int, int], free: np.ndarray, demand: np.ndarray, tasks: int
                 ) -> tuple[np.ndarray, np.ndarray] | None:
        """Rack-batched allocation of ``tasks`` on group ``key``'s machines (sorted by rack) with
        ``free`` (rows, 3): the run of consecutive racks spanning the fewest rack numbers that
        fits (the roomiest on ties), then the roomiest machines first."""
        fit = tasks_that_fit(free, demand)
        if int(fit.sum()) < tasks:
            return None
        rows = self.groups[key]
        starts, number = self.group_racks[key]
        rack_cap = np.add.reduceat(fit, starts)
        cum = np.concatenate([[0], np.cumsum(rack_cap)])
        ends = np.searchsorted(cum, cum[:-1] + tasks, side="left")  # window [i, ends[i]) in racks
        valid = ends <= len(rack_cap)
        # Nearby racks: the window spanning the fewest rack numbers.
        length = np.where(valid, number[np.minimum(ends, len(rack_cap)) - 1] - number, _NEVER)
        room = np.where(valid, cum[np.minimum(ends, len(rack_cap))] - cum[:-1], -1)
        best = np.lexsort((-room, length))[0] if len(rack_cap) > 1 else 0
        lo = starts[best]
        hi = starts[ends[best]] if ends[best] < len(starts) else len(rows)
        window_fit = fit[lo:hi]
        roomy = np.argsort(-window_fit, kind="stable")
        ordered = window_fit[roomy]
        take = np.minimum(ordered, np.maximum(0, tasks - (np.cumsum(ordered) - ordered)))
        keep = take > 0
        return rows[lo:hi][roomy[keep]], take[keep]

    def _prefix_fit(self, jobs: np.ndarray, rows: np.ndarray, local: np.ndarray, free: np.ndarray,
                    demand: np.ndarray, hold: np.ndarray, hold_rank: np.ndarray) -> np.ndarray:
        """Tasks that fit on ``rows`` after preempting the first k of ``jobs``, for k = 0..len."""
        a = self.arrays
        base = tasks_that_fit(free, demand)
        totals = np.zeros(len(jobs) + 1, dtype=np.int64)
        totals[:] = base.sum()
        if hold.size == 0:
            return totals
        where = local[a.hold_machine[hold]]
        order = np.lexsort((hold_rank, where))
        where, rank, amount = where[order], hold_rank[order], a.hold_amount[hold[order]]
        first = np.concatenate([[True], where[1:] != where[:-1]])
        cum = np.cumsum(amount, axis=0)
        group_start = np.maximum.accumulate(np.where(first, np.arange(len(where)), 0))
        before = np.concatenate([np.zeros((1, 3)), cum[:-1]])
        freed = cum - before[group_start]
        after_fit = tasks_that_fit(free[where] + freed, demand)
        before_fit = np.where(first, base[where], np.concatenate([[0], after_fit[:-1]]))
        delta = np.bincount(rank, weights=after_fit - before_fit, minlength=len(jobs))
        totals[1:] += np.cumsum(delta).astype(np.int64)
        return totals

    def best_option(self, hw: int, demand: np.ndarray, tasks: int, priority: int,
                    preemption: bool) -> JobOption | None:
        """The job's best plan over every cluster (§4.3's exhaustive search), or None.

        A plan without preemption beats any plan with it, so clusters are first tried with free
        machines only; preemption is computed only when no cluster fits without it.
        """
        need = demand * tasks - TOLERANCE
        groups = [(c, g) for (c, h), g in self.group_index.items() if h == hw]
        best = self.free_option(hw, demand, tasks)
        if best is not None or not preemption:
            return best
        # Per cluster, the highest-priority level it must preempt from, by the totals: with
        # room(L) = free + what levels L..6 hold, a plan must preempt a job of level <= L* where
        # L* is the largest L with room(L) >= need. Clusters are tried from the largest L*; once
        # the best plan preempts nothing at levels <= L* of a cluster, that cluster cannot beat it.
        candidates = []
        for c, g in groups:
            room = self.group_free[g] + np.cumsum(self.group_held[g, ::-1], axis=0)[::-1]  # room[L]
            enough = [L for L in range(priority + 1, PRIORITY_LEVELS) if (room[L] >= need).all()]
            if enough:
                candidates.append((-max(enough), c))
        for negative_level, c in sorted(candidates):
            if best is not None and not any(best.key[:1 - negative_level]):
                break
            option = self.option(c, hw, demand, tasks, priority, preemption=True)
            if option is not None and (best is None or option.key < best.key):
                best = option
        return best

    def option(self, cluster: int, hw: int, demand: np.ndarray, tasks: int, priority: int,
               preemption: bool) -> JobOption | None:
        """The job's plan in ``cluster`` (§4.3), or None when it cannot fit even with preemption."""
        a = self.arrays
        rows = self.groups.get((cluster, hw))
        if rows is None:
            return None
        free = self.free[self.group_take[(cluster, hw)]]
        got = self.allocate((cluster, hw), free, demand, tasks)
        none = np.zeros(0, dtype=np.int64)
        if got is not None:
            return self._finish(cluster, got, none)
        if not preemption:
            return None
        hold = self.group_holdings[(cluster, hw)]
        hold = hold[self.alive[a.hold_job[hold]] & (a.running_priority[a.hold_job[hold]] > priority)]
        if hold.size == 0:
            return None
        jobs = np.unique(a.hold_job[hold])
        # Scan order: lowest priority first, then longest running.
        jobs = jobs[np.lexsort((-a.running_age[jobs], -a.running_priority[jobs]))]
        local, rank_of = self._local, self._rank
        local[rows] = np.arange(rows.size)
        try:
            rank_of[jobs] = np.arange(jobs.size)
            totals = self._prefix_fit(jobs, rows, local, free, demand, hold, rank_of[a.hold_job[hold]])
            enough = np.flatnonzero(totals >= tasks)
            if enough.size == 0:
                return None
            scanned = jobs[: enough[0]]
            # Re-sort the scanned jobs by size, largest first (stable: scan order on ties).
            column = 0 if demand[0] > 0 else (1 if demand[1] > 0 else 2)
            hold_rank = rank_of[a.hold_job[hold]]
            in_scan = hold_rank < scanned.size
            hold = hold[in_scan]
            size = np.bincount(hold_rank[in_scan], weights=a.hold_amount[hold, column], minlength=scanned.size)
            by_size = scanned[np.argsort(-size, kind="stable")]
            rank_of[by_size] = np.arange(by_size.size)
            hold_rank = rank_of[a.hold_job[hold]]
            totals = self._prefix_fit(by_size, rows, local, free, demand, hold, hold_rank)
            keep = int(np.flatnonzero(totals >= tasks)[0])
            chosen = by_size[:keep]
            mine = hold[hold_rank < keep]
            free = free.copy()
            np.add.at(free, local[a.hold_machine[mine]], a.hold_amount[mine])
        finally:
            local[rows] = -1
            rank_of[jobs] = -1
        got = self.allocate((cluster, hw), free, demand, tasks)
        assert got is not None  # the prefix sums said it fits
        return self._finish(cluster, got, np.sort(chosen))

    def _finish(self, cluster: int, got: tuple[np.ndarray, np.ndarray], preempted: np.ndarray) -> JobOption:
        a = self.arrays
        rows, take = got
        counts = np.bincount(a.running_priority[preempted], minlength=PRIORITY_LEVELS)
        youth_sum = float(self.youth[preempted].sum())
        racks = len(np.unique(a.machine_rack[rows]))
        cost = float(level_weight(a.running_priority[preempted]).sum()) + youth_sum
        return JobOption(cluster, rows, take, preempted, option_key(counts, youth_sum, len(rows), racks), cost)

    # --- applying and undoing -----------------------------------------------------------------
    def apply(self, option: JobOption, demand: np.ndarray) -> None:
        self._free_preempted(option.preempted, +1.0)
        used = option.tasks[:, None] * demand[None, :]
        np.subtract.at(self.free, option.rows, used)
        np.subtract.at(self.group_free, self.machine_group[option.rows], used)

    def undo(self, option: JobOption, demand: np.ndarray) -> None:
        used = option.tasks[:, None] * demand[None, :]
        np.add.at(self.free, option.rows, used)
        np.add.at(self.group_free, self.machine_group[option.rows], used)
        self._free_preempted(option.preempted, -1.0)

    def _free_preempted(self, jobs: np.ndarray, sign: float) -> None:
        """Preempt (``sign`` +1) or restore (-1) running jobs: their holdings become free."""
        if jobs.size == 0:
            return
        a = self.arrays
        self.alive[jobs] = sign < 0
        rows = a.holdings_of(jobs)
        amount = sign * a.hold_amount[rows]
        np.add.at(self.free, a.hold_machine[rows], amount)
        group = self.machine_group[a.hold_machine[rows]]
        np.add.at(self.group_free, group, amount)
        np.subtract.at(self.group_held, (group, a.running_priority[a.hold_job[rows]]), amount)

    def shortfall(self, hw: int, demand: np.ndarray, tasks: int, priority: int, preemption: bool) -> str:
        """Which resource falls short for a job, in the cluster that comes closest."""
        a = self.arrays
        best = None
        for (cluster, h), g in self.group_index.items():
            if h != hw:
                continue
            room = self.group_free[g].copy()
            if preemption:
                room += self.group_held[g, priority + 1:].sum(axis=0)
            need = demand * tasks
            ratio = np.where(need > 0, room / np.where(need > 0, need, 1.0), np.inf)
            worst = int(np.argmin(ratio))
            if best is None or ratio[worst] > best[0]:
                best = (ratio[worst], cluster, worst, room[worst], need[worst])
        if best is None:
            return f"no machine of hardware type '{a.hardware_ids[hw]}' in the region"
        ratio, cluster, r, room, need = best
        with_what = "free or preemptible" if preemption else "free"
        if ratio < 1:
            return (f"{RESOURCES[r]} fall short: the best cluster '{a.cluster_ids[cluster]}' has {room:g} "
                    f"{with_what} for {need:g} needed")
        return (f"fragmentation: cluster '{a.cluster_ids[cluster]}' has enough {with_what} resources in total, "
                f"but not {tasks} tasks' worth on whole machines")


@dataclass
class WorkloadOutcome:
    placed: bool
    options: list[JobOption | None]
    reason: str = ""
    cache_hit: bool = False

    @property
    def cost(self) -> float:
        return sum(o.cost for o in self.options if o is not None)


def place_workload(state: RegionState, w: int, *, preemption: bool = True,
                   cache: NegativeCache | None = None) -> WorkloadOutcome:
    """RMS for one workload (§4.3): each job in its best cluster, all or nothing; applied to
    ``state`` when placed."""
    instance = state.instance
    workload = instance.workloads[w]
    hw_index = {h: i for i, h in enumerate(instance.hardware_types)}
    applied: list[tuple[JobOption, np.ndarray]] = []
    for j, job in enumerate(workload.jobs):
        demand = instance.job_demand(w, j)
        hw = hw_index[job.hardware]
        shape = (hw, workload.priority, preemption)
        size = np.append(demand, job.tasks)
        if cache is not None and cache.hit(shape, size):
            for option, d in reversed(applied):
                state.undo(option, d)
            return WorkloadOutcome(False, [], reason=f"job '{job.id}': negative cache hit (a job no "
                                   "larger failed earlier in the pass)", cache_hit=True)
        best = state.best_option(hw, demand, job.tasks, workload.priority, preemption)
        if best is None:
            for option, d in reversed(applied):
                state.undo(option, d)
            alone = j == 0 or state.best_option(hw, demand, job.tasks, workload.priority, preemption) is None
            if cache is not None and alone:
                cache.add(shape, size)
            return WorkloadOutcome(False, [], reason=f"job '{job.id}': " + state.shortfall(
                hw, demand, job.tasks, workload.priority, preemption))
        state.apply(best, demand)
        applied.append((best, demand))
    if cache is not None and any(option.preempted.size for option, _ in applied):
        cache.preempted_for(workload.priority)
    return WorkloadOutcome(True, [option for option, _ in applied])


def to_plan(instance: BinpackInstance, outcomes: dict[int, WorkloadOutcome]) -> BinpackPlan:
    """The plan file of per-workload outcomes (workloads not in ``outcomes`` wait)."""
    a = instance.arrays()
    entries = []
    for w, workload in enumerate(instance.workloads):
        outcome = outcomes.get(w)
        if outcome is None or not outcome.placed:
            reason = outcome.reason if outcome is not None else "not attempted (time limit)"
            entries.append(WorkloadPlacement(workload=workload.id, placed=False, reason=reason))
            continue
        jobs = [JobPlacement(job=spec.id, cluster=a.cluster_ids[o.cluster],
                             machines=[a.machine_ids[r] for r in o.rows.tolist()], tasks=o.tasks.tolist(),
                             preempted=[a.running_ids[r] for r in o.preempted.tolist()])
                for spec, o in zip(workload.jobs, outcome.options, strict=True)]
        entries.append(WorkloadPlacement(workload=workload.id, placed=True, jobs=jobs, score=outcome.cost))
    return BinpackPlan(workloads=entries)


def plan_cost(instance: BinpackInstance, outcomes: dict[int, WorkloadOutcome]) -> float:
    """The objective the solver computed itself (the judge recomputes it)."""
    unplaced = sum(1 for w in range(len(instance.workloads)) if not (w in outcomes and outcomes[w].placed))
    return sum(o.cost for o in outcomes.values() if o.placed) + unplaced * UNPLACED_COST


def status_of(instance: BinpackInstance, outcomes: dict[int, WorkloadOutcome], exact: bool,
              timed_out: bool) -> tuple[str, str]:
    """Status and message: ``infeasible`` when no workload could be placed at all."""
    placed = sum(1 for o in outcomes.values() if o.placed)
    waiting = [f"{instance.workloads[w].id} ({o.reason})" for w, o in outcomes.items() if not o.placed]
    message = f"{placed} of {len(instance.workloads)} workloads placed"
    if waiting:
        message += "; waiting: " + "; ".join(waiting[:5]) + (" ..." if len(waiting) > 5 else "")
    if timed_out:
        return "time_limit", message + "; stopped at the time limit"
    if placed == 0:
        return "infeasible", message
    return ("optimal" if exact else "feasible"), message


@register("binpack", "rms-greedy", exact=False, default=True,
          description="MAST's Regional ML Scheduler: per job and cluster, rack-batched allocation, "
                      "preemption scan (lowest priority, longest running, then largest first), "
                      "exhaustive search over clusters, negative cache",
          reference="Choudhury et al., MAST, OSDI 2024, §4.3")
def rms_greedy(instance: BinpackInstance, *, time_limit: float | None = None, seed: int = 0,
               threads: int = 1, progress: Progress, preemption: bool = True,
               negative_cache: bool = True) -> SolveResult:
    """Place the pending workloads one at a time in GMS order, as RMS does (§4.3).

    Parameters
    ----------
    preemption : bool
        Allow preempting running jobs of lower priority when free machines are short.
    negative_cache : bool
        Skip jobs whose shape already failed in this pass (§4.3's negative cache).

    Examples
    --------
    >>> import fleetplan
    >>> instance = fleetplan.generate("binpack", {"clusters": 2, "machines": 16}, seed=0)
    >>> fleetplan.solve(instance, "rms-greedy").evaluation.violations
    []
    """
    deadline = Deadline(time_limit)
    # A scheduler calling once per workload (fleetplan.embed.BinpackSession) hands over the
    # grouping of the region's machines it kept from the last call (fleetplan.solvers.warm).
    key = warm.slot("binpack-layout")
    layout = warm.take(key)
    state = RegionState(instance) if layout is None or not layout.same_machines(instance) else layout.refreshed(instance)
    warm.give(key, state)
    cache = NegativeCache() if negative_cache else None
    outcomes: dict[int, WorkloadOutcome] = {}
    timed_out = False
    latency = []
    for w in range(len(instance.workloads)):
        if deadline.expired():
            timed_out = True
            break
        started, started_cpu = time.perf_counter(), time.process_time()
        outcomes[w] = place_workload(state, w, preemption=preemption, cache=cache)
        latency.append((time.perf_counter() - started, time.process_time() - started_cpu))
        progress((w + 1) / len(instance.workloads), f"workload {w + 1} of {len(instance.workloads)}")
    plan = to_plan(instance, outcomes)
    status, message = status_of(instance, outcomes, exact=False, timed_out=timed_out)
    stats = {"placed": float(sum(o.placed for o in outcomes.values()))}
    if latency:  # §5.4 reports RMS latency per workload; CPU time too, as machines are shared
        wall, cpu = np.array(latency).T * 1e3
        stats.update(latency_median_ms=float(np.median(wall)), latency_p95_ms=float(np.percentile(wall, 95)),
                     latency_cpu_median_ms=float(np.median(cpu)), latency_cpu_p95_ms=float(np.percentile(cpu, 95)))
    if cache is not None:
        stats.update(cache_lookups=float(cache.lookups), cache_hits=float(cache.hits), cache_hit_rate=cache.hit_rate)
        message += f"; negative cache: {cache.hits} hits of {cache.lookups} lookups"
    model_objective = plan_cost(instance, outcomes)
    return SolveResult(status=status, plan=plan, model_objective=model_objective, message=message,
                       log=[message], stats=stats)


# The exact solvers (cpsat, mip-highs, batch-cpsat) register when this module does; they build
# on the classes above, so they are imported last. Their back-ends load only when they run.
from fleetplan.solvers.binpack import exact as binpack_exact  # noqa: E402,F401
