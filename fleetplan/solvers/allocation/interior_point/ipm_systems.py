"""The two linear systems of the structured interior-point method (:mod:`fleetplan.solvers.allocation.interior_point.ipm`):
Gavel's max-min LP and its linear LP, with their normal equations solved by block elimination.

Both keep their iterates as flat vectors. Primal z: the (K, n) cells x first (types by jobs: a
job's few types are K contiguous rows, sums over jobs contiguous reductions), then the form's
per-job and per-type slacks; dual y: the form's rows. Sums over a job's types or over jobs are
``einsum`` contractions (no temporaries, and no BLAS, whose threads spin on a shared machine's
cores).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

# The max-min system's interior start (MaxMin.start): its score rows' duals START_SCORE_DUAL /
# sum(rate) (the level's dual slack START_SCORE_DUAL - 1) and its time rows' duals below them
# by START_TIME_DUAL / n, the order of the optimum's duals (the score duals sum to 1 over n
# jobs). Until 2026-11-29 these were 2 and 1 (time duals about n times the optimum's): the
# first 5-6 iterations then only shrank the gap, prices still ~100 % off. LAS, 24 instances
# (1,024, 2,048 and 4,096 distinct jobs, seeds 0-3, with and without multi-GPU jobs) to the
# separable method's 1e-4: 276 iterations instead of 365, at 2,048 jobs 10-13 instead of 14-15.
# The landscape is bumpy (time duals about 80 / n took 26 iterations on one 4,096-job instance), and
# on a water-filling level LP (weighted rates, floors) the iterations diverged: the method then
# runs again from the classic start (MaxMin.classic_start).
START_SCORE_DUAL = 1.6
START_TIME_DUAL = 20.0


def dot(a: np.ndarray, b: np.ndarray) -> float:
    # einsum, not np.dot: OpenBLAS may start threads of its own for long vectors, which spin on
    # a shared machine's cores.
    return float(np.einsum("i,i->", a, b))


class System:
    """What both forms share. Primal vector z: the (K, n) cells x first (types by jobs: a job's
    few types are K contiguous rows, sums over jobs contiguous reductions), then the form's
    per-job and per-type slacks. Dual vector y: the form's rows. Capacity rows are scaled to a
    right-hand side of 1; cells a job cannot use are held at x = 0 (with a unit dual slack)."""

    # Whether jobs held outside the system enter its capacity rows (then it starts from
    # Mehrotra's point, not from :meth:`start`).
    held = False
    # A second start to run from when the first one's iterations diverge (None: no second).
    classic_start = None

    def __init__(self, cap: np.ndarray, mask: np.ndarray, num_primal: int, num_rows: int):
        self.cap, self.mask = cap, mask
        self.K, self.n = cap.shape
        self.cells = self.K * self.n
        self.num_primal, self.num_rows = num_primal, num_rows
        # Zeroing unusable cells costs a pass per use: skip it when every job runs everywhere.
        self.partial = not bool(mask.all())
        self.active = None
        if self.partial:
            self.active = np.ones(num_primal)
            self.active[:self.cells] = mask.ravel()
        self.count = float(mask.sum()) + num_primal - self.cells
        self.cost = np.zeros(num_primal)
        self.rhs = np.ones(num_rows)
        self.rhs_scale = 1.0

    # The products below serve the numpy iterations only: the compiled ones (the path below
    # CORRECTOR_CELLS cells) take A and cap as they are, so they are made on first use
    # (at 2,048 jobs the system's set-up took 0.21 ms with them, 0.015 without).
    @cached_property
    def cap2(self) -> np.ndarray:
        return self.cap * self.cap

    def cells_of(self, vector: np.ndarray) -> np.ndarray:
        return vector[:self.cells].reshape(self.K, self.n)

    def mask_cells(self, vector: np.ndarray) -> np.ndarray:
        if self.partial:
            vector[:self.cells] *= self.mask.ravel()
        return vector

    def interior_cells(self) -> tuple[np.ndarray, np.ndarray]:
        """Cells x inside every bound of a system without held jobs (capacity right-hand sides
        1): each job's time spread evenly over its usable types and idling, scaled down until
        every type has half of its workers spare. Returns (x, the share of each type's workers
        it uses)."""
        x = self.mask / (self.mask.sum(axis=0) + 1.0)
        load = np.einsum("kn,kn->k", self.cap, x)
        shrink = min(1.0, 0.5 / max(float(load.max(initial=0.0)), 1e-300))
        shrink = max(shrink, 1e-6)  # far more demand than workers: the method starts infeasible
        return x * shrink, load * shrink

    def lam(self, y: np.ndarray, W: np.ndarray, scale: float = 1.0) -> np.ndarray:
        # The capacity rows (the last K) were divided by W; in the min form their duals are <= 0.
        return np.maximum(-y[-self.K:], 0.0) * scale / np.where(W > 0, W, 1.0)


@dataclass
class MaxMinFactor:
    """Each job's 2x2 block inverse [[i11, i12], [i12, i22]] (entries already divided by the
    determinant), the capacity coupling G = E^-1 F^T per job, and the (K + 1) Schur inverse."""

    i11: np.ndarray
    i12: np.ndarray
    i22: np.ndarray
    g_score: np.ndarray
    g_time: np.ndarray
    rate_i22: np.ndarray
    rate_i12: np.ndarray
    schur_inverse: np.ndarray


class MaxMin(System):
    """min -t' s.t. score rows A x - rate t' - surplus = o + rate t_low, time rows sum x + idle = 1,
    capacity rows sum cap x + spare = 1. z = (x, surplus, idle, spare, t'), y = (score, time,
    cap). ``rate`` is each job's coefficient of the level (1 for all jobs in Gavel's policies;
    0 makes a job's row a floor that t does not lift). ``level_usage`` (K,) and ``cap_rhs`` (K,)
    let the capacity rows read ``sum cap x + level_usage t' + spare = cap_rhs``: jobs held outside
    the system at a vertex affine in t use ``level_usage t' + (1 - cap_rhs)`` of each type."""

    def __init__(self, A: np.ndarray, rhs_score: np.ndarray, cap: np.ndarray, mask: np.ndarray,
                 rate: np.ndarray, level_usage: np.ndarray | None = None, cap_rhs: np.ndarray | None = None):
        K, n = cap.shape
        super().__init__(cap, mask, K * n + 2 * n + K + 1, 2 * n + K)
        self.A = A
        self.rate = rate
        cells = self.cells
        self.surplus, self.idle = slice(cells, cells + n), slice(cells + n, cells + 2 * n)
        self.spare, self.level = slice(cells + 2 * n, cells + 2 * n + K), cells + 2 * n + K
        self.cost[self.level] = -1.0
        self.rhs[:n] = rhs_score
        self.level_usage = np.zeros(K) if level_usage is None else level_usage
        self.held = level_usage is not None or cap_rhs is not None
        if cap_rhs is not None:
            self.rhs[2 * n:] = cap_rhs
        self.rhs_scale = 1.0 + float(np.abs(rhs_score).max(initial=0.0))

    @cached_property
    def A2(self) -> np.ndarray:
        return self.A * self.A

    @cached_property
    def A_cap(self) -> np.ndarray:
        return self.A * self.cap

    @cached_property
    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every pair of types (first, second, in ``np.triu_indices`` order) and each job's
        squared score gap between them (K(K-1)/2, n): the determinant's Lagrange terms."""
        first, second = np.triu_indices(self.K, 1)
        return first, second, (self.A[first] - self.A[second]) ** 2

    def objective(self, z: np.ndarray) -> float:
        return float(z[self.level])

    def classic_start(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The start before 2026-11-29 (score duals 2 / sum(rate), time duals below them by 1)."""
        return self.start(2.0, None)

    def kernel_arrays(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """(form, profit, rate, level usage) for :func:`fleetplan.solvers.allocation.ipm_kernels.iterate`."""
        return 0, self.A, np.ascontiguousarray(self.rate, dtype=float), np.ascontiguousarray(self.level_usage, dtype=float)

    def start(self, score_dual: float = START_SCORE_DUAL, time_dual: float | None = START_TIME_DUAL) \
            -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A primal point inside every bound (up to jobs no level can lift) and a dual point
        with every slack positive: (z, y, s). For systems without held jobs. ``time_dual`` None:
        the time rows' duals below the score rows' by 1 (the classic start)."""
        n = self.n
        x, load = self.interior_cells()
        z = np.empty(self.num_primal)
        z[:self.cells] = x.ravel()
        score = np.einsum("kn,kn->n", self.A, x) - self.rhs[:n]
        lifted = (self.rate > 0) & (score > 0)
        level = 0.5 * float(np.min(score[lifted] / self.rate[lifted])) if lifted.any() else 0.0
        z[self.surplus] = np.maximum(score - self.rate * level, 1e-2)
        z[self.idle] = 1.0 - x.sum(axis=0)
        z[self.spare] = np.maximum(1.0 - load, 1e-2)
        z[self.level] = max(level, 1e-2)
        # y_score = a > 0 (surplus slacks a), y_time = -(a max_j A + b), y_cap = -1: every x
        # slack at least b, and the level's slack -1 + a sum(rate) = START_SCORE_DUAL - 1
        a = score_dual / max(float(self.rate.sum()), 1e-300)
        b = 1.0 if time_dual is None else time_dual / max(n, 1)
        y = np.empty(self.num_rows)
        y[:n] = a
        y[n:2 * n] = -(a * self.A.max(axis=0) + b)
        y[2 * n:] = -1.0
        s = self.cost - self.apply_transpose(y)
        s[:self.cells][self.mask.ravel() == 0] = 1.0
        np.maximum(s, 1e-2 * min(b, 1.0), out=s)
        return z, y, s

    def apply(self, z: np.ndarray) -> np.ndarray:
        n, x = self.n, self.cells_of(z)
        out = np.empty(self.num_rows)
        score, time_, cap = out[:n], out[n:2 * n], out[2 * n:]
        np.einsum("kn,kn->n", self.A, x, out=score)
        score -= z[self.surplus]
        score -= self.rate * z[self.level]
        np.sum(x, axis=0, out=time_)
        time_ += z[self.idle]
        np.einsum("kn,kn->k", self.cap, x, out=cap)
        cap += z[self.spare]
        cap += self.level_usage * z[self.level]
        return out

    def apply_transpose(self, y: np.ndarray) -> np.ndarray:
        n = self.n
        y_score, y_time, y_cap = y[:n], y[n:2 * n], y[2 * n:]
        out = np.empty(self.num_primal)
        x = self.cells_of(out)
        np.multiply(self.A, y_score, out=x)
        x += y_time
        x += self.cap * y_cap[:, None]
        np.negative(y_score, out=out[self.surplus])
        out[self.idle] = y_time
        out[self.spare] = y_cap
        out[self.level] = dot(self.level_usage, y_cap) - dot(self.rate, y_score)
        return self.mask_cells(out)

    def factor(self, d: np.ndarray) -> MaxMinFactor:
        """Eliminate B D B^T (D = diag(d)): the 2x2 job blocks, then the capacity diagonal and
        the level's rank-one term in a (K + 1) dense Schur complement."""
        d_x, d_surplus, d_idle = self.cells_of(d), d[self.surplus], d[self.idle]
        a2_d = np.einsum("kn,kn->n", self.A2, d_x)
        e11 = a2_d + d_surplus
        e12 = np.einsum("kn,kn->n", self.A, d_x)
        e22 = np.sum(d_x, axis=0)
        e22 += d_idle
        # e11 e22 - e12^2 by Lagrange's identity: the plain difference cancels catastrophically
        # once a job's x is far from its bounds (d large) and its slacks' d tiny.
        det = d_surplus * e22
        det += d_idle * a2_d
        pair_first, pair_second, pair_gap2 = self.pairs
        if len(pair_first):
            det += np.einsum("pn,pn->n", d_x[pair_first] * d_x[pair_second], pair_gap2)
        inv_det = 1.0 / det
        i11, i12, i22 = e11 * inv_det, e12 * inv_det, e22 * inv_det
        f_score, f_time = self.A_cap * d_x, self.cap * d_x
        g_score = i22 * f_score
        g_score -= i12 * f_time
        g_time = i11 * f_time
        g_time -= i12 * f_score
        K = self.K
        rate_i22, rate_i12 = self.rate * i22, self.rate * i12
        schur = np.empty((K + 1, K + 1))
        schur[:K, :K] = np.diag(np.einsum("kn,kn->k", self.cap2, d_x) + d[self.spare]) - (
            np.einsum("kn,jn->kj", f_score, g_score) + np.einsum("kn,jn->kj", f_time, g_time))
        coupling = np.einsum("kn,n->k", g_score, self.rate) + self.level_usage
        schur[:K, K] = -coupling
        schur[K, :K] = coupling
        d_level = d[self.level]
        schur[K, K] = (1.0 / d_level if d_level > 0 else 1e300) + dot(rate_i22, self.rate)
        return MaxMinFactor(i11, i12, i22, g_score, g_time, rate_i22, rate_i12, small_inverse(schur))

    def solve(self, factor: MaxMinFactor, rhs: np.ndarray) -> np.ndarray:
        """dy from (B D B^T) dy = rhs."""
        n, K = self.n, self.K
        r_score, r_time, r_cap = rhs[:n], rhs[n:2 * n], rhs[2 * n:]
        right = np.empty(K + 1)
        right[:K] = r_cap - np.einsum("kn,n->k", factor.g_score, r_score) - np.einsum("kn,n->k", factor.g_time, r_time)
        right[K] = dot(factor.rate_i22, r_score) - dot(factor.rate_i12, r_time)
        solution = factor.schur_inverse @ right
        y_cap, theta = solution[:K], solution[K]
        out = np.empty(self.num_rows)
        y_score, y_time = out[:n], out[n:2 * n]
        # E^-1 (r - F^T y_cap - rate theta), block by block
        np.multiply(factor.i22, r_score, out=y_score)
        y_score -= factor.i12 * r_time
        y_score -= np.einsum("k,kn->n", y_cap, factor.g_score)
        y_score -= theta * factor.rate_i22
        np.multiply(factor.i11, r_time, out=y_time)
        y_time -= factor.i12 * r_score
        y_time -= np.einsum("k,kn->n", y_cap, factor.g_time)
        y_time += theta * factor.rate_i12
        out[2 * n:] = y_cap
        return out


@dataclass
class LinearFactor:
    inv_e22: np.ndarray
    g_time: np.ndarray
    schur_inverse: np.ndarray


class Linear(System):
    """min -P x s.t. time rows sum x + idle = 1, capacity rows sum cap x + spare = 1;
    z = (x, idle, spare), y = (time, cap)."""

    def __init__(self, profit: np.ndarray, cap: np.ndarray, mask: np.ndarray):
        K, n = cap.shape
        super().__init__(cap, mask, K * n + n + K, n + K)
        self.idle, self.spare = slice(self.cells, self.cells + n), slice(self.cells + n, self.cells + n + K)
        self.cost[:self.cells] = -profit.ravel()

    def objective(self, z: np.ndarray) -> float:
        return -dot(self.cost[:self.cells], z[:self.cells])

    def kernel_arrays(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """(form, profit, rate, level usage) for :func:`fleetplan.solvers.allocation.ipm_kernels.iterate`."""
        profit = np.ascontiguousarray(-self.cost[:self.cells].reshape(self.K, self.n))
        return 1, profit, np.zeros(0), np.zeros(self.K)

    def start(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A primal point inside every bound and a dual point with every slack at least 1."""
        n = self.n
        x, load = self.interior_cells()
        z = np.empty(self.num_primal)
        z[:self.cells] = x.ravel()
        z[self.idle] = 1.0 - x.sum(axis=0)
        z[self.spare] = 1.0 - load
        y = np.empty(self.num_rows)
        y[:n] = self.cost[:self.cells].reshape(self.K, n).min(axis=0) - 1.0  # -(largest profit) - 1
        y[n:] = -1.0
        s = self.cost - self.apply_transpose(y)
        s[:self.cells][self.mask.ravel() == 0] = 1.0
        return z, y, s

    def apply(self, z: np.ndarray) -> np.ndarray:
        n, x = self.n, self.cells_of(z)
        out = np.empty(self.num_rows)
        np.sum(x, axis=0, out=out[:n])
        out[:n] += z[self.idle]
        np.einsum("kn,kn->k", self.cap, x, out=out[n:])
        out[n:] += z[self.spare]
        return out

    def apply_transpose(self, y: np.ndarray) -> np.ndarray:
        n = self.n
        out = np.empty(self.num_primal)
        x = self.cells_of(out)
        np.multiply(self.cap, y[n:, None], out=x)
        x += y[:n]
        out[self.idle] = y[:n]
        out[self.spare] = y[n:]
        return self.mask_cells(out)

    def factor(self, d: np.ndarray) -> LinearFactor:
        d_x = self.cells_of(d)
        e22 = np.sum(d_x, axis=0)
        e22 += d[self.idle]
        inv_e22 = 1.0 / e22
        f_time = self.cap * d_x
        g_time = f_time * inv_e22
        schur = np.diag(np.einsum("kn,kn->k", self.cap2, d_x) + d[self.spare]) - np.einsum("kn,jn->kj", f_time, g_time)
        # g_time stays E^-1 F^T's rows: (F E^-1 r) = g_time @ r and E^-1 F^T y = y @ g_time
        return LinearFactor(inv_e22, g_time, small_inverse(schur))

    def solve(self, factor: LinearFactor, rhs: np.ndarray) -> np.ndarray:
        n = self.n
        r_time, r_cap = rhs[:n], rhs[n:]
        y_cap = factor.schur_inverse @ (r_cap - np.einsum("kn,n->k", factor.g_time, r_time))
        out = np.empty(self.num_rows)
        np.multiply(r_time, factor.inv_e22, out=out[:n])
        out[:n] -= np.einsum("k,kn->n", y_cap, factor.g_time)
        out[n:] = y_cap
        return out


def small_inverse(schur: np.ndarray) -> np.ndarray:
    """The small Schur complement's inverse (used for several right-hand sides per iteration;
    iterative refinement recovers what inverting loses near the optimum)."""
    try:
        return np.linalg.inv(schur)
    except np.linalg.LinAlgError:
        return np.linalg.pinv(schur)


def cells_and_mask(usage: np.ndarray, W: np.ndarray, runnable: np.ndarray):
    """(K, n) capacity coefficients (rows scaled by W) and the mask of usable cells: as floats,
    (K, n), and as booleans, (n, K). Made in the (K, n) layout the system keeps: each value is
    the same division, without the two transposed copies (0.057 ms became 0.048 at 2,048
    jobs)."""
    mask = runnable.T & (W[:, None] > 0)  # in the transposed input's memory order
    cap = np.where(mask, usage[None, :] / np.where(W > 0, W, 1.0)[:, None], 0.0)
    return np.ascontiguousarray(cap), mask.astype(float, order="C"), mask.T
