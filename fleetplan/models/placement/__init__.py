"""Tetris table placement (MAST, OSDI 2024, §3.2-§3.3, Figure 4): what the exact models share.

:func:`prepare` turns an instance's arrays (or one part of it) into :class:`PlacementData`: the
free tables and their allowed regions, each job's possible regions, the storage breakpoints and,
per (GPU type, priority), the levels of demand the MIP's piecewise costs are built on
(:class:`Levels`, :class:`GpuGroup`, :func:`gpu_cost_lower_bound`). The Pyomo MIP is
:mod:`fleetplan.models.placement.mip` (its docstring derives the model and what it proves), the
CP-SAT model :mod:`fleetplan.models.placement.cpsat`.

The instance's readings of Figure 4 are modelled exactly by both:

* ``split_ml_demand="largest_region"``: each planned ML job has *demand regions*
  (``PlacementData.demand_regions``) and a mode (``demand_mode``): ``"region"`` — its demand
  goes where R(job) is (it cannot split); ``"fixed"`` — its tables are pinned apart, its
  largest region is a constant; ``"largest"`` — a binary ``w[j, r]`` per region picks the
  region holding most of its bytes, ties to the lowest index, by the same big-M comparisons
  as the Spark/Presto majority (so a tie closer than ``TIE_EPSILON`` of the job's bytes, or
  CP-SAT's 1e-6 unit, may be resolved differently from the judge); ``"zero"`` — its tables
  hold no bytes, so a split job counts in region 0 (the judge's argmax of zeros): R(job)'s
  indicator plus ``[r = 0] (1 - sum_r R(job)'s indicators)``, linear. Every such job always adds
  its demand, so the groups' totals T do not depend on the placement.
* ``overload_form="combined_high_priority"``: the groups of the high levels keep only
  Expression 7 (``GpuGroup.parts = (1, 0)``), and one more group per GPU type holds all its
  high-priority jobs with Expression 8 alone (``parts = (0, 1)``, weight w2 times the sum of
  the high levels' w_p): the same levels and pair costs, over the combined demand.

Example
-------
>>> from fleetplan.instances import generate
>>> from fleetplan.models.placement import prepare
>>> data = prepare(generate("placement", {"regions": 2, "tables": 4, "jobs": 3}, seed=0).arrays())
>>> data.arrays.num_regions
2
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fleetplan.instances.placement import ML, PlacementArrays
from fleetplan.instances.placement.evaluate import sigmoid
from fleetplan.models.build_clock import BuildTimeout, Clock, _Ticker  # noqa: F401  (re-exported)

# Spark/Presto majority score: count * (1 + COUNT_MARGIN) + bytes share, and a strict "beats a
# lower index" by TIE_EPSILON; both well above HiGHS's 1e-6 feasibility tolerance.
COUNT_MARGIN = 1e-3
TIE_EPSILON = 1e-5
# Coefficients HiGHS would drop (its small_matrix_value is 1e-9) are folded into constants.
SMALL_COEFFICIENT = 1e-8
# The capacity, CPU, home-training and quota rows are tightened by this much (their units make
# coefficients at most 1): HiGHS accepts a row violated by up to its feasibility tolerance
# (1e-6), and a quota row slipped by 3e-6 of all bytes (1.2e7 bytes) on a 100-table instance,
# which the judge rightly calls a violation. The price: a plan within this margin of a capacity
# is outside the model, so the model's bound is proven for the tightened rows (the solver says
# so, and a bound a judged plan beats is dropped).
ROW_SAFETY = 2e-6
# Relative tolerance when deduplicating subset sums of floats.
SUM_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Levels:
    """Intervals [lower[k], upper[k]] one quantity can fall in; ``exact`` when each is a single
    reachable value and every reachable value is listed."""

    lower: np.ndarray
    upper: np.ndarray
    exact: bool

    def __len__(self) -> int:
        return len(self.lower)

    def locate(self, value: float) -> int:
        """The level holding ``value`` (nearest for exact levels, against float noise)."""
        if self.exact:
            return int(np.argmin(np.abs(self.lower - value)))
        scale = max(1.0, float(np.abs(self.upper).max(initial=0.0)))
        inside = np.flatnonzero((self.lower <= value + 1e-9 * scale) & (value <= self.upper + 1e-9 * scale))
        return int(inside[0]) if inside.size else int(np.argmin(np.abs(self.lower - value)))


def subset_sums(values: np.ndarray, base: float = 0.0, limit: int = 64,
                clock: Clock | None = None) -> np.ndarray | None:
    """Every value of ``base + sum(subset of values)``, sorted; None when there are more than
    ``limit`` distinct ones. Checks ``clock`` as it goes (:class:`BuildTimeout`): with many
    equal values the sums stay few and every value is merged in."""
    sums = np.array([base])
    scale = max(1.0, abs(base) + float(np.abs(values).sum()))
    ticker = _Ticker(clock, every=16)
    for value in np.asarray(values, dtype=float):
        ticker.tick()
        merged = np.sort(np.concatenate([sums, sums + value]))
        keep = np.concatenate([[True], np.diff(merged) > SUM_TOLERANCE * scale])
        sums = merged[keep]
        if len(sums) > limit:
            return None
    return sums


def make_levels(values: np.ndarray, base: float, max_exact: int, grid: int,
                zero_point: bool = False, clock: Clock | None = None) -> Levels:
    """Levels of ``base + sum(subset of values)``: exact points when they are few, else ``grid``
    equal intervals over the range (with ``zero_point``, 0 gets its own point level)."""
    sums = subset_sums(values, base, max_exact, clock) if len(values) else np.array([base])
    if sums is not None:
        return Levels(sums, sums.copy(), True)
    values = np.asarray(values, dtype=float)
    low, high = base, base + float(values.sum())
    points: list[tuple[float, float]] = []
    if zero_point and base == 0.0:
        points.append((0.0, 0.0))
        low = float(values[values > 0].min()) if (values > 0).any() else 0.0
    edges = np.linspace(low, high, grid + 1)
    points += list(zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True))
    lower, upper = (np.array(column, dtype=float) for column in zip(*points, strict=True))
    return Levels(lower, upper, False)


def gpu_cost_lower_bound(d_lo: np.ndarray, d_hi: np.ndarray, t_lo: float, t_hi: float,
                         supply_share: float, supply: float, tau: float,
                         parts: tuple[float, float] = (1.0, 1.0)) -> np.ndarray:
    """Minimum of ``(D/T - s)^2 + (D/T) sigmoid(max(0, D - S)/tau)`` over D in [d_lo, d_hi],
    T in [t_lo, t_hi] (0 when T is 0: a (type, priority) without demand costs nothing).
    ``parts``: multipliers of the two terms (Expression 7, Expression 8); each is minimised at
    its own end of the box, so the weighted sum is bounded by the weighted bounds."""
    d_lo = np.asarray(d_lo, dtype=float)
    d_hi = np.asarray(d_hi, dtype=float)
    if t_hi <= 0:
        return np.zeros_like(d_lo)
    q_lo = np.minimum(1.0, d_lo / t_hi)
    q_hi = np.minimum(1.0, d_hi / t_lo) if t_lo > 0 else np.ones_like(d_hi)
    nearest = np.clip(supply_share, q_lo, q_hi)
    balance = np.square(nearest - supply_share)
    overload = q_lo * sigmoid(np.maximum(0.0, d_lo - supply) / tau)
    if parts != (1.0, 1.0):
        return parts[0] * balance + parts[1] * overload
    return balance + overload


@dataclass
class GpuGroup:
    """The ML jobs of one (GPU type, priority) and the discretisation of their demand; under
    ``overload_form="combined_high_priority"`` also one group of all high levels of a type
    (``priority`` the first high level, ``parts = (0, 1)``: Expression 8 only)."""

    gpu_type: int
    priority: int
    weight: float  # w2 * w_p (w2 * the high levels' summed w_p for a combined group)
    jobs: np.ndarray  # planned ML job indices
    total: Levels
    region_levels: list[Levels]
    parts: tuple[float, float] = (1.0, 1.0)  # multipliers of Expressions 7 and 8 in the cost
    # pairs[r] = (k, i, cost) arrays: T level k with D_r level i, and the box's cost bound
    pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    fixed: np.ndarray | None = None  # (regions,) GPU-hours of jobs whose region is forced

    @property
    def exact(self) -> bool:
        return self.total.exact and all(levels.exact for levels in self.region_levels)


@dataclass
class PlacementData:
    """What the MIP and CP-SAT builders need, computed once from the arrays.

    ``tables``/``jobs`` are the part being modelled (all tables and planned jobs by default).
    ``allowed[t]`` lists the regions table t may be homed in (one for a pinned table: a table
    larger than the daily move quota cannot move).
    """

    arrays: PlacementArrays
    tables: np.ndarray
    jobs: np.ndarray
    allowed: dict[int, list[int]]
    job_regions: dict[int, list[int]]  # regions R(job) can take (ML: all its tables allowed there)
    groups: list[GpuGroup]
    storage_points: list[np.ndarray]  # tangent points of the storage term per region
    storage_exact: bool
    whole: bool  # the part is the whole instance: region-coupled terms and constraints apply
    # Where each planned ML job's GPU demand counts (see the module docstring): its regions
    # and mode, "region" (R(job)) for every job unless split_ml_demand is "largest_region".
    demand_regions: dict[int, list[int]] = field(default_factory=dict)
    demand_mode: dict[int, str] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        """The model's objective equals the exact objective at every feasible placement."""
        return self.storage_exact and all(group.exact for group in self.groups)

    def job_tables(self, j: int) -> np.ndarray:
        arrays = self.arrays
        return arrays.job_tables[arrays.job_ptr[j]:arrays.job_ptr[j + 1]]


def prepare(arrays: PlacementArrays, tables: np.ndarray | None = None, jobs: np.ndarray | None = None,
            *, max_exact_levels: int = 64, grid_levels: int = 16, max_pairs: int = 1024,
            storage_tangents: int = 32, deadline: Clock | None = None) -> PlacementData:
    """Pinning, the regions each job can take, and the breakpoints of the non-linear terms
    (:class:`BuildTimeout` when ``deadline`` expires on the way)."""
    ticker = _Ticker(deadline, every=64)
    whole = tables is None
    tables = np.arange(arrays.num_tables) if tables is None else np.asarray(tables, dtype=np.int64)
    if jobs is None:
        jobs = np.flatnonzero(arrays.planned)
    jobs = np.asarray(jobs, dtype=np.int64)
    regions = list(range(arrays.num_regions))
    pinned = arrays.table_size > arrays.move_quota_bytes
    allowed = {int(t): [int(arrays.table_home[t])] if pinned[t] else regions for t in tables}
    possible: dict[int, list[int]] = {}
    for j in jobs.tolist():
        ticker.tick()
        own = arrays.job_tables[arrays.job_ptr[j]:arrays.job_ptr[j + 1]]
        if arrays.job_kind[j] == ML:
            common = set(regions)
            for t in own.tolist():
                common &= set(allowed[t])
            possible[j] = sorted(common)
        else:
            possible[j] = sorted(set().union(*(allowed[t] for t in own.tolist())))

    demand_at, mode = _demand_regions(arrays, jobs, allowed, possible)
    groups = []
    if whole and arrays.w_gpu > 0:
        groups = _gpu_groups(arrays, jobs, allowed, demand_at, mode, max_exact_levels, grid_levels, max_pairs,
                             deadline)
    storage_points, storage_exact = [], True
    if whole and arrays.w_storage > 0:
        for r in regions:
            ticker.count = ticker.every - 1  # each region's subset sums can take a while
            ticker.tick()
            free = np.array([arrays.table_size[t] for t in tables.tolist() if len(allowed[t]) > 1])
            base = float(arrays.table_size[[t for t in tables.tolist() if allowed[t] == [r]]].sum())
            sums = subset_sums(free, base, max(max_exact_levels, 4 * storage_tangents), deadline)
            if sums is None:
                storage_exact = False
                sums = np.linspace(base, base + free.sum(), storage_tangents)
            storage_points.append(sums)
    return PlacementData(arrays=arrays, tables=tables, jobs=jobs, allowed=allowed,
                         job_regions=possible, groups=groups, storage_points=storage_points,
                         storage_exact=storage_exact, whole=whole, demand_regions=demand_at, demand_mode=mode)


def _demand_regions(arrays: PlacementArrays, jobs: np.ndarray, allowed: dict[int, list[int]],
                    possible: dict[int, list[int]]) -> tuple[dict[int, list[int]], dict[int, str]]:
    """Each planned ML job's demand regions and mode (module docstring)."""
    ml = jobs[arrays.job_kind[jobs] == ML].tolist()
    counted = arrays.split_ml_demand == "largest_region"
    if not counted:
        return {j: possible[j] for j in ml}, dict.fromkeys(ml, "region")
    where: dict[int, list[int]] = {}
    mode: dict[int, str] = {}
    size = arrays.table_size
    for j in ml:
        own = arrays.job_tables[arrays.job_ptr[j]:arrays.job_ptr[j + 1]].tolist()
        can_split = len(own) > 1 and any(len(allowed[t]) > 1 for t in own)
        if not can_split and possible[j]:
            where[j], mode[j] = possible[j], "region"
        elif not can_split:  # pinned apart: always split, its largest region is known
            homes = np.array([allowed[t][0] for t in own])
            by_region = np.bincount(homes, weights=size[own], minlength=arrays.num_regions)
            where[j], mode[j] = [int(by_region.argmax())], "fixed"
        elif size[own].sum() > 0:
            where[j] = sorted(set().union(*(allowed[t] for t in own if size[t] > 0)))
            mode[j] = "largest"
        else:
            where[j], mode[j] = sorted(set(possible[j]) | {0}), "zero"
    return where, mode


def _gpu_groups(arrays: PlacementArrays, jobs: np.ndarray, allowed: dict[int, list[int]],
                demand_at: dict[int, list[int]], mode: dict[int, str], max_exact: int, grid: int,
                max_pairs: int, clock: Clock | None = None) -> list[GpuGroup]:
    ml = jobs[arrays.job_kind[jobs] == ML]
    high = arrays.high_priority
    combined = arrays.overload_form == "combined_high_priority" and int(high.sum()) > 1
    groups = []
    for g in range(len(arrays.gpu_types)):
        for p in range(len(arrays.w_priority)):
            weight = arrays.w_gpu * arrays.w_priority[p]
            members = ml[(arrays.job_gpu_type[ml] == g) & (arrays.job_priority[ml] == p)]
            parts = (1.0, 0.0) if combined and high[p] else (1.0, 1.0)
            group = _group(arrays, g, p, weight, members, allowed, demand_at, mode, parts, max_exact, grid, max_pairs,
                           clock)
            if group is not None:
                groups.append(group)
        if combined:
            first = int(np.flatnonzero(high)[0])
            weight = arrays.w_gpu * float(arrays.w_priority[high].sum())
            members = ml[(arrays.job_gpu_type[ml] == g) & high[arrays.job_priority[ml]]]
            group = _group(arrays, g, first, weight, members, allowed, demand_at, mode, (0.0, 1.0), max_exact, grid,
                           max_pairs, clock)
            if group is not None:
                groups.append(group)
    return groups


def _group(arrays: PlacementArrays, g: int, p: int, weight: float, members: np.ndarray,
           allowed: dict[int, list[int]], demand_at: dict[int, list[int]], mode: dict[int, str],
           parts: tuple[float, float], max_exact: int, grid: int, max_pairs: int,
           clock: Clock | None = None) -> GpuGroup | None:
    """The group of ML jobs ``members`` of GPU type ``g`` (None when it costs nothing)."""
    num_regions = arrays.num_regions
    supply = arrays.gpu_supply
    supply_total = supply.sum(axis=0)
    share = supply[:, g] / supply_total[g] if supply_total[g] > 0 else np.zeros(num_regions)
    members = np.array([j for j in members.tolist() if demand_at[j]], dtype=np.int64)
    if weight <= 0 or members.size == 0:
        return None
    hours = arrays.job_gpu_hours[members].tolist()
    # A job whose tables cannot be split always adds its demand (to T); one that is
    # also pinned to a single region adds it there (to D_r) too.
    fixed = np.zeros(num_regions)
    certain, maybe = 0.0, []
    free: list[list[float]] = [[] for _ in range(num_regions)]
    for j, h in zip(members.tolist(), hours, strict=True):
        own = arrays.job_tables[arrays.job_ptr[j]:arrays.job_ptr[j + 1]].tolist()
        # Under "largest_region" every job adds its demand somewhere: never "maybe".
        can_split = len(own) > 1 and any(len(allowed[t]) > 1 for t in own) and mode[j] == "region"
        if can_split:
            maybe.append(h)
        else:
            certain += h
        if len(demand_at[j]) == 1 and not can_split:
            fixed[demand_at[j][0]] += h
        else:
            for r in demand_at[j]:
                free[r].append(h)

    def levels(exact_limit: int, free=free, fixed=fixed, maybe=maybe, certain=certain):
        total = make_levels(np.array(maybe), certain, exact_limit, grid, zero_point=True, clock=clock)
        return total, [make_levels(np.array(free[r]), float(fixed[r]), exact_limit, grid, clock=clock)
                       for r in range(num_regions)]

    total, region_levels = levels(max_exact)
    if any(len(total) * len(lv) > max_pairs for lv in region_levels):
        total, region_levels = levels(0)
    group = GpuGroup(gpu_type=g, priority=p, weight=float(weight), jobs=members, total=total,
                     region_levels=region_levels, fixed=fixed, parts=parts)
    for r in range(num_regions):
        group.pairs.append(_pairs(total, region_levels[r], float(share[r]),
                                  float(supply[r, g]), arrays.sigmoid_scale, parts))
    return group


def _pairs(total: Levels, region: Levels, share: float, supply: float,
           tau: float, parts: tuple[float, float] = (1.0, 1.0)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ks, is_, costs = [], [], []
    for k in range(len(total)):
        t_lo, t_hi = float(total.lower[k]), float(total.upper[k])
        fits = region.lower <= t_hi * (1 + SUM_TOLERANCE) + SUM_TOLERANCE
        if t_hi <= 0:
            fits = region.lower <= 0
        index = np.flatnonzero(fits)
        cost = gpu_cost_lower_bound(region.lower[index], region.upper[index], t_lo, t_hi, share, supply, tau, parts)
        ks.append(np.full(index.size, k))
        is_.append(index)
        costs.append(cost)
    return np.concatenate(ks), np.concatenate(is_), np.concatenate(costs)


__all__ = ["BuildTimeout", "GpuGroup", "Levels", "PlacementData", "gpu_cost_lower_bound", "make_levels", "prepare",
           "subset_sums"]
