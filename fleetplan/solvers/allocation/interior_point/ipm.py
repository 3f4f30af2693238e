"""A structured interior-point method for Gavel's allocation LPs (Gavel §3.1, §4.1).

The max-min LP ``maximize t s.t. A[m] @ x[m] - t >= o[m], sum_j x[m, j] <= 1, sum_m u_m x[m, j]
<= W_j, x >= 0`` couples its n jobs only through K capacity rows and the level t. In a
primal-dual interior-point method the normal equations ``B D B^T dy = r`` then split into one
2x2 block per job (its score and time rows), K capacity rows and one rank-one term from t:
eliminating the blocks leaves a dense (K + 1) x (K + 1) system. The linear LP (``maximize
sum P[m] @ x[m]`` under the same time and capacity rows: max throughput, FIFO) has 1x1 job
blocks and a K x K system. The iterates live in flat vectors (every primal variable in one
array, every row's dual in another; the (K, n) cells, per-job and per-type parts are views), so
the element-wise work of an iteration is one numpy call per step rather than one per block, and
the sums over a job's types or over jobs are ``einsum`` contractions (no temporaries, no BLAS
threads). An iteration is about 150 numpy calls, whatever n.

This method only *prices*: its duals (lam, and t) start :func:`fleetplan.solvers.allocation.price_decomposition.separable.max_min`
and :func:`~fleetplan.solvers.allocation.price_decomposition.separable_linear.linear`,
whose reduced LP and optimality certificate make the answer exact. Prices this close to the
optimum's leave few jobs near a tie between two vertices, so the reduced LP is small and the
certificate passes in one or two rounds (bucketed prices a few percent off left thousands of
jobs free). When this method does not converge, the decomposition falls back to the bucketed
prices, so nothing depends on it for correctness.

Large LPs (from RESTRICT_ABOVE jobs) are not priced over every job: the method runs on a random
sample (a smaller cluster of the same mix, on its share of the workers), then on the jobs whose
closed-form answer is near a tie at the sample's prices, the others *held* at their answer
(:func:`_restricted_max_min_prices`, :func:`_restricted_linear_prices`). At 10^6 distinct jobs
that is 31,250 + 53,303 jobs priced instead of 10^6 (2.7 s instead of 60 s on this machine).
The method starts from a point inside every bound (each job's time spread over its types),
which took 20-45 % fewer iterations than Mehrotra's least-squares start on Gavel's LPs.

Reference: Mehrotra's predictor-corrector (S. Mehrotra, "On the implementation of a primal-dual
interior point method", SIAM J. Optim. 2(4), 1992), in the normal-equations form of S. J.
Wright, *Primal-Dual Interior-Point Methods* (SIAM, 1997), ch. 10.

>>> import numpy as np
>>> A = np.array([[2.0, 1.0], [1.0, 1.0]])  # two jobs, two one-worker types
>>> prices = max_min_prices(A, np.zeros(2), np.ones(2), np.ones(2), free_level=False)
>>> prices.status in ("optimal", "approximate"), round(prices.level, 4)
(True, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.solvers import kernels
from fleetplan.solvers.allocation.interior_point.ipm_systems import (
    Linear,
    MaxMin,
    cells_and_mask,
    dot,
)
from fleetplan.solvers.allocation.price_decomposition import vertices
from fleetplan.solvers.deadline import Deadline

TOLERANCE = 1e-8
# The normal equations lose accuracy as the iterates near the optimal face (the capacity rows'
# Schur complement is a difference of large, nearly equal terms). Prices only need to be close
# enough that few jobs sit near a tie, so the method keeps its most accurate iterate and returns
# it when accuracy stops improving, if that iterate is within USABLE.
USABLE = 1e-3
MAX_ITERATIONS = 80
STEP_FRACTION = 0.995
# Iterative refinement of the normal equations costs a quarter of an iteration; it is needed
# only once the iterates are close enough for the Schur complement to lose digits.
REFINE_BELOW = 1e-2
# A run to a tolerance of LOOSE_TOLERANCE or more (the separable method's first prices) ends
# before then: it refines only below 10x its tolerance. LAS at 2,048 distinct jobs, 4
# instances at 1e-5: the same 15-16 iterations, 4.8-5.0 ms instead of 5.1-5.4 (the compiled
# iterations alone); 12 instances solved: the same certified levels.
LOOSE_TOLERANCE = 1e-5
# Gondzio correctors per iteration: each costs one more solve with the same factors. Below
# CORRECTOR_CELLS cells an iteration is mostly interpreter overhead and the fewer iterations do
# not pay for the extra solves (2,048 jobs: 22 iterations in 0.052 s without, 17 in 0.066 s with).
CENTRALITY_CORRECTORS = 2
CORRECTOR_CELLS = 100_000
# The compiled iterations check the deadline after about this many cell-iterations (a few
# milliseconds).
KERNEL_CHUNK_CELLS = 2_000_000
COMPILED = "fleetplan.solvers.allocation.ipm_kernels"
# LPs of at least RESTRICT_ABOVE jobs are priced from a sample, then by the method on the jobs
# near a tie only (:func:`_restricted_max_min_prices`, :func:`_restricted_linear_prices`).
RESTRICT_ABOVE = 8_192
SAMPLE_MIN, SAMPLE_FRACTION = 4_096, 32
SAMPLE_TOLERANCE = 1e-6
# A job is held at its vertex when that vertex wins by more than FIRST_TIE / sqrt(sample size)
# at the sample's prices (the sample's error shrinks as its square root: 1-2 % at 4,096 jobs
# on Gavel's mix), and released for good when at a later round's prices it changes vertex or
# wins by LATER_TIE or less.
FIRST_TIE, LATER_TIE = 1.5, 1e-3
RESTRICT_ROUNDS = 6
# With a warm start (the prices of a scheduler's previous round, which moved by what changed), a
# job is held unless its vertex wins by WARM_TIE or less.
WARM_TIE = 0.003
# Prices whose value (lam . W) is below this share of the level: no capacity binds.
NEGLIGIBLE_PRICES = 1e-3
MAX_RELEASED_SHARE = 0.5


def _refine_below(tolerance: float) -> float:
    """The error below which a run to ``tolerance`` refines its solves of the normal equations."""
    return REFINE_BELOW if tolerance < LOOSE_TOLERANCE else min(REFINE_BELOW, 10 * tolerance)


@dataclass
class IpmPrices:
    """The level (max-min form), the capacity prices (>= 0, in the LP's max sense) and how the
    method ended."""

    # optimal: within TOLERANCE; approximate: the most accurate iterate, within USABLE, where the
    # normal equations stopped gaining digits; not_converged; time_limit
    status: str
    level: float = float("nan")
    lam: np.ndarray | None = None
    iterations: int = 0
    # Every job's vertex and closeness to a change at (level, lam) (vertices.closeness), when the
    # method computed them already (its restricted form does): the decomposition reuses them.
    picks: tuple[np.ndarray, np.ndarray] | None = None


@dataclass
class _Point:
    """Primal z, row duals y, dual slacks s (shaped as z)."""

    z: np.ndarray
    y: np.ndarray
    s: np.ndarray


def _residuals(system, point: _Point):
    primal = system.rhs - system.apply(point.z)
    dual = system.cost - system.apply_transpose(point.y)
    dual -= point.s
    return primal, system.mask_cells(dual)


def _direction(system, point: _Point, factor, inv_s, primal_res, dual_res, complementarity, refine: bool, d):
    """Newton direction for residuals (primal, dual; None for zero) and target products
    ``complementarity`` (zero on unusable cells)."""
    z = point.z
    # v = S^-1 (r_c - Z r_d); rhs = r_p - B v
    v = complementarity - z * dual_res if dual_res is not None else complementarity.copy()
    v *= inv_s
    rhs = -system.apply(v)
    if primal_res is not None:
        rhs += primal_res
    dy = system.solve(factor, rhs)
    bt = system.apply_transpose(dy)
    if refine:
        # One step of iterative refinement: the Schur complement loses digits near the optimum.
        dy += system.solve(factor, rhs - system.apply(bt * d))
        bt = system.apply_transpose(dy)
    ds = dual_res - bt if dual_res is not None else -bt
    dz = complementarity - z * ds
    dz *= inv_s
    return dz, dy, ds


def _max_step(inverse_values: np.ndarray, step: np.ndarray) -> float:
    """Largest alpha <= 1 keeping every value (> 0; given as its inverse, 0 where the value is a
    held-out cell's 0) + alpha * step >= 0."""
    steepest = float(np.min(step * inverse_values))
    return 1.0 if steepest >= -1.0 else -1.0 / steepest


def _interior_point(system, deadline: Deadline, tolerance: float, max_iterations: int):
    """Mehrotra's predictor-corrector (with Gondzio's correctors on large systems). Returns
    (status, point, iterations): the converged point, or the most accurate one seen when
    accuracy stopped improving and it is within USABLE."""
    # The interior start (every primal bound strict, every dual slack positive) takes 20-45 %
    # fewer iterations than Mehrotra's on Gavel's LPs (2,048-65,536 distinct jobs); with held
    # jobs (capacity rows whose right-hand sides and level terms vary) Mehrotra's does better.
    if system.held:
        return _iterations(system, _starting_point(system), deadline, tolerance, max_iterations)
    # The max-min start scaled to the optimum's duals (ipm_systems.START_TIME_DUAL) serves the
    # loose runs it was measured on (the separable method's first prices). A run to 1e-8 from
    # it on a weighted LAS instance ended "approximate" with its level within 1e-6 of the
    # ceiling (a job's best score), which sent that solve to the ceiling's refinement: tight
    # runs keep the classic start, as does a loose run whose iterations diverge from the scaled
    # one (a water-filling level LP with weighted rates and floors did).
    scaled = system.classic_start is not None and tolerance >= LOOSE_TOLERANCE
    first = system.start() if scaled or system.classic_start is None else system.classic_start()
    status, point, iterations = _iterations(system, _Point(*first), deadline, tolerance, max_iterations)
    if scaled and status == "not_converged":
        status, point, more = _iterations(system, _Point(*system.classic_start()), deadline, tolerance,
                                          max_iterations)
        iterations += more
    return status, point, iterations


def _iterations(system, point: _Point, deadline: Deadline, tolerance: float, max_iterations: int):
    """The iterations from ``point``: compiled where they can be (:func:`_compiled_iterations`)."""
    if system.cells < CORRECTOR_CELLS:
        compiled = _compiled_iterations(system, point, deadline, tolerance, max_iterations)
        if compiled is not None:
            return compiled
    return _numpy_iterations(system, point, deadline, tolerance, max_iterations)


def compiled() -> bool:
    """Whether the method's iterations run compiled (kernels on and built; below
    CORRECTOR_CELLS cells)."""
    return kernels.load(COMPILED) is not None


def _compiled_iterations(system, point: _Point, deadline: Deadline, tolerance: float, max_iterations: int):
    """:func:`_numpy_iterations` compiled (:mod:`fleetplan.solvers.allocation.ipm_kernels`; no Gondzio correctors, as below
    CORRECTOR_CELLS), run in chunks of about KERNEL_CHUNK_CELLS cell-iterations between checks
    of the deadline. None when the Schur complement turns singular (the numpy code then runs
    from the start, with its pseudo-inverse) or the kernels are off or not built."""
    ipm_kernels = kernels.load(COMPILED)
    if ipm_kernels is None:
        return None
    form, profit, rate, level_usage = system.kernel_arrays()
    z, y, s = point.z.copy(), point.y.copy(), point.s.copy()
    best_z, best_y, best_s = z.copy(), y.copy(), s.copy()
    best_error = np.array([np.inf])
    active = system.active if system.partial else np.ones(system.num_primal)
    chunk = max(1, KERNEL_CHUNK_CELLS // max(system.cells, 1))
    done = 0
    while done < max_iterations:
        if deadline.expired():
            return "time_limit", None, done + 1
        outcome, ran = ipm_kernels.iterate(
            form, profit, system.cap, system.mask, rate, level_usage, system.rhs, system.cost, active,
            system.count, system.rhs_scale, z, y, s, best_z, best_y, best_s, best_error, tolerance,
            _refine_below(tolerance), STEP_FRACTION, min(chunk, max_iterations - done))
        done += ran
        if outcome == ipm_kernels.CONVERGED:
            return "optimal", _Point(z, y, s), done
        if outcome == ipm_kernels.SINGULAR:
            return None
        if outcome == ipm_kernels.STOPPED:
            break
    if best_error[0] < USABLE:
        return "approximate", _Point(best_z, best_y, best_s), done
    return "not_converged", None, done


def _numpy_iterations(system, point: _Point, deadline: Deadline, tolerance: float, max_iterations: int):
    best_error, best_point = np.inf, point
    correctors = CENTRALITY_CORRECTORS if system.cells >= CORRECTOR_CELLS else 0
    active = system.active if system.partial else 1.0
    iteration = 0
    for iteration in range(1, max_iterations + 1):
        if deadline.expired():
            return "time_limit", None, iteration
        primal_res, dual_res = _residuals(system, point)
        z, s = point.z, point.s
        gap = dot(z, s)
        mu = gap / system.count
        primal_inf = max(float(primal_res.max(initial=0.0)), -float(primal_res.min(initial=0.0))) / system.rhs_scale
        dual_inf = max(float(dual_res.max(initial=0.0)), -float(dual_res.min(initial=0.0)))
        error = max(primal_inf, dual_inf, gap / (1.0 + abs(system.objective(z))))
        if error < tolerance:
            return "optimal", point, iteration
        if error < best_error:
            best_error, best_point = error, point
        elif error > 1e3 * best_error or not np.isfinite(error):
            break
        # Predictor (affine scaling), then Mehrotra's centring and second-order corrector.
        refine = error < _refine_below(tolerance)
        inv_s = 1.0 / s
        # Held-out cells have z = 0 and a zero step: their inverse is taken as 0, not inf.
        inv_z = np.divide(1.0, z, out=np.zeros_like(z), where=z > 0)
        d = z * inv_s
        factor = system.factor(d)
        products = z * s
        dz, dy, ds = _direction(system, point, factor, inv_s, primal_res, dual_res, -products, refine, d)
        alpha_p, alpha_d = _max_step(inv_z, dz), _max_step(inv_s, ds)
        gap_affine = dot(z + alpha_p * dz, s + alpha_d * ds)
        sigma = (gap_affine / gap) ** 3
        target = (sigma * mu) * active - products
        target -= dz * ds
        dz, dy, ds = _direction(system, point, factor, inv_s, primal_res, dual_res, target, refine, d)
        if not (np.isfinite(dz).all() and np.isfinite(ds).all() and np.isfinite(dy).all()):
            break
        alpha_p, alpha_d = _max_step(inv_z, dz), _max_step(inv_s, ds)
        for _ in range(correctors):
            corrected = _centrality_corrector(system, point, factor, inv_s, inv_z, (dz, dy, ds),
                                              (alpha_p, alpha_d), sigma * mu, active, d)
            if corrected is None:
                break
            (dz, dy, ds), (alpha_p, alpha_d) = corrected
        alpha_p = min(1.0, STEP_FRACTION * alpha_p)
        alpha_d = min(1.0, STEP_FRACTION * alpha_d)
        point = _Point(z + alpha_p * dz, point.y + alpha_d * dy, s + alpha_d * ds)
    if best_error < USABLE:
        return "approximate", best_point, iteration
    return "not_converged", None, iteration


def _centrality_corrector(system, point: _Point, factor, inv_s, inv_z, direction, steps, mu_target, active, d):
    """Gondzio's centrality corrector: aim a longer trial step's products z_i s_i back into
    [0.1, 10] x the target; keep the corrected direction only if it allows a longer step
    (J. Gondzio, "Multiple centrality corrections in a primal-dual method for linear
    programming", Comput. Optim. Appl. 6, 1996)."""
    dz, dy, ds = direction
    alpha_p, alpha_d = steps
    trial_p, trial_d = min(1.0, 1.5 * alpha_p + 0.1), min(1.0, 1.5 * alpha_d + 0.1)
    product = (point.z + trial_p * dz) * (point.s + trial_d * ds)
    wanted = np.clip(product, 0.1 * mu_target, 10.0 * mu_target)
    wanted -= product
    np.maximum(wanted, -10.0 * mu_target, out=wanted)
    wanted *= active
    # A corrector only re-centres: its direction needs no refinement.
    cz, cy, cs = _direction(system, point, factor, inv_s, None, None, wanted, False, d)
    new = (dz + cz, dy + cy, ds + cs)
    new_p, new_d = _max_step(inv_z, new[0]), _max_step(inv_s, new[2])
    if min(new_p, new_d) < min(alpha_p, alpha_d) + 0.05 * min(trial_p - alpha_p, trial_d - alpha_d, 1.0) \
            or not all(np.isfinite(part).all() for part in new):
        return None
    return new, (new_p, new_d)


def _starting_point(system) -> _Point:
    """Mehrotra's starting point: the least-norm solutions of B z = b and B^T y + s = c, shifted
    into the positive orthant and balanced so that no product z_i s_i starts near 0."""
    ones = system.active.copy() if system.partial else np.ones(system.num_primal)
    factor = system.factor(ones)
    z = system.apply_transpose(system.solve(factor, system.rhs))
    y = system.solve(factor, system.apply(system.cost))
    s = system.cost - system.apply_transpose(y)
    held_out = ~(ones > 0)
    if system.partial:
        z_low, s_low = float(np.min(z[~held_out])), float(np.min(s[~held_out]))
    else:
        z_low, s_low = float(z.min()), float(s.min())
    z += max(-1.5 * z_low, 0.0)
    s += max(-1.5 * s_low, 0.0)
    weight = ones  # 0 on held-out cells: they take no part in the balance
    product = dot(z * s, weight)
    z_total, s_total = dot(z, weight), dot(s, weight)
    z += 0.5 * product / max(s_total, 1e-300) + 1e-8
    s += 0.5 * product / max(z_total, 1e-300) + 1e-8
    # Cells a job cannot use stay out of the method: x = 0 with a unit slack (their product is 0).
    z[held_out] = 0.0
    s[held_out] = 1.0
    return _Point(z, y, s)


def max_min_prices(A: np.ndarray, offset: np.ndarray, usage: np.ndarray, W: np.ndarray, *, free_level: bool,
                   rate: np.ndarray | None = None, deadline: Deadline | None = None,
                   tolerance: float = TOLERANCE, max_iterations: int = MAX_ITERATIONS,
                   start: tuple[float, np.ndarray] | None = None) -> IpmPrices:
    """Level and capacity prices of ``maximize t s.t. A[m] @ x[m] - rate[m] t >= offset[m],
    sum_j x[m, j] <= 1, sum_m usage[m] x[m, j] <= W[j], x >= 0`` (t >= 0 unless ``free_level``),
    by a structured primal-dual interior-point method.

    Parameters
    ----------
    A : (n, K) array
        Score per unit of time on each type; 0 where the job cannot run there.
    offset : (n,) array
        Each job's score offset o_m.
    usage : (n,) array
        Workers a job holds on a type per unit of time (its multiplicity times its scale factor).
    W : (K,) array
        Workers of each type.
    free_level : bool
        Whether t may be negative.
    rate : (n,) array, optional
        Each job's coefficient of t (>= 0; 1 when omitted). A job of rate 0 has a floor
        ``A[m] @ x[m] >= offset[m]`` that the level does not lift (water filling's bottlenecked
        jobs).
    deadline : Deadline, optional
        Checked once per iteration.
    tolerance : float
        Relative primal and dual infeasibility and duality gap at which the method stops.
    max_iterations : int
        Iterations before giving up (status ``not_converged``).
    start : (level, prices), optional
        Those of a neighbouring problem (a scheduler's previous round): they replace the
        sample's as the first prices of the restricted method, at any size (see
        :func:`_restricted_max_min_prices`); the method on every job runs if that fails.
    """
    A, W = np.asarray(A, dtype=float), np.asarray(W, dtype=float)
    offset, usage = np.asarray(offset, dtype=float), np.asarray(usage, dtype=float)
    deadline = deadline or Deadline(None)
    if rate is None and start is not None:
        restricted = _restricted_max_min_prices(A, offset, usage, W, free_level, deadline, tolerance, max_iterations,
                                                start=start)
        if restricted is not None:
            return restricted
    elif rate is None and len(A) >= RESTRICT_ABOVE:
        restricted = _restricted_max_min_prices(A, offset, usage, W, free_level, deadline, tolerance, max_iterations)
        if restricted is not None:
            return restricted
    rate = np.ones(len(A)) if rate is None else np.asarray(rate, dtype=float)
    return _max_min_ipm(A, offset, usage, W, free_level, rate, None, deadline, tolerance, max_iterations)


def _max_min_ipm(A, offset, usage, W, free_level, rate, held, deadline, tolerance, max_iterations) -> IpmPrices:
    """The interior-point method on the max-min LP of jobs ``A``; ``held`` = (gamma, delta), the
    workers of each type that jobs held outside use at level t: gamma t + delta."""
    cap, maskf, mask = cells_and_mask(usage, W, A > 0)
    # t = t' + t_low with t' >= 0: t_low = -max(o / rate) over the jobs t lifts is reachable with
    # every x = 0 on those jobs, so the bound cuts no optimum of the free-level problem.
    lifted = rate > 0
    t_low = -float(np.max(offset[lifted] / rate[lifted])) if free_level and lifted.any() else 0.0
    level_usage = cap_rhs = None
    if held is not None:
        gamma, delta = held
        scale_w = np.where(W > 0, W, 1.0)
        level_usage, cap_rhs = gamma / scale_w, np.where(W > 0, (W - delta - gamma * t_low) / scale_w, 1.0)
    system = MaxMin(np.ascontiguousarray(np.where(mask, A, 0.0).T), offset + rate * t_low, cap, maskf, rate,
                    level_usage, cap_rhs)
    status, point, iterations = _interior_point(system, deadline, tolerance, max_iterations)
    if point is None:
        return IpmPrices(status, iterations=iterations)
    return IpmPrices(status, float(point.z[system.level]) + t_low, system.lam(point.y, W), iterations)


def _restricted_max_min_prices(A, offset, usage, W, free_level, deadline, tolerance, max_iterations, start=None):
    """Prices of a large max-min LP from the method run on a fraction of its jobs.

    1. A random sample of the jobs, with the workers scaled to the sample's share of the usage,
       gives prices within a few percent (the sample is a smaller cluster of the same mix).
    2. At those prices every job whose vertex wins clearly (:func:`vertices.closeness` above
       FIRST_TIE / sqrt(sample size)) is *held* at that vertex, an affine function of t; the method runs on the
       other jobs, the held ones entering the capacity rows as one term ``gamma t + delta``.
    3. If at the new prices every held job's vertex is still its cheapest (and its vertex range
       still holds t), the prices satisfy the full LP's optimality conditions to the method's
       tolerance (the held jobs' complementary slackness holds by their choice of vertex).
       Otherwise the jobs that changed (and those now within LATER_TIE of a change) are
       released too and step 2 repeats.

    With ``start`` (level, prices of a neighbouring problem) step 1 is skipped: jobs are held
    at those prices unless within WARM_TIE of a change.

    Returns None (the caller runs the method on every job) when a step does not converge or
    too many jobs stay released for this to be cheaper."""
    if start is None:
        sample = _sample(len(A))
        share = float(usage[sample].sum() / usage.sum())
        first = _max_min_ipm(A[sample], offset[sample], usage[sample], W * share, free_level, np.ones(len(sample)),
                             None, deadline, SAMPLE_TOLERANCE, max_iterations)
        iterations = first.iterations
        if first.lam is None:
            return None
        level, lam = first.level, first.lam * share
        first_tie = FIRST_TIE / np.sqrt(len(sample))
    else:
        (level, lam), iterations = start, 0
        level, lam, first_tie = float(level), np.asarray(lam, dtype=float), WARM_TIE
    if not float(lam @ W) > NEGLIGIBLE_PRICES * max(abs(level), 1e-300):  # (sample prices x its share)
        # No capacity binds in the sample (makespan: the level is one job's own time): with every
        # price near 0 each job's vertices tie, so held choices flip from round to round.
        return None
    choice, close = vertices.closeness(A, offset, level, lam, usage, W)
    released = (close <= first_tie) | (choice < -1)
    held_choice, checked = choice, False
    for _ in range(RESTRICT_ROUNDS):
        if released.mean() > MAX_RELEASED_SHARE or deadline.expired():
            return None
        held = ~released
        alpha, beta, t_low, t_high = vertices.vertex_affine(A[held], offset[held], held_choice[held])
        held_usage = usage[held]
        gamma, delta = np.einsum("m,mk->k", held_usage, alpha), np.einsum("m,mk->k", held_usage, beta)
        jobs = np.flatnonzero(released)
        prices = _max_min_ipm(A[jobs], offset[jobs], usage[jobs], W, free_level, np.ones(len(jobs)),
                              (gamma, delta), deadline, tolerance, max_iterations)
        iterations += prices.iterations
        if prices.lam is None:
            return None
        level, lam = prices.level, prices.lam
        choice, close = vertices.closeness(A, offset, level, lam, usage, W)
        span = max(1.0, abs(level))
        moved = held & (choice != held_choice)
        moved[held] |= (level < t_low - 1e-9 * span) | (level > t_high + 1e-9 * span)
        near = held & (close <= LATER_TIE)
        if not moved.any():
            # Once more with the held jobs within LATER_TIE of changing released: the method's
            # prices are only as accurate as its normal equations (about 1e-4 at 10^6 jobs), and
            # a job held at a vertex that is not its true best makes the restricted LP's optimum
            # differ from the full one (at 10^6 jobs that left 11,490 jobs for the certificate
            # to reject). At the next prices some other jobs are near a tie: they stay held.
            if checked or not near.any():
                return IpmPrices(prices.status, level, lam, iterations, picks=(choice, close))
            checked = True
        # Released jobs stay released: holding them again at prices that moved is what can
        # make the rounds oscillate.
        released |= moved | near
    return None


def linear_prices(P: np.ndarray, usage: np.ndarray, W: np.ndarray, *, deadline: Deadline | None = None,
                  tolerance: float = TOLERANCE, max_iterations: int = MAX_ITERATIONS,
                  start: np.ndarray | None = None) -> IpmPrices:
    """Capacity prices of ``maximize sum P[m] @ x[m] s.t. sum_j x[m, j] <= 1, sum_m usage[m]
    x[m, j] <= W[j], x >= 0`` (P = 0 where a job cannot run), by the same interior-point method.

    Parameters
    ----------
    P : (n, K) array
        Profit per unit of time on each type; 0 where the job cannot run there.
    usage : (n,) array
        Workers a job holds on a type per unit of time.
    W : (K,) array
        Workers of each type.
    deadline, tolerance, max_iterations
        As in :func:`max_min_prices`.
    start : (K,) array, optional
        Prices of a neighbouring problem, in place of the sample's (as for :func:`max_min_prices`).
    """
    P, W = np.asarray(P, dtype=float), np.asarray(W, dtype=float)
    usage = np.asarray(usage, dtype=float)
    deadline = deadline or Deadline(None)
    if len(P) >= RESTRICT_ABOVE or start is not None:
        restricted = _restricted_linear_prices(P, usage, W, deadline, tolerance, max_iterations, start)
        if restricted is not None:
            return restricted
    return _linear_ipm(P, usage, W, deadline, tolerance, max_iterations)


def _linear_ipm(P, usage, W, deadline, tolerance, max_iterations) -> IpmPrices:
    cap, maskf, mask = cells_and_mask(usage, W, P > 0)
    scale = float(P.max(initial=0.0)) or 1.0  # profits scaled to at most 1
    system = Linear(np.ascontiguousarray(np.where(mask, P / scale, 0.0).T), cap, maskf)
    status, point, iterations = _interior_point(system, deadline, tolerance, max_iterations)
    if point is None:
        return IpmPrices(status, iterations=iterations)
    return IpmPrices(status, float("nan"), system.lam(point.y, W, scale), iterations)


def _restricted_linear_prices(P, usage, W, deadline, tolerance, max_iterations, start=None):
    """Prices of a large linear LP as :func:`_restricted_max_min_prices` finds a max-min LP's: a
    sample's prices (a linear LP's prices do not scale with the cluster: a sample of the same
    mix on its share of the workers has the same ones), then the method on the jobs whose best
    type does not win clearly, the others held on their type (or idle) and their workers taken
    out of the capacity."""
    n, K = P.shape
    if start is None:
        sample = _sample(n)
        share = float(usage[sample].sum() / usage.sum())
        first = _linear_ipm(P[sample], usage[sample], W * share, deadline, SAMPLE_TOLERANCE, max_iterations)
        iterations = first.iterations
        if first.lam is None:
            return None
        lam, first_tie = first.lam, FIRST_TIE / np.sqrt(len(sample))
    else:
        lam, iterations, first_tie = np.asarray(start, dtype=float), 0, WARM_TIE
    top_profit = np.maximum(P.max(axis=1), 1e-300)

    def choices(lam):
        choice, margin = vertices.best_types(np.where(P > 0, P - lam[None, :] * usage[:, None], -np.inf))
        return choice, margin / top_profit

    choice, close = choices(lam)
    tie = first_tie
    released = close <= tie
    held_choice = choice
    for _ in range(RESTRICT_ROUNDS):
        # The sample's prices can be a few percent off, and then the jobs held clearly on a
        # type alone overfill it (262,144 distinct jobs, max throughput: type 0 by 1.6 %, and
        # every job was priced: more time than at 10^6). The held jobs of such
        # a type that win by least are released until the rest leave it the sample's error.
        released = _fit_held(released, held_choice, close, usage, W, tie)
        if released.mean() > MAX_RELEASED_SHARE or deadline.expired():
            return None
        held = ~released & (held_choice >= 0)
        used = np.bincount(held_choice[held], weights=usage[held], minlength=K)
        if np.any(used > W * (1 + 1e-12)):
            return None  # the held jobs alone overfill a type
        jobs = np.flatnonzero(released)
        prices = _linear_ipm(P[jobs], usage[jobs], np.maximum(W - used, 0.0), deadline, tolerance, max_iterations)
        iterations += prices.iterations
        if prices.lam is None:
            return None
        lam = prices.lam
        choice, close = choices(lam)
        moved = ~released & (choice != held_choice)
        if not moved.any():
            return IpmPrices(prices.status, float("nan"), lam, iterations)
        released |= moved | (close <= LATER_TIE)
    return None


def _fit_held(released: np.ndarray, choice: np.ndarray, close: np.ndarray, usage: np.ndarray, W: np.ndarray,
              tie: float) -> np.ndarray:
    """``released`` plus, on each type the held jobs fill beyond ``1 - tie`` of its workers, the
    held jobs there with the smallest margins ``close``, until the others fit in that share."""
    held = ~released & (choice >= 0)
    used = np.bincount(choice[held], weights=usage[held], minlength=W.size)
    over = np.flatnonzero(used > W * (1 - tie))
    if over.size == 0:
        return released
    released = released.copy()
    for k in over.tolist():
        jobs = np.flatnonzero(held & (choice == k))
        jobs = jobs[np.argsort(close[jobs], kind="stable")]
        excess = used[k] - W[k] * (1 - tie)
        count = int(np.searchsorted(np.cumsum(usage[jobs]), excess, side="left")) + 1
        released[jobs[:count]] = True
    return released


def _sample(n: int) -> np.ndarray:
    """The jobs a large LP is first priced on: a fixed-seed random sample, in job order."""
    rng = np.random.default_rng(0)
    return np.sort(rng.choice(n, max(SAMPLE_MIN, n // SAMPLE_FRACTION), replace=False))
