"""The RAS assignment as an aggregated MIP over counts (MAST §2 "Dynamic clusters").

Servers of one type in one fault domain are interchangeable for every reservation: they have
the same RRU for it, the same preference rank, fall in the same fault domain and datacenter.
So the decision is an integer count ``x[r, g]`` per reservation r and *group* g = (type, fault
domain), and the model's size grows with reservations × groups, never with servers. Servers
in maintenance are not in any group: they stay where they are and count for nothing.

Variables (columns, in this order):

* ``x[k]`` integer in [0, available servers of g], one per key k = (r, g) with r accepting g's type;
* ``m[k]`` >= c0[k] - x[k], >= 0, for keys where r holds c0[k] > 0 servers of g today: the servers
  r loses there (a move each);
* ``T[r]`` total RRU of r; ``s[r]`` its shortfall (only in the *elastic* model that explains
  infeasibility);
* ``z[r]`` (general r) >= RRU of r in each fault domain: the spread term;
* ``y[r, d]`` binary (ML r): r uses datacenter d; ``x[k] <= available[g] * y`` per key;
* ``e[r, d]`` (r with a storage ratio) >= |storage RRU - ratio * compute RRU| in datacenter d.

Rows: supply ``sum_r x[r, g] <= available[g]``; ``T[r] = sum cap x``; the guarantee as linear
rows — for each fault domain f (or datacenter) where r can hold servers,
``T[r] - sum_{k in f} cap[k] x[k] (+ s[r]) >= request[r]``, and ``T[r] (+ s[r]) >= request[r]``;
the disruption budget ``sum m <= budget - forced`` (forced: servers today in a reservation that
no longer accepts their type). Objective: the evaluator's terms (see
:mod:`fleetplan.instances.reservation.evaluate`) — at an optimum every auxiliary variable equals
the max / absolute value / indicator it bounds, so the model's objective is the judge's.

:func:`disaggregate` turns counts into servers keeping every server that may stay: in a group,
r keeps min(c0, x) of the servers it holds today and fills the rest from the free pool, so it
moves exactly sum_k max(0, c0[k] - x[k]) + forced servers — the least any assignment with those
counts can move (each reservation with c0 > x must lose at least c0 - x servers there).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fleetplan.instances.reservation import DC_LEVEL, FD_LEVEL, FREE, ReservationArrays
from fleetplan.lazy import lazy_module
from fleetplan.models.reservation.rows import RowBuilder, move_rows, ratio_rows

sp = lazy_module("scipy.sparse")


@dataclass
class Groups:
    """Interchangeable servers: ``of_server`` (S,) group index or -1 (maintenance)."""

    of_server: np.ndarray
    type: np.ndarray  # (G,)
    fd: np.ndarray
    dc: np.ndarray
    available: np.ndarray  # (G,) servers


def type_fd_groups(arrays: ReservationArrays) -> Groups:
    """The aggregation: one group per (server type, fault domain) that has available servers."""
    raw = np.where(arrays.available, arrays.server_group(), -1)
    present, of_server = np.unique(raw[raw >= 0], return_inverse=True)
    full = np.full(arrays.num_servers, -1, dtype=np.int64)
    full[raw >= 0] = of_server
    fd = present % arrays.num_fds
    return Groups(of_server=full, type=present // arrays.num_fds, fd=fd, dc=arrays.fd_dc[fd],
                  available=np.bincount(of_server, minlength=present.size))


def server_groups(arrays: ReservationArrays) -> Groups:
    """No aggregation: every available server is its own group (the per-server model)."""
    rows = np.flatnonzero(arrays.available)
    full = np.full(arrays.num_servers, -1, dtype=np.int64)
    full[rows] = np.arange(rows.size)
    return Groups(of_server=full, type=arrays.server_type[rows], fd=arrays.server_fd[rows],
                  dc=arrays.server_dc[rows], available=np.ones(rows.size, dtype=np.int64))


@dataclass
class ReservationModel:
    """The MIP as sparse arrays plus what is needed to read it back."""

    lp: object  # fleetplan.models.linear.LinearProgram
    groups: Groups
    key_res: np.ndarray  # (K,)
    key_group: np.ndarray
    key_c0: np.ndarray
    forced: int
    constant: float  # objective = lp objective + constant
    elastic: bool
    rru_unit: float  # every RRU quantity of the model is a multiple of it (for CP-SAT)
    col_unit: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def num_keys(self) -> int:
        return int(self.key_res.size)


def _pairs(first: np.ndarray, second: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique (first, second) pairs and, for every element, its pair's index."""
    unique, inverse = np.unique(first * width + second, return_inverse=True)
    return unique, inverse


def rru_unit(arrays: ReservationArrays) -> float:
    """The largest power-of-ten unit (<= 1) of which every RRU coefficient of the model is an
    integer multiple, so CP-SAT can count RRU in integers; 1e-6 if none is exact."""
    values = [arrays.res_cap[arrays.accepts]]
    ratio = ~np.isnan(arrays.res_ratio)
    if ratio.any():
        values.append((arrays.res_cap[ratio] * arrays.res_ratio[ratio, None])[arrays.accepts[ratio]])
    values = np.concatenate(values) if values else np.zeros(0)
    for power in range(7):
        scaled = values * 10**power
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9 * np.maximum(1.0, np.abs(scaled))):
            return 10.0**-power
    return 1e-6


def build(arrays: ReservationArrays, groups: Groups | None = None, *, elastic: bool = False) -> ReservationModel:
    """The aggregated MIP of ``arrays`` (see the module docstring). ``elastic``: add a shortfall
    per reservation and minimise total shortfall only — the model that explains infeasibility."""
    from fleetplan.models.linear import LinearProgram

    groups = groups or type_fd_groups(arrays)
    num_res, num_groups = arrays.num_reservations, groups.type.size
    accepted = arrays.accepts[:, groups.type] & (groups.available > 0)[None, :]
    key_res, key_group = np.nonzero(accepted)
    num_keys = key_res.size
    key_type, key_fd, key_dc = groups.type[key_group], groups.fd[key_group], groups.dc[key_group]
    cap = arrays.res_cap[key_res, key_type]
    rank = arrays.res_rank[key_res, key_type]
    # Today's holdings per key; available servers today in a reservation not accepting them move.
    key_index = np.full((num_res, max(num_groups, 1)), -1, dtype=np.int64)
    key_index[key_res, key_group] = np.arange(num_keys)
    holding = (arrays.server_current >= 0) & (groups.of_server >= 0)
    res_today, group_today = arrays.server_current[holding], groups.of_server[holding]
    k_today = key_index[res_today, group_today]
    forced = int((k_today < 0).sum())
    key_c0 = np.bincount(k_today[k_today >= 0], minlength=num_keys).astype(np.int64)
    with_c0 = np.flatnonzero(key_c0 > 0)
    general = np.flatnonzero(~arrays.res_ml) if arrays.w_spread > 0 and not elastic else np.zeros(0, np.int64)
    ml_pairs = np.zeros(0, np.int64)
    ml_key = np.flatnonzero(arrays.res_ml[key_res]) if arrays.w_compactness > 0 and not elastic else np.zeros(0, np.int64)
    if ml_key.size:
        ml_pairs, ml_inverse = _pairs(key_res[ml_key], key_dc[ml_key], arrays.num_dcs)
    has_ratio = ~np.isnan(arrays.res_ratio)
    ratio_key = np.flatnonzero(has_ratio[key_res]) if arrays.w_ratio > 0 and not elastic else np.zeros(0, np.int64)
    ratio_pairs = np.zeros(0, np.int64)
    if ratio_key.size:
        ratio_pairs, ratio_inverse = _pairs(key_res[ratio_key], key_dc[ratio_key], arrays.num_dcs)

    # Column layout.
    x0, m0 = 0, num_keys
    t0 = m0 + with_c0.size
    s0 = t0 + num_res
    z0 = s0 + (num_res if elastic else 0)
    y0 = z0 + general.size
    e0 = y0 + ml_pairs.size
    num_cols = e0 + ratio_pairs.size
    z_of = np.full(num_res, -1, dtype=np.int64)
    z_of[general] = z0 + np.arange(general.size)
    lower = np.zeros(num_cols)
    upper = np.full(num_cols, np.inf)
    upper[x0:m0] = groups.available[key_group]
    upper[m0:t0] = key_c0[with_c0]
    upper[y0:e0] = 1.0
    integrality = np.zeros(num_cols, dtype=np.int8)
    integrality[x0:m0] = 1
    integrality[y0:e0] = 1
    cost = np.zeros(num_cols)
    request = arrays.res_request
    if elastic:
        cost[s0:z0] = 1.0
        constant = 0.0
    else:
        cost[x0:m0] = arrays.w_preference * rank
        cost[m0:t0] = arrays.w_moves
        cost[t0:s0] = arrays.w_buffer
        cost[z0:y0] = arrays.w_spread
        cost[y0:e0] = arrays.w_compactness
        cost[e0:] = arrays.w_ratio
        constant = arrays.w_moves * forced - arrays.w_buffer * float(request.sum())

    rows = RowBuilder()
    keys = np.arange(num_keys)
    used_groups, group_row = np.unique(key_group, return_inverse=True)
    start = rows.block(used_groups.size, -np.inf, groups.available[used_groups])
    rows.add(start + group_row, x0 + keys, 1.0)
    start = rows.block(num_res, 0.0, 0.0)  # T[r] - sum cap x = 0
    rows.add(start + np.arange(num_res), t0 + np.arange(num_res), 1.0)
    rows.add(start + key_res, x0 + keys, -cap)
    asking = np.flatnonzero(request > 0)
    start = rows.block(asking.size, request[asking], np.inf)  # T[r] (+ s[r]) >= request
    rows.add(start + np.arange(asking.size), t0 + asking, 1.0)
    if elastic:
        rows.add(start + np.arange(asking.size), s0 + asking, 1.0)
    for level, domain in ((FD_LEVEL, key_fd), (DC_LEVEL, key_dc)):
        chosen = np.flatnonzero((arrays.res_level[key_res] == level) & (request[key_res] > 0))
        if not chosen.size:
            continue
        pairs, inverse = _pairs(key_res[chosen], domain[chosen], arrays.num_fds + arrays.num_dcs)
        pair_res = pairs // (arrays.num_fds + arrays.num_dcs)
        start = rows.block(pairs.size, request[pair_res], np.inf)
        rows.add(start + np.arange(pairs.size), t0 + pair_res, 1.0)
        rows.add(start + inverse, x0 + chosen, -cap[chosen])
        if elastic:
            rows.add(start + np.arange(pairs.size), s0 + pair_res, 1.0)
    move_rows(rows, with_c0, key_c0[with_c0], arrays.budget - forced, x0, m0)
    if general.size:  # z[r] - sum_{k in (r, f)} cap x >= 0
        chosen = np.flatnonzero(z_of[key_res] >= 0)
        pairs, inverse = _pairs(key_res[chosen], key_fd[chosen], arrays.num_fds)
        start = rows.block(pairs.size, 0.0, np.inf)
        rows.add(start + np.arange(pairs.size), z_of[pairs // arrays.num_fds], 1.0)
        rows.add(start + inverse, x0 + chosen, -cap[chosen])
    if ml_pairs.size:  # x[k] - available[g] y[r, d] <= 0 per key: tighter than one big-M row per pair
        start = rows.block(ml_key.size, -np.inf, 0.0)
        rows.add(start + np.arange(ml_key.size), x0 + ml_key, 1.0)
        rows.add(start + np.arange(ml_key.size), y0 + ml_inverse, -groups.available[key_group[ml_key]])
    if ratio_pairs.size:
        ratio_rows(rows, arrays, key_res, key_type, cap, ratio_key, ratio_inverse, ratio_pairs.size, x0, e0)
    matrix = sp.csr_matrix((np.concatenate(rows.vals), (np.concatenate(rows.rows), np.concatenate(rows.cols))),
                           shape=(rows.count, num_cols))
    lp = LinearProgram(cost=cost, matrix=matrix, row_lower=np.concatenate(rows.lower),
                       row_upper=np.concatenate(rows.upper), col_lower=lower, col_upper=upper,
                       integrality=integrality,
                       names={"x": slice(x0, m0), "m": slice(m0, t0), "T": slice(t0, s0), "s": slice(s0, z0),
                              "z": slice(z0, y0), "y": slice(y0, e0), "e": slice(e0, num_cols)})
    unit = rru_unit(arrays)
    col_unit = np.ones(num_cols)
    col_unit[t0:y0] = unit  # T, s, z count RRU
    col_unit[e0:] = unit
    return ReservationModel(lp=lp, groups=groups, key_res=key_res, key_group=key_group, key_c0=key_c0,
                            forced=forced, constant=constant, elastic=elastic, rru_unit=unit,
                            col_unit=col_unit,
                            sizes={"keys": num_keys, "columns": num_cols, "rows": rows.count,
                                   "nonzeros": int(matrix.nnz), "groups": num_groups})


def counts_from_assignment(model: ReservationModel, arrays: ReservationArrays, assignment: np.ndarray) -> np.ndarray | None:
    """The model's x for a server assignment (a warm start), or None if it uses a key the model
    lacks (a server of a type its reservation does not accept)."""
    held = (assignment >= 0) & (model.groups.of_server >= 0)
    key_index = np.full((arrays.num_reservations, max(model.groups.type.size, 1)), -1, dtype=np.int64)
    key_index[model.key_res, model.key_group] = np.arange(model.num_keys)
    keys = key_index[assignment[held], model.groups.of_server[held]]
    if (keys < 0).any():
        return None
    return np.bincount(keys, minlength=model.num_keys).astype(np.int64)


def full_solution(model: ReservationModel, x: np.ndarray) -> np.ndarray:
    """Every column's value implied by counts ``x``, each auxiliary at the least value its rows
    allow (T from its equality row, then s, z, y, e): a MIP start or a CP-SAT hint."""
    lp = model.lp
    values = np.zeros(lp.num_cols)
    values[lp.names["x"]] = x
    values[lp.names["m"]] = np.maximum(0, model.key_c0[model.key_c0 > 0] - x[model.key_c0 > 0])
    csc = lp.matrix.tocsc()
    for name in ("T", "s", "z", "y", "e"):
        block = lp.names[name]
        if block.stop == block.start:
            continue
        activity = lp.matrix @ values
        sub = csc[:, block].tocoo()
        row, col, a = sub.row, sub.col, sub.data
        lower, upper = lp.row_lower[row], lp.row_upper[row]
        equality = lower == upper
        with np.errstate(invalid="ignore"):
            need = np.where(a > 0, (lower - activity[row]) / a, (upper - activity[row]) / a)
        need = np.where(np.isfinite(need), need, 0.0)
        best = np.zeros(block.stop - block.start)
        if name == "T":
            best[col[equality]] = need[equality]
        else:
            np.maximum.at(best, col, need)
        if name == "y":
            best = np.ceil(best - 1e-9)
        values[block] = np.maximum(best, 0.0)
    return values


def satisfies(model: ReservationModel, values: np.ndarray, tolerance: float = 1e-6) -> bool:
    """Whether ``values`` keep every row and column bound of the model."""
    lp = model.lp
    activity = lp.matrix @ values
    slack = tolerance * np.maximum(1.0, np.abs(activity))
    return bool(np.all(activity >= lp.row_lower - slack) and np.all(activity <= lp.row_upper + slack)
                and np.all(values >= lp.col_lower - tolerance) and np.all(values <= lp.col_upper + tolerance))


def objective_of(model: ReservationModel, values: np.ndarray) -> float:
    return float(model.lp.cost @ values + model.constant)


def disaggregate(model: ReservationModel, arrays: ReservationArrays, x: np.ndarray) -> np.ndarray:
    """Servers for counts ``x`` keeping every server that may stay (module docstring): per key,
    the reservation keeps min(c0, x) of its servers of the group; free servers of the group (then
    servers released by others) fill the rest. Servers in maintenance stay as today."""
    x = np.asarray(np.round(x), dtype=np.int64)
    groups = model.groups
    assignment = np.where(groups.of_server >= 0, FREE, arrays.server_current)
    key_index = np.full((arrays.num_reservations, max(groups.type.size, 1)), -1, dtype=np.int64)
    key_index[model.key_res, model.key_group] = np.arange(model.num_keys)
    rows = np.flatnonzero((groups.of_server >= 0) & (arrays.server_current >= 0))
    keys = key_index[arrays.server_current[rows], groups.of_server[rows]]
    rows, keys = rows[keys >= 0], keys[keys >= 0]
    order = np.argsort(keys, kind="stable")
    rows, keys = rows[order], keys[order]
    first = np.searchsorted(keys, keys, side="left")
    position = np.arange(keys.size) - first  # rank of the server among its key's servers
    keep = position < x[keys]
    assignment[rows[keep]] = arrays.server_current[rows[keep]]
    kept = np.bincount(keys[keep], minlength=model.num_keys)
    deficit = x - kept
    # The pool of each group: available servers not kept, today's free ones first.
    pool = np.flatnonzero((groups.of_server >= 0) & (assignment == FREE))
    pool = pool[np.lexsort((pool, arrays.server_current[pool] >= 0, groups.of_server[pool]))]
    pool_group = groups.of_server[pool]
    pool_start = np.searchsorted(pool_group, np.arange(groups.type.size))
    slots_key = np.repeat(np.arange(model.num_keys), np.maximum(deficit, 0))
    slots_group = model.key_group[slots_key]
    order = np.argsort(slots_group, kind="stable")
    slots_key, slots_group = slots_key[order], slots_group[order]
    slot_position = np.arange(slots_key.size) - np.searchsorted(slots_group, slots_group, side="left")
    take = pool[pool_start[slots_group] + slot_position]
    assignment[take] = model.key_res[slots_key]
    return assignment


def minimal_moves(model: ReservationModel, x: np.ndarray) -> int:
    """The least number of servers any assignment with counts ``x`` moves: forced moves plus
    sum_k max(0, c0 - x) (a reservation holding more of a group today than x must lose the rest)."""
    return model.forced + int(np.maximum(0, model.key_c0 - np.round(x).astype(np.int64)).sum())
