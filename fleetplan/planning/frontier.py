"""The policy-free service frontier: the best value of a service metric that any allocation of a
cluster reaches, whatever policy runs — the sizing model run forward.

A sweep that adds GPUs draws the policy's curve of a metric beside this one: where the policy's
falls while the frontier rises, the capacity is not what holds the metric back (Gavel's
max-min fairness equalises throughput normalised by an equal share that grows with the cluster,
so its worst job's time share can fall as GPUs are added).

>>> import fleetplan
>>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
>>> round(service_frontier(instance, "min_time_share"), 6)   # three jobs, two GPUs
0.666667
"""

from __future__ import annotations

import math
from typing import Any

from fleetplan.models.allocation.sizing import FRONTIER_METRICS, build_frontier_lp

__all__ = ["FRONTIER_METRICS", "service_frontier"]


def service_frontier(instance: Any, metric: str) -> float | None:
    """The best ``metric`` (one of :data:`FRONTIER_METRICS`) of any allocation of ``instance``
    (an allocation instance or its dict); None where the LP has no answer.

    >>> import fleetplan
    >>> gavel = fleetplan.load_instance("examples/allocation-gavel-4.1.json")   # one V100, one K80
    >>> round(service_frontier(gavel, "total_throughput"), 6)                  # the fastest job on each
    5.0
    """
    from fleetplan.instances import as_instance
    from fleetplan.planning.kinds import planning_kind
    from fleetplan.solvers import highs

    instance = as_instance(instance)
    if not planning_kind(instance.kind).frontier:
        raise ValueError(f"the service frontier is offered for allocation instances, not {instance.kind}")
    if metric == "makespan_s" and any(math.isnan(v) for v in instance.arrays().steps_left):
        return None
    lp, value = build_frontier_lp(instance.arrays(), metric)
    outcome = highs.solve_lp(lp, algorithm="simplex")
    if outcome.status != "optimal" or outcome.objective is None:
        return None
    return float(value(outcome.objective))
