"""The generic hill-climbing engine (MAST §3.4): queue by gain, recomputation, budgets, ties."""

from __future__ import annotations

import itertools

import pytest

from fleetplan.solvers.hill_climb import Budget, Candidate, hill_climb


class Bins:
    """Items with weights in bins; cost = sum of squared bin loads; moving costs the weight."""

    def __init__(self, weights, bins, start=None):
        self.weights = list(weights)
        self.bins = bins
        self.where = list(start or [0] * len(weights))
        self.applied = []

    def loads(self, where):
        load = [0.0] * self.bins
        for item, b in enumerate(where):
            load[b] += self.weights[item]
        return load

    def cost(self, where=None):
        return sum(x * x for x in self.loads(self.where if where is None else where))

    def num_items(self):
        return len(self.weights)

    def move_to(self, item, target):
        if target == self.where[item]:
            return None
        after = list(self.where)
        after[item] = target
        change = self.cost(after) - self.cost()
        return Candidate(item, target, -change, {"squares": change}, cost=self.weights[item])

    def best_move(self, item):
        moves = [self.move_to(item, b) for b in range(self.bins) if b != self.where[item]]
        return max(moves, key=lambda m: (m.gain, -m.target), default=None)

    def apply(self, move):
        assert move.gain == pytest.approx(-(self.cost([*self.where[:move.item], move.target,
                                                       *self.where[move.item + 1:]]) - self.cost()))
        self.where[move.item] = move.target
        self.applied.append(move)


def test_converges_to_a_local_optimum_and_logs_each_move():
    problem = Bins([5, 4, 3, 3, 2, 1], bins=3)
    start = problem.cost()
    result = hill_climb(problem)
    assert result.stopped_by == "converged"
    assert problem.cost() == pytest.approx(start - result.total_gain)
    # A local optimum: no single move improves.
    assert all((m := problem.best_move(i)) is None or m.gain <= 1e-12 for i in range(6))
    assert [m.item for m in result.applied] == [m.item for m in problem.applied]
    assert all(m.terms["squares"] == pytest.approx(-m.gain) for m in result.applied)
    # Single moves stop at a local optimum: 110 here, while 6/6/6 (cost 108) needs a swap.
    assert 108 <= problem.cost() < start


def test_gains_are_recomputed_before_a_move():
    # Two equal items, two bins: both first-pass gains are positive, but after the first
    # move the second would undo the balance; recomputation must refuse it.
    problem = Bins([1, 1], bins=2)
    result = hill_climb(problem)
    assert len(result.applied) == 1
    assert problem.where.count(0) == 1
    greedy = Bins([1, 1], bins=2)
    stale = hill_climb(greedy, recompute=False)
    assert len(stale.applied) == 2 and greedy.where == [1, 1]  # the no-recompute baseline


def test_budgets_are_honoured():
    problem = Bins([5, 4, 3, 3, 2, 1], bins=3)
    result = hill_climb(problem, budget=Budget(moves=1))
    assert len(result.applied) == 1 and result.stopped_by == "moves"
    problem = Bins([5, 4, 3, 3, 2, 1], bins=3)
    result = hill_climb(problem, budget=Budget(cost=3.5))
    assert result.cost_used <= 3.5 and result.skipped_over_budget > 0
    assert all(problem.weights[m.item] <= 3.5 for m in result.applied)
    problem = Bins(list(range(1, 40)), bins=3)
    result = hill_climb(problem, budget=Budget(time_s=1e-9))
    assert result.stopped_by == "time"


def test_ties_break_deterministically_by_item_index():
    orders = set()
    for _ in range(3):
        problem = Bins([2, 2, 2, 2], bins=2)
        result = hill_climb(problem)
        orders.add(tuple((m.item, m.target) for m in result.applied))
    assert orders == {((0, 1), (1, 1))}


def test_neighbours_requeue_items_whose_gain_appeared():
    # Item 1's move only pays after item 0 moved: without re-queueing it is never tried.
    class Chain(Bins):
        def best_move(self, item):
            if item == 1 and self.where[0] == 0:
                return None
            return super().best_move(item)

    problem = Chain([3, 3, 0.5], bins=2, start=[0, 0, 1])
    plain = hill_climb(problem)
    requeue_problem = Chain([3, 3, 0.5], bins=2, start=[0, 0, 1])
    requeued = hill_climb(requeue_problem, neighbours=lambda move: [1])
    assert requeue_problem.cost() <= problem.cost()
    assert len(requeued.applied) >= len(plain.applied)


def test_matches_exhaustive_optimum_on_tiny_instances():
    weights = [4, 3, 3, 2]
    best = min(Bins(weights, 2).cost(list(w)) for w in itertools.product(range(2), repeat=4))
    problem = Bins(weights, bins=2)
    hill_climb(problem)
    assert problem.cost() == pytest.approx(best)


def test_a_move_that_undoes_the_previous_one_is_refused_without_progress():
    # Gains off by rounding: both directions of one item claim a positive gain. Without the
    # undo rule the climb moves the item back and forth until the time limit.
    class Liar:
        def __init__(self):
            self.where = [0]

        def num_items(self):
            return 1

        def best_move(self, item):
            return Candidate(item, 1 - self.where[item], 0.5 if self.where[item] == 0 else 0.1,
                             source=self.where[item])

        def move_to(self, item, target):
            return self.best_move(item) if target != self.where[item] else None

        def apply(self, move):
            self.where[move.item] = move.target

    problem = Liar()
    result = hill_climb(problem, neighbours=lambda move: [0], budget=Budget(time_s=5.0))
    # Converged, not stopped by the 5 s budget: a climb that kept retrying the refused undo
    # would end by time (checked by the budget, not by the machine's speed).
    assert result.stopped_by == "converged"
    assert len(result.applied) == 1 and result.refused_undo == 1 and problem.where == [1]


def test_a_cycle_through_other_items_is_refused_too():
    # Two items that each claim a gain for every move, so A, B, A back, B back... would cycle.
    class Liars:
        def __init__(self):
            self.where = [0, 0]

        def num_items(self):
            return 2

        def best_move(self, item):
            return Candidate(item, 1 - self.where[item], 1.0, source=self.where[item])

        def move_to(self, item, target):
            return self.best_move(item)

        def apply(self, move):
            self.where[move.item] = move.target

    result = hill_climb(Liars(), neighbours=lambda move: [0, 1], budget=Budget(time_s=5.0))
    assert result.stopped_by == "converged" and len(result.applied) == 3 and result.refused_undo >= 1


@pytest.mark.slow  # about 10 s: run by `make test-slow`
def test_anytime_batches_apply_moves_before_the_first_pass_ends():
    problem = Bins([1.0] * 400, bins=4)
    result = hill_climb(problem, batch_s=0.0)
    assert result.batches > 1 and result.stopped_by == "converged"
    assert problem.loads(problem.where) == [100.0] * 4
    assert result.trace[-1][1] == pytest.approx(result.total_gain)
    assert [t[2] for t in result.trace] == sorted(t[2] for t in result.trace)


class QuotaBins:
    """Items in three bins (cost: squared loads, plus a price for each linked pair split), with
    a budget priced as Tetris's byte quota: leaving the original bin costs the item's weight,
    going back frees it, other moves are free; ``min_costs`` kept current for the engine."""

    def __init__(self, seed: int):
        import random

        rng = random.Random(seed)
        self.n = 40
        self.weights = [float(rng.randint(1, 9)) for _ in range(self.n)]
        self.origin = [rng.randrange(3) for _ in range(self.n)]
        # Some items start away from their original bin (as tables do when an exact solver's
        # plan is polished), so moving them back frees budget.
        self.where = [b if rng.random() < 0.7 else rng.randrange(3) for b in self.origin]
        self.links = {(rng.randrange(self.n), rng.randrange(self.n)): float(rng.randint(1, 30)) for _ in range(60)}
        self.min_costs = [w if b == o else -w for w, b, o in zip(self.weights, self.where, self.origin, strict=True)]

    def num_items(self):
        return self.n

    def cost(self, where):
        load = [0.0, 0.0, 0.0]
        for item, b in enumerate(where):
            load[b] += self.weights[item]
        return sum(x * x for x in load) + sum(c for (i, j), c in self.links.items() if where[i] != where[j])

    def move_to(self, item, target):
        if target == self.where[item]:
            return None
        after = list(self.where)
        after[item] = target
        w = self.weights[item]
        price = w if self.where[item] == self.origin[item] else (-w if target == self.origin[item] else 0.0)
        return Candidate(item, target, self.cost(self.where) - self.cost(after), cost=price, source=self.where[item])

    def best_move(self, item):
        moves = [m for m in (self.move_to(item, b) for b in range(3)) if m is not None]
        return max(moves, key=lambda m: (m.gain, -m.target))

    def estimate_moves(self, items):
        return [self.best_move(item) for item in items]

    def neighbours(self, move):
        return sorted({j for (i, j) in self.links if i == move.item} | {i for (i, j) in self.links if j == move.item})

    def apply(self, move):
        self.where[move.item] = move.target
        w = self.weights[move.item]
        self.min_costs[move.item] = w if move.target == self.origin[move.item] else -w


def test_parked_over_budget_entries_come_back_when_a_move_frees_budget(monkeypatch):
    import fleetplan.solvers.hill_climb as engine

    unparked, stayed = [], []

    def counted(self, everything=True):
        before = len(self.parked)
        unpark(self, everything)
        unparked.append(before)
        stayed.append(len(self.parked))  # still over the budget: parked until it grows again

    unpark = engine._Climb.unpark
    monkeypatch.setattr(engine._Climb, "unpark", counted)
    for seed in range(30):
        runs = []
        for after in (10**9, 0):
            monkeypatch.setattr(engine, "PARK_AFTER", after)
            problem = QuotaBins(seed)
            result = hill_climb(problem, budget=Budget(cost=12.0), neighbours=problem.neighbours, estimate_batch=3)
            runs.append([(m.item, m.target, m.gain, m.cost) for m in result.applied])
        assert runs[0] == runs[1], seed
    assert any(unparked)  # some runs freed budget with entries parked
    assert any(stayed)  # and some entries stayed parked, still over the grown budget


class Independent:
    """Items that each move once to bin 1 with a fixed gain, whatever the others do."""

    def __init__(self, gains):
        self.gains = list(gains)
        self.where = [0] * len(self.gains)

    def num_items(self):
        return len(self.gains)

    def move_to(self, item, target):
        return None if self.where[item] == target else Candidate(item, target, self.gains[item])

    def best_move(self, item):
        return self.move_to(item, 1)

    def apply(self, move):
        self.where[move.item] = move.target


def test_the_climb_stops_when_its_last_moves_gain_too_little():
    import random

    rng = random.Random(3)
    gains = [rng.lognormvariate(0, 2) for _ in range(200)]
    order = sorted(range(len(gains)), key=lambda i: (-gains[i], i))  # the queue's order
    full = hill_climb(Independent(gains))
    assert [m.item for m in full.applied] == order and full.stopped_by == "converged"
    for window, share in ((1, 0.01), (4, 0.02), (16, 0.001), (32, 0.05)):
        # The rule as documented, on the moves in the order they are applied.
        total, stop = 0.0, len(order)
        totals = []
        for k, item in enumerate(order, start=1):
            total += gains[item]
            totals.append(total)
            if k >= window and total - (totals[k - window - 1] if k > window else 0.0) < share * total:
                stop = k
                break
        result = hill_climb(Independent(gains), stop_window=window, stop_gain=share)
        assert [m.item for m in result.applied] == order[:stop], (window, share)
        assert result.stopped_by == ("gain" if stop < len(order) else "converged")
        assert 0 < stop < len(order)  # each case stops somewhere inside the climb


def test_the_gain_rule_waits_for_the_first_pass_and_is_off_by_default():
    gains = [float(16 - i) for i in range(16)]
    initial = [Candidate(i, 1, g) for i, g in enumerate(gains)]
    # Any move stalls (window 1, share 10): the first move of the last phase stops the climb.
    alone = hill_climb(Independent(gains), stop_window=1, stop_gain=10.0)
    assert len(alone.applied) == 1 and alone.stopped_by == "gain"
    # In batches (one move after every 4 items) the three batches' moves come first.
    batched = hill_climb(Independent(gains), initial=initial, batch_items=4, batch_moves=1, stop_window=1,
                         stop_gain=10.0)
    assert len(batched.applied) == 4 and batched.stopped_by == "gain"
    assert len(hill_climb(Independent(gains), initial=initial, batch_items=4, batch_moves=1).applied) == 16
    with pytest.raises(ValueError, match="stop_window"):
        hill_climb(Independent(gains), stop_window=-1)
