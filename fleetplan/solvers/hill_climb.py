"""A generic hill-climbing engine with a move queue ordered by gain (MAST §3.4).

Tetris "goes over each table and finds the best region for it ... If the best region differs
from the current home region of the table, the table is added to a move queue. The queue is
ordered by the gain of table moves ... Before moving a table, it recalculates its best region
because moving tables in prior iterations may have changed the cost ... The moves continue until
either the queue becomes empty or a daily move quota is reached." This module is that loop,
independent of tables and regions: a problem supplies *items* (things that can move), the best
feasible move of an item from the current state with its gain (cost before minus cost after)
computed incrementally, and how to apply a move. The engine keeps the queue, recomputes a gain
before applying it (lazily: a move whose fresh gain fell below the next queued gain goes back
in the queue), enforces budgets (time, number of moves, a cost such as bytes moved), breaks
ties deterministically (higher gain first, then lower item index) and logs every applied move
with the change of each objective term, so each decision can be explained.

Example: spread two items over two bins to balance them.

>>> class Balance:
...     def __init__(self):
...         self.where = [0, 0]
...     def num_items(self):
...         return 2
...     def _load(self, where):
...         return [where.count(0), where.count(1)]
...     def move_to(self, item, target):
...         after = list(self.where); after[item] = target
...         before_cost = sum(x * x for x in self._load(self.where))
...         after_cost = sum(x * x for x in self._load(after))
...         return Candidate(item, target, before_cost - after_cost, {"squares": after_cost - before_cost})
...     def best_move(self, item):
...         return self.move_to(item, 1 - self.where[item])
...     def apply(self, move):
...         self.where[move.item] = move.target
>>> problem = Balance()
>>> result = hill_climb(problem)
>>> problem.where, [(m.item, m.gain) for m in result.applied], result.stopped_by
([1, 0], [(0, 2)], 'converged')
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

GAIN_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Candidate:
    """A move of ``item`` to ``target``: its gain (cost before - cost after), the change of each
    objective term (after - before), and what it consumes of the cost budget (may be negative,
    e.g. a table moving back home frees quota)."""

    item: int
    target: int
    gain: float
    terms: dict[str, float] = field(default_factory=dict)
    cost: float = 0.0


class HillClimbProblem(Protocol):
    """What the engine needs from a problem. ``best_move`` and ``move_to`` return None when the
    item has no feasible move (or the target is infeasible); they must not change the state."""

    def num_items(self) -> int: ...

    def best_move(self, item: int) -> Candidate | None: ...

    def move_to(self, item: int, target: int) -> Candidate | None: ...

    def apply(self, move: Candidate) -> None: ...


@dataclass
class Budget:
    """Limits of one climb; None means unlimited."""

    time_s: float | None = None
    moves: int | None = None
    cost: float | None = None


@dataclass
class ClimbResult:
    """What the climb did: the applied moves in order, why it stopped, and counters."""

    applied: list[Candidate]
    stopped_by: str  # converged | time | moves | cost
    evaluated: int = 0
    queued: int = 0
    requeued: int = 0
    skipped_over_budget: int = 0
    cost_used: float = 0.0
    total_gain: float = 0.0
    wall_s: float = 0.0


def hill_climb(problem: HillClimbProblem, *, budget: Budget | None = None, recompute: bool = True,
               initial: Iterable[Candidate | None] | None = None,
               neighbours: Callable[[Candidate], Iterable[int]] | None = None,
               min_gain: float = GAIN_TOLERANCE,
               progress: Callable[[float | None, str], None] | None = None) -> ClimbResult:
    """Run the queue-by-gain hill climb of MAST §3.4 on ``problem``.

    ``initial``: the first pass's best moves, if the problem computes them in a batch (one per
    item, None for none); otherwise ``best_move`` is called for every item. ``recompute=False``
    gives the greedy baseline: every item goes to the target of its first-pass move, in the
    first pass's order, re-checked only for feasibility (``move_to``). ``neighbours``: after a
    move, items whose gain it may have changed; those not queued are re-evaluated and queued.
    """
    budget = budget or Budget()
    started = time.perf_counter()
    deadline = math.inf if budget.time_s is None else started + budget.time_s
    result = ClimbResult(applied=[], stopped_by="converged")
    queue: list[tuple[float, int, int]] = []  # (-gain, item, target)
    queued: set[int] = set()
    count = problem.num_items()
    first = iter(initial) if initial is not None else (problem.best_move(i) for i in range(count))
    for position, move in enumerate(first):
        if position % 1024 == 0:
            if time.perf_counter() > deadline:
                result.stopped_by = "time"
                break
            if progress is not None and count:
                progress(0.5 * position / count, f"first pass: {position}/{count} items")
        result.evaluated += 1
        if move is not None and move.gain > min_gain:
            queue.append((-move.gain, move.item, move.target))
            queued.add(move.item)
    heapq.heapify(queue)
    result.queued = len(queue)
    remaining = math.inf if budget.cost is None else budget.cost
    while queue and result.stopped_by == "converged":
        if time.perf_counter() > deadline:
            result.stopped_by = "time"
            break
        if budget.moves is not None and len(result.applied) >= budget.moves:
            result.stopped_by = "moves"
            break
        _, item, target = heapq.heappop(queue)
        queued.discard(item)
        move = problem.best_move(item) if recompute else problem.move_to(item, target)
        result.evaluated += 1
        if move is None or (recompute and move.gain <= min_gain):
            continue
        if recompute and queue and _behind(move.gain, item, queue[0], min_gain):
            heapq.heappush(queue, (-move.gain, item, move.target))  # stale: let better go first
            queued.add(item)
            result.requeued += 1
            continue
        if move.cost > remaining:
            result.skipped_over_budget += 1
            continue
        problem.apply(move)
        remaining -= move.cost
        result.cost_used += move.cost
        result.total_gain += move.gain
        result.applied.append(move)
        if progress is not None and len(result.applied) % 256 == 0:
            progress(None, f"{len(result.applied)} moves applied, {len(queue)} queued")
        if neighbours is not None and recompute:
            for other in neighbours(move):
                if other in queued:
                    continue
                fresh = problem.best_move(other)
                result.evaluated += 1
                if fresh is not None and fresh.gain > min_gain:
                    heapq.heappush(queue, (-fresh.gain, other, fresh.target))
                    queued.add(other)
    if result.stopped_by == "converged" and budget.cost is not None and result.skipped_over_budget:
        result.stopped_by = "cost"
    result.wall_s = time.perf_counter() - started
    return result


def _behind(gain: float, item: int, head: tuple[float, int, int], tolerance: float) -> bool:
    """Whether a move whose gain was just recomputed should wait behind the queue's head: its
    gain is lower (by more than the tolerance), or exactly equal with the head's lower item
    index winning. Both agree with the heap's order, so a pushed-back move is never the head."""
    head_gain = -head[0]
    return gain < head_gain - tolerance or (gain == head_gain and head[1] < item)
