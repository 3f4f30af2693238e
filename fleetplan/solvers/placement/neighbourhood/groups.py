"""Whole-group splits for Tetris: split every ML job of one GPU group (type x priority) at once.

Why: under ``split_ml_demand="ignored"`` (Figure 4 as written) a split ML job adds no GPU
demand, and a group (GPU type, priority) without demand costs nothing in Expressions 7-8. When
every job of a group has several tables, splitting them all removes the group's terms for the
price of their traffic: at 1,000 tables (``fleetplan generate placement --regions 20 --tables
1000 --jobs 1000 --seed 0``) splitting the only two priority-0 V100 jobs takes the search's plan
from 28.17 to 22.13 (:func:`split_sweep`, its polish included). No single move gains there — splitting one job leaves the other carrying
the group, with a worse balance — so the climb never takes it, and a neighbourhood grown from
one job through shared tables never frees both when they share none. Here the compound move is
tried directly: for each group whose active jobs may all split, each job is split by the one
table move that loses least (exact gains from :class:`TetrisState`; the move must fit the byte
quota left, and when it cannot, a table moved earlier is first sent home), the moves applied in
turn, and the whole kept only when the exact objective falls
and the hard constraints hold as the climb keeps them (:func:`feasible`); otherwise undone.
At most ``max_tables`` tables move per group (one per job still placed), so the move stays
cheap on groups of any size. Under ``split_ml_demand="largest_region"`` a split job's demand
still counts, so there is nothing to gain and no group is tried.

Under ``overload_form="combined_high_priority"`` a group is a (type, priority) cell, and also
all high-priority cells of a type together (Expression 8's combined group vanishes only when
all of them split).

Example
-------
>>> import fleetplan
>>> from fleetplan.solvers.placement.climb.state import TetrisState
>>> instance = fleetplan.generate("placement", {"regions": 4, "tables": 40, "jobs": 40}, seed=0)
>>> state = TetrisState(instance)
>>> outcome = split_sweep(state, max_tables=8)
>>> outcome.gain >= 0.0, outcome.kept <= outcome.tried
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fleetplan.instances.placement import PRIORITY_LEVELS
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.hill_climb import Candidate
from fleetplan.solvers.placement.climb.state import TetrisState
from fleetplan.solvers.placement.neighbourhood.steps import (
    IMPROVEMENT,
    feasible,
    polish_from,
    quota_left,
    snapshot,
)

# Tables considered for a return home that frees the quota a split needs (the smallest large
# enough ones; each costs one evaluation of the table's moves).
RETURN_CANDIDATES = 32


@dataclass
class GpuGroupJobs:
    """One group's active jobs (placed, with GPU-hours) and its current cost in Expressions 7-8."""

    name: str
    jobs: np.ndarray
    cost: float


def active_groups(state: TetrisState) -> list[GpuGroupJobs]:
    """Every GPU group carrying demand now, its placed jobs and its cost (w2 x the slice's
    Expressions 7-8; a combined group's Expression 8), most costly first (then by name)."""
    a = state.arrays
    if state.split_counted:
        return []
    active = state.counted & (state.region >= 0)
    cells = np.unique(state.cell[active])
    groups = []
    for c in cells.tolist():
        jobs = np.flatnonzero(active & (state.cell == c))
        # Under the combined form a high cell's Expression 8 is its type's combined group's
        # (counted whole here: an over-estimate, which only means one more try).
        cost = state.slice_balance[c] + state.slice_overload[state.ocell[jobs[0]]]
        name = f"{a.gpu_types[c // PRIORITY_LEVELS]} priority {c % PRIORITY_LEVELS}"
        groups.append(GpuGroupJobs(name, jobs, float(a.w_gpu * cost)))
    if state.combined:
        for oc in np.unique(state.ocell[active & a.high_priority[a.job_priority]]).tolist():
            jobs = np.flatnonzero(active & (state.ocell == oc))
            if np.unique(state.cell[jobs]).size > 1:
                cost = state.slice_overload[oc] + state.slice_balance[np.unique(state.cell[jobs])].sum()
                groups.append(GpuGroupJobs(f"{a.gpu_types[int(a.job_gpu_type[jobs[0]])]} high priorities",
                                           jobs, float(a.w_gpu * cost)))
    groups.sort(key=lambda g: (-g.cost, g.name))
    return groups


def may_all_split(state: TetrisState, jobs: np.ndarray) -> bool:
    """Every job reads at least two tables, one of which may move (within the quota)."""
    a = state.arrays
    for j in jobs.tolist():
        own = np.unique(a.job_tables[a.job_ptr[j]:a.job_ptr[j + 1]])
        if own.size < 2 or not (a.table_size[own] <= a.move_quota_bytes).any():
            return False
    return True


def _cheapest_split(state: TetrisState, job: int, room: float) -> Candidate | None:
    """The one table move that splits ``job`` and loses least within ``room`` bytes of the
    quota (None when none is feasible)."""
    a = state.arrays
    own = np.unique(a.job_tables[a.job_ptr[job]:a.job_ptr[job + 1]])
    best: tuple[float, int, int] | None = None
    for t in own[a.table_size[own] <= a.move_quota_bytes].tolist():
        gains, _, info = state._candidates(t)
        row = int(np.flatnonzero(info["jobs"] == job)[0])
        size = float(a.table_size[t])
        at_origin = state.home[t] == state.original[t]
        cost = np.where(np.arange(a.num_regions) == state.original[t], -size, 0.0) if not at_origin \
            else np.full(a.num_regions, size)
        ok = (info["new_region"][row] < 0) & np.isfinite(gains) & (cost <= room + 1e-6 * max(1.0, size))
        if not ok.any():
            continue
        r = int(np.flatnonzero(ok)[np.argmax(gains[ok])])
        if best is None or gains[r] > best[0]:
            best = (float(gains[r]), t, r)
    return None if best is None else state.move_to(best[1], best[2])


def _make_room(state: TetrisState, job: int, room: float, keep: np.ndarray) -> Candidate | None:
    """A moved table (not in ``keep``) sent back home to free the quota the smallest split of
    ``job`` needs: of the (at most RETURN_CANDIDATES smallest) tables large enough, the one
    whose return loses least. The climb spends the quota to its end, so a split usually
    needs this; the whole group's move is judged exactly afterwards."""
    a = state.arrays
    own = np.unique(a.job_tables[a.job_ptr[job]:a.job_ptr[job + 1]])
    own = own[a.table_size[own] <= a.move_quota_bytes]
    if own.size == 0:
        return None
    need = float(a.table_size[own].min()) - room
    moved = np.flatnonzero((state.home != state.original) & (a.table_size >= need))
    moved = moved[~np.isin(moved, keep)]
    moved = moved[np.lexsort((moved, a.table_size[moved]))][:RETURN_CANDIDATES]
    returns = [state.move_to(t, int(state.original[t])) for t in moved.tolist()]
    return max((m for m in returns if m is not None), key=lambda m: (m.gain, -m.item), default=None)


def _split_one(state: TetrisState, job: int, keep: np.ndarray, saved: list[tuple],
               room_for_return: bool = True) -> list[Candidate] | None:
    """Split ``job`` by its cheapest move, first sending a moved table home (not one of
    ``keep``) when the quota left is too small; the moves applied, None when it cannot split
    (a return already applied stays, saved on ``saved`` for the caller to undo)."""
    a = state.arrays
    move = _cheapest_split(state, job, quota_left(state))
    moves = []
    if move is None and np.isfinite(a.move_quota_bytes) and room_for_return:
        back = _make_room(state, job, quota_left(state), keep)
        if back is not None:
            saved.append(state._save(np.array([back.item])))
            state.apply(back)
            moves.append(back)
            move = _cheapest_split(state, job, quota_left(state))
    if move is None:
        return None
    state.apply(move)
    moves.append(move)
    return moves


def split_group(state: TetrisState, jobs: np.ndarray, max_tables: int) -> tuple[float, list[Candidate]]:
    """Split every job of ``jobs`` (one table move each, the cheapest first found); keep the
    moves when the exact objective falls and the plan stays feasible, else undo them.
    Returns (gain, moves applied) — (0, []) when undone."""
    a = state.arrays
    placed = jobs[state.region[jobs] >= 0]
    if placed.size == 0 or placed.size > max_tables:
        return 0.0, []
    lengths = a.job_ptr[placed + 1] - a.job_ptr[placed]
    pair = np.repeat(a.job_ptr[placed] - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
    before = snapshot(state)
    objective = sum(state.objective_terms.values())
    tables = np.unique(a.job_tables[pair])
    # A stack of saved states: the group's tables, then each table sent home for the quota
    # (restored in reverse order, each restore undoes what followed its save).
    saved = [state._save(tables)]

    def undo() -> tuple[float, list[Candidate]]:
        for entry in reversed(saved):
            state._restore(entry)
        return 0.0, []

    moves: list[Candidate] = []
    for j in placed.tolist():
        if state.region[j] < 0:  # split already by an earlier move (a shared table)
            continue
        steps = _split_one(state, j, tables, saved, room_for_return=len(moves) < max_tables - 1)
        if steps is None:
            return undo()
        moves.extend(steps)
        if len(moves) > max_tables:
            return undo()
    gain = objective - sum(state.objective_terms.values())
    if gain <= IMPROVEMENT * max(1.0, abs(objective)) or not feasible(state, before, quota_left(state)):
        return undo()
    return gain, moves


@dataclass
class SweepOutcome:
    """Groups tried and kept, the exact gain (splits and their polish) and the moves applied."""

    tried: int = 0
    kept: int = 0
    gain: float = 0.0
    moves: list[Candidate] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def split_sweep(state: TetrisState, max_tables: int, deadline: Deadline | None = None,
                polish: bool = True) -> SweepOutcome:
    """Try :func:`split_group` on every active group whose jobs may all split and whose cost
    exceeds their traffic when split (a split ML job reads all its bytes remotely), most costly
    first; each kept split is polished by the climb from its tables."""
    a = state.arrays
    outcome = SweepOutcome()
    deadline = deadline or Deadline(None)
    for group in active_groups(state):
        if deadline.expired():
            break
        jobs = group.jobs[state.region[group.jobs] >= 0]
        if jobs.size == 0 or jobs.size > max_tables or not may_all_split(state, jobs):
            continue
        traffic = a.w_traffic * float((a.job_weight[jobs] * state.job_bytes[jobs]).sum())
        if traffic >= group.cost:
            continue
        outcome.tried += 1
        gain, moves = split_group(state, jobs, max_tables)
        if not moves:
            continue
        outcome.kept += 1
        outcome.moves.extend(moves)
        outcome.gain += gain
        line = f"group split ({group.name}: {jobs.size} jobs): {len(moves)} tables moved, gain {gain:.6g}"
        if polish:
            climb = polish_from(state, np.array([m.item for m in moves]), deadline)
            outcome.moves.extend(climb.applied)
            outcome.gain += climb.total_gain
            line += f", then {len(climb.applied)} climb moves (+{climb.total_gain:.6g})"
        outcome.lines.append(line)
    return outcome


__all__ = ["GpuGroupJobs", "SweepOutcome", "active_groups", "may_all_split", "split_group", "split_sweep"]
