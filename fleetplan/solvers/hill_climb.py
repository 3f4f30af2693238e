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

Safeguards and extensions beyond the paper's loop:

* *No return to a visited state.* A move that would bring the state back to one the climb has
  already been in (e.g. an item moved back where its previous move took it from) is refused:
  the objective there is exactly what it was, so it cannot have strictly fallen. With exact
  gains every applied move lowers the objective and this never triggers; it keeps a problem
  whose gains are off by rounding from moving one item back and forth until the time limit.
  The engine tracks states by a hash of (thing, position) pairs, so it needs each move's
  ``source`` (single moves) or ``members`` (compound moves); moves without them are not checked.
* *Compound moves.* A problem may offer items that move several things at once (e.g. all of
  one job's tables to one region): the :class:`Candidate` names them in ``members`` and its
  ``cost`` counts the whole set against the budget; the engine treats it like any move.
* *Quota check before evaluation.* A problem may offer ``min_cost(item)``, a lower bound of
  what any move of the item consumes of the cost budget; an item whose bound exceeds what is
  left is dropped (counted over the budget) without evaluating its moves, when popped from the
  queue and when offered as a neighbour. With the daily byte quota nearly used up, most queued
  tables are too big to move, and evaluating each of them first was most of the time at 10^6
  tables. A problem may offer ``min_costs`` instead, a sequence it keeps current
  (``min_costs[item]`` is the bound): read without a call, it is checked on hundreds of
  thousands of popped entries at 10^6 tables.
* *Parking.* Once the first pass is done and over-budget entries are most of what is popped,
  all of them leave the queue at once (counted as skipped): exact, because a parked entry the
  one-by-one loop would not have reached yet comes back when a move frees budget or a compound
  move runs, and popped moves are compared with the head that loop would have.
* *Fresh moves are not recomputed.* A move evaluated by the engine since the last applied move
  (a recomputed move sent back behind the head, or a neighbour's) is still exact when it reaches
  the head: nothing changed the state, so it is applied as it is.
* *Estimates in batches.* A problem may offer ``estimate_moves(items)``: the best moves of many
  items in one call, computed faster but with gains that may differ from ``best_move``'s in the
  last bits. The engine uses them where the loop above only needs to know whether a popped
  move is dropped (no gain) or waits behind the next key: the popped item is estimated with
  the next items at the head of the queue (``estimate_batch`` in all, the queue unchanged), and
  the estimates serve until the next applied move; neighbours are estimated in one call too.
  A move about to be applied is evaluated exactly (``best_move``) and still goes back in the
  queue if its exact gain falls behind the next key, so applied gains are ``best_move``'s and
  the order of decisions is the paper's loop's, up to rounding.
* *First pass in batches.* ``initial`` may hold :class:`Batch` entries, the best moves of many
  items as plain sequences (no :class:`Candidate` per item: at 10^6 tables building them cost
  more than computing the gains); the queue is what pushing each move would give.
* *Anytime first pass.* With ``batch_s`` the first pass evaluates items for at most that many
  seconds, applies the queued moves of that batch in gain order, then goes on with the next
  items, so a time limit shorter than one full pass still returns improvements; ``trace``
  records (seconds, total gain, moves) as the climb goes.

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
import itertools
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Protocol

import numpy as np

from fleetplan.solvers.parked import ParkedEntries

GAIN_TOLERANCE = 1e-12
# Over-budget entries dropped one by one (and at least 1/8 of the queue) before the rest of
# the over-budget entries are taken out of the queue at once (_Climb.park).
PARK_AFTER = 4096


@dataclass(frozen=True)
class Candidate:
    """A move of ``item`` to ``target``: its gain (cost before - cost after), the change of each
    objective term (after - before), and what it consumes of the cost budget (may be negative,
    e.g. a table moving back home frees quota). ``source``: where the item was before the move
    (used to refuse returning to a visited state); ``members``: for a compound move, the
    (thing, source) pairs it relocates to ``target`` (empty for a single move, where the item
    itself is the thing)."""

    item: int
    target: int
    gain: float
    terms: dict[str, float] = field(default_factory=dict)
    cost: float = 0.0
    source: int | None = None
    members: tuple[tuple[int, int], ...] = ()


class HillClimbProblem(Protocol):
    """What the engine needs from a problem. ``best_move`` and ``move_to`` return None when the
    item has no feasible move (or the target is infeasible); they must not change the state."""

    def num_items(self) -> int: ...

    def best_move(self, item: int) -> Candidate | None: ...

    def move_to(self, item: int, target: int) -> Candidate | None: ...

    def apply(self, move: Candidate) -> None: ...

    # Optional: ``min_cost(item) -> float``, a lower bound of ``cost`` over the item's moves
    # (or ``min_costs``, a sequence of those bounds by item that the problem keeps current);
    # ``estimate_moves(items) -> list[Candidate | None]``, the best moves of many items at once,
    # whose gains may differ from ``best_move``'s by rounding (they only order the queue).


@dataclass(frozen=True)
class Batch:
    """The first pass's best moves of many items at once: ``items[k]`` to ``targets[k]`` with
    ``gains[k]`` (sequences of equal length, only the moves worth queueing), out of ``evaluated``
    items evaluated (those without a move are counted, not listed)."""

    items: Sequence[int]
    targets: Sequence[int]
    gains: Sequence[float]
    evaluated: int


@dataclass
class Budget:
    """Limits of one climb; None means unlimited."""

    time_s: float | None = None
    moves: int | None = None
    cost: float | None = None


@dataclass
class ClimbResult:
    """What the climb did: the applied moves in order, why it stopped, and counters.
    ``trace``: (seconds since the start, total gain so far, moves so far), taken after each
    batch of the first pass and at most every ``trace_every_s`` while moves are applied."""

    applied: list[Candidate]
    stopped_by: str  # converged | time | moves | cost | gain
    evaluated: int = 0
    queued: int = 0
    requeued: int = 0
    skipped_over_budget: int = 0
    estimated: int = 0
    refused_undo: int = 0
    batches: int = 0
    cost_used: float = 0.0
    total_gain: float = 0.0
    wall_s: float = 0.0
    trace: list[tuple[float, float, int]] = field(default_factory=list)


class _Climb:
    """The state of one run of :func:`hill_climb` (queue, budget, undo history)."""

    def __init__(self, problem: HillClimbProblem, budget: Budget, recompute: bool, min_gain: float,
                 neighbours: Callable[[Candidate], Iterable[int]] | None,
                 progress: Callable[[float | None, str], None] | None, trace_every_s: float,
                 estimate_batch: int = 32, stop_window: int = 0, stop_gain: float = 0.0) -> None:
        self.problem, self.recompute, self.min_gain = problem, recompute, min_gain
        self.neighbours, self.progress = neighbours, progress
        self.started = time.perf_counter()
        self.deadline = math.inf if budget.time_s is None else self.started + budget.time_s
        self.max_moves = budget.moves
        self.remaining = math.inf if budget.cost is None else budget.cost
        self.result = ClimbResult(applied=[], stopped_by="converged")
        self.queue: list[tuple[float, int, int]] = []  # (-gain, item, target)
        self.queued: set[int] = set()
        # Items evaluated since the last applied move: (the best move or None, exact?).
        self.fresh: dict[int, tuple[Candidate | None, bool]] = {}
        self.min_costs: Sequence[float] | None = getattr(problem, "min_costs", None)
        self.min_cost: Callable[[int], float] | None = \
            None if self.min_costs is not None else getattr(problem, "min_cost", None)
        self.estimate_moves: Callable[[list[int]], list[Candidate | None]] | None = \
            getattr(problem, "estimate_moves", None) if recompute else None
        self.estimate_batch = estimate_batch
        self.pending: list[int] = []  # neighbours of the last move, to estimate and queue
        # Over-budget entries taken out of the queue in bulk (see park), in key order; the
        # largest key popped since (None: none); over-budget entries dropped one by one since.
        self.parked = ParkedEntries()
        self.mark: tuple[float, int, int] | None = None
        self.skips = 0
        self.may_park = False  # only once the first pass has queued every item
        # Hashes of the states visited (relative to the start, which hashes to 0).
        self.state_hash = 0
        self.visited: set[int] = {0}
        self.trace_every_s = trace_every_s
        self.last_trace = -math.inf
        # The stopping rule on the gain of the last moves (hill_climb's stop_window, stop_gain):
        # the total gain after each applied move, kept once the window is on.
        self.stop_window, self.stop_gain = stop_window, stop_gain
        self.gains_so_far: list[float] = []

    def time_up(self) -> bool:
        return time.perf_counter() > self.deadline

    def note(self, force: bool = False) -> None:
        now = time.perf_counter() - self.started
        if force or now - self.last_trace >= self.trace_every_s:
            self.result.trace.append((now, self.result.total_gain, len(self.result.applied)))
            self.last_trace = now

    def push(self, move: Candidate | None, exact: bool | None = None) -> None:
        """Queue ``move`` (when it gains); ``exact``: it was evaluated now, by ``best_move``
        (True) or by ``estimate_moves`` (False), so it holds until the next applied move."""
        self.result.evaluated += 1
        if move is not None and move.gain > self.min_gain and move.item not in self.queued:
            heapq.heappush(self.queue, (-move.gain, move.item, move.target))
            self.queued.add(move.item)
            if exact is not None:
                self.fresh[move.item] = (move, exact)

    def estimate(self, items: list[int], queue: set[int] | None = None) -> None:
        """Evaluate ``items`` in one call of the problem's ``estimate_moves`` and remember the
        moves until the next applied move; those in ``queue`` (neighbours) are also queued."""
        if not items:
            return
        self.result.estimated += len(items)
        for item, move in zip(items, self.estimate_moves(items), strict=True):
            self.fresh[item] = (move, False)
            if queue is not None and item in queue:
                self.push(move, exact=False)

    def push_batch(self, batch: Batch) -> None:
        """Queue a :class:`Batch` of first-pass moves, as :meth:`push` each of them."""
        self.result.evaluated += batch.evaluated
        queue, queued, min_gain = self.queue, self.queued, self.min_gain
        for gain, item, target in zip(batch.gains, batch.items, batch.targets, strict=True):
            if gain > min_gain and item not in queued:
                heapq.heappush(queue, (-gain, item, target))
                queued.add(item)

    def over_budget(self, item: int) -> bool:
        """Whether every move of ``item`` costs more than what is left of the budget (known
        from the problem's ``min_costs`` or ``min_cost`` without evaluating the moves)."""
        if self.min_costs is not None:
            return self.min_costs[item] > self.remaining
        return self.min_cost is not None and self.remaining < math.inf and self.min_cost(item) > self.remaining

    @staticmethod
    def hash_after(state_hash: int, move: Candidate) -> int | None:
        """The state hash after ``move`` (None when the move does not say where it comes from).
        XOR of a key per (thing, position): leaving a position and entering one each flip one."""
        pairs = move.members or (() if move.source is None else ((move.item, move.source),))
        if not pairs:
            return None
        for thing, source in pairs:
            if source != move.target:
                state_hash ^= hash((thing, source, 0x5EED)) ^ hash((thing, move.target, 0x5EED))
        return state_hash

    def drain(self, until: float = math.inf, cap: int | None = None) -> None:
        """Apply queued moves in gain order until the queue empties or a budget stops it
        (or, between batches of the first pass, the clock reaches ``until`` or ``cap`` moves
        were applied by this call)."""
        result, problem, queue, bounds = self.result, self.problem, self.queue, self.min_costs
        stop_at = math.inf if cap is None else len(result.applied) + cap
        while (queue or self.pending) and result.stopped_by == "converged" and len(result.applied) < stop_at:
            now = time.perf_counter()
            if now > self.deadline:
                result.stopped_by = "time"
                break
            if now > until:
                break
            if self.max_moves is not None and len(result.applied) >= self.max_moves:
                result.stopped_by = "moves"
                break
            if self.pending:
                # The last move's neighbours, estimated with the items at the head in one call
                # and queued before the next pop (as the loop queues them right after a move).
                pending, self.pending = self.pending, []
                self.estimate(pending + self.head(self.estimate_batch, set()), queue=set(pending))
                if not queue:
                    continue
            if bounds is not None:
                # Entries over the budget are dropped as the loop below would, without its
                # per-entry checks (most of the queue at 10^6 tables once the quota runs low).
                while queue and bounds[queue[0][1]] > self.remaining:
                    entry = heapq.heappop(queue)
                    self.queued.discard(entry[1])
                    result.skipped_over_budget += 1
                    self.skips += 1
                    if self.parked and (self.mark is None or entry > self.mark):
                        self.mark = entry
                if self.may_park and self.skips > PARK_AFTER and self.skips > len(queue) // 8:
                    self.park()
                if not queue:
                    self.parked = ParkedEntries()  # the loop would pop and drop them all now
                    continue
            entry = heapq.heappop(queue)
            _, item, target = entry
            if self.parked and (self.mark is None or entry > self.mark):
                self.mark = entry
            self.queued.discard(item)
            if self.over_budget(item):
                result.skipped_over_budget += 1
                continue
            stored = self.fresh.get(item)
            if stored is not None and stored[1] and stored[0] is not None and stored[0].target == target:
                move = stored[0]  # evaluated exactly since the last move: recomputing gives the same
            else:
                if self.estimate_moves is not None:
                    # Decide from an estimate whether the move is dropped or waits behind the
                    # head, as the exact gain would; only a move about to be applied is
                    # evaluated exactly.
                    if stored is None:
                        self.estimate([item, *self.head(self.estimate_batch - 1, {item})])
                        stored = self.fresh[item]
                    estimate = stored[0]
                    if estimate is None or estimate.gain <= self.min_gain:
                        continue
                    head = self.head_entry()
                    if head is not None and _behind(estimate.gain, item, head, self.min_gain):
                        self.requeue(estimate, exact=False)
                        continue
                move = problem.best_move(item) if self.recompute else problem.move_to(item, target)
                result.evaluated += 1
            if move is None or (self.recompute and move.gain <= self.min_gain):
                continue
            head = self.head_entry() if self.recompute else None
            if head is not None and _behind(move.gain, item, head, self.min_gain):
                self.requeue(move, exact=True)  # stale: let better go first
                continue
            if move.cost > self.remaining:
                result.skipped_over_budget += 1
                continue
            after = self.hash_after(self.state_hash, move)
            if after is not None and after in self.visited:
                result.refused_undo += 1  # back to a state already left: no strict fall
                continue
            if after is not None:
                self.state_hash = after
                self.visited.add(after)
            problem.apply(move)
            self.fresh.clear()
            self.remaining -= move.cost
            if self.parked and (move.cost < 0 or move.members):
                self.unpark(everything=bool(move.members))
            result.cost_used += move.cost
            result.total_gain += move.gain
            result.applied.append(move)
            self.note()
            if self.stop_window:
                self.gains_so_far.append(result.total_gain)
                if self.may_park and self.stalled():
                    result.stopped_by = "gain"
                    break
            if self.progress is not None and len(result.applied) % 256 == 0:
                # The climb's end is not known in moves; with a time limit, the share of it used
                # (after the first pass's half), else "unknown".
                span = self.deadline - self.started
                used = (time.perf_counter() - self.started) / span if math.isfinite(span) and span > 0 else None
                self.progress(None if used is None else 0.5 + 0.5 * min(used, 1.0),
                              f"{len(result.applied)} moves applied, {len(queue)} queued")
            if self.neighbours is not None and self.recompute:
                others = [other for other in map(int, self.neighbours(move))
                          if other not in self.queued and not self.over_budget(other)]
                if self.estimate_moves is not None:
                    self.pending = others
                else:
                    for other in others:
                        self.push(problem.best_move(other), exact=True)

    def stalled(self) -> bool:
        """Whether the last ``stop_window`` applied moves together gained less than
        ``stop_gain`` times the total gain so far (False before that many moves)."""
        gains, window = self.gains_so_far, self.stop_window
        if len(gains) < window:
            return False
        earlier = gains[-window - 1] if len(gains) > window else 0.0
        return gains[-1] - earlier < self.stop_gain * gains[-1]

    def park(self) -> None:
        """Take every entry over the budget out of the queue at once, as if each were popped and
        dropped now (they are counted so). With the byte quota nearly used at 10^6 tables, most
        of the queue is such entries, and popping them one by one from a heap of ~10^6 was the
        engine's largest cost. Exact: an entry is dropped when it reaches the head unless the
        budget grew or its bound fell meanwhile; both only happen through a move that frees
        budget (negative cost) or a compound move, and :meth:`unpark` then puts back every parked
        entry the one-by-one loop would not have reached yet (key above every key popped since).
        Only after the first pass, so no item is queued again while its entry is parked."""
        remaining, queue = self.remaining, self.queue
        items = list(map(itemgetter(1), queue))
        bound = np.fromiter(map(self.min_costs.__getitem__, items), dtype=float, count=len(items))
        over = bound > remaining
        keep = list(itertools.compress(queue, np.logical_not(over).tolist()))
        taken = np.flatnonzero(over)
        # Parked entries below the largest key popped since were reached, and dropped.
        kept = self.parked.after(self.mark)
        self.parked = kept.merged(ParkedEntries.of([queue[i] for i in taken.tolist()], bound[taken]))
        queue[:] = keep
        heapq.heapify(queue)
        self.queued.difference_update(np.asarray(items, dtype=np.int64)[taken].tolist())
        self.result.skipped_over_budget += int(taken.size)
        self.mark = None
        self.skips = 0

    def head_entry(self) -> tuple[float, int, int] | None:
        """The queue's head as the one-by-one loop would have it: the heap's, or a parked entry
        not reached yet when it comes first (a popped move is compared with it, and waits
        behind it, as it would behind that entry still in the queue)."""
        head = self.queue[0] if self.queue else None
        if self.parked:
            first = self.parked.first_after(self.mark)
            if first < len(self.parked):
                entry = self.parked.entry(first)
                if head is None or entry < head:
                    return entry
        return head

    def unpark(self, everything: bool = True) -> None:
        """Put back the parked entries not reached yet (the budget grew or bounds fell): with
        ``everything`` False (the budget grew, no bound changed), only those whose bound now
        fits; the others stay parked, as the one-by-one loop would still drop them when
        reached unless the budget grows again (and then this runs again). At 10^6 tables,
        putting all of them back after each move that freed a little quota, then parking them
        again, was the engine's largest own cost. A parked entry's bound is the one recorded
        when it was parked: its item has not moved since (it is in no queue), and a compound
        move, which may change other items' bounds, puts everything back."""
        rest = self.parked.after(self.mark)
        if everything or self.min_costs is None:
            back, stay = rest.entries(), ParkedEntries()
        else:
            back, stay = rest.split(rest.bound <= self.remaining)
        if back:
            # The keys are unique, so the order of pops does not depend on how they went in:
            # a push each when they are few (after a small table goes home, a handful of
            # hundreds of thousands), one heapify when they are many.
            if 8 * len(back) < len(self.queue):
                for entry in back:
                    heapq.heappush(self.queue, entry)
            else:
                self.queue.extend(back)
                heapq.heapify(self.queue)
            self.queued.update(map(itemgetter(1), back))
            self.result.skipped_over_budget -= len(back)
        self.parked, self.mark = stay, None

    def requeue(self, move: Candidate, exact: bool) -> None:
        heapq.heappush(self.queue, (-move.gain, move.item, move.target))
        self.queued.add(move.item)
        self.fresh[move.item] = (move, exact)
        self.result.requeued += 1

    def head(self, count: int, skip: set[int]) -> list[int]:
        """Up to ``count`` items at the head of the queue, in order, not evaluated since the last
        move, not over the budget and not in ``skip``: the ones the climb looks at next. Read
        from the heap's array without changing it (its smallest entries, by walking children;
        the walk's own heap orders by (-gain, item), which is unique, as the queue's keys)."""
        batch, queue = [], self.queue
        if not queue:
            return batch
        fresh, bounds, remaining, over = self.fresh, self.min_costs, self.remaining, self.over_budget
        push, pop = heapq.heappush, heapq.heappop
        size = len(queue)
        frontier = [(queue[0][0], queue[0][1], 0)]
        looked, limit = 0, 2 * count
        while frontier and looked < limit and len(batch) < count:
            _, item, index = pop(frontier)
            looked += 1
            if item not in fresh and item not in skip and not (
                    bounds[item] > remaining if bounds is not None else over(item)):
                batch.append(item)
            child = 2 * index + 1
            if child < size:
                entry = queue[child]
                push(frontier, (entry[0], entry[1], child))
                if child + 1 < size:
                    entry = queue[child + 1]
                    push(frontier, (entry[0], entry[1], child + 1))
        return batch


def hill_climb(problem: HillClimbProblem, *, budget: Budget | None = None, recompute: bool = True,
               initial: Iterable[Candidate | Batch | None] | None = None,
               neighbours: Callable[[Candidate], Iterable[int]] | None = None,
               min_gain: float = GAIN_TOLERANCE,
               progress: Callable[[float | None, str], None] | None = None,
               batch_s: float | None = None, trace_every_s: float = 0.25,
               estimate_batch: int = 32, batch_items: int | None = None,
               batch_moves: int | None = None, stop_window: int = 0, stop_gain: float = 0.0) -> ClimbResult:
    """Run the queue-by-gain hill climb of MAST §3.4 on ``problem``.

    ``initial``: the first pass's best moves, if the problem computes them in a batch (one per
    item, None for none, or :class:`Batch` entries for many items at once); otherwise
    ``best_move`` is called for every item. ``recompute=False``
    gives the greedy baseline: every item goes to the target of its first-pass move, in the
    first pass's order, re-checked only for feasibility (``move_to``). ``neighbours``: after a
    move, items whose gain it may have changed; those not queued are re-evaluated and queued.
    ``batch_s``: after every ``batch_s`` seconds of the first pass, apply queued moves for up
    to ``batch_s`` seconds (anytime behaviour under a time limit); None evaluates every item
    before the first move, as §3.4. ``estimate_batch``: when the problem offers
    ``estimate_moves``, how many stale keys at the head of the queue are re-estimated in one call.
    ``batch_items``/``batch_moves``: the same alternation counted instead of timed — after
    every ``batch_items`` items of the first pass, apply up to ``batch_moves`` queued moves —
    so that a climb without a time limit moves early and still repeats exactly.
    ``stop_window``/``stop_gain``: once the first pass is done, the climb stops
    (``stopped_by="gain"``) as soon as its last ``stop_window`` applied moves together gained
    less than ``stop_gain`` times its total gain so far; 0 (the default) climbs until the queue
    is empty or a budget stops it. Counted in moves, not seconds, so the plan does not depend on
    the machine; the queue's tail is long at scale (at 10^6 tables the last 9,887 of 34,055
    moves took 41 % of the climb's CPU for 0.05 % of its gain).
    """
    if stop_window < 0 or stop_gain < 0:
        raise ValueError("stop_window and stop_gain must be >= 0")
    climb = _Climb(problem, budget or Budget(), recompute, min_gain, neighbours, progress, trace_every_s,
                   estimate_batch, stop_window, stop_gain)
    result = climb.result
    count = problem.num_items()
    first = iter(initial) if initial is not None else (problem.best_move(i) for i in range(count))
    batch_started = time.perf_counter()
    climb.note(force=True)
    position = 0
    batch_position = 0
    for entry in first:
        many = isinstance(entry, Batch)
        if batch_items is not None and climb.queue and position - batch_position >= batch_items:
            result.queued += len(climb.queue)
            result.batches += 1
            climb.drain(cap=batch_moves)
            climb.note(force=True)
            if result.stopped_by != "converged":
                break
            batch_position = position
        if many or position % 64 == 0:
            now = time.perf_counter()
            if now > climb.deadline:
                result.stopped_by = "time"
                break
            if (many or position % 1024 == 0) and progress is not None and count:
                progress(0.5 * position / count, f"first pass: {position}/{count} items")
            if batch_s is not None and climb.queue and now - batch_started >= batch_s:
                # Apply this batch's best moves for as long as it took to find them, then
                # evaluate more items: the time is shared between both until the pass ends.
                result.queued += len(climb.queue)
                result.batches += 1
                climb.drain(until=time.perf_counter() + batch_s)
                climb.note(force=True)
                if result.stopped_by != "converged":
                    break
                batch_started = time.perf_counter()
        if many:
            climb.push_batch(entry)
            position += entry.evaluated
        else:
            climb.push(entry)
            position += 1
    if result.stopped_by == "converged":
        result.queued += len(climb.queue)
        result.batches += 1
        climb.may_park = True
        climb.drain()
    if result.stopped_by == "converged" and budget is not None and budget.cost is not None \
            and result.skipped_over_budget:
        result.stopped_by = "cost"
    climb.note(force=True)
    result.wall_s = time.perf_counter() - climb.started
    return result


def _behind(gain: float, item: int, head: tuple[float, int, int], tolerance: float) -> bool:
    """Whether a move whose gain was just recomputed should wait behind the queue's head: its
    gain is lower (by more than the tolerance), or exactly equal with the head's lower item
    index winning. Both agree with the heap's order, so a pushed-back move is never the head."""
    head_gain = -head[0]
    return gain < head_gain - tolerance or (gain == head_gain and head[1] < item)
