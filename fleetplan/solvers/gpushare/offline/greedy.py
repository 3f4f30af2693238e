"""The offline side of the FGD paper's question: with every arrival known, place the tasks in
the order that helps most — the largest GPU demand first — by a policy, and bound what any
placement could allocate (:func:`fleetplan.solvers.gpushare.offline.allocation_bound`), so the
result says how far from the optimum its plan can be.

On the default trace inflated to 130 % (seed 42; ``docs/gpushare.md``) this plan allocates far
more than any online policy: the online policies' loss is mostly the arrival order, not their
scores.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 6, "tasks": 80}, seed=1)
>>> result = fleetplan.solve(instance, "offline-greedy")
>>> result.evaluation.feasible, result.bound >= result.objective
(True, True)
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from fleetplan.instances.gpushare import GpushareInstance, GpusharePlan
from fleetplan.instances.gpushare.fragmentation import instance_mix
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.gpushare.engine import ClusterState, place_in_order
from fleetplan.solvers.gpushare.offline import allocation_bound
from fleetplan.solvers.gpushare.online.best_fit import BestFit
from fleetplan.solvers.gpushare.online.fgd import FGD


@register("gpushare", "offline-greedy", exact=False,
          description="every arrival known: the largest GPU demand first, placed by FGD (ties by BestFit) or "
                      "BestFit, with an upper bound from the pooled relaxation (HiGHS)",
          reference="fleetplan; the question of Weng, Yang et al., USENIX ATC 2023, asked offline")
def offline_greedy(instance: GpushareInstance, *, time_limit: float | None = None, seed: int = 0, threads: int = 1,
                   progress: Progress, policy: Literal["fgd-best-fit-ties", "best-fit"] = "fgd-best-fit-ties",
                   bound: bool = True) -> SolveResult:
    """Place the tasks largest GPU demand first and bound the optimum (module docstring).

    Parameters
    ----------
    policy : str
        the scoring policy that places the sorted tasks: fgd-best-fit-ties or best-fit
    bound : bool
        also solve the pooled relaxation for an upper bound on any plan (HiGHS)
    """
    arrays = instance.arrays()
    deadline = Deadline(time_limit)
    order = np.argsort(-arrays.task_gpu_milli_total, kind="stable")
    scorer = FGD(ties="best-fit") if policy == "fgd-best-fit-ties" else BestFit()
    state = ClusterState(arrays, instance_mix(instance))
    total = max(arrays.num_tasks, 1)

    def stop(k: int) -> bool:
        if k % 64:
            return False
        progress(0.5 * k / total, f"task {k} of {arrays.num_tasks}")
        return deadline.expired()

    outcome = place_in_order(state, scorer, seed=seed, order=order, stop=stop)
    plan = GpusharePlan.from_arrays(instance, outcome.task_node, outcome.task_gpus)
    timed_out = outcome.scheduled < arrays.num_tasks
    found = None
    message = f"offline-greedy ({policy}): {state.allocated_milli} GPU milli placed"
    if bound and not timed_out:
        progress(0.5, "bounding: the pooled relaxation")
        found = allocation_bound(instance, time_limit=deadline.remaining(), threads=threads)
        message += f"; no plan places more than {found.bound_milli:.0f} (pooled relaxation, {found.status})"
    stats = {"tasks_tried": float(outcome.scheduled), "tasks_placed": float((outcome.task_node >= 0).sum())}
    return SolveResult(status="time_limit" if timed_out else "feasible", plan=plan,
                       bound=None if found is None else found.bound_milli,
                       model_objective=float(state.allocated_milli), message=message, log=[message], stats=stats)


__all__ = ["offline_greedy"]
