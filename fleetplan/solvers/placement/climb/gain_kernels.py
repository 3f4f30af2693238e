"""Compiled per-table gains of Tetris's hill climb (MAST §3.4; 10^6 tables x 20
regions in under 60 s): :func:`first_pass.table_gains` as a numba kernel.

The climb's batch estimates evaluate ~33 tables per applied move (about 13,000 calls at 10^6
tables), and each call of the numpy code is a few hundred numpy calls on arrays of a few hundred
entries, whose fixed costs set the time. Here each table's gains are one pass over its readers
and their tables (``fleetplan.solvers.kernels``: compiled with ``njit(cache=True)``, imported
only when a solve uses it, ``FLEETPLAN_KERNELS=0`` runs the numpy code).

The kernel computes what :func:`first_pass.table_gains_numpy` computes, in the same order of
operations, so the gains and terms are the same bits (``tests/test_placement_gain_kernels.py``
checks it on random states, under every reading of Figure 4):

* every sum the numpy code takes with ``bincount`` (per key, in the order of its entries,
  from 0.0) is taken here in that order: a pair's bytes by region in its job's table order,
  the traffic over the table's readers in order, a GPU cell's hours over the moves leaving
  a region and then those entering it, a slice's corrections over its regions in increasing
  order, a candidate's GPU terms over its slices in increasing order;
* the sigmoid of the regions a move overloads is numpy's (``evaluate.sigmoid`` between two
  kernels): numpy's ``tanh`` differs from the C library's in the last bits for about a third
  of its arguments;
* Expression 6 and the CPU capacities are checked per table, with the shortcuts of
  :func:`first_pass._hp_ok` and ``_cpu_ok`` taken per table instead of per batch (when a
  table's bound fits, the full check passes for every candidate, so the answer is the same).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from fleetplan.instances.placement import ML
from fleetplan.instances.placement.evaluate import TOLERANCE, sigmoid
from fleetplan.solvers.placement.climb.slices import slice_sums as _slice_sums

TetrisState = Any  # fleetplan.solvers.placement.climb.state.TetrisState (imports point one way)

_jit = numba.njit(cache=True)


def table_gains(state: TetrisState, tables: np.ndarray, keep: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """:func:`first_pass.table_gains_numpy` compiled: the gains (n, R), -inf where infeasible or
    the table's home, and each term's change (4, n, R), the same bits. ``keep``: each table's
    pairs and traffic are kept (up to :data:`SLOTS` tables) until a move changes one of its
    readers' tables (``TetrisState._forget`` drops them), as the batch estimates ask."""
    a = state.arrays
    combined = state.combined
    sums, osums = _sums(state)
    kept = _kept(state) if keep else _nothing_kept(a.num_regions)
    delta, feasible, keys, okeys = _pairs_and_terms(
        np.ascontiguousarray(tables, dtype=np.int64), state.home, state.region, state.dregion, state.split_counted,
        state.reader_ptr, state.readers, a.job_ptr, a.job_tables, state.pair_size, a.table_size, a.job_kind,
        a.job_weight, state.job_bytes, a.w_traffic, state.home_bytes, state.total_bytes, state.capacity_share,
        a.storage_capacity, a.w_storage, state.counted, state.cell, state.ocell, combined, a.job_gpu_hours,
        state.demand, state.demand_count, state.odemand, state.odemand_count, state.supply, a.sigmoid_scale,
        state.hp, state.hp_at_home, state.hp_floor, state.hp_floor + 1e-6 * (1.0 + state.hp_total), a.gpu_supply,
        a.job_gpu_type, a.job_cpu_hours, a.job_app, state.cpu, a.cpu_capacity, 1 + TOLERANCE, keep, *kept)
    # numpy's sigmoid, as first_pass._slices takes it, of the cells the move overloads (the
    # others' is sigmoid(0) = 0.5: _slices reads these in the cells' order).
    x = keys[1][:, 2]
    sig = sigmoid(x[x > 0.0]) if x.size else _NONE
    x = okeys[1][:, 2]
    osig = sigmoid(x[x > 0.0]) if combined and x.size else _NONE
    gains = _finish(delta, feasible, keys[0], keys[1], sig, okeys[0], okeys[1], osig, combined, *sums, *osums,
                    state.supply_share, state.slice_weight, state.overload_weight, state.slice_balance,
                    state.slice_overload, a.w_gpu)
    return gains, delta


_NONE = np.zeros(0)


def best_moves(state: TetrisState, tables: np.ndarray, gains: np.ndarray) -> tuple[list, ...]:
    """``estimates._best_moves`` compiled: the tables with a positive best gain, and each one's
    target (the first best region, as ``np.argmax``), gain, quota cost and home, as lists."""
    rows, target, best, cost, homes = _best(tables, gains, state.arrays.table_size, state.home, state.original)
    return rows.tolist(), target.tolist(), best.tolist(), cost.tolist(), homes.tolist()


@_jit
def _best(tables, gains, table_size, home, original):
    n, R = gains.shape
    rows = np.empty(n, dtype=np.int64)
    target = np.empty(n, dtype=np.int64)
    best = np.empty(n)
    cost = np.empty(n)
    homes = np.empty(n, dtype=np.int64)
    good = 0
    for k in range(n):
        top = 0
        for c in range(1, R):
            if gains[k, c] > gains[k, top]:
                top = c
        gain = gains[k, top]
        if np.isfinite(gain) and gain > 0:
            t = tables[k]
            size = table_size[t]
            rows[good], target[good], best[good], homes[good] = t, top, gain, home[t]
            cost[good] = size if home[t] == original[t] else (-size if top == original[t] else 0.0)
            good += 1
    return rows[:good], target[:good], best[:good], cost[:good], homes[:good]
SLOTS = 20000  # tables whose pairs the batch estimates keep (about 16 pairs each; as estimates.PAIR_CACHE)


def _kept(state: TetrisState) -> tuple[np.ndarray, ...]:
    """The kept pairs of :func:`table_gains` (``keep``), made on first use: per table its slot
    (-1: none; ``state.kernel_slots``, which ``TetrisState._forget`` clears); per slot its
    table, first pair, traffic (R) and bounds (``_pairs_into``); per kept pair its regions for every candidate (and
    demand regions), now, and flags; the slots and pairs used."""
    kept = getattr(state, "_kernel_kept", None)
    if kept is None:
        R, napps = state.arrays.num_regions, state.cpu.shape[0]
        lengths = np.diff(state.reader_ptr)
        pairs = max(16 * SLOTS, 2 * int(lengths.max(initial=0)))
        kept = (np.full(state.num_tables, -1, dtype=np.int64), np.zeros(SLOTS, dtype=np.int64),
                np.zeros(SLOTS, dtype=np.int64), np.zeros((SLOTS, R)), np.zeros((SLOTS, 3 + napps)),
                np.zeros((pairs, R), dtype=np.int16),
                np.zeros((pairs if state.split_counted else 0, R), dtype=np.int16), np.zeros(pairs, dtype=np.int64),
                np.zeros(pairs, dtype=np.int64), np.zeros(pairs, dtype=np.int8), np.zeros(2, dtype=np.int64))
        state._kernel_kept = kept
        state.kernel_slots = kept[0]
    return kept


def _nothing_kept(R: int) -> tuple[np.ndarray, ...]:
    """Empty arrays of :func:`_kept`'s types (``keep`` False)."""
    none, empty = np.zeros(0, dtype=np.int64), np.zeros((0, R), dtype=np.int16)
    return (none, none, none, np.zeros((0, R)), np.zeros((0, 1)), empty, empty, none, none, np.zeros(0, dtype=np.int8),
            none)


def _sums(state: TetrisState) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """:func:`slices.slice_sums` over the demand (and Expression 8's columns), recomputed
    only when the demand changed: every change of it marks its columns in ``slice_changed``
    (``apply``), or replaces the arrays (``_restore``, which marks all)."""
    key = (id(state.demand), id(state.odemand), int(state.slice_changed.max()))
    cached = getattr(state, "_kernel_sums", None)
    if cached is None or cached[0] != key:
        sums = _slice_sums(state, state.demand)
        osums = _slice_sums(state, state.odemand) if state.combined else sums
        cached = state._kernel_sums = (key, sums, (osums[0], osums[1], osums[4], osums[5]))
    return cached[1], cached[2]


@_jit
def _pairs_and_terms(tables, home, region, dregion, split, reader_ptr, readers, job_ptr, job_tables, pair_size,
                     table_size, job_kind, job_weight, job_bytes, w_traffic, hb, total_bytes, capacity_share,
                     storage_capacity, w_storage, counted, cell, ocell, combined, gpu_hours, demand, demand_count,
                     odemand, odemand_count, supply, scale, hp, hp_at_home, hp_floor, hp_margin, gpu_supply,
                     gpu_type, cpu_hours, job_app, cpu, cpu_capacity, tol1, keep, slot_of, slot_table, slot_start,
                     slot_traffic, slot_bounds, pool_new, pool_dnew, pool_old, pool_dold, pool_flags, filled):
    """Per table: the storage term and capacity, the pairs' new regions, the traffic change,
    Expression 6 and the CPU check into ``delta`` (4, n, R) and ``feasible`` (n, R); and the GPU
    cells each (table, candidate) changes, for :func:`_finish` (``keys``: (table x R +
    candidate, cell, region) sorted, and (d before, d after, the overload to take the sigmoid
    of), one row per cell; ``okeys`` the same over Expression 8's combined columns). Every
    array returned is C-contiguous whatever its length, so the kernels compile once."""
    n = tables.size
    R = hb.size
    S = demand.shape[1]
    napps = cpu.shape[0]
    delta = np.zeros((4, n, R))
    feasible = np.ones((n, R), dtype=np.bool_)
    # Each region's Expression 9 term now and byte limit (first_pass.storage_before), and per
    # application the least CPU room left over the regions (TetrisState.cpu_room).
    before = np.empty(R)
    limit = np.empty(R)
    for c in range(R):
        x = hb[c] / total_bytes - capacity_share[c]
        before[c] = x * x
        limit[c] = storage_capacity[c] * tol1 + 1e-6
    room = np.empty(napps)
    for q in range(napps):
        least, top_limit = np.inf, -np.inf
        for r in range(R):
            cap = cpu_capacity[q, r] * tol1 + 1e-9
            least = min(least, cap - cpu[q, r])
            top_limit = max(top_limit, cap)
        room[q] = least - 1e-6 * (1.0 + top_limit)
    # Scratch sized by the largest table's readers, and a bound of the GPU cells emitted.
    most = 0
    ml_pairs = 0
    for k in range(n):
        t = tables[k]
        most = max(most, reader_ptr[t + 1] - reader_ptr[t])
        for q in range(reader_ptr[t], reader_ptr[t + 1]):
            if job_kind[readers[q]] == ML:
                ml_pairs += 1
    bound = 2 * R * ml_pairs
    key = np.empty((bound, 3), dtype=np.int64)
    val = np.empty((bound, 3))
    passes = 2 if combined else 1
    okey = np.empty((bound if combined else 0, 3), dtype=np.int64)
    oval = np.empty((bound if combined else 0, 3))
    emitted = np.zeros(2, dtype=np.int64)
    scratch_new = np.empty((most, R), dtype=np.int16)
    scratch_dnew = np.empty((most if split else 0, R), dtype=np.int16)
    scratch_old = np.empty(most, dtype=np.int64)
    scratch_dold = np.empty(most, dtype=np.int64)
    scratch_flags = np.zeros(most, dtype=np.int8)
    scratch_traffic = np.empty(R)
    scratch_bounds = np.empty(3 + napps)
    gpu_rows = np.empty(most, dtype=np.int64)  # the ML pairs whose demand region may change
    count = np.zeros(R, dtype=np.int64)  # a job's other tables by region (zero between pairs)
    size_in = np.zeros(R)  # and their bytes
    cell_hours = np.zeros(S * R)
    cell_count = np.zeros(S * R, dtype=np.int64)
    touched = np.empty(S * R, dtype=np.int64)
    seen = np.zeros(S * R, dtype=np.bool_)
    app_hours = np.zeros(napps * R)
    app_seen = np.zeros(napps * R, dtype=np.bool_)
    app_touched = np.empty(napps * R, dtype=np.int64)
    for k in range(n):
        t = tables[k]
        h = home[t]
        size = table_size[t]
        # Expression 9: only the old and the new home change.
        after_old = (hb[h] - size) / total_bytes - capacity_share[h]
        after_old = after_old * after_old
        for c in range(R):
            grown = hb[c] + size
            if c == h:
                feasible[k, c] = False
                delta[3, k, c] = w_storage * 0.0
            else:
                x = grown / total_bytes - capacity_share[c]
                delta[3, k, c] = w_storage * (x * x - before[c] + (after_old - before[h]))
                feasible[k, c] = grown <= limit[c]
        lo = reader_ptr[t]
        m = reader_ptr[t + 1] - lo
        if m == 0:
            continue
        if keep and m <= pool_old.size:  # kept until a move changes one of its readers' tables
            slot = slot_of[t]
            if slot < 0:
                if filled[0] == slot_table.size or filled[1] + m > pool_old.size:  # full: start over
                    for q in range(filled[0]):
                        slot_of[slot_table[q]] = -1
                    filled[0], filled[1] = 0, 0
                slot, base = filled[0], filled[1]
                _pairs_into(t, h, size, lo, m, R, readers, job_ptr, job_tables, home, pair_size, region, dregion,
                            split, job_kind, job_weight, job_bytes, w_traffic, count, size_in,
                            pool_new[base:base + m], pool_dnew[base:base + m], pool_old[base:base + m],
                            pool_dold[base:base + m], pool_flags[base:base + m], slot_traffic[slot], hp, gpu_hours,
                            gpu_supply, gpu_type, cpu_hours, job_app, slot_bounds[slot])
                slot_of[t], slot_table[slot], slot_start[slot] = slot, t, base
                filled[0], filled[1] = slot + 1, base + m
            base = slot_start[slot]
            new, dnew, old, dold = pool_new[base:base + m], pool_dnew[base:base + m], pool_old[base:base + m], \
                pool_dold[base:base + m]
            flags, traffic, bounds = pool_flags[base:base + m], slot_traffic[slot], slot_bounds[slot]
        else:
            new, dnew, old, dold, flags, traffic, bounds = scratch_new[:m], scratch_dnew[:m], scratch_old[:m], \
                scratch_dold[:m], scratch_flags[:m], scratch_traffic, scratch_bounds
            _pairs_into(t, h, size, lo, m, R, readers, job_ptr, job_tables, home, pair_size, region, dregion, split,
                        job_kind, job_weight, job_bytes, w_traffic, count, size_in, new, dnew, old, dold, flags,
                        traffic, hp, gpu_hours, gpu_supply, gpu_type, cpu_hours, job_app, bounds)
        gpu_pairs = 0
        for i in range(m):
            if flags[i] & 2:
                gpu_rows[gpu_pairs] = i
                gpu_pairs += 1
        for c in range(R):
            delta[0, k, c] = traffic[c]
        demand_new = dnew if split else new
        # Expressions 7 and 8: the GPU cells each candidate changes (first_pass._gpu/_moves).
        for p in range(passes):
            cells = cell if p == 0 else ocell
            d_of = demand if p == 0 else odemand
            n_of = demand_count if p == 0 else odemand_count
            kk = key if p == 0 else okey
            vv = val if p == 0 else oval
            for c in range(R if gpu_pairs else 0):
                used = 0
                for g in range(gpu_pairs):  # the jobs leaving their demand regions first
                    i = gpu_rows[g]
                    if demand_new[i, c] != dold[i] and dold[i] >= 0:
                        j = readers[lo + i]
                        at = cells[j] * R + dold[i]
                        if not seen[at]:
                            seen[at] = True
                            touched[used] = at
                            used += 1
                        cell_hours[at] -= gpu_hours[j]
                        cell_count[at] -= 1 if counted[j] else 0
                for g in range(gpu_pairs):  # then entering the new ones
                    i = gpu_rows[g]
                    if demand_new[i, c] != dold[i] and demand_new[i, c] >= 0:
                        j = readers[lo + i]
                        at = cells[j] * R + demand_new[i, c]
                        if not seen[at]:
                            seen[at] = True
                            touched[used] = at
                            used += 1
                        cell_hours[at] += gpu_hours[j]
                        cell_count[at] += 1 if counted[j] else 0
                if used == 0:
                    continue
                _sort_small(touched, used)
                e = emitted[p]
                for u in range(used):
                    at = touched[u]
                    s, r = at // R, at % R
                    d = d_of[r, s]
                    d_new = 0.0 if n_of[r, s] + cell_count[at] == 0 else d + cell_hours[at]
                    over = d_new - supply[r, s]
                    kk[e, 0], kk[e, 1], kk[e, 2] = k * R + c, s, r
                    vv[e, 0], vv[e, 1], vv[e, 2] = d, d_new, (over if over > 0.0 else 0.0) / scale
                    e += 1
                    cell_hours[at], cell_count[at], seen[at] = 0.0, 0, False
                emitted[p] = e
        # Expression 6 (first_pass._hp_ok): the full check only when the bound does not fit.
        if bounds[0] > 0 and not hp_at_home - bounds[1] >= hp_margin:
            for c in range(R):
                change = 0.0
                for i in range(m):
                    j = readers[lo + i]
                    if (flags[i] & 1) and job_kind[j] == ML and hp[j]:
                        o = old[i]
                        was = o >= 0 and gpu_supply[max(o, 0), max(gpu_type[j], 0)] > 0
                        nr = new[i, c]
                        now = nr >= 0 and gpu_supply[max(nr, 0), gpu_type[j]] > 0
                        change += gpu_hours[j] * ((1.0 if now else 0.0) - (1.0 if was else 0.0))
                at_home = hp_at_home + change
                if not (at_home >= hp_floor or at_home >= hp_at_home):
                    feasible[k, c] = False
        # CPU capacities (first_pass._cpu_ok), the same way.
        fits = True
        for q in range(napps):
            if not bounds[3 + q] <= room[q]:
                fits = False
        if bounds[2] > 0 and not fits:
            for c in range(R):
                used = 0
                for leaving in (True, False):
                    for i in range(m):
                        j = readers[lo + i]
                        if not ((flags[i] & 1) and cpu_hours[j] > 0 and new[i, c] != old[i]):
                            continue
                        r = old[i] if leaving else new[i, c]
                        if r < 0:
                            continue
                        at = job_app[j] * R + r
                        if not app_seen[at]:
                            app_seen[at] = True
                            app_touched[used] = at
                            used += 1
                        if leaving:
                            app_hours[at] -= cpu_hours[j]
                        else:
                            app_hours[at] += cpu_hours[j]
                for u in range(used):
                    at = app_touched[u]
                    q, r = at // R, at % R
                    usage = cpu[q, r] + app_hours[at]
                    if usage > cpu_capacity[q, r] * tol1 + 1e-9 and usage > cpu[q, r] + 1e-9:
                        feasible[k, c] = False
                    app_hours[at], app_seen[at] = 0.0, False
    return (delta, feasible, (key[:emitted[0]], val[:emitted[0]]), (okey[:emitted[1]], oval[:emitted[1]]))


@_jit
def _pairs_into(t, h, size, lo, m, R, readers, job_ptr, job_tables, home, pair_size, region, dregion, split, job_kind,
                job_weight, job_bytes, w_traffic, count, size_in, new, dnew, old, dold, flags, traffic, hp, gpu_hours,
                gpu_supply, gpu_type, cpu_hours, job_app, bounds):
    """One table's (table, reader) pairs (first_pass.pair_regions): each reader's region now
    (``old``), for every candidate (``new``), its demand regions (``dold``, ``dnew``), ``flags``
    (1: some candidate changes its region; 2: an ML job whose demand region some candidate
    changes), and Expression 1's change (pair_traffic) summed over the readers in order, times
    its weight (``traffic``); ``bounds``: whether a high-priority ML reader changes region and
    the most its move can take from the hours trained at home (first_pass._hp_ok's bound),
    whether a reader with CPU-hours does and the most it can add per application (_cpu_ok's).
    ``count`` and ``size_in``: zeroed scratch (R), left zeroed."""
    for q in range(bounds.size):
        bounds[q] = 0.0
    # The pairs: each job's region for every candidate (first_pass.pair_regions) and
    # Expression 1's change (pair_traffic), summed over the readers in order.
    for c in range(R):
        traffic[c] = 0.0
    for i in range(m):
        j = readers[lo + i]
        start, stop = job_ptr[j], job_ptr[j + 1]
        for at in range(start, stop):
            r = home[job_tables[at]]
            count[r] += 1
            size_in[r] += pair_size[at]
        count[h] -= 1
        size_in[h] -= size
        if count[h] == 0:
            size_in[h] = 0.0
        alone = stop - start == 1  # no other table
        top = count[0]
        first_top = 0
        for r in range(1, R):
            if count[r] > top:
                top, first_top = count[r], r
        o = region[j]
        old[i] = o
        is_ml = job_kind[j] == ML
        if is_ml:
            leader = first_top if top == stop - start - 1 else -1  # the common region
            lead_bytes = 0.0
        else:
            best = -np.inf
            for r in range(R):
                if count[r] == top and size_in[r] > best:
                    best = size_in[r]
            leader = 0
            for r in range(R):
                if count[r] == top and size_in[r] == best:
                    leader = r
                    break
            lead_bytes = size_in[leader]
        weight = job_weight[j]
        jb = job_bytes[j]
        old_in = size_in[o] + (size if o == h else 0.0) if o >= 0 else 0.0
        traffic_old = weight * (jb - old_in)
        unplaced = weight * (jb - 0.0)
        any_move = False
        for c in range(R):
            if alone:
                nr = c
            elif is_ml:
                nr = c if leader == c else -1
            else:
                mine = size_in[c] + size
                wins = count[c] == top or (count[c] == top - 1 and (
                    mine > lead_bytes or (mine == lead_bytes and c <= leader)))
                nr = c if wins else leader
            new[i, c] = nr
            if nr >= 0:
                traffic[c] += weight * (jb - (size_in[nr] + (size if nr == c else 0.0))) - traffic_old
            else:
                traffic[c] += unplaced - traffic_old
            any_move = any_move or nr != o
        flags[i] = 1 if any_move else 0
        if any_move and is_ml and hp[j]:
            was = o >= 0 and gpu_supply[max(o, 0), max(gpu_type[j], 0)] > 0
            bounds[0] = 1.0
            bounds[1] += gpu_hours[j] * (1.0 if was else 0.0)
        if any_move and cpu_hours[j] > 0:
            bounds[2] = 1.0
            bounds[3 + job_app[j]] += cpu_hours[j]
        # Demand regions: a split ML job's largest region (first_pass.largest_with).
        any_gmove = False
        if split:
            dold[i] = dregion[j]
            most_bytes = 0
            for r in range(1, R):
                if size_in[r] > size_in[most_bytes]:
                    most_bytes = r
            for c in range(R):
                nr = new[i, c]
                if nr < 0 and is_ml:
                    mine = size_in[c] + size
                    wins = c == most_bytes or mine > size_in[most_bytes] or (
                        mine == size_in[most_bytes] and c < most_bytes)
                    nr = c if wins else most_bytes
                dnew[i, c] = nr
                any_gmove = any_gmove or nr != dold[i]
        else:
            dold[i] = o
            any_gmove = any_move
        if is_ml and any_gmove:
            flags[i] |= 2
        for at in range(start, stop):  # clean the scratch for the next pair
            r = home[job_tables[at]]
            count[r] = 0
            size_in[r] = 0.0
        count[h], size_in[h] = 0, 0.0
    for c in range(R):
        traffic[c] = w_traffic * traffic[c]


@_jit
def _sort_small(values, size):
    """Sort ``values[:size]`` in place (insertion sort: a few keys, no allocation)."""
    for i in range(1, size):
        x = values[i]
        j = i - 1
        while j >= 0 and values[j] > x:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = x


@_jit
def _slices(delta, keys, vals, sig_new, total, sig, sum_sq, sum_cross, sum_share_sq, sum_sig, share,
            weight, slice_balance, slice_overload, balance_pass, w_gpu):
    """Expressions 7 and 8's changes from the GPU cells :func:`_pairs_and_terms` emitted
    (``first_pass._slices``): per (table, candidate, slice), the slice's cost after the move from
    its running sums, corrected at the regions the move changes; added per (table, candidate)
    over its slices into ``delta[1]`` (balance pass) and ``delta[2]``. ``sig_new``: the sigmoid
    of the overloaded cells' overload (``vals[:, 2]`` > 0), in their order."""
    n, R = delta.shape[1], delta.shape[2]
    out_balance = np.zeros(n * R)
    out_overload = np.zeros(n * R)
    size = keys.shape[0]
    overloaded = 0
    i = 0
    while i < size:
        rc, s = keys[i, 0], keys[i, 1]
        end = i
        moved = 0.0
        while end < size and keys[end, 0] == rc and keys[end, 1] == s:
            moved += vals[end, 1] - vals[end, 0]
            end += 1
        new_total = total[s] + moved
        active = new_total > 0
        safe = new_total if active else 1.0
        correction = 0.0
        over = 0.0
        for q in range(i, end):
            r, d, d_new = keys[q, 2], vals[q, 0], vals[q, 1]
            sh = share[r, s]
            x, y = d_new / safe - sh, d / safe - sh
            correction += x * x - y * y
            if vals[q, 2] > 0.0:  # overloaded: the next of sig_new
                sig_q = sig_new[overloaded]
                overloaded += 1
            else:
                sig_q = 0.5
            over += d_new * sig_q - d * sig[r, s]
        balance = sum_sq[s] / (safe * safe) - 2.0 * sum_cross[s] / safe + sum_share_sq[s] + correction
        if active:
            balance = balance if balance >= 0.0 else 0.0
        else:
            balance = 0.0
        overload = (sum_sig[s] + over) / safe if active else 0.0
        if balance_pass:
            out_balance[rc] += weight[s] * balance - slice_balance[s]
        out_overload[rc] += weight[s] * overload - slice_overload[s]
        i = end
    for k in range(n):
        for c in range(R):
            if balance_pass:
                delta[1, k, c] = w_gpu * out_balance[k * R + c]
            delta[2, k, c] = w_gpu * out_overload[k * R + c]


@_jit
def _finish(delta, feasible, keys, vals, sig_new, okeys, ovals, osig_new, combined, total, sig, sum_sq,
            sum_cross, sum_share_sq, sum_sig, ototal, osig, osum_share_sq, osum_sig, share, weight, oweight,
            slice_balance, slice_overload, w_gpu):
    """The GPU terms (:func:`_slices`, over Expression 8's own columns when combined), then the
    gains: -(traffic + balance + overload + storage) where feasible (``table_gains``'s sum)."""
    _slices(delta, keys, vals, sig_new, total, sig, sum_sq, sum_cross, sum_share_sq, sum_sig, share, weight,
            slice_balance, slice_overload, True, w_gpu)
    if combined:
        # Expression 8 on the combined columns (first_pass._slices: its balance is not used).
        _slices(delta, okeys, ovals, osig_new, ototal, osig, sum_sq, sum_cross, osum_share_sq, osum_sig, share,
                oweight, slice_balance, slice_overload, False, w_gpu)
    n, R = feasible.shape
    gains = np.empty((n, R))
    for k in range(n):
        for c in range(R):
            if feasible[k, c]:
                gains[k, c] = -(delta[0, k, c] + delta[1, k, c] + delta[2, k, c] + delta[3, k, c])
            else:
                gains[k, c] = -np.inf
    return gains
