"""The exact placement model of a gpushare instance as an integer program: every task on at most
one node, on the GPUs it takes, every GPU within 1,000 milli, every node within its CPU and
memory; maximise the GPU milli placed. Sized for small clusters (one binary per task, node and
GPU): the pooled relaxation of :mod:`fleetplan.models.gpushare` is the bound at the trace's scale.

Columns: a one-GPU task (whole or shared) has ``x[j, i, g]``, one per GPU it may take; a task
of several GPUs has ``y[j, i]`` (placed on node i) and ``z[j, i, g]`` (takes GPU g there, with
``sum_g z = num_gpu * y``); a CPU task has ``y[j, i]``.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 2, "tasks": 6}, seed=0)
>>> model = exact_model(instance)
>>> model.lp.sense, model.lp.num_cols == len(model.task) == len(model.node)
('max', True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.gpushare import MILLI
from fleetplan.models.linear import LinearProgram


@dataclass
class ExactModel:
    """The program and its columns: task, node and GPU (-1 for ``y``), and whether the column
    is a node choice ``y`` of a multi-GPU or CPU task."""

    lp: LinearProgram
    task: np.ndarray
    node: np.ndarray
    gpu: np.ndarray
    is_node_choice: np.ndarray


def exact_model(instance: object) -> ExactModel:
    """The integer program of ``instance`` (module docstring)."""
    import scipy.sparse as sp

    a = instance.arrays()  # type: ignore[attr-defined]
    task, node, gpu, choice = [], [], [], []
    for j in range(a.num_tasks):
        num = int(a.task_num_gpu[j])
        for i in range(a.num_nodes):
            fits = a.task_cpu[j] <= a.node_cpu[i] and a.task_memory[j] <= a.node_memory[i]
            if not fits or (num > 0 and (num > a.node_gpus[i] or not a.task_access[j, a.node_model[i]])):
                continue
            if num != 1:
                task.append(j), node.append(i), gpu.append(-1), choice.append(True)
            if num >= 1:
                for g in range(int(a.node_gpus[i])):
                    task.append(j), node.append(i), gpu.append(g), choice.append(False)
    task_a, node_a, gpu_a, choice_a = (np.array(v, dtype=np.int64) for v in (task, node, gpu, choice))
    choice_a = choice_a.astype(bool)
    columns = len(task_a)
    num = a.task_num_gpu[task_a]
    milli = a.task_gpu_milli[task_a]
    # The objective counts a task once: x columns of one-GPU tasks, y columns of the others.
    counted = (num == 1) | choice_a
    cost = np.where(counted, num * milli, 0).astype(float)
    rows, cols, vals, lower, upper = [], [], [], [], []
    row = 0

    def block(row_ids: np.ndarray, col_ids: np.ndarray, values: np.ndarray) -> None:
        rows.append(row_ids), cols.append(col_ids), vals.append(values.astype(float))

    # each task at most once: its x columns, or its y columns
    once = counted
    block(task_a[once], np.flatnonzero(once), np.ones(once.sum()))
    lower.append(np.full(a.num_tasks, -np.inf)), upper.append(np.ones(a.num_tasks))
    row += a.num_tasks
    # z columns of a multi-GPU task on node i: sum_g z = num * y
    multi = (num > 1)
    pair = task_a * a.num_nodes + node_a
    pairs, pair_row = np.unique(pair[multi], return_inverse=True)
    multi_cols = np.flatnonzero(multi)
    block(pair_row + row, multi_cols, np.where(choice_a[multi_cols], -num[multi_cols], 1))
    lower.append(np.zeros(len(pairs))), upper.append(np.zeros(len(pairs)))
    row += len(pairs)
    # every GPU within 1,000 milli: x columns weigh milli, z columns 1,000
    on_gpu = ~choice_a
    width = max(int(a.node_gpus.max(initial=0)), 1)
    gpu_row = node_a[on_gpu] * width + gpu_a[on_gpu]
    block(gpu_row + row, np.flatnonzero(on_gpu), np.where(num[on_gpu] > 1, MILLI, milli[on_gpu]))
    lower.append(np.full(a.num_nodes * width, -np.inf)), upper.append(np.full(a.num_nodes * width, float(MILLI)))
    row += a.num_nodes * width
    # node CPU and memory, counted on the columns that count the task
    for demand, capacity in ((a.task_cpu, a.node_cpu), (a.task_memory, a.node_memory)):
        block(node_a[counted] + row, np.flatnonzero(counted), demand[task_a[counted]])
        lower.append(np.full(a.num_nodes, -np.inf)), upper.append(capacity.astype(float))
        row += a.num_nodes
    matrix = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(row, columns))
    lp = LinearProgram(cost=cost, matrix=matrix, row_lower=np.concatenate(lower), row_upper=np.concatenate(upper),
                       col_lower=np.zeros(columns), col_upper=np.ones(columns), sense="max",
                       integrality=np.ones(columns, dtype=np.int64))
    return ExactModel(lp, task_a, node_a, gpu_a, choice_a)


__all__ = ["ExactModel", "exact_model"]
