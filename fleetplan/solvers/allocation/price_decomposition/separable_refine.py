"""The max-min refinement LP by price decomposition: weighted max-min fairness without the full LP.

After a max-min LP reaches its level, the refinement (:func:`fleetplan.models.allocation.policies.refinement_lp`)
keeps every job's score at the level and maximizes the sum of the scores::

    maximize   sum_m mult_m A[m] @ x[m]
    subject to A[m] @ x[m] >= need_m              (need_m = level + offset_m, less the slack)
               sum_j x[m, j] <= 1, x >= 0          (x[m, j] = 0 where A[m, j] = 0)
               sum_m mult_m scale_m x[m, j] <= W_j (one capacity row per worker type)

With all weights equal every job of Gavel's LAS is usually a bottleneck and the refinement
changes nothing; with priority weights the level is often set by a few heavily weighted jobs
(their best score caps it), the rest have room, and the refinement decides every allocation —
the full LP, 300 times the decomposition's time at 10,000 jobs. This module solves it as
:mod:`fleetplan.solvers.allocation.price_decomposition.separable` solves the max-min LP: given capacity prices
``lam``, each job's LP has two rows and its optimum is one of its vertices — a type with the
job's time full (A_mj >= need), a type at the need (x_j = need / A_mj), or two types with both
rows tight (A_mh > need > A_ml) — found in closed form; jobs whose best vertex wins clearly are
fixed, the rest go to a reduced LP with the capacity rows; the reduced LP's duals ``lam``
certify every fixed job (its vertex is still its best at ``lam``): with lam >= 0, complementary
slackness on the capacity rows (they are the reduced LP's own) and every job's allocation
optimal for its own Lagrangian LP, the whole allocation is an optimum of the full refinement LP.
Jobs the certificate rejects are freed and the reduced LP solved again. The first prices come
from the same LP over buckets of similar jobs.

>>> import numpy as np
>>> A = np.array([[2.0, 1.0], [1.0, 1.0]])   # two jobs, two one-worker types
>>> result = refine(A, np.zeros(2), np.ones(2), np.ones(2), np.ones(2), level=0.5)
>>> result.status, round(float((A * result.matrix).sum(axis=1).min()), 6) >= 0.5
('optimal', True)
"""

from __future__ import annotations

import time

import numpy as np

from fleetplan.models.linear import INF, LinearProgram
from fleetplan.solvers.allocation.price_decomposition.separable import (
    CONVERGED_WORKING_SET,
    MAX_FREE_SHARE,
    MAX_ROUNDS,
    TIE,
    WORKING_SET,
    SeparableResult,
    _solve_lp,
    bucket_of,
)
from fleetplan.solvers.allocation.price_decomposition.separable_certificate import (
    CERTIFICATE_TOLERANCE,
)
from fleetplan.solvers.deadline import Deadline

# The bucket LP's floors, as shares of the buckets' mean needs, tried in turn until it is feasible.
BUCKET_RELAX = (1.0, 0.99, 0.9, 0.5)
# The first prices' bucket LP: fewer buckets than the max-min method's (BUCKETS), since Newton's
# steps sharpen its prices anyway.
REFINE_BUCKETS = 100
# The smoothed dual's Newton steps and its smoothing, relative to each job's profit.
SMOOTH_STEPS = 40
SMOOTH_START = 1e-2
SMOOTH_FALL = 0.1
SMOOTH_END = 1e-5
# A smoothing's Newton steps end when the decrement is below this share of mu x the jobs' profit.
SMOOTH_DECREMENT = 1e-3
KEEP_VERTICES = 5
# A certificate that rejects more than this many fixed jobs per free one is taken as prices the
# free jobs do not pin down: the set of jobs nearest a tie grows instead of taking them all.
REJECTED_PER_FREE = 4
# The largest price move of one Newton step, as a share of the largest price.
SMOOTH_TRUST = 0.2


def vertex_values(A: np.ndarray, need: np.ndarray, reduced: np.ndarray) -> np.ndarray:
    """The value ``reduced[m] @ x`` of every vertex of each job's refinement LP, as an
    (n, 2K + K(K-1)/2 + 1) array (-inf where the vertex does not exist): columns 0..K-1 a type
    with the job's time full, K..2K-1 a type at the need, then the type pairs with both rows
    tight in ``np.triu_indices`` order, and last "idle" (x = 0, when the need is <= 0)."""
    return _vertex_rows(A, need, reduced).T


def _vertex_rows(A, need, reduced):
    """:func:`vertex_values` vertex-major, (vertices, n): each vertex a contiguous row, so a
    job's best and runner-up are element-wise passes over the rows (see :func:`_picks`)."""
    n, K = A.shape
    first, second = np.triu_indices(K, k=1)
    values = np.empty((2 * K + len(first) + 1, n))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for j in range(K):
            a = A[:, j]
            reach = (a > 0) & (a >= need)
            values[j] = np.where(reach, reduced[:, j], -np.inf)
            values[K + j] = np.where(reach & (need > 0), reduced[:, j] * need / a, -np.inf)
        for p, (j, k) in enumerate(zip(first, second, strict=True)):
            a_j, a_k = A[:, j], A[:, k]
            j_high = a_j >= a_k
            a_hi, a_lo = np.where(j_high, a_j, a_k), np.where(j_high, a_k, a_j)
            r_hi = np.where(j_high, reduced[:, j], reduced[:, k])
            r_lo = np.where(j_high, reduced[:, k], reduced[:, j])
            x_hi = (need - a_lo) / (a_hi - a_lo)
            values[2 * K + p] = np.where((a_lo > 0) & (a_hi > need) & (need > a_lo),
                                         r_hi * x_hi + r_lo * (1.0 - x_hi), -np.inf)
    values[-1] = np.where(need <= 0, 0.0, -np.inf)
    return values


def vertex_allocation(A: np.ndarray, need: np.ndarray, choice: np.ndarray) -> np.ndarray:
    """The (n, K) allocation of each job's vertex ``choice`` (a column of :func:`vertex_values`)."""
    n, K = A.shape
    first, second = np.triu_indices(K, k=1)
    x = np.zeros((n, K))
    rows = np.arange(n)
    full = choice < K
    x[rows[full], choice[full]] = 1.0
    at_need = (choice >= K) & (choice < 2 * K)
    j = choice[at_need] - K
    x[rows[at_need], j] = need[at_need] / A[rows[at_need], j]
    pair = (choice >= 2 * K) & (choice < 2 * K + len(first))
    p = choice[pair] - 2 * K
    m = rows[pair]
    a_j, a_k = A[m, first[p]], A[m, second[p]]
    j_high = a_j >= a_k
    hi = np.where(j_high, first[p], second[p])
    lo = np.where(j_high, second[p], first[p])
    a_hi, a_lo = A[m, hi], A[m, lo]
    x_hi = (need[m] - a_lo) / (a_hi - a_lo)
    x[m, hi] = x_hi
    x[m, lo] = 1.0 - x_hi
    return np.clip(x, 0.0, 1.0)


def smoothed_prices(A: np.ndarray, need: np.ndarray, mult: np.ndarray, usage: np.ndarray, W: np.ndarray,
                    lam: np.ndarray, steps: int = SMOOTH_STEPS) -> np.ndarray:
    """Capacity prices by Newton's method on the Lagrangian dual smoothed by a soft maximum.

    The dual ``g(lam) = lam @ W + sum_m max_v value_mv(lam)`` (each job's best vertex) is convex
    and piecewise linear in the K prices; replacing each max by ``mu_m log sum_v exp(value /
    mu_m)`` makes it smooth, with gradient ``W - sum_m E_p[usage x]`` and a K x K Hessian, so a
    Newton step costs one pass over the jobs' vertices. ``mu`` (relative to each job's profit)
    falls from SMOOTH_START by SMOOTH_FALL per step to SMOOTH_END; the prices land where
    the jobs' demand meets the capacity, close enough that few jobs' vertices are in doubt."""
    lam = np.maximum(np.asarray(lam, dtype=float), 0.0)
    n, K = A.shape
    # Each job's KEEP_VERTICES best vertices at the first prices: the others are so far behind
    # that the soft maximum gives them no weight (and the certificate checks them all).
    values = vertex_values(A, need, np.where(A > 0, mult[:, None] * A - lam[None, :] * usage[:, None], -np.inf))
    keep = np.argpartition(-values, KEEP_VERTICES - 1, axis=1)[:, :KEEP_VERTICES] \
        if values.shape[1] > KEEP_VERTICES else np.broadcast_to(np.arange(values.shape[1]), values.shape)
    values = np.take_along_axis(values, keep, axis=1)
    exists = np.isfinite(values)
    idle = 2 * K + K * (K - 1) // 2  # all zeros: where a kept column has no vertex
    X = np.stack([vertex_allocation(A, need, np.where(exists[:, i], keep[:, i], idle))
                  for i in range(keep.shape[1])], axis=0)
    # Vertex-major (V, n): a job's maximum or sum over its vertices is then V - 1 element-wise
    # passes over rows of n (along a short last axis numpy's reductions took 30 times as long:
    # 0.7 ms against 0.02 for a maximum at 16,384 jobs).
    profit = np.where(exists.T, mult * np.einsum("nk,vnk->vn", A, X), -np.inf)
    # Per type, each vertex's workers (V, n): K small arrays, so the passes below are plain
    # element-wise products (a three-operand einsum over (n, V, K) took 30 times as long).
    U = [np.ascontiguousarray(usage * X[:, :, k]) for k in range(K)]
    inv_scale = 1.0 / np.maximum(mult * A.max(axis=1), 1e-300)

    def value(lam, mu):
        values = profit.copy()
        for k in range(K):
            if lam[k]:
                values -= lam[k] * U[k]
        top = values.max(axis=0)
        z = np.exp((values - top) * (inv_scale / mu))
        total = z.sum(axis=0)
        return float(lam @ W + top.sum() + mu * (np.log(total) / inv_scale).sum()), z / total

    # The price of a worker when every job's best profit is spread over all workers: the
    # trust region's size while the prices are still near 0.
    unit = float((1.0 / inv_scale).sum() / max(float(W.sum()), 1e-300))
    mu = SMOOTH_START
    g, p = value(lam, mu)
    total_scale = float((1.0 / inv_scale).sum())
    for _ in range(steps):
        sharpness = inv_scale / mu
        weight = p * sharpness
        mean_u = [(p * U[k]).sum(axis=0) for k in range(K)]
        gradient = W - np.array([m.sum() for m in mean_u])
        hessian = np.empty((K, K))
        for k in range(K):
            weighted = weight * U[k]
            spread = sharpness * mean_u[k]
            for j in range(k, K):
                hessian[k, j] = hessian[j, k] = float((weighted * U[j]).sum()) - float((spread * mean_u[j]).sum())
        hessian += 1e-12 * max(float(np.trace(hessian)), 1e-300) * np.eye(K)
        try:
            direction = -np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError:
            direction = -gradient
        if not np.all(np.isfinite(direction)):
            direction = -gradient
        # A price at 0 whose type is not in demand stays there (the projection of the step).
        direction[(lam <= 0) & (gradient > 0) & (direction < 0)] = 0.0
        decrement = -float(gradient @ direction)
        # A trust region: where only a few jobs are near a tie the Hessian is nearly singular
        # and the raw step huge (the prices' common level is then barely pinned down).
        reach = float(np.abs(direction).max())
        limit = SMOOTH_TRUST * max(float(np.abs(lam).max()), unit)
        if reach > limit:
            direction *= limit / reach
        if decrement <= SMOOTH_DECREMENT * mu * total_scale:
            # This smoothing's minimum is reached: the next, sharper one (or the end).
            if mu <= SMOOTH_END:
                break
            mu = max(mu * SMOOTH_FALL, SMOOTH_END)
            g, p = value(lam, mu)
            continue
        # Backtracking; a step whose fall is below the sum's rounding is taken as it is.
        t = 1.0
        slack = 1e-13 * (abs(g) + total_scale)
        for _ in range(8):
            trial = np.maximum(lam + t * direction, 0.0)
            trial_g, trial_p = value(trial, mu)
            if trial_g <= g + slack:
                lam, g, p = trial, trial_g, trial_p
                break
            t *= 0.5
        else:
            if mu <= SMOOTH_END:
                break
            mu = max(mu * SMOOTH_FALL, SMOOTH_END)
            g, p = value(lam, mu)
    return lam


def dual_value(A: np.ndarray, need: np.ndarray, mult: np.ndarray, usage: np.ndarray, W: np.ndarray,
               lam: np.ndarray) -> float:
    """The Lagrangian dual ``lam @ W + sum_m max_v value_mv(lam)``: an upper bound on the
    refinement's optimum for any ``lam >= 0``, equal to it at the optimal prices."""
    _, best, _ = _picks(A, need, mult, usage, lam)
    return float(lam @ W + best.sum())


def _picks(A, need, mult, usage, lam):
    """Each job's best vertex at ``lam``, its value, and how clearly it wins (the lead over the
    runner-up, relative to the job's profit; inf where the job has one vertex)."""
    reduced = np.where(A > 0, mult[:, None] * A - lam[None, :] * usage[:, None], -np.inf)
    values = _vertex_rows(A, need, reduced)
    # The best and the runner-up in one pass over the rows, in place (the first best wins a
    # tie, as np.argmax's; a tie leaves the runner-up equal to the best): 0.7 ms at 16,384 jobs
    # against 5 for a partition and an argmax along each job's row.
    best, runner_up = values[0].copy(), np.full(len(A), -np.inf)
    choice = np.zeros(len(A), dtype=np.int64)
    lower, better = np.empty(len(A)), np.empty(len(A), dtype=bool)
    for v in range(1, len(values)):
        row = values[v]
        np.greater(row, best, out=better)
        np.minimum(row, best, out=lower)
        np.maximum(runner_up, lower, out=runner_up)
        np.maximum(best, row, out=best)
        choice[better] = v
    scale = np.maximum(mult * A.max(axis=1), 1e-300)
    with np.errstate(invalid="ignore"):
        closeness = np.where(np.isfinite(runner_up), (best - runner_up) / scale, np.inf)
    return choice, best, closeness


def _value_of(A, mult, usage, lam, x):
    """Each job's Lagrangian value of its allocation ``x`` at the prices ``lam``."""
    return ((mult[:, None] * A - lam[None, :] * usage[:, None]) * np.where(A > 0, x, 0.0)).sum(axis=1)


def _reduced(A, need, mult, usage, W, free, fixed_x, deadline, threads, seed):
    """The refinement LP over the ``free`` jobs, the fixed jobs' workers taken off each type.
    Returns (status, allocation of every job, capacity prices)."""
    import scipy.sparse as sp

    n, K = A.shape
    fixed = ~free
    used = (usage[fixed, None] * fixed_x[fixed]).sum(axis=0)
    free_jobs = np.flatnonzero(free)
    cell_job, cell_type = np.nonzero(A[free_jobs] > 0)
    n_cells, n_free = len(cell_job), len(free_jobs)
    rows = np.concatenate([cell_job, n_free + cell_job, 2 * n_free + cell_type])
    cols = np.concatenate([np.arange(n_cells)] * 3)
    jobs_of_cells = free_jobs[cell_job]
    vals = np.concatenate([A[jobs_of_cells, cell_type], np.ones(n_cells), usage[jobs_of_cells]])
    lp = LinearProgram(
        cost=mult[jobs_of_cells] * A[jobs_of_cells, cell_type],
        matrix=sp.csr_matrix((vals, (rows, cols)), shape=(2 * n_free + K, n_cells)),
        row_lower=np.concatenate([need[free_jobs], np.full(n_free + K, -INF)]),
        row_upper=np.concatenate([np.full(n_free, INF), np.ones(n_free), W - used]),
        col_lower=np.zeros(n_cells), col_upper=np.ones(n_cells), sense="max")
    outcome, duals = _solve_lp(lp, deadline, threads, seed)
    if outcome.status != "optimal" or duals is None:
        return outcome.status, None, None
    matrix = np.zeros((n, K))
    matrix[fixed] = fixed_x[fixed]
    matrix[jobs_of_cells, cell_type] = outcome.values
    return "optimal", matrix, np.maximum(duals[2 * n_free:], 0.0)


def _bucket_prices(A, need, mult, scale, W, deadline, threads, seed):
    """First prices: the refinement LP over buckets of jobs with nearly equal rows, needs and
    scale factors (the bucket's jobs merged into one with their summed multiplicity)."""
    n, K = A.shape
    with np.errstate(divide="ignore"):
        logs = np.where(A > 0, np.log(np.where(A > 0, A, 1.0)), -np.inf)
        need_log = np.where(need > 0, np.log(np.where(need > 0, need, 1.0)), -np.inf)
    first, inverse = bucket_of(np.column_stack([logs, 1e3 * np.log2(scale), need_log]), REFINE_BUCKETS)
    weight = np.bincount(inverse, weights=mult)
    mean_A = np.column_stack([np.bincount(inverse, weights=A[:, j] * mult) for j in range(K)]) / weight[:, None]
    mean_A = np.where(A[first] > 0, mean_A, 0.0)
    bucket_need = np.minimum(np.bincount(inverse, weights=need * mult) / weight, mean_A.max(axis=1))
    everyone = np.ones(len(first), dtype=bool)
    # Merged jobs are less flexible than their members: where capacity sets the level the
    # buckets' floors may not fit together, so they are lowered (these are first prices only).
    for relax in BUCKET_RELAX:
        status, _, lam = _reduced(mean_A, bucket_need * relax, weight, weight * scale[first], W, everyone,
                                  np.zeros((len(first), K)), deadline, threads, seed)
        if status != "infeasible":
            break
    return status, lam, len(first)


def refine(A: np.ndarray, offset: np.ndarray, mult: np.ndarray, scale: np.ndarray, W: np.ndarray, *,
           level: float, slack: float = 1e-7, deadline: Deadline | None = None, threads: int = 1,
           seed: int = 0, start: np.ndarray | None = None, guess: bool = False) -> SeparableResult:
    """The refinement LP (module docstring) at ``level``, each job's need ``level (1 - slack)
    + offset`` (the slack the full refinement LP gives, so that the max-min LP's own rounding
    cannot make it infeasible). Status ``optimal`` with the allocation (``level``: the sum of
    scores), or ``fallback`` (then solve the full refinement LP) or ``time_limit``.

    ``start``: a plan that reaches the level (the max-min LP's). Where capacity sets the level
    the refinement has almost no room, and jobs fixed at their best vertices at prices a little
    off can overfill a type (the reduced LP is then infeasible); from then on the fixed jobs keep
    their share of ``start`` instead, which the certificate accepts where it is a best answer of
    the job's own LP at the prices, and which always leaves the reduced LP feasible.

    ``guess``: ``level`` is not known to be reachable (a bound tried first): the first
    infeasible reduced LP ends the method (``fallback``) instead of freeing more jobs."""
    deadline = deadline or Deadline(None)
    started = time.perf_counter()
    n, K = A.shape
    usage = mult * scale
    need = level - slack * abs(level) + offset
    log: list[str] = []
    stats: dict[str, float] = {}
    if np.any(need > A.max(axis=1)):
        return SeparableResult("fallback", log=["refinement: a job cannot reach the level"], stats=stats)
    status, lam, buckets = _bucket_prices(A, need, mult, scale, W, deadline, threads, seed)
    log.append(f"refinement: {buckets} buckets for the first prices, bucket LP {status}")
    stats["refine_buckets"] = float(buckets)
    if status != "optimal":
        return SeparableResult("fallback", log=log, stats=stats)
    sharpened = smoothed_prices(A, need, mult, usage, W, lam)
    # The prices whose (unsmoothed) dual value is lower are nearer the optimum's: on a few
    # hundred jobs the buckets are nearly the jobs themselves and Newton's steps, on a dual with
    # few kinks, can end farther off than they started.
    # (Each dual value is the jobs' picks at those prices: the first round reuses the winner's.)
    sharpened_picks, bucket_picks = _picks(A, need, mult, usage, sharpened), _picks(A, need, mult, usage, lam)
    if float(sharpened @ W + sharpened_picks[1].sum()) <= float(lam @ W + bucket_picks[1].sum()):
        lam, picks = sharpened, sharpened_picks
        log.append("refinement: prices from the smoothed dual (Newton)")
    else:
        picks = bucket_picks
        log.append("refinement: the bucket prices kept (lower dual value than Newton's)")
    sticky = np.zeros(n, dtype=bool)
    # The smoothed prices are close: a small first set, as for converged interior-point prices.
    size, previous = CONVERGED_WORKING_SET, lam
    rounds = 0
    anchored = False
    while True:
        rounds += 1
        choice, best, closeness = picks if picks is not None else _picks(A, need, mult, usage, lam)
        picks = None
        if anchored:
            # Jobs whose share of the start is not a best answer at these prices are free.
            closeness = (best - _value_of(A, mult, usage, lam, start)) / np.maximum(mult * A.max(axis=1), 1e-300)
        free = sticky | (closeness > TIE) if anchored else sticky | (closeness <= TIE)
        if anchored:
            pass
        elif n > size:
            free[np.argpartition(closeness, size)[:size]] = True
        else:
            free[:] = True
        if free.mean() > MAX_FREE_SHARE and n > WORKING_SET:
            return SeparableResult("fallback", log=log + [f"refinement: {int(free.sum())} of {n} jobs free"],
                                   stats=stats)
        if deadline.expired():
            return SeparableResult("time_limit", log=log + ["time limit in the refinement"], stats=stats)
        fixed_x = start if anchored else vertex_allocation(A, need, choice)
        status, matrix, lam_new = _reduced(A, need, mult, usage, W, free, fixed_x, deadline, threads, seed)
        stats.update(refine_rounds=float(rounds), refine_free=float(free.sum()))
        log.append(f"refinement round {rounds}: {int(free.sum())} free jobs"
                   f"{' (the rest keep the start)' if anchored else ''}, reduced LP {status}")
        if status == "infeasible" and guess:
            return SeparableResult("fallback", log=log + ["refinement: the level may be out of reach (the reduced "
                                                          "LP is infeasible); not pursued"], stats=stats)
        if status == "infeasible" and rounds < MAX_ROUNDS:
            # The fixed jobs alone overfill a type: the prices were off.
            if start is not None:
                anchored = True
            size *= 4
            lam = previous
            continue
        if status != "optimal":
            return SeparableResult("fallback" if status != "time_limit" else "time_limit",
                                   log=log + [f"refinement: reduced LP ended {status}"], stats=stats)
        # Certificate: each fixed job's vertex is still its best at the reduced LP's prices.
        fixed_jobs = np.flatnonzero(~free)
        _, best, _ = _picks(A[fixed_jobs], need[fixed_jobs], mult[fixed_jobs], usage[fixed_jobs], lam_new)
        got = _value_of(A[fixed_jobs], mult[fixed_jobs], usage[fixed_jobs], lam_new, fixed_x[fixed_jobs])
        profit = mult[fixed_jobs] * A[fixed_jobs].max(axis=1)
        wrong = ~(got >= best - CERTIFICATE_TOLERANCE * (np.abs(best) + profit))
        if not wrong.any():
            lam = lam_new
            break
        log.append(f"refinement round {rounds}: the certificate rejects {int(wrong.sum())} fixed jobs")
        if rounds >= MAX_ROUNDS:
            return SeparableResult("fallback", log=log + [f"refinement: {int(wrong.sum())} fixed jobs still fail"],
                                   stats=stats)
        if not anchored and ((free.sum() + wrong.sum()) > MAX_FREE_SHARE * n and n > WORKING_SET
                             or wrong.sum() > REJECTED_PER_FREE * free.sum()):
            # So few free jobs that the reduced LP's prices say nothing of the others (a
            # level set by one job's ceiling leaves the capacity rows to the free ones alone,
            # or a type's price is not pinned by any free job, and the reduced LP's dual sits at
            # one end of a wide range): keep the prices, free more of the jobs nearest a tie
            # instead (2,048 jobs, half at weight 8: 16 free jobs' prices rejected 630 fixed
            # ones, a 646-job reduced LP; 64 free jobs certify in one round).
            size *= 4
            lam = previous
            continue
        # The prices stay close: the set stays small, the rejected jobs join it (sticky).
        lam, previous, size = lam_new, lam_new, CONVERGED_WORKING_SET
        sticky[fixed_jobs[wrong]] = True
    stats["refine_s"] = time.perf_counter() - started
    log.append(f"refinement: certified optimal in {rounds} round(s), {int(free.sum())} of {n} jobs in the reduced LP")
    return SeparableResult("optimal", np.clip(matrix, 0.0, 1.0), float((mult[:, None] * A * matrix).sum()),
                           False, log, stats, lam)
