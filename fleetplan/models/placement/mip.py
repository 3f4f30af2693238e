"""Tetris table placement (MAST, OSDI 2024, §3.2-§3.3, Figure 4) as a mixed-integer program.

The paper solves Figure 4 with hill climbing (§3.4) because, written as a MIP, "R(job) must also
be declared as a decision variable constrained by R(table), and the same must be done for all
demand requirements". This module does exactly that, so that the heuristic can be measured
against a proven optimum or bound. The judge stays :mod:`fleetplan.instances.placement.evaluate`;
the model follows its definitions (recurring jobs only, Spark/Presto majority with ties to more
bytes then the lower region index, split ML jobs add no demand and read everything remotely).

Variables (over the tables and planned jobs of the part being solved)::

    x[t, r] in {0, 1}     table t homed in region r, sum_r x[t, r] = 1 (fixed for pinned tables)
    y[j, r] in [0, 1]     ML job j has R(job) = r:  y <= x[t, r] for t in j,
                          y >= sum_{t in j} x[t, r] - (|j| - 1)   (an AND of binaries: exact)
    z[j, r] in {0, 1}     Spark/Presto job j has R(job) = r, sum_r z = 1, and z[j, r] = 1 forces
                          score[j, r] >= score[j, s] (+ eps when s < r) with
                          score = count of the job's tables in r * (1 + 1e-3) + bytes in r / bytes of j
                          (the evaluator's order: count, then bytes, then region index)
    v[j, r] in [0, 1]     share of job j's bytes read locally: v <= its share in r, v <= z[j, r]

Expression 1 is linear in these: ML jobs read ``bytes(j) (1 - sum_r y[j, r])`` across regions,
Spark/Presto jobs ``bytes(j) (1 - sum_r v[j, r])``. Constraints 4-6, the daily move quota and
pinning are linear too. Units: every row is scaled so its coefficients are at most 1 — bytes as
shares of all bytes, a group's GPU-hours as shares of its largest total, CPU and home-training
rows divided by their own totals (in raw bytes the matrix spanned 1e-9..1e13 and HiGHS both
dropped coefficients and once claimed "unbounded"). The non-linear terms are linearised as
follows.

* Storage balance (Expressions 3, 9): ``w3 (B_r / sum B - C_r / sum C)^2`` is convex in the
  bytes B_r homed in r (sum B is constant), so an epigraph variable lies above its tangents at
  a set of breakpoints. Tangents never over-estimate a convex function, so the model's bound is
  a bound on the exact objective; at a breakpoint the tangent touches, so the model is exact
  wherever B_r is a breakpoint. When the subset sums of the table sizes are few enough
  (``max_exact_levels``), every reachable B_r is a breakpoint and the term is exact.
* GPU balance and overload (Expressions 2, 7, 8): for GPU type g and priority p the term
  ``g(D_r, T) = (D_r / T - s_r)^2 + (D_r / T) sigmoid(max(0, D_r - S_r) / tau)`` depends on the
  region's demand D_r *and* on the total placed demand T = sum_r D_r, which varies because a
  split ML job adds no demand. Each (g, p) picks one level of T (binary u[k], an interval
  [c_k, d_k] of T) and every region picks one (T level, D level) pair (binary lam[r, k, i],
  an interval [a_i, b_i] of D_r); the pair costs the minimum of g over its box::

        min over q in [a_i / d_k, min(1, b_i / c_k)] of (q - s_r)^2  +  (a_i / d_k) sigmoid(max(0, a_i - S_r) / tau)

  a valid lower bound, as the share D/T is increasing in D and decreasing in T and the sigmoid
  is increasing. When the subset sums of the group's GPU-hours are few (``max_exact_levels``),
  every level is a single reachable value, the boxes are points and the cost is exact: the
  piecewise-constant function coincides with g on every value D_r and T can take. Otherwise
  the levels are ``grid_levels`` equal intervals and the model under-estimates.

The instance's readings of Figure 4 (:mod:`fleetplan.models.placement`):
``split_ml_demand="largest_region"`` adds, for each ML job that can split, a binary
``w[j, r]`` (sum_r w = 1) that picks the region holding most of its bytes::

    w[j, r] = 1  =>  share[j, r] >= share[j, s] (+ TIE_EPSILON when s < r)   for its other regions s

with ``share[j, r] = sum_{t in j} size(t) / bytes(j) x[t, r]`` (big-M 1 + TIE_EPSILON; ties go
to the lower index as in the judge's argmax, up to the same 1e-5 of the job's bytes as the
Spark/Presto majority), and its GPU-hours count in D_r through w instead of y. Every ML job
then adds its demand, so T is a constant. ``overload_form="combined_high_priority"`` only
changes the groups (their ``parts`` and one combined group per GPU type): the same levels and
pair costs.

What is proven: the model's objective never exceeds the exact objective of the placement it
encodes (with equality in exact mode), so the MIP's dual bound is a lower bound on the exact
optimum in both modes. The plan is always re-scored by the evaluator. One caveat: a Spark/Presto
majority decided by a byte difference below 1e-5 of the job's bytes is within the solver's
tolerances and may be resolved differently from the evaluator (the evaluator's score counts).

Example
-------
>>> from fleetplan.instances import generate
>>> from fleetplan.models.placement import prepare
>>> from fleetplan.models.placement.mip import placement_mip
>>> instance = generate("placement", {"regions": 2, "tables": 4, "jobs": 3}, seed=0)
>>> data = prepare(instance.arrays())
>>> model = placement_mip(data)
>>> sorted(model.x.index_set())[0][1] in (0, 1)
True
"""

from __future__ import annotations

import logging

import numpy as np

from fleetplan.instances.placement import ML, PlacementArrays
from fleetplan.instances.placement.evaluate import demand_regions, job_regions
from fleetplan.lazy import lazy_module
from fleetplan.models.build_clock import BuildTimeout, Clock, _Ticker  # noqa: F401  (re-exported)
from fleetplan.models.placement import (
    COUNT_MARGIN,
    ROW_SAFETY,
    SMALL_COEFFICIENT,
    TIE_EPSILON,
    GpuGroup,
    PlacementData,
)

pyo = lazy_module("pyomo.environ")


def _tables_by_job(data: PlacementData) -> dict[int, list[int]]:
    return {j: data.job_tables(j).tolist() for j in data.jobs.tolist()}


def placement_mip(data: PlacementData, deadline: Clock | None = None) -> pyo.ConcreteModel:
    """The Figure 4 MIP over ``data`` (see the module docstring), objective ``model.cost``.

    ``model.x[t, r]`` exists for every free table and allowed region; pinned tables are
    constants. ``model.components_of`` maps names back for warm starts (:func:`set_placement`).
    ``deadline``: checked every few hundred rows; :class:`BuildTimeout` when it has expired,
    so a time limit covers the build too (500 tables took 54 s to build under a 2 s limit).
    """
    # Pyomo logs an ERROR line for a rule that raises; a BuildTimeout is expected, not an error.
    logger = logging.getLogger("pyomo.core")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        return _placement_mip(data, deadline)
    finally:
        logger.setLevel(level)


def _placement_mip(data: PlacementData, deadline: Clock | None) -> pyo.ConcreteModel:
    arrays = data.arrays
    regions = range(arrays.num_regions)
    size = arrays.table_size
    model = pyo.ConcreteModel(name="tetris_placement")
    model.constant_violations = []  # rows that came out constant and false (see _rows)
    model.build_clock = _Ticker(deadline, every=1)  # a row can hold every table: check each
    free = [t for t in data.tables.tolist() if len(data.allowed[t]) > 1]
    model.x = pyo.Var([(t, r) for t in free for r in data.allowed[t]], domain=pyo.Binary)
    model.assign = pyo.Constraint(free, rule=_rows(model, "assign", lambda m, t: sum(m.x[t, r] for r in regions) == 1))

    def x(t: int, r: int):
        if len(data.allowed[t]) > 1:
            return model.x[t, r]
        return 1 if data.allowed[t][0] == r else 0

    own = _tables_by_job(data)
    ml = [j for j in data.jobs.tolist() if arrays.job_kind[j] == ML]
    other = [j for j in data.jobs.tolist() if arrays.job_kind[j] != ML]
    # ML jobs: y is an AND of the tables' x (a single table's job is that table's x).
    multi = [j for j in ml if len(own[j]) > 1]
    model.y = pyo.Var([(j, r) for j in multi for r in data.job_regions[j]], bounds=(0, 1))
    model.y_le = pyo.Constraint([(j, r, t) for j in multi for r in data.job_regions[j] for t in own[j]],
                                rule=_rows(model, "y_le", lambda m, j, r, t: m.y[j, r] <= x(t, r)))
    model.y_ge = pyo.Constraint(list(model.y.index_set()),
                                rule=_rows(model, "y_ge", lambda m, j, r: m.y[j, r] >= sum(x(t, r) for t in own[j])
                                           - (len(own[j]) - 1)))

    def y(j: int, r: int):
        if r not in data.job_regions[j]:
            return 0
        return model.y[j, r] if len(own[j]) > 1 else x(own[j][0], r)

    demand_at = _demand_block(model, data, own, x, y)

    # Spark/Presto jobs: z picks the majority region, v the bytes read there.
    decided = {j for j in other if len(data.job_regions[j]) == 1}
    voting = [j for j in other if j not in decided]
    model.z = pyo.Var([(j, r) for j in voting for r in data.job_regions[j]], domain=pyo.Binary)
    model.z_one = pyo.Constraint(voting, rule=_rows(model, "z_one", lambda m, j: sum(
        m.z[j, r] for r in data.job_regions[j]) == 1))

    def job_bytes(j: int) -> float:
        return float(size[own[j]].sum())

    def score(j: int, r: int):
        total = max(job_bytes(j), 1e-300)
        return sum(x(t, r) * float(1 + COUNT_MARGIN + size[t] / total) for t in own[j])

    def majority(m, j, r, s):
        big_m = len(own[j]) * (1 + COUNT_MARGIN) + 1 + TIE_EPSILON
        margin = TIE_EPSILON if s < r else 0.0
        return score(j, r) - score(j, s) >= margin - big_m * (1 - m.z[j, r])

    model.majority = pyo.Constraint(
        [(j, r, s) for j in voting for r in data.job_regions[j] for s in regions if s != r], rule=_rows(model, "majority", majority))
    # v is the *fraction* of the job's bytes read locally, so its rows have coefficients in [0, 1]
    # (in bytes they reached 1e13 next to binaries, and HiGHS lost precision).
    model.v = pyo.Var([(j, r) for j in voting for r in data.job_regions[j]], bounds=(0, 1))
    model.v_bytes = pyo.Constraint(list(model.v.index_set()), rule=_rows(model, "v_bytes", lambda m, j, r: m.v[j, r] <= sum(
        float(size[t] / max(job_bytes(j), 1e-300)) * x(t, r) for t in own[j])))
    model.v_region = pyo.Constraint(list(model.v.index_set()), rule=_rows(
        model, "v_region", lambda m, j, r: m.v[j, r] <= m.z[j, r]))

    def z(j: int, r: int):
        if j in decided:
            return 1 if data.job_regions[j][0] == r else 0
        return model.z[j, r] if r in data.job_regions[j] else 0

    def region_of(j: int, r: int):
        return y(j, r) if arrays.job_kind[j] == ML else z(j, r)

    traffic = 0
    for j in ml:
        model.build_clock.tick()
        traffic += arrays.job_weight[j] * job_bytes(j) * (1 - sum(y(j, r) for r in data.job_regions[j]))
    for j in other:
        if j in decided:
            local = sum(size[t] for t in own[j] if data.allowed[t] == data.job_regions[j])
            traffic += arrays.job_weight[j] * (job_bytes(j) - local)
        else:
            traffic += arrays.job_weight[j] * job_bytes(j) * (1 - sum(model.v[j, r] for r in data.job_regions[j]))
    model.traffic = pyo.Expression(expr=arrays.w_traffic * traffic)

    _gpu_block(model, data, demand_at)
    # Bytes enter every row as shares of all bytes (sizes ~1e9-1e13 next to binaries made the
    # matrix span 1e-9..1e13; HiGHS dropped coefficients and once reported "unbounded").
    unit = byte_unit(arrays)
    stored = {r: sum(float(size[t] / unit) * x(t, r) for t in data.tables.tolist()) for r in regions}
    _storage_block(model, data)
    _constraints(model, data, stored, x, region_of)
    model.cost = pyo.Objective(expr=model.traffic + model.gpu + model.storage, sense=pyo.minimize)
    return model


def _rows(model: pyo.ConcreteModel, name: str, rule):
    """``rule`` for a Constraint that may resolve to a constant: a row whose terms are all
    fixed (pinned tables, decided jobs) comes out as a Python bool, which Pyomo refuses to
    build. A true one is skipped; a false one is skipped too and named in
    ``model.constant_violations``, so the solver reports the model infeasible instead of
    crashing."""
    ticker = model.build_clock

    def checked(m, *index):
        ticker.tick()
        index = tuple(i for i in index if i is not None)  # a scalar row is called with None
        return _row(model, f"{name}{list(index) if index else ''}", rule(m, *index))
    return checked


def _row(model: pyo.ConcreteModel, name: str, expr):
    if isinstance(expr, (bool, np.bool_)):
        if not expr:
            model.constant_violations.append(name)
        return pyo.Constraint.Skip
    return expr


def byte_unit(arrays: PlacementArrays) -> float:
    """Bytes per model unit: all bytes of the instance (so stored bytes are shares in [0, 1])."""
    return max(float(arrays.table_size.sum()), 1e-300)


def hour_unit(group: GpuGroup) -> float:
    """GPU-hours per model unit in a group's rows: the most its demand can total."""
    return max(float(group.total.upper.max(initial=0.0)), 1e-300)


def _demand_block(model: pyo.ConcreteModel, data: PlacementData, own: dict[int, list[int]], x, y):
    """Where each ML job's GPU-hours count in D_r (``demand_at(j, r)``): R(job)'s indicator y,
    or under ``split_ml_demand="largest_region"`` the region holding most of its bytes (binary
    w, see the module docstring)."""
    size = data.arrays.table_size
    where, mode = data.demand_regions, data.demand_mode
    largest = [j for j, m in mode.items() if m == "largest" and len(where[j]) > 1]
    model.w = pyo.Var([(j, r) for j in largest for r in where[j]], domain=pyo.Binary)
    model.w_one = pyo.Constraint(largest, rule=_rows(model, "w_one", lambda m, j: sum(m.w[j, r] for r in where[j]) == 1))

    def share(j: int, r: int):
        total = float(size[own[j]].sum())
        return sum(float(size[t] / total) * x(t, r) for t in own[j])

    def largest_row(m, j, r, s):
        margin = TIE_EPSILON if s < r else 0.0
        return share(j, r) - share(j, s) >= margin - (1 + TIE_EPSILON) * (1 - m.w[j, r])

    model.w_largest = pyo.Constraint([(j, r, s) for j in largest for r in where[j] for s in where[j] if s != r],
                                     rule=_rows(model, "w_largest", largest_row))

    def demand_at(j: int, r: int):
        kind = mode.get(j, "region")
        if kind == "region":
            return y(j, r)
        if kind == "fixed":
            return 1 if r == where[j][0] else 0
        if kind == "zero":  # no bytes: a split job counts in region 0, as the judge's argmax
            return y(j, r) + ((1 - sum(y(j, s) for s in data.job_regions[j])) if r == 0 else 0)
        if r not in where[j]:
            return 0
        return model.w[j, r] if len(where[j]) > 1 else 1

    return demand_at


def _gpu_block(model: pyo.ConcreteModel, data: PlacementData, y) -> None:
    """Expressions 2, 7, 8 by levels; ``y(j, r)``: job j's GPU-hours count in region r."""
    arrays = data.arrays
    groups = data.groups
    model.u = pyo.Var([(g, k) for g, group in enumerate(groups) for k in range(len(group.total))],
                      domain=pyo.Binary)
    lam_index = [(g, r, n) for g, group in enumerate(groups) for r in range(arrays.num_regions)
                 for n in range(len(group.pairs[r][0]))]
    model.lam = pyo.Var(lam_index, domain=pyo.Binary)
    model.u_one = pyo.Constraint(range(len(groups)), rule=_rows(model, "u_one", lambda m, g: sum(
        m.u[g, k] for k in range(len(groups[g].total))) == 1))

    units = [hour_unit(group) for group in groups]

    def demand(g: int, r: int):  # in units of hour_unit(group): coefficients in (0, 1]
        return sum(float(arrays.job_gpu_hours[j] / units[g]) * y(j, r) for j in groups[g].jobs.tolist())

    def pair_matches_level(m, g, r, k):
        ks = groups[g].pairs[r][0]
        return sum(m.lam[g, r, n] for n in np.flatnonzero(ks == k).tolist()) == m.u[g, k]

    model.pair_level = pyo.Constraint(
        [(g, r, k) for g, group in enumerate(groups) for r in range(arrays.num_regions)
         for k in range(len(group.total))], rule=_rows(model, "pair_level", pair_matches_level))

    def demand_low(m, g, r):
        levels = groups[g].region_levels[r]
        _, i, _ = groups[g].pairs[r]
        return demand(g, r) >= sum(levels.lower[i[n]] / units[g] * m.lam[g, r, n] for n in range(len(i)))

    def demand_high(m, g, r):
        levels = groups[g].region_levels[r]
        _, i, _ = groups[g].pairs[r]
        return demand(g, r) <= sum(levels.upper[i[n]] / units[g] * m.lam[g, r, n] for n in range(len(i)))

    group_regions = [(g, r) for g in range(len(groups)) for r in range(arrays.num_regions)]
    model.demand_low = pyo.Constraint(group_regions, rule=_rows(model, "demand_low", demand_low))
    model.demand_high = pyo.Constraint(group_regions, rule=_rows(model, "demand_high", demand_high))

    def total(g: int):
        return sum(demand(g, r) for r in range(arrays.num_regions))

    model.total_low = pyo.Constraint(range(len(groups)), rule=_rows(model, "total_low", lambda m, g: total(g) >= sum(
        groups[g].total.lower[k] / units[g] * m.u[g, k] for k in range(len(groups[g].total)))))
    model.total_high = pyo.Constraint(range(len(groups)), rule=_rows(model, "total_high", lambda m, g: total(g) <= sum(
        groups[g].total.upper[k] / units[g] * m.u[g, k] for k in range(len(groups[g].total)))))
    model.gpu = pyo.Expression(expr=sum(
        groups[g].weight * float(groups[g].pairs[r][2][n]) * model.lam[g, r, n]
        for (g, r, n) in lam_index if groups[g].pairs[r][2][n] != 0))


def _storage_block(model: pyo.ConcreteModel, data: PlacementData) -> None:
    arrays = data.arrays
    if not data.storage_points:
        model.storage = pyo.Expression(expr=0)
        return
    total_bytes = float(arrays.table_size.sum())
    unit = byte_unit(arrays)  # ``stored`` is in these units
    capacity_share = arrays.storage_capacity / max(arrays.storage_capacity.sum(), 1e-300)
    weight = arrays.w_storage
    model.e = pyo.Var(range(arrays.num_regions), bounds=(0, None))
    size = arrays.table_size / unit
    free = [t for t in data.tables.tolist() if len(data.allowed[t]) > 1]
    cuts = []
    for r, points in enumerate(data.storage_points):
        base = float(size[[t for t in data.tables.tolist() if data.allowed[t] == [r]]].sum())
        for p in points.tolist():
            gap = p / total_bytes - capacity_share[r]
            # Python floats: a numpy float times a Pyomo variable takes numpy's slow ufunc path.
            cuts.append((r, float(weight * gap * gap), float(2 * weight * gap * unit / total_bytes), p / unit, base))

    def tangent(m, c):
        # e >= value + slope (stored share - point). Near the minimum slope x size falls below
        # HiGHS's 1e-9 cut-off and HiGHS drops it (196 coefficients at 200 tables); such a
        # term moves into the constant at its worst x in [0, 1], so the cut stays below the curve.
        # (A stored-share variable per region avoids the products, but made the root LP of 500
        # tables several times slower.)
        r, value, slope, point, base = cuts[c]
        coefficients = {t: slope * float(size[t]) for t in free if r in data.allowed[t]}
        kept = sum(a * m.x[t, r] for t, a in coefficients.items() if abs(a) > SMALL_COEFFICIENT)
        folded = sum(min(a, 0.0) for a in coefficients.values() if abs(a) <= SMALL_COEFFICIENT)
        return m.e[r] >= value + slope * (base - point) + folded + kept

    model.storage_tangent = pyo.Constraint(range(len(cuts)), rule=_rows(model, "storage_tangent", tangent))
    model.storage = pyo.Expression(expr=sum(model.e[r] for r in range(arrays.num_regions)))


def _constraints(model: pyo.ConcreteModel, data: PlacementData, stored: dict, x, region_of) -> None:
    arrays = data.arrays
    regions = range(arrays.num_regions)
    if not data.whole:
        return
    model.storage_capacity = pyo.Constraint(
        [r for r in regions if not isinstance(stored[r], (int, float))],
        rule=_rows(model, "storage_capacity", lambda m, r: stored[r] <= float(
            arrays.storage_capacity[r] / byte_unit(arrays)) - ROW_SAFETY))
    jobs = data.jobs.tolist()
    cpu_rows = []
    for a in range(len(arrays.app_ids)):
        members = [j for j in jobs if arrays.job_app[j] == a and arrays.job_cpu_hours[j] > 0]
        for r in regions:
            candidates = [j for j in members if r in data.job_regions[j]]
            if candidates and arrays.job_cpu_hours[candidates].sum() > arrays.cpu_capacity[a, r]:
                cpu_rows.append((a, r, candidates))
    def cpu_row(m, c):  # divided by the row's CPU-hours, so its coefficients are in (0, 1]
        a, r, candidates = cpu_rows[c]
        scale = float(arrays.job_cpu_hours[candidates].sum())
        return sum(float(arrays.job_cpu_hours[j] / scale) * region_of(j, r) for j in candidates) \
            <= float(arrays.cpu_capacity[a, r] / scale) - ROW_SAFETY

    model.cpu = pyo.Constraint(range(len(cpu_rows)), rule=_rows(model, "cpu", cpu_row))
    high = [j for j in jobs if arrays.high_priority_ml[j]]
    hours = float(arrays.job_gpu_hours[high].sum()) if high else 0.0
    if arrays.home_training_threshold > 0 and hours > 0:
        model.home_training = pyo.Constraint(rule=_rows(model, "home_training", lambda m: sum(
            float(arrays.job_gpu_hours[j] / hours) * region_of(j, r) for j in high for r in data.job_regions[j]
            if arrays.gpu_supply[r, arrays.job_gpu_type[j]] > 0) >= min(1.0, arrays.home_training_threshold + ROW_SAFETY)))
    if np.isfinite(arrays.move_quota_bytes):
        moved = [t for t in data.tables.tolist() if len(data.allowed[t]) > 1]
        if moved and arrays.table_size[moved].sum() > arrays.move_quota_bytes:
            unit = byte_unit(arrays)
            model.move_quota = pyo.Constraint(rule=_rows(model, "move_quota", lambda m: sum(
                float(arrays.table_size[t] / unit) * (1 - x(t, int(arrays.table_home[t]))) for t in moved)
                <= arrays.move_quota_bytes / unit - ROW_SAFETY))


def set_placement(model: pyo.ConcreteModel, data: PlacementData, home: np.ndarray) -> None:
    """Set every variable of ``model`` to the values ``home`` implies (a MIP start)."""
    arrays = data.arrays
    home = np.asarray(home, dtype=np.int64)
    for (t, r) in model.x:
        model.x[t, r].set_value(float(home[t] == r))
    region = job_regions(arrays, home)
    counted = demand_regions(arrays, home, region)
    for (j, r) in model.y:
        model.y[j, r].set_value(float(region[j] == r))
    for (j, r) in model.w:
        model.w[j, r].set_value(float(counted[j] == r))
    size = arrays.table_size
    for (j, r) in model.z:
        model.z[j, r].set_value(float(region[j] == r))
    for (j, r) in model.v:
        own = data.job_tables(j)
        local = float(size[own][home[own] == r].sum()) / max(float(size[own].sum()), 1e-300)
        model.v[j, r].set_value(local if region[j] == r else 0.0)
    for g, group in enumerate(data.groups):
        placed = [j for j in group.jobs.tolist() if counted[j] >= 0]
        demand = np.bincount(counted[placed], weights=arrays.job_gpu_hours[placed],
                             minlength=arrays.num_regions) if placed else np.zeros(arrays.num_regions)
        k = group.total.locate(float(demand.sum()))
        for kk in range(len(group.total)):
            model.u[g, kk].set_value(float(kk == k))
        for r in range(arrays.num_regions):
            ks, i, _ = group.pairs[r]
            level = group.region_levels[r].locate(float(demand[r]))
            chosen = np.flatnonzero((ks == k) & (i == level))
            for n in range(len(ks)):
                model.lam[g, r, n].set_value(float(chosen.size > 0 and n == chosen[0]))
    if hasattr(model, "e"):
        stored = np.bincount(home, weights=size, minlength=arrays.num_regions)
        total_bytes = float(size.sum())
        share = arrays.storage_capacity / max(arrays.storage_capacity.sum(), 1e-300)
        for r in range(arrays.num_regions):
            model.e[r].set_value(arrays.w_storage * (stored[r] / total_bytes - share[r]) ** 2)



def read_placement(model: pyo.ConcreteModel, data: PlacementData, home: np.ndarray | None = None) -> np.ndarray:
    """The home region of every table from the solved ``model`` (pinned tables keep theirs;
    tables outside the modelled part keep ``home``)."""
    arrays = data.arrays
    result = np.array(arrays.table_home if home is None else home, dtype=np.int64, copy=True)
    for t in data.tables.tolist():
        if len(data.allowed[t]) == 1:
            result[t] = data.allowed[t][0]
        else:
            values = [pyo.value(model.x[t, r]) or 0.0 for r in data.allowed[t]]
            result[t] = data.allowed[t][int(np.argmax(values))]
    return result


__all__ = ["BuildTimeout", "byte_unit", "hour_unit", "placement_mip", "read_placement", "set_placement"]
