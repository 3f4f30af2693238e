"""Valid inequalities for the aggregated RAS MIP (:mod:`fleetplan.models.reservation`; MAST §2).

The LP relaxation of the model is weak on the ML reservations' datacenter binaries ``y[r, d]``:
``x[k] <= available * y`` lets the LP open a sliver of many datacenters (at 10^5 servers x 200
reservations the LP's 50 ML reservations used 6.7 datacenters between them) and so spread a
reservation over many fault domains (a small buffer) at almost no compactness cost. Two
families of rows cut this off. Both hold for *every* integer point of the model, not only for
the optimal ones, so adding them changes no optimum and no feasible set of plans; they are
rows for HiGHS only (CP-SAT gets the model as built).

*Capacity covers* (per ML reservation r, for all servers up and for each failure domain of its
guarantee level). With ``A[r, d]`` the RRU r could hold in datacenter d if it took every
available server of the types it accepts there, and ``A[r, f]`` the same in fault domain f,
the guarantee row for f gives ``sum_d a[d] y[r, d] >= request`` with ``a[d] = A[r, d]``, less
``A[r, f]`` for f's datacenter. Binaries allow each coefficient to be clipped to the request
(``sum min(a[d], request) y >= request``): a datacenter that alone holds the request satisfies
the row by itself, and any smaller coefficient is unchanged.

*Buffer tangents* (ML reservation r with a fault-domain guarantee and request q > 0). Its
buffer ``b = T[r] - q`` is at least the RRU it holds in any one fault domain (the guarantee
row of that domain), so with N fault domains holding any of it, ``T <= N b``, i.e.
``b (N - 1) >= q``. N is at most ``sum_d n[r, d] y[r, d]`` (n: the fault domains of d where r
accepts a type), so ``b >= q / (sum_d n y - 1)``; the right side is convex in the sum, hence
above each of its tangents at N0 = 2, 3, ...: ``T + q/(N0-1)^2 * sum_d n y >= q + q/(N0-1) +
q N0/(N0-1)^2``. Measured at 10^5 servers (benchmarks/results/reservation.md): the LP bound
went from 49,581.5 to 50,426.8 with the covers and to 50,562.2 with both.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fleetplan.instances.reservation import DC_LEVEL, FD_LEVEL, ReservationArrays
from fleetplan.lazy import lazy_module

sp = lazy_module("scipy.sparse")

# Tangent points N0 of the buffer rows: every count up to this, then a geometric sequence.
DENSE_TANGENTS = 12
MORE_TANGENTS = 12


@dataclasses.dataclass
class _MlPairs:
    pairs_res: np.ndarray  # (P,) reservation of each y column, in y-column order
    pairs_dc: np.ndarray
    capacity: np.ndarray  # (P,) A[r, d]
    fault_domains: np.ndarray  # (P,) n[r, d]
    fd_res: np.ndarray  # (Q,) per (r, fault domain) holding a key of r
    fd_pair: np.ndarray  # its (r, d) pair
    fd_capacity: np.ndarray  # A[r, f]


def _ml_pairs(model, arrays: ReservationArrays) -> _MlPairs:
    """The (reservation, datacenter) pairs of the y columns, rebuilt the way
    :func:`~fleetplan.models.reservation.build` numbers them."""
    groups = model.groups
    key_res, key_group = model.key_res, model.key_group
    ml_key = np.flatnonzero(arrays.res_ml[key_res])
    res, group = key_res[ml_key], key_group[ml_key]
    pairs, pair_of = np.unique(res * arrays.num_dcs + groups.dc[group], return_inverse=True)
    held = arrays.res_cap[res, groups.type[group]] * groups.available[group]
    fds, fd_of = np.unique(res * arrays.num_fds + groups.fd[group], return_inverse=True)
    fd_res = fds // arrays.num_fds
    fd_pair = np.searchsorted(pairs, fd_res * arrays.num_dcs + arrays.fd_dc[fds % arrays.num_fds])
    return _MlPairs(pairs_res=pairs // arrays.num_dcs, pairs_dc=pairs % arrays.num_dcs,
                    capacity=np.bincount(pair_of, weights=held, minlength=pairs.size),
                    fault_domains=np.bincount(fd_pair, minlength=pairs.size),
                    fd_res=fd_res, fd_pair=fd_pair,
                    fd_capacity=np.bincount(fd_of, weights=held, minlength=fds.size))


def _covers(ml: _MlPairs, arrays: ReservationArrays, y0: int):
    """Rows ``sum_d min(a[d], q) y[r, d] >= q`` (module docstring) as COO pieces."""
    request, level = arrays.res_request, arrays.res_level
    num_pairs = ml.pairs_res.size
    pair_index = np.arange(num_pairs)
    first = np.searchsorted(ml.pairs_res, np.arange(arrays.num_reservations))
    last = np.searchsorted(ml.pairs_res, np.arange(arrays.num_reservations), side="right")
    asking = np.unique(ml.pairs_res[request[ml.pairs_res] > 0])
    fd_case = np.flatnonzero((level[ml.fd_res] == FD_LEVEL) & (request[ml.fd_res] > 0))
    dc_case = np.flatnonzero((level[ml.pairs_res] == DC_LEVEL) & (request[ml.pairs_res] > 0))
    case_res = np.concatenate([asking, ml.fd_res[fd_case], ml.pairs_res[dc_case]])
    case_pair = np.concatenate([np.full(asking.size, -1), ml.fd_pair[fd_case], pair_index[dc_case]])
    case_loss = np.concatenate([np.zeros(asking.size), ml.fd_capacity[fd_case], ml.capacity[dc_case]])
    width = last[case_res] - first[case_res]
    row = np.repeat(np.arange(case_res.size), width)
    offset = np.arange(row.size) - np.repeat(np.cumsum(width) - width, width)
    pair = first[case_res][row] + offset
    coef = ml.capacity[pair] - np.where(pair == case_pair[row], case_loss[row], 0.0)
    coef = np.minimum(coef, request[case_res][row])
    return row, y0 + pair, coef, request[case_res]


def _tangent_points(most: int) -> np.ndarray:
    dense = np.arange(2, min(most, DENSE_TANGENTS) + 1)
    if most <= DENSE_TANGENTS:
        return dense
    sparse = np.geomspace(DENSE_TANGENTS, most, MORE_TANGENTS + 1)[1:]
    return np.unique(np.concatenate([dense, np.round(sparse).astype(np.int64)]))


def _tangents(ml: _MlPairs, arrays: ReservationArrays, y0: int, t0: int):
    """Rows ``T + q/(N0-1)^2 sum_d n y >= q + q/(N0-1) + q N0/(N0-1)^2`` (module docstring)."""
    rows, cols, vals, lower = [], [], [], []
    count = 0
    request = arrays.res_request
    first = np.searchsorted(ml.pairs_res, np.arange(arrays.num_reservations))
    last = np.searchsorted(ml.pairs_res, np.arange(arrays.num_reservations), side="right")
    chosen = np.unique(ml.pairs_res[(arrays.res_level[ml.pairs_res] == FD_LEVEL) & (request[ml.pairs_res] > 0)])
    for r in chosen.tolist():
        mine = np.arange(first[r], last[r])
        q = float(request[r])
        points = _tangent_points(int(ml.fault_domains[mine].sum()))
        if not points.size:
            # One fault domain at most: no tangent (b (N - 1) >= q cannot hold with N = 1; the
            # guarantee rows already make the model infeasible, and the solvers say why first).
            continue
        slope = q / (points - 1.0) ** 2
        num = points.size
        rows.append(count + np.repeat(np.arange(num), mine.size + 1))
        cols.append(np.tile(np.concatenate([[t0 + r], y0 + mine]), num))
        vals.append(np.concatenate([np.concatenate([[1.0], s * ml.fault_domains[mine]]) for s in slope.tolist()]))
        lower.append(q + q / (points - 1.0) + slope * points)
        count += num
    if not count:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), np.concatenate(lower)


def valid_inequalities(model, arrays: ReservationArrays):
    """The capacity covers and buffer tangents of ``model`` (module docstring) as a sparse
    matrix over the model's columns and the rows' lower bounds; None when the model has no
    datacenter binaries (or is the elastic model, whose rows carry a shortfall)."""
    lp = model.lp
    ys = lp.names["y"]
    if model.elastic or ys.stop == ys.start:
        return None
    ml = _ml_pairs(model, arrays)
    if ml.pairs_res.size != ys.stop - ys.start:
        raise AssertionError("the datacenter binaries do not match the model's ML pairs")
    cover = _covers(ml, arrays, ys.start)
    tangent = _tangents(ml, arrays, ys.start, lp.names["T"].start)
    rows = np.concatenate([cover[0], cover[3].size + tangent[0]])
    cols = np.concatenate([cover[1], tangent[1]])
    vals = np.concatenate([cover[2], tangent[2]])
    lower = np.concatenate([cover[3], tangent[3]])
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(lower.size, lp.num_cols))
    return matrix, lower


def with_cuts(model, arrays: ReservationArrays):
    """The model's LinearProgram with :func:`valid_inequalities` appended (same columns)."""
    found = valid_inequalities(model, arrays)
    lp = model.lp
    if found is None:
        return lp
    matrix, lower = found
    return dataclasses.replace(lp, matrix=sp.vstack([lp.matrix, matrix]).tocsr(),
                               row_lower=np.concatenate([lp.row_lower, lower]),
                               row_upper=np.concatenate([lp.row_upper, np.full(lower.size, np.inf)]))
