"""An upper bound on the GPU milli any placement of a gpushare instance can allocate: the tasks'
shapes placed on node *types* whose capacities are pooled (nodes identical in CPU, memory, GPU
count and model form one type).

Any plan the judge accepts, counted per (shape, node type), satisfies every row here — each
shape at most as often as it arrives, only on types whose model it accepts and on which one
task fits, and per type the CPU, memory and GPU milli of all its nodes together — so the
optimum of this integer program bounds every plan's objective from above. It is a relaxation,
not the exact model: a type's capacity is pooled, so a task may be counted as split across
nodes or a shared GPU's milli across GPUs; the gap to the best plan found says how much that
could matter.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 4, "tasks": 30}, seed=0)
>>> model = pooled_bound_model(instance)
>>> model.lp.num_rows > 0 and model.lp.sense
'max'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.gpushare import MILLI
from fleetplan.models.linear import LinearProgram


@dataclass
class PooledModel:
    """The integer program and what its columns mean: column ``c`` places shape
    ``shape_of[c]`` on node type ``type_of[c]``."""

    lp: LinearProgram
    shape_of: np.ndarray
    type_of: np.ndarray
    type_count: np.ndarray


def pooled_bound_model(instance: object) -> PooledModel:
    """The pooled relaxation of ``instance`` (module docstring) as a :class:`LinearProgram`."""
    import scipy.sparse as sp  # scipy loads when a bound is asked for, not with the solvers

    a = instance.arrays()  # type: ignore[attr-defined]
    node_keys = np.column_stack([a.node_cpu, a.node_memory, a.node_gpus, a.node_model])
    types, type_index, type_count = np.unique(node_keys, axis=0, return_inverse=True, return_counts=True)
    spec_ids = {s: i for i, s in enumerate(sorted(set(a.task_spec)))}
    spec = np.fromiter((spec_ids[s] for s in a.task_spec), dtype=np.int64, count=a.num_tasks)
    task_keys = np.column_stack([a.task_cpu, a.task_memory, a.task_num_gpu, a.task_gpu_milli, spec])
    shapes, first, shape_count = np.unique(task_keys, axis=0, return_index=True, return_counts=True)
    access = a.task_access[first][:, types[:, 3]]  # (S, K)
    fits = ((shapes[:, 0][:, None] <= types[:, 0][None, :]) & (shapes[:, 1][:, None] <= types[:, 1][None, :])
            & (shapes[:, 2][:, None] <= types[:, 2][None, :]) & ((shapes[:, 2] == 0)[:, None] | access))
    shape_of, type_of = np.nonzero(fits)
    columns = len(shape_of)
    milli = shapes[shape_of, 2] * shapes[shape_of, 3]
    K = len(types)
    rows, cols, values, upper = [], [], [], []

    def add(row_ids: np.ndarray, coefficients: np.ndarray, offset: int) -> None:
        keep = coefficients != 0
        rows.append(row_ids[keep] + offset)
        cols.append(np.arange(columns)[keep])
        values.append(coefficients[keep].astype(float))

    add(shape_of, np.ones(columns), 0)  # each shape at most as often as it arrives
    upper.append(shape_count.astype(float))
    offset = len(shapes)
    for coefficient, capacity in ((shapes[shape_of, 0], types[:, 0]), (shapes[shape_of, 1], types[:, 1]),
                                  (milli, types[:, 2] * MILLI)):
        add(type_of, coefficient, offset)
        upper.append((capacity * type_count).astype(float))
        offset += K
    matrix = sp.csr_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                           shape=(offset, columns))
    row_upper = np.concatenate(upper)
    lp = LinearProgram(cost=milli.astype(float), matrix=matrix, row_lower=np.full(offset, -np.inf),
                       row_upper=row_upper, col_lower=np.zeros(columns),
                       col_upper=shape_count[shape_of].astype(float), sense="max",
                       integrality=np.ones(columns, dtype=np.int64))
    return PooledModel(lp, shape_of, type_of, type_count)


__all__ = ["PooledModel", "pooled_bound_model"]
