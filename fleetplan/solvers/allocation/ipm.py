"""A structured interior-point method for Gavel's allocation LPs (issue 14 §3; Gavel §3.1, §4.1).

The max-min LP ``maximize t s.t. A[m] @ x[m] - t >= o[m], sum_j x[m, j] <= 1, sum_m u_m x[m, j]
<= W_j, x >= 0`` couples its n jobs only through K capacity rows and the level t. In a
primal-dual interior-point method the normal equations ``B D B^T dy = r`` then split into one
2x2 block per job (its score and time rows), K capacity rows and one rank-one term from t:
eliminating the blocks leaves a dense (K + 1) x (K + 1) system. The linear LP (``maximize
sum P[m] @ x[m]`` under the same time and capacity rows: max throughput, FIFO) has 1x1 job
blocks and a K x K system. An iteration is a few dozen numpy operations on
(n, K) arrays, so 10^6 jobs take seconds where a general sparse LP solver factors a matrix with
millions of rows.

This method only *prices*: its duals (lam, and t) start :func:`fleetplan.solvers.allocation.separable.max_min`
and :func:`~fleetplan.solvers.allocation.separable.linear`,
whose reduced LP and optimality certificate make the answer exact. Prices this close to the
optimum's leave few jobs near a tie between two vertices, so the reduced LP is small and the
certificate passes in one or two rounds (bucketed prices a few percent off left thousands of
jobs free). When this method does not converge, the decomposition falls back to the bucketed
prices, so nothing depends on it for correctness.

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
# Gondzio correctors per iteration: each costs one more solve with the same factors. Below
# CORRECTOR_CELLS cells an iteration is mostly interpreter overhead and the fewer iterations do
# not pay for the extra solves (2,048 jobs: 22 iterations in 0.052 s without, 17 in 0.066 s with).
CENTRALITY_CORRECTORS = 2
CORRECTOR_CELLS = 100_000


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


@dataclass
class _Point:
    """Primal blocks z (block 0: the (K, n) cells x), row duals y, dual slacks s (shaped as z)."""

    z: tuple
    y: tuple
    s: tuple


@dataclass
class _Factor:
    """The job blocks' inverses (entries already divided by their determinants), the coupling to
    the capacity rows, and the Schur complement."""

    e11: np.ndarray | None
    e12: np.ndarray | None
    e22: np.ndarray
    f_score: np.ndarray | None
    f_time: np.ndarray
    schur: np.ndarray | None = None

    def inverse(self, p, q):
        return self.e22 * p - self.e12 * q, self.e11 * q - self.e12 * p


class _Cells:
    """What both forms share: per-cell arrays stored (K, n), types by jobs (sums over a job's few
    types are additions of K contiguous rows, sums over jobs contiguous reductions), capacity rows
    scaled to a right-hand side of 1, and the cells a job cannot use held at x = 0."""

    def __init__(self, cap: np.ndarray, mask: np.ndarray):
        self.cap, self.mask = cap, mask
        self.cap2 = cap * cap
        self.K, self.n = cap.shape
        # Zeroing those cells in every direction costs passes over (K, n) arrays: skip it when
        # every job runs everywhere.
        self.partial = not bool(mask.all())
        self.count = float(mask.sum())

    def on_cells(self, values: np.ndarray) -> np.ndarray:
        return values * self.mask if self.partial else values

    def lam(self, point: _Point, W: np.ndarray, scale: float = 1.0) -> np.ndarray:
        # The capacity rows were divided by W; in the min form their duals are <= 0.
        return np.maximum(-point.y[-1], 0.0) * scale / np.where(W > 0, W, 1.0)


class _MaxMin(_Cells):
    """min -t' s.t. score rows A x - t' - surplus = o + t_low, time rows sum x + idle = 1,
    capacity rows sum cap x + spare = 1; z = (x, surplus, idle, spare, t'), y = (score, time, cap)."""

    def __init__(self, A: np.ndarray, rhs_score: np.ndarray, cap: np.ndarray, mask: np.ndarray):
        super().__init__(cap, mask)
        self.A = A
        self.A2 = A * A
        self.A_cap = A * cap
        self.pairs = [(j, k, (A[j] - A[k]) ** 2) for j in range(self.K) for k in range(j + 1, self.K)]
        n, K = self.n, self.K
        self.rhs = (rhs_score, np.ones(n), np.ones(K))
        self.cost = (np.zeros((K, n)), np.zeros(n), np.zeros(n), np.zeros(K), -1.0)
        self.count += 2 * n + K + 1
        self.rhs_scale = 1.0 + float(np.abs(rhs_score).max(initial=0.0))

    def objective(self, point: _Point) -> float:
        return float(point.z[4])

    def apply(self, z):
        x, surplus, idle, spare, level = z
        return (self.A * x).sum(axis=0) - level - surplus, x.sum(axis=0) + idle, (self.cap * x).sum(axis=1) + spare

    def apply_transpose(self, y):
        y_score, y_time, y_cap = y
        x = self.A * y_score
        x += y_time
        x += self.cap * y_cap[:, None]
        return self.on_cells(x), -y_score, y_time, y_cap, -float(y_score.sum())

    def factor(self, scaling) -> _Factor:
        """Eliminate (B D B^T), D = diag(scaling): the 2x2 job blocks, then the capacity diagonal
        and the level's rank-one term in a (K + 1) dense Schur complement."""
        d_x, d_surplus, d_idle, d_spare, d_level = scaling
        a2_d = (self.A2 * d_x).sum(axis=0)
        e11 = a2_d + d_surplus
        e12 = (self.A * d_x).sum(axis=0)
        e22 = d_x.sum(axis=0) + d_idle
        # e11 e22 - e12^2 by Lagrange's identity: the plain difference cancels catastrophically
        # once a job's x is far from its bounds (d large) and its slacks' d tiny.
        det = d_surplus * e22 + d_idle * a2_d
        for j, k, squared_gap in self.pairs:
            det += d_x[j] * d_x[k] * squared_gap
        inv_det = 1.0 / det
        factor = _Factor(e11 * inv_det, e12 * inv_det, e22 * inv_det, self.A_cap * d_x, self.cap * d_x)
        inv_f_score, inv_f_time = factor.inverse(factor.f_score, factor.f_time)
        K = self.K
        schur = np.empty((K + 1, K + 1))
        schur[:K, :K] = np.diag((self.cap2 * d_x).sum(axis=1) + d_spare) - (
            factor.f_score @ inv_f_score.T + factor.f_time @ inv_f_time.T)
        schur[:K, K] = -(factor.f_score @ factor.e22 - factor.f_time @ factor.e12)
        schur[K, :K] = inv_f_score.sum(axis=1)
        schur[K, K] = (1.0 / d_level if d_level > 0 else 1e300) + factor.e22.sum()
        factor.schur = schur
        return factor

    def solve(self, factor: _Factor, rhs):
        """dy from (B D B^T) dy = rhs."""
        r_score, r_time, r_cap = rhs
        inv_score, inv_time = factor.inverse(r_score, r_time)
        right = np.append(r_cap - (factor.f_score @ inv_score + factor.f_time @ inv_time), inv_score.sum())
        solution = np.linalg.solve(factor.schur, right)
        y_cap, theta = solution[:-1], solution[-1]
        y_score, y_time = factor.inverse(r_score - y_cap @ factor.f_score - theta, r_time - y_cap @ factor.f_time)
        return y_score, y_time, y_cap


class _Linear(_Cells):
    """min -P x s.t. time rows sum x + idle = 1, capacity rows sum cap x + spare = 1;
    z = (x, idle, spare), y = (time, cap)."""

    def __init__(self, profit: np.ndarray, cap: np.ndarray, mask: np.ndarray):
        super().__init__(cap, mask)
        n, K = self.n, self.K
        self.rhs = (np.ones(n), np.ones(K))
        self.cost = (-profit, np.zeros(n), np.zeros(K))
        self.count += n + K
        self.rhs_scale = 1.0

    def objective(self, point: _Point) -> float:
        return float(-(self.cost[0] * point.z[0]).sum())

    def apply(self, z):
        x, idle, spare = z
        return x.sum(axis=0) + idle, (self.cap * x).sum(axis=1) + spare

    def apply_transpose(self, y):
        y_time, y_cap = y
        x = self.cap * y_cap[:, None]
        x += y_time
        return self.on_cells(x), y_time, y_cap

    def factor(self, scaling) -> _Factor:
        d_x, d_idle, d_spare = scaling
        inv_e22 = 1.0 / (d_x.sum(axis=0) + d_idle)
        f_time = self.cap * d_x
        factor = _Factor(None, None, inv_e22, None, f_time)
        factor.schur = np.diag((self.cap2 * d_x).sum(axis=1) + d_spare) - f_time @ (f_time * inv_e22).T
        return factor

    def solve(self, factor: _Factor, rhs):
        r_time, r_cap = rhs
        y_cap = np.linalg.solve(factor.schur, r_cap - factor.f_time @ (r_time * factor.e22))
        return (r_time - y_cap @ factor.f_time) * factor.e22, y_cap


def _residuals(system, point: _Point):
    primal = tuple(b - a for b, a in zip(system.rhs, system.apply(point.z), strict=True))
    bt = system.apply_transpose(point.y)
    dual = tuple(c - b - s for c, b, s in zip(system.cost, bt, point.s, strict=True))
    return primal, (system.on_cells(dual[0]),) + dual[1:]


def _direction(system, point: _Point, factor: _Factor, scaling, inv_s, primal_res, dual_res, complementarity,
               refine: bool):
    """Newton direction for residuals (primal, dual) and target products ``complementarity``."""
    z = point.z
    # v = S^-1 (r_c - Z r_d); rhs = r_p - B v
    v = tuple((rc - zi * rd) * inv for rc, zi, rd, inv in zip(complementarity, z, dual_res, inv_s, strict=True))
    bv = system.apply((system.on_cells(v[0]),) + v[1:])
    rhs = tuple(rp - b for rp, b in zip(primal_res, bv, strict=True))
    dy = system.solve(factor, rhs)
    bt = system.apply_transpose(dy)
    if refine:
        # One step of iterative refinement: the Schur complement loses digits near the optimum.
        product = system.apply(tuple(b * d for b, d in zip(bt, scaling, strict=True)))
        correction = system.solve(factor, tuple(r - p for r, p in zip(rhs, product, strict=True)))
        dy = tuple(d + c for d, c in zip(dy, correction, strict=True))
        bt = system.apply_transpose(dy)
    ds = tuple(rd - b for rd, b in zip(dual_res, bt, strict=True))
    dz = tuple((rc - zi * dsi) * inv for rc, zi, dsi, inv in zip(complementarity, z, ds, inv_s, strict=True))
    return (system.on_cells(dz[0]),) + dz[1:], dy, ds


def _max_step(values, steps) -> float:
    """Largest alpha <= 1 keeping every value (all > 0) + alpha * step >= 0."""
    steepest = 0.0  # the most negative step / value
    with np.errstate(divide="ignore", invalid="ignore"):
        for value, step in zip(values, steps, strict=True):
            ratio = np.divide(step, value)
            lowest = float(np.min(ratio))
            if lowest != lowest:  # 0 / 0 on cells a job cannot use (x = 0, step 0)
                usable = ratio[~np.isnan(ratio)]
                lowest = float(usable.min()) if usable.size else 0.0
            steepest = min(steepest, lowest)
    return 1.0 if steepest >= -1.0 else -1.0 / steepest


def _interior_point(system, deadline: Deadline, tolerance: float, max_iterations: int):
    """Mehrotra's predictor-corrector (with Gondzio's correctors on large systems). Returns
    (status, point, iterations): the converged point, or the most accurate one seen when
    accuracy stopped improving and it is within USABLE."""
    point = _starting_point(system)
    best_error, best_point = np.inf, point
    correctors = CENTRALITY_CORRECTORS if system.mask.size >= CORRECTOR_CELLS else 0
    iteration = 0
    for iteration in range(1, max_iterations + 1):
        if deadline.expired():
            return "time_limit", None, iteration
        primal_res, dual_res = _residuals(system, point)
        z, s = point.z, point.s
        gap = sum(float(np.sum(zi * si)) for zi, si in zip(z, s, strict=True))
        mu = gap / system.count
        primal_inf = max(float(np.abs(r).max(initial=0.0)) for r in primal_res) / system.rhs_scale
        dual_inf = max(float(np.abs(np.asarray(r)).max(initial=0.0)) for r in dual_res)
        error = max(primal_inf, dual_inf, gap / (1.0 + abs(system.objective(point))))
        if error < tolerance:
            return "optimal", point, iteration
        if error < best_error:
            best_error, best_point = error, point
        elif error > 1e3 * best_error:
            break
        # Predictor (affine scaling), then Mehrotra's centring and second-order corrector.
        refine = error < REFINE_BELOW
        inv_s = tuple(1.0 / si for si in s)
        scaling = tuple(zi * inv for zi, inv in zip(z, inv_s, strict=True))
        factor = system.factor(scaling)
        target = tuple(-zi * si for zi, si in zip(z, s, strict=True))
        dz, dy, ds = _direction(system, point, factor, scaling, inv_s, primal_res, dual_res, target, refine)
        alpha_p = _max_step(z, dz)
        alpha_d = _max_step(s, ds)
        gap_affine = sum(float(np.sum((zi + alpha_p * dzi) * (si + alpha_d * dsi)))
                         for zi, dzi, si, dsi in zip(z, dz, s, ds, strict=True))
        sigma = (gap_affine / gap) ** 3
        target = tuple(sigma * mu * (system.mask if i == 0 else 1.0) - zi * si - dzi * dsi
                       for i, (zi, si, dzi, dsi) in enumerate(zip(z, s, dz, ds, strict=True)))
        dz, dy, ds = _direction(system, point, factor, scaling, inv_s, primal_res, dual_res, target, refine)
        if not all(np.all(np.isfinite(part)) for part in (*dz, *dy, *ds)):
            break
        alpha_p, alpha_d = _max_step(z, dz), _max_step(s, ds)
        for _ in range(correctors):
            corrected = _centrality_corrector(system, point, factor, scaling, inv_s, (dz, dy, ds),
                                              (alpha_p, alpha_d), sigma * mu, refine)
            if corrected is None:
                break
            (dz, dy, ds), (alpha_p, alpha_d) = corrected
        alpha_p = min(1.0, STEP_FRACTION * alpha_p)
        alpha_d = min(1.0, STEP_FRACTION * alpha_d)
        point = _Point(tuple(zi + alpha_p * dzi for zi, dzi in zip(z, dz, strict=True)),
                       tuple(yi + alpha_d * dyi for yi, dyi in zip(point.y, dy, strict=True)),
                       tuple(si + alpha_d * dsi for si, dsi in zip(s, ds, strict=True)))
    if best_error < USABLE:
        return "approximate", best_point, iteration
    return "not_converged", None, iteration


def _centrality_corrector(system, point: _Point, factor, scaling, inv_s, direction, steps, mu_target, refine):
    """Gondzio's centrality corrector: aim a longer trial step's products z_i s_i back into
    [0.1, 10] x the target; keep the corrected direction only if it allows a longer step
    (J. Gondzio, "Multiple centrality corrections in a primal-dual method for linear
    programming", Comput. Optim. Appl. 6, 1996)."""
    dz, dy, ds = direction
    alpha_p, alpha_d = steps
    trial_p, trial_d = min(1.0, 1.5 * alpha_p + 0.1), min(1.0, 1.5 * alpha_d + 0.1)
    z, s = point.z, point.s
    target = []
    for i, (zi, dzi, si, dsi) in enumerate(zip(z, dz, s, ds, strict=True)):
        product = (zi + trial_p * dzi) * (si + trial_d * dsi)
        wanted = np.clip(product, 0.1 * mu_target, 10.0 * mu_target) - product
        wanted = np.maximum(wanted, -10.0 * mu_target)
        target.append(system.on_cells(wanted) if i == 0 else wanted)
    zeros_primal = tuple(np.zeros_like(r) for r in system.rhs)
    zeros_dual = tuple(np.zeros_like(np.asarray(c, dtype=float)) for c in system.cost)
    # A corrector only re-centres: its direction needs no refinement.
    cz, cy, cs = _direction(system, point, factor, scaling, inv_s, zeros_primal, zeros_dual, tuple(target), False)
    new = (tuple(a + b for a, b in zip(dz, cz, strict=True)), tuple(a + b for a, b in zip(dy, cy, strict=True)),
           tuple(a + b for a, b in zip(ds, cs, strict=True)))
    new_p, new_d = _max_step(z, new[0]), _max_step(s, new[2])
    if min(new_p, new_d) < min(alpha_p, alpha_d) + 0.05 * min(trial_p - alpha_p, trial_d - alpha_d, 1.0) \
            or not all(np.all(np.isfinite(part)) for part in (*new[0], *new[1], *new[2])):
        return None
    return new, (new_p, new_d)


def _starting_point(system) -> _Point:
    """Mehrotra's starting point: the least-norm solutions of B z = b and B^T y + s = c, shifted
    into the positive orthant and balanced so that no product z_i s_i starts near 0."""
    ones = tuple(system.mask if i == 0 else np.ones_like(np.asarray(c, dtype=float))
                 for i, c in enumerate(system.cost))
    factor = system.factor(ones)
    z = system.apply_transpose(system.solve(factor, system.rhs))
    y = system.solve(factor, system.apply(system.cost))
    bt = system.apply_transpose(y)
    s = tuple(c - b for c, b in zip(system.cost, bt, strict=True))
    parts = tuple(system.mask > 0 if i == 0 else np.ones(np.shape(c), bool) for i, c in enumerate(system.cost))

    def lowest(values):
        return min(float(np.min(np.asarray(v)[m])) for v, m in zip(values, parts, strict=True) if np.any(m))

    z = tuple(np.asarray(v, dtype=float) + max(-1.5 * lowest(z), 0.0) for v in z)
    s = tuple(np.asarray(v, dtype=float) + max(-1.5 * lowest(s), 0.0) for v in s)
    product = sum(float(np.sum((zi * si)[m])) for zi, si, m in zip(z, s, parts, strict=True))
    z_total = sum(float(np.sum(np.asarray(zi)[m])) for zi, m in zip(z, parts, strict=True))
    s_total = sum(float(np.sum(np.asarray(si)[m])) for si, m in zip(s, parts, strict=True))
    z = tuple(zi + 0.5 * product / max(s_total, 1e-300) + 1e-8 for zi in z)
    s = tuple(si + 0.5 * product / max(z_total, 1e-300) + 1e-8 for si in s)
    # Cells a job cannot use stay out of the method: x = 0 with a unit slack (their product is 0).
    mask = system.mask > 0
    z = (np.where(mask, z[0], 0.0),) + tuple(float(v) if np.ndim(v) == 0 else v for v in z[1:])
    s = (np.where(mask, s[0], 1.0),) + tuple(float(v) if np.ndim(v) == 0 else v for v in s[1:])
    return _Point(z, tuple(y), s)


def _cells(usage: np.ndarray, W: np.ndarray, runnable: np.ndarray):
    """(K, n) capacity coefficients (rows scaled by W) and the mask of usable cells."""
    mask = runnable & (W[None, :] > 0)
    cap = np.where(mask, usage[:, None] / np.where(W > 0, W, 1.0)[None, :], 0.0)
    return np.ascontiguousarray(cap.T), np.ascontiguousarray(mask.T, dtype=float), mask


def max_min_prices(A: np.ndarray, offset: np.ndarray, usage: np.ndarray, W: np.ndarray, *, free_level: bool,
                   deadline: Deadline | None = None, tolerance: float = TOLERANCE,
                   max_iterations: int = MAX_ITERATIONS) -> IpmPrices:
    """Level and capacity prices of ``maximize t s.t. A[m] @ x[m] - t >= offset[m], sum_j x[m, j]
    <= 1, sum_m usage[m] x[m, j] <= W[j], x >= 0`` (t >= 0 unless ``free_level``), by a
    structured primal-dual interior-point method.

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
    deadline : Deadline, optional
        Checked once per iteration.
    tolerance : float
        Relative primal and dual infeasibility and duality gap at which the method stops.
    max_iterations : int
        Iterations before giving up (status ``not_converged``).
    """
    A, W = np.asarray(A, dtype=float), np.asarray(W, dtype=float)
    cap, maskf, mask = _cells(np.asarray(usage, dtype=float), W, A > 0)
    # t = t' + t_low with t' >= 0: t_low = -max(o) is reachable with every x = 0, so the bound
    # cuts no optimum of the free-level problem.
    t_low = -float(np.max(offset)) if free_level and len(A) else 0.0
    system = _MaxMin(np.ascontiguousarray(np.where(mask, A, 0.0).T), np.asarray(offset, dtype=float) + t_low,
                     cap, maskf)
    status, point, iterations = _interior_point(system, deadline or Deadline(None), tolerance, max_iterations)
    if point is None:
        return IpmPrices(status, iterations=iterations)
    return IpmPrices(status, float(point.z[4]) + t_low, system.lam(point, W), iterations)


def linear_prices(P: np.ndarray, usage: np.ndarray, W: np.ndarray, *, deadline: Deadline | None = None,
                  tolerance: float = TOLERANCE, max_iterations: int = MAX_ITERATIONS) -> IpmPrices:
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
    """
    P, W = np.asarray(P, dtype=float), np.asarray(W, dtype=float)
    cap, maskf, mask = _cells(np.asarray(usage, dtype=float), W, P > 0)
    scale = float(P.max(initial=0.0)) or 1.0  # profits scaled to at most 1
    system = _Linear(np.ascontiguousarray(np.where(mask, P / scale, 0.0).T), cap, maskf)
    status, point, iterations = _interior_point(system, deadline or Deadline(None), tolerance, max_iterations)
    if point is None:
        return IpmPrices(status, iterations=iterations)
    return IpmPrices(status, float("nan"), system.lam(point, W, scale), iterations)
