"""Gavel's Table 1 policies as linear programs over one allocation space (Gavel §3.1, §4).

Every policy is written over the *allocation space* of an instance: a column per (job, type)
cell where the job can run and, with space sharing, a column per (job pair, type) where the pair
can share (§3.1). Three sparse matrices describe the space:

* ``throughput`` (jobs x columns): throughput(m, X) = ``throughput[m] @ x`` — a pair column
  gives each of its two jobs its colocated throughput;
* ``time`` (jobs x columns): sum over the combinations C_m containing m of their time, <= 1;
* ``workers`` (types x columns): workers each column holds (scale factor), <= num_workers.

A :class:`PolicySpec` then picks one of three LP forms; every Table 1 policy maps onto one (the
mapping lives in :mod:`fleetplan.solvers.allocation.policies`):

* ``max_min`` — maximize t s.t. ``coefficient[m] * throughput(m, X) >= t``: LAS (coefficient
  1/(w_m throughput(m, X_equal)) * scale_factor_m), makespan through the reciprocal variable
  (coefficient 1/steps_m, t = 1/makespan), one step of finish-time fairness;
* ``linear`` — maximize ``sum_m coefficient[m] * throughput(m, X)``: max throughput, FIFO;
* ``charnes_cooper`` — maximize sum throughput / sum cost, a linear-fractional program made an
  LP by Charnes and Cooper's substitution y = s X, s = 1 / cost(X): maximize
  ``sum_m coefficient[m] * throughput(m, y)`` s.t. ``cost(y) = 1``, ``time(y) <= s``,
  ``workers(y) <= num_workers * s``; then X = y / s.

Each form takes optional per-job throughput floors (``throughput(m, X) >= floor[m]``: SLOs).
:func:`policy_lp` assembles the LP as CSR arrays for highspy / OR-Tools; :func:`policy_pyomo`
declares the same LP in Pyomo, the readable reference (tests prove both reach one optimum).

*Symmetry*: jobs identical in every number the LP reads can share one set of variables
(docs/architecture.md, "Performance practice"). :func:`aggregate_jobs` finds the classes; an aggregated
space counts each class's columns ``multiplicity`` times in the worker rows, and linear
objectives weigh each class by its size.

>>> import numpy as np
>>> from fleetplan.instances.allocation import AllocationArrays
>>> arrays = AllocationArrays(job_ids=["a", "b"], worker_types=["gpu"],
...     throughput=np.array([[1.0], [1.0]]), scale_factor=np.ones(2), weight=np.ones(2),
...     num_workers=np.array([1.0]), cost_per_hour=np.array([1.0]))
>>> space = build_space(arrays)
>>> lp = policy_lp(space, PolicySpec("max_min", np.ones(2)))
>>> lp.num_cols, lp.num_rows
(3, 5)
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fleetplan.instances.allocation import AllocationArrays
from fleetplan.lazy import lazy_module
from fleetplan.models.linear import INF, LinearProgram

pyo = lazy_module("pyomo.environ")
sp = lazy_module("scipy.sparse")

Form = Literal["max_min", "linear", "charnes_cooper"]


@dataclass
class AllocationSpace:
    """The columns of an allocation LP and the three matrices over them (module docstring)."""

    n_jobs: int
    n_types: int
    single_job: np.ndarray  # (singles,) job (or class) of each single column
    single_type: np.ndarray
    pair_jobs: np.ndarray  # (pair columns, 2)
    pair_type: np.ndarray
    throughput: sp.csr_matrix
    measured: sp.csr_matrix  # the same with measured throughputs (== throughput when aware)
    time: sp.csr_matrix
    workers: sp.csr_matrix
    num_workers: np.ndarray
    multiplicity: np.ndarray  # (jobs,), 1 unless aggregated

    @property
    def n_cols(self) -> int:
        return len(self.single_job) + len(self.pair_jobs)

    @property
    def n_singles(self) -> int:
        return len(self.single_job)

    def column_upper(self) -> np.ndarray:
        """Each column's upper bound: 1 for a job's (or a job pair's) time fraction, and for a
        class-pair column — the total time all pairs of two classes spend together — the most
        its time row allows: min(n_c, n_d) between two classes, n_c / 2 inside one. (A bound of 1
        there cut the class-pair LP below the job-pair LP's optimum.)"""
        largest = np.asarray(self.time.max(axis=0).todense()).ravel()
        return np.divide(1.0, largest, out=np.ones(self.n_cols), where=largest > 0)

    def split(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Column values as a (jobs, types) matrix and a (pair columns,) vector."""
        matrix = np.zeros((self.n_jobs, self.n_types))
        matrix[self.single_job, self.single_type] = values[: self.n_singles]
        return matrix, values[self.n_singles:]


@dataclass
class PolicySpec:
    """Which LP form, with per-job coefficients and optional floors (module docstring)."""

    form: Form
    coefficient: np.ndarray
    floor: np.ndarray | None = None
    cost_per_hour: np.ndarray | None = None  # per type; charnes_cooper only
    # Floors are physical (an SLO is in measured iterations per second) even in agnostic forms;
    # False puts them in the model's throughput units instead.
    floor_measured: bool = True
    # max_min only: rows coefficient[m] * throughput(m, X) - t >= offset[m] (None: 0), the
    # additive form of a Dinkelbach step for finish-time fairness.
    offset: np.ndarray | None = None


def model_throughput(arrays: AllocationArrays, heterogeneity_aware: bool = True) -> np.ndarray:
    """The throughputs the LP sees: measured, or — heterogeneity-agnostic, as Gavel's baselines
    — 1 on every type a job can run on (time shares, not throughput)."""
    if heterogeneity_aware:
        return arrays.throughput
    return (arrays.throughput > 0).astype(float)


def build_space(arrays: AllocationArrays, heterogeneity_aware: bool = True,
                pair_jobs: np.ndarray | None = None, pair_type: np.ndarray | None = None,
                multiplicity: np.ndarray | None = None, pair_share: np.ndarray | None = None) -> AllocationSpace:
    """The allocation space of ``arrays``: single cells where a job can run and, when given,
    pair columns (pair jobs (P, 2), type (P,)) from :func:`fleetplan.models.allocation.pairs.candidate_pairs`."""
    n_jobs, n_types = arrays.throughput.shape
    multiplicity = np.ones(n_jobs) if multiplicity is None else np.asarray(multiplicity, dtype=float)
    single_job, single_type = np.nonzero(arrays.runnable)
    pair_jobs = np.zeros((0, 2), dtype=int) if pair_jobs is None else pair_jobs
    pair_type = np.zeros(0, dtype=int) if pair_type is None else pair_type
    n_singles, n_pairs = len(single_job), len(pair_jobs)
    # Aggregated pair columns (class pairs) give each side's job a share of the column's time.
    pair_share = np.ones((n_pairs, 2)) if pair_share is None else pair_share
    single_cols = np.arange(n_singles)
    pair_cols = n_singles + np.arange(n_pairs)
    rows = np.concatenate([single_job, pair_jobs[:, 0], pair_jobs[:, 1]])
    cols = np.concatenate([single_cols, pair_cols, pair_cols])
    n_cols = n_singles + n_pairs

    def throughput_matrix_of(aware: bool) -> sp.csr_matrix:
        throughput = model_throughput(arrays, aware)
        shared = arrays.pair_throughput(pair_jobs[:, 0], pair_jobs[:, 1])[np.arange(n_pairs), pair_type] if n_pairs else np.zeros((0, 2))
        if not aware and n_pairs:
            # Agnostic: a pair's rate as a fraction of each job's own rate on that type.
            shared = shared / arrays.throughput[pair_jobs, pair_type[:, None]]
        return sp.csr_matrix(
            (np.concatenate([throughput[single_job, single_type], shared[:, 0] * pair_share[:, 0],
                             shared[:, 1] * pair_share[:, 1]]), (rows, cols)),
            shape=(n_jobs, n_cols))

    throughput_matrix = throughput_matrix_of(heterogeneity_aware)
    measured_matrix = throughput_matrix if heterogeneity_aware else throughput_matrix_of(True)
    time_matrix = sp.csr_matrix((np.concatenate([np.ones(n_singles), pair_share[:, 0], pair_share[:, 1]]), (rows, cols)),
                                shape=(n_jobs, n_cols))
    # A pair holds its jobs' scale factor once; aggregated columns stand for `multiplicity` jobs.
    # (Pairs are never aggregated: their multiplicity is 1.)
    held = np.concatenate([arrays.scale_factor[single_job] * multiplicity[single_job],
                           arrays.scale_factor[pair_jobs[:, 0]]])
    workers_matrix = sp.csr_matrix((held, (np.concatenate([single_type, pair_type]), np.arange(n_cols))),
                                   shape=(n_types, n_cols))
    return AllocationSpace(
        n_jobs=n_jobs, n_types=n_types, single_job=single_job, single_type=single_type,
        pair_jobs=pair_jobs, pair_type=pair_type, throughput=throughput_matrix, measured=measured_matrix,
        time=time_matrix,
        workers=workers_matrix, num_workers=np.asarray(arrays.num_workers, dtype=float),
        multiplicity=multiplicity,
    )


def aggregate_jobs(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Classes of jobs identical in every given per-job column (1-D or 2-D arrays).

    Returns ``(representative, inverse, count)``: one job index per class, the class of every
    job, and the class sizes — so ``values[inverse]`` expands a per-class answer.
    """
    n = len(columns[0])
    everyone = np.arange(n)
    if n > 1 and _known_distinct(columns[0]):
        return everyone, everyone, np.ones(n, dtype=int)
    # Each column as a float block, converted when first read: jobs that differ in the first
    # column (distinct jobs, the common case) never convert the others (with the weights below
    # drawn once per width: 0.1 ms of a 2,048-job LAS solve's 11 before).
    blocks: list[np.ndarray] = []

    def block(index: int) -> np.ndarray:
        while len(blocks) <= index:
            blocks.append(np.asarray(columns[len(blocks)], dtype=float).reshape(n, -1))
        return blocks[index]

    if n > 1:
        # One random projection per row: rows with distinct projections are distinct rows, so
        # when every projection differs (jobs that all differ) the sort of whole rows is skipped.
        # Any repeated projection (equal rows, or a collision) takes the exact path below. It is
        # summed block by block: stacking the table first cost half of it (a scheduler's round).
        # The first column alone is tried first: rows that differ there differ in all columns.
        weights = _projection_weights(sum(np.asarray(c).reshape(n, -1).shape[1] for c in columns))
        projection, first = np.zeros(n), 0
        for index in range(len(columns)):
            values = block(index)
            # NaN never equals itself; a placeholder keeps jobs without a value groupable.
            clean = np.where(np.isnan(values), -1.2345e300, values) if np.isnan(values).any() else values
            projection += clean @ weights[first: first + values.shape[1]]
            first += values.shape[1]
            if index in (0, len(columns) - 1):
                ordered = np.sort(projection)
                if np.all(ordered[1:] != ordered[:-1]):
                    if index == 0:
                        _remember_distinct(columns[0])
                    return everyone, everyone, np.ones(n, dtype=int)
    table = np.column_stack([block(index) for index in range(len(columns))])
    return group_rows(np.where(np.isnan(table), -1.2345e300, table))


@functools.lru_cache(maxsize=8)
def _projection_weights(width: int) -> np.ndarray:
    """aggregate_jobs' projection weights for rows of ``width`` numbers (read-only)."""
    weights = np.random.default_rng(0).uniform(0.5, 1.5, width)
    weights.flags.writeable = False
    return weights


# Read-only arrays whose rows aggregate_jobs found all distinct, by id, each with a weak
# reference (an id is reused once its array is gone). Re-solves of one session hand the same
# read-only throughput table again and again (marginal values: 9 times; 1 ms each at 16,384
# jobs, a tenth of a re-solve); an array that can be written, or a view of one, is never kept.
_DISTINCT: dict[int, weakref.ref] = {}


def _unchangeable(array: Any) -> bool:
    return isinstance(array, np.ndarray) and array.base is None and not array.flags.writeable


def _known_distinct(array: Any) -> bool:
    known = _DISTINCT.get(id(array))
    return known is not None and known() is array and _unchangeable(array)


def _remember_distinct(array: Any) -> None:
    if _unchangeable(array):
        # A copy of the items and pop(): sessions in other threads may add and drop at once.
        for key, known in list(_DISTINCT.items()):
            if known() is None:
                _DISTINCT.pop(key, None)
        _DISTINCT[id(array)] = weakref.ref(array)


def group_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Equal rows of a 2-D float table, as ``np.unique(table, axis=0, return_index=True,
    return_inverse=True, return_counts=True)`` gives them (rows in lexicographic order, each
    group's first row), by a stable lexicographic sort: np.unique compares rows through a
    structured view, which numpy now and then refused mid-simulation ("Cannot compare structured
    arrays unless they have a common dtype").

    >>> group_rows(np.array([[1.0, 2.0], [0.0, 5.0], [1.0, 2.0]]))
    (array([1, 0]), array([1, 0, 1]), array([1, 2]))
    """
    n = len(table)
    if n == 0:
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    order = np.lexsort(table.T[::-1]) if table.shape[1] else np.arange(n)
    ordered_rows = table[order]
    new_group = np.concatenate([[True], np.any(ordered_rows[1:] != ordered_rows[:-1], axis=1)])
    starts = np.flatnonzero(new_group)
    inverse = np.empty(n, dtype=int)
    inverse[order] = np.cumsum(new_group) - 1
    return order[starts], inverse, np.diff(np.append(starts, n))


def _floor_rows(space: AllocationSpace, spec: PolicySpec, scale_column: int | None):
    """Rows throughput(m) >= floor[m] (or >= floor[m] * s in Charnes-Cooper form)."""
    floor = spec.floor
    if floor is None or not np.any(floor > 0):
        return None
    jobs = np.flatnonzero(floor > 0)
    block = (space.measured if spec.floor_measured else space.throughput)[jobs]
    if scale_column is None:
        return block, floor[jobs], np.full(len(jobs), INF)
    extra = sp.csr_matrix((-floor[jobs], (np.arange(len(jobs)), np.zeros(len(jobs), dtype=int))), shape=(len(jobs), 1))
    return sp.hstack([block, extra]), np.zeros(len(jobs)), np.full(len(jobs), INF)


def policy_lp(space: AllocationSpace, spec: PolicySpec) -> LinearProgram:
    """The policy's LP as CSR arrays (columns: the space's, then ``t`` or ``s`` last)."""
    n, n_jobs, n_types = space.n_cols, space.n_jobs, space.n_types
    weighted = np.asarray(spec.coefficient, dtype=float)
    if spec.form == "max_min":
        fairness = sp.hstack([sp.diags(weighted) @ space.throughput, -sp.csr_matrix(np.ones((n_jobs, 1)))])
        blocks = [fairness, sp.hstack([space.time, sp.csr_matrix((n_jobs, 1))]),
                  sp.hstack([space.workers, sp.csr_matrix((n_types, 1))])]
        offset = np.zeros(n_jobs) if spec.offset is None else np.asarray(spec.offset, dtype=float)
        lower = [offset, np.full(n_jobs, -INF), np.full(n_types, -INF)]
        upper = [np.full(n_jobs, INF), np.ones(n_jobs), space.num_workers]
        floors = _floor_rows(space, spec, None)
        if floors is not None:
            blocks.append(sp.hstack([floors[0], sp.csr_matrix((floors[0].shape[0], 1))]))
            lower.append(floors[1])
            upper.append(floors[2])
        cost = np.zeros(n + 1)
        cost[n] = 1.0
        col_upper = np.concatenate([space.column_upper(), [INF]])
        names = {"x": slice(0, n), "t": slice(n, n + 1)}
    elif spec.form == "linear":
        blocks = [space.time, space.workers]
        lower = [np.full(n_jobs, -INF), np.full(n_types, -INF)]
        upper = [np.ones(n_jobs), space.num_workers]
        floors = _floor_rows(space, spec, None)
        if floors is not None:
            blocks.append(floors[0])
            lower.append(floors[1])
            upper.append(floors[2])
        cost = np.asarray(space.throughput.T @ (weighted * space.multiplicity)).ravel()
        col_upper = space.column_upper()
        names = {"x": slice(0, n)}
    elif spec.form == "charnes_cooper":
        if spec.cost_per_hour is None:
            raise ValueError("charnes_cooper needs cost_per_hour")
        cost_row = sp.csr_matrix(np.asarray(space.workers.T @ spec.cost_per_hour).reshape(1, n))
        blocks = [sp.hstack([space.time, -sp.csr_matrix(np.ones((n_jobs, 1)))]),
                  sp.hstack([space.workers, -sp.csr_matrix(space.num_workers.reshape(n_types, 1))]),
                  sp.hstack([cost_row, sp.csr_matrix((1, 1))])]
        lower = [np.full(n_jobs, -INF), np.full(n_types, -INF), np.ones(1)]
        upper = [np.zeros(n_jobs), np.zeros(n_types), np.ones(1)]
        floors = _floor_rows(space, spec, n)
        if floors is not None:
            blocks.append(floors[0])
            lower.append(floors[1])
            upper.append(floors[2])
        cost = np.concatenate([np.asarray(space.throughput.T @ (weighted * space.multiplicity)).ravel(), [0.0]])
        col_upper = np.full(n + 1, INF)
        names = {"y": slice(0, n), "s": slice(n, n + 1)}
    else:  # pragma: no cover - PolicySpec.form is a Literal
        raise ValueError(f"unknown LP form {spec.form}")
    matrix = sp.vstack(blocks, format="csr")
    col_lower = np.zeros(len(cost))
    if spec.form == "max_min" and spec.offset is not None:
        col_lower[n] = -INF  # with offsets a negative level is an answer (no X reaches the rows)
    lp = LinearProgram(
        cost=cost, matrix=matrix, row_lower=np.concatenate(lower), row_upper=np.concatenate(upper),
        col_lower=col_lower, col_upper=col_upper, sense="max", names=names,
    )
    lp.check()
    return lp


def refinement_lp(lp: LinearProgram, space: AllocationSpace, spec: PolicySpec, level: float,
                  slack: float = 1e-7) -> LinearProgram:
    """After a max-min LP: keep its level ``t >= level`` (less a relative ``slack`` for
    rounding) and maximize the sum of the same scores, so spare capacity is not left idle."""
    n = space.n_cols
    weights = np.asarray(spec.coefficient, dtype=float) * space.multiplicity
    cost = np.concatenate([np.asarray(space.throughput.T @ weights).ravel(), [0.0]])
    col_lower = lp.col_lower.copy()
    col_lower[n] = level - slack * abs(level)
    return LinearProgram(cost=cost, matrix=lp.matrix, row_lower=lp.row_lower, row_upper=lp.row_upper,
                         col_lower=col_lower, col_upper=lp.col_upper, sense="max", names=lp.names)


def policy_pyomo(space: AllocationSpace, spec: PolicySpec, level: float | None = None) -> pyo.ConcreteModel:
    """The same LP declared in Pyomo. ``model.x`` are the space's columns (``model.y`` and
    ``model.s`` in Charnes-Cooper form); ``model.objective`` the policy's objective. With
    ``level`` (max_min only) the model is the refinement LP of :func:`refinement_lp`."""
    throughput = space.throughput.tocsr()
    time = space.time.tocsr()
    workers = space.workers.tocsr()
    weights = np.asarray(spec.coefficient, dtype=float)

    def row(matrix: sp.csr_matrix, i: int, var) -> object:
        start, end = matrix.indptr[i], matrix.indptr[i + 1]
        return sum(float(v) * var[int(c)] for c, v in zip(matrix.indices[start:end], matrix.data[start:end], strict=True))

    model = pyo.ConcreteModel(name=f"gavel_{spec.form}")
    model.COLS = pyo.RangeSet(0, space.n_cols - 1)
    model.JOBS = pyo.RangeSet(0, space.n_jobs - 1)
    model.TYPES = pyo.RangeSet(0, space.n_types - 1)
    cc = spec.form == "charnes_cooper"
    upper = space.column_upper()
    model.x = pyo.Var(model.COLS, bounds=lambda m, c: (0, None if cc else float(upper[c])))
    var = model.x
    if cc:
        model.s = pyo.Var(bounds=(0, None))
    scale = model.s if cc else 1.0
    model.job_time = pyo.Constraint(model.JOBS, rule=lambda m, i: row(time, i, var) <= scale)
    model.workers = pyo.Constraint(
        model.TYPES, rule=lambda m, j: row(workers, j, var) <= float(space.num_workers[j]) * scale
        if workers.indptr[j + 1] > workers.indptr[j] else pyo.Constraint.Skip)
    if spec.floor is not None:
        jobs = [int(i) for i in np.flatnonzero(spec.floor > 0)]
        floors = (space.measured if spec.floor_measured else space.throughput).tocsr()
        model.floor = pyo.Constraint(jobs, rule=lambda m, i: row(floors, i, var) >= float(spec.floor[i]) * scale)
    total = sum(float(weights[i] * space.multiplicity[i]) * row(throughput, i, var) for i in range(space.n_jobs))
    if spec.form == "max_min":
        floor_t = None if spec.offset is not None else 0.0
        model.t = pyo.Var(bounds=(floor_t if level is None else level - 1e-7 * abs(level), None))
        offset = np.zeros(space.n_jobs) if spec.offset is None else spec.offset
        model.fair = pyo.Constraint(
            model.JOBS, rule=lambda m, i: float(weights[i]) * row(throughput, i, var) - m.t >= float(offset[i]))
        model.objective = pyo.Objective(expr=model.t if level is None else total, sense=pyo.maximize)
    else:
        if cc:
            cost = np.asarray(workers.T @ spec.cost_per_hour).ravel()
            model.unit_cost = pyo.Constraint(expr=sum(float(cost[c]) * var[c] for c in range(space.n_cols)) == 1)
        model.objective = pyo.Objective(expr=total, sense=pyo.maximize)
    return model
