"""Solvers of the ``placement`` kind: Tetris hill climbing (MAST §3.4), a greedy baseline and
today's placement (§5.6's V0), each optionally followed by the §3.5 replicas.

The climb moves tables one at a time over :class:`~fleetplan.solvers.placement.climb.state.TetrisState`
(the incremental view of a placement, where each move's gain is computed); the first pass and
the batch estimates are in :mod:`fleetplan.solvers.placement.climb.first_pass`.

The other families have their own sub-packages: :mod:`~fleetplan.solvers.placement.climb` (the
state and the gains), :mod:`~fleetplan.solvers.placement.neighbourhood` (``lns`` and the compound
moves) and :mod:`~fleetplan.solvers.placement.exact` (``mip-highs``, ``cpsat``).
"""

from __future__ import annotations

import time

import numpy as np

from fleetplan.instances.placement import (
    Move,
    PlacementInstance,
    PlacementPlan,
)
from fleetplan.instances.placement.evaluate import (
    evaluate,
    objective_terms,
)
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.hill_climb import Budget, Candidate, ClimbResult, hill_climb
from fleetplan.solvers.placement.climb.first_pass import first_pass_batches
from fleetplan.solvers.placement.climb.state import TERMS, TetrisState  # noqa: F401  (TERMS re-exported)
from fleetplan.solvers.placement.replicas import add_replicas

# Under a time limit the first pass applies its queued moves after every this many seconds of
# evaluating tables (then evaluates more): at 10^6 tables one full pass took 23 s before the
# first move, so a planner watching the climb, or stopping it, waited that long
# for any gain.
FIRST_BATCH_S = 2.0
# Without a limit the same alternation is counted, not timed — up to FIRST_BATCH_MOVES queued
# moves after every FIRST_BATCH_ITEMS tables evaluated, on instances of at least twice that many
# tables (smaller ones evaluate every table first, as §3.4) — so that the plan does not depend
# on the machine's speed: timed batches gave a different plan on every run (at 10^5 tables the
# first run of a process, slowed by compiling the kernels, had two batches and the later runs
# one; at 10^6 tables five runs gave 24.04-24.09).
FIRST_BATCH_ITEMS = 65_536
FIRST_BATCH_MOVES = 1_024
# The hill-climb solver's stopping rule (options stop_window, stop_gain): once the first pass is
# done, stop when the last STOP_WINDOW moves together gained less than STOP_GAIN of the climb's
# total gain. At 10^6 tables (benchmarks/results/placement.md) the queue's tail after the byte
# quota is used is 10,000 moves of ever smaller gain: stopped here, the climb took 19.9 s of CPU
# for 24.0547 instead of 33.5 s for 24.0509 (the plan measured before the counted batches:
# 24.0596). A climb of fewer moves than the window is not changed.
STOP_WINDOW = 1_024
STOP_GAIN = 1e-4


def polish(instance: PlacementInstance, home: np.ndarray, time_limit: float | None
           ) -> tuple[np.ndarray, ClimbResult]:
    """Hill-climb (§3.4) from ``home`` with what is left of the byte quota: how an exact
    solver's plan is checked (a proven optimum cannot be improved) and improved when it
    was not one. Returns the new homes and the climb."""
    state = TetrisState(instance, home)
    a = instance.arrays()
    quota = a.move_quota_bytes
    moved = float(a.table_size[state.home != a.table_home].sum())
    budget = Budget(time_s=time_limit, cost=None if not np.isfinite(quota) else max(quota - moved, 0.0))
    climb = hill_climb(state, budget=budget, neighbours=state.neighbours)
    return state.home, climb


def instance_terms_start(instance: PlacementInstance) -> dict[str, float]:
    """The objective terms of today's placement (the climb's starting point), computed once
    per instance (the climb's log and lns's trace both start from it)."""
    a = instance.arrays()
    return dict(a.once("terms_start", lambda: objective_terms(a, a.table_home)))


def _thin(trace: list[tuple[float, float, int]], count: int) -> list[tuple[float, float, int]]:
    """At most ``count`` points of a trace, evenly spread, the last one kept."""
    if len(trace) <= count:
        return list(trace)
    picks = np.linspace(0, len(trace) - 1, count).round().astype(int)
    return [trace[i] for i in sorted(set(picks.tolist()))]


def _single(applied: list[Candidate]) -> list[Candidate]:
    """Compound moves split into their tables' moves, the gain and terms shared equally (so
    the moves' gains still add up to the objective's fall)."""
    out = []
    for m in applied:
        if not m.members:
            out.append(m)
            continue
        k = len(m.members)
        for table, source in m.members:
            out.append(Candidate(table, m.target, m.gain / k, {n: v / k for n, v in m.terms.items()},
                                 source=source))
    return out


def _moves(instance: PlacementInstance, applied: list[Candidate]) -> list[Move]:
    a = instance.arrays()
    return [Move.model_construct(table=a.table_ids[m.item], source="", target=a.region_ids[m.target],
                                 bytes=float(a.table_size[m.item]), gain=m.gain, terms=m.terms)
            for m in applied]


def _finish(instance: PlacementInstance, home: np.ndarray, applied: list[Candidate], climb: ClimbResult | None,
            replicas: bool, partitions_only: bool, hot_replica_share: float, time_up: bool) -> SolveResult:
    a = instance.arrays()
    compound = sum(1 for m in applied if m.members)
    applied = _single(applied)
    moves = _moves(instance, applied)
    # The source of each move is the table's home just before it moved.
    current = a.table_home.copy()
    for move, candidate in zip(moves, applied, strict=True):
        move.source = a.region_ids[current[candidate.item]]
        current[candidate.item] = candidate.target
    log = []
    stats: dict[str, float] = {}
    if climb is not None:
        log.append(f"hill climb: {len(applied)} table moves ({compound} compound), stopped by {climb.stopped_by}, "
                   f"{climb.evaluated} "
                   f"evaluations, {climb.requeued} re-queued, {climb.skipped_over_budget} over the quota")
        start = sum(instance_terms_start(instance).values()) if climb.trace else 0.0
        points = _thin(climb.trace, 12)
        if points:
            log.append("objective against time: " + ", ".join(
                f"{t:.2f} s {start - gain:.6g} ({moves} moves)" for t, gain, moves in points))
        first = next((t for t, _, moves in climb.trace if moves > 0), None)
        if first is not None:
            stats["first_move_s"] = first  # seconds from the climb's start to its first applied move
        stats.update({"batches": float(climb.batches), "refused_undo": float(climb.refused_undo),
                      "estimated": float(climb.estimated), "over_quota": float(climb.skipped_over_budget)})
        stats.update({"moves": float(len(applied)), "evaluations": float(climb.evaluated),
                      "requeued": float(climb.requeued), "climb_s": climb.wall_s,
                      "bytes_moved": climb.cost_used, "total_gain": climb.total_gain})
    replica_columns = None
    if replicas:
        replica_columns, note = add_replicas(instance, home, partitions_only=partitions_only,
                                             hot_replica_share=hot_replica_share)
        log.append(note)
    plan = PlacementPlan.from_arrays(instance, home, replicas=replica_columns, moves=moves)
    status = "time_limit" if time_up else "feasible"
    return SolveResult(status=status, plan=plan, log=log, stats=stats,
                       message=log[0] if log else "today's placement")


def _climb(instance: PlacementInstance, recompute: bool, time_limit: float | None, progress: Progress,
           max_moves: int | None, requeue_neighbours: bool, compound: bool = False,
           stop: tuple[int, float] = (0, 0.0)) -> tuple[TetrisState, ClimbResult, float]:
    """One clock for the climb and what follows it (replicas, building the plan, the judge):
    their time is estimated from one judging of today's plan and kept back. Under a limit
    the first pass works in batches of a twentieth of the limit, applying each batch's moves
    before evaluating more tables, so a limit shorter than a full pass still improves the
    plan (at 10^5 tables, 20 s gave 0 moves). ``stop``: the engine's (``stop_window``,
    ``stop_gain``). Returns the state, the climb and the seconds kept back for what follows
    (0 without a limit)."""
    deadline = Deadline(time_limit)
    state = TetrisState(instance, compound=compound)
    climb_s = None
    after_s = 0.0
    if time_limit is not None:
        started = time.perf_counter()
        PlacementPlan.from_arrays(instance, state.home).home_array(instance)
        evaluate(instance, PlacementPlan.from_arrays(instance, state.home))
        after_s = 3.0 * (time.perf_counter() - started) + 0.02
        climb_s = 0.0 if deadline.expired(after_s) else time_limit - deadline.elapsed() - after_s
    quota = instance.arrays().move_quota_bytes
    budget = Budget(time_s=climb_s, moves=max_moves, cost=None if not np.isfinite(quota) else quota)
    result = hill_climb(state, budget=budget, recompute=recompute, progress=progress, initial=first_pass_batches(state),
                        neighbours=state.neighbours if requeue_neighbours else None,
                        stop_window=stop[0], stop_gain=stop[1], **_first_pass_batches(time_limit, state.num_tables))
    return state, result, after_s


def _first_pass_batches(time_limit: float | None, num_tables: int) -> dict[str, float | int]:
    """How the first pass alternates with applying moves: timed under a limit (a twentieth of
    it, at most FIRST_BATCH_S), counted without one (FIRST_BATCH_ITEMS, on large instances),
    so that a climb without a limit gives the same plan on every run and machine."""
    if time_limit is not None:
        return {"batch_s": min(FIRST_BATCH_S, max(0.02, time_limit / 20))}
    if num_tables >= 2 * FIRST_BATCH_ITEMS:
        return {"batch_items": FIRST_BATCH_ITEMS, "batch_moves": FIRST_BATCH_MOVES}
    return {}


@register("placement", "hill-climb", exact=False,
          description="Tetris §3.4: per-table best region, a queue ordered by gain, gain recomputed "
                      "before each move, the daily byte quota; then §3.5 replicas",
          reference="Choudhury et al., MAST, OSDI 2024, §3.4-3.5")
def tetris_hill_climb(instance: PlacementInstance, *, time_limit: float | None = None, seed: int = 0,
                      threads: int = 1, progress: Progress, replicas: bool = True,
                      partitions_only: bool = False, hot_replica_share: float = 0.1,
                      max_moves: int | None = None, requeue_neighbours: bool = True,
                      compound_moves: bool = False, group_split_tables: int = 0,
                      stop_window: int = STOP_WINDOW, stop_gain: float = STOP_GAIN) -> SolveResult:
    """Hill-climb the table homes from today's placement, then add replicas (§3.5).

    Parameters
    ----------
    partitions_only : bool
        replicas copy only the partitions jobs read (``read_fraction``), not whole tables
    compound_moves : bool
        also move all tables of a split multi-table ML job to one region at once
    group_split_tables : int
        when > 0, a last move type once the climb stops: every job of a GPU group split at once
        where that lowers the objective (at most this many tables moved per group;
        :mod:`fleetplan.solvers.placement.neighbourhood.groups`), then the climb again from the moved tables.
        0 (the default) keeps §3.4's single moves only
    stop_window : int
        once the first pass is done, the climb stops when its last ``stop_window`` moves
        together gained less than ``stop_gain`` times its total gain (the log then says
        "stopped by gain"); counted in moves, so a plan does not depend on the machine. 0 climbs
        until the queue is empty or the byte quota is used, as §3.4. At 10^6 tables the
        default stopped the climb after 24,168 of its 34,055 moves, 19.9 s of CPU instead of
        33.5 s, for 0.016 % of the objective (benchmarks/results/placement.md)
    stop_gain : float
        the share of the climb's total gain below which the last ``stop_window`` moves stop it

    Examples
    --------
    >>> import fleetplan
    >>> instance = fleetplan.generate("placement", {"regions": 4, "tables": 80, "jobs": 80}, seed=0)
    >>> result = fleetplan.solve(instance, "hill-climb")
    >>> result.evaluation.feasible, result.objective <= fleetplan.solve(instance, "keep").objective
    (True, True)
    """
    for name, value in (("group_split_tables", group_split_tables), ("stop_window", stop_window),
                        ("stop_gain", stop_gain)):
        if value < 0:
            from fleetplan.instances import InstanceError

            raise InstanceError(f"options.{name}", "must be >= 0")
    deadline = Deadline(time_limit)
    state, climb, after_s = _climb(instance, True, time_limit, progress, max_moves, requeue_neighbours,
                                   compound_moves, (stop_window, stop_gain))
    splits = None
    if group_split_tables > 0 and climb.stopped_by != "time":
        from fleetplan.solvers.placement.neighbourhood.groups import split_sweep

        # What the climb kept back for the finish (replicas, the plan, the judge) stays kept.
        left = None if time_limit is None else max(0.0, time_limit - deadline.elapsed() - after_s)
        splits = split_sweep(state, group_split_tables, Deadline(left))
        climb.applied.extend(splits.moves)
        climb.total_gain += splits.gain
        climb.cost_used += sum(move.cost for move in splits.moves)
    result = _finish(instance, state.home, climb.applied, climb, replicas, partitions_only,
                     hot_replica_share, climb.stopped_by == "time")
    if splits is not None:
        result.log[1:1] = splits.lines
        result.stats["group_splits"] = float(splits.kept)
    result.model_objective = float(sum(state.objective_terms.values()))
    return result


@register("placement", "greedy", exact=False,
          description="baseline: each table's best region computed once from today's placement, "
                      "applied in order of that gain without recomputation; then §3.5 replicas")
def tetris_greedy(instance: PlacementInstance, *, time_limit: float | None = None, seed: int = 0,
                  threads: int = 1, progress: Progress, replicas: bool = True,
                  partitions_only: bool = False, hot_replica_share: float = 0.1) -> SolveResult:
    """Every table to the region best for it alone (from the starting state), in gain order;
    a move is only re-checked for feasibility, so later moves may undo earlier gains.

    Parameters
    ----------
    partitions_only : bool
        replicas copy only the partitions jobs read (``read_fraction``), not whole tables
    """
    state, climb, _ = _climb(instance, False, time_limit, progress, None, False)
    result = _finish(instance, state.home, climb.applied, climb, replicas, partitions_only,
                     hot_replica_share, climb.stopped_by == "time")
    result.model_objective = float(sum(state.objective_terms.values()))
    return result


@register("placement", "keep", exact=False,
          description="today's placement, tables do not move (§5.6's V0); replicas optional")
def keep(instance: PlacementInstance, *, time_limit: float | None = None, seed: int = 0,
         threads: int = 1, progress: Progress, replicas: bool = False,
         partitions_only: bool = False, hot_replica_share: float = 0.1) -> SolveResult:
    """The V0 baseline: every table stays in its current home region.

    Parameters
    ----------
    partitions_only : bool
        replicas copy only the partitions jobs read (``read_fraction``), not whole tables
    """
    return _finish(instance, instance.arrays().table_home.copy(), [], None, replicas, partitions_only,
                   hot_replica_share, False)


from fleetplan.solvers.placement.neighbourhood import lns  #noqa: E402, F401
