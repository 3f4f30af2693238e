"""The ``gpushare`` kind's tables: a node list and a task list in, as Alibaba's GPU trace
(cluster-trace-gpu-v2023) lays them out.

* nodes: ``sn`` (or ``id``), ``cpu_milli``, ``memory_mib``, ``gpu`` (or ``gpus``), ``model``;
* tasks, in arrival order: ``name`` (or ``id``), ``cpu_milli``, ``memory_mib``, ``num_gpu``,
  ``gpu_milli``, optionally ``gpu_spec`` (models separated by ``|``; empty: any). The trace's
  other columns (``qos``, ``pod_phase``, ``creation_time``, ``deletion_time``,
  ``scheduled_time``) are read past.

Other column names are mapped with ``columns={"cpu_milli": "cpu"}`` (``--column
cpu_milli=cpu`` on the command line). A bad cell is one line naming the file, row, line and
column (``tasks.csv: row 3 (line 4), column 'gpu_milli': must be an integer, got 'half'``);
so is a value the instance refuses (a ``gpu_milli`` of 1,500).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fleetplan.instances.base import InstanceError, validate_model
from fleetplan.instances.gpushare import GpushareInstance
from fleetplan.instances.tables import Table, read_table, relabel, split_path

NODE_FIELDS = {"id": ("sn", "id"), "cpu_milli": ("cpu_milli",), "memory_mib": ("memory_mib",),
               "gpus": ("gpu", "gpus"), "model": ("model",)}
TASK_FIELDS = {"id": ("name", "id"), "cpu_milli": ("cpu_milli",), "memory_mib": ("memory_mib",),
               "num_gpu": ("num_gpu",), "gpu_milli": ("gpu_milli",), "gpu_spec": ("gpu_spec",)}
TRACE_EXTRAS = ("qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time")
INTEGER_FIELDS = ("cpu_milli", "memory_mib", "gpus", "num_gpu", "gpu_milli")


def _columns_of(table: Table, fields: dict[str, tuple[str, ...]], mapping: dict[str, str],
                optional: tuple[str, ...]) -> dict[str, str | None]:
    """Which column holds each field: the mapped name, else the first known name present."""
    chosen: dict[str, str | None] = {}
    for field, names in fields.items():
        if field in mapping:
            table.require([mapping[field]])
            chosen[field] = mapping[field]
            continue
        present = [name for name in names if name in table.columns]
        if not present and field not in optional:
            table.require([names[0]])
        chosen[field] = present[0] if present else None
    used = {c for c in chosen.values() if c is not None}
    for column in table.columns:
        if column not in used and column not in TRACE_EXTRAS:
            known = sorted({n for names in fields.values() for n in names} | set(TRACE_EXTRAS))
            raise table.error(f"unknown column (known: {', '.join(known)}; map another name with "
                              f"--column FIELD=COLUMN)", column=column)
    return chosen


def _read(table: Table, chosen: dict[str, str | None]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for field, column in chosen.items():
        if column is None:
            continue
        if field in INTEGER_FIELDS:
            out[field] = table.values(column, "int", required=True)
        elif field == "gpu_spec":
            out[field] = table.values(column, "str", default="")
        else:
            out[field] = table.values(column, "str", required=True)
    return out


def from_frames(nodes: Any, tasks: Any, *, columns: dict[str, str] | None = None, name: str = "",
                source: str = "") -> GpushareInstance:
    """A gpushare instance from a node table and a task table (DataFrames or ``.csv`` /
    ``.parquet`` paths); ``columns`` maps a field to another column name (both tables)."""
    mapping = dict(columns or {})
    known_fields = set(NODE_FIELDS) | set(TASK_FIELDS)
    for field in mapping:
        if field not in known_fields:
            raise InstanceError("--column", f"unknown field '{field}' (known: {', '.join(sorted(known_fields))})")
    if not name:
        name = Path(tasks).stem if isinstance(tasks, (str, os.PathLike)) else "gpushare"
    node_table = read_table(nodes, "nodes")
    task_table = read_table(tasks, "tasks")
    node_columns = _columns_of(node_table, NODE_FIELDS, {k: v for k, v in mapping.items() if k in NODE_FIELDS}, ())
    task_columns = _columns_of(task_table, TASK_FIELDS, {k: v for k, v in mapping.items() if k in TASK_FIELDS},
                               ("gpu_spec",))
    if len(node_table) == 0:
        raise node_table.error("no rows: list at least one node")
    data = {"kind": "gpushare", "name": name, "source": source,
            "nodes": _read(node_table, node_columns), "tasks": _read(task_table, task_columns)}

    def resolve(path: str) -> tuple[Table, int | None, str | None] | None:
        head, _, rest = path.partition(".")
        table, chosen = (node_table, node_columns) if head == "nodes" else (task_table, task_columns)
        if head not in ("nodes", "tasks"):
            return None
        field, row, _ = split_path(rest)
        return table, row, chosen.get(field)

    try:
        return validate_model(GpushareInstance, data)
    except InstanceError as error:
        raise relabel(error, resolve) from None


__all__ = ["NODE_FIELDS", "TASK_FIELDS", "from_frames"]
