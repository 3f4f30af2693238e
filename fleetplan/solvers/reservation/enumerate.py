"""Brute force for tiny RAS regions: every assignment of the available servers to a reservation
or the free pool, scored by the evaluator, infeasible ones excluded (MAST §2) — the shared
skeleton of :mod:`fleetplan.solvers.brute_force`. The yardstick the exact solvers and heuristics
of the ``reservation`` kind are tested against; (R + 1)^S assignments, so only for a handful of
servers.

>>> from fleetplan.instances import generate
>>> instance = generate("reservation", {"servers": 5, "reservations": 1, "datacenters": 1,
...                                     "fault_domains_per_datacenter": 2, "servers_per_rack": 1,
...                                     "maintenance_share": 0.0}, seed=0)
>>> enumerate_assignments(instance).count
32
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.reservation import FREE, ReservationInstance, ReservationPlan
from fleetplan.instances.reservation.evaluate import evaluate
from fleetplan.solvers.brute_force import exhaust

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
    assignment = arrays.server_current.copy()

    def judge(choice: np.ndarray) -> tuple[bool, float]:
        assignment[free_rows] = choice
        verdict = evaluate(instance, ReservationPlan.from_arrays(instance, assignment))
        return verdict.feasible, verdict.objective

    best = exhaust(free_rows.size, range(FREE, arrays.num_reservations), judge, limit=limit, what="servers",
                   tolerance=1e-9)
    full = None
    if best.choice is not None:
        full = arrays.server_current.copy()
        full[free_rows] = best.choice
    return Enumeration(assignment=full, objective=best.objective, count=best.count, feasible=best.feasible)
