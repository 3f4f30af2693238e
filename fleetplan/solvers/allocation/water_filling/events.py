"""Shortcuts through Gavel's water filling (Gavel §4.3, Appendix A.1) that keep its answers.

On distinct jobs the hierarchical policy spends most of its iterations on *cap events*: an
iteration whose level is set by one job reaching its own best score (its whole time on its
fastest type), not by the cluster's capacity. Each such iteration costs a level LP and two or
three rise LPs in the plain procedure (113 iterations, 358 LPs at 2,048 distinct jobs), yet its
outcome can be written down without an LP:

* *Level.* A job's score never exceeds its cap ``c[m]`` (:func:`individual_caps`: the best score
  with the cluster to itself), so the level LP's optimum is at most ``t_cap = min (c - l) / r``
  over the rising jobs; it equals ``t_cap`` exactly when the levels ``l + r t_cap`` are feasible.
* *Bottlenecked jobs.* A job within the rise tolerance of its cap cannot rise by more than the
  tolerance: bottlenecked, as the rise LPs would find. Every other job is free as soon as one
  feasible allocation lifts it above its new level by more than the tolerance (the rise LPs'
  own criterion: a witness).

:func:`simulate_events` runs these events forward in closed form (the weights are redistributed
after each by the caller's ``rates``, as in the plain procedure); the caller proves a prefix of
them with one feasible allocation at its last state (whose levels are at least every earlier
state's, so it is a witness for all of them; :func:`witnessed_prefix`), found by a binary search
of level LPs over the events. An event that cannot be proven this way is left to the plain
iteration. Infeasibility is never taken from a shortcut: a probe that fails only stops the
batch.

:func:`dual_stuck` proves jobs bottlenecked from a level LP's duals (weak duality, checked here
in closed form), so the rise LPs test only the jobs it leaves undecided.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fleetplan.instances.allocation.hierarchical import RISE_TOLERANCE
from fleetplan.models.allocation.water_filling import JobClasses
from fleetplan.solvers.allocation.price_decomposition.vertices import best_vertices


def tolerance(levels: np.ndarray) -> float:
    """The rise that counts (the judge's: relative to the largest level, at least absolute)."""
    return RISE_TOLERANCE * max(1.0, float(levels.max(initial=0.0)))


def individual_caps(classes: JobClasses) -> np.ndarray:
    """Each class member's best score with the cluster to itself: its time (at most 1) poured
    into its fastest types first, each type at most ``W_j / (k s)`` of it (a fractional knapsack;
    1 for a single job, which only counts types with enough workers)."""
    a = classes.coefficient
    bound = np.minimum(1.0, classes.num_workers[None, :]
                       / (classes.count * classes.scale_factor)[:, None])
    bound = np.where(a > 0, bound, 0.0)
    order = np.argsort(-a, axis=1)
    rows = np.arange(len(a))[:, None]
    a_sorted, b_sorted = a[rows, order], bound[rows, order]
    before = np.cumsum(b_sorted, axis=1) - b_sorted
    share = np.clip(1.0 - before, 0.0, b_sorted)
    return (a_sorted * share).sum(axis=1)


@dataclass(frozen=True)
class State:
    """Water filling after some events: levels, bottlenecked classes, and the next iteration's
    rates and cap time (``next_t`` inf when no rising class has a cap to reach)."""

    levels: np.ndarray
    done: np.ndarray
    next_rate: np.ndarray
    next_t: float


def simulate_events(levels: np.ndarray, done: np.ndarray, caps: np.ndarray, count: np.ndarray,
                    rates: Callable[[np.ndarray], np.ndarray], usage_bound: Callable[[np.ndarray], bool],
                    max_events: int, expired: Callable[[], bool] = lambda: False) -> list[State]:
    """States 0 (the given one), 1, ... reached by cap events, at most ``max_events`` of them.
    A class is capped when its ``count`` members together lie within the tolerance of their caps
    (the rise LPs measure a class's rise as the sum over its members).

    Stops early when a not-bottlenecked class has rate 0 (FIFO jobs behind their head: the plain
    test handles them) or when ``usage_bound(levels)`` proves the levels infeasible (the events
    past it cannot be real) or when ``expired()`` (the solve's clock)."""
    states: list[State] = []
    while True:
        rate = np.where(done, 0.0, rates(done))
        live = ~done
        if not live.any() or (rate[live] <= 0).any():
            states.append(State(levels, done, rate, 0.0 if not live.any() else np.inf))
            return states
        next_t = max(0.0, float(((caps - levels)[live] / rate[live]).min()))
        states.append(State(levels, done, rate, next_t))
        if len(states) > max_events or expired():
            return states
        new = np.where(live, np.minimum(levels + rate * next_t, caps), levels)
        if not usage_bound(new):
            return states
        capped = live & (count * (caps - new) <= tolerance(new))
        levels, done = new, done | capped


def witnessed_prefix(states: list[State], last: int, scores: np.ndarray, count: np.ndarray) -> int:
    """How many of the events 1..``last`` the allocation with ``scores`` (feasible, at least
    the levels of state ``last``) proves: in each, every class still rising afterwards must sit
    more than the tolerance above its new level (summed over its ``count`` members), so no rise
    LP would call it bottlenecked."""
    for k in range(1, last + 1):
        state = states[k]
        live = ~state.done
        if live.any() and not ((count * (scores - state.levels))[live] > tolerance(state.levels)).all():
            return k - 1
    return last


def dual_stuck(classes: JobClasses, levels: np.ndarray, row_dual: np.ndarray, tol: float) -> np.ndarray:
    """Classes a level LP's duals prove bottlenecked at ``levels`` (the LP's new levels).

    For worker prices ``lam >= 0`` and any score multipliers ``u >= 0``, every allocation ``x``
    with each score at or above its level satisfies ``sum_m u_m (score_m(x) - levels_m) <= D``
    with ``D = lam . W + sum_m h_m(u_m)``, ``h_m(u) = max(0, max_j (u a_mj - lam_j k_m s_m)) -
    u levels_m`` (the Lagrangian of the capacity rows; each job's time row kept). Every term of
    the sum is non-negative, so a member of class m rises by at most ``D / u_m``, the class (the
    rise LPs' sum over its ``k_m`` members) by ``k_m D / u_m``; classes where that is within
    ``tol`` are bottlenecked. Only ``lam`` is read from the duals (both sign conventions tried):
    each ``u_m`` is the minimiser of the convex piecewise-linear ``h_m`` (the best multiplier
    for those prices), which removes the dual's own rounding (1e-7 from a simplex) from ``D``.
    A poor ``lam`` only proves less, never something false."""
    n, K = classes.num_classes, len(classes.num_workers)
    best = np.zeros(n, dtype=bool)
    for sign in (1.0, -1.0):
        lam = np.maximum(-sign * row_dual[2 * n: 2 * n + K], 0.0)
        u, h = _best_multipliers(classes, levels, lam)
        terms = np.concatenate([lam * classes.num_workers, h])
        gap = max(0.0, float(terms.sum())) + 1e-12 * float(np.abs(terms).sum())
        rise = np.divide(gap * classes.count, u, out=np.full(n, np.inf), where=u > 0)
        stuck = rise <= tol
        if stuck.sum() > best.sum():
            best = stuck
    return best


def _best_multipliers(classes: JobClasses, levels: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per class, ``u >= 0`` minimising ``h(u) = max(0, max_j (u a_j - lam_j k s)) - u level``
    (the largest such u on ties) and ``h`` there. ``h`` is convex and piecewise linear, so its
    minimum sits at u = 0 or a breakpoint: where a type's term turns positive
    (``lam_j k s / a_j``) or two types' terms cross."""
    a = classes.coefficient
    usage = (classes.count * classes.scale_factor)[:, None]
    cost = lam[None, :] * usage
    K = a.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        candidates = [np.zeros(len(a)), *[np.where(a[:, j] > 0, cost[:, j] / a[:, j], 0.0) for j in range(K)]]
        for j in range(K):
            for k in range(j + 1, K):
                cross = (cost[:, j] - cost[:, k]) / (a[:, j] - a[:, k])
                ok = (a[:, j] > 0) & (a[:, k] > 0) & np.isfinite(cross) & (cross > 0)
                candidates.append(np.where(ok, cross, 0.0))
    u = np.column_stack(candidates)
    runnable = a > 0
    profit = np.where(runnable[:, None, :], u[:, :, None] * a[:, None, :] - cost[:, None, :], 0.0).max(axis=2)
    h = np.maximum(profit, 0.0) - u * levels[:, None]
    low = h.min(axis=1, keepdims=True)
    # Ties within rounding: the largest u divides the gap best.
    pick = np.where(h <= low + 1e-15 * (1.0 + np.abs(low)), u, -1.0).argmax(axis=1)
    rows = np.arange(len(a))
    return u[rows, pick], h[rows, pick]


def capacity_prices(classes: JobClasses, row_dual: np.ndarray) -> list[np.ndarray]:
    """The worker rows' prices (>= 0, per worker of each type) a level LP's row duals give, in
    both sign conventions (HiGHS's and the decomposition's differ); the zero ones dropped, as
    they prove nothing."""
    n, K = classes.num_classes, len(classes.num_workers)
    duals = np.asarray(row_dual, dtype=float)[2 * n: 2 * n + K]
    candidates = (np.maximum(-duals, 0.0), np.maximum(duals, 0.0))
    return [lam for lam in candidates if float((lam * classes.num_workers).sum()) > 0]


def priced_out(classes: JobClasses, levels: np.ndarray, prices: list[np.ndarray]) -> bool:
    """Whether capacity ``prices`` prove ``levels`` infeasible (weak duality of the level LP).

    At prices ``lam >= 0`` every class's cheapest way to reach its level (its own LP: the level
    at least, time at most 1) costs at least ``cost_m``, a vertex of that LP
    (:func:`fleetplan.solvers.allocation.price_decomposition.vertices.best_vertices`; infinite above the class's
    best score); any feasible allocation pays ``sum_m cost_m <= lam . W``. Levels whose costs
    exceed the workers' value by more than rounding cannot be met. Prices near the optimum's
    (the last level LP's, or those of a probe past the capacity point) refute every state of a
    batch of cap events past the capacity point, so the search probes the last state they
    leave."""
    usage = classes.count * classes.scale_factor
    for lam in prices:
        _, best, _, _ = best_vertices(classes.coefficient, levels, 0.0, lam, usage)
        cost = np.where(levels <= 0, 0.0, best)
        budget = float((lam * classes.num_workers).sum())
        if float(cost.sum()) > budget * (1 + 1e-9) + 1e-12:
            return True
    return False


def usage_bound(classes: JobClasses) -> Callable[[np.ndarray], bool]:
    """A necessary condition for levels to be feasible, in O(n): at unit prices a member needs at
    least ``level / (fastest score)`` of its time, so the workers used are at least
    ``sum k s level / max_j a`` and cannot exceed all the workers."""
    per_level = classes.count * classes.scale_factor / np.maximum(classes.max_score, 1e-300)
    total = float(classes.num_workers.sum())
    # An element-wise sum, not ``@``: the BLAS dot started threads and took 5 ms a call at 16,384
    # classes on the shared machine (20 s of a run).
    return lambda levels: float((per_level * levels).sum()) <= total * (1 + 1e-9)
