"""``mip-highs``: the optimal placement of a small gpushare instance, all tasks at once (the
exact model of :mod:`fleetplan.models.gpushare.exact`, solved by HiGHS). It measures what the
one-at-a-time policies give up on clusters small enough for one binary per task, node and GPU;
at the trace's scale, ``offline-greedy`` and its pooled bound answer the same question.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 2, "tasks": 8}, seed=3)
>>> exact = fleetplan.solve(instance, "mip-highs")
>>> exact.status, exact.objective >= fleetplan.solve(instance, "fgd").objective
('optimal', True)
"""

from __future__ import annotations

import math

import numpy as np

from fleetplan.instances.gpushare import GpushareInstance, GpusharePlan
from fleetplan.models.gpushare.exact import exact_model
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.deadline import Deadline

# A column at or above this value is taken as 1 (HiGHS returns integers within its tolerance).
ONE = 0.5


def _warm_start(instance: GpushareInstance, model, seed: int) -> np.ndarray | None:
    """The columns of FGD's plan (ties broken by BestFit), or None when a column is missing."""
    from fleetplan.instances.gpushare.fragmentation import instance_mix
    from fleetplan.solvers.gpushare.engine import ClusterState, place_in_order
    from fleetplan.solvers.gpushare.online.fgd import FGD

    outcome = place_in_order(ClusterState(instance.arrays(), instance_mix(instance)), FGD(ties="best-fit"),
                             seed=seed)
    index = {(int(t), int(n), int(g)): c for c, (t, n, g) in enumerate(zip(model.task, model.node, model.gpu,
                                                                         strict=True))}
    values = np.zeros(model.lp.num_cols)
    try:
        for j in np.flatnonzero(outcome.task_node >= 0).tolist():
            i = int(outcome.task_node[j])
            if (j, i, -1) in index:
                values[index[(j, i, -1)]] = 1.0
            for g in outcome.task_gpus[j]:
                values[index[(j, i, int(g))]] = 1.0
    except KeyError:
        return None
    return values


@register("gpushare", "mip-highs", exact=True,
          description="the optimal placement of all tasks at once (one binary per task, node and GPU; HiGHS); "
                      "for small clusters",
          reference="fleetplan; measures the FGD paper's online policies against the optimum")
def mip_highs(instance: GpushareInstance, *, time_limit: float | None = None, seed: int = 0, threads: int = 1,
              progress: Progress) -> SolveResult:
    """Place every task optimally at once (module docstring)."""
    from fleetplan.solvers.highs import highspy, interrupt_at, new_highs, pass_lp, run

    deadline = Deadline(time_limit)
    model = exact_model(instance)
    progress(0.1, f"model: {model.lp.num_cols} binaries, {model.lp.num_rows} rows")
    highs = new_highs(deadline.remaining(), threads, seed)
    pass_lp(highs, model.lp)
    start = _warm_start(instance, model, seed)
    if start is not None:  # FGD's plan (BestFit ties) as the incumbent: often already optimal
        solution = highspy.HighsSolution()
        solution.col_value = start.tolist()
        solution.value_valid = True
        highs.setSolution(solution)
    remaining = deadline.remaining()
    # new_highs watches branch and bound already; this also stops the LPs inside it.
    interrupt_at(highs, None if remaining is None else deadline.started + (time_limit or 0.0),
                 events=("simplex", "ipm"))
    outcome = run(highs)
    bound = float(highs.getInfo().mip_dual_bound)
    if outcome.values is None:
        return SolveResult(status="time_limit" if outcome.status == "time_limit" else "error",
                           message=f"HiGHS found no placement ({outcome.status})", log=outcome.log)
    arrays = instance.arrays()
    task_node = np.full(arrays.num_tasks, -1, dtype=np.int64)
    task_gpus: list[list[int]] = [[] for _ in range(arrays.num_tasks)]
    taken = outcome.values >= ONE
    for c in np.flatnonzero(taken & model.is_node_choice).tolist():
        task_node[model.task[c]] = model.node[c]
    for c in np.flatnonzero(taken & ~model.is_node_choice).tolist():
        j = int(model.task[c])
        task_node[j] = model.node[c]
        task_gpus[j].append(int(model.gpu[c]))
    plan = GpusharePlan.from_arrays(instance, task_node, [sorted(g) for g in task_gpus])
    status = "optimal" if outcome.status == "optimal" else "time_limit"
    return SolveResult(status=status, plan=plan, model_objective=outcome.objective,
                       bound=bound if math.isfinite(bound) else None,
                       message=f"HiGHS: {outcome.status}", log=outcome.log)


__all__ = ["mip_highs"]
