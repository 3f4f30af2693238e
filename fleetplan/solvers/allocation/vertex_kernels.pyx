# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Each job's closed-form vertices (:mod:`fleetplan.solvers.allocation.price_decomposition.vertices`) compiled: one
pass over the jobs instead of a few numpy calls per type and per pair of types.

Every value is computed by the numpy code's formula in its order of operations (the same
products and quotients, no reassociation), so the results are the same bits;
``tests/test_allocation_vertex_kernels.py`` checks it. Pairs of types come in
``np.triu_indices`` order, ties go to the lower index as ``np.argmin`` gives them.
"""

from libc.math cimport INFINITY, fabs, isfinite


cdef inline double _single_cost(double a, double need, double lam_j, double usage) noexcept nogil:
    if a > 0 and need <= a:
        return (lam_j * (usage * need)) / a
    return INFINITY


cdef inline double _pair_cost(double a_j, double a_k, double lam_j, double lam_k, double need,
                              double usage) noexcept nogil:
    cdef double a_hi, a_lo, lam_hi, lam_lo, x_hi
    if a_j >= a_k:
        a_hi, a_lo, lam_hi, lam_lo = a_j, a_k, lam_j, lam_k
    else:
        a_hi, a_lo, lam_hi, lam_lo = a_k, a_j, lam_k, lam_j
    if a_lo > 0 and a_hi > need and need > a_lo:
        x_hi = (need - a_lo) / (a_hi - a_lo)
        return usage * (lam_hi * x_hi + lam_lo * (1.0 - x_hi))
    return INFINITY


def best_vertices(const double[:, ::1] A, const double[::1] need, const double[::1] lam,
                  const double[::1] usage, double[:, ::1] costs, long[::1] choice, double[::1] best,
                  double[::1] second):
    """:func:`vertices.best_vertices` at the needs ``need``: fills every vertex's cost
    ``costs`` (n, K + K(K-1)/2), the cheapest vertex ``choice`` (-1 idle, -2 none), its cost
    ``best`` and the runner-up's ``second``."""
    cdef Py_ssize_t n = A.shape[0], K = A.shape[1], columns = costs.shape[1]
    cdef Py_ssize_t m, j, k, p, cheapest
    cdef double cost, lowest, runner_up, need_m, usage_m
    with nogil:
        for m in range(n):
            need_m = need[m]
            usage_m = usage[m]
            for j in range(K):
                costs[m, j] = _single_cost(A[m, j], need_m, lam[j], usage_m)
            p = K
            for j in range(K):
                for k in range(j + 1, K):
                    costs[m, p] = _pair_cost(A[m, j], A[m, k], lam[j], lam[k], need_m, usage_m)
                    p += 1
            cheapest = 0
            lowest = costs[m, 0]
            for p in range(1, columns):
                if costs[m, p] < lowest:
                    lowest = costs[m, p]
                    cheapest = p
            runner_up = INFINITY
            for p in range(columns):
                if p != cheapest and costs[m, p] < runner_up:
                    runner_up = costs[m, p]
            best[m] = lowest
            second[m] = runner_up
            if need_m <= 0:
                choice[m] = -1
            elif isfinite(lowest):
                choice[m] = cheapest
            else:
                choice[m] = -2


def closeness(const double[:, ::1] A, const double[::1] offset, const double[::1] need,
              const double[::1] best, const double[::1] second, double[::1] out):
    """:func:`vertices.closeness`'s measure from :func:`best_vertices`'s costs: the smaller of
    the relative margin to the runner-up vertex and the relative distance of the need to a
    breakpoint (a type's score, or 0 where the job would idle)."""
    cdef Py_ssize_t n = A.shape[0], K = A.shape[1], m, j
    cdef double tie, gap, candidate, a, need_m, low
    with nogil:
        for m in range(n):
            need_m = need[m]
            if isfinite(second[m]):
                tie = (second[m] - best[m]) / max(fabs(best[m]), 1e-300)
            else:
                tie = INFINITY
            gap = INFINITY
            for j in range(K):
                a = A[m, j]
                if a > 0:
                    candidate = fabs(a - need_m) / max(a, fabs(need_m))
                    if candidate < gap:
                        gap = candidate
            low = tie if tie <= gap else gap
            if offset[m] != 0:
                candidate = fabs(need_m) / fabs(offset[m])
                if candidate < low:
                    low = candidate
            out[m] = low


def vertex_affine(const double[:, ::1] A, const double[::1] offset, const long[::1] choice,
                  const unsigned char[::1] floor, double[:, ::1] alpha, double[:, ::1] beta,
                  double[::1] t_low, double[::1] t_high):
    """:func:`vertices.vertex_affine` into ``alpha``, ``beta`` (zeros on entry), ``t_low`` and
    ``t_high``; ``floor`` empty when no job is a floor."""
    cdef Py_ssize_t n = A.shape[0], K = A.shape[1], m, j, k, p, c, hi, lo
    cdef double span, off
    cdef bint floors = floor.shape[0] > 0
    with nogil:
        for m in range(n):
            c = choice[m]
            off = offset[m]
            t_low[m] = -INFINITY
            t_high[m] = INFINITY
            if c < 0:
                t_high[m] = -off
            elif c < K:
                alpha[m, c] = 1.0 / A[m, c]
                beta[m, c] = off / A[m, c]
                t_low[m] = -off
                t_high[m] = A[m, c] - off
            else:
                # pair number c - K in np.triu_indices order
                p = K
                hi = lo = -1
                for j in range(K):
                    for k in range(j + 1, K):
                        if p == c:
                            if A[m, j] >= A[m, k]:
                                hi, lo = j, k
                            else:
                                hi, lo = k, j
                        p += 1
                span = A[m, hi] - A[m, lo]
                alpha[m, hi] = 1.0 / span
                beta[m, hi] = (off - A[m, lo]) / span
                alpha[m, lo] = -1.0 / span
                beta[m, lo] = 1.0 - beta[m, hi]
                t_low[m] = A[m, lo] - off
                t_high[m] = A[m, hi] - off
            if floors and floor[m]:
                for j in range(K):
                    alpha[m, j] = 0.0
                t_low[m] = -INFINITY
                t_high[m] = INFINITY
