"""The optimization problems of Gavel's water filling (Gavel §4.3, Appendix A.1), as sparse arrays.

Water filling works on *classes* of identical jobs (same throughputs, scale factor, weight and
entity, and not ordered by FIFO): every member of a class gets the same row ``y[c]`` of the
allocation. Averaging any solution over permutations of a class's members keeps it feasible and
keeps every member at least at its level, so each problem below has an optimum of this
symmetric form and solving on classes is exact (``tests/test_water_filling.py`` checks it against
the job-by-job model). With ``k[c]`` members, a type's worker constraint counts each class
``k[c] * scale_factor[c]`` times.

Each job's *score* is ``sum_j a[c, j] y[c, j]`` with ``a = T * scale_factor / throughput(X_equal)``
(normalized effective throughput with scale factor, §4.1). Given the levels ``l`` reached so far:

* :func:`level_lp` — one iteration: ``max t`` s.t. ``score[c] >= l[c] + rate[c] * t`` (rate 0
  keeps a job at its level: throughputs never drop);
* :func:`rise_lp` — the fast bottleneck test: ``max sum_c d[c]`` s.t. ``score[c] >= l[c] +
  d[c] / k[c]`` for the tested classes, ``0 <= d[c] <= cap[c]``, every other class at its level;
* :func:`bottleneck_milp` — the paper's test (App. A.1): ``max sum_c k[c] z[c]``, ``z`` binary,
  with ``l + eps - Y (1 - z) <= score`` and ``score - Y z <= l`` (``z[c] = 1`` iff the job rises).

All three share Gavel's constraints (§3.1 eqs. 1-3): ``0 <= y <= 1``, ``sum_j y[c, j] <= 1``,
``sum_c k[c] scale_factor[c] y[c, j] <= num_workers[j]``.

>>> import numpy as np
>>> from fleetplan.instances import generate
>>> arrays = generate("allocation", {"jobs": 64}, seed=0).arrays()
>>> classes = job_classes(arrays, np.zeros((64, 0)))
>>> int(classes.count.sum()), len(classes.count) < 64
(64, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.allocation import AllocationArrays
from fleetplan.lazy import lazy_module
from fleetplan.models.linear import INF, LinearProgram

sp = lazy_module("scipy.sparse")


@dataclass(frozen=True)
class JobClasses:
    """Jobs grouped into classes of identical jobs, and the runnable (class, type) cells."""

    coefficient: np.ndarray  # (classes, types) score per unit of time on a type; 0: cannot run
    count: np.ndarray  # (classes,) members
    scale_factor: np.ndarray  # (classes,)
    num_workers: np.ndarray  # (types,)
    class_of_job: np.ndarray  # (jobs,)
    first_job: np.ndarray  # (classes,) one member of each class
    cell_class: np.ndarray  # (cells,)
    cell_type: np.ndarray  # (cells,)

    @property
    def num_classes(self) -> int:
        return len(self.count)

    @property
    def max_score(self) -> np.ndarray:
        """The best score a member could reach with the whole cluster to itself."""
        return self.coefficient.max(axis=1)

    def scores(self, values: np.ndarray) -> np.ndarray:
        """Per-class score of the cell values ``values``."""
        return np.bincount(self.cell_class, weights=self.coefficient[self.cell_class, self.cell_type] * values,
                           minlength=self.num_classes)

    def feasible_part(self, values: np.ndarray) -> np.ndarray:
        """Cell values scaled down just enough to satisfy eqs. 1-3 exactly (an LP solution may
        exceed a row by its feasibility tolerance, ~1e-7)."""
        values = np.clip(values, 0.0, 1.0)
        row_sum = np.bincount(self.cell_class, weights=values, minlength=self.num_classes)
        values = values / np.maximum(row_sum, 1.0)[self.cell_class]
        used = np.bincount(self.cell_type, weights=values * (self.count * self.scale_factor)[self.cell_class],
                           minlength=len(self.num_workers))
        factor = np.minimum(1.0, self.num_workers / np.maximum(used, 1e-300))
        return values * factor[self.cell_type]

    def job_matrix(self, values: np.ndarray) -> np.ndarray:
        """Expand cell values to the (jobs, types) allocation matrix."""
        per_class = np.zeros(self.coefficient.shape)
        per_class[self.cell_class, self.cell_type] = values
        return per_class[self.class_of_job]


def job_classes(arrays: AllocationArrays, group_key: np.ndarray, aggregate: bool = True) -> JobClasses:
    """Group jobs with equal throughputs, scale factor and ``group_key`` row (the caller puts
    there whatever else must match: weight, entity, a unique id for FIFO-ordered jobs).
    ``aggregate=False`` makes every job a class of its own."""
    n_jobs = len(arrays.job_ids)
    if aggregate:
        keys = np.column_stack([arrays.throughput, arrays.scale_factor, np.asarray(group_key, float).reshape(n_jobs, -1)])
        _, first, class_of, count = np.unique(keys, axis=0, return_index=True, return_inverse=True,
                                              return_counts=True)
        class_of = class_of.reshape(-1)
    else:
        first, class_of, count = np.arange(n_jobs), np.arange(n_jobs), np.ones(n_jobs, dtype=np.int64)
    share = arrays.num_workers / arrays.num_workers.sum()
    throughput = arrays.throughput[first]
    scale = arrays.scale_factor[first]
    runnable = (throughput > 0) & (arrays.num_workers[None, :] >= scale[:, None])
    coefficient = np.where(runnable, throughput * (scale / (throughput @ share))[:, None], 0.0)
    cell_class, cell_type = np.nonzero(runnable)
    return JobClasses(coefficient, count.astype(float), scale, arrays.num_workers.astype(float),
                      class_of, first, cell_class, cell_type)


def _shared_rows(classes: JobClasses, floors: np.ndarray, extra_cols: int, extra_score: tuple,
                 extra_rows: tuple = ((), (), (), (), ())) -> tuple:
    """Score rows (``>= floors``), job-time rows and worker rows over the cells, plus the
    caller's extra columns (entries in the score rows) and extra rows."""
    n_classes, n_types = classes.coefficient.shape
    cls, typ = classes.cell_class, classes.cell_type
    n_cells = len(cls)
    cells = np.arange(n_cells)
    score_row, score_col, score_val = extra_score
    x_rows, x_cols, x_vals, x_lower, x_upper = extra_rows
    base_rows = 2 * n_classes + n_types
    rows = np.concatenate([cls, n_classes + cls, 2 * n_classes + typ, np.asarray(score_row, int),
                           base_rows + np.asarray(x_rows, int)])
    cols = np.concatenate([cells, cells, cells, n_cells + np.asarray(score_col, int), np.asarray(x_cols, int)])
    vals = np.concatenate([classes.coefficient[cls, typ], np.ones(n_cells),
                           classes.count[cls] * classes.scale_factor[cls], np.asarray(score_val, float),
                           np.asarray(x_vals, float)])
    n_rows = base_rows + len(x_lower)
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(n_rows, n_cells + extra_cols))
    row_lower = np.concatenate([floors, np.full(n_classes + n_types, -INF), np.asarray(x_lower, float)])
    row_upper = np.concatenate([np.full(n_classes, INF), np.ones(n_classes), classes.num_workers,
                                np.asarray(x_upper, float)])
    return matrix, row_lower, row_upper, n_cells


def level_lp(classes: JobClasses, levels: np.ndarray, rate: np.ndarray) -> LinearProgram:
    """One water-filling iteration (§4.3): ``max t`` s.t. ``score[c] - rate[c] t >= levels[c]``.

    Columns: the cells (``names["x"]``), then ``t``."""
    n_classes = classes.num_classes
    matrix, row_lower, row_upper, n_cells = _shared_rows(
        classes, levels, 1, (np.arange(n_classes), np.zeros(n_classes, int), -np.asarray(rate, float)))
    cost = np.zeros(n_cells + 1)
    cost[-1] = 1.0
    lp = LinearProgram(cost=cost, matrix=matrix, row_lower=row_lower, row_upper=row_upper,
                       col_lower=np.zeros(n_cells + 1), col_upper=np.concatenate([np.ones(n_cells), [INF]]),
                       sense="max", names={"x": slice(0, n_cells), "t": slice(n_cells, n_cells + 1)})
    lp.check()
    return lp


def rise_lp(classes: JobClasses, levels: np.ndarray, tested: np.ndarray, cap: np.ndarray) -> LinearProgram:
    """The LP bottleneck test: ``max sum d`` with ``score[c] - d[c] / k[c] >= levels[c]`` for the
    ``tested`` classes (indices), ``0 <= d <= cap``. ``d[c]`` is the class's total rise.

    Columns: the cells (``names["x"]``), then ``d`` in the order of ``tested``."""
    tested = np.asarray(tested, dtype=int)
    n = len(tested)
    matrix, row_lower, row_upper, n_cells = _shared_rows(
        classes, levels, n, (tested, np.arange(n), -1.0 / classes.count[tested]))
    lp = LinearProgram(cost=np.concatenate([np.zeros(n_cells), np.ones(n)]), matrix=matrix,
                       row_lower=row_lower, row_upper=row_upper, col_lower=np.zeros(n_cells + n),
                       col_upper=np.concatenate([np.ones(n_cells), np.asarray(cap, float)]), sense="max",
                       names={"x": slice(0, n_cells), "d": slice(n_cells, n_cells + n)})
    lp.check()
    return lp


def bottleneck_milp(classes: JobClasses, levels: np.ndarray, tested: np.ndarray,
                    epsilon: np.ndarray) -> LinearProgram:
    """Gavel's MILP (Appendix A.1): ``max sum k[c] z[c]`` over the ``tested`` classes with

        levels[c] + epsilon[c] - Y[c] (1 - z[c]) <= score[c]     (z = 1 only if the job rises)
        score[c] - Y[c] z[c] <= levels[c]                          (z = 0 only if it does not)

    and every class at or above its level. ``Y[c]`` is the class's best possible score plus
    ``2 epsilon`` (large enough never to bind, as the paper requires). Columns: the cells, then
    ``z`` (binary) in the order of ``tested``."""
    tested = np.asarray(tested, dtype=int)
    n = len(tested)
    big_m = classes.max_score[tested] + 2 * np.asarray(epsilon, float)
    n_cells = len(classes.cell_class)
    cell_of_tested = np.flatnonzero(np.isin(classes.cell_class, tested))
    position = np.full(classes.num_classes, -1)
    position[tested] = np.arange(n)
    row_of_cell = position[classes.cell_class[cell_of_tested]]
    coefficient = classes.coefficient[classes.cell_class[cell_of_tested], classes.cell_type[cell_of_tested]]
    # One extra row per tested class: score - Y z, between levels + eps - Y and levels.
    extra = (np.concatenate([row_of_cell, np.arange(n)]),
             np.concatenate([cell_of_tested, n_cells + np.arange(n)]),
             np.concatenate([coefficient, -big_m]),
             levels[tested] + epsilon - big_m, levels[tested])
    matrix, row_lower, row_upper, n_cells = _shared_rows(classes, levels, n, ((), (), ()), extra)
    integrality = np.concatenate([np.zeros(n_cells, dtype=int), np.ones(n, dtype=int)])
    lp = LinearProgram(cost=np.concatenate([np.zeros(n_cells), classes.count[tested]]), matrix=matrix,
                       row_lower=row_lower, row_upper=row_upper, col_lower=np.zeros(n_cells + n),
                       col_upper=np.ones(n_cells + n), sense="max", integrality=integrality,
                       names={"x": slice(0, n_cells), "z": slice(n_cells, n_cells + n)})
    lp.check()
    return lp
