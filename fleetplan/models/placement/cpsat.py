"""Tetris table placement (MAST, OSDI 2024, §3.3, Figure 4) as an OR-Tools CP-SAT model.

The same formulation as the MIP of :mod:`fleetplan.models.placement` (read its docstring first),
in integers, because CP-SAT accepts only integer data:

* the objective is multiplied by ``scale = OBJECTIVE_RANGE / U``, U an upper bound of the
  objective (all bytes read remotely, every GPU term at its maximum 3 w2 w_p, storage at 2 w3),
  and each coefficient rounded: traffic coefficients to the nearest integer, the costs of the
  GPU and storage levels *down* (they stay lower bounds);
* GPU-hours are counted in units of ``hours_unit`` (max GPU-hours / HOURS_RANGE) and bytes in
  units of ``bytes_unit`` (total bytes / BYTES_RANGE), rounded to the nearest unit. Rounding
  moves a sum of n values by at most n/2 units, so each demand or bytes level is widened by
  twice that before its cost bound is taken: the integer model still under-estimates;
* capacities (storage, CPU, move quota, home training) are checked with sizes rounded up and
  capacities down: a plan the model accepts is feasible for the evaluator;
* the Spark/Presto majority compares ``count * (job bytes in units + 1) + bytes in units``
  exactly in integers, ties going to the lower region index; bytes are in units of 1e-6 of the
  job's bytes, so a tie closer than that may be broken differently from the evaluator.

The instance's readings of Figure 4 are those of the MIP: under
``split_ml_demand="largest_region"`` a boolean ``w[j, r]`` per ML job that can split picks the
region holding most of its bytes (``score_r >= score_s`` + 1 when s < r, scores in units of 1e-6
of the job's bytes, so ties closer than that may be broken differently from the judge); under
``overload_form="combined_high_priority"`` the groups carry their ``parts``.

What is proven: for every placement the model accepts, ``model objective / scale`` is at most
the exact objective plus ``rounding_slack`` (half a unit per rounded traffic coefficient), so
``(CP-SAT bound - rounding_slack) / scale`` is a lower bound on the exact optimum among the
placements the model accepts — all feasible ones, except placements within rounding of a
capacity, which the model rejects.

>>> from fleetplan.instances import generate
>>> from fleetplan.models.placement import prepare
>>> instance = generate("placement", {"regions": 2, "tables": 4, "jobs": 3}, seed=0)
>>> cpsat = placement_cpsat(prepare(instance.arrays()))
>>> cpsat.scale > 0
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fleetplan.instances.placement import ML
from fleetplan.lazy import lazy_module
from fleetplan.models.build_clock import Clock, _Ticker
from fleetplan.models.placement import PlacementData, gpu_cost_lower_bound

cp_model = lazy_module("ortools.sat.python.cp_model")

OBJECTIVE_RANGE = 1e9
HOURS_RANGE = 1e6
BYTES_RANGE = 1e9
SCORE_RANGE = 1_000_000


@dataclass
class CpsatPlacement:
    """The CP-SAT model and what reads its solution back."""

    model: cp_model.CpModel
    x: dict[tuple[int, int], cp_model.IntVar]
    scale: float
    offset: int  # constant part of the integer objective
    rounding_slack: float  # in integer objective units
    hints: dict = field(default_factory=dict)


def _storage_lower_bound(lo: np.ndarray, hi: np.ndarray, total: float, share: float, weight: float) -> np.ndarray:
    nearest = np.clip(share * total, lo, hi)
    return weight * np.square(nearest / total - share)


def placement_cpsat(data: PlacementData, deadline: Clock | None = None) -> CpsatPlacement:
    """Build the CP-SAT model of ``data`` (see the module docstring); :class:`BuildTimeout`
    when ``deadline`` expires during the build."""
    ticker = _Ticker(deadline, every=32)
    arrays = data.arrays
    regions = range(arrays.num_regions)
    size = arrays.table_size
    model = cp_model.CpModel()
    own = {j: data.job_tables(j).tolist() for j in data.jobs.tolist()}
    job_bytes = {j: float(size[own[j]].sum()) for j in own}

    upper = arrays.w_traffic * sum(arrays.job_weight[j] * job_bytes[j] for j in own)
    upper += sum(3 * group.weight for group in data.groups) + (2 * arrays.w_storage if data.storage_points else 0)
    scale = float(OBJECTIVE_RANGE / max(upper, 1e-12))

    x = {}
    for t in data.tables.tolist():
        ticker.tick()
        for r in data.allowed[t]:
            x[t, r] = model.new_bool_var(f"x_{t}_{r}") if len(data.allowed[t]) > 1 else model.new_constant(1)
        if len(data.allowed[t]) > 1:
            model.add_exactly_one(x[t, r] for r in data.allowed[t])

    def xv(t: int, r: int):
        return x.get((t, r), 0)

    objective = []
    offset = 0
    slack = 0.0
    region_of = {}
    for j in own:
        ticker.tick()
        n = len(own[j])
        if arrays.job_kind[j] == ML:
            for r in data.job_regions[j]:
                if n == 1:
                    region_of[j, r] = xv(own[j][0], r)
                    continue
                y = model.new_bool_var(f"y_{j}_{r}")
                for t in own[j]:
                    model.add_implication(y, xv(t, r))
                model.add(sum(xv(t, r) for t in own[j]) - (n - 1) <= y)
                region_of[j, r] = y
            coefficient = round(scale * arrays.w_traffic * arrays.job_weight[j] * job_bytes[j])
            offset += coefficient
            objective += [-coefficient * region_of[j, r] for r in data.job_regions[j]]
            slack += 0.5
            continue
        unit = max(job_bytes[j], 1e-300) / SCORE_RANGE
        units = {t: round(size[t] / unit) for t in own[j]}
        total_units = sum(units.values())
        z = {r: model.new_bool_var(f"z_{j}_{r}") for r in data.job_regions[j]}
        model.add_exactly_one(z.values())

        def score(r: int, j=j, units=units, total_units=total_units):
            return sum(xv(t, r) * ((total_units + 1) + units[t]) for t in own[j])

        for r in z:
            for s in regions:
                if s != r:
                    model.add(score(r) >= score(s) + (1 if s < r else 0)).only_enforce_if(z[r])
            region_of[j, r] = z[r]
        for t in own[j]:
            coefficient = round(scale * arrays.w_traffic * arrays.job_weight[j] * size[t])
            offset += coefficient
            slack += 0.5
            for r in z:
                if (t, r) not in x:
                    continue
                local = model.new_bool_var(f"a_{j}_{t}_{r}")
                model.add_implication(local, z[r])
                model.add_implication(local, x[t, r])
                objective.append(-coefficient * local)

    objective += _gpu_terms(model, data, _demand_literals(model, data, own, xv, region_of), scale, ticker)
    objective += _storage_terms(model, data, xv, scale)
    _constraints(model, data, xv, region_of)
    model.minimize(sum(objective) + offset)
    return CpsatPlacement(model=model, x=x, scale=scale, offset=offset, rounding_slack=slack)


def _demand_literals(model: cp_model.CpModel, data: PlacementData, own: dict[int, list[int]], xv,
                     region_of: dict) -> dict:
    """Where each ML job's GPU-hours count: ``{(j, r): literal or expression}`` — R(job)'s
    literals, or under ``split_ml_demand="largest_region"`` the region holding most of its
    bytes (a boolean w per region, see the module docstring)."""
    where, mode = data.demand_regions, data.demand_mode
    if all(kind == "region" for kind in mode.values()):
        return region_of
    size = data.arrays.table_size
    out = {key: value for key, value in region_of.items() if mode.get(key[0], "region") == "region"}
    for j, kind in mode.items():
        if kind == "fixed":
            out[j, where[j][0]] = 1
        elif kind == "zero":  # no bytes: a split job counts in region 0, as the judge's argmax
            for r in where[j]:
                out[j, r] = region_of.get((j, r), 0) + (
                    (1 - sum(region_of[j, s] for s in data.job_regions[j])) if r == 0 else 0)
        elif kind == "largest":
            if len(where[j]) == 1:
                out[j, where[j][0]] = 1
                continue
            unit = float(size[own[j]].sum()) / SCORE_RANGE
            units = {t: round(size[t] / unit) for t in own[j]}
            w = {r: model.new_bool_var(f"w_{j}_{r}") for r in where[j]}
            model.add_exactly_one(w.values())

            def held(r: int, j=j, units=units):
                return sum(units[t] * xv(t, r) for t in own[j])

            for r in where[j]:
                for s in where[j]:
                    if s != r:
                        model.add(held(r) >= held(s) + (1 if s < r else 0)).only_enforce_if(w[r])
                out[j, r] = w[r]
    return out


def _choose_levels(model: cp_model.CpModel, value, lower: np.ndarray, upper: np.ndarray,
                   costs: np.ndarray, name: str) -> tuple[list, list]:
    """One boolean per level; ``value`` (an integer expression) within the chosen level."""
    picks = [model.new_bool_var(f"{name}_{n}") for n in range(len(lower))]
    model.add_exactly_one(picks)
    model.add(value >= sum(int(lo) * p for lo, p in zip(lower, picks, strict=True)))
    model.add(value <= sum(int(hi) * p for hi, p in zip(upper, picks, strict=True)))
    return picks, [int(c) * p for c, p in zip(costs, picks, strict=True) if int(c) != 0]


def _gpu_terms(model: cp_model.CpModel, data: PlacementData, region_of: dict, scale: float,
               ticker: _Ticker | None = None) -> list:
    arrays = data.arrays
    terms = []
    for g, group in enumerate(data.groups):
        jobs = group.jobs.tolist()
        hours = arrays.job_gpu_hours[group.jobs]
        unit = max(float(hours.max(initial=0.0)), 1e-12) / HOURS_RANGE
        units = np.rint(hours / unit).astype(np.int64)
        # Rounding moves a sum of len(jobs) values by at most half a unit each; widen by twice.
        widen = len(jobs) * unit
        total_lo = np.floor((group.total.lower - widen) / unit)
        total_hi = np.ceil((group.total.upper + widen) / unit)
        u = [model.new_bool_var(f"u_{g}_{k}") for k in range(len(group.total))]
        model.add_exactly_one(u)
        total = sum(int(h) * region_of[j, r] for j, h in zip(jobs, units, strict=True)
                    for r in data.demand_regions.get(j, data.job_regions[j]))
        model.add(total >= sum(int(v) * b for v, b in zip(total_lo, u, strict=True)))
        model.add(total <= sum(int(v) * b for v, b in zip(total_hi, u, strict=True)))
        share_total = arrays.gpu_supply[:, group.gpu_type].sum()
        parts = group.parts
        for r in range(arrays.num_regions):
            if ticker is not None:
                ticker.tick()
            ks, index, _ = group.pairs[r]
            levels = group.region_levels[r]
            d_lo = np.maximum(levels.lower[index] - widen, 0.0)
            d_hi = levels.upper[index] + widen
            share = arrays.gpu_supply[r, group.gpu_type] / share_total if share_total > 0 else 0.0
            costs = np.zeros(len(ks))
            for k in np.unique(ks).tolist():
                sel = ks == k
                t_lo = max(group.total.lower[k] - widen, 0.0)
                t_hi = group.total.upper[k] + widen if group.total.upper[k] > 0 else 0.0
                costs[sel] = gpu_cost_lower_bound(d_lo[sel], d_hi[sel], t_lo, t_hi, share,
                                                  float(arrays.gpu_supply[r, group.gpu_type]),
                                                  arrays.sigmoid_scale, parts)
            costs = np.floor(scale * group.weight * costs)
            demand = sum(int(h) * region_of[j, r] for j, h in zip(jobs, units, strict=True)
                         if (j, r) in region_of)
            picks, cost_terms = _choose_levels(model, demand, np.floor(d_lo / unit), np.ceil(d_hi / unit),
                                               costs, f"lam_{g}_{r}")
            for k in range(len(group.total)):
                model.add(sum(p for p, kk in zip(picks, ks, strict=True) if kk == k) == u[k])
            terms += cost_terms
    return terms


def _storage_terms(model: cp_model.CpModel, data: PlacementData, xv, scale: float) -> list:
    arrays = data.arrays
    if not data.storage_points:
        return []
    size = arrays.table_size
    total = float(size.sum())
    unit = total / BYTES_RANGE
    units = np.rint(size / unit).astype(np.int64)
    share = arrays.storage_capacity / max(arrays.storage_capacity.sum(), 1e-300)
    terms = []
    for r, points in enumerate(data.storage_points):
        if data.storage_exact:
            lower, upper = points, points
        else:
            lower, upper = points[:-1], points[1:]
        widen = len(data.tables) * unit
        lower, upper = np.maximum(lower - widen, 0.0), upper + widen
        costs = np.floor(scale * _storage_lower_bound(lower, upper, total, share[r], arrays.w_storage))
        stored = sum(int(units[t]) * xv(t, r) for t in data.tables.tolist())
        _, cost_terms = _choose_levels(model, stored, np.floor(lower / unit), np.ceil(upper / unit),
                                       costs, f"store_{r}")
        terms += cost_terms
    return terms


def _constraints(model: cp_model.CpModel, data: PlacementData, xv, region_of: dict) -> None:
    if not data.whole:
        return
    arrays = data.arrays
    size = arrays.table_size
    unit = max(float(size.sum()), 1e-300) / BYTES_RANGE
    up = np.ceil(size / unit).astype(np.int64)
    for r in range(arrays.num_regions):
        if size.sum() > arrays.storage_capacity[r]:
            model.add(sum(int(up[t]) * xv(t, r) for t in data.tables.tolist())
                      <= math.floor(arrays.storage_capacity[r] / unit))
    jobs = data.jobs.tolist()
    cpu = arrays.job_cpu_hours
    cpu_unit = max(float(cpu[jobs].sum()) if jobs else 0.0, 1e-12) / HOURS_RANGE
    for a in range(len(arrays.app_ids)):
        members = [j for j in jobs if arrays.job_app[j] == a and cpu[j] > 0]
        for r in range(arrays.num_regions):
            candidates = [j for j in members if (j, r) in region_of]
            if candidates and cpu[candidates].sum() > arrays.cpu_capacity[a, r]:
                model.add(sum(math.ceil(cpu[j] / cpu_unit) * region_of[j, r] for j in candidates)
                          <= math.floor(arrays.cpu_capacity[a, r] / cpu_unit))
    high = [j for j in jobs if arrays.high_priority_ml[j]]
    hours = arrays.job_gpu_hours
    if arrays.home_training_threshold > 0 and high and hours[high].sum() > 0:
        hour_unit = float(hours[high].sum()) / HOURS_RANGE
        model.add(sum(math.floor(hours[j] / hour_unit) * region_of[j, r] for j in high
                      for r in data.job_regions[j]
                      if arrays.gpu_supply[r, arrays.job_gpu_type[j]] > 0 and (j, r) in region_of)
                  >= math.ceil(arrays.home_training_threshold * hours[high].sum() / hour_unit))
    if np.isfinite(arrays.move_quota_bytes):
        moved = [t for t in data.tables.tolist() if len(data.allowed[t]) > 1]
        if moved and size[moved].sum() > arrays.move_quota_bytes:
            model.add(sum(int(up[t]) * (1 - xv(t, int(arrays.table_home[t]))) for t in moved)
                      <= math.floor(arrays.move_quota_bytes / unit))


def read_cpsat_placement(cpsat: CpsatPlacement, solver: cp_model.CpSolver, data: PlacementData,
                         home: np.ndarray) -> np.ndarray:
    """Home regions from a CP-SAT solution (tables outside ``data`` keep ``home``)."""
    result = np.array(home, dtype=np.int64, copy=True)
    for t in data.tables.tolist():
        if len(data.allowed[t]) == 1:
            result[t] = data.allowed[t][0]
            continue
        for r in data.allowed[t]:
            if solver.boolean_value(cpsat.x[t, r]):
                result[t] = r
    return result


def add_placement_hint(cpsat: CpsatPlacement, data: PlacementData, home: np.ndarray) -> None:
    """Hint the solver with a placement (CP-SAT completes the other variables)."""
    for (t, r), var in cpsat.x.items():
        if len(data.allowed[t]) > 1:
            cpsat.model.add_hint(var, bool(home[t] == r))
