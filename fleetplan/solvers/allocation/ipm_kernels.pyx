# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The interior-point method's iterations compiled: the same steps as
:func:`fleetplan.solvers.allocation.interior_point.ipm._numpy_iterations` on the systems of
:mod:`~fleetplan.solvers.allocation.interior_point.ipm_systems`, as loops over jobs and types.

At a few thousand jobs an iteration of the numpy code is about 150 calls on arrays of a few
thousand entries, and each call's fixed cost, not its arithmetic, sets the time (17 iterations
took 27 ms at 2,048 distinct jobs). Here an iteration is a few dozen passes over the (K, n)
cells in one compiled call, each pass a small function over plain arrays that the compiler can
keep in registers and run on vectors, and each long sum kept in four partial sums; the work
arrays are kept between calls of one size. Written so (2026-11-29), the interior-point prices
of LAS at 2,048 distinct jobs (13 iterations, the separable method's first prices) took
2.3-2.6 ms against 4.7-4.8 ms for the same steps as loops inside one function with fresh
arrays (mean of 100 calls in a process, the fastest three of 5 alternating processes, load
1.0-1.3). The arithmetic is the numpy code's (Mehrotra's predictor-corrector,
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
module, in a millisecond, with no compiler at run time (:mod:`fleetplan.kernels`). It is one
module past 600 lines because its passes are C functions the iterations call directly: in
another extension module each call would go through a shared declaration file and a
function-pointer table, for passes of a few microseconds.
"""

import numpy as np

from libc.math cimport fabs, isfinite, isnan

# Pointers that alias no other argument (C's restrict): the element-wise passes below then
# compile to vector instructions, and each pass is its own small function so that its pointers
# stay in registers (inside :func:`iterate` they were reloaded from the stack at every element).
cdef extern from *:
    """
    typedef double *__restrict fleetplan_out;
    typedef const double *__restrict fleetplan_in;
    """
    ctypedef double* vector_out "fleetplan_out"
    ctypedef const double* vector_in "fleetplan_in"

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


# Sums and minima over many entries run in four interleaved partial results: in one running sum
# each addition waits on the one before (four cycles), which made those passes, not their
# arithmetic, most of an iteration at a few thousand jobs.
cdef inline double _dot(const double* a, const double* b, Py_ssize_t count) noexcept nogil:
    """sum_i a[i] b[i]."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t i, last = count - count % 4
    for i in range(0, last, 4):
        s0 += a[i] * b[i]
        s1 += a[i + 1] * b[i + 1]
        s2 += a[i + 2] * b[i + 2]
        s3 += a[i + 3] * b[i + 3]
    for i in range(last, count):
        s0 += a[i] * b[i]
    return (s0 + s1) + (s2 + s3)


cdef inline double _min_product(const double* a, const double* b, Py_ssize_t count) noexcept nogil:
    """min(0, min_i a[i] b[i])."""
    cdef double m0 = 0.0, m1 = 0.0, m2 = 0.0, m3 = 0.0, value
    cdef Py_ssize_t i, last = count - count % 4
    for i in range(0, last, 4):
        value = a[i] * b[i]
        if value < m0:
            m0 = value
        value = a[i + 1] * b[i + 1]
        if value < m1:
            m1 = value
        value = a[i + 2] * b[i + 2]
        if value < m2:
            m2 = value
        value = a[i + 3] * b[i + 3]
        if value < m3:
            m3 = value
    for i in range(last, count):
        value = a[i] * b[i]
        if value < m0:
            m0 = value
    return min(min(m0, m1), min(m2, m3))


cdef inline double _max_abs(const double* a, Py_ssize_t count) noexcept nogil:
    """max_i |a[i]| (0 when empty)."""
    cdef double m0 = 0.0, m1 = 0.0, m2 = 0.0, m3 = 0.0
    cdef Py_ssize_t i, last = count - count % 4
    for i in range(0, last, 4):
        m0 = max(m0, fabs(a[i]))
        m1 = max(m1, fabs(a[i + 1]))
        m2 = max(m2, fabs(a[i + 2]))
        m3 = max(m3, fabs(a[i + 3]))
    for i in range(last, count):
        m0 = max(m0, fabs(a[i]))
    return max(max(m0, m1), max(m2, m3))



cdef inline double _affine_gap(const double* z, const double* dz, const double* s, const double* ds,
                               double alpha_p, double alpha_d, Py_ssize_t count) noexcept nogil:
    """sum_i (z + alpha_p dz)_i (s + alpha_d ds)_i."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t i, last = count - count % 4
    for i in range(0, last, 4):
        s0 += (z[i] + alpha_p * dz[i]) * (s[i] + alpha_d * ds[i])
        s1 += (z[i + 1] + alpha_p * dz[i + 1]) * (s[i + 1] + alpha_d * ds[i + 1])
        s2 += (z[i + 2] + alpha_p * dz[i + 2]) * (s[i + 2] + alpha_d * ds[i + 2])
        s3 += (z[i + 3] + alpha_p * dz[i + 3]) * (s[i + 3] + alpha_d * ds[i + 3])
    for i in range(last, count):
        s0 += (z[i] + alpha_p * dz[i]) * (s[i] + alpha_d * ds[i])
    return (s0 + s1) + (s2 + s3)


cdef void _difference(Py_ssize_t count, vector_in a, vector_in b, vector_out out) noexcept nogil:
    """out = a - b."""
    cdef Py_ssize_t i
    for i in range(count):
        out[i] = a[i] - b[i]


cdef void _dual_residual(Py_ssize_t cells, Py_ssize_t count, vector_in cost, vector_in bt, vector_in s,
                         vector_in mask, vector_out out) noexcept nogil:
    """out = cost - B^T y - s, zero on the cells a job cannot use (``mask`` 0)."""
    cdef Py_ssize_t i
    for i in range(cells):
        out[i] = (cost[i] - bt[i] - s[i]) * mask[i]
    for i in range(cells, count):
        out[i] = cost[i] - bt[i] - s[i]


cdef void _scaling(Py_ssize_t count, vector_in z, vector_in s, vector_in dual_res, vector_out inv_s,
                   vector_out inv_z, vector_out d, vector_out comp, vector_out v) noexcept nogil:
    """S^-1, Z^-1 (0 where z is a held-out cell's 0), D = Z S^-1, the predictor's target
    products -Z S and its v = S^-1 (comp - Z r_d)."""
    cdef Py_ssize_t i
    cdef double zi, inverse, positive, product
    for i in range(count):
        zi = z[i]
        inverse = 1.0 / s[i]
        # 1 / z by a division of every entry (by 1 where z is not positive) times 0 or 1: a
        # branch in the loop kept it from running on vectors. (z is finite: iterates whose
        # steps are not stop before they are taken.)
        positive = <double>(zi > 0.0)
        inv_s[i] = inverse
        inv_z[i] = positive / (zi * positive + (1.0 - positive))
        d[i] = zi * inverse
        product = -zi * s[i]
        comp[i] = product
        v[i] = (product - zi * dual_res[i]) * inverse


cdef void _direction(Py_ssize_t count, vector_in dual_res, vector_in bt, vector_in comp, vector_in z,
                     vector_in inv_s, vector_out ds, vector_out dz) noexcept nogil:
    """ds = r_d - B^T dy, dz = S^-1 (comp - Z ds)."""
    cdef Py_ssize_t i
    cdef double step_s
    for i in range(count):
        step_s = dual_res[i] - bt[i]
        ds[i] = step_s
        dz[i] = (comp[i] - z[i] * step_s) * inv_s[i]


cdef void _centring(Py_ssize_t count, double target, vector_in active, vector_in z, vector_in s, vector_in dz,
                    vector_in ds, vector_in dual_res, vector_in inv_s, vector_out comp, vector_out v) noexcept nogil:
    """Mehrotra's corrector: target products (sigma mu on active cells) - Z S - dZ dS, and v."""
    cdef Py_ssize_t i
    cdef double product
    for i in range(count):
        product = target * active[i] - z[i] * s[i] - dz[i] * ds[i]
        comp[i] = product
        v[i] = (product - z[i] * dual_res[i]) * inv_s[i]


cdef void _multiply(Py_ssize_t count, vector_in a, vector_in b, vector_out out) noexcept nogil:
    """out = a b, element by element."""
    cdef Py_ssize_t i
    for i in range(count):
        out[i] = a[i] * b[i]


cdef void _step(Py_ssize_t count, double alpha, vector_in step, vector_out values) noexcept nogil:
    """values += alpha step."""
    cdef Py_ssize_t i
    for i in range(count):
        values[i] += alpha * step[i]


cdef bint _all_finite(Py_ssize_t count, const double* values) noexcept nogil:
    """Whether no value is infinite or NaN: 0 x value is NaN exactly for those, and a NaN
    carries through a sum (no branch per value)."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t i, last = count - count % 4
    for i in range(0, last, 4):
        s0 += 0.0 * values[i]
        s1 += 0.0 * values[i + 1]
        s2 += 0.0 * values[i + 2]
        s3 += 0.0 * values[i + 3]
    for i in range(last, count):
        s0 += 0.0 * values[i]
    return not isnan((s0 + s1) + (s2 + s3))


cdef double _level_term(Py_ssize_t count, const double* rate, const double* i22) noexcept nogil:
    """sum_j rate_j^2 (E^-1)_22 of job j: the level's own term of the Schur complement."""
    cdef double s0 = 0.0, s1 = 0.0
    cdef Py_ssize_t j, last = count - count % 2
    for j in range(0, last, 2):
        s0 += rate[j] * rate[j] * i22[j]
        s1 += rate[j + 1] * rate[j + 1] * i22[j + 1]
    for j in range(last, count):
        s0 += rate[j] * rate[j] * i22[j]
    return s0 + s1


cdef void _score_and_time(Py_ssize_t count, vector_in profit, vector_in x, vector_out score,
                          vector_out time) noexcept nogil:
    """One type's cells' terms of the score and time rows: score += a x, time += x."""
    cdef Py_ssize_t j
    for j in range(count):
        score[j] += profit[j] * x[j]
        time[j] += x[j]


cdef void _cell_duals(Py_ssize_t count, vector_in profit, vector_in cap, vector_in mask, vector_in y_score,
                      vector_in y_time, double y_cap, vector_out out) noexcept nogil:
    """One type's cells of B^T y (max-min form), 0 where a job cannot run."""
    cdef Py_ssize_t j
    for j in range(count):
        out[j] = (profit[j] * y_score[j] + y_time[j] + cap[j] * y_cap) * mask[j]


cdef void _linear_cell_duals(Py_ssize_t count, vector_in cap, vector_in mask, vector_in y_time, double y_cap,
                             vector_out out) noexcept nogil:
    """One type's cells of B^T y (linear form), 0 where a job cannot run."""
    cdef Py_ssize_t j
    for j in range(count):
        out[j] = (cap[j] * y_cap + y_time[j]) * mask[j]


cdef double _level_right(Py_ssize_t count, const double* rate, const double* i22, const double* i12,
                         const double* r_score, const double* r_time) noexcept nogil:
    """The level's row of the reduced right-hand side: sum_j rate_j (E_j^-1 r_j)_score."""
    cdef double s0 = 0.0, s1 = 0.0
    cdef Py_ssize_t j, last = count - count % 2
    for j in range(0, last, 2):
        s0 += rate[j] * (i22[j] * r_score[j] - i12[j] * r_time[j])
        s1 += rate[j + 1] * (i22[j + 1] * r_score[j + 1] - i12[j + 1] * r_time[j + 1])
    for j in range(last, count):
        s0 += rate[j] * (i22[j] * r_score[j] - i12[j] * r_time[j])
    return s0 + s1


cdef void _block_solutions(Py_ssize_t count, double theta, vector_in rate, vector_in i11, vector_in i12,
                           vector_in i22, vector_in r_score, vector_in r_time, vector_out y_score,
                           vector_out y_time) noexcept nogil:
    """Each job's block solved with the level's part (the capacity rows' parts follow)."""
    cdef Py_ssize_t j
    for j in range(count):
        y_score[j] = i22[j] * r_score[j] - i12[j] * r_time[j] - theta * rate[j] * i22[j]
        y_time[j] = i11[j] * r_time[j] - i12[j] * r_score[j] + theta * rate[j] * i12[j]


cdef void _apply(int form, const double[:, ::1] profit, const double[:, ::1] cap, const double[::1] rate,
                 const double[::1] level_usage, const double[::1] z, double[::1] out) noexcept nogil:
    """out = B z (the constraint rows times the primal vector)."""
    cdef Py_ssize_t K = profit.shape[0], n = profit.shape[1], cells = K * n
    cdef Py_ssize_t j, k, base, surplus, idle, spare, level
    if form == FORM_MAX_MIN:
        surplus, idle, spare, level = cells, cells + n, cells + 2 * n, cells + 2 * n + K
        for j in range(n):
            out[j] = -z[surplus + j] - rate[j] * z[level]
            out[n + j] = z[idle + j]
        for k in range(K):
            base = k * n
            _score_and_time(n, &profit[k, 0], &z[base], &out[0], &out[n])
            out[2 * n + k] = _dot(&cap[k, 0], &z[base], n) + z[spare + k] + level_usage[k] * z[level]
    else:
        idle, spare = cells, cells + n
        for j in range(n):
            out[j] = z[idle + j]
        for k in range(K):
            base = k * n
            _step(n, 1.0, &z[base], &out[0])
            out[n + k] = _dot(&cap[k, 0], &z[base], n) + z[spare + k]


cdef void _apply_transpose(int form, const double[:, ::1] profit, const double[:, ::1] cap,
                           const double[:, ::1] mask, const double[::1] rate, const double[::1] level_usage,
                           const double[::1] y, double[::1] out) noexcept nogil:
    """out = B^T y, zero on the cells a job cannot use."""
    cdef Py_ssize_t K = profit.shape[0], n = profit.shape[1], cells = K * n
    cdef Py_ssize_t j, k, base, surplus, idle, spare, level
    cdef double level_value
    if form == FORM_MAX_MIN:
        surplus, idle, spare, level = cells, cells + n, cells + 2 * n, cells + 2 * n + K
        for k in range(K):
            base = k * n
            _cell_duals(n, &profit[k, 0], &cap[k, 0], &mask[k, 0], &y[0], &y[n], y[2 * n + k], &out[base])
        for j in range(n):
            out[surplus + j] = -y[j]
            out[idle + j] = y[n + j]
        level_value = -_dot(&rate[0], &y[0], n)
        for k in range(K):
            out[spare + k] = y[2 * n + k]
            level_value += level_usage[k] * y[2 * n + k]
        out[level] = level_value
    else:
        idle, spare = cells, cells + n
        for k in range(K):
            base = k * n
            _linear_cell_duals(n, &cap[k, 0], &mask[k, 0], &y[0], y[n + k], &out[base])
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


cdef void _scaled(Py_ssize_t count, vector_in scale, vector_in values, vector_out out) noexcept nogil:
    """out = scale values, element by element (one type's couplings: cap d, then profit cap d)."""
    cdef Py_ssize_t i
    for i in range(count):
        out[i] = scale[i] * values[i]


cdef void _block_sums(Py_ssize_t count, vector_in profit, vector_in d, vector_out a2_d, vector_out e12,
                      vector_out e22) noexcept nogil:
    """One type's terms of each job's 2x2 block: a2_d += a^2 dx, e12 += a dx, e22 += dx."""
    cdef Py_ssize_t j
    cdef double a, dx
    for j in range(count):
        a = profit[j]
        dx = d[j]
        a2_d[j] += a * a * dx
        e12[j] += a * dx
        e22[j] += dx


cdef void _pair_sums(Py_ssize_t count, vector_in profit_k, vector_in profit_q, vector_in d_k, vector_in d_q,
                     vector_out pairs) noexcept nogil:
    """One pair of types' term of each job's Lagrange identity: d_k d_q (a_k - a_q)^2."""
    cdef Py_ssize_t j
    cdef double gap
    for j in range(count):
        gap = profit_k[j] - profit_q[j]
        pairs[j] += d_k[j] * d_q[j] * gap * gap


cdef void _block_inverses(Py_ssize_t count, vector_in d_surplus, vector_in d_idle, vector_in pairs,
                          vector_out i11, vector_out i12, vector_out i22) noexcept nogil:
    """Each job's 2x2 block inverse, in place of its sums (a2_d, e12, e22)."""
    cdef Py_ssize_t j
    cdef double a2_d, inv_det
    for j in range(count):
        a2_d = i11[j]
        # e11 e22 - e12^2 by Lagrange's identity (the plain difference cancels).
        inv_det = 1.0 / (d_surplus[j] * i22[j] + d_idle[j] * a2_d + pairs[j])
        i11[j] = (a2_d + d_surplus[j]) * inv_det
        i12[j] *= inv_det
        i22[j] *= inv_det


cdef void _couplings(Py_ssize_t count, vector_in i11, vector_in i12, vector_in i22, vector_in f_score,
                     vector_in f_time, vector_out g_score, vector_out g_time) noexcept nogil:
    """One type's column of G = E^-1 F^T."""
    cdef Py_ssize_t j
    for j in range(count):
        g_score[j] = i22[j] * f_score[j] - i12[j] * f_time[j]
        g_time[j] = i11[j] * f_time[j] - i12[j] * f_score[j]


cdef bint _factor(int form, const double[:, ::1] profit, const double[:, ::1] cap, const double[::1] rate,
                  const double[::1] level_usage, const double[::1] d, double[::1] i11, double[::1] i12,
                  double[::1] i22, double[:, ::1] g_score, double[:, ::1] g_time, double[:, ::1] schur,
                  double[:, ::1] schur_inverse, double[:, ::1] f_score, double[:, ::1] f_time,
                  double[::1] pairs) noexcept nogil:
    """Eliminate B D B^T: each job's block inverse (i11, i12, i22; the linear form keeps
    1 / e22 in i22), the couplings G = E^-1 F^T and the Schur complement's inverse. False when
    that complement is singular. Pass by pass over the jobs (each pass one type's, or one pair
    of types', cells), so that every pass is element-wise or one sum."""
    cdef Py_ssize_t K = profit.shape[0], n = profit.shape[1], cells = K * n
    cdef Py_ssize_t j, k, q, size = schur.shape[0], surplus, idle, spare, level
    cdef double coupling, d_level
    for k in range(size):
        for q in range(size):
            schur[k, q] = 0.0
    if n == 0:
        return False
    for k in range(K):
        _scaled(n, &cap[k, 0], &d[k * n], &f_time[k, 0])
    if form == FORM_MAX_MIN:
        surplus, idle, spare, level = cells, cells + n, cells + 2 * n, cells + 2 * n + K
        for j in range(n):
            i11[j] = 0.0
            i12[j] = 0.0
            i22[j] = d[idle + j]
            pairs[j] = 0.0
        for k in range(K):
            _block_sums(n, &profit[k, 0], &d[k * n], &i11[0], &i12[0], &i22[0])
        for k in range(K):
            for q in range(k + 1, K):
                _pair_sums(n, &profit[k, 0], &profit[q, 0], &d[k * n], &d[q * n], &pairs[0])
        _block_inverses(n, &d[surplus], &d[idle], &pairs[0], &i11[0], &i12[0], &i22[0])
        for k in range(K):
            _scaled(n, &profit[k, 0], &f_time[k, 0], &f_score[k, 0])
            _couplings(n, &i11[0], &i12[0], &i22[0], &f_score[k, 0], &f_time[k, 0], &g_score[k, 0],
                       &g_time[k, 0])
        for k in range(K):
            schur[k, k] = _dot(&cap[k, 0], &f_time[k, 0], n)
            for q in range(K):
                schur[k, q] -= _dot(&f_score[k, 0], &g_score[q, 0], n) + _dot(&f_time[k, 0], &g_time[q, 0], n)
            schur[k, k] += d[spare + k]
            coupling = _dot(&g_score[k, 0], &rate[0], n) + level_usage[k]
            schur[K, k] = coupling
            schur[k, K] = -coupling
        d_level = d[level]
        schur[K, K] = (1.0 / d_level if d_level > 0 else 1e300) + _level_term(n, &rate[0], &i22[0])
    else:
        idle, spare = cells, cells + n
        for j in range(n):
            i22[j] = d[idle + j]
        for k in range(K):
            _step(n, 1.0, &d[k * n], &i22[0])
        for j in range(n):
            i22[j] = 1.0 / i22[j]
        for k in range(K):
            _scaled(n, &i22[0], &f_time[k, 0], &g_time[k, 0])
        for k in range(K):
            schur[k, k] = _dot(&cap[k, 0], &f_time[k, 0], n)
            for q in range(K):
                schur[k, q] -= _dot(&f_time[k, 0], &g_time[q, 0], n)
            schur[k, k] += d[spare + k]
    return _invert(schur, schur_inverse)


cdef void _solve(int form, const double[::1] rate, const double[::1] i11, const double[::1] i12,
                 const double[::1] i22, const double[:, ::1] g_score, const double[:, ::1] g_time,
                 const double[:, ::1] schur_inverse, const double[::1] rhs, double[::1] out,
                 double[::1] right, double[::1] solution) noexcept nogil:
    """out = dy from (B D B^T) dy = rhs, with the factors of :func:`_factor`."""
    cdef Py_ssize_t K = g_time.shape[0], n = g_time.shape[1], j, k, q, size = schur_inverse.shape[0]
    cdef double total, level_right
    if form == FORM_MAX_MIN:
        level_right = _level_right(n, &rate[0], &i22[0], &i12[0], &rhs[0], &rhs[n])
        for k in range(K):
            right[k] = rhs[2 * n + k] - (_dot(&g_score[k, 0], &rhs[0], n) + _dot(&g_time[k, 0], &rhs[n], n))
        right[K] = level_right
    else:
        for k in range(K):
            right[k] = rhs[n + k] - _dot(&g_time[k, 0], &rhs[0], n)
    for k in range(size):
        total = 0.0
        for q in range(size):
            total += schur_inverse[k, q] * right[q]
        solution[k] = total
    if form == FORM_MAX_MIN:
        _block_solutions(n, solution[K], &rate[0], &i11[0], &i12[0], &i22[0], &rhs[0], &rhs[n], &out[0],
                         &out[n])
        for k in range(K):
            _step(n, -solution[k], &g_score[k, 0], &out[0])
            _step(n, -solution[k], &g_time[k, 0], &out[n])
        for k in range(K):
            out[2 * n + k] = solution[k]
    else:
        _multiply(n, &rhs[0], &i22[0], &out[0])
        for k in range(K):
            _step(n, -solution[k], &g_time[k, 0], &out[0])
        for k in range(K):
            out[n + k] = solution[k]

def iterate(int form, const double[:, ::1] profit, const double[:, ::1] cap, const double[:, ::1] mask,
            const double[::1] rate, const double[::1] level_usage, const double[::1] rhs,
            const double[::1] cost, const double[::1] active, double count, double rhs_scale,
            double[::1] z, double[::1] y, double[::1] s, double[::1] best_z, double[::1] best_y,
            double[::1] best_s, double[::1] best_error, double tolerance, double refine_below,
            double step_fraction, int iterations):
    """Run up to ``iterations`` iterations from (z, y, s), updated in place; the most accurate
    point so far is kept in (best_z, best_y, best_s), its error in ``best_error[0]``. Returns
    (what happened: CONVERGED, RUNNING, STOPPED or SINGULAR, iterations run)."""
    cdef Py_ssize_t K = profit.shape[0], n = profit.shape[1]
    cdef Py_ssize_t num_primal = z.shape[0], num_rows = y.shape[0]
    cdef Py_ssize_t size = K + 1 if form == FORM_MAX_MIN else K
    work = _take_work_arrays(K, n, size, num_primal, num_rows)
    outcome = _iterate(form, profit, cap, mask, rate, level_usage, rhs, cost, active, count, rhs_scale, z, y, s,
                       best_z, best_y, best_s, best_error, tolerance, refine_below, step_fraction, iterations, *work)
    _give_back_work_arrays(work)
    return outcome


# The iterations' work arrays (two dozen vectors of the system's size), kept for the next call
# of the same size: allocated afresh each call, they cost about 365 page faults of the operating
# system's per call at 2,048 jobs (the allocator returns freed memory to it), some 0.2 ms of a
# 3 ms run. Only systems up to WORK_ARRAYS_KEPT primal entries keep theirs (a few MB at most).
# A call takes the arrays out while it runs, so concurrent calls never share them.
WORK_ARRAYS_KEPT = 65_536
_kept_work_arrays = None


def _take_work_arrays(Py_ssize_t K, Py_ssize_t n, Py_ssize_t size, Py_ssize_t num_primal, Py_ssize_t num_rows):
    global _kept_work_arrays
    shape = (K, n, size, num_primal, num_rows)
    kept, _kept_work_arrays = _kept_work_arrays, None
    if kept is not None and kept[0] == shape:
        return kept
    return (shape, np.empty(num_rows), np.empty(num_primal), np.empty(n), np.empty(n), np.empty(n),
            np.empty((K, n)), np.empty((K, n)), np.empty((size, size)), np.empty((size, size)),
            np.empty((K, n)), np.empty((K, n)), np.empty(size), np.empty(n), np.empty(size),
            np.empty(num_primal), np.empty(num_primal), np.empty(num_primal), np.empty(num_primal),
            np.empty(num_primal), np.empty(num_primal), np.empty(num_rows), np.empty(num_rows),
            np.empty(num_rows), np.empty(num_rows), np.empty(num_primal), np.empty(num_primal),
            np.empty(num_rows))


def _give_back_work_arrays(work):
    global _kept_work_arrays
    if work[0][3] <= WORK_ARRAYS_KEPT:
        _kept_work_arrays = work


def _iterate(int form, const double[:, ::1] profit, const double[:, ::1] cap, const double[:, ::1] mask,
             const double[::1] rate, const double[::1] level_usage, const double[::1] rhs,
             const double[::1] cost, const double[::1] active, double count, double rhs_scale,
             double[::1] z, double[::1] y, double[::1] s, double[::1] best_z, double[::1] best_y,
             double[::1] best_s, double[::1] best_error, double tolerance, double refine_below,
             double step_fraction, int iterations, shape,
             double[::1] primal_res, double[::1] dual_res, double[::1] i11, double[::1] i12, double[::1] i22,
             double[:, ::1] g_score, double[:, ::1] g_time, double[:, ::1] schur, double[:, ::1] schur_inverse,
             double[:, ::1] f_score, double[:, ::1] f_time, double[::1] right, double[::1] pairs,
             double[::1] solution, double[::1] inv_s, double[::1] inv_z, double[::1] d, double[::1] comp,
             double[::1] v, double[::1] bt, double[::1] rows, double[::1] rhs_dir, double[::1] dy,
             double[::1] fix, double[::1] dz, double[::1] ds, double[::1] residual):
    """:func:`iterate` with its work arrays."""
    cdef Py_ssize_t K = profit.shape[0], n = profit.shape[1], cells = K * n
    cdef Py_ssize_t num_primal = z.shape[0], num_rows = y.shape[0], level = cells + 2 * n + K
    cdef Py_ssize_t i, done, corrector
    cdef double primal_inf, dual_inf, gap, objective, error, mu, alpha_p = 1.0, alpha_d = 1.0
    cdef double sigma, steepest_p, steepest_d
    cdef bint refine, finite
    for done in range(1, iterations + 1):
        # Residuals and the error of the current point.
        _apply(form, profit, cap, rate, level_usage, z, rows)
        _difference(num_rows, &rhs[0], &rows[0], &primal_res[0])
        primal_inf = _max_abs(&primal_res[0], num_rows)
        _apply_transpose(form, profit, cap, mask, rate, level_usage, y, bt)
        _dual_residual(cells, num_primal, &cost[0], &bt[0], &s[0], &mask[0, 0], &dual_res[0])
        dual_inf = _max_abs(&dual_res[0], num_primal)
        gap = _dot(&z[0], &s[0], num_primal)
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
        _scaling(num_primal, &z[0], &s[0], &dual_res[0], &inv_s[0], &inv_z[0], &d[0], &comp[0], &v[0])
        if not _factor(form, profit, cap, rate, level_usage, d, i11, i12, i22, g_score, g_time, schur,
                       schur_inverse, f_score, f_time, pairs):
            return SINGULAR, done
        # Predictor (affine scaling), then Mehrotra's centring and second-order corrector.
        finite = True
        for corrector in range(2):
            # rhs = r_p - B v; dy; ds = r_d - B^T dy; dz = S^-1 (comp - Z ds)
            _apply(form, profit, cap, rate, level_usage, v, rows)
            _difference(num_rows, &primal_res[0], &rows[0], &rhs_dir[0])
            _solve(form, rate, i11, i12, i22, g_score, g_time, schur_inverse, rhs_dir, dy, right, solution)
            _apply_transpose(form, profit, cap, mask, rate, level_usage, dy, bt)
            if refine:
                # One step of iterative refinement: the Schur complement loses digits near
                # the optimum.
                _multiply(num_primal, &bt[0], &d[0], &v[0])
                _apply(form, profit, cap, rate, level_usage, v, rows)
                _difference(num_rows, &rhs_dir[0], &rows[0], &residual[0])
                _solve(form, rate, i11, i12, i22, g_score, g_time, schur_inverse, residual, fix, right, solution)
                _step(num_rows, 1.0, &fix[0], &dy[0])
                _apply_transpose(form, profit, cap, mask, rate, level_usage, dy, bt)
            # The direction, then both step lengths: the largest alpha <= 1 keeping z + alpha dz
            # and s + alpha ds >= 0 (inv_z is 0 on held-out cells, whose step is 0).
            _direction(num_primal, &dual_res[0], &bt[0], &comp[0], &z[0], &inv_s[0], &ds[0], &dz[0])
            if corrector == 1:
                finite = _all_finite(num_primal, &dz[0]) and _all_finite(num_primal, &ds[0])
            steepest_p = _min_product(&dz[0], &inv_z[0], num_primal)
            steepest_d = _min_product(&ds[0], &inv_s[0], num_primal)
            alpha_p = 1.0 if steepest_p >= -1.0 else -1.0 / steepest_p
            alpha_d = 1.0 if steepest_d >= -1.0 else -1.0 / steepest_d
            if corrector == 0:
                sigma = (_affine_gap(&z[0], &dz[0], &s[0], &ds[0], alpha_p, alpha_d, num_primal) / gap) ** 3
                # The corrector's target products and its v.
                _centring(num_primal, sigma * mu, &active[0], &z[0], &s[0], &dz[0], &ds[0], &dual_res[0],
                          &inv_s[0], &comp[0], &v[0])
        if not finite or not _all_finite(num_rows, &dy[0]):
            return STOPPED, done
        alpha_p = min(1.0, step_fraction * alpha_p)
        alpha_d = min(1.0, step_fraction * alpha_d)
        _step(num_primal, alpha_p, &dz[0], &z[0])
        _step(num_primal, alpha_d, &ds[0], &s[0])
        _step(num_rows, alpha_d, &dy[0], &y[0])
    return RUNNING, iterations
