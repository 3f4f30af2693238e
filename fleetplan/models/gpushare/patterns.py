"""The node-pattern (configuration) model of a gpushare instance: nodes identical in CPU, memory,
GPU count and model form a *class*, GPU tasks identical in CPU, memory, GPU count, milli and
accepted models a *shape*, and a *pattern* of a class is how many tasks of each shape one node
of it holds. The master program chooses how many nodes of each class take each pattern:

    maximise   sum_p value_p * lambda_p
    subject to sum_p count[s, p] * lambda_p <= arrived[s]     (every shape s)
               sum_{p of class k} lambda_p  <= nodes[k]       (every class k)

Unlike the pooled relaxation (:mod:`fleetplan.models.gpushare`), a pattern respects one node's
own CPU, memory and GPUs, so CPU left on one node cannot serve another's GPUs. CPU-only tasks
are left out: they allocate no GPU milli and a plan may leave any of them pending, so they
cannot raise the optimum.

The patterns a node may hold are those of :func:`pricing_program`: CPU, memory and GPU milli
within the node's, and per GPU at most ``m`` sharing tasks of more than ``1000 / (m + 1)`` milli
(``m`` = 1, 2, 3) on the GPUs whole-GPU tasks leave. Every node of a plan the judge accepts
holds such a pattern (the conditions are necessary), so the program's optimum, and any
Lagrangian value of it, bound every plan from above; a pattern that meets them need not be
packable GPU by GPU, which the plan built from the patterns checks
(:func:`pack_pattern`).

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 6, "tasks": 40}, seed=0)
>>> classes = pattern_classes(instance)
>>> classes.node_count.sum() == 6 and classes.fits.shape == (len(classes.shape_count), len(classes.node_count))
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.gpushare import MILLI
from fleetplan.models.linear import LinearProgram

# Cardinality cuts per GPU: at most m sharing tasks of more than MILLI / (m + 1) milli each.
CARDINALITY_CUTS = (1, 2, 3)


@dataclass
class PatternClasses:
    """Node classes (``node_cpu``, ``node_memory``, ``node_gpus``, ``node_model``, ``node_count``,
    ``node_rows``: the nodes of each), GPU-task shapes (``cpu``, ``memory``, ``num_gpu``, ``milli``,
    ``shape_count``, ``task_rows``: the arriving tasks of each, in arrival order) and ``fits``
    (S, K): one task of shape s fits an empty node of class k."""

    node_cpu: np.ndarray
    node_memory: np.ndarray
    node_gpus: np.ndarray
    node_model: np.ndarray
    node_count: np.ndarray
    node_rows: list[np.ndarray]
    cpu: np.ndarray
    memory: np.ndarray
    num_gpu: np.ndarray
    milli: np.ndarray
    shape_count: np.ndarray
    task_rows: list[np.ndarray]
    fits: np.ndarray

    @property
    def value(self) -> np.ndarray:
        """(S,) GPU milli one task of each shape allocates."""
        return self.num_gpu * self.milli

    @property
    def sharing(self) -> np.ndarray:
        return (self.num_gpu == 1) & (self.milli < MILLI)


def pattern_classes(instance: object) -> PatternClasses:
    """The node classes and GPU-task shapes of ``instance`` (module docstring)."""
    a = instance.arrays()  # type: ignore[attr-defined]
    node_keys = np.column_stack([a.node_cpu, a.node_memory, a.node_gpus, a.node_model]).astype(np.int64)
    types, node_class = np.unique(node_keys, axis=0, return_inverse=True)
    node_class = node_class.reshape(-1)
    gpu_tasks = np.flatnonzero(a.task_num_gpu > 0)
    spec_ids = {s: i for i, s in enumerate(sorted(set(a.task_spec)))}
    spec = np.fromiter((spec_ids[s] for s in a.task_spec), dtype=np.int64, count=a.num_tasks)
    task_keys = np.column_stack([a.task_cpu, a.task_memory, a.task_num_gpu, a.task_gpu_milli, spec])[gpu_tasks]
    if gpu_tasks.size:
        shapes, first, task_shape = np.unique(task_keys, axis=0, return_index=True, return_inverse=True)
        task_shape = task_shape.reshape(-1)
    else:
        shapes, first, task_shape = np.zeros((0, 5), dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, np.int64)
    access = a.task_access[gpu_tasks[first]][:, types[:, 3]] if len(shapes) else np.zeros((0, len(types)), bool)
    fits = ((shapes[:, 0][:, None] <= types[:, 0][None, :]) & (shapes[:, 1][:, None] <= types[:, 1][None, :])
            & (shapes[:, 2][:, None] <= types[:, 2][None, :]) & access)
    return PatternClasses(
        node_cpu=types[:, 0], node_memory=types[:, 1], node_gpus=types[:, 2], node_model=types[:, 3],
        node_count=np.bincount(node_class, minlength=len(types)),
        node_rows=[np.flatnonzero(node_class == k) for k in range(len(types))],
        cpu=shapes[:, 0], memory=shapes[:, 1], num_gpu=shapes[:, 2], milli=shapes[:, 3],
        shape_count=np.bincount(task_shape, minlength=len(shapes)),
        task_rows=[gpu_tasks[task_shape == s] for s in range(len(shapes))], fits=fits)


def pricing_program(classes: PatternClasses, k: int, profit: np.ndarray) -> tuple[LinearProgram, np.ndarray]:
    """The best pattern of class ``k`` for per-shape ``profit`` (S,): an integer program over the
    counts of the shapes that fit and have a positive profit (the others never raise it), and
    those shapes' indices. Rows: CPU, memory, GPU milli, and the cardinality cuts
    (:data:`CARDINALITY_CUTS`) with the GPUs whole-GPU tasks take, ``W = sum num_gpu * count``:
    ``sum_{sharing, milli > 1000/(m+1)} count + m W <= m * GPUs``."""
    import scipy.sparse as sp

    c = classes
    shapes = np.flatnonzero(c.fits[:, k] & (profit > 0))
    gpus = int(c.node_gpus[k])
    whole = ~c.sharing[shapes]
    rows = [c.cpu[shapes], c.memory[shapes], c.value[shapes]]
    upper = [c.node_cpu[k], c.node_memory[k], gpus * MILLI]
    for m in CARDINALITY_CUTS:
        big = c.sharing[shapes] & (c.milli[shapes] * (m + 1) > MILLI)
        rows.append(np.where(whole, m * c.num_gpu[shapes], big.astype(np.int64)))
        upper.append(m * gpus)
    matrix = sp.csr_matrix(np.vstack(rows).astype(float)) if shapes.size else sp.csr_matrix((len(rows), 0))
    fit_count = np.minimum(c.node_cpu[k] // np.maximum(c.cpu[shapes], 1), c.node_memory[k] // np.maximum(c.memory[shapes], 1))
    fit_count = np.minimum(fit_count, np.where(whole, gpus // np.maximum(c.num_gpu[shapes], 1), gpus * MILLI // c.milli[shapes]))
    lp = LinearProgram(cost=profit[shapes].astype(float), matrix=matrix, row_lower=np.full(len(rows), -np.inf),
                       row_upper=np.asarray(upper, dtype=float), col_lower=np.zeros(shapes.size),
                       col_upper=np.minimum(c.shape_count[shapes], fit_count).astype(float), sense="max",
                       integrality=np.ones(shapes.size, dtype=np.int64))
    return lp, shapes


def packing_pricing_program(classes: PatternClasses, k: int, profit: np.ndarray
                            ) -> tuple[LinearProgram, np.ndarray, np.ndarray, np.ndarray]:
    """The best pattern of class ``k`` for ``profit`` (S,) packed GPU by GPU: integer counts
    ``a[s]`` of the whole-GPU shapes, ``x[s, g]`` of the sharing shapes on GPU ``g``, and
    ``u[g]`` = 1 when whole-GPU tasks hold GPU ``g``. Rows: CPU, memory, each shape at most as
    often as it arrives, ``sum num_gpu * a = sum u``, every GPU within 1,000 milli (none on a
    GPU whole tasks hold), and, against the GPUs' symmetry, GPUs ordered by what they hold
    (``1000 u[g] + load[g]`` non-increasing). Returns the program and, per column, its shape
    and GPU (-1 for ``a``; ``-1`` shape for ``u``)."""
    import scipy.sparse as sp

    c = classes
    gpus = int(c.node_gpus[k])
    keep = c.fits[:, k] & (profit > 0)
    whole = np.flatnonzero(keep & ~c.sharing)
    sharing = np.flatnonzero(keep & c.sharing)
    col_shape = np.concatenate([whole, np.repeat(sharing, gpus), np.full(gpus, -1)]).astype(np.int64)
    col_gpu = np.concatenate([np.full(whole.size, -1), np.tile(np.arange(gpus), sharing.size),
                              np.arange(gpus)]).astype(np.int64)
    n = col_shape.size
    is_u = col_shape < 0
    shape_safe = np.where(is_u, 0, col_shape)
    rows, cols, vals, upper, lower = [], [], [], [], []

    def row(col_ids: np.ndarray, values: np.ndarray, lo: float, hi: float) -> None:
        rows.append(np.full(col_ids.size, len(upper))), cols.append(col_ids), vals.append(values.astype(float))
        lower.append(lo), upper.append(hi)

    task_cols = np.flatnonzero(~is_u)
    row(task_cols, c.cpu[col_shape[task_cols]], -np.inf, float(c.node_cpu[k]))
    row(task_cols, c.memory[col_shape[task_cols]], -np.inf, float(c.node_memory[k]))
    for s in sharing:
        row(np.flatnonzero(col_shape == s), np.ones(gpus), -np.inf, float(c.shape_count[s]))
    whole_cols = np.arange(whole.size)
    u_cols = np.flatnonzero(is_u)
    row(np.concatenate([whole_cols, u_cols]), np.concatenate([c.num_gpu[whole], -np.ones(gpus)]), 0.0, 0.0)
    for g in range(gpus):
        on_g = np.flatnonzero((col_gpu == g) & ~is_u & (np.arange(n) >= whole.size))
        row(np.concatenate([on_g, [u_cols[g]]]), np.concatenate([c.milli[col_shape[on_g]], [MILLI]]), -np.inf,
            float(MILLI))
    for g in range(gpus - 1):  # 1000 u[g] + load[g] >= 1000 u[g+1] + load[g+1]
        here = np.flatnonzero((col_gpu == g) & ~is_u & (np.arange(n) >= whole.size))
        there = np.flatnonzero((col_gpu == g + 1) & ~is_u & (np.arange(n) >= whole.size))
        row(np.concatenate([here, [u_cols[g]], there, [u_cols[g + 1]]]),
            np.concatenate([c.milli[col_shape[here]], [MILLI], -c.milli[col_shape[there]], [-MILLI]]), 0.0, np.inf)
    matrix = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(len(upper), n))
    col_upper = np.where(is_u, 1, np.minimum(c.shape_count[shape_safe], np.where(
        col_shape >= 0, np.where(c.sharing[shape_safe], MILLI // np.maximum(c.milli[shape_safe], 1),
                                 gpus // np.maximum(c.num_gpu[shape_safe], 1)), 1)))
    cost = np.where(is_u, 0.0, profit[shape_safe])
    lp = LinearProgram(cost=cost.astype(float), matrix=matrix, row_lower=np.asarray(lower, dtype=float),
                       row_upper=np.asarray(upper, dtype=float), col_lower=np.zeros(n),
                       col_upper=col_upper.astype(float), sense="max", integrality=np.ones(n, dtype=np.int64))
    return lp, col_shape, col_gpu, is_u


def read_packing(classes: PatternClasses, k: int, values: np.ndarray, col_shape: np.ndarray, col_gpu: np.ndarray,
                 is_u: np.ndarray) -> tuple[np.ndarray, list[tuple[int, list[int]]]]:
    """The counts (S,) and the tasks GPU by GPU of a solution of :func:`packing_pricing_program`."""
    c = classes
    taken = np.rint(values).astype(np.int64)
    counts = np.zeros(len(c.shape_count), dtype=np.int64)
    placed: list[tuple[int, list[int]]] = []
    whole_gpus = [g for g in range(int(c.node_gpus[k])) if taken[np.flatnonzero(is_u)[g]] > 0]
    for col in np.flatnonzero((taken > 0) & ~is_u).tolist():
        s = int(col_shape[col])
        counts[s] += taken[col]
        for _ in range(int(taken[col])):
            if col_gpu[col] >= 0:
                placed.append((s, [int(col_gpu[col])]))
            else:
                n = int(c.num_gpu[s])
                placed.append((s, whole_gpus[:n]))
                whole_gpus = whole_gpus[n:]
    return counts, placed


def master_program(classes: PatternClasses, pattern_class: np.ndarray, counts: np.ndarray,
                   integer: bool = False) -> LinearProgram:
    """The master program over the patterns given: ``pattern_class`` (P,) and ``counts`` (S, P)."""
    import scipy.sparse as sp

    c = classes
    S, K, P = len(c.shape_count), len(c.node_count), len(pattern_class)
    class_rows = sp.csr_matrix((np.ones(P), (pattern_class, np.arange(P))), shape=(K, P))
    matrix = sp.vstack([sp.csr_matrix(counts.astype(float)), class_rows]).tocsr()
    upper = np.concatenate([c.shape_count, c.node_count]).astype(float)
    return LinearProgram(cost=(c.value.astype(float) @ counts) if P else np.zeros(0), matrix=matrix,
                         row_lower=np.full(S + K, -np.inf), row_upper=upper, col_lower=np.zeros(P),
                         col_upper=c.node_count[pattern_class].astype(float), sense="max",
                         integrality=np.ones(P, dtype=np.int64) if integer else None)


def pack_pattern(classes: PatternClasses, k: int, count: np.ndarray) -> list[tuple[int, list[int]]] | None:
    """The tasks of pattern ``count`` (S,) on one node of class ``k``, GPU by GPU: whole-GPU
    tasks on the first free GPUs, then sharing tasks largest first, each on the fullest GPU it
    fits (best fit). A list of (shape, GPUs) per task, or None when they do not all fit.

    >>> import numpy as np
    >>> c = PatternClasses(*(np.array([v]) for v in (8000, 100, 2, 0, 1)), [np.array([0])],
    ...     np.array([1000, 1000]), np.array([1, 1]), np.array([1, 1]), np.array([600, 1000]),
    ...     np.array([3, 1]), [np.array([0]), np.array([1])], np.ones((2, 1), bool))
    >>> pack_pattern(c, 0, np.array([1, 1]))
    [(1, [0]), (0, [1])]
    >>> pack_pattern(c, 0, np.array([2, 1])) is None  # two 600-milli tasks need two GPUs
    True
    """
    c = classes
    left = np.full(int(c.node_gpus[k]), MILLI, dtype=np.int64)
    placed: list[tuple[int, list[int]]] = []
    whole = [s for s in np.flatnonzero(count) if not c.sharing[s]]
    for s in sorted(whole, key=lambda s: -int(c.num_gpu[s])):
        for _ in range(int(count[s])):
            free = np.flatnonzero(left == MILLI)[: int(c.num_gpu[s])]
            if free.size < c.num_gpu[s]:
                return None
            left[free] = 0
            placed.append((int(s), free.tolist()))
    sharing = [s for s in np.flatnonzero(count) if c.sharing[s]]
    for s in sorted(sharing, key=lambda s: -int(c.milli[s])):
        for _ in range(int(count[s])):
            enough = np.flatnonzero(left >= c.milli[s])
            if enough.size == 0:
                return None
            g = int(enough[np.argmin(left[enough])])
            left[g] -= int(c.milli[s])
            placed.append((int(s), [g]))
    return placed


__all__ = ["CARDINALITY_CUTS", "PatternClasses", "master_program", "pack_pattern", "packing_pricing_program",
           "pattern_classes", "pricing_program", "read_packing"]
