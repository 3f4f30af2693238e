"""What every compound step of the Tetris searches shares: the byte quota left, the hard
constraints as the hill climb keeps them, tables sent home to free the quota, one table's exact
move, and the climb that polishes a kept step (:mod:`fleetplan.solvers.placement.neighbourhood.lns`,
:mod:`fleetplan.solvers.placement.neighbourhood.groups`).

>>> import fleetplan
>>> from fleetplan.solvers.placement.climb.state import TetrisState
>>> state = TetrisState(fleetplan.generate("placement", {"regions": 3, "tables": 20, "jobs": 20}, seed=0))
>>> quota_left(state) == state.arrays.move_quota_bytes, feasible(state, snapshot(state), quota_left(state))
(True, True)
"""

from __future__ import annotations

import math

import numpy as np

from fleetplan.instances.placement.evaluate import TOLERANCE
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.hill_climb import Budget, Candidate, ClimbResult, hill_climb
from fleetplan.solvers.placement.climb.state import TERMS, TetrisState

# A step is kept when the exact objective falls by more than this (relative).
IMPROVEMENT = 1e-9


def feasible(state: TetrisState, before: dict[str, np.ndarray | float], quota_room: float) -> bool:
    """The hard constraints as the climb keeps them: each within its limit or no worse than
    ``before`` (the state's values before the step), and the quota."""
    a = state.arrays
    cap = a.storage_capacity * (1 + TOLERANCE) + 1e-6
    if ((state.home_bytes > cap) & (state.home_bytes > before["home_bytes"] + 1e-6)).any():
        return False
    limit = a.cpu_capacity * (1 + TOLERANCE) + 1e-9
    if ((state.cpu > limit) & (state.cpu > before["cpu"] + 1e-9)).any():
        return False
    if state.hp_at_home < state.hp_floor and state.hp_at_home < before["hp"] - 1e-9:
        return False
    return quota_room >= -1e-6 * max(1.0, a.move_quota_bytes if np.isfinite(a.move_quota_bytes) else 1.0)


def quota_left(state: TetrisState) -> float:
    """Bytes of the daily move quota the state's placement leaves (inf when unlimited)."""
    a = state.arrays
    if not np.isfinite(a.move_quota_bytes):
        return math.inf
    return float(a.move_quota_bytes - a.table_size[state.home != state.original].sum())


def snapshot(state: TetrisState) -> dict[str, np.ndarray | float]:
    """What :func:`feasible` compares a step's result with."""
    return {"home_bytes": state.home_bytes.copy(), "cpu": state.cpu.copy(), "hp": state.hp_at_home}


def polish_from(state: TetrisState, tables: np.ndarray, deadline: Deadline) -> ClimbResult:
    """The climb from the state, starting with the moved tables' neighbours (not a full pass)."""
    jobs = np.unique(np.concatenate([state.readers[state.reader_ptr[t]:state.reader_ptr[t + 1]]
                                     for t in tables.tolist()] + [np.zeros(0, dtype=np.int64)]))
    a = state.arrays
    lengths = a.job_ptr[jobs + 1] - a.job_ptr[jobs]
    pair = np.repeat(a.job_ptr[jobs] - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
    items = np.unique(np.concatenate([tables, a.job_tables[pair]]))
    room = quota_left(state)
    budget = Budget(time_s=None if deadline.time_limit is None else max(0.0, deadline.remaining()),
                    cost=None if not np.isfinite(room) else max(room, 0.0))
    return hill_climb(state, budget=budget, initial=(state.best_move(int(t)) for t in items),
                      neighbours=state.neighbours)


def step(state: TetrisState, table: int, target: int) -> Candidate:
    """The exact move of ``table`` to ``target`` from the current state, feasible or not (an
    intermediate step of a neighbourhood's answer may pass a capacity the answer respects)."""
    _, delta, _ = state._candidates(table)
    size = float(state.arrays.table_size[table])
    at_origin = state.home[table] == state.original[table]
    cost = size if at_origin else (-size if target == state.original[table] else 0.0)
    return Candidate(table, target, float(-delta[:, target].sum()),
                     {name: float(delta[k, target]) for k, name in enumerate(TERMS)}, cost,
                     source=int(state.home[table]))


def with_quota(state: TetrisState, tables: np.ndarray, max_free: int, rng: np.random.Generator) -> np.ndarray:
    """``tables`` plus, when moving them could need more of the byte quota than is left,
    tables moved earlier whose return home loses least per byte, until their bytes cover
    the need: the MIP can then spend the quota better (a big table worth moving is often
    stuck behind many small moves the climb made first)."""
    s, a = state, state.arrays
    room = quota_left(s)
    if not np.isfinite(room) or tables.size == 0:
        return tables
    need = float(a.table_size[tables][s.home[tables] == s.original[tables]].sum()) - room
    if need <= 0:
        return tables
    moved = np.flatnonzero(s.home != s.original)
    moved = moved[~np.isin(moved, tables)]
    # Tables too small to matter against the need would fill the neighbourhood first.
    moved = moved[a.table_size[moved] >= need / max_free]
    if moved.size == 0:
        return tables
    if moved.size > 256:
        moved = moved[rng.permutation(moved.size)[:256]]
    losses = []
    for t in moved.tolist():
        back = s.move_to(t, int(s.original[t]))
        if back is not None:
            losses.append((-back.gain / max(float(a.table_size[t]), 1.0), t))
    losses.sort()
    extra, covered = [], 0.0
    for _, t in losses:
        # Twice the need, so the MIP has a choice of which to send home.
        if covered >= 2 * need or len(extra) >= max_free:
            break
        extra.append(t)
        covered += float(a.table_size[t])
    return np.unique(np.concatenate([tables, np.array(extra, dtype=np.int64)]))


__all__ = ["IMPROVEMENT", "feasible", "polish_from", "quota_left", "snapshot", "step", "with_quota"]
