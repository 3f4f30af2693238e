"""The judge of the ``gpushare`` kind, written independently of every policy.

Objective (maximised): the GPU milli the placed tasks take. Constraints, each a
:class:`~fleetplan.instances.base.Violation`:

* ``gpu_count`` — a placed task is given exactly ``num_gpu`` distinct GPUs of its node (none
  for a CPU task), each an index the node has;
* ``gpu_capacity`` — no GPU above 1,000 milli (so a whole-GPU task, taking 1,000, shares its
  GPUs with nobody: multi-GPU tasks sit on whole free GPUs of one node);
* ``cpu_capacity``, ``memory_capacity`` — no node above its CPU or memory;
* ``gpu_model`` — a task's GPUs are of a model its ``gpu_spec`` accepts.

Metrics: tasks placed and pending, GPU milli allocated as a share of the cluster's, CPU and
memory allocated, and the FGD paper's fragmentation of the GPUs left idle against the expected
task mix (:mod:`fleetplan.instances.gpushare.fragmentation`), in total and per node (the
``nodes`` breakdown).

Example
-------
>>> from fleetplan.instances.gpushare import GpushareInstance, GpusharePlan
>>> instance = GpushareInstance.model_validate({"kind": "gpushare",
...     "nodes": {"id": ["n0"], "cpu_milli": [8000], "memory_mib": [1024], "gpus": [1], "model": ["T4"]},
...     "tasks": {"id": ["a"], "cpu_milli": [1000], "memory_mib": [512], "num_gpu": [1], "gpu_milli": [600]}})
>>> plan = GpusharePlan.model_validate({"kind": "gpushare",
...     "assignments": {"task": ["a"], "node": ["n0"], "gpus": [[0]]}})
>>> verdict = evaluate(instance, plan)
>>> verdict.objective, verdict.metrics["gpu_allocated_share"], verdict.feasible
(600.0, 0.6, True)
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.base import Evaluation, InstanceError, Violation
from fleetplan.instances.columns import check_same_length, lookup_ids
from fleetplan.instances.gpushare import KIND, MILLI, GpushareInstance, GpusharePlan
from fleetplan.instances.gpushare.fragmentation import instance_mix, node_fragmentation

MAX_LISTED = 20


def resolve(instance: GpushareInstance, plan: GpusharePlan) -> tuple[np.ndarray, list[list[int]]]:
    """Per task its node row (-1: pending) and GPU indices; an unknown or repeated task or an
    unknown node is an :class:`InstanceError` naming the plan's path."""
    arrays = instance.arrays()
    a = plan.assignments
    check_same_length(a, ("node", "gpus"), len(a.task), "assignments", "placed tasks")
    task_index = {t: j for j, t in enumerate(arrays.task_ids)}
    node_index = {n: i for i, n in enumerate(arrays.node_ids)}
    tasks = lookup_ids(a.task, task_index, "assignments.task", "task")
    nodes = lookup_ids(a.node, node_index, "assignments.node", "node")
    task_node = np.full(arrays.num_tasks, -1, dtype=np.int64)
    task_gpus: list[list[int]] = [[] for _ in range(arrays.num_tasks)]
    seen = np.zeros(arrays.num_tasks, dtype=bool)
    for k, (j, i) in enumerate(zip(tasks.tolist(), nodes.tolist(), strict=True)):
        if seen[j]:
            raise InstanceError(f"assignments.task[{k}]", f"task '{a.task[k]}' is placed twice")
        seen[j] = True
        task_node[j] = i
        task_gpus[j] = list(a.gpus[k])
    return task_node, task_gpus


def usage(instance: GpushareInstance, task_node: np.ndarray, task_gpus: list[list[int]],
          violations: list[Violation] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CPU (N,), memory (N,) and GPU milli (N, G) the placed tasks use; GPU lists that are not
    ``num_gpu`` distinct indices of the node are reported in ``violations`` and left out."""
    arrays = instance.arrays()
    placed = task_node >= 0
    cpu = np.bincount(task_node[placed], weights=arrays.task_cpu[placed], minlength=arrays.num_nodes)
    memory = np.bincount(task_node[placed], weights=arrays.task_memory[placed], minlength=arrays.num_nodes)
    gpu = np.zeros((arrays.num_nodes, max(arrays.max_gpus, 1)))
    for j in np.flatnonzero(placed).tolist():
        i = int(task_node[j])
        gpus = task_gpus[j]
        wanted = int(arrays.task_num_gpu[j])
        valid = len(set(gpus)) == len(gpus) == wanted and all(0 <= g < arrays.node_gpus[i] for g in gpus)
        if not valid:
            if violations is not None:
                violations.append(Violation(
                    constraint="gpu_count", where=f"task '{arrays.task_ids[j]}'", amount=float(abs(len(gpus) - wanted) or 1),
                    message=f"needs {wanted} distinct GPUs of node '{arrays.node_ids[i]}' "
                            f"({arrays.node_gpus[i]} GPUs), given {gpus}"))
            continue
        for g in gpus:
            gpu[i, g] += arrays.task_gpu_milli[j]
    return cpu, memory, gpu


def evaluate(instance: GpushareInstance, plan: GpusharePlan) -> Evaluation:
    """The one judge of a gpushare plan (module docstring)."""
    arrays = instance.arrays()
    task_node, task_gpus = resolve(instance, plan)
    violations: list[Violation] = []
    cpu, memory, gpu = usage(instance, task_node, task_gpus, violations)
    placed = task_node >= 0

    def report(constraint: str, over: np.ndarray, amounts: np.ndarray, where: list[str], unit: str) -> None:
        rows = np.flatnonzero(over)
        for r in rows[:MAX_LISTED].tolist():
            violations.append(Violation(constraint=constraint, where=where[r], amount=float(amounts[r]),
                                        message=f"over by {amounts[r]:g} {unit}"))
        if len(rows) > MAX_LISTED:
            violations.append(Violation(constraint=constraint, where=f"{len(rows) - MAX_LISTED} more",
                                        amount=float(amounts[rows[MAX_LISTED:]].sum())))

    nodes = [f"node '{n}'" for n in arrays.node_ids]
    report("cpu_capacity", cpu > arrays.node_cpu, cpu - arrays.node_cpu, nodes, "milli-cores")
    report("memory_capacity", memory > arrays.node_memory, memory - arrays.node_memory, nodes, "MiB")
    over = gpu > MILLI
    flat_where = [f"node '{arrays.node_ids[i]}' GPU {g}" for i, g in zip(*np.nonzero(over), strict=True)]
    report("gpu_capacity", np.ones(len(flat_where), dtype=bool), (gpu[over] - MILLI), flat_where, "milli")
    gpu_tasks = placed & (arrays.task_num_gpu > 0)
    wrong_model = np.zeros(arrays.num_tasks, dtype=bool)
    wrong_model[gpu_tasks] = ~arrays.task_access[gpu_tasks, arrays.node_model[task_node[gpu_tasks]]]
    report("gpu_model", wrong_model, arrays.task_gpu_milli_total.astype(float),
           [f"task '{t}' (accepts {s or 'any'})" for t, s in zip(arrays.task_ids, arrays.task_spec, strict=True)],
           "milli on a model the task does not accept")

    capacity = arrays.gpu_milli_capacity
    allocated = float(arrays.task_gpu_milli_total[placed].sum())
    gpu_left = np.zeros_like(gpu)
    for g in range(gpu.shape[1]):
        exists = arrays.node_gpus > g
        gpu_left[exists, g] = np.maximum(MILLI - gpu[exists, g], 0.0)
    cpu_left = np.maximum(arrays.node_cpu - cpu, 0.0)
    fragmentation = node_fragmentation(cpu_left, gpu_left, arrays.node_model, instance_mix(instance))
    idle = float(gpu_left.sum())
    total_fragmentation = float(fragmentation.sum())
    metrics = {
        "tasks": float(arrays.num_tasks),
        "tasks_placed": float(placed.sum()),
        "tasks_pending": float((~placed).sum()),
        "gpu_milli_capacity": float(capacity),
        "gpu_milli_allocated": allocated,
        "gpu_allocated_share": allocated / capacity if capacity else 0.0,
        "gpu_milli_requested": float(arrays.task_gpu_milli_total.sum()),
        "cpu_allocated_share": float(cpu.sum() / max(arrays.node_cpu.sum(), 1)),
        "memory_allocated_share": float(memory.sum() / max(arrays.node_memory.sum(), 1)),
        "fragmentation_milli": total_fragmentation,
        "fragmentation_share": total_fragmentation / capacity if capacity else 0.0,
        "fragmentation_of_idle": total_fragmentation / idle if idle > 0 else 0.0,
    }
    breakdown = {"nodes": {
        "id": list(arrays.node_ids), "gpu_milli_used": gpu.sum(axis=1).tolist(), "cpu_milli_used": cpu.tolist(),
        "memory_mib_used": memory.tolist(), "fragmentation_milli": fragmentation.tolist()}}
    return Evaluation(kind=KIND, objective=allocated, sense="max", terms={"gpu_milli_allocated": allocated},
                      violations=violations, metrics=metrics, breakdown=breakdown)


__all__ = ["evaluate", "resolve", "usage"]
