"""Each job's own LP in Gavel's max-min allocation, solved in closed form at given prices
(Gavel §3.1, §4.1).

At capacity prices ``lam`` and a level t, job m's part of the max-min LP is: reach the score
``need = t + offset[m]`` at least cost ``lam . (usage[m] x)`` with ``sum_j x[j] <= 1``. Its
optimal vertices are a single type (x_j = need / A_mj) or two types with the job's time full
(A_mh > need > A_ml: x_h = (need - A_ml) / (A_mh - A_ml), x_l = 1 - x_h); both are affine in t,
which is what lets a job whose vertex wins clearly be *fixed* while the prices move a little.
Used by the price decomposition (:mod:`fleetplan.solvers.allocation.price_decomposition.separable`) and the
restricted interior-point prices (:mod:`fleetplan.solvers.allocation.interior_point.ipm`).
"""

from __future__ import annotations

import numpy as np

from fleetplan.solvers import kernels

INF = float("inf")
COMPILED = "fleetplan.solvers.allocation.vertex_kernels"  # the same bits, one pass (kernels.py)


def _compiled():
    return kernels.load(COMPILED)


def type_pairs(n_types: int) -> tuple[np.ndarray, np.ndarray]:
    """The (first, second) types of every two-type vertex, in ``np.triu_indices`` order."""
    first, second = np.triu_indices(n_types, k=1)
    return first, second


def vertex_costs(A: np.ndarray, need: np.ndarray, lam: np.ndarray, usage: np.ndarray) -> np.ndarray:
    """Cost lam . (usage x) of every score-tight vertex of each job's LP at ``need``, as an
    (n, K + K(K-1)/2) array: columns 0..K-1 the single types, then the type pairs in
    ``np.triu_indices`` order. A vertex that does not exist for a job (need above the type's
    score, a type the job cannot run on) costs inf."""
    n, K = A.shape
    first, second = type_pairs(K)
    costs = np.empty((n, K + len(first)))
    weighted_need = usage * need
    # Whole columns with np.where: masked assignments (costs[ok, j] = ...) cost a gather and a
    # scatter per column, three times the passes at 10^6 jobs.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for j in range(K):
            a = A[:, j]
            costs[:, j] = np.where((a > 0) & (need <= a), (lam[j] * weighted_need) / a, np.inf)
        for p, (j, k) in enumerate(zip(first, second, strict=True)):
            a_j, a_k = A[:, j], A[:, k]
            j_high = a_j >= a_k
            a_hi, a_lo = np.where(j_high, a_j, a_k), np.where(j_high, a_k, a_j)
            lam_hi, lam_lo = np.where(j_high, lam[j], lam[k]), np.where(j_high, lam[k], lam[j])
            x_hi = (need - a_lo) / (a_hi - a_lo)
            cost = usage * (lam_hi * x_hi + lam_lo * (1.0 - x_hi))
            costs[:, K + p] = np.where((a_lo > 0) & (a_hi > need) & (need > a_lo), cost, np.inf)
    return costs


def need_at(offset: np.ndarray, level: float, floor: np.ndarray | None = None) -> np.ndarray:
    """Each job's score need at ``level``: level + offset, or the offset alone for a ``floor``
    job (water filling's bottlenecked jobs, whose rows the level does not lift)."""
    return level + offset if floor is None else np.where(floor, offset, level + offset)


def vertex_affine(A: np.ndarray, offset: np.ndarray, choice: np.ndarray, floor: np.ndarray | None = None):
    """x[m, :] = alpha[m, :] * t + beta[m, :] for vertex ``choice`` (-1: idle), and the range of
    t over which that vertex stays valid. A ``floor`` job's need is its offset whatever t: its
    vertex is the constant beta (the vertex at t = 0), valid for every t."""
    n, K = A.shape
    alpha = np.zeros((n, K))
    beta = np.zeros((n, K))
    compiled = _compiled()
    if compiled is not None:
        t_low, t_high = np.empty(n), np.empty(n)
        floors = np.zeros(0, dtype=np.uint8) if floor is None else np.ascontiguousarray(floor, dtype=np.uint8)
        compiled.vertex_affine(np.ascontiguousarray(A, dtype=float), np.ascontiguousarray(offset, dtype=float),
                               np.ascontiguousarray(choice, dtype=np.int64), floors, alpha, beta, t_low, t_high)
        return alpha, beta, t_low, t_high
    first, second = type_pairs(K)
    t_low = np.full(n, -INF)
    t_high = np.full(n, INF)
    rows = np.arange(n)
    idle = choice < 0
    t_high[idle] = -offset[idle]
    single = (choice >= 0) & (choice < K)
    m, j = rows[single], choice[single]
    alpha[m, j] = 1.0 / A[m, j]
    beta[m, j] = offset[m] / A[m, j]
    t_low[m], t_high[m] = -offset[m], A[m, j] - offset[m]
    pair = choice >= K
    m = rows[pair]
    pj, pk = first[choice[pair] - K], second[choice[pair] - K]
    hi = np.where(A[m, pj] >= A[m, pk], pj, pk)
    lo = np.where(A[m, pj] >= A[m, pk], pk, pj)
    span = A[m, hi] - A[m, lo]
    alpha[m, hi] = 1.0 / span
    beta[m, hi] = (offset[m] - A[m, lo]) / span
    alpha[m, lo] = -1.0 / span
    beta[m, lo] = 1.0 - beta[m, hi]
    t_low[m], t_high[m] = A[m, lo] - offset[m], A[m, hi] - offset[m]
    if floor is not None:
        alpha[floor] = 0.0
        t_low[floor], t_high[floor] = -INF, INF
    return alpha, beta, t_low, t_high


def best_vertices(A: np.ndarray, offset: np.ndarray, level: float, lam: np.ndarray, usage: np.ndarray,
                  floor: np.ndarray | None = None, costs: np.ndarray | None = None):
    """Each job's cheapest vertex at ``level`` (-1 idle, -2 none reaches it), its cost, the
    runner-up's cost, and every vertex's cost (written into ``costs``, an (n, K + K(K-1)/2)
    float array, where one is given: a caller pricing the same jobs again and again keeps its
    pages instead of having fresh ones mapped and zeroed each time)."""
    need = need_at(offset, level, floor)
    compiled = _compiled()
    if compiled is not None:
        n, K = A.shape
        shape = (n, K + K * (K - 1) // 2)
        if costs is None or costs.shape != shape or costs.dtype != np.float64 or not costs.flags.c_contiguous:
            costs = np.empty(shape)
        choice, best, second = np.empty(n, dtype=np.int64), np.empty(n), np.empty(n)
        compiled.best_vertices(np.ascontiguousarray(A, dtype=float), np.ascontiguousarray(need, dtype=float),
                               np.ascontiguousarray(lam, dtype=float), np.ascontiguousarray(usage, dtype=float),
                               costs, choice, best, second)
        return choice, best, second, costs
    costs = vertex_costs(A, need, lam, usage)
    rows = np.arange(len(need))
    cheapest = np.argmin(costs, axis=1)
    best = costs[rows, cheapest]
    if costs.shape[1] > 1:
        # The runner-up: the cheapest once the best is taken out (an argsort of each row costs
        # more than these two passes).
        costs[rows, cheapest] = np.inf
        second = costs.min(axis=1)
        costs[rows, cheapest] = best
    else:
        second = np.full(len(need), np.inf)
    choice = np.where(np.isfinite(best), cheapest, -2)
    choice = np.where(need <= 0, -1, choice)
    return choice, best, second, costs


def closeness(A: np.ndarray, offset: np.ndarray, level: float, lam: np.ndarray, usage: np.ndarray, W: np.ndarray,
              floor: np.ndarray | None = None):
    """Each job's vertex at (lam, level) and how close it is to changing: the smaller of the
    relative cost margin to the runner-up vertex and the relative distance of its need to a
    breakpoint (a type's score, or 0 where it would idle)."""
    # Prices of 0 (a type no bound binds, or a level set by one job's own time) make every
    # vertex tie; a small floor picks one canonical vertex per job. Whoever fixes jobs by this
    # certifies them at true prices later, so the floor decides only which jobs are fixed.
    mean_price = float(lam @ W) / float(W.sum()) if float(lam @ W) > 0 else 1.0 / float(W.sum())
    choice, best, second, _ = best_vertices(A, offset, level, np.maximum(lam, 1e-3 * mean_price), usage, floor)
    need = need_at(offset, level, floor)
    compiled = _compiled()
    if compiled is not None:
        measure = np.empty(len(need))
        compiled.closeness(np.ascontiguousarray(A, dtype=float), np.ascontiguousarray(offset, dtype=float),
                           np.ascontiguousarray(need, dtype=float), best, second, measure)
        return choice, measure
    with np.errstate(divide="ignore", invalid="ignore"):
        tie = np.where(np.isfinite(second), (second - best) / np.maximum(np.abs(best), 1e-300), np.inf)
        gap = np.where(A > 0, np.abs(A - need[:, None]) / np.maximum(A, np.abs(need)[:, None]), np.inf).min(axis=1)
        idle_gap = np.where(offset != 0, np.abs(need) / np.abs(offset), np.inf)
    return choice, np.minimum(np.minimum(tie, gap), idle_gap)


def best_types(reduced: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The linear form's vertices: each job's type of largest reduced profit ``reduced`` (n, K)
    (-1, idle, when none is positive) and its margin over the runner-up (idling counts as 0)."""
    options = np.column_stack([reduced, np.zeros(len(reduced))])
    rows = np.arange(len(reduced))
    top_index = np.argmax(options, axis=1)
    top = options[rows, top_index]
    options[rows, top_index] = -np.inf
    runner_up = options.max(axis=1)
    choice = np.where(top_index == reduced.shape[1], -1, top_index)
    return choice, top - runner_up
