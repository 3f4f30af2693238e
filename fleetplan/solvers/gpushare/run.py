"""One solver run of a gpushare policy: the scheduling loop, a time limit, progress and the plan.

Every policy module registers its solver through :func:`run_policy`, so the six solvers differ
only in their :class:`~fleetplan.solvers.gpushare.engine.Policy`; the ones that take no option
of their own are made by :func:`policy_solver`, which declares their ``ties`` option once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from fleetplan.instances.gpushare import GpushareInstance, GpusharePlan
from fleetplan.instances.gpushare.fragmentation import instance_mix
from fleetplan.solvers.base import Progress, SolveResult, SolverFunction
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.gpushare.engine import ClusterState, Policy, place_in_order

# The clock and the progress callback are consulted every this many tasks.
CHECK_EVERY = 64


def run_policy(instance: GpushareInstance, policy: Policy, *, time_limit: float | None, seed: int,
               progress: Progress, ties: str = "name") -> SolveResult:
    """Place the instance's tasks in arrival order with ``policy`` and return the plan."""
    arrays = instance.arrays()
    deadline = Deadline(time_limit)
    total = max(arrays.num_tasks, 1)

    def stop(k: int) -> bool:
        if k % CHECK_EVERY:
            return False
        progress(k / total, f"task {k} of {arrays.num_tasks}")
        return deadline.expired()

    state = ClusterState(arrays, instance_mix(instance))
    outcome = place_in_order(state, policy, seed=seed, ties=ties, stop=stop)
    plan = GpusharePlan.from_arrays(instance, outcome.task_node, outcome.task_gpus)
    placed = int((outcome.task_node >= 0).sum())
    timed_out = outcome.scheduled < arrays.num_tasks
    message = (f"{policy.name}: placed {placed} of {arrays.num_tasks} tasks"
               + (f" (time limit after {outcome.scheduled} tasks)" if timed_out else ""))
    stats = {"tasks_tried": float(outcome.scheduled), "tasks_placed": float(placed)}
    return SolveResult(status="time_limit" if timed_out else "feasible", plan=plan,
                       model_objective=float(state.allocated_milli), message=message, log=[message], stats=stats)


NodeTies = Literal["name", "random"]
NODE_TIES_MEANING = ("equal top scores go to the node whose name sorts first (name, the paper's simulator) "
                     "or to one drawn at random (random, stock Kubernetes)")


def policy_solver(policy: Callable[[], Policy], name: str, summary: str, *, with_ties: bool = True) -> SolverFunction:
    """The solver function of a scoring policy, named ``name`` (in ``policy``'s module) with the
    docstring ``summary``: it places the tasks one at a time in arrival order with a new
    ``policy()``. With ``with_ties`` it takes the option ``ties`` (:data:`NodeTies`): how equal
    top scores are broken."""
    if with_ties:
        def solver(instance: GpushareInstance, *, time_limit: float | None = None, seed: int = 0,
                   threads: int = 1, progress: Progress, ties: NodeTies = "name") -> SolveResult:
            return run_policy(instance, policy(), time_limit=time_limit, seed=seed, progress=progress, ties=ties)

        solver.__doc__ = f"{summary}\n\nParameters\n----------\nties : str\n    {NODE_TIES_MEANING}\n"
    else:
        def solver(instance: GpushareInstance, *, time_limit: float | None = None, seed: int = 0,
                   threads: int = 1, progress: Progress) -> SolveResult:
            return run_policy(instance, policy(), time_limit=time_limit, seed=seed, progress=progress)

        solver.__doc__ = summary
    solver.__name__ = solver.__qualname__ = name
    solver.__module__ = policy.__module__
    return solver


__all__ = ["NODE_TIES_MEANING", "NodeTies", "policy_solver", "run_policy"]
