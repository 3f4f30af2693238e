"""The Tetris hill climber's incremental view of a placement (MAST §3.4).

:class:`TetrisState` holds the tables' homes, every job's region R(job), the GPU demand per
(region, type, priority), bytes and CPU per region, and the high-priority GPU-hours trained at
home. Moving one table changes R(job) only for the jobs reading it, so a move's gain is computed
from those jobs alone — for *all* candidate regions at once with numpy — plus the two regions'
storage shares and the GPU slices those jobs touch. A move must keep the hard constraints
(storage, CPU, Expression 6); the daily byte quota is the engine's budget. Only recurring jobs
count (Tetris plans for them, §3.1).

The instance's readings of Figure 4 are followed exactly: under
``split_ml_demand="largest_region"`` each job's *demand region* (``dregion``: R(job), or a split
ML job's largest region) is tracked beside R(job) and the GPU terms move with it; under
``overload_form="combined_high_priority"`` Expression 8 is computed on ``odemand``, the demand
with the high levels summed per (region, type) (column ``ocell`` of a job), with its own slice
weights. Under the defaults ``dregion`` *is* ``region`` and ``odemand`` *is* ``demand`` (the same
arrays), so the default path runs the code it ran before.
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.placement import (
    ML,
    NO_REGION,
    PRIORITY_LEVELS,
    PlacementInstance,
)
from fleetplan.instances.placement.evaluate import (
    TOLERANCE,
    combine_high,
    combined_weights,
    cross_region_bytes,
    demand_regions,
    gpu_demand,
    job_regions,
    sigmoid,
)
from fleetplan.solvers import kernels
from fleetplan.solvers.hill_climb import Candidate
from fleetplan.solvers.placement.climb.estimates import estimate
from fleetplan.solvers.placement.climb.first_pass import largest_with

TERMS = ("traffic", "gpu_balance", "gpu_overload", "storage_balance")


class TetrisState:
    """Incremental cost of a table placement, for :func:`~fleetplan.solvers.hill_climb.hill_climb`.

    >>> import fleetplan
    >>> instance = fleetplan.generate("placement", {"regions": 4, "tables": 60, "jobs": 60}, seed=2)
    >>> state = TetrisState(instance)
    >>> move = state.best_move(0)
    >>> move is None or move.gain > -float("inf")
    True
    """

    def __init__(self, instance: PlacementInstance, home: np.ndarray | None = None, compound: bool = False):
        a = self.arrays = instance.arrays()
        self.home = (a.table_home if home is None else np.asarray(home)).astype(np.int64).copy()
        self.original = a.table_home
        self.region = job_regions(a, self.home)
        # Where each job's GPU demand counts (the same array as region under the default).
        self.split_counted = a.split_ml_demand == "largest_region"
        self.dregion = demand_regions(a, self.home, self.region)
        self.num_types = len(a.gpu_types)
        self.demand = gpu_demand(a, self.dregion).reshape(a.num_regions, -1)  # (R, G*P)
        # How many jobs with GPU-hours make up each demand cell: a cell whose jobs all left is
        # set to exactly 0, since (x + h) - h leaves a residue of ~1e-15 that would count as a
        # region with demand (share 1) and make a move and its reverse both look profitable.
        self.cell = a.job_gpu_type * PRIORITY_LEVELS + a.job_priority
        self.counted = a.planned & (a.job_kind == ML) & (a.job_gpu_hours > 0)
        placed_ml = self.counted & (self.dregion >= 0)
        self.demand_count = np.zeros(self.demand.shape, dtype=np.int64)
        np.add.at(self.demand_count, (self.dregion[placed_ml], self.cell[placed_ml]), 1)
        self.supply = np.repeat(a.gpu_supply, PRIORITY_LEVELS, axis=1)  # (R, G*P)
        self.supply_share = self.supply / np.where(self.supply.sum(0) > 0, self.supply.sum(0), 1.0)
        self.slice_weight = np.tile(a.w_priority, self.num_types)
        self.combined = a.overload_form == "combined_high_priority"
        if self.combined:  # Expression 8's own demand columns (evaluate.overload_slices)
            shape = (a.num_regions, self.num_types, PRIORITY_LEVELS)
            first = int(np.flatnonzero(a.high_priority)[0]) if a.high_priority.any() else 0
            self.ocell = np.where(a.high_priority[a.job_priority], a.job_gpu_type * PRIORITY_LEVELS + first, self.cell)
            self.odemand = combine_high(self.demand.reshape(shape), a.high_priority).reshape(a.num_regions, -1)
            self.odemand_count = combine_high(self.demand_count.reshape(shape), a.high_priority).reshape(
                a.num_regions, -1)
            self.overload_weight = np.tile(combined_weights(a.w_priority, a.high_priority), self.num_types)
        else:
            self.ocell, self.odemand, self.odemand_count = self.cell, self.demand, self.demand_count
            self.overload_weight = self.slice_weight
        self.slice_balance, self.slice_overload = self._all_slice_costs()
        self.home_bytes = np.bincount(self.home, weights=a.table_size, minlength=a.num_regions).astype(float)
        self.capacity_share = a.storage_capacity / max(a.storage_capacity.sum(), 1e-300)
        self.total_bytes = max(float(a.table_size.sum()), 1e-300)
        planned = a.planned
        # Planned readers of each table (CSR), and each job's bytes and pairs.
        readers = a.table_jobs
        keep = planned[readers]
        table_of_reader = np.repeat(np.arange(a.num_tables), np.diff(a.table_ptr))
        counts = np.bincount(table_of_reader[keep], minlength=a.num_tables)
        self.reader_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.readers = readers[keep]
        self.job_bytes = np.add.reduceat(a.table_size[a.job_tables], a.job_ptr[:-1]) if a.num_jobs else np.zeros(0)
        self.pair_size = a.table_size[a.job_tables]
        hp = a.high_priority_ml
        self.hp = hp
        self.hp_total = float(a.job_gpu_hours[hp].sum())
        self.hp_at_home = float(a.job_gpu_hours[hp & self._at_home(np.arange(a.num_jobs), self.region)].sum())
        self.hp_floor = a.home_training_threshold * self.hp_total - TOLERANCE * max(self.hp_total, 1.0)
        placed = planned & (self.region >= 0)
        cpu = np.zeros((len(a.app_ids), a.num_regions))
        np.add.at(cpu, (a.job_app[placed], self.region[placed]), a.job_cpu_hours[placed])
        self.cpu = cpu
        self.objective_terms = self.terms()
        self.last_changed = np.zeros(0, dtype=np.int64)
        # The last table's candidates and the state version they were computed in: applying
        # the move just evaluated reuses them (the state is the same, so are they).
        self.version = 0
        self.cached: tuple[int, int, tuple] | None = None
        self.num_tables = a.num_tables
        # Each table's values as the batch estimates last computed them (estimates._Entry); a
        # move forgets those of its readers' tables, and marks in slice_changed the version at
        # which each demand column (GPU slice) last changed, so the GPU terms over it are
        # recomputed.
        self.pair_cache: dict[int, object] = {}
        # The compiled estimates' kept tables (gain_kernels._kept): each table's slot, -1 once
        # forgotten as its pair_cache entry would be; None until they run.
        self.kernel_slots: np.ndarray | None = None
        self.slice_changed = np.zeros(self.demand.shape[1], dtype=np.int64)
        # Compound items (after the tables): planned ML jobs reading several tables; while
        # a job is split, its item moves all its tables to one region with its GPU type
        # (one table at a time, a split job's every single move looks bad).
        multi = a.planned & (a.job_kind == ML) & (np.diff(a.job_ptr) > 1) if compound else np.zeros(a.num_jobs, bool)
        self.compound_jobs = np.flatnonzero(multi)
        self.compound_item = np.full(a.num_jobs, -1, dtype=np.int64)
        self.compound_item[self.compound_jobs] = a.num_tables + np.arange(self.compound_jobs.size)
        # The engine's quota bound of every item, read for every popped queue entry (a list of
        # Python floats, kept current by apply): a table at its original home uses its size
        # wherever it goes; one already moved may go back and free it; compound moves: no bound.
        self.sizes: list[float] = a.table_size.tolist()
        self.min_costs: list[float] = np.where(self.home != self.original, -a.table_size, a.table_size).tolist() \
            + [-np.inf] * int(self.compound_jobs.size)

    # --- whole-state terms (the same formulas as the judge) --------------------------------
    def _all_slice_costs(self) -> tuple[np.ndarray, np.ndarray]:
        """Expressions 7 and 8 of every slice from the state's demand (and ``odemand``)."""
        balance, overload = self._slice_costs(self.demand[None])
        if self.combined:
            overload = self._slice_costs(self.odemand[None], weight=self.overload_weight)[1]
        return balance[0], overload[0]

    def _slice_costs(self, demand: np.ndarray, slices: np.ndarray | slice = slice(None),
                     weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Expressions 7 and 8 per (type, priority) slice for a stack of demand matrices
        (..., R, S) over the columns ``slices`` -> two (..., S) arrays, weighted by w_p (or by
        ``weight``, by column)."""
        supply, supply_share = self.supply[:, slices], self.supply_share[:, slices]
        total = demand.sum(axis=-2, keepdims=True)
        active = total > 0
        share = np.divide(demand, total, out=np.zeros_like(demand), where=active)
        balance = np.square(share - supply_share).sum(axis=-2) * active[..., 0, :]
        over = np.maximum(0.0, demand - supply) / self.arrays.sigmoid_scale
        overload = (share * sigmoid(over)).sum(axis=-2)
        if weight is None:
            weight = self.slice_weight[slices]
            return balance * weight, overload * weight
        return balance * self.slice_weight[slices], overload * weight[slices]

    def _storage_term(self, home_bytes: np.ndarray) -> np.ndarray:
        return np.square(home_bytes / self.total_bytes - self.capacity_share).sum(axis=-1)

    def terms(self) -> dict[str, float]:
        a = self.arrays
        return {
            "traffic": a.w_traffic * cross_region_bytes(a, self.home, self.region),
            "gpu_balance": a.w_gpu * float(self.slice_balance.sum()),
            "gpu_overload": a.w_gpu * float(self.slice_overload.sum()),
            "storage_balance": a.w_storage * float(self._storage_term(self.home_bytes)),
        }

    def _at_home(self, jobs: np.ndarray, region: np.ndarray) -> np.ndarray:
        a = self.arrays
        gpu = np.maximum(a.job_gpu_type[jobs], 0)
        return (region >= 0) & (a.gpu_supply[np.maximum(region, 0), gpu] > 0)

    # --- the engine's interface --------------------------------------------------------------
    def num_items(self) -> int:
        return self.arrays.num_tables + self.compound_jobs.size

    def best_move(self, item: int) -> Candidate | None:
        if item >= self.num_tables:
            job = int(self.compound_jobs[item - self.num_tables])
            if self.region[job] >= 0:
                return None  # not split: its tables move one by one (and cheaply)
            moves = [self._compound(item, job, r) for r in self._job_targets(job)]
            return max((m for m in moves if m is not None), key=lambda m: (m.gain, -m.target), default=None)
        gains, terms, _ = self._candidates(item)
        target = int(np.argmax(gains))
        if not np.isfinite(gains[target]):
            return None
        return self._candidate(item, target, gains, terms)

    def move_to(self, item: int, target: int) -> Candidate | None:
        if item >= self.num_tables:
            return self._compound(item, int(self.compound_jobs[item - self.num_tables]), target)
        gains, terms, _ = self._candidates(item)
        if target == self.home[item] or not np.isfinite(gains[target]):
            return None
        return self._candidate(item, target, gains, terms)

    def min_cost(self, item: int) -> float:
        """A lower bound of the quota a move of ``item`` uses (the engine skips the item unevaluated
        when it exceeds what is left): a table at its original home uses its size wherever it
        goes; one already moved may go back and free it. Compound moves: no bound."""
        return self.min_costs[item]

    def _candidate(self, item: int, target: int, gains: np.ndarray, terms: np.ndarray) -> Candidate:
        size = float(self.arrays.table_size[item])
        at_origin = self.home[item] == self.original[item]
        cost = size if at_origin else (-size if target == self.original[item] else 0.0)
        return Candidate(item, target, float(gains[target]),
                         {name: float(terms[k, target]) for k, name in enumerate(TERMS)}, cost,
                         source=int(self.home[item]))

    def estimate_moves(self, items: list[int]) -> list[Candidate | None]:
        """The best moves of many items in one vectorised evaluation (:func:`estimates.estimate`;
        gains equal to :meth:`best_move`'s up to rounding, for ordering the engine's queue)."""
        return estimate(self, items)

    def _candidates(self, table: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """Gain of moving ``table`` to every region (-inf: infeasible or its home), the change
        of each term (4, R), and the affected jobs' new regions for :meth:`apply`."""
        if self.cached is not None and self.cached[0] == table and self.cached[1] == self.version:
            return self.cached[2]
        out = self._evaluate(table)
        self.cached = (table, self.version, out)
        return out

    def _evaluate(self, table: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """:meth:`_evaluate_numpy`, with its per-job loops compiled (``exact_kernels``, the
        same bits) unless ``FLEETPLAN_KERNELS=0``."""
        if kernels.use_jit(self.num_tables):
            from fleetplan.solvers.placement.climb import exact_kernels

            return exact_kernels.evaluate(self, table)
        return self._evaluate_numpy(table)

    def _evaluate_numpy(self, table: int) -> tuple[np.ndarray, np.ndarray, dict]:
        a = self.arrays
        R = a.num_regions
        old = int(self.home[table])
        size = float(a.table_size[table])
        cand = np.arange(R)
        # Storage balance: only the old and the new home change.
        hb = self.home_bytes
        before = np.square(hb / self.total_bytes - self.capacity_share)
        after_new = np.square((hb + size) / self.total_bytes - self.capacity_share)
        after_old = np.square((hb[old] - size) / self.total_bytes - self.capacity_share[old])
        storage = np.where(cand == old, 0.0, after_new - before + after_old - before[old])
        feasible = (cand != old) & (hb + size <= a.storage_capacity * (1 + TOLERANCE) + 1e-6)
        delta = np.zeros((4, R))
        delta[3] = a.w_storage * storage
        jobs = self.readers[self.reader_ptr[table]:self.reader_ptr[table + 1]]
        info: dict = {"jobs": jobs}
        if jobs.size:
            new_region = self._new_regions(table, jobs, info)  # (k, R)
            old_region = self.region[jobs]
            info["new_region"] = new_region
            # Expression 1 for the affected jobs.
            in_region = np.where(new_region >= 0, info["bytes"][np.arange(len(jobs))[:, None], np.maximum(new_region, 0)],
                                 0.0)
            in_region = in_region + np.where(new_region == cand, size, 0.0)
            traffic_new = a.job_weight[jobs, None] * (self.job_bytes[jobs, None] - np.where(new_region >= 0, in_region, 0.0))
            old_in = np.where(old_region >= 0, info["bytes"][np.arange(len(jobs)), np.maximum(old_region, 0)]
                              + np.where(old_region == old, size, 0.0), 0.0)
            traffic_old = a.job_weight[jobs] * (self.job_bytes[jobs] - old_in)
            delta[0] = a.w_traffic * (traffic_new - traffic_old[:, None]).sum(axis=0)
            changed = new_region != old_region[:, None]
            is_ml = a.job_kind[jobs] == ML
            ml_rows = np.flatnonzero(is_ml & changed.any(axis=1))
            if self.split_counted:
                new_demand = self._new_demand_regions(table, jobs, new_region, info["bytes"])
                info["new_demand"] = new_demand
                old_demand = self.dregion[jobs]
                gpu_rows = np.flatnonzero(is_ml & (new_demand != old_demand[:, None]).any(axis=1))
                if gpu_rows.size:
                    delta[1], delta[2] = self._gpu_delta(jobs[gpu_rows], old_demand[gpu_rows], new_demand[gpu_rows])
            elif ml_rows.size:
                delta[1], delta[2] = self._gpu_delta(jobs[ml_rows], old_region[ml_rows], new_region[ml_rows])
            if ml_rows.size:
                hp_rows = ml_rows[self.hp[jobs[ml_rows]]]
                if hp_rows.size:
                    hp_jobs = jobs[hp_rows]
                    hours = a.job_gpu_hours[hp_jobs]
                    was = self._at_home(hp_jobs, old_region[hp_rows])
                    gpu = a.job_gpu_type[hp_jobs]
                    now = (new_region[hp_rows] >= 0) & (a.gpu_supply[np.maximum(new_region[hp_rows], 0), gpu[:, None]] > 0)
                    at_home = self.hp_at_home + (hours[:, None] * (now.astype(float) - was[:, None])).sum(axis=0)
                    feasible &= (at_home >= self.hp_floor) | (at_home >= self.hp_at_home)
            feasible &= self._cpu_ok(jobs, old_region, new_region, changed)
        gains = np.where(feasible, -delta.sum(axis=0), -np.inf)
        return gains, delta, info

    def _new_regions(self, table: int, jobs: np.ndarray, info: dict) -> np.ndarray:
        """R(job) of each job if ``table`` moved to each region: (k, R), -1 for none."""
        a = self.arrays
        R = a.num_regions
        starts, ends = a.job_ptr[jobs], a.job_ptr[jobs + 1]
        lengths = ends - starts
        row = np.repeat(np.arange(len(jobs)), lengths)
        pair = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        tables = a.job_tables[pair]
        other = tables != table
        key = row[other] * R + self.home[tables[other]]
        count = np.bincount(key, minlength=len(jobs) * R).reshape(len(jobs), R)
        size = np.bincount(key, weights=self.pair_size[pair[other]], minlength=len(jobs) * R).reshape(len(jobs), R)
        info["bytes"] = size
        cand = np.arange(R)
        others = count.sum(axis=1)
        # ML: the common region of the other tables, if any; a job reading only this table
        # follows it.
        common = np.where(count.max(axis=1) == others, count.argmax(axis=1), NO_REGION)
        ml_new = np.where((others == 0)[:, None] | (common[:, None] == cand), cand, NO_REGION)
        # Spark/Presto: the current leader among the other tables (most tables, then bytes,
        # then the lower index) against the candidate region with this table added.
        top = count.max(axis=1, keepdims=True)
        best_bytes = np.where(count == top, size, -np.inf)
        leader = np.argmax((count == top) & (best_bytes == best_bytes.max(axis=1, keepdims=True)), axis=1)
        lead_count = count[np.arange(len(jobs)), leader][:, None]
        lead_bytes = size[np.arange(len(jobs)), leader][:, None]
        mine_count = count + 1
        mine_bytes = size + a.table_size[table]
        wins = (mine_count > lead_count) | ((mine_count == lead_count) & (
            (mine_bytes > lead_bytes) | ((mine_bytes == lead_bytes) & (cand <= leader[:, None]))))
        analytics_new = np.where(wins | (others == 0)[:, None], cand, leader[:, None])
        return np.where((a.job_kind[jobs] == ML)[:, None], ml_new, analytics_new)

    def _new_demand_regions(self, table: int, jobs: np.ndarray, new_region: np.ndarray,
                            other_bytes: np.ndarray) -> np.ndarray:
        """Where each job's demand counts if ``table`` moved to each region (k, R): R(job), or
        for a split ML job the region holding most of its bytes, ties to the lowest index
        (``other_bytes``: its other tables' bytes by region, as :meth:`_new_regions` left them)."""
        largest = largest_with(other_bytes, float(self.arrays.table_size[table]))
        return np.where((new_region < 0) & (self.arrays.job_kind[jobs] == ML)[:, None], largest, new_region)

    def _gpu_delta(self, jobs: np.ndarray, old: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not self.combined:
            return self._gpu_delta_of(jobs, old, new, self.cell, self.demand, self.demand_count, None)
        balance, _ = self._gpu_delta_of(jobs, old, new, self.cell, self.demand, self.demand_count, None)
        _, overload = self._gpu_delta_of(jobs, old, new, self.ocell, self.odemand, self.odemand_count,
                                         self.overload_weight)
        return balance, overload

    def _gpu_delta_of(self, jobs: np.ndarray, old: np.ndarray, new: np.ndarray, cells: np.ndarray,
                      state_demand: np.ndarray, state_count: np.ndarray, weight: np.ndarray | None
                      ) -> tuple[np.ndarray, np.ndarray]:
        """The change of Expressions 7 and 8 per candidate when ``jobs``' demand moves from
        ``old`` to ``new`` (k, R), over the demand columns ``cells`` of ``state_demand``."""
        a = self.arrays
        R = a.num_regions
        slices, column = np.unique(cells[jobs], return_inverse=True)
        hours = a.job_gpu_hours[jobs]
        counted = self.counted[jobs].astype(np.int64)
        demand = np.broadcast_to(state_demand[:, slices], (R, R, len(slices))).copy()  # (cand, R, S)
        count = np.broadcast_to(state_count[:, slices], demand.shape).copy()
        leaving = old >= 0
        shift = np.zeros((R, len(slices)))
        np.add.at(shift, (old[leaving], column[leaving]), -hours[leaving])
        count_shift = np.zeros((R, len(slices)), dtype=np.int64)
        np.add.at(count_shift, (old[leaving], column[leaving]), -counted[leaving])
        demand += shift[None]
        count += count_shift[None]
        rows, cands = np.nonzero(new >= 0)
        np.add.at(demand, (cands, new[rows, cands], column[rows]), hours[rows])
        np.add.at(count, (cands, new[rows, cands], column[rows]), counted[rows])
        demand[count == 0] = 0.0
        balance, overload = self._slice_costs(demand, slices, weight)
        w = a.w_gpu
        return (w * (balance - self.slice_balance[slices]).sum(axis=1),
                w * (overload - self.slice_overload[slices]).sum(axis=1))

    def _cpu_ok(self, jobs: np.ndarray, old: np.ndarray, new: np.ndarray, changed: np.ndarray) -> np.ndarray:
        a = self.arrays
        R = a.num_regions
        rows = np.flatnonzero(changed.any(axis=1) & (a.job_cpu_hours[jobs] > 0))
        if rows.size == 0:
            return np.ones(R, dtype=bool)
        # The shortcut below over all applications, from the room kept per state version.
        room = self.cpu_room()
        if (np.bincount(a.job_app[jobs[rows]], weights=a.job_cpu_hours[jobs[rows]], minlength=room.size)
                <= room).all():
            return np.ones(R, dtype=bool)
        apps, column = np.unique(a.job_app[jobs[rows]], return_inverse=True)
        hours = a.job_cpu_hours[jobs[rows]]
        limit = a.cpu_capacity[apps] * (1 + TOLERANCE) + 1e-9
        # All movers' hours fit every region's room (margin far above rounding): every
        # candidate passes the check below (first_pass._cpu_ok has the same shortcut).
        room = (limit - self.cpu[apps]).min(axis=1) - 1e-6 * (1.0 + limit.max(axis=1))
        if (np.bincount(column, weights=hours, minlength=apps.size) <= room).all():
            return np.ones(R, dtype=bool)
        current = self.cpu[apps]  # (A', R)
        usage = np.broadcast_to(current, (R, *current.shape)).copy()
        leaving = old[rows] >= 0
        shift = np.zeros_like(current)
        np.add.at(shift, (column[leaving], old[rows][leaving]), -hours[leaving])
        usage += shift[None]
        r_rows, cands = np.nonzero(new[rows] >= 0)
        np.add.at(usage, (cands, column[r_rows], new[rows][r_rows, cands]), hours[r_rows])
        capacity = a.cpu_capacity[apps] * (1 + TOLERANCE) + 1e-9
        return ((usage <= capacity) | (usage <= current + 1e-9)).all(axis=(1, 2))

    def cpu_room(self) -> np.ndarray:
        """Per application, the least CPU-hours left under its capacity over the regions, less
        a margin far above rounding (kept until the state changes): when a move adds no more
        than that to any region, the CPU check passes for every candidate."""
        cached = getattr(self, "_cpu_room", None)
        if cached is None or cached[0] != self.version:
            limit = self.arrays.cpu_capacity * (1 + TOLERANCE) + 1e-9
            cached = self._cpu_room = (self.version,
                                       (limit - self.cpu).min(axis=1) - 1e-6 * (1.0 + limit.max(axis=1)))
        return cached[1]

    def apply(self, move: Candidate) -> None:
        if move.members:
            changed = []
            for table, _ in move.members:
                step = self.move_to(table, move.target)
                self.apply(step)
                changed.append(self.last_changed)
            self.last_changed = np.unique(np.concatenate(changed)) if changed else self.last_changed
            return
        a = self.arrays
        table, target = move.item, move.target
        _, _, info = self._candidates(table)
        jobs = info["jobs"]
        old_home = int(self.home[table])
        self._forget(table, jobs)
        if jobs.size:
            new = info["new_region"][:, target]
            old = self.region[jobs]
            new_demand = info["new_demand"][:, target] if self.split_counted else new
            old_demand = self.dregion[jobs] if self.split_counted else old
            moved = (a.job_kind[jobs] == ML) & (new_demand != old_demand)
            if moved.any():
                movers = jobs[moved]
                cell = self.cell[movers]
                hours = a.job_gpu_hours[movers]
                counted = self.counted[movers].astype(np.int64)
                o, n = old_demand[moved], new_demand[moved]
                self._shift_demand(self.demand, self.demand_count, cell, o, n, hours, counted)
                if self.combined:
                    self._shift_demand(self.odemand, self.odemand_count, self.ocell[movers], o, n, hours, counted)
                touched = np.unique(cell)
                balance, overload = self._all_slice_costs()
                self.slice_balance[touched] = balance[touched]
                self.slice_changed[touched] = self.version + 1
                touched = np.unique(self.ocell[movers]) if self.combined else touched
                self.slice_overload[touched] = overload[touched]
                self.slice_changed[touched] = self.version + 1
            if self.split_counted:
                self.dregion[jobs] = new_demand
            ml = (a.job_kind[jobs] == ML) & (new != old)
            if ml.any():
                hp = self.hp[jobs] & (new != old)
                if hp.any():
                    hours_hp = a.job_gpu_hours[jobs[hp]]
                    self.hp_at_home += float((hours_hp * (self._at_home(jobs[hp], new[hp]).astype(float)
                                                          - self._at_home(jobs[hp], old[hp]))).sum())
            moving = new != old
            if moving.any():
                js = jobs[moving]
                o, n = old[moving], new[moving]
                np.add.at(self.cpu, (a.job_app[js][o >= 0], o[o >= 0]), -a.job_cpu_hours[js][o >= 0])
                np.add.at(self.cpu, (a.job_app[js][n >= 0], n[n >= 0]), a.job_cpu_hours[js][n >= 0])
            self.region[jobs] = new
            # Jobs whose region or demand region changed: their tables' gains changed.
            self.last_changed = jobs[(new != old) | (new_demand != old_demand)] if self.split_counted \
                else jobs[new != old]
        else:
            self.last_changed = jobs
        self.home[table] = target
        self.version += 1
        size = self.sizes[table]
        self.min_costs[table] = size if target == self.original[table] else -size
        self.home_bytes[old_home] -= a.table_size[table]
        self.home_bytes[target] += a.table_size[table]
        for name, change in move.terms.items():
            self.objective_terms[name] += change

    @staticmethod
    def _shift_demand(demand: np.ndarray, count: np.ndarray, cell: np.ndarray, old: np.ndarray, new: np.ndarray,
                      hours: np.ndarray, counted: np.ndarray) -> None:
        """Move jobs' GPU-hours (and job counts) from their ``old`` to their ``new`` demand
        regions in column ``cell``; a cell whose jobs all left is set to exactly 0."""
        np.add.at(demand, (old[old >= 0], cell[old >= 0]), -hours[old >= 0])
        np.add.at(demand, (new[new >= 0], cell[new >= 0]), hours[new >= 0])
        np.add.at(count, (old[old >= 0], cell[old >= 0]), -counted[old >= 0])
        np.add.at(count, (new[new >= 0], cell[new >= 0]), counted[new >= 0])
        demand[count == 0] = 0.0

    # --- compound moves ------------------------------------------------------------------------
    def _job_targets(self, job: int) -> np.ndarray:
        """Regions a compound move of ``job`` may go to: those with its GPU type."""
        a = self.arrays
        return np.flatnonzero(a.gpu_supply[:, a.job_gpu_type[job]] > 0)

    def _compound(self, item: int, job: int, target: int) -> Candidate | None:
        """All of ``job``'s tables to ``target``, as single moves applied and undone: the gain,
        terms and quota cost add up over the steps (each step must be feasible)."""
        a = self.arrays
        tables = np.unique(a.job_tables[a.job_ptr[job]:a.job_ptr[job + 1]])
        tables = tables[self.home[tables] != target]
        if tables.size == 0:
            return None
        saved = self._save(tables)
        gain, cost = 0.0, 0.0
        terms = dict.fromkeys(TERMS, 0.0)
        members = tuple((int(t), int(self.home[t])) for t in tables)
        feasible = True
        for table in tables.tolist():
            step = self.move_to(table, target)
            if step is None:
                feasible = False
                break
            gain += step.gain
            cost += step.cost
            for name, change in step.terms.items():
                terms[name] += change
            self.apply(step)
        self._restore(saved)
        if not feasible:
            return None
        return Candidate(item, target, gain, terms, cost, members=members)

    def _save(self, tables: np.ndarray) -> tuple:
        readers = np.concatenate([self.readers[self.reader_ptr[t]:self.reader_ptr[t + 1]] for t in tables.tolist()])
        return (tables, self.home[tables].copy(), readers, self.region[readers].copy(), self.demand.copy(),
                self.demand_count.copy(), self.slice_balance.copy(), self.slice_overload.copy(), self.hp_at_home,
                self.cpu.copy(), self.home_bytes.copy(), dict(self.objective_terms), self.last_changed,
                self.dregion[readers].copy(), self.odemand.copy(), self.odemand_count.copy())

    def _restore(self, saved: tuple) -> None:
        (tables, home, readers, region, self.demand, self.demand_count, self.slice_balance, self.slice_overload,
         self.hp_at_home, self.cpu, self.home_bytes, self.objective_terms, self.last_changed,
         dregion, odemand, odemand_count) = saved
        self.home[tables] = home
        self.region[readers] = region
        if self.split_counted:
            self.dregion[readers] = dregion
        if self.combined:
            self.odemand, self.odemand_count = odemand, odemand_count
        else:  # one array for both, as built
            self.odemand, self.odemand_count = self.demand, self.demand_count
        self.version += 1
        self.slice_changed[:] = self.version  # the demand arrays were replaced
        for table in tables.tolist():
            self._forget(table, self.readers[self.reader_ptr[table]:self.reader_ptr[table + 1]])
        for table in tables.tolist():
            size = self.sizes[table]
            self.min_costs[table] = size if self.home[table] == self.original[table] else -size

    def _forget(self, table: int, jobs: np.ndarray) -> None:
        """Drop the cached entries (``estimates._Entry``) of ``table`` and of every table its
        readers ``jobs`` read: a move of ``table`` changes those jobs' tables by region, and so
        those tables' pairs."""
        cache, slots = self.pair_cache, self.kernel_slots
        if not cache and slots is None:
            return
        cache.pop(table, None)
        if slots is not None:
            slots[table] = -1
        if jobs.size:
            a = self.arrays
            lengths = a.job_ptr[jobs + 1] - a.job_ptr[jobs]
            pair = np.repeat(a.job_ptr[jobs] - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
            others = a.job_tables[pair]
            if slots is not None:
                slots[others] = -1
            for other in others.tolist() if cache else ():
                cache.pop(other, None)

    def neighbours(self, move: Candidate) -> np.ndarray:
        """Tables read by the jobs whose region the last applied move changed: their gains
        changed the most (moving them now may follow or undo the job)."""
        a = self.arrays
        jobs = self.last_changed
        if jobs.size == 0:
            return np.zeros(0, dtype=np.int64)
        lengths = a.job_ptr[jobs + 1] - a.job_ptr[jobs]
        pair = np.repeat(a.job_ptr[jobs] - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        tables = np.unique(a.job_tables[pair])
        if self.compound_jobs.size:
            items = self.compound_item[jobs]
            return np.concatenate([tables, np.unique(items[items >= 0])])
        return tables

