"""Figure 4 (MAST §3.3) over a *neighbourhood*: a few tables free, every other table fixed where
it is — the sub-problem a large-neighbourhood search re-optimises exactly.

The Pyomo model of :mod:`fleetplan.models.placement.mip` is the readable reference and covers a
whole instance; a search solves thousands of small neighbourhoods, where building through Pyomo
would cost more than solving (DESIGN.md, "Performance practice"). This module builds the same
formulation as sparse arrays (:class:`~fleetplan.models.linear.LinearProgram`) for
``highspy.Highs.passModel``, over the free tables and the jobs reading them only. Everything the
fixed tables contribute enters as constants taken from the current placement (``Background``):

* variables ``x[t, r]`` (free table t homed in r, over its allowed regions), ``y[j, r]`` (ML job j
  has R(job) = r: the AND of its tables' x, with a fixed table of j pinning the region, and two
  fixed tables in different regions making the job split whatever happens), ``z[j, r]`` /
  ``v[j, r]`` (Spark/Presto majority region and the share of bytes read there: the same big-M
  rows as the whole model, with the fixed tables' counts and bytes as constants), ``w[j, r]``
  (under ``split_ml_demand="largest_region"``, the region holding most of an ML job's bytes);
* per GPU slice touched by a free job: the levels of each region's demand and of the total
  (subset sums of the free jobs' GPU-hours over the fixed demand as base), one binary per
  (total level, region level) pair costing Expressions 7-8 there — exact when the levels are
  exact (few free jobs per slice, the usual case), a lower bound otherwise;
* storage balance by tangents at the subset sums of the free tables' sizes (exact when few);
* the hard rows as the hill climb keeps them: storage per region, CPU per application and
  region, home training and the move quota, each at most what it allows *or* no worse than
  today's placement when today already breaks it (so the current placement is always a
  solution of the model: a search started there can never end worse).

This module assembles the model (tables, R(job), the Spark/Presto majority rows) from its
parts: :mod:`.neighbourhood_base` (the fixed part, :class:`Background`, and the sparse-array
builder), :mod:`.neighbourhood_gpu` (the GPU cost) and :mod:`.neighbourhood_rows` (the storage
cost and the hard rows).

The model's objective is the change-relevant part of the exact objective (the constant of the
touched terms is in ``constant``); the search re-scores every answer exactly and keeps it only
when the exact objective falls, so an inexact (grid) model can mislead a step but never worsen
the plan.

Example
-------
>>> import numpy as np
>>> from fleetplan.instances import generate
>>> from fleetplan.models.placement.neighbourhood import Background, neighbourhood_model
>>> instance = generate("placement", {"regions": 2, "tables": 4, "jobs": 3}, seed=0)
>>> arrays = instance.arrays()
>>> model = neighbourhood_model(arrays, Background.of(arrays, arrays.table_home), np.array([0, 1]))
>>> model.lp.num_cols > 0, model.start is not None
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fleetplan.instances.placement import ML, PlacementArrays
from fleetplan.models.linear import LinearProgram
from fleetplan.models.placement import COUNT_MARGIN, ROW_SAFETY, TIE_EPSILON
from fleetplan.models.placement.neighbourhood_base import Background, _add, _Builder
from fleetplan.models.placement.neighbourhood_gpu import _demand_of, _gpu_slices
from fleetplan.models.placement.neighbourhood_rows import (
    _cpu_rows,
    _home_training_row,
    _quota_row,
    _storage,
)


@dataclass
class NeighbourhoodModel:
    """The sub-MIP and how to read it: ``x_index[t]`` lists (region, column) of free table t;
    ``start`` is the current placement as a full column vector (a MIP start), ``start_cost``
    its model objective; ``exact``: every level is exact, so the model's objective equals the
    exact objective's touched part at every placement of the free tables."""

    lp: LinearProgram
    free: np.ndarray
    x_index: dict[int, list[tuple[int, int]]]
    start: np.ndarray
    start_cost: float
    constant: float
    exact: bool
    jobs: np.ndarray
    tags: np.ndarray  # each column's part of the objective: x, traffic, gpu or storage
    sizes: dict[str, int] = field(default_factory=dict)

    def homes(self, values: np.ndarray) -> np.ndarray:
        """The free tables' regions from a solution vector (aligned with ``free``)."""
        out = np.empty(self.free.size, dtype=np.int64)
        for k, t in enumerate(self.free.tolist()):
            options = self.x_index[t]
            out[k] = options[int(np.argmax([values[c] for _, c in options]))][0]
        return out


def neighbourhood_model(arrays: PlacementArrays, bg: Background, free: np.ndarray,
                        regions: np.ndarray | None = None, *, max_exact_levels: int = 64,
                        grid_levels: int = 16, max_pairs: int = 1024, storage_tangents: int = 32,
                        keep_placed: bool = False) -> NeighbourhoodModel | None:
    """The sub-MIP of ``free`` tables (module docstring); each may go to ``regions`` (all by
    default), stay where it is or go back to today's home. None when no free table can move
    (pinned by the quota). ``keep_placed``: an ML job placed today stays placed (in some
    region; it may move): a restriction that keeps the current placement a solution, and keeps
    each slice's total demand from varying with every job that could split (the pairs of total
    and region levels grow with the jobs that could, and the MIP with them)."""
    a = arrays
    R = a.num_regions
    pinned = a.table_size > a.move_quota_bytes
    free = np.unique(np.asarray(free, dtype=np.int64))
    free = free[~pinned[free]]
    if free.size == 0:
        return None
    regions = np.arange(R) if regions is None else np.unique(np.asarray(regions, dtype=np.int64))
    home = bg.home
    is_free = np.zeros(a.num_tables, dtype=bool)
    is_free[free] = True
    # Each free table may also stay, or go back to today's home (which frees quota).
    original = a.table_home
    allowed = {t: sorted(set(regions.tolist()) | {int(home[t]), int(original[t])}) for t in free.tolist()}
    b = _Builder()
    size = a.table_size

    # --- x ----------------------------------------------------------------------------------
    x_index: dict[int, list[tuple[int, int]]] = {}
    x_col: dict[tuple[int, int], int] = {}
    for t in free.tolist():
        x_index[t] = []
        for r in allowed[t]:
            c = b.col(0.0, 0.0, 1.0, True, float(home[t] == r))
            x_index[t].append((r, c))
            x_col[t, r] = c
        b.row([(c, 1.0) for _, c in x_index[t]], 1.0, 1.0)

    # --- jobs ---------------------------------------------------------------------------------
    b.tag = "traffic"
    jobs = np.unique(np.concatenate([bg.readers[bg.reader_ptr[t]:bg.reader_ptr[t + 1]] for t in free.tolist()]))
    constant = 0.0
    ind: dict[int, dict[int, int]] = {}  # job -> region -> column of its R(job) indicator
    split_counted = a.split_ml_demand == "largest_region"
    dem: dict[int, tuple[dict[int, int | float], bool]] = {}  # ML job -> (region -> col or 1.0, certain)
    for j in jobs.tolist():
        pairs = a.job_tables[a.job_ptr[j]:a.job_ptr[j + 1]]
        on = is_free[pairs]
        fixed_regions = set(home[pairs[~on]].tolist())
        own_free = sorted(set(pairs[on].tolist()))
        job_bytes = float(size[pairs].sum())
        scale = a.w_traffic * float(a.job_weight[j]) * job_bytes
        if a.job_kind[j] == ML:
            if len(fixed_regions) >= 2:
                possible: list[int] = []
            else:
                common = set.intersection(*(set(allowed[t]) for t in own_free))
                possible = sorted(common & fixed_regions) if fixed_regions else sorted(common)
            current = int(bg.region[j])
            constant += scale
            cols = {}
            for r in possible:
                c = b.col(-scale, 0.0, 1.0, False, float(current == r))
                cols[r] = c
                for t in own_free:
                    b.row({c: 1.0, x_col[t, r]: -1.0}, -np.inf, 0.0)
                b.row({c: 1.0, **{x_col[t, r]: -1.0 for t in own_free}}, -(len(own_free) - 1), np.inf)
            ind[j] = cols
            stays = keep_placed and current >= 0 and current in cols
            if stays:
                b.row([(c, 1.0) for c in cols.values()], 1.0, 1.0)
            if a.job_gpu_hours[j] > 0:
                dem[j] = _demand_of(a, b, j, pairs, on, own_free, cols, x_col, allowed, bg, split_counted, stays)
        else:
            reach = sorted(set().union(*(set(allowed[t]) for t in own_free)) | fixed_regions)
            count_fix = {r: 0 for r in reach}
            bytes_fix = {r: 0.0 for r in reach}
            count_max = {r: 0 for r in reach}
            for t, f in zip(pairs.tolist(), on.tolist(), strict=True):
                if not f:
                    count_fix[int(home[t])] += 1
                    bytes_fix[int(home[t])] += float(size[t])
                    count_max[int(home[t])] += 1
                else:
                    for r in allowed[t]:
                        count_max[r] += 1
            # A region whose most reachable count is below another's fixed count never leads:
            # no variable, and no row against it (the leader beats the one with that count).
            lead = max(count_fix.values())
            cands = [r for r in reach if count_max[r] >= lead]
            total = max(job_bytes, 1e-300)
            if len(cands) == 1:
                c = cands[0]
                constant += scale * (1.0 - bytes_fix[c] / total)
                for t, f in zip(pairs.tolist(), on.tolist(), strict=True):
                    if f and (t, c) in x_col:
                        b.cost[x_col[t, c]] -= scale * float(size[t]) / total
                ind[j] = {}
                continue
            current = int(bg.region[j])
            z = {r: b.col(0.0, 0.0, 1.0, True, float(current == r)) for r in cands}
            b.row([(z[r], 1.0) for r in cands], 1.0, 1.0)

            def score(r: int, pairs=pairs, on=on, total=total) -> dict[int, float]:
                terms: dict[int, float] = {}
                for t, f in zip(pairs.tolist(), on.tolist(), strict=True):
                    if f and (t, r) in x_col:
                        _add(terms, x_col[t, r], 1.0 + COUNT_MARGIN + float(size[t]) / total)
                return terms

            scores = {r: score(r) for r in cands}
            fixed_score = {r: count_fix[r] * (1.0 + COUNT_MARGIN) + bytes_fix[r] / total for r in cands}
            big_m = len(pairs) * (1.0 + COUNT_MARGIN) + 1.0 + TIE_EPSILON
            for r in cands:
                for s in cands:
                    if s == r:
                        continue
                    terms = dict(scores[r])
                    for c, v in scores[s].items():
                        _add(terms, c, -v)
                    _add(terms, z[r], -big_m)
                    margin = TIE_EPSILON if s < r else 0.0
                    b.row(terms, margin - big_m - fixed_score[r] + fixed_score[s], np.inf)
            constant += scale
            for r in cands:
                share_now = float(size[pairs][home[pairs] == r].sum()) / total if current == r else 0.0
                v = b.col(-scale, 0.0, 1.0, False, share_now)
                terms = {v: 1.0}
                for t, f in zip(pairs.tolist(), on.tolist(), strict=True):
                    if f and (t, r) in x_col:
                        _add(terms, x_col[t, r], -float(size[t]) / total)
                b.row(terms, -np.inf, bytes_fix[r] / total)
                b.row({v: 1.0, z[r]: -1.0}, -np.inf, 0.0)
            ind[j] = z

    exact = True
    # --- GPU slices ----------------------------------------------------------------------------
    b.tag = "gpu"
    exact &= _gpu_slices(a, b, bg, dem, max_exact_levels, grid_levels, max_pairs)
    # --- storage -------------------------------------------------------------------------------
    touched = sorted(set().union(*(set(v) for v in allowed.values())))
    free_bytes_now = np.bincount(home[free], weights=size[free], minlength=R)
    base = bg.home_bytes - free_bytes_now
    total_bytes = max(float(size.sum()), 1e-300)
    unit = max(float(size[free].sum()), 1e-300)
    for r in touched:
        movers = [t for t in free.tolist() if r in allowed[t]]
        terms = {x_col[t, r]: float(size[t]) / unit for t in movers}
        cap = float(a.storage_capacity[r])
        limit = max(cap * (1 - ROW_SAFETY), float(bg.home_bytes[r])) - base[r]
        if sum(terms.values()) > limit / unit:
            b.row(terms, -np.inf, limit / unit)
    b.tag = "storage"
    if a.w_storage > 0:
        exact &= _storage(a, b, free, allowed, x_col, base, free_bytes_now, touched, total_bytes, max_exact_levels,
                          storage_tangents)
    # --- CPU, home training, quota --------------------------------------------------------------
    _cpu_rows(a, b, bg, jobs, ind)
    _home_training_row(a, b, bg, jobs, ind)
    _quota_row(a, b, bg, free, x_col, allowed)

    lp = b.program()
    start = np.array(b.start)
    return NeighbourhoodModel(lp=lp, free=free, x_index=x_index, start=start,
                              start_cost=float(lp.cost @ start), constant=constant, exact=bool(exact),
                              jobs=jobs, tags=np.array(b.tags), sizes={"columns": lp.num_cols, "rows": lp.num_rows,
                                                "jobs": int(jobs.size), "free": int(free.size)})


__all__ = ["Background", "NeighbourhoodModel", "neighbourhood_model"]
