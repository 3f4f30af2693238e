"""The GPU cost of the neighbourhood model (:mod:`fleetplan.models.placement.neighbourhood`):
where each free ML job's GPU-hours count (R(job), or its largest region under
``split_ml_demand="largest_region"``) and Expressions 2, 7 and 8 of MAST §3.3 for every
(type x priority) slice a free job's demand can change, as levels of each region's demand and of
the total with one binary per (total level, region level) pair. Split from that module, whose
docstring describes the whole formulation.

>>> from fleetplan.instances import generate
>>> arrays = generate("placement", {"regions": 2, "tables": 4, "jobs": 3}, seed=0).arrays()
>>> len(_slices(arrays)) == len(arrays.gpu_types) * PRIORITY_LEVELS  # one per (type, priority) cell
True
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.placement import PRIORITY_LEVELS, PlacementArrays
from fleetplan.instances.placement.evaluate import combined_weights
from fleetplan.models.placement import TIE_EPSILON, Levels, _pairs, make_levels
from fleetplan.models.placement.neighbourhood_base import Background, _add, _Builder

# Demand rows hold a level within this (in units of the slice's largest total): sums of the same
# GPU-hours in another order differ in the last bits.
LEVEL_SLACK = 1e-9


def _demand_of(a: PlacementArrays, b: _Builder, j: int, pairs: np.ndarray, on: np.ndarray, own_free: list[int],
               cols: dict[int, int], x_col: dict, allowed: dict, bg: Background, split_counted: bool,
               stays: bool = False) -> tuple[dict[int, int | float], bool]:
    """Where ML job j's GPU-hours count: region -> column (or 1.0 for a certain region), and
    whether they always count somewhere. R(job)'s indicator by default; under
    ``split_ml_demand="largest_region"`` the region holding most of its bytes (binary w)."""
    single = (len(own_free) == 1 and not (~on).any()) or stays
    if not split_counted:
        return dict(cols), single and bool(cols)
    size = a.table_size
    total = float(size[pairs].sum())
    home = bg.home
    if total <= 0:
        # No bytes: a split job counts in region 0 (the judge's argmax of zeros), a placed one in R(job).
        w = b.col(0.0, 0.0, 1.0, False, float(bg.region[j] < 0))
        b.row({w: 1.0, **{c: 1.0 for c in cols.values()}}, 1.0, 1.0)  # w = 1 - sum y
        out: dict[int, int | float] = dict(cols)
        out[-1 - 0] = w  # region 0 through w (key -1 decoded below)
        return out, True
    byte_fix: dict[int, float] = {}
    for t, f in zip(pairs.tolist(), on.tolist(), strict=True):
        if not f:
            byte_fix[int(home[t])] = byte_fix.get(int(home[t]), 0.0) + float(size[t])
    cands = set(r for r, v in byte_fix.items() if v > 0)
    for t in own_free:
        if size[t] > 0:
            cands |= set(allowed[t])
    cands = sorted(cands)
    if len(cands) == 1:
        return {cands[0]: 1.0}, True
    current = int(bg.dregion[j])
    w = {r: b.col(0.0, 0.0, 1.0, True, float(current == r)) for r in cands}
    b.row([(w[r], 1.0) for r in cands], 1.0, 1.0)

    def share(r: int) -> dict[int, float]:
        terms: dict[int, float] = {}
        for t, f in zip(pairs.tolist(), on.tolist(), strict=True):
            if f and (t, r) in x_col:
                _add(terms, x_col[t, r], float(size[t]) / total)
        return terms

    shares = {r: share(r) for r in cands}
    for r in cands:
        for s in cands:
            if s == r:
                continue
            terms = dict(shares[r])
            for c, v in shares[s].items():
                _add(terms, c, -v)
            _add(terms, w[r], -(1.0 + TIE_EPSILON))
            margin = TIE_EPSILON if s < r else 0.0
            b.row(terms, margin - (1.0 + TIE_EPSILON) - (byte_fix.get(r, 0.0) - byte_fix.get(s, 0.0)) / total, np.inf)
    return dict(w), True


def _slices(a: PlacementArrays) -> list[tuple[np.ndarray, np.ndarray, float, tuple[float, float]]]:
    """The GPU cost's slices: (cells summed, their priority weight column, weight, parts). One
    slice per (type, priority) cell with both expressions by default; under
    ``overload_form="combined_high_priority"`` Expression 7 per cell and Expression 8 per cell
    of the combined demand (the high levels summed into the first high level)."""
    G = len(a.gpu_types)
    out = []
    high = a.high_priority
    combined = a.overload_form == "combined_high_priority" and int(high.sum()) > 1
    weights = combined_weights(a.w_priority, high) if combined else a.w_priority
    levels = np.flatnonzero(high)
    for g in range(G):
        for p in range(PRIORITY_LEVELS):
            cell = np.array([g * PRIORITY_LEVELS + p])
            if not combined:
                out.append((cell, a.w_gpu * float(a.w_priority[p]), (1.0, 1.0)))
                continue
            if not high[p]:
                out.append((cell, a.w_gpu * float(a.w_priority[p]), (1.0, 1.0)))
                continue
            out.append((cell, a.w_gpu * float(a.w_priority[p]), (1.0, 0.0)))
            if p == levels[0]:
                out.append((g * PRIORITY_LEVELS + levels, a.w_gpu * float(weights[p]), (0.0, 1.0)))
    return out


def _gpu_slices(a: PlacementArrays, b: _Builder, bg: Background,
                dem: dict[int, tuple[dict[int, int | float], bool]], max_exact: int, grid: int,
                max_pairs: int) -> bool:
    """Expressions 2, 7, 8 for every slice a free job's demand can change: levels, pairs and
    their costs (see :mod:`fleetplan.models.placement.mip`); returns whether all are exact."""
    R = a.num_regions
    exact = True
    if a.w_gpu <= 0 or not dem:
        return exact
    cell_of = {j: int(a.job_gpu_type[j]) * PRIORITY_LEVELS + int(a.job_priority[j]) for j in dem}
    supply_all = a.gpu_supply
    for cells, weight, parts in _slices(a):
        if weight <= 0:
            continue
        members = [j for j in dem if cell_of[j] in cells.tolist() and dem[j][0]]
        if not members:
            continue
        g = int(cells[0]) // PRIORITY_LEVELS
        # Fixed demand: the cells' demand without the members' current contribution.
        fixed = bg.demand[:, cells].sum(axis=1).copy()
        count = bg.demand_count[:, cells].sum(axis=1).copy()
        for j in members:
            r = int(bg.dregion[j])
            if r >= 0:
                fixed[r] -= a.job_gpu_hours[j]
                count[r] -= 1
        fixed[count == 0] = 0.0
        fixed = np.maximum(fixed, 0.0)
        certain, maybe = 0.0, []
        free_at: list[list[float]] = [[] for _ in range(R)]
        fixed_at = fixed.copy()
        for j in members:
            where, always = dem[j]
            h = float(a.job_gpu_hours[j])
            regs = [0 if key < 0 else key for key in where]
            if always:
                certain += h
            else:
                maybe.append(h)
            if always and len(set(regs)) == 1 and isinstance(next(iter(where.values())), float):
                fixed_at[regs[0]] += h
            else:
                for r in set(regs):
                    free_at[r].append(h)

        def levels(limit: int, free_at=free_at, fixed_at=fixed_at, maybe=maybe, certain=certain, fixed=fixed
                   ) -> tuple[Levels, list[Levels]]:
            total = make_levels(np.array(maybe), float(fixed.sum()) + certain, limit, grid, zero_point=True)
            return total, [make_levels(np.array(free_at[r]), float(fixed_at[r]), limit, grid) for r in range(R)]

        total, region_levels = levels(max_exact)
        if any(len(total) * len(lv) > max_pairs for lv in region_levels):
            total, region_levels = levels(0)
        if not (total.exact and all(lv.exact for lv in region_levels)):
            exact = False
        unit = max(float(total.upper.max(initial=0.0)), 1e-300)
        supply = supply_all[:, g]
        share = supply / supply.sum() if supply.sum() > 0 else np.zeros(R)
        # The current demand of this slice (for the start).
        now = fixed.copy()
        for j in members:
            r = int(bg.dregion[j])
            if r >= 0:
                now[r] += a.job_gpu_hours[j]
        k_now = total.locate(float(now.sum()))
        u = [b.col(0.0, 0.0, 1.0, True, float(k == k_now)) for k in range(len(total))]
        b.row([(c, 1.0) for c in u], 1.0, 1.0)
        demand_terms: list[dict[int, float]] = [{} for _ in range(R)]
        for j in members:
            where, _ = dem[j]
            h = float(a.job_gpu_hours[j]) / unit
            for key, c in where.items():
                r = 0 if key < 0 else key
                if isinstance(c, float):
                    continue  # counted in fixed_at
                _add(demand_terms[r], c, h)
        for r in range(R):
            ks, idx, cost = _pairs(total, region_levels[r], float(share[r]), float(supply[r]),
                                   a.sigmoid_scale, parts)
            lv = region_levels[r]
            if len(lv) == 1 and not demand_terms[r]:
                # The region's demand cannot change: its cost depends on the total's level only.
                for n in range(len(ks)):
                    b.cost[u[ks[n]]] += weight * float(cost[n])
                missing = sorted(set(range(len(total))) - set(ks.tolist()))
                for k in missing:  # that total cannot hold this region's demand
                    b.upper[u[k]] = 0.0
                continue
            level_now = lv.locate(float(now[r]))
            chosen = np.flatnonzero((ks == k_now) & (idx == level_now))
            lam = [b.col(weight * float(cost[n]), 0.0, 1.0, True, float(chosen.size > 0 and n == chosen[0]))
                   for n in range(len(ks))]
            for k in range(len(total)):
                terms = [(lam[n], 1.0) for n in np.flatnonzero(ks == k).tolist()]
                terms.append((u[k], -1.0))
                b.row(terms, 0.0, 0.0)
            base = float(fixed_at[r]) / unit
            low = dict(demand_terms[r])
            high = dict(demand_terms[r])
            for n in range(len(ks)):
                _add(low, lam[n], -float(lv.lower[idx[n]]) / unit)
                _add(high, lam[n], -float(lv.upper[idx[n]]) / unit)
            b.row(low, -base - LEVEL_SLACK, np.inf)
            b.row(high, -np.inf, -base + LEVEL_SLACK)
        total_terms: dict[int, float] = {}
        for r in range(R):
            for c, v in demand_terms[r].items():
                _add(total_terms, c, v)
        base_total = float(fixed_at.sum()) / unit
        low, high = dict(total_terms), dict(total_terms)
        for k in range(len(total)):
            _add(low, u[k], -float(total.lower[k]) / unit)
            _add(high, u[k], -float(total.upper[k]) / unit)
        b.row(low, -base_total - LEVEL_SLACK, np.inf)
        b.row(high, -np.inf, -base_total + LEVEL_SLACK)
    return exact
