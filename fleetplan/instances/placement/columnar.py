"""A placement instance read straight from its Parquet tables: the folder
``fleetplan export INSTANCE --format parquet -o DIR`` writes (``regions``, ``tables``, ``jobs``
and ``settings.yaml``), loaded by ``load_instance(DIR)`` and so by ``fleetplan solve DIR``.

At 10^6 tables the JSON file and
:func:`~fleetplan.instances.placement.frames.from_frames` on the same tables take several times
this reader's time (benchmarks/results/placement.md, "Tetris at 10^6 tables as a planner runs
it"): both turn every cell into a Python object and validate it one by one. Here the columns stay Arrow and
numpy arrays: types are read from the Parquet schema, and every check of ``from_frames`` and of
:func:`~fleetplan.instances.placement.build_arrays` (required columns and cells, known names, ids
unique, references resolving, numbers finite and in range, ML jobs with a GPU type and the others
without, a table listed once per job) runs vectorised. The validation is the same by
construction: the regions and settings go through the pydantic model as they always do, and when
*any* vectorised check fails — or a column has a type or a cell the fast path does not handle
(surrounding spaces, a CSV-style text number, an unexpected type) — the folder is read again by
``from_frames``, whose error names the file, row and column. So the fast path only ever accepts
what ``from_frames`` accepts (``tests/test_placement_columnar.py`` checks both on mutated tables).
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np

from fleetplan.instances.arrow import Undecided, one_chunk, read_known
from fleetplan.instances.base import InstanceError
from fleetplan.instances.placement import (
    JOB_KINDS,
    ML,
    NO_REGION,
    PRIORITY_LEVELS,
    JobColumns,
    PlacementArrays,
    PlacementInstance,
    TableColumns,
)
from fleetplan.lazy import lazy_module

pa = lazy_module("pyarrow")
pc = lazy_module("pyarrow.compute")

NAMES = ("regions", "tables", "jobs")


def folder_files(folder: Path) -> dict[str, Path] | None:
    """The tables of an exported placement instance in ``folder`` (Parquet, else CSV), with the
    settings file if any; None when the folder does not hold them."""
    files: dict[str, Path] = {}
    for name in NAMES:
        for suffix in (".parquet", ".csv"):
            if (folder / f"{name}{suffix}").is_file():
                files[name] = folder / f"{name}{suffix}"
                break
        else:
            return None
    for suffix in (".yaml", ".yml", ".json"):
        if (folder / f"settings{suffix}").is_file():
            files["settings"] = folder / f"settings{suffix}"
            break
    return files


def from_folder(folder: str | Path, tables: dict[str, str], settings: str | None) -> PlacementInstance:
    """The placement kind's folder reader (its registration's ``folder_reader``): the folder's
    tables, read column-wise."""
    return load_folder(folder)


def load_folder(folder: str | Path) -> PlacementInstance:
    """The placement instance in ``folder`` (module docstring); raises :class:`InstanceError`."""
    from fleetplan.instances.placement.frames import from_frames

    folder = Path(folder)
    files = folder_files(folder)
    if files is None:
        raise InstanceError("", "a folder is read as a placement instance's tables: regions, tables and jobs "
                                "(.parquet or .csv, as `fleetplan export` writes them) were not all found",
                            str(folder))
    slow = {"tables": str(files["tables"]), "jobs": str(files["jobs"]), "regions": str(files["regions"]),
            "settings": str(files["settings"]) if "settings" in files else None}
    if any(files[name].suffix != ".parquet" for name in NAMES):
        return from_frames(**slow)
    # Millions of small lists (each job's tables) are made below: the cyclic garbage collector,
    # run again and again as they accumulate, took longer than making them.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _fast(files)
    except Undecided:
        pass
    finally:
        if collecting:
            gc.enable()
    return from_frames(**slow)


def _fast(files: dict[str, Path]) -> PlacementInstance:
    from fleetplan.instances.placement.frames import region_part

    try:
        skeleton, gpu_types, apps = region_part(str(files["regions"]), files.get("settings"))
    except InstanceError:
        raise Undecided from None
    region_ids = pa.array(skeleton.arrays().region_ids)
    tables = read_known(files["tables"], {"id", "size_bytes", "home"})
    jobs = read_known(files["jobs"], {"id", "kind", "tables", "gpu_type", "gpu_hours", "cpu_hours", "priority",
                                 "application", "recurring", "weight", "read_fraction"})
    for column in ("id", "size_bytes", "home"):
        if column not in tables.column_names:
            raise Undecided
    for column in ("id", "kind", "tables", "priority", "application"):
        if column not in jobs.column_names:
            raise Undecided

    table_ids = _ids(tables["id"])
    num_tables = len(table_ids)
    _unique(table_ids)
    size = _numbers(tables["size_bytes"], required=True)
    home = _lookup(_ids(tables["home"]), region_ids)
    if (size < 0).any():
        raise Undecided

    job_ids = _ids(jobs["id"])
    num_jobs = len(job_ids)
    _unique(job_ids)
    kind_text = _ids(jobs["kind"], lower=True)
    job_kind = _lookup(kind_text, pa.array(JOB_KINDS)).astype(np.int8)
    ptr, flat = _job_tables(jobs["tables"], table_ids)
    pair_job = np.repeat(np.arange(num_jobs, dtype=np.int64), np.diff(ptr))
    keys = np.sort(pair_job * max(num_tables, 1) + flat)
    if (keys[1:] == keys[:-1]).any():
        raise Undecided  # a table listed twice
    gpu_type = np.full(num_jobs, NO_REGION, dtype=np.int64)
    if "gpu_type" in jobs.column_names:
        column = jobs["gpu_type"]
        if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type) \
                and not pa.types.is_null(column.type):
            raise Undecided
        given = column.is_valid().to_numpy(zero_copy_only=False) if not pa.types.is_null(column.type) \
            else np.zeros(num_jobs, dtype=bool)
        if given.any():
            names = pc.filter(column, pa.array(given))
            _plain(names)
            gpu_type[given] = _lookup(names, pa.array(gpu_types))
    is_ml = job_kind == ML
    if (is_ml & (gpu_type < 0)).any() or (~is_ml & (gpu_type >= 0)).any():
        raise Undecided
    gpu_hours = _numbers(jobs["gpu_hours"], default=0.0) if "gpu_hours" in jobs.column_names else np.zeros(num_jobs)
    cpu_hours = _numbers(jobs["cpu_hours"], default=0.0) if "cpu_hours" in jobs.column_names else np.zeros(num_jobs)
    if (gpu_hours < 0).any() or (cpu_hours < 0).any() or (~is_ml & (gpu_hours > 0)).any():
        raise Undecided
    priority = _integers(jobs["priority"])
    if ((priority < 0) | (priority >= PRIORITY_LEVELS)).any():
        raise Undecided
    app = _lookup(_ids(jobs["application"]), pa.array(apps))
    recurring = _booleans(jobs["recurring"]) if "recurring" in jobs.column_names else np.ones(num_jobs, dtype=bool)
    weight = _numbers(jobs["weight"], default=1.0) if "weight" in jobs.column_names else None
    fraction = _numbers(jobs["read_fraction"], default=1.0) if "read_fraction" in jobs.column_names else None
    if weight is not None and (weight < 0).any():
        raise Undecided
    if fraction is not None and ((fraction <= 0) | (fraction > 1)).any():
        raise Undecided

    base = skeleton.arrays()
    table_id_list = table_ids.to_pylist()
    job_id_list = job_ids.to_pylist()
    kinds = list(np.array(JOB_KINDS, dtype=object)[job_kind])
    type_names = np.array([*gpu_types, None], dtype=object)
    arrays = PlacementArrays(
        region_ids=base.region_ids, gpu_types=base.gpu_types, app_ids=base.app_ids, gpu_supply=base.gpu_supply,
        storage_capacity=base.storage_capacity, cpu_capacity=base.cpu_capacity, dr_partner=base.dr_partner,
        table_ids=table_id_list, table_size=size, table_home=home, job_ids=job_id_list, job_kind=job_kind,
        job_ptr=ptr, job_tables=flat, job_gpu_type=gpu_type, job_gpu_hours=gpu_hours, job_cpu_hours=cpu_hours,
        job_priority=priority, job_app=app, job_recurring=recurring,
        job_weight=np.ones(num_jobs) if weight is None else weight,
        job_read_fraction=np.ones(num_jobs) if fraction is None else fraction,
        w_traffic=base.w_traffic, w_gpu=base.w_gpu, w_storage=base.w_storage, w_priority=base.w_priority,
        sigmoid_scale=base.sigmoid_scale, high_priority=base.high_priority,
        home_training_threshold=base.home_training_threshold, move_quota_bytes=base.move_quota_bytes,
        dr_policy=base.dr_policy, split_ml_demand=base.split_ml_demand, overload_form=base.overload_form)
    region_names = np.array(region_ids.to_pylist(), dtype=object)
    table_columns = TableColumns.model_construct(id=table_id_list, size_bytes=size.tolist(),
                                                 home=list(region_names[home]))
    job_columns = JobColumns.model_construct(
        id=job_id_list, kind=kinds, tables=_rows(flat, ptr),
        gpu_type=list(type_names[gpu_type]), gpu_hours=gpu_hours.tolist(), cpu_hours=cpu_hours.tolist(),
        priority=priority.tolist(), application=list(np.array(apps, dtype=object)[app]),
        recurring=recurring.tolist(), weight=None if weight is None else weight.tolist(),
        read_fraction=None if fraction is None else fraction.tolist())
    instance = skeleton.model_copy(update={"tables": table_columns, "jobs": job_columns})
    instance._arrays = arrays
    return instance


# --- columns --------------------------------------------------------------------------------

def _rows(flat: np.ndarray, ptr: np.ndarray) -> list[list[int]]:
    """CSR rows as lists (slices of one list: a third of a second for 10^6 jobs, where a
    ``tolist`` per row took three seconds)."""
    values = flat.tolist()
    starts = ptr.tolist()
    return [values[a:b] for a, b in zip(starts[:-1], starts[1:], strict=True)]


def _plain(values) -> None:
    """Strings as ``from_frames`` keeps them: none empty, none with spaces around (it strips)."""
    if values.null_count:
        raise Undecided
    if len(values) and (pc.any(pc.equal(pc.utf8_length(values), 0)).as_py()
                        or not pc.all(pc.equal(pc.utf8_trim_whitespace(values), values)).as_py()):
        raise Undecided


def _ids(column, lower: bool = False):
    column = one_chunk(column)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise Undecided
    _plain(column)
    return pc.utf8_lower(column) if lower else column


def _unique(values) -> None:
    if len(pc.unique(values)) != len(values):
        raise Undecided


def _lookup(values, known) -> np.ndarray:
    index = pc.index_in(values, value_set=known)
    if index.null_count:
        raise Undecided
    return index.to_numpy(zero_copy_only=False).astype(np.int64)


def _numbers(column, default: float | None = None, required: bool = False) -> np.ndarray:
    column = one_chunk(column)
    if not (pa.types.is_floating(column.type) or pa.types.is_integer(column.type)):
        raise Undecided
    values = column.to_numpy(zero_copy_only=False).astype(float)  # nulls -> NaN
    missing = np.isnan(values)
    if missing.any():
        if required or default is None:
            raise Undecided
        values[missing] = default
    if not np.isfinite(values).all():
        raise Undecided
    return values


def _integers(column) -> np.ndarray:
    column = one_chunk(column)
    if not pa.types.is_integer(column.type) or column.null_count:
        raise Undecided
    return column.to_numpy().astype(np.int64)


def _booleans(column) -> np.ndarray:
    column = one_chunk(column)
    if not pa.types.is_boolean(column.type):
        raise Undecided
    values = column.fill_null(True).to_numpy(zero_copy_only=False)
    return values.astype(bool)


def _job_tables(column, table_ids) -> tuple[np.ndarray, np.ndarray]:
    """Each job's tables (``t1;t2`` text, or a list of ids) as CSR rows of ``table_ids``."""
    column = one_chunk(column)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        if column.null_count:
            raise Undecided
        column = pc.split_pattern(column, ";")
    elif not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)):
        raise Undecided
    if column.null_count:
        raise Undecided
    parts = pc.list_flatten(column)
    if not (pa.types.is_string(parts.type) or pa.types.is_large_string(parts.type)):
        raise Undecided
    _plain(parts)
    counts = pc.list_value_length(column).to_numpy(zero_copy_only=False).astype(np.int64)
    if (counts == 0).any():
        raise Undecided
    flat = _lookup(parts, table_ids)
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return ptr, flat


__all__ = ["folder_files", "load_folder"]
