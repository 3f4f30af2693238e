"""The judge of the ``reservation`` kind: RAS's guarantee, objective and metrics (MAST §2).

For reservation r let D[r, f] be the RRU it holds in fault domain f (servers in maintenance and
servers of a type r does not accept count 0), D[r, d] the same per datacenter and T[r] the total.

Hard constraints:

* guarantee — the capacity left when the worst failure domain of r's level is removed meets the
  request: ``T[r] - max_f D[r, f] >= request[r]`` (``fault_domain``), ``T[r] - max_d D[r, d]``
  (``datacenter``), ``T[r]`` (``none``). A violation names the reservation, the failing domain
  and the shortfall in RRU;
* accepted types — no server of a type the reservation does not accept;
* maintenance — a server in maintenance stays where it is today;
* disruption budget — servers taken out of the reservation they are in today (moved to another
  reservation or to the free pool) at most ``disruption_budget``. Taking a free server is not a
  disruption: nothing runs on it.

Objective (minimised), weights from the instance::

    w_moves * servers taken out of today's reservation
  + w_buffer * sum_r max(0, T[r] - request[r])                       (the buffer, in RRU)
  + w_spread * sum_{general r} max_f D[r, f]                          (spread)
  + w_compactness * sum_{ML r} datacenters holding r's servers        (compactness)
  + w_preference * sum over assigned servers of the type's position in r's preference list
  + w_ratio * sum_{r with a ratio, d} |storage RRU - ratio * compute RRU|   (per datacenter)
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.base import Evaluation, Violation
from fleetplan.instances.reservation import (
    DC_LEVEL,
    FD_LEVEL,
    FREE,
    KIND,
    STORAGE,
    ReservationArrays,
    ReservationInstance,
    ReservationPlan,
)

TOLERANCE = 1e-6
MAX_LISTED = 20


def holdings(arrays: ReservationArrays, assignment: np.ndarray) -> dict[str, np.ndarray]:
    """Per reservation: RRU per fault domain (R, F) and per datacenter (R, D), available servers
    per datacenter (R, D), storage and compute RRU per datacenter, and preference ranks."""
    num_res, num_fds, num_dcs = arrays.num_reservations, arrays.num_fds, arrays.num_dcs
    held = (assignment >= 0) & arrays.available
    res = assignment[held]
    types = arrays.server_type[held]
    cap = arrays.res_cap[res, types]
    fd = arrays.server_fd[held]
    dc = arrays.server_dc[held]
    by_fd = np.bincount(res * num_fds + fd, weights=cap, minlength=num_res * num_fds).reshape(num_res, num_fds)
    by_dc = np.bincount(res * num_dcs + dc, weights=cap, minlength=num_res * num_dcs).reshape(num_res, num_dcs)
    servers_dc = np.bincount(res * num_dcs + dc, minlength=num_res * num_dcs).reshape(num_res, num_dcs)
    storage = arrays.type_category[types] == STORAGE
    storage_dc = np.bincount(res[storage] * num_dcs + dc[storage], weights=cap[storage],
                             minlength=num_res * num_dcs).reshape(num_res, num_dcs)
    rank = arrays.res_rank[res, types]
    return {"fd": by_fd, "dc": by_dc, "servers_dc": servers_dc, "storage_dc": storage_dc,
            "compute_dc": by_dc - storage_dc, "rank_sum": np.bincount(res, weights=np.maximum(rank, 0),
                                                                      minlength=num_res),
            "first_choice": np.asarray([(rank == 0).sum(), rank.size], dtype=float)}


def guaranteed(arrays: ReservationArrays, by_fd: np.ndarray, by_dc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Capacity of each reservation with its worst failure domain removed, and that domain
    (fault domain or datacenter index; -1 for level ``none``)."""
    total = by_fd.sum(axis=1)
    worst = np.full(arrays.num_reservations, -1, dtype=np.int64)
    loss = np.zeros(arrays.num_reservations)
    if by_fd.shape[1]:
        fd_rows = arrays.res_level == FD_LEVEL
        worst[fd_rows] = by_fd[fd_rows].argmax(axis=1)
        loss[fd_rows] = by_fd[fd_rows].max(axis=1)
    dc_rows = arrays.res_level == DC_LEVEL
    if dc_rows.any():
        worst[dc_rows] = by_dc[dc_rows].argmax(axis=1)
        loss[dc_rows] = by_dc[dc_rows].max(axis=1)
    return total - loss, worst


def objective_terms(arrays: ReservationArrays, assignment: np.ndarray) -> tuple[dict[str, float], dict]:
    """The objective's terms (weighted) and the holdings they came from."""
    held = holdings(arrays, assignment)
    total = held["fd"].sum(axis=1)
    moved = int(((arrays.server_current >= 0) & (assignment != arrays.server_current)).sum())
    general = ~arrays.res_ml
    spread = float(held["fd"][general].max(axis=1).sum()) if general.any() and arrays.num_fds else 0.0
    dcs_used = (held["servers_dc"] > 0).sum(axis=1)
    has_ratio = ~np.isnan(arrays.res_ratio)
    deviation = np.abs(held["storage_dc"][has_ratio]
                       - arrays.res_ratio[has_ratio, None] * held["compute_dc"][has_ratio]).sum()
    terms = {
        "moves": arrays.w_moves * moved,
        "buffer": arrays.w_buffer * float(np.maximum(0.0, total - arrays.res_request).sum()),
        "spread": arrays.w_spread * spread,
        "compactness": arrays.w_compactness * float(dcs_used[arrays.res_ml].sum()),
        "preference": arrays.w_preference * float(held["rank_sum"].sum()),
        "ratio": arrays.w_ratio * float(deviation),
    }
    held["moved"] = moved
    held["dcs_used"] = dcs_used
    held["deviation"] = float(deviation)
    return terms, held


def evaluate(instance: ReservationInstance, plan: ReservationPlan) -> Evaluation:
    """Judge ``plan``: objective terms, violations (reservation, domain, shortfall) and metrics."""
    arrays = instance.arrays()
    assignment = plan.assignment_array(instance)
    terms, held = objective_terms(arrays, assignment)
    by_fd, by_dc = held["fd"], held["dc"]
    total = by_fd.sum(axis=1)
    guarantee, worst = guaranteed(arrays, by_fd, by_dc)
    request = arrays.res_request
    violations: list[Violation] = []
    shortfall = np.maximum(0.0, request - guarantee)
    short = np.flatnonzero(shortfall > TOLERANCE * np.maximum(1.0, request))
    for r in short[np.argsort(-shortfall[short], kind="stable")][:MAX_LISTED].tolist():
        level = int(arrays.res_level[r])
        domain = ("" if worst[r] < 0 else arrays.fd_ids[worst[r]] if level == FD_LEVEL
                  else arrays.dc_ids[worst[r]])
        down = f"with {'fault domain' if level == FD_LEVEL else 'datacenter'} '{domain}' down" if domain else "in all"
        violations.append(Violation(
            constraint="guarantee", where=f"{arrays.res_ids[r]}" + (f"/{domain}" if domain else ""),
            amount=float(shortfall[r]),
            message=f"reservation '{arrays.res_ids[r]}' {down} holds {guarantee[r]:.6g} RRU of "
                    f"{request[r]:.6g} requested: short by {shortfall[r]:.6g} RRU"))
    assigned = assignment >= 0
    # Servers in maintenance are RAS's to leave alone, whatever their type.
    wrong = assigned & arrays.available & ~arrays.accepts[np.maximum(assignment, 0), arrays.server_type]
    if wrong.any():
        counts = np.bincount(assignment[wrong], minlength=arrays.num_reservations)
        for r in np.flatnonzero(counts)[:MAX_LISTED].tolist():
            violations.append(Violation(constraint="accepted_type", where=arrays.res_ids[r],
                                        amount=float(counts[r]),
                                        message=f"{counts[r]} servers of types the reservation does not accept"))
    touched = arrays.server_maintenance & (assignment != arrays.server_current)
    if touched.any():
        violations.append(Violation(constraint="maintenance", where="servers", amount=float(touched.sum()),
                                    message=f"{touched.sum()} servers in maintenance reassigned "
                                            f"(first: row {int(np.flatnonzero(touched)[0])})"))
    moved = held["moved"]
    if moved > arrays.budget:
        violations.append(Violation(constraint="disruption_budget", where="servers",
                                    amount=float(moved - arrays.budget),
                                    message=f"{moved} servers moved, budget {arrays.budget:.0f}"))

    available = arrays.available
    num_res = arrays.num_reservations
    fds_used = (by_fd > 0).sum(axis=1)
    with_request = request > 0
    metrics = {
        "reservations": float(num_res),
        "servers": float(arrays.num_servers),
        "requested_rru": float(request.sum()),
        "capacity_rru": float(total.sum()),
        "guaranteed_rru": float(guarantee.sum()),
        "buffer_rru": float(np.maximum(0.0, total - request).sum()),
        "buffer_share": float(np.maximum(0.0, total - request).sum() / max(request.sum(), 1e-9)),
        "shortfall_rru": float(shortfall.sum()),
        "reservations_short": float(short.size),
        "guarantee_ratio_min": float((guarantee[with_request] / request[with_request]).min())
        if with_request.any() else 1.0,
        "fault_domains_per_reservation": float(fds_used.mean()) if num_res else 0.0,
        "datacenters_per_ml_reservation": float(held["dcs_used"][arrays.res_ml].mean())
        if arrays.res_ml.any() else 0.0,
        "largest_fault_domain_share": float((by_fd.max(axis=1) / np.maximum(total, 1e-9))[total > 0].mean())
        if (total > 0).any() and arrays.num_fds else 0.0,
        "first_choice_share": float(held["first_choice"][0] / max(held["first_choice"][1], 1.0)),
        "ratio_deviation_rru": held["deviation"],
        "servers_moved": float(moved),
        "servers_added": float(((arrays.server_current == FREE) & assigned).sum()),
        "servers_idle": float((available & ~assigned).sum()),
        "servers_in_maintenance": float(arrays.server_maintenance.sum()),
    }
    if np.isfinite(arrays.budget):
        metrics["disruption_budget"] = arrays.budget
    verdict = Evaluation(kind=KIND, objective=float(sum(terms.values())), sense="min", terms=terms,
                         violations=violations, metrics=metrics)
    # Per reservation, column-wise: what the aggregates above sum or bound.
    verdict.breakdown = {"reservations": {
        "id": list(arrays.res_ids), "requested_rru": request.tolist(), "capacity_rru": total.tolist(),
        "guaranteed_rru": guarantee.tolist(), "shortfall_rru": shortfall.tolist(),
        "buffer_rru": np.maximum(0.0, total - request).tolist(), "fault_domains": fds_used.tolist()}}
    return verdict
