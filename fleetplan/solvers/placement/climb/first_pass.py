"""The first pass of Tetris's hill climb (MAST §3.4, "goes over each table and finds the best
region for it"), vectorised over many tables at once (10^6 tables in under 60 s).

:meth:`TetrisState._candidates` computes one table's gains for every region with numpy over that
table's readers; called once per table, its fixed cost per call (a few dozen small numpy
operations) dominated the first pass. Here a chunk of tables is evaluated in one go over the CSR
of (table, reader) pairs: the jobs' new regions for every candidate region as (pairs, R) arrays,
the traffic change summed per (table, region) with ``bincount``, and the GPU terms from per-slice
running sums (Σd, Σd², Σd·σ, Σd·sigmoid) so that a move's effect on a slice costs only the
regions it touches, not a recomputation of the slice's column.

The formulas are those of ``_candidates`` and the judge (Expressions 1, 6-9 of §3.3, under the
instance's ``split_ml_demand`` and ``overload_form``: each pair's demand regions ``dold``/``dnew``
beside its regions, and Expression 8's running sums over the state's ``odemand``); sums are
taken in another order, so a gain may differ from ``_candidates``'s in the last bits. That is
why these moves only order the first queue: the engine recomputes every move exactly
(``best_move``) before applying it, so applied gains are the judge's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from fleetplan.instances.placement import ML, NO_REGION
from fleetplan.instances.placement.evaluate import TOLERANCE, sigmoid
from fleetplan.solvers import kernels
from fleetplan.solvers.hill_climb import Batch, Candidate
from fleetplan.solvers.placement.climb.slices import slice_sums as _slice_sums

# A fleetplan.solvers.placement.climb.state.TetrisState. Named, not imported: state.py imports this
# module (through estimates.py), and the imports point one way.
TetrisState = Any

TERMS = ("traffic", "gpu_balance", "gpu_overload", "storage_balance")
CHUNK = 8192
DISTINCT_JOBS_FROM = 2048  # pairs in a batch above which each distinct job is counted once


def first_pass(state: TetrisState, chunk: int = CHUNK) -> Iterator[Candidate | None]:
    """Each table's best move (None when it has none with a positive gain), in table order,
    computed ``chunk`` tables at a time from the state at the time the chunk is reached (so
    moves applied between the engine's anytime batches are seen by later chunks). Compound
    items, after the tables, are evaluated one by one with ``best_move``."""
    for tables, target, best, terms in _chunk_best(state, chunk):
        yield from _candidates(state, tables, target, best, terms)
    for item in range(state.arrays.num_tables, state.num_items()):
        yield state.best_move(item)


def first_pass_batches(state: TetrisState, chunk: int = CHUNK) -> Iterator[Batch | Candidate | None]:
    """:func:`first_pass` as the engine takes it: one :class:`Batch` per chunk of tables (the
    tables with a positive best gain, their targets and gains, as lists) instead of a
    :class:`Candidate` per table, which cost more than the gains at 10^6 tables."""
    for tables, target, best, _ in _chunk_best(state, chunk):
        good = np.isfinite(best) & (best > 0)
        yield Batch(tables[good].tolist(), target[good].tolist(), best[good].tolist(), int(tables.size))
    for item in range(state.arrays.num_tables, state.num_items()):
        yield state.best_move(item)


def _chunk_best(state: TetrisState, chunk: int):
    """Per chunk of tables, from the state when the chunk is reached: the tables, each one's
    best target region and gain, and the gains' terms."""
    num_tables = state.arrays.num_tables
    for start in range(0, num_tables, chunk):
        tables = np.arange(start, min(start + chunk, num_tables))
        gains, terms = table_gains(state, tables)
        target = np.argmax(gains, axis=1)
        yield tables, target, gains[np.arange(tables.size), target], terms


def _candidates(state: TetrisState, tables: np.ndarray, target: np.ndarray, best: np.ndarray,
                terms: np.ndarray | None) -> Iterator[Candidate | None]:
    """Candidates for the tables whose best gain is positive; None for the others (the engine
    only counts them). ``terms`` None: the candidates carry no terms (estimates)."""
    a = state.arrays
    good = np.isfinite(best) & (best > 0)
    rows = np.flatnonzero(good)
    sizes, homes, original = a.table_size[tables], state.home[tables], state.original[tables]
    chosen = terms[:, rows, target[rows]].T.tolist() if terms is not None else [None] * rows.size  # (n, 4)
    at_origin = (homes == original)[rows].tolist()
    back = (target == original)[rows].tolist()
    made: dict[int, Candidate] = {}
    for row, t, r, gain, size, home, change, origin, returning in zip(
            rows.tolist(), tables[rows].tolist(), target[rows].tolist(), best[rows].tolist(), sizes[rows].tolist(),
            homes[rows].tolist(), chosen, at_origin, back, strict=True):
        cost = size if origin else (-size if returning else 0.0)
        made[row] = Candidate(t, r, gain, {} if change is None else dict(zip(TERMS, change, strict=True)), cost,
                              source=home)
    for row in range(tables.size):
        yield made.get(row)


def table_gains(state: TetrisState, tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gains of moving each of ``tables`` to each region, (n, R), -inf where infeasible or the
    table's home, and the change of each term, (4, n, R): ``_candidates`` for many tables.
    Compiled (:mod:`fleetplan.solvers.placement.climb.gain_kernels`, the same bits) for climbs of
    ``kernels.JIT_MIN_SIZE`` tables or more unless ``FLEETPLAN_KERNELS=0``; :func:`table_gains_numpy` is the reference."""
    if kernels.use_jit(state.num_tables):
        from fleetplan.solvers.placement.climb import gain_kernels

        return gain_kernels.table_gains(state, tables)
    return table_gains_numpy(state, tables)


def table_gains_numpy(state: TetrisState, tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`table_gains` in numpy over the CSR of (table, reader) pairs. (The climb's batch
    estimates compute the same per table, from values kept across moves:
    :func:`fleetplan.solvers.placement.climb.estimates.cached_gains`.)"""
    a = state.arrays
    R = a.num_regions
    n = tables.size
    delta = np.zeros((4, n, R))
    delta[3], feasible = storage_terms(state, tables)
    lo, hi = state.reader_ptr[tables], state.reader_ptr[tables + 1]
    lengths = hi - lo
    if lengths.sum():
        pairs = _pairs(state, tables, lo, lengths)
        delta[0] = _traffic(state, pairs, n).reshape(n, R)
        changed = pairs.new != pairs.old[:, None]
        is_ml = a.job_kind[pairs.job] == ML
        ml = np.flatnonzero(is_ml & changed.any(axis=1))
        moved, gpu_rows = gpu_rows_of(state, pairs, is_ml, changed, ml)
        if gpu_rows.size:
            balance, overload = _gpu(state, pairs, gpu_rows, moved, n)
            delta[1], delta[2] = balance.reshape(n, R), overload.reshape(n, R)
        if ml.size:
            feasible &= _hp_ok(state, pairs, ml, n).reshape(n, R)
        feasible &= _cpu_ok(state, pairs, changed, n).reshape(n, R)
    gains = np.where(feasible, -(delta[0] + delta[1] + delta[2] + delta[3]), -np.inf)
    return gains, delta


def storage_terms(state: TetrisState, tables: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Expression 9's change (weighted) of moving each of ``tables`` to each region (n, R), and
    where the move is allowed by the storage capacity (not to the table's own home)."""
    a = state.arrays
    cand = np.arange(a.num_regions)
    old = state.home[tables]
    size = a.table_size[tables]
    # Storage balance (Expression 9): only the old and the new home change.
    hb = state.home_bytes
    before, limit = storage_before(state)
    grown = hb + size[:, None]
    after_new = np.square(grown / state.total_bytes - state.capacity_share)
    after_old = np.square((hb[old] - size) / state.total_bytes - state.capacity_share[old])
    own = cand == old[:, None]
    storage = np.where(own, 0.0, after_new - before + (after_old - before[old])[:, None])
    return a.w_storage * storage, ~own & (grown <= limit)


def storage_before(state: TetrisState) -> tuple[np.ndarray, np.ndarray]:
    """Each region's Expression 9 term now (R,) and its byte limit (R,), kept until the state
    changes (its ``version``)."""
    cached = getattr(state, "_storage_before", None)
    if cached is None or cached[0] != state.version:
        cached = (state.version, np.square(state.home_bytes / state.total_bytes - state.capacity_share),
                  state.arrays.storage_capacity * (1 + TOLERANCE) + 1e-6)
        state._storage_before = cached
    return cached[1], cached[2]


def gpu_rows_of(state: TetrisState, p: _Pairs, is_ml: np.ndarray, changed: np.ndarray, ml: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Which (pair, candidate) moves a job's GPU demand, and the pairs with such a move: the ML
    pairs whose region changes, or under ``split_ml_demand="largest_region"`` whose demand
    region does."""
    if state.split_counted:  # the GPU terms follow the demand regions
        moved = p.dnew != p.dold[:, None]
        return moved, np.flatnonzero(is_ml & moved.any(axis=1))
    return changed, ml


class _Pairs:
    """The (table, reader) pairs of a chunk: ``row`` the table's row in the chunk, ``job``,
    ``old`` the job's region now, ``new`` its region for each candidate (P, R), ``bytes`` the
    bytes of its other tables in each region (P, R), ``others`` how many other tables it has;
    ``dold``/``dnew`` the same as ``old``/``new`` for the region its demand counts in (the same
    arrays unless split ML jobs' demand is counted)."""

    row: np.ndarray
    job: np.ndarray
    size: np.ndarray
    home: np.ndarray
    old: np.ndarray
    new: np.ndarray
    bytes: np.ndarray
    dold: np.ndarray
    dnew: np.ndarray


def largest_with(other_bytes: np.ndarray, size: float | np.ndarray) -> np.ndarray:
    """For each row of ``other_bytes`` (k, R: a job's other tables' bytes by region) and each
    candidate region c, the region holding most bytes once a table of ``size`` bytes (a number,
    or one per row) is added in c, ties to the lowest index (the judge's argmax,
    ``evaluate.largest_regions``): (k, R). Only c grows, so the winner is c or the row's leader."""
    cand = np.arange(other_bytes.shape[1])
    leader = np.argmax(other_bytes, axis=1)[:, None]
    lead = np.take_along_axis(other_bytes, leader, 1)
    mine = other_bytes + np.reshape(np.asarray(size, dtype=float), (-1, 1))
    wins = (cand == leader) | (mine > lead) | ((mine == lead) & (cand < leader))
    return np.where(wins, cand, leader)


def _demand_regions(state: TetrisState, p: _Pairs) -> None:
    """``p.dold``/``p.dnew``: aliases of ``old``/``new``, or with split ML jobs counted in their
    largest region."""
    if not state.split_counted:
        p.dold, p.dnew = p.old, p.new
        return
    p.dold = state.dregion[p.job]
    split = (p.new < 0) & (state.arrays.job_kind[p.job] == ML)[:, None]
    p.dnew = np.where(split, largest_with(p.bytes, p.size), p.new) if split.any() else p.new


def _pairs(state: TetrisState, tables: np.ndarray, lo: np.ndarray, lengths: np.ndarray) -> _Pairs:
    """R(job) for each pair and candidate region (``_new_regions`` for a chunk of tables)."""
    a = state.arrays
    p = _Pairs()
    total = int(lengths.sum())
    p.row = np.repeat(np.arange(tables.size), lengths)
    index = np.repeat(lo - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
    p.job = state.readers[index]
    p.size = a.table_size[tables][p.row]
    p.home = state.home[tables][p.row]
    pair_regions(state, p)
    return p


def pair_regions(state: TetrisState, p: _Pairs) -> None:
    """The rest of :func:`_pairs` for pairs given by ``p.job``, ``p.size`` and ``p.home`` (the
    table's size and home): ``old``, ``bytes``, ``new``, ``dold`` and ``dnew``. A pair's values
    depend only on its job's tables' homes and its table, not on the other pairs."""
    a = state.arrays
    R = a.num_regions
    total = p.job.size
    p.old = state.region[p.job]
    # Each distinct job's tables by region (count and bytes), then this pair's table taken out.
    # A few pairs (the batch estimates): per pair, as sorting out the distinct jobs costs more
    # than counting a job twice; the sums are the same either way.
    if total > DISTINCT_JOBS_FROM:
        jobs, which = np.unique(p.job, return_inverse=True)
    else:
        jobs, which = p.job, None
    starts, ends = a.job_ptr[jobs], a.job_ptr[jobs + 1]
    jl = ends - starts
    owner = np.repeat(np.arange(jobs.size), jl)
    at = np.repeat(starts - np.cumsum(jl) + jl, jl) + np.arange(int(jl.sum()))
    key = owner * R + state.home[a.job_tables[at]]
    count = np.bincount(key, minlength=jobs.size * R).reshape(jobs.size, R)
    size = np.bincount(key, weights=state.pair_size[at], minlength=jobs.size * R).reshape(jobs.size, R)
    if which is not None:
        count, size = count[which], size[which]
    rows = np.arange(total)
    count[rows, p.home] -= 1
    size[rows, p.home] -= p.size
    size[rows, p.home] = np.where(count[rows, p.home] == 0, 0.0, size[rows, p.home])
    p.bytes = size
    cand = np.arange(R)
    others = (jl if which is None else jl[which]) - 1  # the job's other tables (count's row sums)
    alone = others == 0
    top = count.max(axis=1)
    # Each kind's rule on its own rows only (half the (pairs, regions) work of both on all).
    is_ml = a.job_kind[p.job] == ML
    p.new = np.empty((total, R), dtype=np.int64)
    rows = np.flatnonzero(is_ml)
    if rows.size:
        # ML: the common region of the other tables, if any; a job reading only this table
        # follows it.
        common = np.where(top[rows] == others[rows], count[rows].argmax(axis=1), NO_REGION)
        p.new[rows] = np.where(alone[rows, None] | (common[:, None] == cand), cand, NO_REGION)
    rows = np.flatnonzero(~is_ml)
    if rows.size:
        # Spark/Presto: the leader among the other tables (most tables, then bytes, then the
        # lower index) against the candidate region with this table added. The leader has the
        # top count, so this table wins where the count is the top, or one below with more
        # bytes (or as many, at a lower index).
        c, b, t = count[rows], size[rows], top[rows][:, None]
        at_top = c == t
        best_bytes = np.where(at_top, b, -np.inf)
        leader = np.argmax(at_top & (best_bytes == best_bytes.max(axis=1, keepdims=True)), axis=1)
        lead_bytes = b[np.arange(rows.size), leader][:, None]
        leader = leader[:, None]
        mine_bytes = b + p.size[rows][:, None]
        wins = at_top | ((c == t - 1) & ((mine_bytes > lead_bytes) | ((mine_bytes == lead_bytes) & (cand <= leader))))
        p.new[rows] = np.where(wins | alone[rows, None], cand, leader)
    _demand_regions(state, p)


def _traffic(state: TetrisState, p: _Pairs, n: int) -> np.ndarray:
    """Expression 1's change per (table, candidate), flattened (n*R)."""
    return traffic_sum(state, p.row, pair_traffic(state, p), n)


def traffic_sum(state: TetrisState, row: np.ndarray, change: np.ndarray, n: int) -> np.ndarray:
    """Expression 1's change per (table, candidate), flattened (n*R), from each pair's
    (:func:`pair_traffic`; ``row``: the pair's table), summed in the pairs' order."""
    R = state.arrays.num_regions
    key = (row[:, None] * R + np.arange(R)).ravel()
    return state.arrays.w_traffic * np.bincount(key, weights=change.ravel(), minlength=n * R)


def pair_traffic(state: TetrisState, p: _Pairs) -> np.ndarray:
    """Expression 1's change (unweighted) of each pair's job for each candidate (P, R)."""
    a = state.arrays
    R = a.num_regions
    cand = np.arange(R)
    rows = np.arange(p.job.size)
    placed = p.new >= 0
    in_region = np.where(placed, p.bytes[rows[:, None], np.maximum(p.new, 0)], 0.0)
    in_region = in_region + np.where(p.new == cand, p.size[:, None], 0.0)
    weight = a.job_weight[p.job]
    job_bytes = state.job_bytes[p.job]
    traffic_new = weight[:, None] * (job_bytes[:, None] - np.where(placed, in_region, 0.0))
    old_in = np.where(p.old >= 0, p.bytes[rows, np.maximum(p.old, 0)] + np.where(p.old == p.home, p.size, 0.0), 0.0)
    traffic_old = weight * (job_bytes - old_in)
    return traffic_new - traffic_old[:, None]


def _moves(old_region: np.ndarray, new_region: np.ndarray, rows: np.ndarray, changed: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The moves of the pairs ``rows`` (``old_region`` (P,) and ``new_region`` (P, R): the
    pairs' regions or demand regions): for each (pair, candidate) whose job changes region, the
    job leaves its old region (sign -1) and enters its new one (+1), where those are regions.
    Returns the pair index, candidate, region and sign of each entry."""
    pr, pc = np.nonzero(changed[rows])
    pr = rows[pr]
    old, new = old_region[pr], new_region[pr, pc]
    leave, enter = old >= 0, new >= 0
    pair = np.concatenate([pr[leave], pr[enter]])
    cand = np.concatenate([pc[leave], pc[enter]])
    region = np.concatenate([old[leave], new[enter]])
    sign = np.ones(region.size)
    sign[:int(np.count_nonzero(leave))] = -1.0  # the leaving entries come first
    return pair, cand, region, sign


def _group(keys: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Distinct keys (sorted) and each value summed per key."""
    unique, inverse = np.unique(keys, return_inverse=True)
    return unique, [np.bincount(inverse, weights=v, minlength=unique.size) for v in values]


def _gpu(state: TetrisState, p: _Pairs, ml: np.ndarray, changed: np.ndarray, n: int
         ) -> tuple[np.ndarray, np.ndarray]:
    """Expressions 7 and 8's change per (table, candidate), flattened (n*R): for each touched
    (table, candidate, slice) the slice's cost after the move from running sums over its
    regions, corrected at the regions the move changes. ``changed``: the pairs' demand regions
    change. Under the combined overload, Expression 8 is computed apart on ``state.odemand``."""
    pair, cand, region, sign = _moves(p.dold, p.dnew, ml, changed)
    job = p.job[pair]
    rc = p.row[pair] * state.arrays.num_regions + cand
    if not state.combined:
        return _slices(state, rc, state.cell[job], region, sign, job, n, state.demand, state.demand_count,
                       state.slice_weight)
    balance, _ = _slices(state, rc, state.cell[job], region, sign, job, n, state.demand, state.demand_count,
                         state.slice_weight)
    _, overload = _slices(state, rc, state.ocell[job], region, sign, job, n, state.odemand, state.odemand_count,
                          state.overload_weight)
    return balance, overload


def _slices(state: TetrisState, rc: np.ndarray, cell: np.ndarray, region: np.ndarray, sign: np.ndarray,
            job: np.ndarray, n: int, demand: np.ndarray, demand_count: np.ndarray, slice_weight: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_gpu` over one demand matrix (``demand``, its job counts, its columns ``cell`` of
    the moving entries and its slice weights): the changes of Expressions 7 and 8."""
    a = state.arrays
    R = a.num_regions
    S = demand.shape[1]
    group = rc * S + cell
    keys, (hours, count) = _group(group * R + region, sign * a.job_gpu_hours[job],
                                  sign * state.counted[job].astype(float))
    g, r = keys // R, keys % R
    s = g % S
    d, c = demand[r, s], demand_count[r, s]
    d_new = np.where(c + np.rint(count).astype(np.int64) == 0, 0.0, d + hours)
    # keys are sorted, so are their groups: the distinct ones without sorting again.
    first = np.empty(g.size, dtype=bool)
    first[:1] = True
    np.not_equal(g[1:], g[:-1], out=first[1:])
    groups, inverse = g[first], np.cumsum(first) - 1
    gs = groups % S
    supply, share = state.supply, state.supply_share
    scale = a.sigmoid_scale
    total, sig, sum_sq, sum_cross, sum_share_sq, sum_sig = _slice_sums(state, demand)
    new_total = total[gs] + np.bincount(inverse, weights=d_new - d, minlength=groups.size)
    active = new_total > 0
    safe = np.where(active, new_total, 1.0)
    t_e = safe[inverse]
    sh = share[r, s]
    # Σ_r (d_r/T - σ_r)^2 = Σd²/T² - 2Σdσ/T + Σσ², then the touched regions swapped.
    correction = np.square(d_new / t_e - sh) - np.square(d / t_e - sh)
    balance = (sum_sq[gs] / np.square(safe) - 2.0 * sum_cross[gs] / safe + sum_share_sq[gs]
               + np.bincount(inverse, weights=correction, minlength=groups.size))
    balance = np.where(active, np.maximum(balance, 0.0), 0.0)
    sig_new = sigmoid(np.maximum(0.0, d_new - supply[r, s]) / scale)
    over = sum_sig[gs] + np.bincount(inverse, weights=d_new * sig_new - d * sig[r, s], minlength=groups.size)
    overload = np.where(active, over / safe, 0.0)
    rc = groups // S
    if slice_weight is state.slice_weight:
        weight = state.slice_weight[gs]
        out_balance = np.bincount(rc, weights=weight * balance - state.slice_balance[gs], minlength=n * R)
        out_overload = np.bincount(rc, weights=weight * overload - state.slice_overload[gs], minlength=n * R)
    else:  # Expression 8 on the combined columns (the balance of this pass is not used)
        out_balance = np.zeros(n * R)
        out_overload = np.bincount(rc, weights=slice_weight[gs] * overload - state.slice_overload[gs],
                                   minlength=n * R)
    return a.w_gpu * out_balance, a.w_gpu * out_overload


def _hp_ok(state: TetrisState, p: _Pairs, ml: np.ndarray, n: int) -> np.ndarray:
    """Expression 6 (high-priority GPU-hours trained at home stay above the floor, or do not
    fall) per (table, candidate), flattened (n*R)."""
    a = state.arrays
    R = a.num_regions
    rows = ml[state.hp[p.job[ml]]]
    if rows.size == 0:
        return np.ones(n * R, dtype=bool)
    jobs = p.job[rows]
    hours = a.job_gpu_hours[jobs]
    gpu = a.job_gpu_type[jobs]
    was = state._at_home(jobs, p.old[rows])
    # A table's move loses at most the hours of its readers now at home: when even that keeps
    # the floor (with a margin far above rounding), every candidate passes the check below.
    loss = np.bincount(p.row[rows], weights=hours * was, minlength=n).max()
    if state.hp_at_home - loss >= state.hp_floor + 1e-6 * (1.0 + state.hp_total):
        return np.ones(n * R, dtype=bool)
    new = p.new[rows]
    now = (new >= 0) & (a.gpu_supply[np.maximum(new, 0), gpu[:, None]] > 0)
    change = hours[:, None] * (now.astype(float) - was[:, None])
    key = (p.row[rows][:, None] * R + np.arange(R)).ravel()
    at_home = state.hp_at_home + np.bincount(key, weights=change.ravel(), minlength=n * R)
    return (at_home >= state.hp_floor) | (at_home >= state.hp_at_home)


def _cpu_ok(state: TetrisState, p: _Pairs, changed: np.ndarray, n: int) -> np.ndarray:
    """CPU capacity per application and region (a move may not push a region over, unless it
    does not add to it), per (table, candidate), flattened (n*R)."""
    a = state.arrays
    R = a.num_regions
    ok = np.ones(n * R, dtype=bool)
    rows = np.flatnonzero(changed.any(axis=1) & (a.job_cpu_hours[p.job] > 0))
    if rows.size == 0:
        return ok
    # No move adds more to an (application, region) than all of its table's movers' hours: when
    # that fits every region's room (with a margin far above rounding), every move is allowed,
    # as the check below would find. Regions are rarely near their CPU capacity.
    napps = state.cpu.shape[0]
    room = state.cpu_room()
    movers = p.job[rows]
    added = np.bincount(p.row[rows] * napps + a.job_app[movers], weights=a.job_cpu_hours[movers],
                        minlength=n * napps).reshape(n, napps).max(axis=0)
    if (added <= room).all():
        return ok
    pair, cand, region, sign = _moves(p.old, p.new, rows, changed)
    job = p.job[pair]
    apps = a.job_app[job]
    keys, (hours,) = _group(((p.row[pair] * R + cand) * napps + apps) * R + region, sign * a.job_cpu_hours[job])
    r, app, rc = keys % R, (keys // R) % napps, keys // R // napps
    current = state.cpu[app, r]
    usage = current + hours
    bad = (usage > a.cpu_capacity[app, r] * (1 + TOLERANCE) + 1e-9) & (usage > current + 1e-9)
    ok[rc[bad]] = False
    return ok
