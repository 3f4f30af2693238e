"""An allocation instance read straight from its Parquet tables: the folder
``fleetplan export INSTANCE --format parquet -o DIR`` writes (``jobs`` and ``cluster``, and
``entities`` and ``colocations`` when the instance has them), loaded by ``load_instance(DIR)``
and so by ``fleetplan solve DIR``.

:func:`~fleetplan.instances.allocation.frames.from_frames` turns every cell into a Python
object, every job into a dict and then into a validated ``Job``: on a folder of 10^6 jobs that
load took 31.9 s wall and the whole ``fleetplan solve`` 37.8 s; read here, 1.5-3.0 s and
7.9-11.5 s at load 3-5 (benchmarks/results/allocation.md, "10^6 jobs from a Parquet folder"). Here the jobs' columns stay Arrow and numpy arrays: their
types are read from the Parquet schema, and every check that ``from_frames`` and the file
schema make on a job — known columns, ids given, unique and without surrounding spaces, numbers
finite and in range (throughputs >= 0, scale factors integers >= 1, weights, steps and SLOs
> 0, times >= 0), an SLO only with the steps left, every job runnable on some type, entities
known — runs vectorised, and the result is a
:class:`~fleetplan.instances.allocation.columns.ColumnAllocationInstance` whose job objects are
made only if some code asks for them. The cluster, entities and colocations (a handful of rows)
go through the file schema itself (:func:`~fleetplan.instances.allocation.columns.cluster_parts`).

The validation is the same by construction: when *any* check fails, or a column has a type or a
cell the fast path does not handle (a text or boolean column where numbers belong, surrounding
spaces that ``from_frames`` would strip, a CSV table), the folder is read again by
``from_frames``, whose error names the file, row and column. So the fast path only ever accepts
what ``from_frames`` accepts, and gives the instance it gives (``tests/test_allocation_columnar.py``
checks both on generated instances and on mutated tables).

>>> import tempfile
>>> import fleetplan
>>> from fleetplan.instances.allocation import frames
>>> folder = tempfile.mkdtemp()
>>> for table, frame in frames.to_frames(fleetplan.generate("allocation", {"jobs": 4}, seed=1)).items():
...     frame.to_parquet(f"{folder}/{table}.parquet")
>>> instance = fleetplan.load_instance(folder)
>>> type(instance).__name__, instance.arrays().job_ids
('ColumnAllocationInstance', ['job0', 'job1', 'job2', 'job3'])
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.instances.allocation import AllocationInstance
from fleetplan.instances.allocation.columns import (
    ColumnAllocationInstance,
    JobColumns,
    cluster_parts,
)
from fleetplan.instances.allocation.frames import (
    CLUSTER_COLUMNS,
    COLOCATION_COLUMNS,
    ENTITY_COLUMNS,
    JOB_COLUMNS,
    THROUGHPUT,
    from_frames,
)
from fleetplan.instances.arrow import Undecided, one_chunk, read_known
from fleetplan.instances.base import MAX_INTEGER, InstanceError
from fleetplan.lazy import lazy_module

pa = lazy_module("pyarrow")
pc = lazy_module("pyarrow.compute")

# What ``str.strip`` removes (the table reader strips every text cell): an id with one of these
# around it is a different id once read, so the fast path leaves such a table to ``from_frames``.
_WHITESPACE = "".join(chr(code) for code in range(0x3001) if chr(code).isspace())
# Optional number columns of a job: the value when the cell is empty, and the bound a given
# value meets (the file schema's ``gt=0`` or ``ge=0``).
_NUMBERS = {"weight": (1.0, "positive"), "steps_left": (np.nan, "positive"), "arrival_time": (0.0, "nonnegative"),
            "time_elapsed": (0.0, "nonnegative"), "isolated_time_elapsed": (np.nan, "nonnegative"),
            "slo_hours": (np.nan, "positive")}


def from_folder(folder: str | Path, tables: dict[str, str], settings: str | None) -> AllocationInstance:
    """The allocation kind's folder reader (its registration's ``folder_reader``): the tables
    found in ``folder`` (``tables``: name -> file, as
    :func:`fleetplan.instances.frames.load_folder` finds them; the kind has no settings), read
    column-wise when they are all Parquet files, else by ``from_frames``. The instance is named
    after the folder. Raises :class:`InstanceError` naming the file, row and column."""
    name = Path(folder).name
    if all(str(path).endswith(".parquet") for path in tables.values()):
        try:
            return _fast(tables, name)
        except Undecided:
            pass
    return from_frames(**tables, name=name)


def _fast(files: dict[str, str], name: str) -> ColumnAllocationInstance:
    cluster = read_known(files["cluster"], set(CLUSTER_COLUMNS))
    type_names = _texts(cluster, "name", required=True)
    if not type_names or len(set(type_names)) != len(type_names):
        raise Undecided
    counts = _small_integers(cluster, "count", required=True)
    prices = _small_numbers(cluster, "cost_per_hour")
    worker_types = [{"name": type_name, "count": count, **({} if price is None else {"cost_per_hour": price})}
                    for type_name, count, price in zip(type_names, counts, prices, strict=True)]
    entities = _entities(files["entities"]) if "entities" in files else []
    colocations = _colocations(files["colocations"], type_names) if "colocations" in files else []
    try:
        types, entity_list, colocation_list = cluster_parts(worker_types, entities, colocations)
    except InstanceError:
        raise Undecided from None

    known = set(JOB_COLUMNS) | {THROUGHPUT + type_name for type_name in type_names}
    jobs = read_known(files["jobs"], known)
    n = jobs.num_rows
    if n == 0 or "id" not in jobs.column_names:
        raise Undecided
    ids = _strings(jobs["id"])
    if ids.null_count or _empty(ids).any() or len(pc.unique(ids)) != n:
        raise Undecided
    # The throughputs, in the table's column order (a job's dict lists its types in that order).
    order = [type_names.index(column[len(THROUGHPUT):]) for column in jobs.column_names
             if column.startswith(THROUGHPUT)]
    throughput = np.zeros((n, len(type_names)))
    given = np.zeros((n, len(type_names)), dtype=bool)
    for j in order:
        values = _numbers(jobs[THROUGHPUT + type_names[j]])
        present = ~np.isnan(values)
        if (values[present] < 0).any():
            raise Undecided
        throughput[present, j] = values[present]
        given[:, j] = present
    scale = _integers(jobs["scale_factor"], default=1) if "scale_factor" in jobs.column_names \
        else np.ones(n, dtype=np.int64)
    if (scale < 1).any():
        raise Undecided
    numbers: dict[str, np.ndarray] = {}
    for column, (default, sign) in _NUMBERS.items():
        if column not in jobs.column_names:
            numbers[column] = np.full(n, default)
            continue
        values = _numbers(jobs[column])
        present = ~np.isnan(values)
        bad = values[present] <= 0 if sign == "positive" else values[present] < 0
        if bad.any():
            raise Undecided
        numbers[column] = np.where(present, values, default) if not np.isnan(default) else values
    if (~np.isnan(numbers["slo_hours"]) & np.isnan(numbers["steps_left"])).any():
        raise Undecided
    job_type = _optional_texts(jobs, "job_type")
    entity = _optional_texts(jobs, "entity")
    if entity is not None:
        named = {e.id for e in entity_list}
        if any(value is not None and value not in named for value in set(entity.tolist())):
            raise Undecided
    counts_array = np.array([t.count for t in types], dtype=float)
    if not ((throughput > 0) & (counts_array[None, :] >= scale[:, None])).any(axis=1).all():
        raise Undecided

    columns = JobColumns(
        id=np.array(ids.to_pylist(), dtype=object), throughput=throughput, scale_factor=scale,
        weight=numbers["weight"], steps_left=numbers["steps_left"], arrival_time=numbers["arrival_time"],
        time_elapsed=numbers["time_elapsed"], isolated_time_elapsed=numbers["isolated_time_elapsed"],
        slo_hours=numbers["slo_hours"], job_type=job_type, entity=entity)
    instance = ColumnAllocationInstance.from_parts(types, columns, entity_list, colocation_list, name)
    # What the job objects list, when they are made: a throughput given as 0 stays in the job's
    # dict, and the dict lists the types in the table's column order (as from_frames makes them).
    if (given & (throughput == 0)).any():
        instance._throughput_given = given
    if order != sorted(order):
        instance._throughput_order = order
    return instance


# --- the small tables -------------------------------------------------------------------------

def _entities(path: str) -> list[dict[str, Any]]:
    table = read_known(path, set(ENTITY_COLUMNS))
    ids = _texts(table, "id", required=True)
    weights = _small_numbers(table, "weight")
    policies = _texts(table, "policy", required=False)
    return [{"id": entity, **({} if weight is None else {"weight": weight}),
             **({} if policy is None else {"policy": policy})}
            for entity, weight, policy in zip(ids, weights, policies, strict=True)]


def _colocations(path: str, type_names: list[str]) -> list[dict[str, Any]]:
    pairs = {f"{THROUGHPUT}{name}_{side}": (name, side) for name in type_names for side in "ab"}
    table = read_known(path, set(COLOCATION_COLUMNS) | set(pairs))
    first = _texts(table, "job_type_a", required=True)
    second = _texts(table, "job_type_b", required=True)
    scales = _small_integers(table, "scale_factor", required=False)
    rows: list[dict[str, Any]] = [
        {"job_types": [a, b], **({} if scale is None else {"scale_factor": scale}), "throughput": {}}
        for a, b, scale in zip(first, second, scales, strict=True)]
    for name in type_names:
        a_values = _small_numbers(table, f"{THROUGHPUT}{name}_a")
        b_values = _small_numbers(table, f"{THROUGHPUT}{name}_b")
        for row, a, b in zip(rows, a_values, b_values, strict=True):
            if (a is None) != (b is None):
                raise Undecided
            if a is not None:
                row["throughput"][name] = [a, b]
    return rows


def _texts(table: Any, column: str, *, required: bool) -> list[str | None]:
    """A text column of a small table as a list (None where empty and not required)."""
    if column not in table.column_names:
        if required:
            raise Undecided
        return [None] * table.num_rows
    values = _strings(table[column])
    out = [None if value == "" else value for value in values.to_pylist()]
    if required and None in out:
        raise Undecided
    return out


def _small_integers(table: Any, column: str, *, required: bool) -> list[int | None]:
    if column not in table.column_names:
        if required:
            raise Undecided
        return [None] * table.num_rows
    values = table[column]
    if required and values.null_count:
        raise Undecided
    numbers = _integers(values, default=0)
    return [None if missing else int(number) for number, missing in
            zip(numbers.tolist(), _missing(values).tolist(), strict=True)]


def _small_numbers(table: Any, column: str) -> list[float | None]:
    if column not in table.column_names:
        return [None] * table.num_rows
    return [None if np.isnan(value) else value for value in _numbers(table[column]).tolist()]


# --- columns ----------------------------------------------------------------------------------

def _empty(values: Any) -> np.ndarray:
    """Where a text column holds "" (False where it is null)."""
    lengths = pc.utf8_length(values)
    return (_values(lengths) == 0) & _valid(lengths)


def _missing(column: Any) -> np.ndarray:
    return ~_valid(one_chunk(column))


# Arrow's number types as numpy's. The columns' values are read from their Arrow buffers:
# pyarrow's own ``to_numpy`` imports pandas (a fifth of a second of the command's start).
_NUMPY_TYPES = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
                "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "halffloat": np.float16,
                "float": np.float32, "double": np.float64}


def _values(array: Any) -> np.ndarray:
    """The values of a number array (one chunk), a view of its buffer; what a null's slot holds
    is undefined (:func:`_valid` says which slots hold values)."""
    dtype = _NUMPY_TYPES.get(str(array.type))
    if dtype is None:
        raise Undecided
    data = np.frombuffer(array.buffers()[1], dtype=dtype)
    return data[array.offset:array.offset + len(array)]


def _valid(array: Any) -> np.ndarray:
    """Where an array (one chunk) holds a value, from its validity bitmap."""
    bitmap = array.buffers()[0]
    if bitmap is None or array.null_count == 0:
        return np.ones(len(array), dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return bits[array.offset:array.offset + len(array)].astype(bool)


def _strings(column: Any) -> Any:
    """A text column whose cells read back as they are: no spaces around (the reader strips
    them); nulls stay (the caller decides)."""
    column = one_chunk(column)
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), type=pa.string())
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise Undecided
    if len(column) and pc.all(pc.equal(pc.utf8_trim(column, characters=_WHITESPACE), column)).as_py() is False:
        raise Undecided
    return column


def _optional_texts(table: Any, column: str) -> np.ndarray | None:
    """An optional text column of the jobs: an object array (None where empty), or None when
    no job has a value."""
    if column not in table.column_names:
        return None
    values = _strings(table[column])
    if values.null_count + int(_empty(values).sum()) == len(values):
        return None
    return np.array([value or None for value in values.to_pylist()], dtype=object)  # "" -> None


def _numbers(column: Any) -> np.ndarray:
    """A number column (floats or integers; not booleans, not text) as floats, NaN where empty
    (the table reader reads a null and a NaN cell alike: not given); an infinity is left to
    ``from_frames`` to refuse."""
    column = one_chunk(column)
    if pa.types.is_null(column.type):
        return np.full(len(column), np.nan)
    if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
        raise Undecided
    values = _values(column).astype(float)
    values[~_valid(column)] = np.nan  # as NaN cells are
    if np.isinf(values).any():
        raise Undecided
    return values


def _integers(column: Any, *, default: int) -> np.ndarray:
    """An integer column as int64, ``default`` where empty; a float, text or boolean column is
    left to ``from_frames`` (it converts integral floats, and names anything else)."""
    column = one_chunk(column)
    if pa.types.is_null(column.type):
        return np.full(len(column), default, dtype=np.int64)
    if not pa.types.is_integer(column.type):
        raise Undecided
    values, valid = _values(column), _valid(column)
    if values.dtype == np.uint64 and (values[valid] > MAX_INTEGER).any():
        raise Undecided
    return np.where(valid, values, default).astype(np.int64)


__all__ = ["from_folder"]
