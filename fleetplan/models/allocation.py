"""Gavel's max-min fairness policy (Gavel §3.1, §4.1) as a linear program, declared twice:

* :func:`max_min_fairness_pyomo` — the readable Pyomo reference;
* :func:`max_min_fairness_lp` — the same LP as sparse arrays for ``highspy`` (fast to build).

Formulation, over the cells (m, j) where job m can run on type j::

    maximize   t
    subject to sum_j a[m, j] X[m, j] >= t               for every job m     (fairness)
               sum_j X[m, j] <= 1                       for every job m     (Gavel eq. 2)
               sum_m scale_factor[m] X[m, j] <= n[j]    for every type j    (Gavel eq. 3)
               X >= 0

with ``a[m, j] = T[m, j] * scale_factor[m] / (weight[m] * throughput(m, X_equal))``, the
weighted normalized throughput of §4.1 multiplied by the scale factor. The heterogeneity-
agnostic baseline uses the same LP with every runnable throughput set to 1 (Gavel's
``max_min_fairness`` policy without ``_perf``): it shares time, not throughput.

Tests (``tests/test_allocation_models.py``) prove both declarations reach the same optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
import scipy.sparse as sp

from fleetplan.instances.allocation import AllocationArrays
from fleetplan.models.linear import INF, LinearProgram


@dataclass(frozen=True)
class AllocationCells:
    """The (job, type) cells that get a variable: the job has throughput there and the type
    has at least ``scale_factor`` workers (a job cannot run on fewer workers than it needs)."""

    job: np.ndarray
    worker_type: np.ndarray

    def to_matrix(self, values: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
        matrix = np.zeros(shape)
        matrix[self.job, self.worker_type] = values
        return matrix


def runnable_cells(arrays: AllocationArrays) -> AllocationCells:
    runnable = (arrays.throughput > 0) & (arrays.num_workers[None, :] >= arrays.scale_factor[:, None])
    job, worker_type = np.nonzero(runnable)
    return AllocationCells(job=job, worker_type=worker_type)


def fairness_coefficients(arrays: AllocationArrays, heterogeneity_aware: bool = True) -> np.ndarray:
    """The matrix a[m, j] of the fairness rows (see the module docstring)."""
    throughput = arrays.throughput if heterogeneity_aware else (arrays.throughput > 0).astype(float)
    share = arrays.num_workers / arrays.num_workers.sum()
    equal_share = throughput @ share
    return throughput * (arrays.scale_factor / (arrays.weight * equal_share))[:, None]


def max_min_fairness_lp(arrays: AllocationArrays, heterogeneity_aware: bool = True) -> tuple[LinearProgram, AllocationCells]:
    """Assemble the LP as CSR arrays. Columns: one per runnable cell, then ``t`` last."""
    cells = runnable_cells(arrays)
    n_jobs, n_types = arrays.throughput.shape
    n_cells = len(cells.job)
    coefficient = fairness_coefficients(arrays, heterogeneity_aware)[cells.job, cells.worker_type]
    column = np.arange(n_cells)
    t_column = n_cells
    # Row blocks: fairness (n_jobs), job time (n_jobs), workers (n_types).
    rows = np.concatenate([
        cells.job, np.arange(n_jobs),            # fairness: a X - t >= 0
        n_jobs + cells.job,                      # job time
        2 * n_jobs + cells.worker_type,          # workers
    ])
    cols = np.concatenate([column, np.full(n_jobs, t_column), column, column])
    values = np.concatenate([
        coefficient, -np.ones(n_jobs),
        np.ones(n_cells),
        arrays.scale_factor[cells.job],
    ])
    matrix = sp.csr_matrix((values, (rows, cols)), shape=(2 * n_jobs + n_types, n_cells + 1))
    cost = np.zeros(n_cells + 1)
    cost[t_column] = 1.0
    lp = LinearProgram(
        cost=cost,
        matrix=matrix,
        row_lower=np.concatenate([np.zeros(n_jobs), np.full(n_jobs, -INF), np.full(n_types, -INF)]),
        row_upper=np.concatenate([np.full(n_jobs, INF), np.ones(n_jobs), arrays.num_workers]),
        col_lower=np.zeros(n_cells + 1),
        col_upper=np.concatenate([np.ones(n_cells), [INF]]),
        sense="max",
        names={"x": slice(0, n_cells), "t": slice(n_cells, n_cells + 1)},
    )
    lp.check()
    return lp, cells


def max_min_fairness_pyomo(arrays: AllocationArrays, heterogeneity_aware: bool = True) -> tuple[pyo.ConcreteModel, AllocationCells]:
    """The same LP declared in Pyomo: ``model.x[cell]``, ``model.t``, objective ``model.fairness``."""
    cells = runnable_cells(arrays)
    coefficient = fairness_coefficients(arrays, heterogeneity_aware)
    n_jobs, n_types = arrays.throughput.shape
    cells_of_job: list[list[int]] = [[] for _ in range(n_jobs)]
    cells_of_type: list[list[int]] = [[] for _ in range(n_types)]
    for index, (m, j) in enumerate(zip(cells.job.tolist(), cells.worker_type.tolist(), strict=True)):
        cells_of_job[m].append(index)
        cells_of_type[j].append(index)
    job_of = cells.job.tolist()
    type_of = cells.worker_type.tolist()

    model = pyo.ConcreteModel(name="gavel_max_min_fairness")
    model.CELLS = pyo.RangeSet(0, len(job_of) - 1)
    model.JOBS = pyo.RangeSet(0, n_jobs - 1)
    model.TYPES = pyo.RangeSet(0, n_types - 1)
    model.x = pyo.Var(model.CELLS, bounds=(0, 1))
    model.t = pyo.Var(bounds=(0, None))

    def fairness(model, m):
        return sum(coefficient[m, type_of[c]] * model.x[c] for c in cells_of_job[m]) >= model.t

    def job_time(model, m):
        return sum(model.x[c] for c in cells_of_job[m]) <= 1

    def workers(model, j):
        if not cells_of_type[j]:
            return pyo.Constraint.Skip
        return sum(arrays.scale_factor[job_of[c]] * model.x[c] for c in cells_of_type[j]) <= arrays.num_workers[j]

    model.fair = pyo.Constraint(model.JOBS, rule=fairness)
    model.job_time = pyo.Constraint(model.JOBS, rule=job_time)
    model.workers = pyo.Constraint(model.TYPES, rule=workers)
    model.fairness = pyo.Objective(expr=model.t, sense=pyo.maximize)
    return model, cells
