"""A lower bound on the Tetris placement optimum (MAST §3.3, Figure 4) that needs no MIP.

Why: the MIP (:mod:`fleetplan.models.placement.mip`) proves bounds on small instances, but from
about 1,000 tables HiGHS does not finish its root LP within minutes, and the bound it then reports
is the one its column bounds give: the traffic term is ``bytes(j) (1 - sum_r y[j, r])`` with every
``y`` in [0, 1], so each ML job counts ``1 - |regions|`` times its bytes and the bound is negative
(-7.7 at 1,000 tables after 300 s). A planner cannot read a gap against that. This bound is
computed from the instance alone in well under a second at 10^4 tables, is never negative, and
is reported beside every plan (``SolveResult.bound``) so that the gap means something.

How (every step drops a coupling or a constraint, so the minimum can only fall)::

    objective = sum over GPU groups (g, p) of [ Expressions 7 + 8 of the group
                                                + Expression 1 of the group's ML jobs ]
              + Expression 1 of the Spark/Presto jobs and of ML jobs in no group
              + Expression 9 (storage balance)
           >= sum over groups of min(group bracket) + min(traffic rest) + min(storage)

The sum of minima is at most the minimum of the sum. Each piece:

* *A GPU group* (the ML jobs of one GPU type and priority, :func:`~fleetplan.models.placement.prepare`'s
  groups, which already follow ``split_ml_demand`` and ``overload_form``). If some of its jobs
  always add demand (they cannot split, ``certain > 0``), the group is *active*: the demand shares
  ``q_r = D_r / T`` sum to 1 and lie in ``[lo_r, hi_r]`` (``lo_r`` = demand pinned to r over the
  largest possible total, ``hi_r`` = demand that can reach r over the smallest active total).
  Expression 8 is ``sum_r q_r sigmoid(.) >= 1/2 + sum_r q_r (sigmoid((q_r T_min - S_r)^+ / tau) - 1/2)``
  (sigmoid >= 1/2 and is increasing, D_r >= q_r T_min). The minimum over the shares is bounded by
  its Lagrangian dual: for any multiplier mu, ``mu + sum_r min over q_r in [lo_r, hi_r] of
  (f_r(q_r) - mu q_r)`` is at most the minimum (weak duality), and each one-dimensional minimum
  is bounded from below on a grid of intervals [a, b]: ``(q - s)^2 >= (clip(s, a, b) - s)^2``,
  the overload excess ``>= its value at a`` (it increases with q), ``-mu q >= -mu b`` (mu >= 0)
  or ``-mu a``. The dual is concave in mu and is maximised by golden-section search; any mu it
  stops at gives a valid bound. A group whose jobs all add demand and can be placed in at most
  ``MAX_ENUMERATED`` ways is minimised exactly instead (every way scored as the judge scores
  it). Both bound a *node* of a branch and bound over the group's jobs, largest first: a node
  has placed some jobs, each in one of its regions (its hours added there to ``lo``) or split
  (it adds no demand and pays its traffic), and bounds every way to place the others. A
  node's children (the next job in each of its regions, or split) cover exactly its
  placements, so a child's minimum is at least its parent's and its bound may be raised to
  its parent's; the open nodes together cover every placement, so the least of their bounds
  is at most the group's minimum. The search expands the open node with the least bound
  (best first) until that node is exact (its jobs are enumerated) or ``BRANCH_NODES`` nodes
  have been bounded; its bound is the group's (a large job cannot be spread, which the
  shares' relaxation would otherwise allow; with few jobs the search closes on the exact
  minimum, ``tests/test_placement_bound.py``). A group whose remaining jobs may all split may
  be *inactive*, which costs at least their traffic; its bound is then the smaller of the two.
  (Under the combined overload form a job belongs to two groups, so there a split counts no
  traffic, which would be counted twice.) Expression 6 narrows a job's options first: in a
  feasible plan the high-priority GPU-hours trained away from home (split, or in a region
  without the job's GPU type) are at most ``(1 - threshold + tolerance)`` of all high-priority
  hours, so a high-priority job with more hours than that is never split and lies in a region
  with its type (every plan the bound drops is infeasible). The CPU rows narrow them too: an
  ML job (whose demand lies where all its tables are) lies in region r only with every planned
  job that reads nothing but some of its tables (itself, Spark/Presto jobs reading a subset:
  R(job) is where all their tables are), so when those jobs' CPU-hours alone exceed an
  application's capacity in r (the judge's tolerance added), r is dropped from the job's
  options (every plan dropped breaks that CPU row; at 1,000 tables, seed 0, this keeps the
  A100 priority-0 group's 64-hour job out of every region but its own, and the group's bound
  rises from 4.23 to 4.43, where the search's plans keep 4.44). And jobs of a group reading exactly
  the same tables have the same R(job) (and largest region) in every plan: they add their
  demand to one region together or are split together, so they are one job with their summed
  hours and traffic.
* *Traffic of the rest*: a Spark/Presto job reads remotely at least its pinned bytes outside its
  best region; an ML job whose tables are pinned to different regions reads all its bytes
  remotely; everything else at least 0.
* *Storage balance*: the bytes homed per region are a share ``b_r`` with ``sum_r b_r = 1`` between
  what is pinned there (and today's bytes minus the move quota) and the capacity (and today's
  bytes plus the quota); ``sum_r (b_r - c_r)^2`` is convex, and its Lagrangian dual (closed form
  per region) is maximised by bisection. Table sizes are treated as divisible (a relaxation).
* *The move quota* couples traffic and storage (at 1,000 tables, seed 0, the quota is spent,
  mostly on storage balance, and the storage term alone claims almost nothing). For any price
  ``lam >= 0`` per byte moved, a feasible plan moves ``M <= Q`` bytes, so its traffic plus
  storage balance is at least ``min over plans of [traffic + storage + lam M] - lam Q``
  (weak duality), and the minimum is bounded piece by piece with ``lam M`` split into
  ``alpha lam M`` and ``(1 - alpha) lam M`` (any ``alpha`` in [0, 1]). Storage: bytes leave
  one region for another, so ``M >= (total / 2) sum_r |b_r - d_r|`` (``d``: today's shares);
  the storage dual above, with ``alpha lam total / 2`` per unit of ``|b_r - d_r|`` added,
  bounds its part (each region's term stays convex). Traffic: ``(1 - alpha) lam M`` is at
  least the sum, over the (Spark/Presto job, table) pairs, of ``(1 - alpha) lam size / n``
  for each pair whose table moved (``n``: the pairs reading the table); whatever region
  R(job) takes, each of the job's pairs whose table lies elsewhere today either moved (its
  share of the price) or is read remotely (its weighted bytes), so the job pays at least the
  smaller of the two for each, summed, for the best region. A pinned table cannot move. The
  term ``quota`` is what this adds to the traffic and storage terms at the best ``(lam,
  alpha)`` found (a golden-section search over ``lam`` for a few ``alpha``), 0 when nothing.

What it does not see: the coupling of jobs through shared tables (beyond jobs reading the very
same tables), the move quota the GPU groups' moves spend (priced, the per-group minima of
1,000 and 10,000 tables, seed 0, rose by less than the price took: their moves need little of the quota), the
traffic a storage move causes, the CPU rows beyond the jobs that must follow one ML job's
tables, the home-training row beyond single jobs (several smaller jobs together may also
exceed what may train away), and the granularity of demand beyond the jobs branched on. So it
is weakest where the best plan trades GPU balance against traffic; the MIP's own bound is used instead where it is higher
(:mod:`fleetplan.solvers.placement.exact` reports the larger of the two). Tested against brute
force (``tests/test_placement_bound.py``): never above the optimum, never negative.

Example
-------
>>> from fleetplan.instances import generate
>>> from fleetplan.models.placement.bound import placement_lower_bound
>>> instance = generate("placement", {"regions": 3, "tables": 20, "jobs": 20}, seed=0)
>>> bound = placement_lower_bound(instance.arrays())
>>> bound.value >= 0.0, sorted(bound.terms)
(True, ['gpu', 'quota', 'storage_balance', 'traffic'])
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from fleetplan.instances.placement import ML, PlacementArrays
from fleetplan.instances.placement.evaluate import sigmoid
from fleetplan.models.placement import GpuGroup, PlacementData, prepare

# Intervals per region in the one-dimensional minima (the bound loses O(1/GRID) to them).
GRID = 64
# Golden-section steps over the multiplier (the bracket shrinks by 0.618 each step).
DUAL_STEPS = 36
GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
# The parts of the move quota's price the storage term carries (the rest: the traffic term).
QUOTA_SPLITS = (0.0, 0.5, 1.0)
# Golden-section steps over the quota's price (each costs a pass over the Spark/Presto pairs).
QUOTA_STEPS = 24
# Bisection steps of the storage dual.
STORAGE_STEPS = 60
# The judge accepts capacities and the move quota with this relative slack (evaluate.TOLERANCE).
JUDGE_SLACK = 1e-9
# The judge's tolerance on the home-training share (evaluate.TOLERANCE, absolute on the share).
JUDGE_TOLERANCE = 1e-9
# Kept off the final value against rounding in the sums (relative).
ROUNDING = 1e-9
# A group whose jobs all add demand is solved exactly when they can be placed in at most this
# many ways (every way enumerated).
MAX_ENUMERATED = 10_000
# Below the first branch (see _group_bound), fewer: there may be hundreds of branches.
MAX_ENUMERATED_BRANCH = 512
# Nodes of a group's branch and bound (see _group_bound): jobs are placed region by region (or
# split), largest first, instead of spread continuously, until this many nodes were bounded.
BRANCH_NODES = 256


@dataclass
class LowerBound:
    """A proven lower bound on the optimum of the placement objective; ``terms``: its parts
    (``gpu`` includes the traffic of ML jobs that an inactive group's split would cost)."""

    value: float
    terms: dict[str, float] = field(default_factory=dict)
    # Each GPU group's part of ``terms["gpu"]``: ((GPU type, priority, parts), bound); parts
    # (1, 0) / (0, 1): a group of the combined overload form's two (Expression 7 / 8 only).
    groups: list[tuple[tuple[str, int, tuple[float, float]], float]] = field(default_factory=list)


def placement_lower_bound(arrays: PlacementArrays, data: PlacementData | None = None) -> LowerBound:
    """The lower bound of the module docstring (``data``: :func:`prepare`'s output, when the
    caller has it; prepared with one level per quantity otherwise, which is all this needs)."""
    if data is None:  # the storage breakpoints are not used here (w3 = 0 skips them)
        data = prepare(dataclasses.replace(arrays, w_storage=0.0), max_exact_levels=1, grid_levels=1)
    combined = arrays.overload_form == "combined_high_priority"
    placed = sorted({j for group in data.groups for j in group.jobs.tolist() if data.demand_mode.get(j) == "region"})
    forbidden = _cpu_forbidden(arrays, placed)
    groups = [((arrays.gpu_types[group.gpu_type], group.priority, group.parts),
               _group_bound(arrays, data, group, count_split=not combined, cpu_forbidden=forbidden))
              for group in data.groups]
    traffic = _forced_traffic(arrays, data)
    storage = float(arrays.w_storage * _storage_bound(arrays))
    terms = {"gpu": float(sum(value for _, value in groups)), "traffic": traffic, "storage_balance": storage,
             "quota": max(0.0, _quota_dual(arrays, data, traffic) - traffic - storage)}
    value = max(0.0, sum(terms.values()) * (1.0 - ROUNDING))
    return LowerBound(value=value, terms=terms, groups=groups)


# --- GPU groups -------------------------------------------------------------------------------

def _can_split(arrays: PlacementArrays, data: PlacementData, j: int) -> bool:
    """The rule of :func:`prepare`'s groups: a job that may be split adds demand only if it is not."""
    own = data.job_tables(j).tolist()
    return len(own) > 1 and any(len(data.allowed[t]) > 1 for t in own) and data.demand_mode.get(j) == "region"


def _must_train_at_home(arrays: PlacementArrays) -> np.ndarray:
    """High-priority ML jobs too large to train away from home: in a feasible plan the hours
    away (split, or in a region without the job's GPU type) are at most ``1 - threshold`` of
    all high-priority hours (the judge's tolerance added), so a job with more hours than that
    is placed, in a region with its type."""
    high = arrays.high_priority_ml
    total = float(arrays.job_gpu_hours[high].sum())
    if arrays.home_training_threshold <= 0 or total <= 0:
        return np.zeros(arrays.num_jobs, dtype=bool)
    away = (1.0 - arrays.home_training_threshold + JUDGE_TOLERANCE) * total
    return high & (arrays.job_gpu_hours > away * (1 + ROUNDING) + 1e-12)


def _cpu_forbidden(arrays: PlacementArrays, jobs: list[int]) -> dict[int, set[int]]:
    """For each ML job of ``jobs``, the regions where it cannot lie in a feasible plan: with all
    its tables in r, every planned job reading only tables of it (itself, Spark/Presto jobs
    reading a subset of them) lies in r too (R(job) is where all its tables are), and their
    CPU-hours alone exceed an application's CPU capacity in r (the judge's tolerance added)."""
    a = arrays
    pairs = np.unique(a.pair_job * a.num_tables + a.job_tables)  # (job, table) without repeats
    pair_job, pair_table = pairs // a.num_tables, pairs % a.num_tables
    job_ptr = np.searchsorted(pair_job, np.arange(a.num_jobs + 1))
    distinct = np.diff(job_ptr)
    planned = a.planned[pair_job]
    readers, read = pair_job[planned], pair_table[planned]
    order = np.argsort(read, kind="stable")
    readers = readers[order]
    table_ptr = np.concatenate([[0], np.cumsum(np.bincount(read, minlength=a.num_tables))])
    forbidden: dict[int, set[int]] = {}
    for j in jobs:
        own = pair_table[job_ptr[j]:job_ptr[j + 1]].tolist()
        found, count = np.unique(np.concatenate([readers[table_ptr[t]:table_ptr[t + 1]] for t in own]),
                                 return_counts=True)
        inside = found[count == distinct[found]]
        if inside.size == 0:
            continue
        cpu = np.bincount(a.job_app[inside], weights=a.job_cpu_hours[inside], minlength=len(a.app_ids))
        apps = np.flatnonzero(cpu > 0)
        limit = a.cpu_capacity[apps] * (1 + JUDGE_SLACK) + 1e-9
        over = np.flatnonzero((cpu[apps, None] > limit * (1 + ROUNDING)).any(axis=0))
        if over.size:
            forbidden[j] = set(over.tolist())
    return forbidden


def _merge_same_tables(data: PlacementData, jobs: list[int], hours: dict[int, float], splits: dict[int, bool],
                       split_cost: dict[int, float], regions: dict[int, list[int]]) -> list[int]:
    """Jobs reading exactly the same tables have the same R(job) (and largest region) in every
    plan, so they add their demand to the same region or are split together: each set becomes
    its first job, with their summed hours and split traffic and the options all of them have
    (the dicts are updated in place; the first jobs are returned)."""
    first: dict[tuple[int, ...], int] = {}
    kept = []
    for j in jobs:
        rep = first.setdefault(tuple(np.unique(data.job_tables(j)).tolist()), j)
        if rep == j:
            kept.append(j)
            continue
        common = [r for r in regions[rep] if r in set(regions[j])]
        hours[rep] += hours[j]
        split_cost[rep] += split_cost[j]
        splits[rep] = splits[rep] and splits[j]
        if common:  # (none: no feasible plan; nothing more is claimed)
            regions[rep] = common
    return kept


def _group_bound(arrays: PlacementArrays, data: PlacementData, group: GpuGroup, count_split: bool,
                 cpu_forbidden: dict[int, set[int]] | None = None) -> float:
    g = group.gpu_type
    supply = arrays.gpu_supply[:, g].astype(float)
    share = supply / supply.sum() if supply.sum() > 0 else np.zeros_like(supply)
    jobs = group.jobs.tolist()
    hours = {j: float(arrays.job_gpu_hours[j]) for j in jobs}
    splits = {j: _can_split(arrays, data, j) for j in jobs}
    split_cost = {j: float(arrays.w_traffic * arrays.job_weight[j] * arrays.table_size[data.job_tables(j)].sum())
                  if count_split else 0.0 for j in jobs}
    regions = {j: data.demand_regions[j] for j in jobs}
    home = _must_train_at_home(arrays)
    supplied = arrays.gpu_supply[:, g] > 0
    for j in jobs:
        at_home = [r for r in regions[j] if supplied[r]]
        if home[j] and at_home:  # (none: no feasible plan; nothing more is claimed)
            splits[j], regions[j] = False, at_home
        forbidden = (cpu_forbidden or {}).get(j, set())
        allowed = [r for r in regions[j] if r not in forbidden]
        if forbidden and (allowed or splits[j]):  # (neither: no feasible plan; nothing claimed)
            regions[j] = allowed
    jobs = _merge_same_tables(data, jobs, hours, splits, split_cost, regions)
    fixed = np.zeros(arrays.num_regions)
    for j in jobs:  # always adds its demand, and always in the same region
        if not splits[j] and len(regions[j]) == 1:
            fixed[regions[j][0]] += hours[j]
    rest = [j for j in jobs if splits[j] or len(regions[j]) > 1]
    reach_of = {j: np.bincount(regions[j], minlength=arrays.num_regions) * hours[j] for j in rest}
    p7, p8 = group.parts
    tau = float(arrays.sigmoid_scale)

    def options(j: int) -> int:
        return len(regions[j]) + int(splits[j])

    def scored(fixed: np.ndarray, rest: list[int], reach: np.ndarray, paid: float, root: bool) -> tuple[float, bool]:
        """The group's bound with ``fixed`` placed and ``paid`` traffic of the jobs split so far
        (``reach``: the GPU-hours of ``rest`` that can land in each region), and whether it is
        the exact minimum over the ways to place ``rest``."""
        t_max = float(fixed.sum()) + sum(hours[j] for j in rest)
        if t_max <= 0:
            return paid, True
        certain = [j for j in rest if not splits[j]]
        maybe = [j for j in rest if splits[j]]
        limit = MAX_ENUMERATED if root else MAX_ENUMERATED_BRANCH
        if not maybe and math.prod(len(regions[j]) for j in certain) <= limit:
            # Few ways to place them: each scored as the judge scores it (exact).
            exact = _enumerated(certain, regions, hours, fixed, t_max, share, supply, tau, p7, p8)
            return paid + group.weight * exact, True
        return paid + _continuous(fixed, certain, maybe, reach, t_max), False

    def _continuous(fixed: np.ndarray, certain: list[int], maybe: list[int], reach: np.ndarray,
                    t_max: float) -> float:
        t_certain = float(fixed.sum()) + sum(hours[j] for j in certain)
        positive = [hours[j] for j in maybe if hours[j] > 0]
        t_min = t_certain if t_certain > 0 else min(positive, default=0.0)
        low = fixed / t_max
        high = np.minimum(1.0, (fixed + reach) / t_min) if t_min > 0 else np.ones_like(reach)
        active = _shares_bound(low, high, share, supply, t_min, tau, p7, p8)
        if not math.isfinite(active):
            active = 0.0  # no share vector fits the ranges: claim nothing
        bound = group.weight * active
        if t_certain <= 0:  # every job left may split: the group may cost only their traffic
            bound = min(bound, sum(split_cost[j] for j in maybe))
        return bound

    # Best-first branch and bound over the jobs, largest first: a node places some jobs (each in
    # one of its regions, or split); its bound covers every way to place the others, and a
    # child's bound is at least its parent's (the child's placements are among the parent's).
    # The lowest open node is expanded until it is exact or the budget of nodes is spent; the
    # bound is then its value, the least over all open nodes, which together cover every
    # placement.
    reach = sum(reach_of.values(), np.zeros(arrays.num_regions))
    order = sorted(rest, key=lambda j: (-hours[j], j))
    value, exact = scored(fixed, order, reach, 0.0, True)
    heap = [(value, 0, exact, fixed, order, reach, 0.0)]
    evaluated, counter = 1, 1
    while True:
        value, _, exact, fixed, rest, reach, paid = heapq.heappop(heap)
        if exact or not rest or hours[rest[0]] <= 0 or evaluated + options(rest[0]) > BRANCH_NODES:
            return float(value)
        big, others = rest[0], rest[1:]
        left = reach - reach_of[big]
        children = [(fixed + np.eye(1, arrays.num_regions, r)[0] * hours[big], paid) for r in regions[big]]
        if splits[big]:
            children.append((fixed, paid + split_cost[big]))
        for placed, cost in children:
            child, child_exact = scored(placed, others, left, cost, False)
            heapq.heappush(heap, (max(child, value), counter, child_exact, placed, others, left, cost))
            counter += 1
        evaluated += len(children)


def _enumerated(free: list[int], regions: dict[int, list[int]], hours: dict[int, float], fixed: np.ndarray,
                total: float, share: np.ndarray, supply: np.ndarray, tau: float, p7: float, p8: float) -> float:
    """The group's exact minimum over every region of each job in ``free`` (the others fixed)."""
    import itertools

    options = [regions[j] for j in free]
    picks = np.array(list(itertools.product(*options)), dtype=np.int64).reshape(-1, len(free)) if free \
        else np.zeros((1, 0), dtype=np.int64)
    demand = np.repeat(fixed[None, :], len(picks), axis=0)
    for column, j in enumerate(free):
        demand[np.arange(len(picks)), picks[:, column]] += hours[j]
    q = demand / total
    cost = p7 * np.square(q - share[None, :]).sum(axis=1)
    cost += p8 * (q * sigmoid(np.maximum(0.0, demand - supply[None, :]) / tau)).sum(axis=1)
    return float(cost.min())


def _shares_bound(low: np.ndarray, high: np.ndarray, share: np.ndarray, supply: np.ndarray, t_min: float,
                  tau: float, p7: float, p8: float) -> float:
    """Lower bound on min over q (sum q = 1, low <= q <= high) of
    ``p7 sum (q - share)^2 + p8 (1/2 + sum q (sigmoid((q t_min - supply)^+ / tau) - 1/2))``
    by the Lagrangian dual on a grid (module docstring); inf when no q fits."""
    high = np.maximum(high, low)
    if low.sum() > 1.0 + 1e-12 or high.sum() < 1.0 - 1e-12:
        return math.inf
    steps = np.linspace(0.0, 1.0, GRID + 1)
    edges = low[:, None] + (high - low)[:, None] * steps[None, :]  # (R, GRID + 1)
    a, b = edges[:, :-1], edges[:, 1:]
    nearest = np.clip(share[:, None], a, b)
    excess = a * (sigmoid(np.maximum(0.0, a * t_min - supply[:, None]) / tau) - 0.5)
    cost = p7 * np.square(nearest - share[:, None]) + p8 * excess

    def dual(mu: float) -> float:
        edge = b if mu >= 0 else a
        return mu + float((cost - mu * edge).min(axis=1).sum())

    reach = 10.0 + 2.0 * (p7 + p8) * (1.0 + t_min / tau)
    best = _maximise(dual, -reach, reach)
    return p8 * 0.5 + max(best, 0.0)


def _maximise(function, low: float, high: float, steps: int = DUAL_STEPS) -> float:
    """Golden-section search of a concave function; the best value it evaluated (any point
    evaluated gives a valid bound, so the search need not be exact)."""
    x1, x2 = high - GOLDEN * (high - low), low + GOLDEN * (high - low)
    f1, f2 = function(x1), function(x2)
    best = max(f1, f2, function(0.0))
    for _ in range(steps):
        if f1 < f2:
            low, x1, f1 = x1, x2, f2
            x2 = low + GOLDEN * (high - low)
            f2 = function(x2)
        else:
            high, x2, f2 = x2, x1, f1
            x1 = high - GOLDEN * (high - low)
            f1 = function(x1)
        best = max(best, f1, f2)
    return best


# --- traffic ------------------------------------------------------------------------------------

def _forced_traffic(arrays: PlacementArrays, data: PlacementData) -> float:
    """Expression 1 that no placement avoids: pinned bytes outside a Spark/Presto job's best
    region; all bytes of an ML job whose tables are pinned to different regions."""
    if arrays.w_traffic <= 0:
        return 0.0
    pinned = np.array([len(data.allowed[t]) == 1 for t in range(arrays.num_tables)])
    total = 0.0
    for j in data.jobs.tolist():
        own = data.job_tables(j)
        fixed = own[pinned[own]]
        if fixed.size == 0:
            continue
        homes = arrays.table_home[fixed]
        if arrays.job_kind[j] == ML:
            if np.unique(homes).size > 1:
                total += float(arrays.job_weight[j] * arrays.table_size[own].sum())
            continue
        by_region = np.bincount(homes, weights=arrays.table_size[fixed], minlength=arrays.num_regions)
        total += float(arrays.job_weight[j] * (by_region.sum() - by_region.max()))
    return float(arrays.w_traffic * total)


class _PricedTraffic:
    """Expression 1 of the Spark/Presto jobs plus ``price`` per byte of each table they read
    that moves, shared evenly between the (job, table) pairs reading it (module docstring):
    a pair whose table lies away from R(job) today either moves it (at least its share of the
    price) or reads it remotely (its weighted bytes), so each job pays at least, over the
    region R(job) may take, the smaller of the two for every pair away from that region.
    The pairs are gathered once; each price costs a few passes over them."""

    def __init__(self, arrays: PlacementArrays, data: PlacementData) -> None:
        a = arrays
        wanted = np.zeros(a.num_jobs, dtype=bool)
        wanted[data.jobs] = True
        spark = wanted[a.pair_job] & (a.job_kind[a.pair_job] != ML) & (a.w_traffic > 0)
        jobs, tables = a.pair_job[spark], a.job_tables[spark]
        unique, first = np.unique(jobs, return_inverse=True)
        self.jobs, self.regions = unique.size, a.num_regions
        self.pair = first
        self.key = first * a.num_regions + a.table_home[tables]
        self.size = a.table_size[tables]
        self.remote = a.w_traffic * a.job_weight[jobs] * self.size
        self.readers = np.bincount(tables, minlength=a.num_tables)[tables]
        movable = np.array([len(data.allowed[t]) > 1 for t in range(a.num_tables)], dtype=bool)
        self.movable = movable[tables] if tables.size else np.zeros(0, dtype=bool)

    def __call__(self, price: float) -> float:
        if self.jobs == 0:
            return 0.0
        pair_cost = np.where(self.movable, np.minimum(price * self.size / self.readers, self.remote), self.remote)
        total = np.bincount(self.pair, weights=pair_cost, minlength=self.jobs)
        staying = np.bincount(self.key, weights=pair_cost, minlength=self.jobs * self.regions)
        return float((total - staying.reshape(self.jobs, self.regions).max(axis=1)).sum())


def _quota_dual(arrays: PlacementArrays, data: PlacementData, forced: float) -> float:
    """A lower bound on the least traffic plus storage balance under the move quota: the
    Lagrangian dual of the quota row (module docstring), maximised over its price and the part
    ``alpha`` of it that the storage term carries (each pair gives a valid bound). ``forced``:
    :func:`_forced_traffic`, whose Spark/Presto part the priced traffic at price 0 is."""
    a = arrays
    quota = float(a.move_quota_bytes)
    total = float(a.table_size.sum())
    if not math.isfinite(quota) or total <= 0 or (a.w_traffic <= 0 and a.w_storage <= 0):
        return 0.0
    room = quota * (1 + JUDGE_SLACK) + 1e-6
    spark = _PricedTraffic(arrays, data)
    unpriced = spark(0.0)
    ml = forced - unpriced  # the ML jobs' forced traffic

    def value(price: float, alpha: float) -> float:
        # Bytes moved are at least half the shares' absolute changes times the total bytes.
        storage = a.w_storage * _storage_bound(a, alpha * price * total / 2.0 / a.w_storage) if a.w_storage > 0 else 0.0
        traffic = spark((1.0 - alpha) * price) if alpha < 1 else unpriced
        return ml + traffic + storage - price * room

    # Beyond these prices nothing more is gained: a pair's remote bytes cost at most w1 x weight
    # per byte, and the storage term's slope in a share is at most 2 w3 (4 w3 from both sides).
    readers = np.bincount(a.job_tables, minlength=a.num_tables).max(initial=1)
    top_traffic = a.w_traffic * float(a.job_weight.max(initial=0.0)) * readers
    top_storage = 8.0 * a.w_storage / total
    best = value(0.0, 0.0)
    for alpha in QUOTA_SPLITS:
        top = max(top_traffic / max(1.0 - alpha, 1e-3) if alpha < 1 else 0.0, top_storage / max(alpha, 1e-3))
        if top > 0:
            best = max(best, _maximise(lambda price, alpha=alpha: value(max(price, 0.0), alpha), 0.0, top,
                                       QUOTA_STEPS))
    return best


# --- storage ------------------------------------------------------------------------------------

def _storage_bound(arrays: PlacementArrays, price: float = 0.0) -> float:
    """Lower bound on min sum_r (b_r - c_r)^2 + price sum_r |b_r - d_r| over byte shares b (sum
    1) within the pinned bytes, capacities and move quota, d being today's shares (module
    docstring); 0 when no share vector fits."""
    size = arrays.table_size.astype(float)
    total = float(size.sum())
    capacity = arrays.storage_capacity.astype(float)
    if total <= 0 or arrays.w_storage <= 0 or capacity.sum() <= 0:
        return 0.0
    target = capacity / capacity.sum()
    regions = arrays.num_regions
    home = arrays.table_home
    quota = float(arrays.move_quota_bytes)
    pinned = size > quota
    pinned_bytes = np.bincount(home[pinned], weights=size[pinned], minlength=regions)
    today = np.bincount(home, weights=size, minlength=regions)
    low = pinned_bytes
    high = np.minimum(capacity * (1 + JUDGE_SLACK) + 1e-6, pinned_bytes + size[~pinned].sum())
    if math.isfinite(quota):
        moved = quota * (1 + JUDGE_SLACK) + 1e-6
        low = np.maximum(low, today - moved)
        high = np.minimum(high, today + moved)
    low, high = low / total, high / total
    if low.sum() > 1.0 + 1e-12 or high.sum() < 1.0 - 1e-12 or (low > high).any():
        return 0.0

    now = today / total

    def dual(mu: float) -> tuple[float, float]:  # value and sum of the minimisers
        # Per region, (b - c)^2 + price |b - d| - mu b is convex: its minimiser is the one of the
        # branch above d, or below d, or d itself, clipped to the region's range.
        above, below = target + (mu - price) / 2.0, target + (mu + price) / 2.0
        b = np.clip(np.where(above >= now, above, np.where(below <= now, below, now)), low, high)
        return mu + float((np.square(b - target) + price * np.abs(b - now) - mu * b).sum()), float(b.sum())

    # Shares and targets lie in [0, 1]: the optimal mu lies in [-2 - price, 2 + price].
    lo_mu, hi_mu = -4.0 - 2.0 * price, 4.0 + 2.0 * price
    best = dual(0.0)[0]
    for _ in range(STORAGE_STEPS):
        mu = 0.5 * (lo_mu + hi_mu)
        value, used = dual(mu)
        best = max(best, value)
        if used < 1.0:
            lo_mu = mu
        else:
            hi_mu = mu
    return max(best, 0.0)


__all__ = ["LowerBound", "placement_lower_bound"]
