"""The purchase lattice, searched in order of cost: how sizing closes a gap it cannot model.

A purchase is an integer vector ``0 <= add <= MAX``. When a target's reference moves with the
purchase in a way no linear model captures, or when the answer must hold under a policy whose
allocation is not monotone in capacity (Gavel's normalised max-min fairness gives a job *less*
time once a slow type is added), the cheapest purchase is found by checking purchases one by one
in nondecreasing cost, starting at a proven lower bound (a relaxation's): the first purchase
that passes is the cheapest, and when the search stops early, the cost of the next unchecked
purchase is itself a proven lower bound. The order is fixed (cost, then the vector), so a limit
on points ends the search without changing what it finds.

Each vector is generated once: the children of ``add`` raise one coordinate at or after the last
one raised, a canonical order over the lattice, and every child costs more than its parent.

>>> [p.tolist() for p, _ in purchases_by_cost([2.0, 3.0], [2, 1])]
[[0, 0], [1, 0], [0, 1], [2, 0], [1, 1], [2, 1]]
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Relative slack when comparing costs (prices are floats: 3 x 1.1 vs 3.3).
COST_TOLERANCE = 1e-9


def purchases_by_cost(price: Sequence[float], cap: Sequence[int]) -> Iterator[tuple[np.ndarray, float]]:
    """Every integer vector ``0 <= add <= cap`` with its cost ``price @ add``, cheapest first
    (ties by the vector), each once. Prices must be positive where something may be bought."""
    price_array = np.asarray(price, dtype=float)
    cap_array = np.asarray(cap, dtype=int)
    if np.any((price_array <= 0) & (cap_array > 0)):
        raise ValueError("purchases_by_cost needs positive prices")
    start = tuple([0] * len(price_array))
    heap: list[tuple[float, tuple[int, ...], int]] = [(0.0, start, 0)]
    while heap:
        cost, vector, last = heapq.heappop(heap)
        yield np.array(vector, dtype=int), cost
        for k in range(last, len(vector)):
            if vector[k] < cap_array[k]:
                child = vector[:k] + (vector[k] + 1,) + vector[k + 1:]
                heapq.heappush(heap, (cost + float(price_array[k]), child, k))


@dataclass
class LatticeOutcome:
    """What :func:`search_lattice` found.

    ``found`` the cheapest passing purchase met (None if none); ``proven`` whether no cheaper
    purchase passes (every cheaper one was checked or is below ``lower_bound``); ``bound`` a
    proven lower bound on the cost of any passing purchase; ``exhausted`` whether the whole
    lattice was searched; ``checked`` the purchases checked, ``skipped`` those passed over
    below the lower bound; ``stopped`` why the search ended early ("points", "time" or "")."""

    found: np.ndarray | None = None
    cost: float | None = None
    payload: Any = None
    bound: float = 0.0
    proven: bool = False
    exhausted: bool = False
    checked: int = 0
    skipped: int = 0
    probes: int = 0
    stopped: str = ""
    log: list[str] = field(default_factory=list)


def search_lattice(price: Sequence[float], cap: Sequence[int], check: Callable[[np.ndarray], tuple[bool, Any]], *,
                   lower_bound: float = 0.0, incumbent_cost: float | None = None, max_cost: float | None = None,
                   max_points: int = 2000,
                   max_skipped: int = 2_000_000, deadline: float | None = None) -> LatticeOutcome:
    """Check purchases cheapest first from ``lower_bound`` until one passes.

    ``check(add) -> (passes, payload)``; ``incumbent_cost`` (a purchase known to pass) ends the
    search once the lattice reaches that cost: nothing cheaper passes; past ``max_cost`` (a
    budget) the search is over, as if the lattice ended there. ``max_points`` checks,
    ``max_skipped`` purchases passed over below the bound and ``deadline`` (a
    ``time.perf_counter()`` value) end it early: then ``bound`` is the cost of the next purchase
    not checked.
    """
    outcome = LatticeOutcome(bound=lower_bound)
    slack = COST_TOLERANCE * max(1.0, abs(lower_bound))
    for add, cost in purchases_by_cost(price, cap):
        if cost < lower_bound - slack:
            outcome.skipped += 1
            if outcome.skipped > max_skipped:
                outcome.stopped = "points"
                outcome.bound = max(lower_bound, cost)
                outcome.log.append(f"lattice: {max_skipped:,} purchases below the bound passed over; stopped")
                return outcome
            continue
        if max_cost is not None and cost > max_cost + COST_TOLERANCE * max(1.0, max_cost):
            break
        outcome.bound = max(lower_bound, cost)
        if incumbent_cost is not None and cost >= incumbent_cost - COST_TOLERANCE * max(1.0, incumbent_cost):
            outcome.proven = True
            outcome.log.append(f"lattice: every purchase below the incumbent's cost {incumbent_cost:g} checked "
                               f"({outcome.checked} points)")
            return outcome
        if outcome.checked >= max_points or (deadline is not None and time.perf_counter() >= deadline):
            outcome.stopped = "points" if outcome.checked >= max_points else "time"
            outcome.log.append(f"lattice: stopped after {outcome.checked} points ({outcome.stopped}); "
                               f"nothing cheaper than {cost:g} is left unchecked")
            return outcome
        outcome.checked += 1
        passes, payload = check(add)
        if passes:
            outcome.found, outcome.cost, outcome.payload, outcome.proven = add, cost, payload, True
            outcome.log.append(f"lattice: the cheapest passing purchase costs {cost:g} ({outcome.checked} points "
                               "checked, every cheaper one fails)")
            return outcome
    outcome.exhausted = outcome.proven = True
    outcome.bound = float("inf")
    outcome.log.append(f"lattice: every purchase within the limits checked ({outcome.checked} points); "
                       "none passes")
    return outcome
