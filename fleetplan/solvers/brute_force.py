"""The skeleton every brute force shares: try every assignment of items to choices, judge each
with the kind's evaluator, keep the best feasible one (ties: the first in lexicographic order).
The yardstick the exact solvers and heuristics are tested against on tiny instances; each kind
says what an item and a choice are (:mod:`fleetplan.solvers.placement.exact.enumeration`: tables and
regions; :mod:`fleetplan.solvers.reservation.enumerate`: available servers and reservations or
the free pool).

>>> best = exhaust(items=2, choices=[0, 1], judge=lambda a: (True, float(abs(a[0] - a[1]) + a[0])),
...                limit=10, what="items")
>>> best.choice.tolist(), best.objective, best.count, best.feasible
([0, 0], 0.0, 4, 4)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from fleetplan.instances import InstanceError


@dataclass(frozen=True)
class Exhausted:
    """The best feasible assignment (None when none is), its objective, and how many were
    tried and found feasible."""

    choice: np.ndarray | None
    objective: float | None
    count: int
    feasible: int


def exhaust(items: int, choices: Sequence[int], judge: Callable[[np.ndarray], tuple[bool, float]], *,
            limit: int, what: str, tolerance: float = 0.0) -> Exhausted:
    """Judge every assignment of ``items`` items to ``choices`` (``judge(assignment) ->
    (feasible, objective)``, minimised); refuses with :class:`InstanceError` at ``what`` when
    there are more than ``limit``. A later assignment replaces the best only when it is lower
    by more than ``tolerance``."""
    count = len(choices) ** items
    if count > limit:
        raise InstanceError(what, f"{count} assignments to enumerate, more than the limit {limit}")
    best, best_choice, feasible = None, None, 0
    for combination in itertools.product(choices, repeat=items):
        assignment = np.asarray(combination, dtype=np.int64)
        ok, objective = judge(assignment)
        if not ok:
            continue
        feasible += 1
        if best is None or objective < best - tolerance:
            best, best_choice = objective, assignment
    return Exhausted(choice=best_choice, objective=best, count=count, feasible=feasible)


__all__ = ["Exhausted", "exhaust"]
