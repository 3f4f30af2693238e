"""The price decomposition's certificate for max-min forms (:mod:`~fleetplan.solvers.allocation.price_decomposition.separable`).

A reduced LP over the *free* jobs, with every *fixed* job entering the capacity rows as its
vertex's affine term, is optimal for the full LP when its duals make every fixed job's vertex
the cheapest of that job's own LP (dual feasibility of the full LP) and the level rests on no
fixed job's breakpoint (the vertex stays valid around it). Primal feasibility holds by
construction and complementary slackness by the choice of vertex, so the KKT conditions of the
full LP hold. The decomposition's rounds and the structure re-solve of a neighbouring problem
(:func:`~fleetplan.solvers.allocation.price_decomposition.separable.max_min`'s ``structure``) both decide with
:func:`rejected`.

>>> import numpy as np
>>> A = np.array([[2.0, 1.0], [1.0, 1.0]])
>>> fixed = np.array([True, False])
>>> rejected(A, np.zeros(2), np.ones(2), np.ones(2), 1.0, np.array([0.5, 0.5]), np.array([0, 1]), fixed,
...          np.array([0.0]), np.array([2.0])).tolist()   # job 0 on type 0 at t = 1: its cheapest vertex
[False]
"""

from __future__ import annotations

import numpy as np

from fleetplan.solvers.allocation.price_decomposition.vertices import (
    best_vertices,
    need_at,
    vertex_affine,
)

CERTIFICATE_TOLERANCE = 1e-9


def rejected(A: np.ndarray, offset: np.ndarray, usage: np.ndarray, W: np.ndarray, level: float, lam: np.ndarray,
             choice: np.ndarray, fixed: np.ndarray, t_low: np.ndarray, t_high: np.ndarray,
             floor: np.ndarray | None = None, costs: np.ndarray | None = None) -> np.ndarray:
    """For each fixed job (in order), whether the certificate rejects its vertex ``choice`` at
    ``level`` and prices ``lam``: a cheaper vertex exists, or the level sits on one of its
    breakpoints (``t_low``, ``t_high``: the range where the vertex is valid). ``costs``: a
    buffer for every job's vertex costs (:func:`~fleetplan.solvers.allocation.price_decomposition.vertices.best_vertices`),
    used when most jobs are fixed."""
    n = len(A)
    fixed_jobs = np.flatnonzero(fixed)
    mean_price = float(lam @ W) / max(n, 1)
    if 2 * len(fixed_jobs) >= n:
        # Most jobs are fixed (a structure re-solve: all but a few dozen of 16,384): every job's
        # vertices are priced and judged, and the fixed ones' verdicts read after, which spares
        # copying the rows of A, the offsets, the usages and each intermediate first. Each job's
        # numbers are its own row's, so the fixed jobs' verdicts are the same either way.
        new_choice, best, _, costs = best_vertices(A, offset, level, lam, usage, floor, costs)
        wrong = _wrong_vertices(costs, choice, new_choice, best, offset, level, floor, mean_price)[fixed_jobs]
    else:
        fixed_floor = None if floor is None else floor[fixed_jobs]
        new_choice, best, _, costs = best_vertices(A[fixed_jobs], offset[fixed_jobs], level, lam, usage[fixed_jobs],
                                                   fixed_floor)
        wrong = _wrong_vertices(costs, choice[fixed_jobs], new_choice, best, offset[fixed_jobs], level, fixed_floor,
                                mean_price)
    span = max(1.0, abs(level))
    return wrong | (np.abs(t_high - level) <= 1e-9 * span) | (np.abs(level - t_low) <= 1e-9 * span)


def _wrong_vertices(costs: np.ndarray, assumed: np.ndarray, new_choice: np.ndarray, best: np.ndarray,
                    offset: np.ndarray, level: float, floor: np.ndarray | None, mean_price: float) -> np.ndarray:
    """Per row of ``costs``: whether a vertex cheaper than the ``assumed`` one exists (beyond the
    certificate's tolerance)."""
    # Each row's assumed vertex's cost, gathered by flat index (take_along_axis, the same gather
    # through index arrays of its own, took 0.06 ms of a 2,048-job LAS certificate's 0.16; 0.04).
    picked = np.take(costs, np.arange(len(costs)) * costs.shape[1] + np.maximum(assumed, 0))
    assumed_cost = np.where(assumed >= 0, picked, 0.0)
    idle = assumed == -1
    if idle.any():  # an idle vertex costs nothing where the job needs nothing, else it is not a vertex
        assumed_cost = np.where(idle, np.where(need_at(offset, level, floor) <= 0, 0.0, np.inf), assumed_cost)
    best_cost = np.where(new_choice == -1, 0.0, best)
    tolerance = CERTIFICATE_TOLERANCE * (np.abs(best_cost) + mean_price)
    return ~(assumed_cost <= best_cost + tolerance)


def score_duals(A: np.ndarray, offset: np.ndarray, usage: np.ndarray, lam: np.ndarray, choice: np.ndarray,
                free: np.ndarray, free_duals: np.ndarray, floor: np.ndarray | None,
                alpha: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
    """Every job's score-row dual of a certified answer (a fixed job's: the marginal cost of its
    need, for a floor job of its floor, its vertex's slope priced at ``lam``; a free job's: the
    reduced LP's ``free_duals``), and whether all of them are positive: then every optimum gives
    each job exactly the level, and a sum-of-scores refinement changes nothing. ``alpha``: the
    fixed jobs' vertex slopes (in order) where the caller has them, or already priced (each
    fixed job's ``alpha @ lam``, one dimension), else computed here."""
    fixed_jobs = np.flatnonzero(~free)
    if alpha is None:
        alpha = vertex_affine(A[fixed_jobs], offset[fixed_jobs], choice[fixed_jobs])[0]
    fixed_u = usage[fixed_jobs] * (np.einsum("mj,j->m", alpha, lam) if alpha.ndim == 2 else alpha)
    all_bottlenecked = bool(np.all(fixed_u > 0) and np.all(free_duals > 0)) and floor is None
    duals = np.zeros(len(A))
    duals[fixed_jobs] = np.maximum(fixed_u, 0.0)
    duals[np.flatnonzero(free)] = np.maximum(free_duals, 0.0)
    return duals, all_bottlenecked
