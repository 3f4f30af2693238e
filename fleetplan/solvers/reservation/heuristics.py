"""Heuristics of the ``reservation`` kind (RAS, MAST §2): ``hill-climb`` on the shared engine of
:mod:`fleetplan.solvers.hill_climb` (its second user after Tetris, §3.4), ``greedy`` and ``keep``.

Both heuristics work on the aggregated state of :mod:`fleetplan.models.reservation`: counts
``x[r, g]`` of servers of group g = (type, fault domain) held by reservation r, plus the free
pool. A *move* takes a block of b servers of one group from a reservation (or the free pool) to
another reservation (or the free pool); blocks are 1, 2, 4, ... servers. The gain of a move is
computed incrementally from per-reservation totals (RRU per fault domain and datacenter, with
the largest and second-largest kept so that "the worst domain with this one changed" is O(1)),
for all candidate reservations of a group at once with numpy.

The cost the climb lowers is the evaluator's objective plus ``SHORTFALL_PENALTY`` per RRU of
guarantee shortfall, so it first repairs reservations that are short, then shrinks buffers,
spreads general and compacts ML reservations. The disruption budget is the engine's cost budget
(a move's cost: servers it takes out of their reservation of today, negative when it brings
them back), so it is never exceeded. Counts become servers through the minimal-move
disaggregation. The engine handles one best move per group per pass; :func:`climb` repeats
passes until one applies nothing (or time runs out), because a move changes the gains of every
group its two reservations touch.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from fleetplan.instances import InstanceError, evaluate
from fleetplan.instances.reservation import (
    DC_LEVEL,
    ReservationInstance,
    ReservationPlan,
)
from fleetplan.solvers.base import Progress, SolveResult, register, relative_gap
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.hill_climb import Budget, Candidate, hill_climb
from fleetplan.solvers.reservation.repair import Repair, relaxation_start, repair
from fleetplan.solvers.reservation.state import (  # noqa: F401  (RasState, penalty: read from here too)
    BLOCK,
    FREE_SIDE,
    SHORTFALL_PENALTY,
    KeyView,
    RasState,
    penalty,
    shortfalls,
)

MAX_EXPLAINED = 200  # moves explained in the log per round
RESERVE_S = 0.3


class _Problem:
    """The engine's view: items 0..G-1 are groups (a block between reservations or the pool),
    items G..G+R-1 are reservations (a block of theirs from one group to another); a target
    encodes (source, target, block)."""

    def __init__(self, state: RasState) -> None:
        self.state = state
        self.num_groups = int(state.groups.type.size)
        self.width = max(state.arrays.num_reservations, self.num_groups) + 1

    def num_items(self) -> int:
        return self.num_groups + self.state.arrays.num_reservations

    def _encode(self, source: int, target: int, b: int) -> int:
        return ((source + 1) * self.width + (target + 1)) * BLOCK * BLOCK + b

    def _decode(self, code: int) -> tuple[int, int, int]:
        pair, b = divmod(code, BLOCK * BLOCK)
        source, target = divmod(pair, self.width)
        return source - 1, target - 1, b

    def best_move(self, item: int) -> Candidate | None:
        if item < self.num_groups:
            best = self.state.best_for(item)
        else:
            best = self.state.best_shift(item - self.num_groups)
        if best is None:
            return None
        change, source, target, b, moves = best
        return Candidate(item, self._encode(source, target, b), self._gain(change, moves),
                         {"objective": change}, cost=moves)

    def _gain(self, change: float, moves: float) -> float:
        """The queue's key: the objective's fall, per server moved when the budget binds (so
        the budget goes to the moves that buy most); ``terms`` keeps the true change."""
        if np.isfinite(self.state.arrays.budget) and moves > 1 and change < 0:
            return -change / moves
        return -change

    def move_to(self, item: int, target: int) -> Candidate | None:
        source, dest, b = self._decode(target)
        if item < self.num_groups:
            found = self.state.exact_change(item, source, dest, b)
        else:
            found = self.state.exact_shift(item - self.num_groups, source, dest, b)
        if found is None:
            return None
        return Candidate(item, target, self._gain(*found), {"objective": found[0]}, cost=found[1])

    def explain(self, move: Candidate) -> str:
        """One line saying what a move did and why (its change of the objective)."""
        arrays, groups = self.state.arrays, self.state.groups
        source, target, b = self._decode(move.target)

        def where(g: int) -> str:
            return f"{arrays.type_ids[groups.type[g]]}@{arrays.fd_ids[groups.fd[g]]}"

        def who(r: int) -> str:
            return "the free pool" if r == FREE_SIDE else f"'{arrays.res_ids[r]}'"

        change = move.terms.get("objective", -move.gain)
        if move.item < self.num_groups:
            what = f"{b} x {where(move.item)} from {who(source)} to {who(target)}"
        else:
            removed, added = divmod(b, BLOCK)
            what = (f"'{arrays.res_ids[move.item - self.num_groups]}': {removed} x {where(source)} out, "
                    f"{added} x {where(target)} in")
        return f"move {what}: objective {change:+.6g}, servers moved {move.cost:+.0f}"

    def apply(self, move: Candidate) -> None:
        source, target, b = self._decode(move.target)
        if move.item < self.num_groups:
            self.state.apply_block(move.item, source, target, b)
        else:
            r = move.item - self.num_groups
            removed, added = divmod(b, BLOCK)
            self.state.apply_block(source, r, FREE_SIDE, removed)
            self.state.apply_block(target, FREE_SIDE, r, added)


def climb(state: RasState, deadline: Deadline, recompute: bool, progress: Progress, log: list[str]) -> str:
    """Rounds of the engine until a round applies nothing; returns why it stopped. When a
    reservation is short, a repair phase (cost: the shortfall alone) runs first, so the budget
    goes to the guarantee before any buffer is trimmed."""
    if shortfalls(state).max(initial=0.0) > 1e-9:
        state.set_repair(True)
        stopped = _rounds(state, deadline, recompute, progress, log, "repair")
        state.set_repair(False)
        if stopped == "time":
            return stopped
    return _rounds(state, deadline, recompute, progress, log, "round")


def _rounds(state: RasState, deadline: Deadline, recompute: bool, progress: Progress, log: list[str],
            name: str) -> str:
    arrays = state.arrays
    problem = _Problem(state)
    rounds = 0
    while True:
        rounds += 1
        remaining = deadline.remaining(RESERVE_S)
        budget = Budget(time_s=remaining, cost=arrays.budget - state.moved if np.isfinite(arrays.budget) else None)
        result = hill_climb(problem, budget=budget, recompute=recompute,
                            neighbours=(lambda move: [move.item]) if recompute else None, min_gain=1e-7)
        log.extend(problem.explain(move) for move in result.applied[:MAX_EXPLAINED])
        if len(result.applied) > MAX_EXPLAINED:
            log.append(f"... {len(result.applied) - MAX_EXPLAINED} more moves")
        log.append(f"{name} {rounds}: {len(result.applied)} moves, "
                   f"objective {state.objective():.6g}, moved {state.moved} ({result.stopped_by})")
        progress(None, log[-1])
        if result.stopped_by == "time" or deadline.expired(RESERVE_S):
            return "time"
        if not result.applied or not recompute:
            return "converged"


def _result(instance: ReservationInstance, state: RasState, stopped: str, log: list[str],
            fixed: Repair | None = None) -> SolveResult:
    """The plan when the judge finds it feasible (``time_limit`` if the clock stopped the
    climb); otherwise no plan, with status ``infeasible`` when the repair proved that no plan
    keeps every guarantee within the budget and ``time_limit`` when it ran out of time, the
    message naming the reservation short and by how many RRU."""
    plan = ReservationPlan.from_arrays(instance, state.assignment())
    verdict = evaluate(instance, plan)
    bound = getattr(state, "lp_bound", None)
    if verdict.feasible:
        objective = state.objective()
        bound = None if bound is None else min(bound, objective)
        return SolveResult(status="time_limit" if stopped == "time" else "feasible", plan=plan,
                           objective=objective, bound=bound, gap=relative_gap(objective, bound), log=log,
                           message="" if bound is None else f"bound {bound:.6g} from the LP relaxation")
    if fixed is not None and fixed.status in ("infeasible", "time_limit"):
        return SolveResult(status=fixed.status, log=log, message=fixed.message)
    short = shortfalls(state)
    r = int(np.argmax(short))
    return SolveResult(status="time_limit", log=log,
                       message=f"no feasible plan found before the time limit: {verdict.violations[0].message} "
                               f"(reservation '{state.arrays.res_ids[r]}' short by {short[r]:.6g} RRU)")


@register("reservation", "hill-climb", exact=False,
          description="hill climb on the shared engine (MAST §3.4's queue by gain): blocks of "
                      "same-type servers of one fault domain between reservations and the free pool",
          reference="Choudhury et al., MAST, OSDI 2024, §2 (RAS) and §3.4 (engine)")
def ras_hill_climb(instance: ReservationInstance, *, time_limit: float | None = None, seed: int = 0,
                   threads: int = 1, progress: Progress, start: Literal["relaxation", "today"] = "relaxation"
                   ) -> SolveResult:
    """Feasibility first, then the climb: from the LP relaxation's rounded plan (or today's),
    any guarantee shortfall repaired by a small MIP (:mod:`.repair`), then the climb; the
    disruption budget is the engine's cost budget.

    Parameters
    ----------
    start : {"relaxation", "today"}
        where the climb starts: the aggregated model's LP relaxation rounded (when it keeps
        every row and costs less than today's plan; skipped on models too large for that LP)
        or today's assignment
    """
    if start not in ("relaxation", "today"):
        raise InstanceError("options.start", f"unknown start '{start}' (relaxation or today)")
    deadline = Deadline(time_limit)
    log: list[str] = []
    state = RasState(instance.arrays())
    if start == "relaxation":
        relaxation_start(state, _inner(deadline, 0.5), threads, seed, log)
    fixed = repair(state, _inner(deadline, 0.8), threads, seed, log)
    if fixed.status in ("infeasible", "time_limit"):
        return _result(instance, state, "time", log, fixed)
    stopped = climb(state, deadline, True, progress, log)
    return _result(instance, state, stopped, log, fixed)


def _inner(deadline: Deadline, share: float) -> Deadline:
    """The same clock ending at ``share`` of the limit (what a step before the climb may use)."""
    if deadline.time_limit is None:
        return deadline
    return Deadline(deadline.time_limit * share, started=deadline.started)


def fill_and_trim(state: RasState, deadline: Deadline, log: list[str]) -> str:
    """The greedy baseline: each reservation in turn (largest request first) is filled from
    the free pool in the fault domain (datacenter for a datacenter guarantee) where it holds
    least, preferred types first, until its guarantee holds; then each trims servers from the
    domain where it holds most while that lowers the objective. Moves within the budget."""
    arrays, groups = state.arrays, state.groups
    order = np.argsort(-arrays.res_request, kind="stable").tolist()
    shortfall = shortfalls(state)
    # Fills first: taking free servers costs no budget, so trims cannot starve a later fill;
    # a second fill after the trims uses what they returned to the pool.
    for step, r in enumerate(order + order):
        if step == len(order):
            if _trim(state, order, deadline) == "time":
                return "time"
            shortfall = shortfalls(state)
        # Every reservation (a check is a clock read; 64 reservations' fills at 10^5 servers
        # took seconds, and the greedy ended 2.2 s past a 3 s limit).
        if deadline.expired(RESERVE_S):
            return "time"
        accepted = np.flatnonzero(state.accept[r])
        domain = groups.dc if state.level[r] == DC_LEVEL else groups.fd
        held = state.dc[r] if state.level[r] == DC_LEVEL else state.fd[r]
        spots = max(1, np.unique(domain[accepted]).size)
        while shortfall[r] > 1e-9:
            if deadline.expired(RESERVE_S):
                return "time"
            open_groups = accepted[state.free[accepted] > 0]
            if not open_groups.size:
                break
            key = np.lexsort((-state.free[open_groups], state.rank[r, open_groups], held[domain[open_groups]]))
            g = int(open_groups[key[0]])
            need = int(np.ceil(shortfall[r] / state.cap[r, g] / spots))
            state.apply_block(g, FREE_SIDE, r, int(min(state.free[g], max(1, need))))
            shortfall = shortfalls(state)
    log.append(f"greedy: objective {state.objective():.6g}, moved {state.moved}")
    return "converged"


def _trim(state: RasState, order: list[int], deadline: Deadline) -> str:
    arrays, groups = state.arrays, state.groups
    for r in order:
        domain = groups.dc if state.level[r] == DC_LEVEL else groups.fd
        held = state.dc[r] if state.level[r] == DC_LEVEL else state.fd[r]
        for _ in range(int(state.x[r].sum())):
            # Each server trimmed is checked: one reservation holds hundreds at 10^5 servers.
            if deadline.expired(RESERVE_S):
                return "time"
            holding = np.flatnonzero(state.x[r] > 0)
            best = None
            for g in holding[np.argsort(-held[domain[holding]], kind="stable")][:4].tolist():
                found = state.exact_change(g, r, FREE_SIDE, 1)
                if found is not None and found[0] < -1e-9 and state.moved + found[1] <= arrays.budget:
                    best = g
                    break
            if best is None:
                break
            state.apply_block(best, r, FREE_SIDE, 1)
    return "converged"


@register("reservation", "greedy", exact=False,
          description="baseline: each reservation in turn filled from the fault domains where it "
                      "holds least, then trimmed from where it holds most")
def ras_greedy(instance: ReservationInstance, *, time_limit: float | None = None, seed: int = 0,
               threads: int = 1, progress: Progress) -> SolveResult:
    """Fill-and-trim per reservation (see :func:`fill_and_trim`); a guarantee it leaves short
    is repaired by a small MIP (:mod:`.repair`)."""
    deadline = Deadline(time_limit)
    log: list[str] = []
    state = RasState(instance.arrays())
    stopped = fill_and_trim(state, _inner(deadline, 0.8), log)
    fixed = repair(state, _inner(deadline, 0.9), threads, seed, log)
    return _result(instance, state, stopped, log, fixed)


@register("reservation", "keep", exact=False, description="today's assignment: nothing moves")
def keep(instance: ReservationInstance, *, time_limit: float | None = None, seed: int = 0,
         threads: int = 1, progress: Progress) -> SolveResult:
    """The baseline: every server stays where it is today. Where today's assignment breaks a
    constraint (a guarantee short), the status is ``infeasible`` — keep has no other plan — and
    the plan comes with it, so that today can still be written (flagged) and compared."""
    plan = ReservationPlan.current(instance)
    verdict = evaluate(instance, plan)
    if verdict.feasible:
        return SolveResult(status="feasible", plan=plan)
    more = f" (and {len(verdict.violations) - 1} more)" if len(verdict.violations) > 1 else ""
    return SolveResult(status="infeasible", plan=plan, message=f"today's assignment breaks a constraint: "
                       f"{verdict.violations[0].message}{more}; keep moves no server (another solver may "
                       "find an assignment that keeps every guarantee)")
