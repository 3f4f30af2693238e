"""Gavel's linear allocation LPs (max throughput, FIFO; Gavel §4.1) by price decomposition.

The linear half of :mod:`fleetplan.solvers.allocation.price_decomposition.separable`, split from it: the same four
steps (first prices, each job's vertex at them, a reduced LP over the jobs near a tie, the
certificate), where a fixed job's vertex is a constant, not an affine function of a level. A
fixed job sits on the type of the largest reduced profit ``P_mj - lam_j k_m s_m``, or idles when
none is positive. The shared parts (the reduced LP's HiGHS run, interior-point pricing, buckets
of similar jobs, the result class and the round limits) stay in that module and are reached
through it, so a patch of one of them there reaches these solves too.

>>> import numpy as np
>>> P = np.array([[2.0, 1.0], [1.0, 1.0]])  # two jobs, two one-worker types
>>> result = linear(P, np.ones(2), np.ones(2), np.array([1.0, 1.0]))
>>> result.status, round(result.level, 6)  # job 0 on type 0, job 1 on type 1
('optimal', 3.0)
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np

from fleetplan.models.linear import INF, LinearProgram
from fleetplan.solvers.allocation.price_decomposition import separable
from fleetplan.solvers.allocation.price_decomposition.separable_certificate import (
    CERTIFICATE_TOLERANCE,
)
from fleetplan.solvers.allocation.price_decomposition.vertices import best_types as _best_types
from fleetplan.solvers.deadline import Deadline

# ``prices="auto"`` on linear forms starts from interior-point prices from this many jobs (they
# are priced on a sample and the jobs near a tie) when the method runs as numpy code: max
# throughput at 10^6 distinct jobs 2.3 s instead of 4.1 s with bucket prices first; the two were
# even at 65,536. Its compiled iterations (fleetplan.solvers.kernels) make it the faster start
# at every size (max throughput at 2,048 / 65,536 distinct jobs: 12 / 355 ms against 25 / 415
# ms with bucket prices first, one round instead of 3-4).
LINEAR_IPM_FIRST = 100_000


def _linear_ipm_prices(P, usage, W, deadline, log, stats, start=None):
    from fleetplan.solvers.allocation.interior_point.ipm import linear_prices

    first = separable._interior_point_prices(lambda: linear_prices(P, usage, W, deadline=deadline, start=start),
                                             log, stats)
    if first is None:
        return "not_converged", None, False
    return "optimal", first.lam, first.status == "optimal"


def _linear_bucket_prices(P, usage, W, deadline, threads, seed):
    """First prices from buckets of jobs with nearly equal profit per worker."""
    K = P.shape[1]
    A = P / usage[:, None]
    with np.errstate(divide="ignore"):
        keys = np.where(A > 0, np.log(np.where(A > 0, A, 1.0)), -np.inf)
    first, inverse = separable.bucket_of(keys)
    weight = np.bincount(inverse, weights=usage)
    mean_A = np.column_stack([np.bincount(inverse, weights=A[:, j] * usage) for j in range(K)]) / weight[:, None]
    mean_A = np.where(A[first] > 0, mean_A, 0.0)
    status, _, lam = _linear_reduced(mean_A * weight[:, None], weight, np.ones(len(first), dtype=bool),
                                     np.zeros(len(first), dtype=int), W, deadline, threads, seed)
    return status, lam, len(first)


def linear(P: np.ndarray, mult: np.ndarray, scale: np.ndarray, W: np.ndarray, *, deadline: Deadline | None = None,
           threads: int = 1, seed: int = 0, prices: Literal["auto", "ipm", "buckets"] = "auto",
           start: np.ndarray | None = None) -> separable.SeparableResult:
    """maximize sum P[m, j] x[m, j] s.t. sum_j x[m, j] <= 1, sum_m mult_m scale_m x[m, j] <= W_j,
    x >= 0, x = 0 where ``P`` is 0 (the job cannot run there). ``prices``: ``buckets`` first, then
    interior-point prices once they leave thousands of jobs unsettled, and interior-point prices
    first from LINEAR_IPM_FIRST jobs, at every size when the method runs compiled (``auto``:
    measured faster than either alone on max throughput and FIFO, 2,048 to 10^6 jobs), or one
    of the two. ``start``: the capacity prices of a neighbouring problem (as for
    :func:`~fleetplan.solvers.allocation.price_decomposition.separable.max_min`),
    tried first; the method starts again from its own prices when they do not certify."""
    if start is not None:
        warm = _linear(P, mult, scale, W, deadline=deadline, threads=threads, seed=seed, prices=prices, start=start)
        if warm.status != "fallback":
            return warm
        cold = _linear(P, mult, scale, W, deadline=deadline, threads=threads, seed=seed, prices=prices)
        cold.log = warm.log + ["separable: the warm start did not certify; starting again"] + cold.log
        return cold
    return _linear(P, mult, scale, W, deadline=deadline, threads=threads, seed=seed, prices=prices)


def _linear(P, mult, scale, W, *, deadline, threads, seed, prices, start=None) -> separable.SeparableResult:
    from fleetplan.solvers.allocation.interior_point.ipm import compiled

    deadline = deadline or Deadline(None)
    started = time.perf_counter()
    n, K = P.shape
    usage = mult * scale
    log, stats = [], {}
    status, lam, anchor, converged = "not_converged", None, None, False
    if start is not None or prices == "ipm" or (prices == "auto" and (compiled() or n >= LINEAR_IPM_FIRST)):
        if start is not None:
            log.append("separable: interior-point prices warm-started from the previous round's")
        status, lam, converged = _linear_ipm_prices(P, usage, W, deadline, log, stats, start)
        anchor = lam if status == "optimal" else None  # vertices are picked at these prices every round
    if status != "optimal":
        status, lam, buckets = _linear_bucket_prices(P, usage, W, deadline, threads, seed)
        log.append(f"separable: {buckets} buckets for the first prices")
        stats["separable_buckets"] = float(buckets)
        if status != "optimal":
            return separable.SeparableResult("fallback", log=log + [f"bucket LP ended {status}"], stats=stats)
    scale_profit = max(float(np.max(P)), 1e-300)
    sticky = np.zeros(n, dtype=bool)
    size, previous = separable.CONVERGED_WORKING_SET if converged else separable.WORKING_SET, lam
    rounds = 0
    while True:
        rounds += 1
        if prices == "auto" and anchor is None and (size > 16 * separable.WORKING_SET
                                                    or sticky.sum() > 4 * separable.WORKING_SET):
            # Bucket prices are cheap and usually settle all but a few jobs (max throughput), but
            # where they leave thousands unsettled (FIFO's spread of weights, 10^6 jobs) the
            # interior-point prices are worth their cost: switch once, keeping what was learnt.
            ipm_status, ipm_lam, _ = _linear_ipm_prices(P, usage, W, deadline, log, stats)
            if ipm_status == "optimal":
                anchor, lam, size = ipm_lam, ipm_lam, separable.WORKING_SET
        pick_lam = anchor if anchor is not None else lam
        reduced = np.where(P > 0, P - pick_lam[None, :] * usage[:, None], -np.inf)
        choice, margin = _best_types(reduced)
        closeness = margin / np.maximum(P.max(axis=1), 1e-300)
        free = sticky | (closeness <= separable.TIE)
        if n > size:
            free[np.argpartition(closeness, size)[:size]] = True
        else:
            free[:] = True
        if free.mean() > separable.MAX_FREE_SHARE and n > separable.WORKING_SET:
            return separable.SeparableResult("fallback", log=log + [f"{int(free.sum())} of {n} jobs free"],
                                             stats=stats)
        if deadline.expired():
            return separable.SeparableResult("time_limit", log=log + ["time limit in the separable method"],
                                             stats=stats)
        status, matrix, lam_new = _linear_reduced(P, usage, free, choice, W, deadline, threads, seed)
        stats.update(separable_rounds=float(rounds), separable_free=float(free.sum()))
        log.append(f"round {rounds}: {int(free.sum())} free jobs, reduced LP {status}")
        if status == "infeasible" and rounds < separable.MAX_ROUNDS:
            size *= 4  # the fixed jobs alone overfill a type: the prices were too low
            lam = previous
            continue
        if status != "optimal":
            return separable.SeparableResult("fallback" if status != "time_limit" else "time_limit",
                                   log=log + [f"reduced LP ended {status}"], stats=stats)
        lam, previous, size = lam_new, lam_new, separable.WORKING_SET
        fixed_jobs = np.flatnonzero(~free)
        reduced = np.where(P[fixed_jobs] > 0, P[fixed_jobs] - lam[None, :] * usage[fixed_jobs, None], -np.inf)
        best = np.maximum(reduced.max(axis=1), 0.0)
        assumed = choice[fixed_jobs]
        got = np.where(assumed >= 0, reduced[np.arange(len(fixed_jobs)), np.maximum(assumed, 0)], 0.0)
        wrong = got < best - CERTIFICATE_TOLERANCE * (np.abs(best) + scale_profit * 1e-3)
        if not wrong.any():
            break
        if rounds >= separable.MAX_ROUNDS:
            return separable.SeparableResult("fallback", log=log + [f"{int(wrong.sum())} fixed jobs still fail"],
                                             stats=stats)
        sticky[fixed_jobs[wrong]] = True
    stats["separable_s"] = time.perf_counter() - started
    log.append(f"separable: certified optimal in {rounds} round(s), {int(free.sum())} of {n} jobs in the reduced LP")
    return separable.SeparableResult("optimal", matrix, float((P * matrix).sum()), False, log, stats, lam,
                           anchor=None if anchor is None else (float("nan"), anchor))


def _linear_reduced(P, usage, free, choice, W, deadline, threads, seed):
    n, K = P.shape
    fixed = np.flatnonzero(~free)
    on = choice[fixed] >= 0
    used = np.bincount(choice[fixed][on], weights=usage[fixed][on], minlength=K)
    free_jobs = np.flatnonzero(free)
    cell_job, cell_type = np.nonzero(P[free_jobs] > 0)
    n_cells, n_free = len(cell_job), len(free_jobs)
    import scipy.sparse as sp

    rows = np.concatenate([cell_job, n_free + cell_type])
    cols = np.concatenate([np.arange(n_cells)] * 2)
    vals = np.concatenate([np.ones(n_cells), usage[free_jobs[cell_job]]])
    lp = LinearProgram(cost=P[free_jobs[cell_job], cell_type],
                       matrix=sp.csr_matrix((vals, (rows, cols)), shape=(n_free + K, n_cells)),
                       row_lower=np.full(n_free + K, -INF), row_upper=np.concatenate([np.ones(n_free), W - used]),
                       col_lower=np.zeros(n_cells), col_upper=np.ones(n_cells), sense="max")
    outcome, duals = separable._solve_lp(lp, deadline, threads, seed)
    if outcome.status != "optimal" or duals is None:
        return outcome.status, None, None
    matrix = np.zeros((n, K))
    matrix[free_jobs[cell_job], cell_type] = outcome.values
    matrix[fixed[on], choice[fixed][on]] = 1.0
    return "optimal", matrix, np.maximum(duals[n_free:], 0.0)
