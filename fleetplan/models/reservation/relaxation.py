"""A datacenter-level relaxation of the aggregated RAS MIP (:mod:`fleetplan.models.reservation`;
MAST §2): a bound at 10^6 servers, where the model's own LP is too slow for HiGHS's interior
point method and its simplex alike (the times: benchmarks/results/reservation.md, "Cuts, binary
MIP, datacenter relaxation").

Counts are summed over the fault domains of a datacenter: one column ``X[r, t, d]`` per
reservation, server type and datacenter stands for the model's ``x[r, (t, f)]`` over the fault
domains f of d, and likewise for the moves. Every row below is a sum or an average of the
model's rows, rewritten in the summed columns, so every feasible point of the model maps to a
feasible point here with the same objective, and this LP's optimum is a lower bound on the
model's (proven by HiGHS for this LP):

* supply per (type, datacenter): the sum of the model's supply rows over the fault domains;
* ``T[r] = sum cap X`` (the same row), ``T >= request``;
* a fault-domain guarantee, averaged over the n[d] fault domains of each datacenter d (a
  fault domain where r holds nothing has the row ``T >= request``):
  ``T - (1/n[d]) sum_{t} cap X[r, t, d] >= request``;
* a datacenter guarantee: ``T - sum_t cap X[r, t, d] >= request`` (the same row);
* moves: ``X + M >= c0`` summed, the budget on ``sum M`` (``sum max(0, c0 - x)`` over fault
  domains is at least ``max(0, sum c0 - sum x)``);
* spread: ``z[r] >= (1/n[d]) sum_t cap X[r, t, d]`` (the average of ``z >= RRU in f``);
* ML: ``X <= available[t, d] y[r, d]`` (the sum of the per-key rows); the storage-ratio rows
  are per datacenter already; the valid inequalities of
  :mod:`fleetplan.models.reservation.cuts` involve only ``y`` and ``T`` and are kept.

What is lost is the imbalance between fault domains: the relaxation may spread a reservation
evenly over a datacenter's fault domains where the servers of the types it accepts are not.
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.reservation import DC_LEVEL, FD_LEVEL, ReservationArrays
from fleetplan.lazy import lazy_module

sp = lazy_module("scipy.sparse")


def datacenter_relaxation(model, arrays: ReservationArrays, cuts: bool = True):
    """The relaxation's LinearProgram (same objective constant as ``model``), built from the
    model's keys (module docstring)."""
    from fleetplan.models.linear import LinearProgram
    from fleetplan.models.reservation.cuts import valid_inequalities
    from fleetplan.models.reservation.rows import RowBuilder, move_rows, ratio_rows

    groups, full = model.groups, model.lp
    num_res, num_dcs, num_types = arrays.num_reservations, arrays.num_dcs, arrays.num_types
    key_type, key_dc = groups.type[model.key_group], groups.dc[model.key_group]
    code = (model.key_res * num_types + key_type) * num_dcs + key_dc
    agg, of_key = np.unique(code, return_inverse=True)
    res, rest = agg // (num_types * num_dcs), agg % (num_types * num_dcs)
    typ, dc = rest // num_dcs, rest % num_dcs
    num_keys = agg.size
    supply_code = np.unique(groups.type * num_dcs + groups.dc)
    supply = np.bincount(np.searchsorted(supply_code, groups.type * num_dcs + groups.dc),
                         weights=groups.available, minlength=supply_code.size)
    group_of = np.searchsorted(supply_code, typ * num_dcs + dc)
    available = supply[group_of]
    cap = arrays.res_cap[res, typ]
    c0 = np.bincount(of_key, weights=model.key_c0, minlength=num_keys)
    with_c0 = np.flatnonzero(c0 > 0)
    names = full.names
    size = {name: block.stop - block.start for name, block in names.items()}
    x0, m0 = 0, num_keys
    t0 = m0 + with_c0.size
    z0 = t0 + size["T"]
    y0 = z0 + size["z"]
    e0 = y0 + size["y"]
    num_cols = e0 + size["e"]
    shift = {"T": t0 - names["T"].start, "z": z0 - names["z"].start, "y": y0 - names["y"].start,
             "e": e0 - names["e"].start}
    lower, upper = np.zeros(num_cols), np.full(num_cols, np.inf)
    upper[x0:m0] = available
    upper[m0:t0] = c0[with_c0]
    upper[y0:e0] = 1.0
    cost = np.zeros(num_cols)
    cost[x0:m0] = arrays.w_preference * arrays.res_rank[res, typ]
    cost[m0:t0] = arrays.w_moves
    for name in ("T", "z", "y", "e"):
        cost[names[name].start + shift[name]:names[name].stop + shift[name]] = full.cost[names[name]]
    integrality = np.zeros(num_cols, dtype=np.int8)
    integrality[x0:m0] = 1
    integrality[y0:e0] = 1

    rows = RowBuilder()
    keys = np.arange(num_keys)
    request = arrays.res_request
    start = rows.block(supply_code.size, -np.inf, supply)
    rows.add(start + group_of, x0 + keys, 1.0)
    start = rows.block(num_res, 0.0, 0.0)
    rows.add(start + np.arange(num_res), t0 + np.arange(num_res), 1.0)
    rows.add(start + res, x0 + keys, -cap)
    asking = np.flatnonzero(request > 0)
    start = rows.block(asking.size, request[asking], np.inf)
    rows.add(start + np.arange(asking.size), t0 + asking, 1.0)
    fds_per_dc = np.bincount(arrays.fd_dc, minlength=num_dcs).astype(float)
    for level, share in ((FD_LEVEL, 1.0 / fds_per_dc), (DC_LEVEL, np.ones(num_dcs))):
        chosen = np.flatnonzero((arrays.res_level[res] == level) & (request[res] > 0))
        if not chosen.size:
            continue
        pairs, inverse = np.unique(res[chosen] * num_dcs + dc[chosen], return_inverse=True)
        start = rows.block(pairs.size, request[pairs // num_dcs], np.inf)
        rows.add(start + np.arange(pairs.size), t0 + pairs // num_dcs, 1.0)
        rows.add(start + inverse, x0 + chosen, -cap[chosen] * share[dc[chosen]])
    move_rows(rows, with_c0, c0[with_c0], arrays.budget - model.forced, x0, m0)
    if size["z"]:
        general = np.flatnonzero(~arrays.res_ml)
        z_of = np.full(num_res, -1)
        z_of[general] = z0 + np.arange(general.size)
        chosen = np.flatnonzero(z_of[res] >= 0)
        pairs, inverse = np.unique(res[chosen] * num_dcs + dc[chosen], return_inverse=True)
        start = rows.block(pairs.size, 0.0, np.inf)
        rows.add(start + np.arange(pairs.size), z_of[pairs // num_dcs], 1.0)
        rows.add(start + inverse, x0 + chosen, -cap[chosen] / fds_per_dc[dc[chosen]])
    if size["y"]:
        ml = np.flatnonzero(arrays.res_ml[res])
        pairs, inverse = np.unique(res[ml] * num_dcs + dc[ml], return_inverse=True)
        if pairs.size != size["y"]:
            raise AssertionError("the relaxation's ML pairs do not match the model's")
        start = rows.block(ml.size, -np.inf, 0.0)
        rows.add(start + np.arange(ml.size), x0 + ml, 1.0)
        rows.add(start + np.arange(ml.size), y0 + inverse, -available[ml])
    if size["e"]:
        ratio = np.flatnonzero(~np.isnan(arrays.res_ratio[res]))
        pairs, inverse = np.unique(res[ratio] * num_dcs + dc[ratio], return_inverse=True)
        ratio_rows(rows, arrays, res, typ, cap, ratio, inverse, pairs.size, x0, e0)
    found = valid_inequalities(model, arrays) if cuts else None
    if found is not None:
        matrix, bound = found
        coo = matrix.tocoo()
        column = coo.col.copy()
        for name in ("T", "y"):
            inside = (column >= names[name].start) & (column < names[name].stop)
            column[inside] += shift[name]
        start = rows.block(bound.size, bound, np.inf)
        rows.add(start + coo.row, column, coo.data)
    matrix = sp.csr_matrix((np.concatenate(rows.vals), (np.concatenate(rows.rows), np.concatenate(rows.cols))),
                           shape=(rows.count, num_cols))
    return LinearProgram(cost=cost, matrix=matrix, row_lower=np.concatenate(rows.lower),
                         row_upper=np.concatenate(rows.upper), col_lower=lower, col_upper=upper,
                         integrality=integrality,
                         names={"x": slice(x0, m0), "m": slice(m0, t0), "T": slice(t0, z0), "z": slice(z0, y0),
                                "y": slice(y0, e0), "e": slice(e0, num_cols)})
