"""Gavel's max-min and linear allocation LPs by price decomposition (Gavel §3.1, §4.1).

This module holds the method's shared parts (the reduced LP's HiGHS run, buckets of similar
jobs, interior-point pricing, :class:`SeparableResult`) and the max-min form; the linear form's
own loop is :func:`fleetplan.solvers.allocation.price_decomposition.separable_linear.linear`.

Jobs are coupled only through one capacity row per worker type (a handful of rows): given the
prices ``lam`` of those rows, the LP separates into one tiny LP per job. This module solves the
full LP exactly without ever building it:

1. *Prices.* Max-min forms: a structured interior-point method over all jobs
   (:mod:`fleetplan.solvers.allocation.interior_point.ipm`) gives ``lam`` and t close to the optimum's.
   Otherwise (linear forms first, or when that method does not converge) jobs are merged into
   buckets of nearly equal rows (log-throughputs rounded to a grid) and that small LP's capacity
   duals are a first guess: a few percent off, so more jobs stay free and more rounds follow,
   and a linear form switches to interior-point prices when too many stay unsettled.
2. *Regimes.* At (lam, t) each job's own LP is solved in closed form by enumerating its vertices
   (one type, or two types with the job's time full); a job whose best vertex wins by a clear
   margin, away from the breakpoints where its vertex changes, is *fixed*: its allocation is an
   affine function of t (max-min) or a constant (linear). The others stay *free*.
3. *Reduced LP.* The free jobs' columns, t, and the capacity rows, where the fixed jobs enter as
   one aggregated affine term per type — a few hundred or thousand columns instead of n K.
4. *Certificate.* With the reduced LP's duals, every fixed job's vertex is checked to be optimal
   for its own LP (reduced costs, i.e. dual feasibility of the full LP) and t is checked not to
   lean on a fixed job's breakpoint. Primal feasibility holds by construction and complementary
   slackness by the choice of vertex, so the KKT conditions of the full LP hold: the answer *is*
   an optimum of the full LP. Jobs that fail the check are freed and the reduced LP re-solved.

The full LP (:mod:`fleetplan.solvers.allocation.lp`) stays the reference: tests prove the two
equal, and any case this method does not take (space sharing, SLO floors, a free set that grows
past half the jobs) goes to it.

Forms (columns x[m, j] >= 0, sum_j x[m, j] <= 1, sum_m k_m s_m x[m, j] <= W_j):

* max-min: maximize t s.t. ``A[m] @ x[m] - t >= o[m]`` (LAS, makespan, a finish-time-fairness
  step); for a fixed job with need = t + o_m the vertex "type j" is x_j = need / A_mj, the vertex
  "types h, l" (A_mh > need > A_ml) is x_h = (need - A_ml) / (A_mh - A_ml), x_l = 1 - x_h;
* linear: maximize ``sum_m P[m] @ x[m]`` (max throughput, FIFO); a fixed job sits on the type of
  the largest reduced profit P_mj - lam_j k_m s_m, or idles when none is positive
  (:mod:`fleetplan.solvers.allocation.price_decomposition.separable_linear`).

>>> import numpy as np
>>> A = np.array([[2.0, 1.0], [1.0, 1.0]])  # two jobs, two one-worker types
>>> result = max_min(A, np.zeros(2), np.ones(2), np.ones(2), np.array([1.0, 1.0]), free_level=False)
>>> result.status, round(result.level, 6)  # job 0 on type 0 (2 x 0.5), job 1 on type 1: t = 1
('optimal', 1.0)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fleetplan.instances.allocation.rows import row_max
from fleetplan.models.linear import INF, ColumnMatrix, LinearProgram
from fleetplan.solvers import highs as highs_runner
from fleetplan.solvers.allocation.price_decomposition import separable_certificate as certificate
from fleetplan.solvers.allocation.price_decomposition.reduced_basis import ReducedBasis
from fleetplan.solvers.allocation.price_decomposition.vertices import closeness as _closeness
from fleetplan.solvers.allocation.price_decomposition.vertices import (
    vertex_affine as _vertex_affine,
)
from fleetplan.solvers.deadline import Deadline

# A fixed job's vertex must win by this relative margin at the first prices; later rounds add
# whatever the certificate rejects, so this only trades reduced-LP size against rounds.
MARGIN = 0.02
MAX_ROUNDS = 8
# Above this share of free jobs the reduced LP is no smaller than the full one: give up.
MAX_FREE_SHARE = 0.5
# Each round frees the jobs nearest to a tie between two vertices (or to a breakpoint): this
# many, and every job within a relative TIE of one.
WORKING_SET = 128
# The first round's set when the interior-point prices converged (status optimal): they are the
# full LP's own optimum to 1e-8, so few jobs sit near a tie (LAS at 2,048 distinct jobs: the
# reduced LP's HiGHS run 9 ms with 128 jobs free, 1 ms with 16, one round either way).
CONVERGED_WORKING_SET = 16
TIE = 1e-4
# The interior-point method's tolerance for max-min prices over every job (no warm start, below
# its sampled sizes): TIE, since every job within TIE of a tie is freed anyway and the
# certificate decides the rest. Against 1e-5 (TIE / 10, until 2026-11-29; the method's default
# 1e-8 took 1-5 iterations more still), from the classic start: LAS at 2,048 distinct jobs,
# seeds 0-7, with and without multi-GPU jobs, 14-17 iterations instead of 15-18, one round
# each, the same certified levels, up to 1 ms less a solve; over 1,024, 4,096 and 6,000 jobs
# (48 instances) 4 more took a second round (5 ms each) and the total was 3 % lower. Looser
# still (1e-3) sent 9 of the 16 2,048-job instances to a second round.
FIRST_PRICES_TOLERANCE = TIE
# The reduced LP's primal and dual feasibility tolerances. HiGHS's default 1e-7 let the dual
# simplex stop with the level short of the full LP's optimum: LAS at 16,384 / 65,536 distinct
# jobs 3.9e-7 / 1.8e-7 below it, with 128 jobs free, measured against the full LP and Gavel's
# own code (cvxpy + ECOS); at 1e-9 the two agree to 1e-9, for no measurable time.
REDUCED_LP_TOLERANCE = 1e-9
# Reduced LPs of at most this many columns (LAS's first round at 2,048 distinct jobs: 16 free
# jobs, 49 columns) run without HiGHS's presolve, whose set-up costs more there than the few
# pivots: 0.69 ms instead of 0.78 per reduced LP (8 LAS instances of 2,048 jobs, seeds 0-3,
# with and without multi-GPU jobs). The primal simplex without presolve took 0.25 ms less, but
# its level at 16,384 jobs (a 49-column reduced LP) was 4.5e-10 below the dual simplex's, and
# below Gavel's own code's: the dual simplex stays.
TINY_LP_COLUMNS = 256
# The first prices come from an LP over at most this many buckets of similar jobs.
BUCKETS = 300
# bucket_of tries each grid on every n // BUCKET_SAMPLE-th row before sorting all of them.
BUCKET_SAMPLE = 2048


@dataclass
class SeparableResult:
    """The allocation (jobs, types), the LP's optimum, and whether a refinement could change it."""

    status: str  # optimal | fallback | time_limit | capped (max_min with capped=True)
    matrix: np.ndarray | None = None
    level: float | None = None
    # max-min: every job's score row has a positive dual in the certificate, so in *every*
    # optimum each job sits exactly at the level and a sum-of-scores refinement changes nothing.
    all_bottlenecked: bool = False
    log: list[str] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    # The certificate's duals, in the max sense: the capacity prices (>= 0, per worker of each
    # type; max-min and linear forms) and, max-min only, each job's score-row dual (>= 0; for a
    # fixed job the marginal cost of its need).
    prices: np.ndarray | None = None
    score_duals: np.ndarray | None = None
    # The interior-point (level, prices) the vertices were picked at: centred in the optimal
    # face, unlike the reduced LP's vertex duals above, so the better start for a neighbouring
    # problem (a scheduler's next round). None when the first prices came from buckets.
    anchor: tuple[float, np.ndarray] | None = None
    # Max-min: each job's vertex (fixed jobs) and the free set the certificate held for: a
    # neighbouring problem's first try (:mod:`.separable_structure`).
    structure: tuple[np.ndarray, np.ndarray] | None = None
    # Max-min: the last reduced LP's optimal basis, the start of a neighbouring problem's.
    reduced_basis: ReducedBasis | None = None


# --- the reduced LP -----------------------------------------------------------------------------

def _solve_lp(lp: LinearProgram, deadline: Deadline, threads: int, seed: int, tolerance: float | None = None,
              basis: tuple[np.ndarray, np.ndarray] | None = None, keep_basis: bool = False):
    # HiGHS's default (dual) simplex. Its primal simplex without presolve was faster on LAS's
    # small reduced LPs (4.7 ms instead of 9.1 at 2,048 distinct jobs) but did not finish the
    # second round's reduced LP at 10^6 jobs in two minutes (the dual simplex: 0.1 s).
    with highs_runner.lp_highs(deadline.remaining(), threads, seed) as highs:
        highs_runner.pass_lp(highs, lp, "simplex")
        tolerance = REDUCED_LP_TOLERANCE if tolerance is None else tolerance
        highs.setOptionValue("primal_feasibility_tolerance", tolerance)
        highs.setOptionValue("dual_feasibility_tolerance", tolerance)
        if lp.num_cols <= TINY_LP_COLUMNS:
            highs.setOptionValue("presolve", "off")
        if basis is not None:
            highs_runner.set_basis(highs, basis)
        outcome = highs_runner.run(highs)
        duals = np.asarray(highs.getSolution().row_dual, dtype=float) if outcome.values is not None else None
        if keep_basis and outcome.status == "optimal":
            outcome.basis = highs_runner.basis_of(highs)
    return outcome, duals


def _no_capacity_binds(A, offset, usage, W, free_level, best=None):
    """(level, allocation, score duals) when the optimum is set by one job's own time, or None.

    No job can score more than its fastest type gives it with all its time, so t <= min_m
    (max_j A_mj - o_m). If every job placed on its fastest type at that level fits in the
    workers, the bound is reached: that allocation is optimal (makespan on Gavel's mix, where the
    slowest job's steps decide). Checked in one pass, before any prices. The dual that proves it:
    capacity prices 0 and the whole weight on that job's score row (its time row's dual is its
    fastest score), whose objective is the same bound. ``best``: ``row_max(A)`` where the caller
    has it."""
    n, K = A.shape
    best = row_max(A) if best is None else best
    if n == 0 or np.any(best <= 0):
        return None
    binding = int(np.argmin(best - offset))
    level = float(best[binding] - offset[binding])
    if level < 0 and not free_level:
        return None
    need = level + offset
    time_share = np.where(need > 0, need / best, 0.0)
    demand = usage * time_share
    # Past every worker in all (with a margin far beyond the sums' rounding) some type is past
    # its own: capacity binds, and each job's fastest type need not be found (this test took
    # 0.07 ms, now 0.03, at 2,048 jobs, where capacity sets the level).
    if float(demand.sum()) > float(W.sum()) * (1 - 1e-9) * (1 + 1e-6):
        return None
    fastest = np.argmax(A, axis=1)
    used = np.bincount(fastest, weights=demand, minlength=K)
    if np.any(used > W * (1 - 1e-9)):
        return None
    matrix = np.zeros((n, K))
    matrix[np.arange(n), fastest] = time_share
    score_duals = np.zeros(n)
    score_duals[binding] = 1.0
    return level, matrix, score_duals


def _max_min_reduced(A, offset, mult, scale, W, free, fixed_choice, free_level, deadline, threads, seed,
                     floor=None, tolerance=None, basis: ReducedBasis | None = None,
                     bases: list[ReducedBasis] | None = None):
    """The reduced LP over the ``free`` jobs; fixed jobs enter the capacity rows as affine terms
    (constants for ``floor`` jobs, whose score rows have no t). Returns (status, allocation,
    level, capacity prices, the free jobs' score duals, (t_low, t_high, fixed, alpha)): the range
    of t where each fixed job's vertex holds, the fixed mask, and their slopes in t. ``basis``:
    the simplex starts from it (mapped onto these free jobs); ``bases``: the optimal basis is
    appended to it."""
    n, K = A.shape
    usage = mult * scale
    fixed = ~free
    alpha, beta, t_low, t_high = _vertex_affine(A[fixed], offset[fixed], fixed_choice[fixed],
                                                None if floor is None else floor[fixed])
    # einsum's own loop: a third of a broadcast product and sum over (jobs, types)
    fixed_usage = usage[fixed]
    gamma = np.einsum("m,mj->j", fixed_usage, alpha)
    delta = np.einsum("m,mj->j", fixed_usage, beta)
    free_jobs = np.flatnonzero(free)
    low = max(float(t_low.max(initial=-INF)), -INF if free_level else 0.0)
    high = float(t_high.min(initial=INF))
    status, level, cells, lam, score_duals = reduced_lp(A, offset, usage, W, free_jobs, gamma, delta, (low, high),
                                                        deadline, threads, seed, floor, tolerance, basis, bases)
    if status != "optimal":
        return status, None, None, None, None, (t_low, t_high, fixed, alpha)
    cell_job, cell_type, cell_values = cells
    matrix_out = np.zeros((n, K))
    matrix_out[cell_job, cell_type] = cell_values
    matrix_out[fixed] = alpha * level + beta
    return "optimal", matrix_out, level, lam, score_duals, (t_low, t_high, fixed, alpha)


def reduced_lp(A, offset, usage, W, free_jobs, gamma, delta, level_bounds, deadline, threads, seed, floor=None,
               tolerance=None, basis: ReducedBasis | None = None, bases: list[ReducedBasis] | None = None):
    """The reduced LP itself: the ``free_jobs``' cells and t, the fixed jobs' vertices entering
    the capacity rows as ``gamma`` t + ``delta`` per type, t within ``level_bounds``. Returns
    (status, level, (each cell's job, type, value), capacity prices, the free jobs' score duals);
    ``basis`` and ``bases`` as in :func:`_max_min_reduced`."""
    K = A.shape[1]
    free_jobs = np.asarray(free_jobs)
    cell_job, cell_type = np.nonzero(A[free_jobs] > 0)
    n_cells, n_free = len(cell_job), len(free_jobs)
    t_col = n_cells
    lifted = np.arange(n_free) if floor is None else np.flatnonzero(~floor[free_jobs])
    # Built column-wise, as HiGHS takes it: a cell's rows (its score, its time, its type's
    # capacity) and then t's (the lifted score rows, every capacity row) are in order already,
    # so no conversion sorts them.
    indices = np.empty(3 * n_cells + len(lifted) + K, dtype=np.int32)
    values = np.empty(len(indices))
    cells = indices[:3 * n_cells].reshape(n_cells, 3)
    cells[:, 0], cells[:, 1], cells[:, 2] = cell_job, n_free + cell_job, 2 * n_free + cell_type
    cell_values = values[:3 * n_cells].reshape(n_cells, 3)
    cell_values[:, 0], cell_values[:, 1], cell_values[:, 2] = A[free_jobs[cell_job], cell_type], 1.0, \
        usage[free_jobs[cell_job]]
    indices[3 * n_cells:] = np.concatenate([lifted, 2 * n_free + np.arange(K)])
    values[3 * n_cells:] = np.concatenate([-np.ones(len(lifted)), gamma])
    starts = np.append(np.arange(0, 3 * n_cells + 1, 3), len(indices)).astype(np.int32)
    matrix = ColumnMatrix(values, indices, starts, (2 * n_free + K, n_cells + 1))
    low, high = level_bounds
    cost = np.zeros(n_cells + 1)
    cost[t_col] = 1.0
    lp = LinearProgram(
        cost=cost, matrix=matrix,
        row_lower=np.concatenate([offset[free_jobs], np.full(n_free + K, -INF)]),
        row_upper=np.concatenate([np.full(n_free, INF), np.ones(n_free), W - delta]),
        col_lower=np.concatenate([np.zeros(n_cells), [low]]),
        col_upper=np.concatenate([np.ones(n_cells), [high]]), sense="max")
    job_of_cell = free_jobs[cell_job]
    cell_keys = job_of_cell * K + cell_type
    start = None if basis is None else basis.start_for(free_jobs, cell_keys, K)
    outcome, duals = _solve_lp(lp, deadline, threads, seed, tolerance, start, bases is not None)
    if outcome.status != "optimal" or duals is None:
        return outcome.status, None, None, None, None
    if bases is not None and outcome.basis is not None:
        col_status, row_status = outcome.basis
        bases.append(ReducedBasis(free_jobs, cell_keys, col_status[:n_cells], int(col_status[t_col]),
                                  row_status[:n_free], row_status[n_free:2 * n_free], row_status[2 * n_free:]))
    level = float(outcome.values[t_col])
    lam = np.maximum(duals[2 * n_free:], 0.0)
    score_duals = -duals[:n_free]
    return "optimal", level, (job_of_cell, cell_type, outcome.values[:n_cells]), lam, score_duals


def bucket_of(columns: np.ndarray, target: int = BUCKETS) -> tuple[np.ndarray, np.ndarray]:
    """Buckets of rows of ``columns`` (log-scale values, -inf for "absent") whose values round to
    one grid point, the grid coarsened until at most ``target`` buckets remain. Returns (one row
    of each bucket, the bucket of every row). Rows are hashed, not compared: a collision merges
    two buckets, which only blurs the first prices."""
    n = len(columns)
    rng = np.random.default_rng(0)
    multipliers = rng.integers(1, 2**61, size=columns.shape[1], dtype=np.int64) | 1
    finite = np.isfinite(columns)
    filled = np.where(finite, columns, 0.0)

    def keys(rows, step):
        grid = np.where(finite[rows], np.round(filled[rows] / step), -(2**40)).astype(np.int64)
        with np.errstate(over="ignore"):
            return (grid * multipliers).sum(axis=1)
    # A sample of the rows has at most all rows' buckets: a grid whose sample has too many is
    # coarsened without sorting every row (the same grid wins; 16,384 rows: 5 sorts became 1).
    sample, step = slice(None, None, max(1, n // BUCKET_SAMPLE)), 0.05
    while True:
        if not (n > BUCKET_SAMPLE and step <= 64 and len(np.unique(keys(sample, step))) > target):
            _, first, inverse = np.unique(keys(slice(None), step), return_index=True, return_inverse=True)
            if len(first) <= target or step > 64:
                return first, inverse.reshape(n)
        step *= 2.0


def _bucket_prices(A, offset, mult, scale, W, free_level, deadline, threads, seed, floor=None):
    """First prices: the LP over buckets of jobs whose log-rows round to one grid point (floor
    jobs and lifted jobs never share a bucket)."""
    n, K = A.shape
    with np.errstate(divide="ignore"):
        logs = np.where(A > 0, np.log(np.where(A > 0, A, 1.0)), -np.inf)
        off = np.where(offset != 0, np.log(np.abs(np.where(offset != 0, offset, 1.0))), -np.inf)
    # Scale factor and the offset's sign must match inside a bucket; they go in as big steps.
    keys = np.column_stack([logs, 1e3 * np.log2(scale), 1e3 * np.sign(offset), off]
                           + ([] if floor is None else [1e3 * floor]))
    first, inverse = bucket_of(keys)
    weight = np.bincount(inverse, weights=mult)
    mean_A = np.column_stack([np.bincount(inverse, weights=A[:, j] * mult) for j in range(K)]) / weight[:, None]
    mean_A = np.where(A[first] > 0, mean_A, 0.0)
    mean_o = np.bincount(inverse, weights=offset * mult) / weight
    free = np.ones(len(first), dtype=bool)
    status, _, level, lam, _, _ = _max_min_reduced(
        mean_A, mean_o, weight, scale[first], W, free, np.zeros(len(first), dtype=int), free_level, deadline,
        threads, seed, None if floor is None else floor[first])
    return status, level, lam, len(first)


def _working_set(A, offset, level, lam, usage, W, sticky, size, threshold=TIE, floor=None, picks=None):
    """Each job's vertex at (lam, level) and the free set: the WORKING_SET jobs nearest to a tie
    or to a breakpoint, every job within TIE of one, and the ``sticky`` ones. ``picks``: the
    (vertex, closeness) of every job at these prices when the caller has them already."""
    n = len(A)
    choice, closeness = picks if picks is not None else _closeness(A, offset, level, lam, usage, W, floor)
    free = sticky | (choice < -1) | (closeness <= threshold)
    if n > size:
        if size > 0:
            free[np.argpartition(closeness, size)[:size]] = True
    else:
        free[:] = True
    return choice, free


def max_min(A: np.ndarray, offset: np.ndarray, mult: np.ndarray, scale: np.ndarray, W: np.ndarray, *,
            free_level: bool, deadline: Deadline | None = None, threads: int = 1, seed: int = 0,
            prices: Literal["ipm", "buckets"] = "ipm", floor: np.ndarray | None = None,
            lp_tolerance: float | None = None, start: tuple[float, np.ndarray] | None = None,
            capped: bool = False, keep_basis: bool = True) -> SeparableResult:
    """maximize t s.t. A[m] @ x[m] - t >= offset[m], sum_j x[m, j] <= 1, sum_m mult_m scale_m x[m, j]
    <= W_j, 0 <= x (A[m, j] = 0 where job m cannot run on type j); t >= 0 unless ``free_level``.
    ``prices``: where the first prices come from (``ipm``, falling back to ``buckets``).
    ``floor``: jobs whose row has no t, ``A[m] @ x[m] >= offset[m]`` (water filling's
    bottlenecked jobs, Gavel §4.3); at least one job must keep its t. ``lp_tolerance``: the reduced
    LP's primal and dual feasibility tolerance (REDUCED_LP_TOLERANCE when None); water filling asks for
    1e-10 so that its duals prove bottlenecks. ``start``: (level, prices) of a neighbouring problem
    (the previous round of a scheduler, :mod:`fleetplan.solvers.warm`) used as the first prices
    instead of computing them; the certificate is the same, so only the speed depends on them,
    and when they do not lead to a certificate the method starts again from its own prices.
    ``capped``: when the interior-point level reaches the ceiling ``min_m (max_j A_mj - offset_m)``
    (a job's own best score sets the level, as a heavily weighted job does in weighted max-min
    fairness, and no capacity price is positive, so every vertex ties), return status ``capped``
    with that ceiling as ``level`` instead of deciding the vertices: the caller checks the level
    with the refinement LP (:func:`fleetplan.solvers.allocation.price_decomposition.separable_refine.refine`), whose
    plan, if it has one, reaches it. ``keep_basis``: the last reduced LP's optimal basis is read
    back for the result's ``reduced_basis`` (a neighbouring problem's start); False where no
    one will start from it (0.06 ms of a 2,048-job LAS solve)."""
    if start is not None:
        warm = _max_min(A, offset, mult, scale, W, free_level=free_level, deadline=deadline, threads=threads,
                        seed=seed, prices=prices, floor=floor, lp_tolerance=lp_tolerance, start=start,
                        capped=capped, keep_basis=keep_basis)
        if warm.status != "fallback":
            return warm
        cold = _max_min(A, offset, mult, scale, W, free_level=free_level, deadline=deadline, threads=threads,
                        seed=seed, prices=prices, floor=floor, lp_tolerance=lp_tolerance, capped=capped,
                        keep_basis=keep_basis)
        cold.log = warm.log + ["separable: the warm start did not certify; starting again"] + cold.log
        return cold
    return _max_min(A, offset, mult, scale, W, free_level=free_level, deadline=deadline, threads=threads,
                    seed=seed, prices=prices, floor=floor, lp_tolerance=lp_tolerance, capped=capped,
                    keep_basis=keep_basis)


# The interior-point level counts as the ceiling within this relative distance (its own accuracy
# is about 1e-8); the refinement that follows proves or refutes it.
CEILING_CLOSE = 1e-6


def _max_min(A, offset, mult, scale, W, *, free_level, deadline, threads, seed, prices, floor, lp_tolerance,
             start=None, capped=False, keep_basis=True) -> SeparableResult:
    deadline = deadline or Deadline(None)
    started = time.perf_counter()
    n, K = A.shape
    usage = mult * scale
    log, stats = [], {}
    if floor is not None:
        floor = np.asarray(floor, dtype=bool)
        if floor.all():
            return SeparableResult("fallback", log=["separable: every job is a floor: t is unbounded"])
        floor = floor if floor.any() else None
    # A warm start whose prices are positive had capacity binding a round ago: the check is
    # skipped (its answer would be certified below all the same).
    warm_binding = start is not None and float(np.asarray(start[1]) @ W) > 0
    # Each job's best score, read by the slack test and the ceiling (once for both).
    best = row_max(A) if floor is None else None
    slack = _no_capacity_binds(A, offset, usage, W, free_level, best) if floor is None and not warm_binding else None
    if slack is not None:
        level, matrix, score_duals = slack
        stats["separable_s"] = time.perf_counter() - started
        return SeparableResult("optimal", matrix, level, False, log + [
            "separable: certified optimal with no capacity binding: the level is the slowest job's "
            "best score, and every job fits on its fastest type there"], stats, np.zeros(K), score_duals)
    status, level, lam, anchor, picks = "not_converged", None, None, None, None
    converged = False
    if prices == "ipm" or start is not None:
        from fleetplan.solvers.allocation.interior_point.ipm import (
            RESTRICT_ABOVE,
            TOLERANCE,
            max_min_prices,
        )

        if start is not None:
            log.append("separable: interior-point prices warm-started from the previous round's")
        ceiling = float((best - offset).min()) if capped and floor is None else None
        # Over every job (below the sampled sizes, no warm start) the method stops at
        # FIRST_PRICES_TOLERANCE; a level that close to the ceiling is priced again at the
        # method's own tolerance, which the ceiling test below was made for.
        loose = floor is None and start is None and n < RESTRICT_ABOVE
        for tolerance in (FIRST_PRICES_TOLERANCE, TOLERANCE) if loose else (TOLERANCE,):
            if floor is None:
                compute = lambda: max_min_prices(A, offset, usage, W, free_level=free_level,  # noqa: E731
                                                 deadline=deadline, start=start, tolerance=tolerance)  # noqa: B023
            else:
                compute = lambda: _reserved_prices(max_min_prices, A, offset, usage, W, floor, free_level, deadline)  # noqa: E731
            first = _interior_point_prices(compute, log, stats)
            if first is None or ceiling is None or \
                    first.level < ceiling - 10 * tolerance * max(1.0, abs(ceiling)):
                break
        if first is not None:
            status, level, lam = "optimal", first.level, first.lam
            anchor = (level, lam)
            converged = first.status == "optimal"
            picks = first.picks if floor is None else None
            if ceiling is not None:
                if level >= ceiling - CEILING_CLOSE * max(1.0, abs(ceiling)) and (free_level or ceiling >= 0):
                    stats["separable_s"] = time.perf_counter() - started
                    return SeparableResult("capped", level=ceiling, stats=stats, log=log + [
                        f"separable: the level {level:.9g} is at the ceiling {ceiling:.9g} (a job's best "
                        "score): the refinement checks it"])
    if status != "optimal":
        status, level, lam, buckets = _bucket_prices(A, offset, mult, scale, W, free_level, deadline, threads, seed,
                                                     floor)
        log.append(f"separable: {buckets} buckets for the first prices")
        stats["separable_buckets"] = float(buckets)
        if status != "optimal":
            return SeparableResult("fallback", log=log + [f"bucket LP ended {status}"], stats=stats)
    sticky = np.zeros(n, dtype=bool)  # jobs a certificate rejected stay free
    # Each round's optimal basis, the last one kept (None: not read back).
    bases: list[ReducedBasis] | None = [] if keep_basis else None
    previous = (level, lam)
    size = CONVERGED_WORKING_SET if converged else WORKING_SET
    rounds = 0
    while True:
        rounds += 1
        # Each round re-picks the vertices at the latest prices; an infeasible restriction (the
        # prices were too far off) is retried with four times as many jobs free.
        # Interior-point prices are the full LP's own (centred) optimum: vertices are picked at
        # them every round. A reduced LP's duals can sit anywhere on its optimal face, which is
        # wider than the full LP's, so picking at them can unsettle thousands of jobs.
        pick_level, pick_lam = anchor if anchor is not None else (level, lam)
        choice, free = _working_set(A, offset, pick_level, pick_lam, usage, W, sticky, size, floor=floor,
                                    picks=picks if anchor is not None else None)
        # The free jobs counted once for the test, the stats and the log (a mean and three sums
        # before; count / n > share exactly when the mean was, below 2^52 jobs).
        n_free = int(np.count_nonzero(free))
        if n_free > MAX_FREE_SHARE * n and n > WORKING_SET:
            return SeparableResult("fallback", log=log + [f"{n_free} of {n} jobs free: the full LP is as small"],
                                   stats=stats)
        if deadline.expired():
            return SeparableResult("time_limit", log=log + ["time limit in the separable method"], stats=stats)
        status, matrix, level, lam, score_duals, (t_low, t_high, fixed, alpha) = _max_min_reduced(
            A, offset, mult, scale, W, free, choice, free_level, deadline, threads, seed, floor, lp_tolerance,
            bases=bases)
        stats.update(separable_rounds=float(rounds), separable_free=float(n_free))
        log.append(f"round {rounds}: {n_free} free jobs, reduced LP {status}")
        if status == "infeasible" and rounds < MAX_ROUNDS:
            level, lam = previous
            size *= 4
            continue
        if status != "optimal":
            return SeparableResult("fallback" if status != "time_limit" else "time_limit",
                                   log=log + [f"reduced LP ended {status}"], stats=stats)
        previous = (level, lam)
        size = WORKING_SET  # prices from an optimal reduced LP are close: back to a small set
        # Certificate: each fixed job's vertex is still its cheapest at the new prices and level,
        # and the level does not rest on a fixed job's breakpoint.
        fixed_jobs = np.flatnonzero(fixed)
        wrong = certificate.rejected(A, offset, usage, W, level, lam, choice, fixed, t_low, t_high, floor)
        if not wrong.any():
            break
        log.append(f"round {rounds}: the certificate rejects {int(wrong.sum())} fixed jobs")
        if rounds >= MAX_ROUNDS:
            return SeparableResult("fallback", log=log + [f"{int(wrong.sum())} fixed jobs still fail after "
                                                             f"{rounds} rounds"], stats=stats)
        # A rejected job stays free from now on (letting it go again made the prices oscillate).
        sticky[fixed_jobs[wrong]] = True
    # (with floors, the reduced LP's slopes are 0 for floor jobs: their duals take the vertex's own)
    duals, all_bottlenecked = certificate.score_duals(A, offset, usage, lam, choice, free, score_duals, floor,
                                                      alpha if floor is None else None)
    stats["separable_s"] = time.perf_counter() - started
    log.append(f"separable: certified optimal in {rounds} round(s), {n_free} of {n} jobs in the reduced LP")
    return SeparableResult("optimal", np.clip(matrix, 0.0, 1.0), level, all_bottlenecked, log, stats, lam, duals,
                           anchor=anchor, structure=(choice, free), reduced_basis=bases[-1] if bases else None)


def _reserved_prices(max_min_prices, A, offset, usage, W, floor, free_level, deadline):
    """Interior-point prices for a problem with floors, approximated: the floor jobs are left
    out and the workers they would hold on their fastest type to meet their floors are reserved.
    Prices only start the decomposition; the reduced LP and the certificate make it exact."""
    rows = np.flatnonzero(floor)
    best = A[rows].argmax(axis=1)
    speed = A[rows, best]
    share = np.clip(np.divide(offset[rows], speed, out=np.zeros(len(rows)), where=speed > 0), 0.0, 1.0)
    reserved = np.bincount(best, weights=usage[rows] * share, minlength=len(W))
    left = np.maximum(W - reserved, 1e-6 * W)
    live = ~floor
    return max_min_prices(A[live], offset[live], usage[live], left, free_level=free_level, deadline=deadline)


def _interior_point_prices(compute, log: list[str], stats: dict[str, float]):
    """Run ``compute`` (an :mod:`~fleetplan.solvers.allocation.interior_point.ipm` pricing call), log and time
    it; its prices when usable (status optimal or approximate), else None."""
    started = time.perf_counter()
    first = compute()
    stats.update(ipm_iterations=float(first.iterations), ipm_s=time.perf_counter() - started)
    log.append(f"separable: interior-point prices {first.status} after {first.iterations} iterations")
    return first if first.status in ("optimal", "approximate") else None
