"""Brute force for tiny RAS regions: every assignment of the available servers to a reservation
or the free pool, scored by the evaluator, infeasible ones excluded (MAST §2). The yardstick the
exact solvers and heuristics of the ``reservation`` kind are tested against; (R + 1)^S
assignments, so only for a handful of servers.

>>> from fleetplan.instances import generate
>>> instance = generate("reservation", {"servers": 5, "reservations": 1, "datacenters": 1,
...                                     "fault_domains_per_datacenter": 2, "servers_per_rack": 1,
...                                     "maintenance_share": 0.0}, seed=0)
>>> enumerate_assignments(instance).count
32
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from fleetplan.instances import InstanceError
from fleetplan.instances.reservation import FREE, ReservationInstance, ReservationPlan
from fleetplan.instances.reservation.evaluate import evaluate

MAX_ASSIGNMENTS = 50_000


@dataclass(frozen=True)
class Enumeration:
    """The best feasible assignment (None when none is), its objective, and counts."""

    assignment: np.ndarray | None
    objective: float | None
    count: int
    feasible: int


def enumerate_assignments(instance: ReservationInstance, limit: int = MAX_ASSIGNMENTS) -> Enumeration:
    """Score every assignment of available servers with the evaluator; servers in maintenance
    stay as today. Ties keep the first assignment in lexicographic order."""
    arrays = instance.arrays()
    free_rows = np.flatnonzero(arrays.available)
    choices = list(range(FREE, arrays.num_reservations))
    count = len(choices) ** free_rows.size
    if count > limit:
        raise InstanceError("servers", f"{count} assignments to enumerate, more than the limit {limit}")
    best, best_assignment, feasible = None, None, 0
    assignment = arrays.server_current.copy()
    for combination in itertools.product(choices, repeat=free_rows.size):
        assignment[free_rows] = combination
        verdict = evaluate(instance, ReservationPlan.from_arrays(instance, assignment))
        if not verdict.feasible:
            continue
        feasible += 1
        if best is None or verdict.objective < best - 1e-9:
            best, best_assignment = verdict.objective, assignment.copy()
    return Enumeration(assignment=best_assignment, objective=best, count=count, feasible=feasible)
