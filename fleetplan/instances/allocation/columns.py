"""An allocation instance from columns: numpy arrays or a DataFrame in, no Python object per job.

A scheduler holds its jobs as arrays (or a DataFrame) already. Turning 10^5 rows into job dicts
and validating them one by one through the file schema costs more than the solve it feeds
(several times the max-min solve at 10,000 jobs: benchmarks/results/allocation.md, "What
reading an allocation costs beside solving it"), so this module checks the same rules column by
column with numpy — the same rules, naming the same JSON paths (``jobs[17].steps_left``) — and
builds the instance's arrays directly.

Columns (the jobs table of ``docs/data-in-out.md``): ``id``; the throughputs, either one
``throughput_<type>`` column per GPU type (NaN or absent: cannot run there) or ``throughput``,
a (jobs, types) array in the cluster's type order; and, optional, ``scale_factor``, ``weight``,
``job_type``, ``entity``, ``steps_left``, ``arrival_time``, ``time_elapsed``,
``isolated_time_elapsed`` and ``slo_hours`` (NaN or None: not given).

The result is an :class:`~fleetplan.instances.allocation.AllocationInstance` like any other:
``fleetplan.solve`` and ``fleetplan.evaluate`` take it, ``fleetplan.save`` writes it. Its
``jobs`` list of :class:`~fleetplan.instances.allocation.Job` objects is made only when some
code asks for it (saving the file, the water-filling policies' entities), once.

>>> import numpy as np
>>> instance = from_columns(
...     [{"name": "v100", "count": 2}, {"name": "k80", "count": 2}],
...     {"id": np.array(["a", "b"]), "throughput": np.array([[4.0, 1.0], [2.0, 1.5]])})
>>> instance.arrays().throughput.tolist(), instance.jobs[1].throughput
([[4.0, 1.0], [2.0, 1.5]], {'v100': 2.0, 'k80': 1.5})
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

import numpy as np

from fleetplan.instances.allocation import (
    AllocationArrays,
    AllocationInstance,
    Colocation,
    Entity,
    Job,
    WorkerType,
)
from fleetplan.instances.base import ColumnBacked, InstanceError, validate_model

THROUGHPUT = "throughput_"
# Optional numeric columns and their value when not given (NaN: "None" in the file).
NUMBER_DEFAULTS = {"weight": 1.0, "steps_left": np.nan, "arrival_time": 0.0, "time_elapsed": 0.0,
                   "isolated_time_elapsed": np.nan, "slo_hours": np.nan}
TEXT_COLUMNS = ("job_type", "entity")
KNOWN = ("id", "throughput", "scale_factor", *NUMBER_DEFAULTS, *TEXT_COLUMNS)


@dataclass(frozen=True, eq=False)
class JobColumns:
    """Jobs column-wise, as the file has them (NaN where a field is not given, None for text)."""

    id: np.ndarray  # (n,) object array of str
    throughput: np.ndarray  # (n, types), 0 where the job cannot run
    scale_factor: np.ndarray  # (n,) int64
    weight: np.ndarray
    steps_left: np.ndarray  # NaN: not given
    arrival_time: np.ndarray
    time_elapsed: np.ndarray
    isolated_time_elapsed: np.ndarray  # NaN: not given (time_elapsed is used)
    slo_hours: np.ndarray  # NaN: no SLO
    job_type: np.ndarray | None = None  # (n,) object array of str or None; None: no job has one
    entity: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.id)

    def take(self, rows: np.ndarray) -> JobColumns:
        """The rows ``rows`` (indices or a boolean mask), in that order."""
        return JobColumns(**{f.name: None if getattr(self, f.name) is None else getattr(self, f.name)[rows]
                             for f in fields(self)})

    def _paired(self, other: JobColumns):
        """(name, these values, ``other``'s) per column both hold; a text column one of them
        lacks is filled with None, a column neither holds is (name, None, None)."""
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if (mine is None or theirs is None) and f.name in TEXT_COLUMNS and (mine is not None or theirs is not None):
                mine = np.full(len(self), None, dtype=object) if mine is None else mine
                theirs = np.full(len(other), None, dtype=object) if theirs is None else theirs
            yield f.name, mine, theirs

    def concat(self, other: JobColumns) -> JobColumns:
        """These rows, then ``other``'s."""
        return JobColumns(**{name: None if mine is None and theirs is None else np.concatenate([mine, theirs])
                             for name, mine, theirs in self._paired(other)})

    def replaced(self, rows: np.ndarray, new: JobColumns) -> JobColumns:
        """These columns with rows ``rows`` replaced by ``new``'s rows (same order)."""
        values: dict[str, Any] = {}
        for name, mine, theirs in self._paired(new):
            if mine is None and theirs is None:
                values[name] = None
                continue
            column = mine.copy()
            column[rows] = theirs
            values[name] = column
        return JobColumns(**values)

    def job(self, m: int, types: list[str], *, given: np.ndarray | None = None,
            order: list[int] | None = None) -> Job:
        """Row ``m`` as a :class:`Job` (no validation: the columns were checked). Its throughput
        dict holds the positive throughputs in ``types``' order, or the types ``given`` marks
        (a row's mask: a table cell holding 0 is kept) in the column ``order`` given."""
        def number(values: np.ndarray) -> float | None:
            value = float(values[m])
            return None if np.isnan(value) else value

        row = self.throughput[m]
        keep = row > 0 if given is None else given
        return Job.model_construct(
            id=str(self.id[m]),
            throughput={types[j]: float(row[j]) for j in (range(len(types)) if order is None else order) if keep[j]},
            scale_factor=int(self.scale_factor[m]), weight=float(self.weight[m]),
            job_type=None if self.job_type is None else self.job_type[m],
            entity=None if self.entity is None else self.entity[m],
            steps_left=number(self.steps_left), arrival_time=float(self.arrival_time[m]),
            time_elapsed=float(self.time_elapsed[m]), isolated_time_elapsed=number(self.isolated_time_elapsed),
            slo_hours=number(self.slo_hours))


# --- reading columns ------------------------------------------------------------------------

def _as_mapping(jobs: Any) -> Mapping[str, Any]:
    if isinstance(jobs, Mapping):
        return jobs
    if hasattr(jobs, "columns") and hasattr(jobs, "__getitem__"):  # a pandas DataFrame
        return {str(name): jobs[name].to_numpy() for name in jobs.columns}
    raise InstanceError("jobs", f"expected a mapping of column name to values, or a DataFrame, "
                                f"got {type(jobs).__name__}")


def _row_path(path: str, row: int) -> str:
    """``jobs.weight`` and row 3 -> ``jobs[3].weight`` (the file's path of that value)."""
    head, _, name = path.rpartition(".")
    return f"{head}[{row}].{name}"


def _numbers(values: Any, n: int, path: str, *, integer: bool = False) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or len(array) != n:
        raise InstanceError(path, f"has {array.shape[0] if array.ndim else 1} entries for {n} jobs"
                            if array.ndim <= 1 else f"must be one value per job, got shape {array.shape}")
    if array.dtype == object:  # None (or pandas' NA) where not given: a list with holes
        import pandas as pd

        missing = np.asarray(pd.isna(array), dtype=bool)
        if missing.any():
            array = np.where(missing, np.nan, array)
        try:
            array = array.astype(float)
        except (TypeError, ValueError):
            bad = next(i for i, v in enumerate(array.tolist()) if not _is_number(v))
            raise InstanceError(_row_path(path, bad), f"must be a number, got {type(array[bad]).__name__}") from None
    if array.dtype.kind == "b" or array.dtype.kind not in "iuf":
        raise InstanceError(path, f"must hold numbers, got {array.dtype} values")
    if integer:
        array = array.astype(float)
        bad = ~np.isfinite(array) | (array != np.round(array))
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise InstanceError(_row_path(path, first), f"must be an integer, got {array[first].item()!r}")
        return array.astype(np.int64)
    return array.astype(float, copy=False)


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float, np.number)) and not isinstance(value, bool))


def _texts(values: Any, n: int, path: str, *, required: bool) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or len(array) != n:
        raise InstanceError(path, f"must be one value per job ({n}), got shape {array.shape}")
    if array.dtype.kind == "U":
        array = array.astype(object)
    elif array.dtype != object:
        raise InstanceError(path, f"must hold strings, got {array.dtype} values")
    if n == 0:
        return array
    import pandas as pd

    missing = pd.isna(array)
    if missing.any():
        if required:
            raise InstanceError(_row_path(path, int(np.flatnonzero(missing)[0])), "must be a non-empty string")
        array = np.where(missing, None, array)
    kind = pd.api.types.infer_dtype(array[~missing], skipna=False)
    if kind not in ("string", "empty"):
        bad = next(i for i, v in enumerate(array.tolist()) if v is not None and not isinstance(v, str))
        raise InstanceError(_row_path(path, bad), f"must be a string, got {type(array[bad]).__name__}")
    if required:
        empty = array == ""
        if empty.any():
            raise InstanceError(_row_path(path, int(np.flatnonzero(empty)[0])), "must be a non-empty string")
    return array


def read_job_columns(jobs: Any, types: list[str], *, path: str = "jobs") -> JobColumns:
    """The jobs in ``jobs`` (a mapping of columns or a DataFrame) as :class:`JobColumns`, each
    value checked on its own (finite, in range, of the right type); the checks that need the
    cluster or the other jobs are :func:`check_jobs`'s."""
    columns = _as_mapping(jobs)
    unknown = [name for name in columns if name not in KNOWN and not
               (name.startswith(THROUGHPUT) and name[len(THROUGHPUT):] in types)]
    if unknown:
        name = unknown[0]
        hint = (f" (GPU types: {', '.join(types)})" if name.startswith(THROUGHPUT)
                else f" (known: {', '.join(KNOWN)}, {THROUGHPUT}<type>)")
        raise InstanceError(f"{path}.{name}", f"unknown column{hint}")
    if "id" not in columns:
        raise InstanceError(f"{path}.id", "is required")
    ids = _texts(columns["id"], len(np.asarray(columns["id"])), f"{path}.id", required=True)
    n = len(ids)
    per_type = [name for name in columns if name.startswith(THROUGHPUT)]
    if "throughput" in columns and per_type:
        raise InstanceError(f"{path}.throughput", f"give either 'throughput' or '{THROUGHPUT}<type>' columns, not both")
    if "throughput" in columns:
        throughput = np.asarray(columns["throughput"])
        if throughput.ndim != 2 or throughput.shape != (n, len(types)):
            raise InstanceError(f"{path}.throughput", f"must be a (jobs, GPU types) array of shape "
                                f"({n}, {len(types)}) in the order {', '.join(types)}; got {throughput.shape}")
        if throughput.dtype.kind == "b" or throughput.dtype.kind not in "iuf":
            raise InstanceError(f"{path}.throughput", f"must hold numbers, got {throughput.dtype} values")
        throughput = np.array(throughput, dtype=float)
        throughput = np.where(np.isnan(throughput), 0.0, throughput)
        where = lambda m, j: f"{path}[{m}].throughput.{types[j]}"  # noqa: E731
    else:
        if not per_type:
            raise InstanceError(f"{path}.throughput", f"is required: a (jobs, types) array or {THROUGHPUT}<type> columns")
        throughput = np.zeros((n, len(types)))
        for j, name in enumerate(types):
            if THROUGHPUT + name in columns:
                values = _numbers(columns[THROUGHPUT + name], n, f"{path}.{THROUGHPUT}{name}")
                throughput[:, j] = np.where(np.isnan(values), 0.0, values)
        where = lambda m, j: f"{path}[{m}].throughput.{types[j]}"  # noqa: E731
    bad = ~np.isfinite(throughput) | (throughput < 0)
    if bad.any():
        m, j = np.argwhere(bad)[0]
        raise InstanceError(where(int(m), int(j)), f"must be a finite number >= 0, got {throughput[m, j].item()!r}")
    scale = (np.ones(n, dtype=np.int64) if "scale_factor" not in columns
             else _numbers(columns["scale_factor"], n, f"{path}.scale_factor", integer=True))
    _check(scale < 1, path, "scale_factor", "must be >= 1", scale)
    values: dict[str, Any] = {}
    for name, default in NUMBER_DEFAULTS.items():
        column = (np.full(n, default) if name not in columns
                  else _numbers(columns[name], n, f"{path}.{name}"))
        optional = np.isnan(default)
        given = ~np.isnan(column) if optional else np.ones(n, dtype=bool)
        _check(given & ~np.isfinite(column), path, name, "must be a finite number", column)
        if name in ("weight", "steps_left", "slo_hours"):
            _check(given & (column <= 0), path, name, "must be > 0", column)
        else:
            _check(given & (column < 0), path, name, "must be >= 0", column)
        values[name] = column
    slo_without_steps = ~np.isnan(values["slo_hours"]) & np.isnan(values["steps_left"])
    if slo_without_steps.any():
        raise InstanceError(f"{path}[{int(np.flatnonzero(slo_without_steps)[0])}].steps_left",
                            "is required when slo_hours is set")
    texts = {name: None if name not in columns else _texts(columns[name], n, f"{path}.{name}", required=False)
             for name in TEXT_COLUMNS}
    return JobColumns(id=ids, throughput=throughput, scale_factor=scale, **values, **texts)


def _check(bad: np.ndarray, path: str, name: str, reason: str, values: np.ndarray) -> None:
    if bad.any():
        m = int(np.flatnonzero(bad)[0])
        raise InstanceError(f"{path}[{m}].{name}", f"{reason}, got {values[m].item()!r}")


def check_jobs(columns: JobColumns, counts: np.ndarray, entity_ids: set[str], *, path: str = "jobs",
               taken: Any = ()) -> None:
    """The rules that tie jobs to the cluster and to each other: ids unique (and not in
    ``taken``, a set or mapping of the ids there already), every job runnable on some type (a positive throughput on a type with at least
    its scale factor of workers), entities known. The first failure is an :class:`InstanceError`
    naming the job's path, as validating the file would."""
    ids = columns.id.tolist()
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        m = next(m for m, job in enumerate(ids) if job in seen or seen.add(job))
        raise InstanceError(f"{path}[{m}].id", f"duplicate id '{ids[m]}'")
    clash = [m for m, job in enumerate(ids) if job in taken] if len(taken) else []
    if clash:
        raise InstanceError(f"{path}[{clash[0]}].id", f"duplicate id '{ids[clash[0]]}' (a job with this id is there already)")
    runnable = ((columns.throughput > 0) & (counts[None, :] >= columns.scale_factor[:, None])).any(axis=1)
    if not runnable.all():
        m = int(np.flatnonzero(~runnable)[0])
        raise InstanceError(f"{path}[{m}]", f"job '{columns.id[m]}' can run on no worker type (needs a positive "
                            f"throughput on a type with at least {columns.scale_factor[m]} workers)")
    if columns.entity is not None:
        given = columns.entity != None  # noqa: E711  (element-wise)
        known = np.isin(columns.entity[given].astype(str), list(entity_ids)) if given.any() else np.ones(0, bool)
        if not known.all():
            m = int(np.flatnonzero(given)[np.flatnonzero(~known)[0]])
            raise InstanceError(f"{path}[{m}].entity", f"unknown entity '{columns.entity[m]}'")


# --- the cluster ------------------------------------------------------------------------------

def cluster_parts(worker_types: Any, entities: Any = None, colocations: Any = None
                  ) -> tuple[list[WorkerType], list[Entity], list[Colocation]]:
    """The cluster's worker types, entities and colocations, validated by the file schema
    itself (they are a handful of rows): a probe instance of one job runnable everywhere."""
    if isinstance(worker_types, Mapping):
        worker_types = [{"name": name, "count": count} for name, count in worker_types.items()]
    elif hasattr(worker_types, "columns"):  # a DataFrame of the cluster table
        worker_types = worker_types.to_dict("records")
    worker_types = [w.model_dump() if isinstance(w, WorkerType) else w for w in worker_types]
    names = [w.get("name") if isinstance(w, Mapping) else None for w in worker_types]
    probe_job = {"id": "_probe", "throughput": {str(name): 1.0 for name in names if isinstance(name, str)}}
    data = {"kind": "allocation", "worker_types": worker_types, "jobs": [probe_job],
            "entities": [e.model_dump() if isinstance(e, Entity) else e for e in entities or []],
            "colocations": [c.model_dump() if isinstance(c, Colocation) else c for c in colocations or []]}
    try:
        probe = validate_model(AllocationInstance, data)
    except InstanceError as error:
        if error.path.startswith("jobs"):  # only the probe's: the counts are all 0 for it
            raise InstanceError("worker_types", "no worker type has a worker") from None
        raise
    return list(probe.worker_types), list(probe.entities), list(probe.colocations)


class ColumnAllocationInstance(ColumnBacked, AllocationInstance):
    """An :class:`AllocationInstance` whose jobs are held as :class:`JobColumns`; its ``jobs``
    list is made on first access (see the module docstring). Build it with :func:`from_columns`
    or :meth:`from_parts`."""

    _columns: JobColumns | None = None
    # How the job objects list their throughputs when made (a Parquet folder's reader sets them
    # so those objects are the ones the table reader makes): a (jobs, types) mask of the cells
    # given, zeros included (None: the positive ones), and the order of the types' columns.
    _throughput_given: np.ndarray | None = None
    _throughput_order: list[int] | None = None

    @classmethod
    def from_parts(cls, worker_types: list[WorkerType], columns: JobColumns, entities: list[Entity],
                   colocations: list[Colocation], name: str = "",
                   arrays: AllocationArrays | None = None) -> ColumnAllocationInstance:
        """An instance of already-checked parts (no validation: :func:`from_columns` checks).
        ``arrays``: the instance's arrays when the caller has them (a session does)."""
        instance = cls.model_construct(kind="allocation", schema_version=1, name=name,
                                       worker_types=worker_types, entities=entities, colocations=colocations)
        instance.__dict__.pop("jobs", None)
        instance._columns = columns
        instance._arrays = arrays
        return instance

    def __getattr__(self, name: str) -> Any:
        if name == "jobs":
            columns = (self.__pydantic_private__ or {}).get("_columns")
            if columns is not None:
                types = [t.name for t in self.__dict__["worker_types"]]
                private = self.__pydantic_private__ or {}
                given, order = private.get("_throughput_given"), private.get("_throughput_order")
                jobs = [columns.job(m, types, given=None if given is None else given[m], order=order)
                        for m in range(len(columns))]
                # In the fields' order, as a validated instance holds them: a saved file lists
                # "jobs" where the schema puts it, not last.
                present = dict(self.__dict__, jobs=jobs)
                fields = type(self).model_fields
                order = [name for name in fields if name in present] + [name for name in present if name not in fields]
                self.__dict__.clear()
                self.__dict__.update({name: present[name] for name in order})
                return jobs
        return super().__getattr__(name)

    def materialize(self) -> None:
        """Make the ``jobs`` list now (saving, comparing or copying needs it)."""
        _ = self.jobs

    def arrays(self) -> AllocationArrays:
        if self._arrays is None:
            columns = (self.__pydantic_private__ or {}).get("_columns")
            if columns is None:
                return super().arrays()
            self._arrays = job_arrays(columns, self.worker_types, self.colocations)
        return self._arrays


def job_arrays(columns: JobColumns, worker_types: list[WorkerType], colocations: list[Colocation]
               ) -> AllocationArrays:
    """The solvers' and the judge's arrays of checked columns (what
    :meth:`AllocationInstance.arrays` computes from job objects)."""
    types = [t.name for t in worker_types]
    n = len(columns)
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(columns.arrival_time, kind="stable")] = np.arange(n)
    classes, table = colocation_classes(columns, types, colocations)
    return AllocationArrays(
        job_ids=columns.id.tolist(), worker_types=types, throughput=columns.throughput,
        scale_factor=columns.scale_factor.astype(float), weight=columns.weight,
        num_workers=np.array([t.count for t in worker_types], dtype=float),
        cost_per_hour=np.array([t.cost_per_hour for t in worker_types], dtype=float),
        steps_left=columns.steps_left, time_elapsed=columns.time_elapsed,
        isolated_time_elapsed=np.where(np.isnan(columns.isolated_time_elapsed), columns.time_elapsed,
                                       columns.isolated_time_elapsed),
        slo_seconds=np.where(np.isnan(columns.slo_hours), np.inf, columns.slo_hours * 3600.0),
        arrival_rank=rank, colocation_class=classes, colocation_throughput=table)


def colocation_classes(columns: JobColumns, types: list[str], colocations: list[Colocation]
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Each job's colocation class and the class table, numbered as
    :meth:`AllocationInstance._colocation_arrays` numbers them."""
    n = len(columns)
    if not colocations:
        return np.full(n, -1), np.zeros((0, 0, len(types), 2))
    probe = AllocationInstance.model_construct(worker_types=[], jobs=[], colocations=colocations)
    _, table = probe._colocation_arrays(types)
    keys = sorted({(job_type, entry.scale_factor) for entry in colocations for job_type in entry.job_types})
    classes = np.full(n, -1)
    if columns.job_type is not None:
        for index, (job_type, scale) in enumerate(keys):
            classes[(columns.job_type == job_type) & (columns.scale_factor == scale)] = index
    return classes, table


def from_columns(worker_types: Any, jobs: Any, *, entities: Any = None, colocations: Any = None,
                 name: str = "") -> ColumnAllocationInstance:
    """An allocation instance from columns (see the module docstring), checked column by column.

    Parameters
    ----------
    worker_types : the cluster: a list of ``{"name", "count", "cost_per_hour"}`` dicts (as in
        the file), a mapping ``{name: count}``, or a DataFrame with those columns
    jobs : a mapping of column name to values (numpy arrays, lists) or a DataFrame
    entities, colocations : as in the file (lists of dicts), optional
    name : the instance's name

    Raises :class:`~fleetplan.instances.InstanceError` naming the first bad value's path.
    """
    types, entity_list, colocation_list = cluster_parts(worker_types, entities, colocations)
    names = [t.name for t in types]
    columns = read_job_columns(jobs, names)
    if len(columns) == 0:
        raise InstanceError("jobs", "must list at least one job")
    check_jobs(columns, np.array([t.count for t in types], dtype=float), {e.id for e in entity_list})
    return ColumnAllocationInstance.from_parts(types, columns, entity_list, colocation_list, name)


def to_columns(instance: AllocationInstance) -> JobColumns:
    """The jobs of any allocation instance as :class:`JobColumns` (one pass over its jobs, or
    none for a column instance)."""
    columns = (instance.__pydantic_private__ or {}).get("_columns")
    if columns is not None and "jobs" not in instance.__dict__:
        return columns
    jobs = instance.jobs
    arrays = instance.arrays()
    # The number fields as given, kept by the arrays' own pass over the jobs where it ran here
    # (a pass per field read the 16,384 job objects six times: 14 ms of a marginal-values call's
    # set-up); numpy reads None as NaN in a float array: "not given", as the columns want it.
    given = (instance.__pydantic_private__ or {}).get("_given") or {}

    def number(name: str) -> np.ndarray:
        if name in given:
            return given[name].copy()
        return np.array([getattr(job, name) for job in jobs], dtype=float)

    def text(name: str) -> np.ndarray | None:
        values = list(map(attrgetter(name), jobs))  # no Python frame per job (a comprehension's)
        return None if values.count(None) == len(values) else np.array(values, dtype=object)

    return JobColumns(
        id=np.array(arrays.job_ids, dtype=object), throughput=arrays.throughput.copy(),
        scale_factor=arrays.scale_factor.astype(np.int64), weight=arrays.weight.copy(),
        steps_left=arrays.steps_left.copy(), arrival_time=number("arrival_time"),
        time_elapsed=arrays.time_elapsed.copy(), isolated_time_elapsed=number("isolated_time_elapsed"),
        slo_hours=number("slo_hours"), job_type=text("job_type"), entity=text("entity"))


__all__ = ["ColumnAllocationInstance", "JobColumns", "check_jobs", "cluster_parts", "from_columns",
           "job_arrays", "read_job_columns", "to_columns"]
