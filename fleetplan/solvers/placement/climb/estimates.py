"""The Tetris climb's batch estimates (MAST §3.4, "before moving a table, it recalculates its
best region"), from values kept across moves (10^6 tables in under 60 s).

After every applied move the engine re-estimates the ~33 tables at the head of its queue and
the move's neighbours. :func:`first_pass.table_gains` would recompute all of each table's terms,
although a move changes few of them: it changes the (table, reader) pairs of the tables its
readers read (their new regions and traffic), the demand of the GPU slices whose jobs it
moved, the storage of two regions, and the room left under the CPU capacities and the
home-training floor. So each table's share is kept in ``state.pair_cache`` (an
:class:`_Entry`) and only what a move can have changed is recomputed:

* pairs and traffic (Expression 1): until a move changes one of its readers' tables
  (``TetrisState._forget`` drops the entry);
* the GPU terms (Expressions 7-8): until a move changes the demand of one of the slices its
  moving jobs touch (``TetrisState.slice_changed``: the version of each slice's last change);
* Expression 6 and the CPU capacities: each table keeps what its move could take from the
  home-training hours and add per application (the bounds :func:`first_pass._hp_ok` and
  ``_cpu_ok`` check for a whole batch); while those fit the room left now, every candidate
  passes, as the full check would find, and otherwise the full check runs for that table;
* the storage term (Expression 9): recomputed for every table (a few array operations).

Each part is computed by the same functions as :func:`first_pass.table_gains` on the table's
own pairs, and a table's values do not depend on the other tables of its batch (sums run per
table, in the same order), so the gains are the same bits as a fresh ``table_gains`` call:
the climb's decisions, and so its plan, are unchanged (``tests/test_placement_scale_fast_paths.py``
checks it after random moves; ``benchmarks/scripts/placement_scale.py --moves`` move by move).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fleetplan.instances.placement import ML
from fleetplan.solvers import kernels
from fleetplan.solvers.hill_climb import Candidate
from fleetplan.solvers.placement.climb.first_pass import (
    _cpu_ok,
    _gpu,
    _hp_ok,
    _Pairs,
    _pairs,
    _traffic,
    gpu_rows_of,
    storage_terms,
)

# A fleetplan.solvers.placement.climb.state.TetrisState (state.py imports this module).
TetrisState = Any

_new = object.__new__
PAIR_CACHE = 20000  # tables whose entries the batch estimates keep (about 5 kB each at 20 regions)


class _Entry:
    """One table's values kept across moves: its (table, reader) pairs' jobs, regions now
    (``old``), for each candidate (``new``) and demand regions for each candidate (``dnew``);
    its traffic change (R,); ``gpu``: traffic + GPU balance + GPU overload changes (R,), added
    in :func:`first_pass.table_gains`'s order, computed at state version ``gpu_at`` from the
    demand columns ``slices`` (None: to compute); the most its move can take from the
    high-priority hours at home and add to each application's CPU hours (-inf: nothing to
    check)."""

    __slots__ = ("job", "old", "new", "dnew", "traffic", "gpu", "gpu_at", "slices", "hp_loss", "cpu_added")

    def __init__(self, job: np.ndarray, old: np.ndarray, new: np.ndarray, dnew: np.ndarray,
                 traffic: np.ndarray) -> None:
        self.job, self.old, self.new, self.dnew, self.traffic = job, old, new, dnew, traffic
        self.gpu: np.ndarray | None = None
        self.gpu_at = -1
        self.slices: list[int] = []
        self.hp_loss = -np.inf
        self.cpu_added: np.ndarray | None = None


def estimate(state: TetrisState, items: list[int]) -> list[Candidate | None]:
    """The best moves of ``items`` from the current state: tables in one :func:`cached_gains`
    call, compound items one by one (``best_move``). The tables' moves carry no ``terms``:
    estimates only order the engine's queue, and a move is evaluated exactly before it is
    applied (about 10^5 estimates per 10^4 moves at 10^6 tables, so their dicts were seconds)."""
    count = state.num_tables
    tables = np.array([i for i in items if i < count], dtype=np.int64)
    found: dict[int, Candidate | None] = {}
    if tables.size:
        gains = cached_gains(state, tables)
        found = dict.fromkeys(tables.tolist())
        if kernels.use_jit(state.num_tables):  # the same, in one compiled call
            from fleetplan.solvers.placement.climb import gain_kernels

            moves = gain_kernels.best_moves(state, tables, gains)
        else:
            moves = _best_moves(state, tables, gains)
        if moves[0]:
            # What _candidates gives, built without the dataclass's __init__ (5 us each:
            # about 4 x 10^5 estimates at 10^6 tables).
            for t, r, gain, c, home in zip(*moves, strict=True):
                move = _new(Candidate)
                move.__dict__.update(item=t, target=r, gain=gain, terms={}, cost=c, source=home, members=())
                found[t] = move
    return [found[i] if i < count else state.best_move(i) for i in items]


def _best_moves(state: TetrisState, tables: np.ndarray, gains: np.ndarray) -> tuple[list, ...]:
    """The tables with a positive best gain (``gains`` (n, R)), and each one's target (the first
    best region), gain, quota cost and home, as lists."""
    target = np.argmax(gains, axis=1)
    best = gains[np.arange(tables.size), target]
    good = np.flatnonzero(np.isfinite(best) & (best > 0))
    rows, sizes = tables[good], state.arrays.table_size[tables[good]]
    homes, original = state.home[rows], state.original[rows]
    cost = np.where(homes == original, sizes, np.where(target[good] == original, -sizes, 0.0))
    return rows.tolist(), target[good].tolist(), best[good].tolist(), cost.tolist(), homes.tolist()


def cached_gains(state: TetrisState, tables: np.ndarray) -> np.ndarray:
    """:func:`first_pass.table_gains`'s gains (n, R) of ``tables`` (the same bits): computed
    afresh by the compiled kernel (``gain_kernels``, a few microseconds per table), or with
    ``FLEETPLAN_KERNELS=0`` from each table's :class:`_Entry`, recomputing only the parts a
    move since changed."""
    if kernels.use_jit(state.num_tables):
        from fleetplan.solvers.placement.climb import gain_kernels

        return gain_kernels.table_gains(state, tables, keep=True)[0]
    a = state.arrays
    R = a.num_regions
    storage, feasible = storage_terms(state, tables)
    entries = _entries(state, tables)
    # GPU terms not computed yet, or computed before a change of one of their slices.
    changed_at, version = state.slice_changed.tolist(), state.version
    stale = [e for e in entries if e.gpu is None or (e.gpu_at < version and e.slices
                                                     and max(map(changed_at.__getitem__, e.slices)) > e.gpu_at)]
    if stale:
        p, m = _join(state, stale)
        balance = overload = np.zeros(m * R)
        if p.job.size:
            changed = p.new != p.old[:, None]
            is_ml = a.job_kind[p.job] == ML
            moved, gpu_rows = gpu_rows_of(state, p, is_ml, changed, np.flatnonzero(is_ml & changed.any(axis=1)))
            if gpu_rows.size:
                balance, overload = _gpu(state, p, gpu_rows, moved, m)
        balance, overload = balance.reshape(m, R), overload.reshape(m, R)
        # Kept as traffic + balance + overload, added in the order table_gains adds them.
        partial = np.stack([e.traffic for e in stale]) + balance + overload
        for k, e in enumerate(stale):
            e.gpu, e.gpu_at = partial[k], version
    # Expression 6 and the CPU capacities: the full check only where the bounds do not fit.
    hp_margin = state.hp_floor + 1e-6 * (1.0 + state.hp_total)
    room = state.cpu_room()
    loss = np.array([e.hp_loss for e in entries])  # -inf: no reader to check
    added = np.stack([e.cpu_added for e in entries])  # -inf: no reader to check
    check = np.flatnonzero(~(state.hp_at_home - loss >= hp_margin) | ~(added <= room).all(axis=1)).tolist()
    if check:
        p, m = _join(state, [entries[k] for k in check])
        changed = p.new != p.old[:, None]
        ml = np.flatnonzero((a.job_kind[p.job] == ML) & changed.any(axis=1))
        ok = _cpu_ok(state, p, changed, m)
        if ml.size:
            ok &= _hp_ok(state, p, ml, m)
        feasible[check] &= ok.reshape(m, R)
    partial = np.stack([e.gpu for e in entries])
    return np.where(feasible, -(partial + storage), -np.inf)


def _join(state: TetrisState, entries: list[_Entry]) -> tuple[_Pairs, int]:
    """The pairs of several entries' tables as one batch (rows numbered in their order)."""
    p = _Pairs()
    lengths = [e.job.size for e in entries]
    p.row = np.repeat(np.arange(len(entries)), lengths)
    p.job = np.concatenate([e.job for e in entries])
    p.old = np.concatenate([e.old for e in entries])
    p.new = np.concatenate([e.new for e in entries])
    if state.split_counted:
        p.dold, p.dnew = state.dregion[p.job], np.concatenate([e.dnew for e in entries])
    else:
        p.dold, p.dnew = p.old, p.new
    return p, len(entries)


def _entries(state: TetrisState, tables: np.ndarray) -> list[_Entry]:
    """Each table's :class:`_Entry`, kept in ``state.pair_cache`` (a move drops those of the
    tables its readers read), made for tables without one in one :func:`first_pass._pairs`
    call."""
    cache = state.pair_cache
    if len(cache) > PAIR_CACHE:
        cache.clear()
    listed = tables.tolist()
    missing = [t for t in listed if t not in cache]
    if missing:
        _make(state, np.array(missing, dtype=np.int64))
    return [cache[t] for t in listed]


def _make(state: TetrisState, sub: np.ndarray) -> None:
    """New entries for the tables ``sub``: pairs and traffic as :func:`first_pass.table_gains`
    computes them, the bounds of Expression 6 and the CPU check, and the demand columns."""
    a = state.arrays
    R = a.num_regions
    cache = state.pair_cache
    lo = state.reader_ptr[sub]
    lengths = state.reader_ptr[sub + 1] - lo
    m = sub.size
    if not lengths.sum():
        empty, unchecked = np.zeros(0, dtype=np.int64), np.full(state.cpu.shape[0], -np.inf)
        rows = np.zeros((0, R), dtype=np.int64)
        for t in sub.tolist():
            e = _Entry(empty, empty, rows, rows, np.zeros(R))
            e.gpu, e.gpu_at, e.cpu_added = np.zeros(R), state.version, unchecked
            cache[t] = e
        return
    p = _pairs(state, sub, lo, lengths)
    traffic = _traffic(state, p, m).reshape(m, R)
    changed = p.new != p.old[:, None]
    is_ml = a.job_kind[p.job] == ML
    ml = np.flatnonzero(is_ml & changed.any(axis=1))
    _, gpu_rows = gpu_rows_of(state, p, is_ml, changed, ml)
    slices = _slices_by_row(state, p.row[gpu_rows], p.job[gpu_rows], m)
    hp_loss = _hp_loss(state, p, ml, m)
    cpu_added = _cpu_added(state, p, changed, m)
    ends = np.cumsum(lengths).tolist()
    start = 0
    for k, (t, end) in enumerate(zip(sub.tolist(), ends, strict=True)):
        e = _Entry(p.job[start:end], p.old[start:end], p.new[start:end], p.dnew[start:end], traffic[k])
        e.slices, e.hp_loss, e.cpu_added = slices[k], hp_loss[k], cpu_added[k]
        if not e.slices:  # no job of its moves its demand: no GPU terms
            e.gpu, e.gpu_at = traffic[k] + 0.0 + 0.0, state.version
        cache[t] = e
        start = end


def _slices_by_row(state: TetrisState, rows: np.ndarray, jobs: np.ndarray, m: int) -> list[list[int]]:
    """The demand columns (``cell``, and ``ocell`` under the combined overload) of the jobs
    whose demand a table's move may shift, per table row: its GPU terms read only those."""
    cells = state.cell[jobs]
    if state.combined:
        rows, cells = np.concatenate([rows, rows]), np.concatenate([cells, state.ocell[jobs]])
    S = state.demand.shape[1]
    keys = np.unique(rows * S + cells)
    starts = np.searchsorted(keys, np.arange(m + 1) * S)
    columns = (keys % S).tolist()
    starts = starts.tolist()
    return [columns[starts[k]:starts[k + 1]] for k in range(m)]


def _hp_loss(state: TetrisState, p: _Pairs, ml: np.ndarray, m: int) -> list[float]:
    """Per table, the high-priority GPU-hours at home its move could lose (as
    :func:`first_pass._hp_ok` bounds them), -inf when no such reader changes region."""
    rows = ml[state.hp[p.job[ml]]]
    if rows.size == 0:
        return [-np.inf] * m
    jobs = p.job[rows]
    was = state._at_home(jobs, p.old[rows])
    loss = np.bincount(p.row[rows], weights=state.arrays.job_gpu_hours[jobs] * was, minlength=m)
    return np.where(np.bincount(p.row[rows], minlength=m) > 0, loss, -np.inf).tolist()


def _cpu_added(state: TetrisState, p: _Pairs, changed: np.ndarray, m: int) -> np.ndarray:
    """Per table, the most its move could add to each application's CPU hours in a region (as
    :func:`first_pass._cpu_ok` bounds it), (m, applications); -inf when no reader with CPU
    hours changes region."""
    a = state.arrays
    napps = state.cpu.shape[0]
    rows = np.flatnonzero(changed.any(axis=1) & (a.job_cpu_hours[p.job] > 0))
    if rows.size == 0:
        return np.full((m, napps), -np.inf)
    movers = p.job[rows]
    added = np.bincount(p.row[rows] * napps + a.job_app[movers], weights=a.job_cpu_hours[movers],
                        minlength=m * napps).reshape(m, napps)
    added[np.bincount(p.row[rows], minlength=m) == 0] = -np.inf
    return added
