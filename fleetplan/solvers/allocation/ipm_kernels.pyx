# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The interior-point method's iterations compiled: the same steps as
:func:`fleetplan.solvers.allocation.interior_point.ipm._numpy_iterations` on the systems of
:mod:`~fleetplan.solvers.allocation.interior_point.ipm_systems`, as loops over jobs and types.

At a few thousand jobs an iteration of the numpy code is about 150 calls on arrays of a few
thousand entries, and each call's fixed cost, not its arithmetic, sets the time (17 iterations
took 27 ms at 2,048 distinct jobs). Here an iteration is a handful of passes over the (K, n)
cells in one compiled call. The arithmetic is the numpy code's (Mehrotra's predictor-corrector,
the 2x2 job blocks eliminated into a (K + 1) Schur complement, one step of iterative refinement
near the optimum); sums run in another order, so the iterates agree with the numpy code's to
rounding, not bit for bit. Gondzio's correctors are not here: the numpy code uses them only from
``CORRECTOR_CELLS`` cells, and systems that large go to it.

The layouts are the systems' own. Max-min (``form`` 0): primal z = (x (K, n) row-major,
surplus (n), idle (n), spare (K), level), rows y = (score (n), time (n), capacity (K)). Linear
(``form`` 1): z = (x, idle (n), spare (K)), y = (time (n), capacity (K)). ``profit`` is A for
max-min and the scaled profits for the linear form; ``rate`` is empty and ``level_usage`` zero
for the linear form.

Built at install (Cython, ``pyproject.toml``'s ext-modules): it loads like any extension
module, in a millisecond, with no compiler at run time (:mod:`fleetplan.solvers.kernels`).
"""

import numpy as np

from libc.math cimport fabs, isfinite

cdef enum:
    FORM_MAX_MIN = 0
    FORM_LINEAR = 1

MAX_MIN = FORM_MAX_MIN
LINEAR = FORM_LINEAR
# What :func:`iterate` returns.
CONVERGED = 0
RUNNING = 1
STOPPED = 2
SINGULAR = 3


cdef void _apply(int form, const double[:, ::1] profit, const double[:, ::1] cap, const double[::1] rate,
                 const double[::1] level_usage, const double[::1] z, double[::1] out) noexcept nogil:
    """out = B z (the constraint rows times the primal vector)."""
    cdef Py_ssize_t K = profit.shape[0], n = profit.shape[1], cells = K * n
    cdef Py_ssize_t j, k, base, surplus, idle, spare, level
    cdef double load, x
    if form == FORM_MAX_MIN:
        surplus, idle, spare, level = cells, cells + n, cells + 2 * n, cells + 2 * n + K
        for j in range(n):
            out[j] = -z[surplus + j] - rate[j] * z[level]
            out[n + j] = z[idle + j]
        for k in range(K):
            load = 0.0
            base = k * n
            for j in range(n):
                x = z[base + j]
                out[j] += profit[k, j] * x
                out[n + j] += x
                load += cap[k, j] * x
            out[2 * n + k] = load + z[spare + k] + level_usage[k] * z[level]
    else:
        idle, spare = cells, cells + n
        for j in range(n):
            out[j] = z[idle + j]
        for k in range(K):
            load = 0.0
            base = k * n
            for j in range(n):
                x = z[base + j]
                out[j] += x
                load += cap[k, j] * x
            out[n + k] = load + z[spare + k]


cdef void _apply_transpose(int form, const double[:, ::1] profit, const double[:, ::1] cap,
                           const double[:, ::1] mask, const double[::1] rate, const double[::1] level_usage,
                           const double[::1] y, double[::1] out) noexcept nogil:
    """out = B^T y, zero on the cells a job cannot use."""
    cdef Py_ssize_t K = profit.shape[0], n = profit.shape[1], cells = K * n
    cdef Py_ssize_t j, k, base, surplus, idle, spare, level
    cdef double y_cap, level_value
    if form == FORM_MAX_MIN:
        surplus, idle, spare, level = cells, cells + n, cells + 2 * n, cells + 2 * n + K
        for k in range(K):
            base = k * n
            y_cap = y[2 * n + k]
            for j in range(n):
                out[base + j] = (profit[k, j] * y[j] + y[n + j] + cap[k, j] * y_cap) * mask[k, j]
        level_value = 0.0
        for j in range(n):
            out[surplus + j] = -y[j]
            out[idle + j] = y[n + j]
            level_value -= rate[j] * y[j]
        for k in range(K):
            out[spare + k] = y[2 * n + k]
            level_value += level_usage[k] * y[2 * n + k]
        out[level] = level_value
    else:
        idle, spare = cells, cells + n
        for k in range(K):
            base = k * n
            y_cap = y[n + k]
            for j in range(n):
                out[base + j] = (cap[k, j] * y_cap + y[j]) * mask[k, j]
        for j in range(n):
            out[idle + j] = y[j]
        for k in range(K):
            out[spare + k] = y[n + k]


cdef bint _invert(double[:, ::1] work, double[:, ::1] inverse) noexcept nogil:
    """Gauss-Jordan with partial pivoting (``work`` is overwritten); False when singular."""
    cdef Py_ssize_t size = work.shape[0], i, c, row, column, pivot
    cdef double value, scale, factor, swap
    for i in range(size):
        for c in range(size):
            inverse[i, c] = 1.0 if i == c else 0.0
    for column in range(size):
        pivot = column
        for row in range(column + 1, size):
            if fabs(work[row, column]) > fabs(work[pivot, column]):
                pivot = row
        value = work[pivot, column]
        if value == 0.0 or not isfinite(value):
            return False
        if pivot != column:
            for c in range(size):
                swap = work[column, c]
                work[column, c] = work[pivot, c]
                work[pivot, c] = swap
                swap = inverse[column, c]
                inverse[column, c] = inverse[pivot, c]
                inverse[pivot, c] = swap
        scale = 1.0 / value
        for c in range(size):
            work[column, c] *= scale
            inverse[column, c] *= scale
        for row in range(size):
            if row != column:
                factor = work[row, column]
                if factor != 0.0:
                    for c in range(size):
                        work[row, c] -= factor * work[column, c]
                        inverse[row, c] -= factor * inverse[column, c]
    return True


def invert_small(matrix, inverse):
    """The Schur complement's inverse as :func:`iterate` takes it (Gauss-Jordan with partial
    pivoting) into ``inverse``; False when ``matrix`` is singular. For tests."""
    work = np.array(matrix, dtype=float, order="C")
    return bool(_invert(work, inverse))


cdef bint _factor(int form, const double[:, ::1] profit, const double[:, ::1] cap, const double[::1] rate,
                  const double[::1] level_usage, const double[::1] d, double[::1] i11, double[::1] i12,
                  double[::1] i22, double[:, ::1] g_score, double[:, ::1] g_time, double[:, ::1] schur,
                  double[:, ::1] schur_inverse, double[::1] f_score, double[::1] f_time) noexcept nogil:
    """Eliminate B D B^T: each job's block inverse (i11, i12, i22; the linear form keeps
    1 / e22 in i22), the couplings G = E^-1 F^T and the Schur complement's inverse. False when
    that complement is singular."""
    cdef Py_ssize_t K = profit.shape[0], n = profit.shape[1], cells = K * n
    cdef Py_ssize_t j, k, q, size = schur.shape[0], surplus, idle, spare, level
    cdef double a2_d, e11, e12, e22, pairs, dx, a, gap, d_surplus, det, inv_det, b11, b12, b22, r
    cdef double gs, gt, level_term, coupling, d_level, inverse
    for k in range(size):
        for q in range(size):
            schur[k, q] = 0.0
    if form == FORM_MAX_MIN:
        surplus, idle, spare, level = cells, cells + n, cells + 2 * n, cells + 2 * n + K
        level_term = 0.0
        for j in range(n):
            a2_d = 0.0
            e12 = 0.0
            e22 = d[idle + j]
            pairs = 0.0
            for k in range(K):
                dx = d[k * n + j]
                a = profit[k, j]
                a2_d += a * a * dx
                e12 += a * dx
                e22 += dx
                for q in range(k + 1, K):
                    gap = a - profit[q, j]
                    pairs += dx * d[q * n + j] * gap * gap
            d_surplus = d[surplus + j]
            e11 = a2_d + d_surplus
            # e11 e22 - e12^2 by Lagrange's identity (the plain difference cancels).
            det = d_surplus * e22 + d[idle + j] * a2_d + pairs
            inv_det = 1.0 / det
            b11 = e11 * inv_det
            b12 = e12 * inv_det
            b22 = e22 * inv_det
            i11[j] = b11
            i12[j] = b12
            i22[j] = b22
            r = rate[j]
            for k in range(K):
                dx = d[k * n + j]
                f_time[k] = cap[k, j] * dx
                f_score[k] = profit[k, j] * f_time[k]
                schur[k, k] += cap[k, j] * f_time[k]
            for q in range(K):
                gs = b22 * f_score[q] - b12 * f_time[q]
                gt = b11 * f_time[q] - b12 * f_score[q]
                g_score[q, j] = gs
                g_time[q, j] = gt
                schur[K, q] += gs * r
                for k in range(K):
                    schur[k, q] -= f_score[k] * gs + f_time[k] * gt
            level_term += r * r * b22
        for k in range(K):
            schur[k, k] += d[spare + k]
            coupling = schur[K, k] + level_usage[k]
            schur[K, k] = coupling
            schur[k, K] = -coupling
        d_level = d[level]
        schur[K, K] = (1.0 / d_level if d_level > 0 else 1e300) + level_term
    else:
        idle, spare = cells, cells + n
        for j in range(n):
            e22 = d[idle + j]
            for k in range(K):
                e22 += d[k * n + j]
            inverse = 1.0 / e22
            i22[j] = inverse
            for k in range(K):
                f_time[k] = cap[k, j] * d[k * n + j]
                schur[k, k] += cap[k, j] * f_time[k]
            for q in range(K):
                gt = f_time[q] * inverse
                g_time[q, j] = gt
                for k in range(K):
                    schur[k, q] -= f_time[k] * gt
        for k in range(K):
            schur[k, k] += d[spare + k]
    return _invert(schur, schur_inverse)


cdef void _solve(int form, const double[::1] rate, const double[::1] i11, const double[::1] i12,
                 const double[::1] i22, const double[:, ::1] g_score, const double[:, ::1] g_time,
                 const double[:, ::1] schur_inverse, const double[::1] rhs, double[::1] out,
                 double[::1] right, double[::1] solution) noexcept nogil:
    """out = dy from (B D B^T) dy = rhs, with the factors of :func:`_factor`."""
    cdef Py_ssize_t K = g_time.shape[0], n = g_time.shape[1], j, k, q, size = schur_inverse.shape[0]
    cdef double total, level_right, theta, r_score, r_time, y_score, y_time, value
    if form == FORM_MAX_MIN:
        level_right = 0.0
        for j in range(n):
            level_right += rate[j] * (i22[j] * rhs[j] - i12[j] * rhs[n + j])
        for k in range(K):
            total = rhs[2 * n + k]
            for j in range(n):
                total -= g_score[k, j] * rhs[j] + g_time[k, j] * rhs[n + j]
            right[k] = total
        right[K] = level_right
    else:
        for k in range(K):
            total = rhs[n + k]
            for j in range(n):
                total -= g_time[k, j] * rhs[j]
            right[k] = total
    for k in range(size):
        total = 0.0
        for q in range(size):
            total += schur_inverse[k, q] * right[q]
        solution[k] = total
    if form == FORM_MAX_MIN:
        theta = solution[K]
        for j in range(n):
            r_score = rhs[j]
            r_time = rhs[n + j]
            y_score = i22[j] * r_score - i12[j] * r_time - theta * rate[j] * i22[j]
            y_time = i11[j] * r_time - i12[j] * r_score + theta * rate[j] * i12[j]
            for k in range(K):
                y_score -= solution[k] * g_score[k, j]
                y_time -= solution[k] * g_time[k, j]
            out[j] = y_score
            out[n + j] = y_time
        for k in range(K):
            out[2 * n + k] = solution[k]
    else:
        for j in range(n):
            value = rhs[j] * i22[j]
            for k in range(K):
                value -= solution[k] * g_time[k, j]
            out[j] = value
        for k in range(K):
            out[n + k] = solution[k]


cdef double _max_step(const double[::1] inverse_values, const double[::1] step) noexcept nogil:
    """Largest alpha <= 1 keeping every value (> 0; given as its inverse, 0 on held-out cells)
    + alpha * step >= 0."""
    cdef double steepest = 0.0, ratio
    cdef Py_ssize_t i
    for i in range(step.shape[0]):
        ratio = step[i] * inverse_values[i]
        if ratio < steepest:
            steepest = ratio
    return 1.0 if steepest >= -1.0 else -1.0 / steepest


def iterate(int form, const double[:, ::1] profit, const double[:, ::1] cap, const double[:, ::1] mask,
            const double[::1] rate, const double[::1] level_usage, const double[::1] rhs,
            const double[::1] cost, const double[::1] active, double count, double rhs_scale,
            double[::1] z, double[::1] y, double[::1] s, double[::1] best_z, double[::1] best_y,
            double[::1] best_s, double[::1] best_error, double tolerance, double refine_below,
            double step_fraction, int iterations):
    """Run up to ``iterations`` iterations from (z, y, s), updated in place; the most accurate
    point so far is kept in (best_z, best_y, best_s), its error in ``best_error[0]``. Returns
    (what happened: CONVERGED, RUNNING, STOPPED or SINGULAR, iterations run)."""
    cdef Py_ssize_t K = profit.shape[0], n = profit.shape[1], cells = K * n
    cdef Py_ssize_t num_primal = z.shape[0], num_rows = y.shape[0], level = cells + 2 * n + K
    cdef Py_ssize_t size = K + 1 if form == FORM_MAX_MIN else K
    cdef Py_ssize_t i, j, k, done, corrector
    cdef double primal_inf, dual_inf, gap, objective, error, mu, alpha_p = 1.0, alpha_d = 1.0
    cdef double gap_affine, sigma, value, step_s, step_z, ratio, steepest_p, steepest_d
    cdef bint refine, finite
    cdef double[::1] primal_res = np.empty(num_rows), dual_res = np.empty(num_primal)
    cdef double[::1] i11 = np.empty(n), i12 = np.empty(n), i22 = np.empty(n)
    cdef double[:, ::1] g_score = np.empty((K, n)), g_time = np.empty((K, n))
    cdef double[:, ::1] schur = np.empty((size, size)), schur_inverse = np.empty((size, size))
    cdef double[::1] f_score = np.empty(K), f_time = np.empty(K), right = np.empty(size)
    cdef double[::1] solution = np.empty(size)
    cdef double[::1] inv_s = np.empty(num_primal), inv_z = np.empty(num_primal), d = np.empty(num_primal)
    cdef double[::1] comp = np.empty(num_primal), v = np.empty(num_primal), bt = np.empty(num_primal)
    cdef double[::1] rows = np.empty(num_rows), rhs_dir = np.empty(num_rows), dy = np.empty(num_rows)
    cdef double[::1] fix = np.empty(num_rows), dz = np.empty(num_primal), ds = np.empty(num_primal)
    for done in range(1, iterations + 1):
        # Residuals and the error of the current point. The passes below are fused where one
        # element's values do not depend on another's (each element's arithmetic and every
        # sum's order are the unfused code's, so the iterates are the same to the bit): at a
        # few thousand jobs these loops, not the factors, were most of an iteration.
        _apply(form, profit, cap, rate, level_usage, z, rows)
        primal_inf = 0.0
        for i in range(num_rows):
            primal_res[i] = rhs[i] - rows[i]
            primal_inf = max(primal_inf, fabs(primal_res[i]))
        _apply_transpose(form, profit, cap, mask, rate, level_usage, y, bt)
        dual_inf = 0.0
        gap = 0.0
        for k in range(K):
            for j in range(n):
                i = k * n + j
                value = (cost[i] - bt[i] - s[i]) * mask[k, j]
                dual_res[i] = value
                dual_inf = max(dual_inf, fabs(value))
                gap += z[i] * s[i]
        for i in range(cells, num_primal):
            value = cost[i] - bt[i] - s[i]
            dual_res[i] = value
            dual_inf = max(dual_inf, fabs(value))
            gap += z[i] * s[i]
        if form == FORM_MAX_MIN:
            objective = z[level]
        else:
            objective = 0.0
            for i in range(cells):
                objective -= cost[i] * z[i]
        error = max(primal_inf / rhs_scale, max(dual_inf, gap / (1.0 + fabs(objective))))
        if error < tolerance:
            return CONVERGED, done
        if error < best_error[0]:
            best_error[0] = error
            best_z[:] = z
            best_y[:] = y
            best_s[:] = s
        elif error > 1e3 * best_error[0] or not isfinite(error):
            return STOPPED, done
        mu = gap / count
        refine = error < refine_below
        # The scaling, the predictor's target products and its v = S^-1 (comp - Z r_d).
        for i in range(num_primal):
            inv_s[i] = 1.0 / s[i]
            inv_z[i] = 1.0 / z[i] if z[i] > 0.0 else 0.0
            d[i] = z[i] * inv_s[i]
            comp[i] = -z[i] * s[i]
            v[i] = (comp[i] - z[i] * dual_res[i]) * inv_s[i]
        if not _factor(form, profit, cap, rate, level_usage, d, i11, i12, i22, g_score, g_time, schur,
                       schur_inverse, f_score, f_time):
            return SINGULAR, done
        # Predictor (affine scaling), then Mehrotra's centring and second-order corrector.
        finite = True
        for corrector in range(2):
            # rhs = r_p - B v; dy; ds = r_d - B^T dy; dz = S^-1 (comp - Z ds)
            _apply(form, profit, cap, rate, level_usage, v, rows)
            for i in range(num_rows):
                rhs_dir[i] = primal_res[i] - rows[i]
            _solve(form, rate, i11, i12, i22, g_score, g_time, schur_inverse, rhs_dir, dy, right, solution)
            _apply_transpose(form, profit, cap, mask, rate, level_usage, dy, bt)
            if refine:
                # One step of iterative refinement: the Schur complement loses digits near
                # the optimum.
                for i in range(num_primal):
                    v[i] = bt[i] * d[i]
                _apply(form, profit, cap, rate, level_usage, v, rows)
                for i in range(num_rows):
                    rows[i] = rhs_dir[i] - rows[i]
                _solve(form, rate, i11, i12, i22, g_score, g_time, schur_inverse, rows, fix, right, solution)
                for i in range(num_rows):
                    dy[i] += fix[i]
                _apply_transpose(form, profit, cap, mask, rate, level_usage, dy, bt)
            # The direction and, in the same pass, both step lengths (:func:`_max_step`).
            steepest_p = 0.0
            steepest_d = 0.0
            for i in range(num_primal):
                step_s = dual_res[i] - bt[i]
                step_z = (comp[i] - z[i] * step_s) * inv_s[i]
                ds[i] = step_s
                dz[i] = step_z
                ratio = step_z * inv_z[i]
                if ratio < steepest_p:
                    steepest_p = ratio
                ratio = step_s * inv_s[i]
                if ratio < steepest_d:
                    steepest_d = ratio
                if corrector == 1 and not (isfinite(step_z) and isfinite(step_s)):
                    finite = False
            alpha_p = 1.0 if steepest_p >= -1.0 else -1.0 / steepest_p
            alpha_d = 1.0 if steepest_d >= -1.0 else -1.0 / steepest_d
            if corrector == 0:
                gap_affine = 0.0
                for i in range(num_primal):
                    gap_affine += (z[i] + alpha_p * dz[i]) * (s[i] + alpha_d * ds[i])
                sigma = (gap_affine / gap) ** 3
                # The corrector's target products and its v.
                for i in range(num_primal):
                    comp[i] = sigma * mu * active[i] - z[i] * s[i] - dz[i] * ds[i]
                    v[i] = (comp[i] - z[i] * dual_res[i]) * inv_s[i]
        if not finite:
            return STOPPED, done
        for i in range(num_rows):
            if not isfinite(dy[i]):
                return STOPPED, done
        alpha_p = min(1.0, step_fraction * alpha_p)
        alpha_d = min(1.0, step_fraction * alpha_d)
        for i in range(num_primal):
            z[i] += alpha_p * dz[i]
            s[i] += alpha_d * ds[i]
        for i in range(num_rows):
            y[i] += alpha_d * dy[i]
    return RUNNING, iterations
