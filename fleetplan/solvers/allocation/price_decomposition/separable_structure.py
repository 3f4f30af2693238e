"""A max-min LP re-solved from a neighbouring problem's *structure* (Gavel §3.1's LP after a
small change: one GPU more or fewer, a job's throughput re-measured).

The price decomposition (:mod:`~fleetplan.solvers.allocation.price_decomposition.separable`) ends with a certified
structure: each fixed job's vertex (one type, or two types with its time full) and the few
free jobs of the reduced LP. After a change of one unit among thousands the vertices that were
cheapest almost always still are, so the neighbour's answer is found by solving the reduced
LP once at the new data — no interior-point prices, no search for the free set — and proven
by the decomposition's own certificate (:mod:`~fleetplan.solvers.allocation.price_decomposition.separable_certificate`).
Jobs the certificate rejects join the free ones for another round, as in the decomposition;
past :data:`STRUCTURE_ROUNDS` rounds or :data:`STRUCTURE_MAX_FREE` free jobs the caller
solves from prices. Whatever the structure, an answer returned is certified optimal.

>>> import numpy as np
>>> A = np.array([[2.0, 1.0], [1.0, 1.0], [1.5, 0.5]])
>>> ones = np.ones(3)
>>> first = resolve_structure(A, np.zeros(3), ones, ones, np.array([1.0, 1.0]),
...                           (np.array([0, 1, 0]), np.array([True, True, True])), free_level=False)
>>> bigger = resolve_structure(A, np.zeros(3), ones, ones, np.array([2.0, 1.0]), first.structure,
...                            free_level=False)
>>> first.status, bigger.status, round(bigger.level, 6) >= round(first.level, 6)
('optimal', 'optimal', True)
"""

from __future__ import annotations

import time

import numpy as np

from fleetplan.solvers.allocation.price_decomposition import separable_certificate as certificate
from fleetplan.solvers.allocation.price_decomposition.separable import (
    WORKING_SET,
    ReducedBasis,
    SeparableResult,
    reduced_lp,
)
from fleetplan.solvers.allocation.price_decomposition.vertices import vertex_affine
from fleetplan.solvers.deadline import Deadline

# Rounds that free the jobs the certificate rejects, and the free set's limit: one unit more or
# fewer moved at most 31 jobs across a tie at 16,384 distinct jobs (2 rounds; the other 6 of
# the 8 units certified in 1).
STRUCTURE_ROUNDS = 3
STRUCTURE_MAX_FREE = 8 * WORKING_SET
# The certificate's costs buffer is kept with the basis (for the next re-solve from it) up to
# this size: 200,000 jobs on 4 types. Fresh pages for it each round cost a re-solve at 16,384
# jobs about 0.3-0.8 ms of its 4-5 (page faults); far larger sessions keep their memory instead.
SCRATCH_BYTES = 16 * 2**20


def resolve_structure(A: np.ndarray, offset: np.ndarray, mult: np.ndarray, scale: np.ndarray, W: np.ndarray,
                      structure: tuple[np.ndarray, ...], *, free_level: bool, deadline: Deadline | None = None,
                      threads: int = 1, seed: int = 0, lp_tolerance: float | None = None) -> SeparableResult:
    """The max-min LP of :func:`~fleetplan.solvers.allocation.price_decomposition.separable.max_min` (no floors)
    solved by keeping ``structure`` = (each job's vertex, the free jobs[, the last reduced LP's
    :class:`~fleetplan.solvers.allocation.price_decomposition.separable.ReducedBasis`]), a neighbouring
    problem's :attr:`~fleetplan.solvers.allocation.price_decomposition.separable.SeparableResult.structure`. Status
    ``optimal`` (certified; its own structure kept), ``time_limit``, or ``fallback``: the
    structure does not fit these jobs, the reduced LP is not optimal, or the certificate still
    rejects jobs after the rounds allowed."""
    deadline = deadline or Deadline(None)
    started = time.perf_counter()
    choice, free = (np.asarray(part) for part in structure[:2])
    # The neighbour's last reduced LP's basis, where the structure carries one: its reduced LP
    # has these rows and columns, so the dual simplex starts a few pivots from the optimum.
    basis = structure[2] if len(structure) > 2 else None
    n, K = A.shape
    if choice.shape != (n,) or free.shape != (n,) or free.dtype != bool or not free.any() or \
            np.any(choice[~free] < -1) or np.any(choice >= K * (K + 1) // 2):
        return SeparableResult("fallback", log=["separable: the last answer's structure does not fit these jobs"])
    usage = mult * scale
    free = free.copy()
    # Every job's vertex as an affine function of t, once for all rounds (a free job idles: zero
    # rows, so sums over all jobs are the fixed jobs' sums and the plan's fixed rows come out of
    # one product); a round only zeroes the rows of the jobs it frees.
    alpha, beta, t_low_all, t_high_all = vertex_affine(A, offset, np.where(free, -1, choice))
    low_floor = -np.inf if free_level else 0.0
    bases: list[ReducedBasis] = []
    scratch = basis.scratch if basis is not None else {}
    costs = scratch.pop("costs", None)
    try:
        for rounds in range(1, STRUCTURE_ROUNDS + 1):
            fixed = ~free
            t_low, t_high = t_low_all[fixed], t_high_all[fixed]
            # (BLAS's matrix-vector product: a third of einsum's time on 16,384 x 4, one thread)
            gamma, delta = usage @ alpha, usage @ beta
            level_bounds = (max(float(t_low.max(initial=-np.inf)), low_floor), float(t_high.min(initial=np.inf)))
            # A later round starts from the round before's basis (the rejected jobs' rows basic).
            status, level, cells, lam, free_duals = reduced_lp(
                A, offset, usage, W, np.flatnonzero(free), gamma, delta, level_bounds, deadline, threads, seed, None,
                lp_tolerance, bases[-1] if bases else basis, bases)
            if status != "optimal":
                return SeparableResult("fallback" if status != "time_limit" else "time_limit",
                                       log=[f"separable: the last answer's structure: reduced LP {status}"])
            costs = certificate_costs(costs, n, K)
            wrong = certificate.rejected(A, offset, usage, W, level, lam, choice, fixed, t_low, t_high, costs=costs)
            if not wrong.any():
                break
            # As in the decomposition's rounds: the rejected jobs join the free ones (one GPU more
            # can move the few jobs nearest a tie to another vertex).
            freed = np.flatnonzero(fixed)[wrong]
            free[freed] = True
            alpha[freed], beta[freed] = 0.0, 0.0
            if rounds == STRUCTURE_ROUNDS or free.sum() > STRUCTURE_MAX_FREE:
                return SeparableResult("fallback", log=[f"separable: the last answer's structure: the certificate "
                                                        f"rejects {int(wrong.sum())} fixed jobs in round {rounds}"])
    finally:
        if costs is not None and costs.nbytes <= SCRATCH_BYTES:  # given back for the next re-solve
            scratch["costs"] = costs
    # Each fixed job's slope priced (free rows are zero), then the plan built in alpha's own
    # array: no (jobs, types) temporaries.
    priced_slopes = (alpha @ lam)[fixed]
    matrix = np.multiply(alpha, level, out=alpha)
    matrix += beta
    cell_job, cell_type, cell_values = cells
    matrix[cell_job, cell_type] = cell_values
    np.clip(matrix, 0.0, 1.0, out=matrix)
    duals, all_bottlenecked = certificate.score_duals(A, offset, usage, lam, choice, free, free_duals, None,
                                                      priced_slopes)
    stats = {"separable_s": time.perf_counter() - started, "separable_rounds": float(rounds),
             "separable_free": float(free.sum()), "separable_structure": 1.0}
    log = [f"separable: certified optimal with the last answer's structure in {rounds} round(s) ({int(free.sum())} "
           f"of {n} jobs in the reduced LP, every other job on its vertex)"]
    return SeparableResult("optimal", matrix, level, all_bottlenecked, log, stats, lam, duals,
                           structure=(choice, free), reduced_basis=bases[-1] if bases else None)


def certificate_costs(costs: np.ndarray | None, n: int, K: int) -> np.ndarray:
    """``costs`` if it is the certificate's (jobs, vertices) buffer for n jobs on K types, else a new one."""
    shape = (n, K + K * (K - 1) // 2)
    return costs if costs is not None and costs.shape == shape else np.empty(shape)
