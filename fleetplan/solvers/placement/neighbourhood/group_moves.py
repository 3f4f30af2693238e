"""Compound moves of one GPU group's jobs for Tetris: a few of its largest jobs moved (all their
tables to one region) or split at once, found by a beam search over exact objectives.

Why: where a group's plan value lies far above its part of the lower bound, what is missing is
often a rearrangement of several large jobs that no single move and no pair of moves reaches.
At 1,000 tables (``fleetplan generate placement --regions 20 --tables 1000 --jobs 1000 --seed
0``), after 60 s of the neighbourhood search, the A100 priority-3 group had 652 GPU-hours in a
region with 327: sending its 562-hour job to the region with the most supply loses 0.21 alone
(that region overloads), but with two other large jobs split it gains 0.23 — three table moves
that the neighbourhood MIPs did not find (grown through shared tables they were too large to
let placed jobs split). Here, for the group, the ``max_jobs`` jobs with the most GPU-hours
each get every option — all its tables to one region where its GPU type is supplied, or split
by its cheapest table move. Every option of the ``first_jobs`` largest jobs is forced as a
first move (it may lose: the 562-hour job's did), then the best option of another job is added
greedily (among each job's ``NEXT_OPTIONS`` best alone), up to ``depth`` jobs; every prefix is
scored exactly (:class:`TetrisState`). The best sequence that lowers the objective and keeps
the hard constraints as the climb keeps them (:func:`feasible`, the quota included) is
applied; the state is left as it was otherwise. Deterministic: no draw, and the deadline only
cuts it short.

Example
-------
>>> import fleetplan
>>> from fleetplan.solvers.placement.climb.state import TetrisState
>>> instance = fleetplan.generate("placement", {"regions": 4, "tables": 40, "jobs": 40}, seed=0)
>>> state = TetrisState(instance)
>>> before = sum(state.objective_terms.values())
>>> jobs = state.counted.nonzero()[0]
>>> gain, moves = beam_group_moves(state, jobs[state.cell[jobs] == state.cell[jobs[0]]])
>>> abs(before - gain - sum(state.objective_terms.values())) < 1e-9
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fleetplan.models.placement.bound import LowerBound
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.hill_climb import Candidate
from fleetplan.solvers.placement.climb.state import TetrisState
from fleetplan.solvers.placement.neighbourhood.gaps import group_gaps
from fleetplan.solvers.placement.neighbourhood.groups import _cheapest_split
from fleetplan.solvers.placement.neighbourhood.steps import (
    IMPROVEMENT,
    feasible,
    polish_from,
    quota_left,
    snapshot,
    step,
)

# The group's jobs with the most GPU-hours that get options; of those, the largest whose every
# option is tried first; the options of each other job tried next; the most jobs one compound
# move changes (at 1,000 tables, seed 0, one A100 priority-3 arrangement needed four: the
# 562-hour job moved and three large jobs in its new region split).
MAX_JOBS = 6
FIRST_JOBS = 2
NEXT_OPTIONS = 4
DEPTH = 4
# The groups (furthest above their bound first) one pass tries.
GROUPS = 2

Option = tuple[int, list[tuple[int, int]]]  # (job, [(table, target region)])


def _options(state: TetrisState, job: int) -> list[Option]:
    """Every region where the job's GPU type is supplied (all its tables there), and its
    cheapest split (when it is placed and may split)."""
    a = state.arrays
    own = np.unique(a.job_tables[a.job_ptr[job]:a.job_ptr[job + 1]])
    movable = a.table_size[own] <= a.move_quota_bytes
    options: list[Option] = []
    for r in np.flatnonzero(a.gpu_supply[:, a.job_gpu_type[job]] > 0).tolist():
        if r == state.region[job]:
            continue
        away = state.home[own] != r
        if away.any() and movable[away].all():
            options.append((job, [(int(t), r) for t in own[away].tolist()]))
    if state.region[job] >= 0 and own.size > 1:
        split = _cheapest_split(state, job, np.inf)
        if split is not None:
            options.append((job, [(int(split.item), int(split.target))]))
    return options


def _value(state: TetrisState, moves: list[tuple[int, int]]) -> float:
    """The objective after ``moves``, the state left as it was."""
    saved: list[tuple] = []
    _apply(state, moves, saved, [])
    value = sum(state.objective_terms.values())
    state._restore(saved[0])
    return value


def _apply(state: TetrisState, moves: list[tuple[int, int]], saved: list[tuple], applied: list[Candidate]) -> None:
    """Apply ``moves`` table by table (exact steps), saving the state first on ``saved``."""
    saved.append(state._save(np.array([t for t, _ in moves], dtype=np.int64)))
    for table, target in moves:
        if state.home[table] != target:
            move = step(state, table, target)
            state.apply(move)
            applied.append(move)


def beam_group_moves(state: TetrisState, jobs: np.ndarray, deadline: Deadline | None = None, *,
                     max_jobs: int = MAX_JOBS, first_jobs: int = FIRST_JOBS, depth: int = DEPTH) -> tuple[float, list[Candidate]]:
    """The search of the module docstring over ``jobs`` (one GPU group's); the best improving
    feasible sequence applied. Returns (exact gain, moves applied); (0, []) and the state
    unchanged when none improves."""
    a = state.arrays
    deadline = deadline or Deadline(None)
    jobs = jobs[a.job_gpu_hours[jobs] > 0]
    jobs = jobs[np.lexsort((jobs, -a.job_gpu_hours[jobs]))][:max_jobs].tolist()
    if not jobs:
        return 0.0, []
    before = snapshot(state)
    start = sum(state.objective_terms.values())
    best: tuple[float, list[Option]] = (start - IMPROVEMENT * max(1.0, abs(start)), [])
    # Each job's options, computed once from the current state; after the first move only the
    # NEXT_OPTIONS best of each (by their value alone) are tried.
    options = {job: _options(state, job) for job in jobs}
    ranked = {job: sorted(found, key=lambda option: _value(state, option[1]))[:NEXT_OPTIONS]
              for job, found in options.items()}
    for first in [option for job in jobs[:first_jobs] for option in options[job]]:
        if deadline.expired():
            break
        # The first move forced (it may lose), then the best next move of another job, greedily.
        saved: list[tuple] = []
        sequence = [first]
        _apply(state, first[1], saved, [])
        while True:
            value = sum(state.objective_terms.values())
            if value < best[0] and feasible(state, before, quota_left(state)):
                best = (value, list(sequence))
            used = {job for job, _ in sequence}
            if len(sequence) >= depth or deadline.expired():
                break
            step_best: tuple[float, Option | None] = (np.inf, None)
            for job in jobs:
                if job in used:
                    continue
                for option in ranked[job]:
                    trial = _value(state, option[1])
                    if trial < step_best[0]:
                        step_best = (trial, option)
            if step_best[1] is None:
                break
            sequence.append(step_best[1])
            _apply(state, step_best[1][1], saved, [])
        for entry in reversed(saved):
            state._restore(entry)
    if not best[1]:
        return 0.0, []
    applied: list[Candidate] = []
    saved = []
    for _, moves in best[1]:
        _apply(state, moves, saved, applied)
    gain = start - sum(state.objective_terms.values())
    if gain <= IMPROVEMENT * max(1.0, abs(start)) or not feasible(state, before, quota_left(state)):
        for entry in reversed(saved):
            state._restore(entry)
        return 0.0, []
    return gain, applied


@dataclass
class GroupMovesOutcome:
    """Groups tried and kept by :func:`group_moves_pass`, the exact gain (moves and polish) and
    the moves applied."""

    tried: int = 0
    kept: int = 0
    gain: float = 0.0
    moves: list[Candidate] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def group_moves_pass(state: TetrisState, bound: LowerBound, deadline: Deadline, fruitless: set, *,
                     groups: int = GROUPS) -> GroupMovesOutcome:
    """:func:`beam_group_moves` on the ``groups`` GPU groups furthest above their part of
    ``bound`` (:func:`group_gaps`), each kept move polished by the climb. ``fruitless`` holds
    (group, plan value) pairs already tried without gain (updated here): a group whose value
    has not changed since is not tried again."""
    outcome = GroupMovesOutcome()
    for group in group_gaps(state, bound)[:groups]:
        key = (group.cell, round(group.plan, 12))
        if group.gap <= 1e-9 or key in fruitless or deadline.expired():
            continue
        outcome.tried += 1
        gain, moves = beam_group_moves(state, group.jobs, deadline)
        if not moves:
            fruitless.add(key)
            continue
        climb = polish_from(state, np.array([m.item for m in moves]), deadline)
        outcome.kept += 1
        outcome.moves.extend(moves + list(climb.applied))
        outcome.gain += gain + climb.total_gain
        outcome.lines.append(f"group moves ({group.name}, {group.gap:.3g} above its bound): {len(moves)} tables "
                             f"moved, gain {gain:.6g}, then {len(climb.applied)} climb moves "
                             f"(+{climb.total_gain:.6g})")
    return outcome


__all__ = ["GroupMovesOutcome", "beam_group_moves", "group_moves_pass"]
