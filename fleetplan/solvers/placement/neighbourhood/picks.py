"""How the neighbourhood search (:mod:`fleetplan.solvers.placement.neighbourhood.lns`) draws its
neighbourhoods: which tables to free, and to which regions.

* ``jobs``: the tables of a few jobs that share tables (a random planned job with traffic or
  with a split ML job first, then jobs reading the same tables), all regions allowed (or the
  regions they use plus the best-supplied regions of their GPU types on large fleets);
* ``pair``: tables homed in two regions — the most over-loaded (high-priority demand over
  supply) with a random other, or a random pair — each free to go to either;
* ``overload``: the tables of ML jobs in an overloaded (region, GPU type), free to go to the
  regions with that type and the lowest demand over supply;
* ``gap``: a GPU group drawn in proportion to how far its plan value lies above its part of
  the lower bound (:func:`~fleetplan.solvers.placement.neighbourhood.gaps.group_gaps`), a few of its jobs and
  the jobs sharing their tables.

Every draw uses the search's seeded generator, so runs repeat.
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.placement import ML, PlacementArrays
from fleetplan.models.placement.bound import LowerBound
from fleetplan.solvers.placement.climb.state import TetrisState
from fleetplan.solvers.placement.neighbourhood.gaps import group_gaps

# The most ML jobs of one GPU group a ``gap`` neighbourhood starts from.
GAP_SEED_JOBS = 4


class NeighbourhoodPicker:
    """The neighbourhoods of the module docstring over ``state`` (the search sets the
    attributes below; ``max_free`` may change between draws)."""

    state: TetrisState
    rng: np.random.Generator
    max_free: int
    max_regions: int
    planned: np.ndarray
    ml: np.ndarray
    movable: np.ndarray
    bound: LowerBound | None
    a: PlacementArrays  # the state's arrays

    def _jobs_tables(self, jobs: np.ndarray) -> np.ndarray:
        a = self.a
        if jobs.size == 0:
            return np.zeros(0, dtype=np.int64)
        lengths = a.job_ptr[jobs + 1] - a.job_ptr[jobs]
        pair = np.repeat(a.job_ptr[jobs] - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        return np.unique(a.job_tables[pair])

    def _grow(self, seed_jobs: list[int]) -> np.ndarray:
        """Tables of ``seed_jobs``, then of jobs sharing their tables, up to ``max_free``: ML
        readers first (a table of an ML job moved alone splits the job, so its other tables
        belong in the same neighbourhood), then a few others at random."""
        s, rng, a = self.state, self.rng, self.a
        tables: list[int] = []
        seen_t: set[int] = set()
        seen_j: set[int] = set()
        ml_queue, other_queue = list(seed_jobs), []
        while (ml_queue or other_queue) and len(tables) < self.max_free:
            j = ml_queue.pop(0) if ml_queue else other_queue.pop(0)
            if j in seen_j:
                continue
            seen_j.add(j)
            own = [t for t in self._jobs_tables(np.array([j])).tolist() if t not in seen_t and self.movable[t]]
            if len(tables) + len(own) > self.max_free and tables:
                continue
            for t in own:
                seen_t.add(t)
                tables.append(t)
                readers = s.readers[s.reader_ptr[t]:s.reader_ptr[t + 1]]
                ml = readers[a.job_kind[readers] == ML]
                ml_queue.extend(int(r) for r in ml if int(r) not in seen_j)
                rest = readers[a.job_kind[readers] != ML]
                if rest.size:
                    other_queue.extend(int(r) for r in rest[rng.permutation(rest.size)[:3]] if int(r) not in seen_j)
        return np.array(tables[: self.max_free], dtype=np.int64)

    def _regions_for(self, tables: np.ndarray) -> np.ndarray | None:
        """All regions on small fleets; else the tables' regions and their jobs' best regions."""
        a, s = self.a, self.state
        R = a.num_regions
        if R <= self.max_regions:
            return None
        chosen = list(dict.fromkeys(s.home[tables].tolist()))
        readers = np.unique(np.concatenate([s.readers[s.reader_ptr[t]:s.reader_ptr[t + 1]] for t in tables.tolist()]))
        ml = readers[a.job_kind[readers] == ML]
        if ml.size:
            types = np.bincount(a.job_gpu_type[ml], weights=a.job_gpu_hours[ml], minlength=len(a.gpu_types))
            g = int(np.argmax(types))
            demand = s.demand.reshape(R, len(a.gpu_types), -1)[:, g].sum(axis=1)
            supply = a.gpu_supply[:, g]
            ratio = np.where(supply > 0, demand / np.maximum(supply, 1e-300), np.inf)
            for r in np.argsort(ratio, kind="stable").tolist():
                if len(chosen) >= self.max_regions:
                    break
                if r not in chosen and np.isfinite(ratio[r]):
                    chosen.append(r)
        for r in self.rng.permutation(R).tolist():
            if len(chosen) >= self.max_regions:
                break
            if r not in chosen:
                chosen.append(r)
        return np.array(chosen[: max(self.max_regions, len(set(s.home[tables].tolist())))], dtype=np.int64)

    def pick(self, kind: str) -> tuple[np.ndarray, np.ndarray | None, str]:
        a, s, rng = self.a, self.state, self.rng
        R = a.num_regions
        if kind == "jobs":
            if self.ml.size and rng.random() < 0.5:
                split = self.ml[s.region[self.ml] < 0]
                pool = split if split.size and rng.random() < 0.5 else self.ml
            else:
                pool = self.planned
            if pool.size == 0:
                return np.zeros(0, dtype=np.int64), None, "no job"
            j = int(pool[rng.integers(pool.size)])
            tables = self._grow([j])
            return tables, self._regions_for(tables), f"jobs around '{a.job_ids[j]}'"
        if kind == "gap":
            return self._gap_pick()
        if kind == "pair":
            hp = s.demand.reshape(R, len(a.gpu_types), -1)
            load = hp.sum(axis=(1, 2)) / np.maximum(a.gpu_supply.sum(axis=1), 1e-300)
            if rng.random() < 0.5:
                first = int(np.argmax(load))
            else:
                first = int(rng.integers(R))
            second = int(rng.integers(R - 1))
            second += second >= first
            regions = np.array(sorted({first, second}))
            inside = np.flatnonzero(np.isin(s.home, regions) & self.movable)
            if inside.size > self.max_free:
                # Tables read by planned jobs first: the others change nothing but storage.
                read = s.reader_ptr[inside + 1] > s.reader_ptr[inside]
                order = np.concatenate([rng.permutation(inside[read]), rng.permutation(inside[~read])])
                seeds = order[: max(1, self.max_free // 3)]
                readers = np.unique(np.concatenate([s.readers[s.reader_ptr[t]:s.reader_ptr[t + 1]]
                                                    for t in seeds.tolist()] + [np.zeros(0, dtype=np.int64)]))
                near = self._jobs_tables(readers)
                near = near[np.isin(s.home[near], regions) & self.movable[near]]
                inside = np.unique(np.concatenate([seeds, rng.permutation(near)[: self.max_free - seeds.size]]))
            return inside, regions, f"region pair {a.region_ids[first]}/{a.region_ids[second]}"
        # overload: the (region, GPU type) with the highest demand over supply
        G = len(a.gpu_types)
        demand = s.demand.reshape(R, G, -1).sum(axis=2)
        ratio = np.where(a.gpu_supply > 0, demand / np.maximum(a.gpu_supply, 1e-300), np.where(demand > 0, 1e6, 0.0))
        flat = np.argsort(-ratio, axis=None, kind="stable")[: max(1, min(5, ratio.size))]
        r, g = np.unravel_index(int(flat[rng.integers(flat.size)]), ratio.shape)
        jobs = self.ml[(s.dregion[self.ml] == r) & (a.job_gpu_type[self.ml] == g)]
        if jobs.size == 0:
            return np.zeros(0, dtype=np.int64), None, "no overload"
        jobs = jobs[rng.permutation(jobs.size)]
        tables = self._grow(jobs[:8].tolist())
        cool = np.argsort(np.where(a.gpu_supply[:, g] > 0, ratio[:, g], np.inf), kind="stable")
        regions = np.unique(np.concatenate([[r], cool[: max(1, self.max_regions - 1)]]))
        return tables, (None if R <= self.max_regions else regions), \
            f"overload {a.region_ids[r]} x {a.gpu_types[g]}"

    def _gap_pick(self) -> tuple[np.ndarray, np.ndarray | None, str]:
        """A GPU group drawn in proportion to how far its plan value lies above its part of the
        lower bound (:func:`group_gaps`), then a few of its jobs (in proportion to their
        GPU-hours) and the jobs coupled to them through shared tables (:meth:`_grow`), to the
        regions with the group's GPU type and the least demand over supply."""
        a, rng = self.a, self.rng
        if self.bound is None:
            return np.zeros(0, dtype=np.int64), None, "no bound"
        gaps = [g for g in group_gaps(self.state, self.bound) if g.gap > 1e-9 and g.jobs.size]
        if not gaps:
            return np.zeros(0, dtype=np.int64), None, "no gap"
        weight = np.array([g.gap for g in gaps])
        group = gaps[int(rng.choice(len(gaps), p=weight / weight.sum()))]
        hours = a.job_gpu_hours[group.jobs] + 1e-9
        take = rng.choice(group.jobs.size, size=min(GAP_SEED_JOBS, group.jobs.size), replace=False,
                          p=hours / hours.sum())
        tables = self._grow(group.jobs[np.sort(take)].tolist())
        return tables, self._regions_for(tables), f"gap {group.name} ({group.gap:.3g} above its bound)"


__all__ = ["GAP_SEED_JOBS", "NeighbourhoodPicker"]
