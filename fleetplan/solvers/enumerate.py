"""Brute force for tiny placement instances: every assignment of tables to regions, scored by
the evaluator (MAST §3.3, Figure 4), infeasible ones excluded. The yardstick the exact solvers
are tested against; R^T assignments, so only for a handful of tables.

>>> from fleetplan.instances import generate
>>> instance = generate("placement", {"regions": 2, "tables": 4, "jobs": 3}, seed=0)
>>> best = enumerate_placements(instance)
>>> best.count
16
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from fleetplan.instances import InstanceError
from fleetplan.instances.placement import PlacementInstance, PlacementPlan
from fleetplan.instances.placement.evaluate import evaluate

MAX_ASSIGNMENTS = 200_000


@dataclass(frozen=True)
class Enumeration:
    """The best feasible home assignment (None when none is feasible) and how many were tried."""

    home: np.ndarray | None
    objective: float | None
    count: int
    feasible: int


def enumerate_placements(instance: PlacementInstance, limit: int = MAX_ASSIGNMENTS) -> Enumeration:
    """Score every table-to-region assignment with the evaluator; keep the best feasible one.

    Ties keep the first assignment in lexicographic order of region indices.
    """
    arrays = instance.arrays()
    count = arrays.num_regions ** arrays.num_tables
    if count > limit:
        raise InstanceError("tables", f"{count} assignments to enumerate, more than the limit {limit}")
    best_home, best = None, None
    feasible = 0
    for assignment in itertools.product(range(arrays.num_regions), repeat=arrays.num_tables):
        home = np.asarray(assignment, dtype=np.int64)
        evaluation = evaluate(instance, PlacementPlan.from_arrays(instance, home))
        if not evaluation.feasible:
            continue
        feasible += 1
        if best is None or evaluation.objective < best:
            best, best_home = evaluation.objective, home
    return Enumeration(home=best_home, objective=best, count=count, feasible=feasible)
