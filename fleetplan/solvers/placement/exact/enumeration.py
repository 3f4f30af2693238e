"""Brute force for tiny placement instances: every assignment of tables to regions, scored by
the evaluator (MAST §3.3, Figure 4), infeasible ones excluded — the shared skeleton of
:mod:`fleetplan.solvers.brute_force`. The yardstick the exact solvers are tested against; R^T
assignments, so only for a handful of tables.

>>> from fleetplan.instances import generate
>>> instance = generate("placement", {"regions": 2, "tables": 4, "jobs": 3}, seed=0)
>>> best = enumerate_placements(instance)
>>> best.count
16
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.placement import PlacementInstance, PlacementPlan
from fleetplan.instances.placement.evaluate import evaluate
from fleetplan.solvers.brute_force import exhaust

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

    def judge(home: np.ndarray) -> tuple[bool, float]:
        evaluation = evaluate(instance, PlacementPlan.from_arrays(instance, home))
        return evaluation.feasible, evaluation.objective

    best = exhaust(arrays.num_tables, range(arrays.num_regions), judge, limit=limit, what="tables")
    return Enumeration(home=best.choice, objective=best.objective, count=best.count, feasible=best.feasible)
