"""Sizing a reservation region: servers of each type to add per datacenter (in whole racks
where the instance has racks) so that every reservation meets its request under its guarantee
(``shortfall_rru<=0``), at least cost — the aggregated RAS model with purchase variables.

The RAS model (:mod:`fleetplan.models.reservation`) counts servers per reservation and group of
interchangeable servers (type, fault domain). Sizing adds a *candidate* group for every type
that may be bought in every fault domain of its datacenter, and racks to buy per candidate
group (integer ``q``)::

    minimize    sum price * rack_size * q
    subject to  every row of the RAS model (its supply, guarantee, move-budget rows)
                sum_r x[r, candidate g] <= rack_size * q[g]
                sum_{g in datacenter d, type t} rack_size * q[g] <= MAX[d, t]

The guarantee rows are the model's own — ``T[r] - (RRU in fault domain f) >= request[r]`` for a
fault-domain guarantee — so a purchase meets every request with its largest fault domain lost.
The sized instance (new racks of the bought servers, free) is solved by the exact RAS solver and
judged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.lazy import lazy_module
from fleetplan.planning.sizing import (
    Purchase,
    SizingResult,
    check_max_points,
    check_targets,
    relative_gap,
    time_left,
)
from fleetplan.planning.sizing.lattice import search_lattice
from fleetplan.planning.targets import Target

sp = lazy_module("scipy.sparse")


def size_reservation(instance: Any, targets: Sequence[Target], purchases: Sequence[Purchase], *,
                     budget: float | None, policy: str | None, time_limit: float | None, threads: int, seed: int,
                     started: float, mip_rel_gap: float = 1e-6, max_points: int = 200) -> SizingResult:
    """:func:`fleetplan.planning.size` for the reservation kind (module docstring)."""
    from fleetplan.models.reservation import Groups, build, type_fd_groups

    check_max_points(max_points)
    arrays = instance.arrays()
    rack_size = servers_per_rack(instance)
    offers = _offers(arrays, purchases)  # (type, dc, price, max)
    base = type_fd_groups(arrays)
    candidates = [(t, f, price, cap) for t, d, price, cap in offers for f in np.flatnonzero(arrays.fd_dc == d)]
    cand_type = np.array([c[0] for c in candidates], dtype=np.int64)
    cand_fd = np.array([c[1] for c in candidates], dtype=np.int64)
    most = np.array([c[3] for c in candidates], dtype=float)
    groups = Groups(of_server=base.of_server, type=np.concatenate([base.type, cand_type]),
                    fd=np.concatenate([base.fd, cand_fd]), dc=np.concatenate([base.dc, arrays.fd_dc[cand_fd]]),
                    available=np.concatenate([base.available, np.minimum(most, _plenty(arrays)).astype(np.int64)]))
    model = build(arrays, groups)
    lp = _with_purchases(model, base.type.size, candidates, offers, rack_size, budget, arrays)
    result = SizingResult(status="error", kind="reservation", targets=list(targets))
    from fleetplan.planning.sizing.mip import solve_sizing_mip

    outcome = solve_sizing_mip(lp, time_left(time_limit, started), threads, seed, mip_rel_gap)
    result.log += outcome["log"]
    result.stats.update(columns=float(lp.num_cols), rows=float(lp.num_rows), candidate_groups=float(len(candidates)))
    if outcome["values"] is None:
        result.status = "time_limit" if outcome["status"] == "time_limit" else "infeasible"
        result.bound = outcome["bound"]
        result.message = ("no purchase within the limits lets every reservation meet its request under its "
                          "guarantee (the move budget and the MAXes hold too)" if result.status == "infeasible"
                          else "the time limit ran out before any purchase was found")
        return result
    racks = np.rint(outcome["values"][model.lp.num_cols:model.lp.num_cols + len(candidates)]).astype(np.int64)
    from fleetplan.solvers import solve

    solver = policy or "mip-highs"
    rack_price = np.array([c[2] for c in candidates], dtype=float) * rack_size

    def judge(purchase: np.ndarray) -> tuple[bool, Any]:
        within = all(rack_size * purchase[(cand_type == t) & (arrays.fd_dc[cand_fd] == d)].sum() <= cap
                     for t, d, _price, cap in offers)
        sized = sized_instance(instance, cand_type, cand_fd, purchase, rack_size)
        forward = solve(sized, solver, time_limit=time_left(time_limit, started), seed=seed, threads=threads)
        if not forward.success or forward.evaluation is None:
            return False, (sized, None, {}, check_targets(targets, {}))
        metrics = dict(forward.evaluation.metrics)
        checks = check_targets(targets, metrics)
        return within and all(checks.values()), (sized, forward.plan, metrics, checks)

    bound = outcome["bound"]
    passes, payload = judge(racks)
    proven = outcome["status"] == "optimal"
    if not passes:
        # The policy misses where the model does not: the purchases from the model's bound up,
        # cheapest first, each solved by the policy and judged.
        most = [int(min(c[3], _plenty(arrays)) // rack_size) for c in candidates]
        search = search_lattice(rack_price, most, judge, lower_bound=bound or 0.0, max_cost=budget,
                                max_points=max_points, deadline=None if time_limit is None else started + time_limit)
        result.log += search.log
        result.stats["points_checked"] = float(search.checked)
        bound = search.bound
        if search.found is None:
            result.status = "infeasible" if search.exhausted else "time_limit"
            result.bound = bound
            result.policy = solver
            result.message = (f"under {solver} no purchase within the limits meets every request" if search.exhausted
                              else f"under {solver} no purchase that meets every request was found within the "
                              f"search's limits (none cheaper than {bound:g} does)")
            return result
        racks, payload, proven = search.found, search.payload, True
    result.additions = {}
    for (t, d, _price, _cap) in offers:
        chosen = (cand_type == t) & (arrays.fd_dc[cand_fd] == d)
        result.additions[f"{arrays.dc_ids[d]}/{arrays.type_ids[t]}"] = int(racks[chosen].sum() * rack_size)
    result.units = dict.fromkeys(result.additions, "server")
    result.cost = float(rack_price @ racks)
    result.bound = None if bound is None else min(bound, result.cost)
    result.gap = relative_gap(result.cost, result.bound)
    result.sized_instance, result.plan, result.metrics, result.checks = payload
    result.policy = solver
    proven = proven and (result.gap or 0) <= mip_rel_gap + 1e-9
    result.status = "optimal" if proven else ("time_limit" if outcome["status"] == "time_limit" else "feasible")
    bought = f"bought in racks of {rack_size} server(s)" if any(result.additions.values()) else "nothing to buy"
    result.message = (f"{bought}; the {'sized ' if bought != 'nothing to buy' else ''}instance meets every target "
                      f"under {solver} (solved and judged)")
    return result


def servers_per_rack(instance: Any) -> int:
    """Servers per rack (the most common rack size): purchases come in whole racks."""
    arrays = instance.arrays()
    if not len(arrays.rack_ids):
        return 1
    sizes = np.bincount(arrays.server_rack, minlength=len(arrays.rack_ids))
    sizes = sizes[sizes > 0]
    return int(np.bincount(sizes).argmax()) if sizes.size else 1


def _plenty(arrays: Any) -> int:
    """More servers than any request needs: every request covered twice by the smallest RRU."""
    smallest = arrays.type_rru[arrays.type_rru > 0].min() if (arrays.type_rru > 0).any() else 1.0
    return int(math.ceil(2 * arrays.res_request.sum() / smallest)) + 1


def _offers(arrays: Any, purchases: Sequence[Purchase]) -> list[tuple[int, int, float, float]]:
    """``DATACENTER/TYPE`` (or ``TYPE``: every datacenter) -> (type, dc, price per server, MAX)."""
    offers: dict[tuple[int, int], tuple[float, float]] = {}
    for item in purchases:
        dc, slash, kind = item.name.rpartition("/")
        if kind not in arrays.type_ids:
            raise InstanceError("--buy", f"unknown server type '{kind}' (types: {', '.join(arrays.type_ids)})")
        if slash and dc not in arrays.dc_ids:
            raise InstanceError("--buy", f"unknown datacenter '{dc}' (datacenters: {', '.join(arrays.dc_ids)})")
        t = arrays.type_ids.index(kind)
        price = 1.0 if item.price is None else item.price
        cap = math.inf if item.maximum is None else math.floor(item.maximum)
        for d in ([arrays.dc_ids.index(dc)] if slash else range(len(arrays.dc_ids))):
            offers[(t, d)] = (price, cap)
    return [(t, d, price, cap) for (t, d), (price, cap) in offers.items()]


def _with_purchases(model: Any, first_candidate: int, candidates: list, offers: list, rack_size: int,
                    budget: float | None, arrays: Any) -> Any:
    """The RAS model with rack columns q per candidate group, costed, and its own costs off."""
    from fleetplan.models.linear import LinearProgram

    lp = model.lp
    n_q = len(candidates)
    n = lp.num_cols + n_q
    q = lp.num_cols + np.arange(n_q)
    # sum_r x[r, g] - rack_size q[g] <= 0 for each candidate group g
    key_candidate = model.key_group - first_candidate
    keys = np.flatnonzero(key_candidate >= 0)
    rows = [key_candidate[keys], np.arange(n_q)]
    cols = [lp.names["x"].start + keys, q]
    vals = [np.ones(keys.size), np.full(n_q, -float(rack_size))]
    lower, upper = [np.full(n_q, -np.inf)], [np.zeros(n_q)]
    count = n_q
    for t, d, _price, cap in offers:
        if math.isfinite(cap):
            members = [i for i, (ct, cf, _, _) in enumerate(candidates) if ct == t and arrays.fd_dc[cf] == d]
            rows.append(np.full(len(members), count))
            cols.append(q[members])
            vals.append(np.full(len(members), float(rack_size)))
            lower.append([-np.inf])
            upper.append([cap])
            count += 1
    price = np.array([c[2] for c in candidates], dtype=float) * rack_size
    if budget is not None:
        rows.append(np.full(n_q, count))
        cols.append(q)
        vals.append(price)
        lower.append([-np.inf])
        upper.append([budget])
        count += 1
    extra = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(count, n))
    matrix = sp.vstack([sp.hstack([lp.matrix, sp.csr_matrix((lp.num_rows, n_q))]), extra], format="csr")
    cost = np.concatenate([np.zeros(lp.num_cols), price])
    integrality = np.concatenate([lp.integrality, np.ones(n_q, dtype=np.int8)])
    return replace(lp, cost=cost, matrix=matrix, row_lower=np.concatenate([lp.row_lower, *map(np.asarray, lower)]),
                   row_upper=np.concatenate([lp.row_upper, *map(np.asarray, upper)]),
                   col_lower=np.concatenate([lp.col_lower, np.zeros(n_q)]),
                   col_upper=np.concatenate([lp.col_upper, np.full(n_q, np.inf)]), integrality=integrality) \
        if isinstance(lp, LinearProgram) else lp


def sized_instance(instance: Any, cand_type: np.ndarray, cand_fd: np.ndarray, racks: np.ndarray,
                   rack_size: int) -> Any:
    """``instance`` with ``racks[i]`` new racks of ``rack_size`` free servers of type
    ``cand_type[i]`` in fault domain ``cand_fd[i]`` (a new, validated instance)."""
    from fleetplan.instances import instance_from_data

    arrays = instance.arrays()
    data = instance.model_dump()
    rack_ids, rack_fds = list(data["racks"]["id"]), list(data["racks"]["fault_domain"])
    servers = data["servers"]
    with_ids = servers.get("id") is not None
    number = 0
    for t, f, count in zip(cand_type, cand_fd, racks, strict=True):
        for _ in range(int(count)):
            rack = f"{arrays.fd_ids[f]}-bought{number:05d}"
            number += 1
            rack_ids.append(rack)
            rack_fds.append(arrays.fd_ids[f])
            for slot in range(rack_size):
                servers["type"].append(arrays.type_ids[t])
                servers["rack"].append(len(rack_ids) - 1)
                servers["current"].append(None)
                servers["maintenance"].append(False)
                if with_ids:
                    servers["id"].append(f"{rack}-s{slot:02d}")
    data["racks"] = {**data["racks"], "id": rack_ids, "fault_domain": rack_fds}
    data["name"] = f"{instance.name}-sized" if instance.name else "sized"
    return instance_from_data(data)


def least_shortfall(instance: Any, time_limit: float | None = 30.0) -> dict[str, float]:
    """For a region no plan serves: the least total shortfall (RRU) any assignment within the
    disruption budget leaves (the RAS model made elastic: a shortfall per reservation, minimised),
    as ``{"shortfall_rru": ...}``; empty when the model gives no answer in the time.

    A sweep whose points cannot all be served reads the shortfall here, so the table shows how
    short each point is instead of a blank where the shortfall is positive.
    """
    from fleetplan.models.reservation import build
    from fleetplan.planning.sizing.mip import solve_sizing_mip

    model = build(instance.arrays(), elastic=True)
    outcome = solve_sizing_mip(model.lp, time_limit, 1, 0, 1e-6)
    if outcome["values"] is None:
        return {}
    return {"shortfall_rru": float(outcome["values"][model.lp.names["s"]].sum())}
