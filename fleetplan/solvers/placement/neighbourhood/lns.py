"""Large-neighbourhood search for Tetris (MAST §3.4 and beyond): the hill climb, then repeatedly
free a *neighbourhood* of tables, re-optimise it exactly with the placement MIP (the rest fixed)
and keep the answer when the exact objective falls; each kept answer is polished by the climb.

Why: the climb moves one table (or one split job) at a time, so it stops where every single
move loses, although moving several tables together would gain — an ML job whose tables must
go together, two regions that should swap load, an overloaded (region, GPU type) whose jobs
must leave at once. §3.4 itself notes that "a comprehensive comparison with local-search
alternatives is yet to be conducted". A neighbourhood of a few dozen tables is a MIP HiGHS
solves in milliseconds to a fraction of a second (:mod:`fleetplan.models.placement.neighbourhood`).

Neighbourhoods, in turn (each picked at random by the seed, so runs repeat;
:mod:`fleetplan.solvers.placement.neighbourhood.picks`): ``jobs`` (a few jobs sharing tables), ``pair`` (two
regions' tables), ``overload`` (an overloaded region x GPU type's jobs) and ``gap`` (jobs of
the GPU group furthest above its part of the lower bound).

Before the first neighbourhood, after each kept one and after the last, every GPU group's
compound split is tried in turn (``group_split_tables``,
:mod:`fleetplan.solvers.placement.neighbourhood.groups`: every job of the group split at once, a few table
moves and no MIP): under ``split_ml_demand="ignored"`` a group whose jobs are all
split costs nothing in Expressions 7-8, a gain no single move and no neighbourhood grown from
one job through shared tables can see (at 1,000 tables, seed 0: the plan 28.17 before, 22.36
after splitting the two priority-0 V100 jobs). The two groups furthest above their bound also
get compound moves of their largest jobs (:mod:`fleetplan.solvers.placement.neighbourhood.group_moves`:
several jobs moved or split at once, found by exact scoring, no MIP): before the first
neighbourhood, when the neighbourhoods stall, at the end and, under a time limit, every fifth
of it (at 1,000 tables, seed 0: 0.31 gained on the A100 priority-3 group, where the MIPs had
found nothing).

When it stops (:func:`search`): without a time limit, after ``patience`` fruitless
neighbourhoods in a row or the search budget; under one, at the limit — fruitless
neighbourhoods make them larger instead (at most three times) — or when the plan meets the
lower bound.

Every step keeps the climb's guarantees: the sub-MIP's rows are the hard constraints the climb
keeps (no worse than today where today breaks one), its MIP start is the current placement, and
an answer is applied table by table through :class:`TetrisState` (whose gains are exact), then
checked (storage, CPU, home training, quota) and undone unless the exact objective fell. So the
plan is never worse than the climb's, which is never worse than today's. The move log holds the
climb's moves and each neighbourhood's table moves, in order, with their exact gains (a table
moved inside a neighbourhood may have a negative gain of its own; the neighbourhood's sum is
positive); the solver's log names every kept neighbourhood. Sub-MIPs stop on a node limit, not a
clock, so without a time limit the same seed gives the same plan.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from fleetplan.instances.placement import ML, PlacementInstance
from fleetplan.lazy import lazy_module
from fleetplan.models.placement.bound import LowerBound
from fleetplan.models.placement.neighbourhood import Background, neighbourhood_model
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.hill_climb import Candidate, ClimbResult
from fleetplan.solvers.placement.climb.state import TetrisState
from fleetplan.solvers.placement.neighbourhood.group_moves import group_moves_pass
from fleetplan.solvers.placement.neighbourhood.groups import split_sweep
from fleetplan.solvers.placement.neighbourhood.picks import NeighbourhoodPicker
from fleetplan.solvers.placement.neighbourhood.steps import (
    IMPROVEMENT,
    feasible,
    polish_from,
    quota_left,
    step,
    with_quota,
)

highs_run = lazy_module("fleetplan.solvers.highs")

NEIGHBOURHOOD_KINDS = ("jobs", "pair", "overload", "gap")
# The node limit when the whole instance is one neighbourhood (its MIP is then the exact solve).
WHOLE_NODES = 1_000_000
# A neighbourhood whose MIP has more binaries is not solved (its kind's size shrinks): one of
# 3,900 GPU-level binaries took 68 s at 10^4 tables, where most take a fraction of a second.
MAX_BINARIES = 1500
# Pairs of (total, region) demand levels per slice and region before the levels coarsen.
MAX_PAIRS = 256
MIN_TABLES = 4
SUB_LIMIT_S = 5.0
# A neighbourhood's model must claim at least this relative fall to be applied (the storage
# tangents under-estimate by about this much between their points).
CLAIM = 1e-5
# HiGHS 1.14's MIP presolve returned wrong answers on these models (an improving neighbourhood
# reported "optimal" at its start, or "infeasible"; see also solvers/placement/exact/__init__.py).
PRESOLVE = "off"
# The stopping rule without a time limit (the ``search_ratio`` and ``search_min_s`` options):
# the search after the climb runs at most SEARCH_RATIO times the climb's seconds, and at least
# SEARCH_MIN_S (a 100-table climb takes 10-20 ms). On the 100-table seed 101 above a 1 s limit
# took the climb's 17.0 to 9.79, 3 s to 9.554, 48 s (patience) to 9.525.
SEARCH_RATIO = 10.0
SEARCH_MIN_S = 1.0
# The most tables one whole-group split moves (the ``group_split_tables`` option): one per job
# still placed, so groups of up to this many jobs are split at once.
GROUP_SPLIT_TABLES = 32
# Under a time limit, ``patience`` fruitless neighbourhoods in a row make the neighbourhoods
# larger (tables x GROW, node limit x 2) at most this many times before the search stops.
ESCALATIONS = 3
GROW = 1.5
# The most seconds one pass of the groups' compound moves takes (about 2 s for the A100
# priority-3 group at 1,000 tables, seed 0).
GROUP_MOVES_S = 10.0
# A pass of them every this share of the search's time (and when the neighbourhoods stall),
# each at most this share of it.
GROUP_MOVES_EVERY = 0.2
GROUP_MOVES_SHARE = 0.1


def search_budget_s(climb_s: float, ratio: float = SEARCH_RATIO, floor_s: float = SEARCH_MIN_S) -> float:
    """Seconds the search may run after a climb of ``climb_s`` seconds without a time limit.

    >>> search_budget_s(0.02), search_budget_s(30.0)
    (1.0, 300.0)
    """
    return max(ratio * climb_s, floor_s)


@dataclass
class LnsStats:
    """What the search did: neighbourhoods tried / improving per kind, MIP seconds, and the
    trace (seconds since the solve started, objective, moves)."""

    tried: dict[str, int] = field(default_factory=lambda: dict.fromkeys(NEIGHBOURHOOD_KINDS, 0))
    kept: dict[str, int] = field(default_factory=lambda: dict.fromkeys(NEIGHBOURHOOD_KINDS, 0))
    rejected: int = 0
    mip_s: float = 0.0
    build_s: float = 0.0
    not_exact: int = 0
    too_big: int = 0
    gain: float = 0.0
    group_splits: int = 0  # whole-group splits kept by the sweeps
    escalations: int = 0  # times the neighbourhoods grew under a time limit (``search``)
    group_moves: int = 0  # compound moves of one group's large jobs kept (``_group_moves``)
    lines: list[str] = field(default_factory=list)


def background(state: TetrisState) -> Background:
    """The state's arrays as the sub-model's fixed part (no copies)."""
    return Background(home=state.home, region=state.region, dregion=state.dregion, demand=state.demand,
                      demand_count=state.demand_count, cpu=state.cpu, hp_at_home=state.hp_at_home,
                      home_bytes=state.home_bytes, reader_ptr=state.reader_ptr, readers=state.readers)


class Search(NeighbourhoodPicker):
    """One run of the search over a :class:`TetrisState` (see the module docstring); its
    neighbourhoods are drawn by :class:`NeighbourhoodPicker`."""

    def __init__(self, state: TetrisState, seed: int, max_free: int, max_regions: int, node_limit: int,
                 threads: int, bound: LowerBound | None = None) -> None:
        self.state = state
        self.bound = bound
        self.a = state.arrays
        self.rng = np.random.default_rng(seed)
        self.max_free = max_free
        self.max_regions = max_regions
        self.node_limit = node_limit
        self.threads = threads
        self.seed = seed
        self.stats = LnsStats()
        self.stop_rule = ""  # why :func:`search` stopped before its deadline (empty: it did not)
        self.fruitless_groups: set = set()  # (group, plan value) tried by _group_moves without gain
        self.applied: list[Candidate] = []
        a = self.a
        self.planned = np.flatnonzero(a.planned & (np.diff(a.job_ptr) > 0))
        self.ml = self.planned[a.job_kind[self.planned] == ML]
        self.movable = a.table_size <= a.move_quota_bytes

    # --- one neighbourhood --------------------------------------------------------------------
    def solve(self, tables: np.ndarray, regions: np.ndarray | None, time_limit: float | None,
              nodes: int | None = None) -> tuple[float, int]:
        """Re-optimise ``tables`` (``nodes``: the node limit, the search's by default); returns (exact gain kept, tables moved) — (0, 0) when nothing
        better was found or the answer was undone."""
        s = self.state
        started = time.perf_counter()
        whole = nodes is not None
        model = neighbourhood_model(self.a, background(s), tables, regions, max_pairs=1024 if whole else MAX_PAIRS)
        if model is not None and not whole and int(model.lp.integrality.sum()) > MAX_BINARIES:
            # Too big with every job free to split: placed ML jobs stay placed (they may still
            # move), which keeps each slice's total demand from varying with them.
            model = neighbourhood_model(self.a, background(s), tables, regions, keep_placed=True,
                                        max_pairs=MAX_PAIRS)
        self.stats.build_s += time.perf_counter() - started
        if model is None:
            return 0.0, 0
        if not whole and int(model.lp.integrality.sum()) > MAX_BINARIES:
            self.stats.too_big += 1
            return 0.0, -1
        if not model.exact:
            self.stats.not_exact += 1
        started = time.perf_counter()
        highs = highs_run.new_highs(time_limit, self.threads, self.seed)
        # HiGHS checks its own limit only between phases: a 100-table neighbourhood ran for minutes
        # past a 5 s limit inside the root node's sub-MIP heuristics (seed 3, load 5). new_highs
        # already watches branch and bound; the LPs inside it are watched here.
        highs_run.interrupt_at(highs, None if time_limit is None else time.perf_counter() + time_limit,
                               events=("simplex", "ipm"))
        highs_run.pass_lp(highs, model.lp, "simplex")
        highs.setOptionValue("presolve", PRESOLVE)
        highs.setOptionValue("mip_rel_gap", 1e-7)
        highs.setOptionValue("mip_max_nodes", int(self.node_limit if nodes is None else nodes))
        solution = highs_run.highspy.HighsSolution()
        solution.col_value = model.start.tolist()
        solution.value_valid = True
        highs.setSolution(solution)
        outcome = highs_run.run(highs)
        self.stats.mip_s += time.perf_counter() - started
        if outcome.values is None or outcome.objective is None:
            return 0.0, 0
        if outcome.objective > model.start_cost - CLAIM * max(1.0, abs(model.start_cost)):
            return 0.0, 0
        homes = model.homes(outcome.values)
        change = np.flatnonzero(homes != s.home[model.free])
        if change.size == 0:
            return 0.0, 0
        return self.apply(model.free[change], homes[change])

    def apply(self, tables: np.ndarray, targets: np.ndarray) -> tuple[float, int]:
        """Move ``tables`` to ``targets`` step by step; undo unless feasible and better."""
        s = self.state
        before = {"home_bytes": s.home_bytes.copy(), "cpu": s.cpu.copy(), "hp": s.hp_at_home}
        objective = sum(s.objective_terms.values())
        saved = s._save(tables)
        moves = []
        for t, r in zip(tables.tolist(), targets.tolist(), strict=True):
            move = step(s, t, r)
            s.apply(move)
            moves.append(move)
        gain = objective - sum(s.objective_terms.values())
        if gain <= IMPROVEMENT * max(1.0, abs(objective)) or not feasible(s, before, quota_left(s)):
            s._restore(saved)
            self.stats.rejected += 1
            return 0.0, 0
        self.applied.extend(moves)
        self.stats.gain += gain
        return gain, len(moves)


def _sweep(run: Search, max_tables: int, deadline: Deadline, when: str, started: float,
           trace: list[tuple[float, float, int]], moves_before: int) -> None:
    """Every group's compound split (:func:`split_sweep`), kept ones polished by the climb."""
    if max_tables <= 0 or deadline.expired():
        return
    state = run.state
    outcome = split_sweep(state, max_tables, deadline)
    run.applied.extend(outcome.moves)
    run.stats.gain += outcome.gain
    run.stats.group_splits += outcome.kept
    run.stats.lines.extend(f"{when}: {line}" for line in outcome.lines)
    if outcome.moves:
        trace.append((time.perf_counter() - started, float(sum(state.objective_terms.values())),
                      moves_before + len(run.applied)))


def _group_moves(run: Search, deadline: Deadline, when: str, started: float, trace: list[tuple[float, float, int]],
                 moves_before: int) -> None:
    """Compound moves of the large jobs of the groups furthest above their bound
    (:mod:`fleetplan.solvers.placement.neighbourhood.group_moves`), each pass given at most GROUP_MOVES_S
    (and GROUP_MOVES_SHARE of the search's time)."""
    if run.bound is None or deadline.expired():
        return
    limit = GROUP_MOVES_S if deadline.time_limit is None else \
        min(GROUP_MOVES_S, GROUP_MOVES_SHARE * deadline.time_limit, deadline.remaining())
    outcome = group_moves_pass(run.state, run.bound, Deadline(limit), run.fruitless_groups)
    run.applied.extend(outcome.moves)
    run.stats.gain += outcome.gain
    run.stats.group_moves += outcome.kept
    run.stats.lines.extend(f"{when}: {line}" for line in outcome.lines)
    if outcome.moves:
        trace.append((time.perf_counter() - started, float(sum(run.state.objective_terms.values())),
                      moves_before + len(run.applied)))


def search(instance: PlacementInstance, state: TetrisState, deadline: Deadline, *, seed: int, max_free: int,
           max_regions: int, node_limit: int, patience: int, threads: int, started: float,
           trace: list[tuple[float, float, int]], moves_before: int, split_tables: int = 0,
           bound: LowerBound | None = None, escalate: bool = False) -> Search:
    """Neighbourhoods until ``patience`` in a row improve nothing or the deadline; kept answers
    are polished by the climb. ``trace`` gets (seconds since ``started``, objective, moves).
    With ``split_tables`` > 0, every GPU group's compound split is tried before, after each
    kept neighbourhood and at the end (:mod:`fleetplan.solvers.placement.neighbourhood.groups`; at most that
    many tables moved per group). With ``bound``, ``gap`` neighbourhoods are drawn from the GPU
    groups furthest above their part of it (:meth:`Search._gap_pick`).

    The stopping rule: without ``escalate`` (the solver passes it without a time limit, when
    ``deadline`` is the search budget), ``patience`` neighbourhoods in a row that improve
    nothing stop the search (so a seed gives one plan). With it (under a time limit) they do
    not while larger neighbourhoods remain to try: every kind's
    neighbourhood grows by GROW and the node limit doubles, at most ESCALATIONS times, and
    ``patience`` is counted afresh; the search stops at the limit, after ``patience``
    fruitless neighbourhoods at the largest size, or when the plan's objective reaches the
    lower bound (nothing left to gain); and its first neighbourhood is a ``gap`` one."""
    run = Search(state, seed, max_free, max_regions, node_limit, threads, bound)
    _sweep(run, split_tables, deadline, "before the neighbourhoods", started, trace, moves_before)
    _group_moves(run, deadline, "before the neighbourhoods", started, trace, moves_before)
    failures = escalations = 0
    rounds = 0
    movable = np.flatnonzero(run.movable)
    if 0 < movable.size <= max_free and not deadline.expired():
        # The whole instance fits in one neighbourhood: solved exactly once, then the rest
        # can only confirm it (a small instance's answer is the MIP's optimum).
        rounds += 1
        gain, moved = run.solve(movable, None, None if deadline.time_limit is None else deadline.remaining(),
                                nodes=WHOLE_NODES)
        run.stats.tried["whole"] = 1
        run.stats.kept["whole"] = int(moved > 0)
        if moved:
            climb = polish_from(state, np.array([m.item for m in run.applied[-moved:]]), deadline)
            run.applied.extend(climb.applied)
            run.stats.gain += climb.total_gain
        run.stats.lines.append(f"neighbourhood 1 (whole instance, {movable.size} tables): {moved} tables moved, "
                               f"gain {gain:.6g}")
        trace.append((time.perf_counter() - started, float(sum(state.objective_terms.values())),
                      moves_before + len(run.applied)))
        failures, escalations = patience, ESCALATIONS  # nothing left to search
    weights = {kind: 1.0 for kind in NEIGHBOURHOOD_KINDS}
    if bound is None:
        weights["gap"] = 0.0
    sizes = dict.fromkeys(NEIGHBOURHOOD_KINDS, max_free)
    # Under a time limit the groups' compound moves are tried again every GROUP_MOVES_EVERY of
    # the search's time (each group only when its value changed since it was last tried);
    # without one only when the neighbourhoods stall and at the end (a clock would make the
    # plan depend on the machine's speed).
    every = GROUP_MOVES_EVERY * deadline.time_limit if escalate and deadline.time_limit else None
    next_pass = deadline.elapsed() + (every or 0.0)
    while not deadline.expired():
        if every is not None and deadline.elapsed() >= next_pass:
            _group_moves(run, deadline, f"after neighbourhood {rounds}", started, trace, moves_before)
            next_pass = deadline.elapsed() + every
        if bound is not None and sum(state.objective_terms.values()) <= bound.value * (1 + 1e-9):
            run.stop_rule = "the plan meeting the lower bound (nothing left to gain)"
            break
        if failures >= patience:
            # The groups' compound moves may pay where the neighbourhoods no longer do.
            kept = run.stats.group_moves
            _group_moves(run, deadline, f"after neighbourhood {rounds}", started, trace, moves_before)
            if run.stats.group_moves > kept:
                failures = 0
                continue
            if not escalate or escalations >= ESCALATIONS:
                run.stop_rule = f"{patience} neighbourhoods in a row improved nothing" + (
                    f" (after {run.stats.escalations} larger sizes)" if run.stats.escalations else "")
                break
            # Time is left: larger neighbourhoods with more nodes may pay where the small ones
            # no longer do (at 1,000 tables the search stopped at 30 s of 60).
            escalations += 1
            sizes = {kind: max(MIN_TABLES, int(round(size * GROW))) for kind, size in sizes.items()}
            run.node_limit *= 2
            failures = 0
            run.stats.escalations += 1
            run.stats.lines.append(f"after neighbourhood {rounds}: {patience} in a row improved nothing; "
                                   f"neighbourhoods of up to {max(sizes.values())} tables, "
                                   f"{run.node_limit} nodes")
        rounds += 1
        kinds = list(NEIGHBOURHOOD_KINDS)
        p = np.array([weights[k] for k in kinds])
        kind = kinds[int(run.rng.choice(len(kinds), p=p / p.sum()))]
        if rounds == 1 and escalate and weights["gap"] > 0:
            # Under a time limit, the group furthest above its bound first: on the 100-table seed
            # 3 its neighbourhood takes the climb's 28.32 to 18.2, and a loaded machine may allow
            # only a few MIPs in 20 s.
            kind = "gap"
        run.max_free = sizes[kind]
        tables, regions, name = run.pick(kind)
        if tables.size == 0:
            failures += 1
            weights[kind] = max(0.2, weights[kind] * 0.95)
            continue
        tables = with_quota(state, tables, run.max_free, run.rng)
        run.stats.tried[kind] += 1
        # Under a time limit one neighbourhood gets at most SUB_LIMIT_S of it (a clock makes runs
        # differ, which a time limit does anyway); without one, the node limit alone.
        limit = None if deadline.time_limit is None else min(SUB_LIMIT_S, max(0.01, deadline.remaining()))
        gain, moved = run.solve(tables, regions, limit)
        if moved < 0:  # too big a MIP: this kind's neighbourhoods shrink
            sizes[kind] = max(MIN_TABLES, int(sizes[kind] * 0.7))
            failures += 1
            continue
        if moved == 0:
            failures += 1
            weights[kind] = max(0.2, weights[kind] * 0.95)
            continue
        failures = 0
        weights[kind] = min(5.0, weights[kind] * 1.3)
        run.stats.kept[kind] += 1
        climb = polish_from(state, np.array([m.item for m in run.applied[-moved:]]), deadline)
        run.applied.extend(climb.applied)
        total = gain + climb.total_gain
        run.stats.gain += climb.total_gain
        if len(run.stats.lines) < 200:
            run.stats.lines.append(f"neighbourhood {rounds} ({kind}: {name}, {tables.size} tables): "
                                   f"{moved} tables moved, gain {gain:.6g}, then {len(climb.applied)} climb moves "
                                   f"(+{climb.total_gain:.6g}); total {total:.6g}")
        trace.append((time.perf_counter() - started, float(sum(state.objective_terms.values())),
                      moves_before + len(run.applied)))
        # A kept neighbourhood may have made a group's split pay (the sweep costs a few table
        # evaluations per group whose jobs may all split).
        _sweep(run, split_tables, deadline, f"after neighbourhood {rounds}", started, trace, moves_before)
    _sweep(run, split_tables, deadline, "after the neighbourhoods", started, trace, moves_before)
    _group_moves(run, deadline, "after the neighbourhoods", started, trace, moves_before)
    return run


def _merged(climb: ClimbResult, run: Search | None, trace: list[tuple[float, float, int]], start: float,
            stopped_by: str) -> ClimbResult:
    """The climb's result with the search's moves and trace appended (the trace as the climb
    keeps it: seconds, total gain, moves), for :func:`fleetplan.solvers.placement._finish`."""
    merged = ClimbResult(applied=list(climb.applied) + (run.applied if run else []), stopped_by=stopped_by,
                         evaluated=climb.evaluated, queued=climb.queued, requeued=climb.requeued,
                         skipped_over_budget=climb.skipped_over_budget, estimated=climb.estimated,
                         refused_undo=climb.refused_undo, batches=climb.batches, cost_used=climb.cost_used,
                         total_gain=climb.total_gain + (run.stats.gain if run else 0.0), wall_s=climb.wall_s,
                         trace=list(climb.trace) + [(t, start - value, moves) for t, value, moves in trace])
    return merged


from fleetplan.models.placement.bound import placement_lower_bound  # noqa: E402
from fleetplan.solvers.base import Progress, SolveResult, register  # noqa: E402
from fleetplan.solvers.placement import _climb, _finish, instance_terms_start  # noqa: E402


@register("placement", "lns", exact=False, default=True,
          description="large-neighbourhood search: the Tetris hill climb, then neighbourhoods of tables "
                      "(a few jobs', a region pair's, an overloaded region x GPU type's) re-optimised by "
                      "the placement MIP (HiGHS) with the rest fixed, and whole GPU groups split at once "
                      "where that gains, each kept answer polished by the "
                      "climb, and the large jobs of the GPU groups furthest above the lower bound moved "
                      "together; then §3.5 replicas. The default: never worse than the climb alone, and far "
                      "better where the climb stops on moves that must go together; it runs to the time "
                      "limit (fruitless neighbourhoods make them larger) or, without one, for at most "
                      "max(10 x the climb's time, 1 s) (search_ratio, search_min_s) or until `patience` "
                      "fruitless neighbourhoods; it stops when the plan meets the bound",
          reference="Choudhury et al., MAST, OSDI 2024, §3.3-3.5; Shaw, CP 1998 (large neighbourhood search)")
def tetris_lns(instance: PlacementInstance, *, time_limit: float | None = None, seed: int = 0,
               threads: int = 1, progress: Progress, replicas: bool = True, partitions_only: bool = False,
               hot_replica_share: float = 0.1, neighbourhood_tables: int = 24, neighbourhood_regions: int = 6,
               node_limit: int = 200, patience: int = 60, compound_moves: bool = False,
               search_ratio: float = SEARCH_RATIO, search_min_s: float = SEARCH_MIN_S,
               group_split_tables: int = GROUP_SPLIT_TABLES, bound: bool = True) -> SolveResult:
    """The hill climb from today's placement, then neighbourhoods re-optimised exactly while they
    improve (:mod:`fleetplan.solvers.placement.neighbourhood.lns`); never worse than the climb.

    The placement default. Why: the climb stops where every single move loses, often far from
    the best plan (``fleetplan generate placement --regions 5 --tables 100 --jobs 100`` seeds 101
    and 103: the climb 17.0 and 15.8, this search 9.55 and 7.92 without a limit), while seconds
    of neighbourhoods bring it near the best plan known; the search starts from the climb's plan and keeps a neighbourhood's answer only when the
    exact objective falls, so the default is never worse than the climb alone.

    When it stops: with a time limit, at the limit; ``patience`` neighbourhoods in a row that
    improve nothing make the neighbourhoods larger (x1.5 tables, x2 nodes, at most three times)
    and the groups' compound moves are tried again, and only ``patience`` more at the largest
    size stop it early — at 1,000 tables the old rule stopped it at 30 s of 60. Without one,
    after ``patience`` fruitless neighbourhoods at the first size, or when the search has run
    ``max(search_ratio x the climb's seconds, search_min_s)``: the extra time is bounded by a
    multiple of the climb's, with a floor because a small instance's climb takes milliseconds.
    The log names the rule that stopped it; the same seed gives the same plan when ``patience``
    stops it (the time rules depend on the machine's speed).

    Parameters
    ----------
    partitions_only : bool
        replicas copy only the partitions jobs read (``read_fraction``), not whole tables
    neighbourhood_tables : int
        the most tables a neighbourhood frees
    neighbourhood_regions : int
        on fleets with more regions, the most regions a neighbourhood's tables may go to
    node_limit : int
        branch-and-bound nodes per neighbourhood's MIP (a node limit, not a clock, so runs repeat)
    patience : int
        without a time limit, stop after this many neighbourhoods in a row improve nothing;
        under one, make them larger (at most three times), then stop
    search_ratio : float
        without a time limit, the search after the climb runs at most this many times the
        climb's seconds (or ``search_min_s``, whichever is longer)
    search_min_s : float
        without a time limit, the search's time when the climb's multiple is shorter
    compound_moves : bool
        the climb also moves all tables of a split multi-table ML job to one region at once
    group_split_tables : int
        the most tables a whole-group split may move (one per job it splits); 0: no group
        splits (:mod:`fleetplan.solvers.placement.neighbourhood.groups`: before the neighbourhoods, after
        each kept one and at the end, every job of a GPU group is split at once when that
        lowers the exact objective; under ``split_ml_demand="ignored"`` a group
        without demand costs nothing in Expressions 7-8)
    bound : bool
        compute the instance's lower bound (:mod:`fleetplan.models.placement.bound`; about 1.4 s
        of CPU at 10^4 tables, 4.1 s at 10^5 at load 4.5), so the result carries ``bound`` and ``gap``, and
        the search draws its ``gap`` neighbourhoods and group moves from it (false: neither)

    Examples
    --------
    >>> import fleetplan
    >>> instance = fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 30}, seed=1)
    >>> result = fleetplan.solve(instance, "lns", patience=10)
    >>> result.evaluation.feasible, result.objective <= fleetplan.solve(instance, "hill-climb").objective + 1e-9
    (True, True)
    """
    for name, value, low in (("neighbourhood_tables", neighbourhood_tables, 1),
                             ("neighbourhood_regions", neighbourhood_regions, 2),
                             ("node_limit", node_limit, 1), ("patience", patience, 0),
                             ("search_ratio", search_ratio, 0), ("search_min_s", search_min_s, 0),
                             ("group_split_tables", group_split_tables, 0)):
        if value < low:
            from fleetplan.instances import InstanceError

            raise InstanceError(f"options.{name}", f"must be >= {low}")
    deadline = Deadline(time_limit)
    started = time.perf_counter()
    state, climb, after_s = _climb(instance, True, time_limit, progress, None, True, compound_moves)
    # Before the search, so that a time limit covers it (1.4 s of CPU at 10^4 tables, 4.1 s at 10^5).
    lower = placement_lower_bound(instance.arrays()) if bound and climb.stopped_by != "time" else None
    start = float(sum(instance_terms_start(instance).values()))
    trace: list[tuple[float, float, int]] = []
    run = None
    stopped = climb.stopped_by
    if stopped != "time":
        # The search's clock keeps back what the finish needs (replicas, the plan, the judge).
        if time_limit is None:
            # The stopping rule without a limit: the search's seconds bounded by a multiple of
            # the climb's (with a floor), counted from the climb's end.
            budget_s = search_budget_s(climb.wall_s, search_ratio, search_min_s)
            inner = Deadline(budget_s)
        else:
            budget_s = None
            inner = Deadline(max(0.0, time_limit - after_s), deadline.started)
        run = search(instance, state, inner, seed=seed, max_free=neighbourhood_tables,
                     max_regions=neighbourhood_regions, node_limit=node_limit, patience=patience,
                     threads=threads, started=started, trace=trace, moves_before=len(climb.applied),
                     split_tables=group_split_tables, bound=lower, escalate=time_limit is not None)
        if not inner.expired():
            stopped = "converged"
            rule = run.stop_rule or f"{patience} neighbourhoods in a row improved nothing"
        elif budget_s is not None:
            stopped = "search budget"
            rule = (f"the search budget without a time limit: {budget_s:.3g} s = max({search_ratio:g} x the "
                    f"climb's {climb.wall_s:.3g} s, {search_min_s:g} s)")
        else:
            stopped, rule = "time", "the time limit"
    merged = _merged(climb, run, trace, start, stopped)
    result = _finish(instance, state.home, merged.applied, merged, replicas, partitions_only, hot_replica_share,
                     stopped == "time")
    if run is not None:
        st = run.stats
        kept = sum(st.kept.values())
        result.log.insert(1, f"search stopped by {rule}")
        result.log.insert(1, f"neighbourhoods: {sum(st.tried.values())} re-optimised, {kept} kept ("
                             + ", ".join(f"{k} {st.kept[k]}/{st.tried[k]}" for k in st.tried)
                             + f"), {st.rejected} undone by the exact check, {st.not_exact} inexact models, "
                               f"{st.too_big} too big, {st.group_splits} whole groups split, "
                               f"{st.escalations} times larger, {st.group_moves} group moves kept; "
                               f"MIP {st.mip_s:.2f} s, building {st.build_s:.2f} s; gain after the climb "
                               f"{st.gain:.6g}")
        result.log.extend(st.lines)
        result.stats.update({"neighbourhoods": float(sum(st.tried.values())), "neighbourhoods_kept": float(kept),
                             "lns_gain": st.gain, "lns_mip_s": st.mip_s, "lns_build_s": st.build_s,
                             "climb_gain": climb.total_gain, "group_splits": float(st.group_splits)})
    result.model_objective = float(sum(state.objective_terms.values()))
    if lower is not None:
        # A proven bound on the optimum, so the result's gap says how far the plan may be from it.
        result.bound = lower.value
        result.stats["instance_bound"] = lower.value
        result.log.append("bound: the instance's lower bound " + ", ".join(
            f"{term} {value:.6g}" for term, value in lower.terms.items()))
    return result
