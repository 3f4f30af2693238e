"""The offline question none of the online policies answers: with every arrival known, how much
GPU capacity could any placement allocate at most? HiGHS solves the pooled relaxation of
:mod:`fleetplan.models.gpushare` and reports its proven dual bound — an upper bound on every
plan of the instance, online or not.

This package holds that bound (here) and the solvers that know every arrival:
:mod:`~fleetplan.solvers.gpushare.offline.greedy` (``offline-greedy``: the largest GPU demand
first, with this bound), :mod:`~fleetplan.solvers.gpushare.offline.patterns`
(``offline-patterns``: a plan and a bound that respects each node's own resources, at the trace's
scale) and :mod:`~fleetplan.solvers.gpushare.offline.exact` (``mip-highs``: the optimum of small
clusters). They go past the FGD paper, which places tasks online only.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 6, "tasks": 80}, seed=1)
>>> bound = allocation_bound(instance)
>>> bound.status, bound.bound_milli >= fleetplan.solve(instance, "best-fit").objective
('optimal', True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fleetplan.models.gpushare import pooled_bound_model


@dataclass
class AllocationBound:
    """``bound_milli``: no plan allocates more GPU milli (HiGHS's proven dual bound);
    ``relaxation_milli``: the best pooled solution found; ``status`` HiGHS's."""

    bound_milli: float
    relaxation_milli: float | None
    status: str
    wall_s: float


def allocation_bound(instance: object, *, time_limit: float | None = 60.0, threads: int = 1) -> AllocationBound:
    """An upper bound on the GPU milli any plan of ``instance`` allocates (module docstring)."""
    import time

    from fleetplan.solvers.highs import new_highs, pass_lp, run

    started = time.perf_counter()
    model = pooled_bound_model(instance)
    highs = new_highs(time_limit, threads, 0)
    pass_lp(highs, model.lp)
    outcome = run(highs)
    info = highs.getInfo()
    bound = float(info.mip_dual_bound)
    if not math.isfinite(bound):  # no bound proven: the trivial one, every task placed
        bound = float(model.lp.cost @ model.lp.col_upper)
    if outcome.objective is not None:
        bound = max(bound, outcome.objective)  # the dual bound never lies below a found solution
    return AllocationBound(bound_milli=bound, relaxation_milli=outcome.objective, status=outcome.status,
                           wall_s=time.perf_counter() - started)


__all__ = ["AllocationBound", "allocation_bound"]
