"""Tables in and out for the ``binpack`` kind (RMS, MAST §4.3): a region's machines, its running
jobs and what they hold, and the pending workloads from CSV/Parquet or DataFrames, and a
placement out as one table naming workloads, jobs and machines by id.

Layouts (``docs/data-in-out.md`` has the reference):

* **machines** — one row per machine: ``id``, ``cluster``, ``rack`` (a number; close numbers are
  close racks), ``hardware``, ``gpus``, ``cpus``, ``memory_gb``. The clusters and hardware types
  are those named here, in order of first appearance (the settings' ``clusters`` and
  ``hardware_types`` list them when one has no machine, or in another order).
* **workloads** — one row per pending *job*, in GMS order: ``workload``, ``tenant`` (optional),
  ``priority`` (0 highest .. 6), ``job``, ``tasks``, ``hardware``, ``gpus_per_task``,
  ``cpus_per_task``, ``memory_gb_per_task``. The rows of one workload are consecutive and
  agree on its tenant and priority.
* **running** (optional) — one row per running job: ``id``, ``workload``, ``tenant``,
  ``priority``, ``start_hours``.
* **holdings** (optional) — what running jobs hold: ``job`` (a running job id), ``machine`` (a
  machine id), ``gpus``, ``cpus``, ``memory_gb``.
* **settings** (optional; a dict or a YAML/JSON file) — ``name``, ``now_hours``, ``clusters``,
  ``hardware_types``.
* **plan** — one row per machine a placed job uses: ``workload``, ``placed``, ``job``,
  ``cluster``, ``machine``, ``tasks`` (on that machine), ``preempted`` (the running jobs
  preempted for the job, separated by ``;``, on its first row), ``score``; a workload left
  waiting is one row with ``placed`` false and its ``reason``.

Example
-------
>>> import pandas as pd
>>> from fleetplan.instances.binpack import frames as binpack_frames
>>> machines = pd.DataFrame({"id": ["m0", "m1"], "cluster": ["c0", "c0"], "rack": [0, 1],
...                          "hardware": ["gpu", "gpu"], "gpus": [8, 8], "cpus": [64, 64],
...                          "memory_gb": [512.0, 512.0]})
>>> workloads = pd.DataFrame({"workload": ["w1"], "priority": [1], "job": ["train"], "tasks": [2],
...                           "hardware": ["gpu"], "gpus_per_task": [8], "cpus_per_task": [16],
...                           "memory_gb_per_task": [128.0]})
>>> instance = binpack_frames.from_frames(machines=machines, workloads=workloads)
>>> instance.clusters, instance.workloads[0].jobs[0].tasks
(['c0'], 2)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fleetplan.instances.base import InstanceError, validate_model
from fleetplan.instances.binpack import BinpackInstance, BinpackPlan
from fleetplan.instances.tables import (
    Table,
    float_column,
    join_ids,
    read_settings,
    read_table,
    relabel,
    split_path,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

MACHINE_COLUMNS = ("id", "cluster", "rack", "hardware", "gpus", "cpus", "memory_gb")
WORKLOAD_COLUMNS = ("workload", "tenant", "priority", "job", "tasks", "hardware", "gpus_per_task", "cpus_per_task",
                    "memory_gb_per_task")
RUNNING_COLUMNS = ("id", "workload", "tenant", "priority", "start_hours")
HOLDING_COLUMNS = ("job", "machine", "gpus", "cpus", "memory_gb")
SETTINGS = ("name", "now_hours", "clusters", "hardware_types")
PLAN_COLUMNS = ("workload", "placed", "reason", "score", "job", "cluster", "machine", "tasks", "preempted")
_INT, _FLOAT = "int", "float"
_KINDS = {"rack": _INT, "gpus": _INT, "cpus": _INT, "memory_gb": _FLOAT, "priority": _INT, "tasks": _INT,
          "gpus_per_task": _INT, "cpus_per_task": _INT, "memory_gb_per_task": _FLOAT, "start_hours": _FLOAT}


def _columns(table: Table, names: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, list[Any]]:
    table.check_columns(names)
    table.require([n for n in names if n not in optional])
    return {n: table.values(n, _KINDS.get(n, "str"), default="" if n in optional else None,
                            required=n not in optional) for n in names}


def from_frames(machines: Any, workloads: Any, running: Any = None, holdings: Any = None, *,
                settings: Any = None, name: str | None = None, default_name: str | None = None) -> BinpackInstance:
    """A binpack instance from its tables (each a DataFrame or a ``.csv``/``.parquet`` path;
    ``running`` and ``holdings`` optional: nothing runs); ``settings`` a dict or a YAML/JSON
    file; ``name`` overrides the settings' name, ``default_name`` is used when neither gives one
    (else the machines file's stem). Raises :class:`InstanceError` naming the file, row and
    column of a bad cell."""
    extra, settings_label = read_settings(settings, SETTINGS, ("kind", "machines", "running", "workloads"))
    if name is not None:
        extra["name"] = name
    if not extra.get("name"):
        extra["name"] = default_name or (Path(machines).stem if isinstance(machines, (str, os.PathLike))
                                         else "binpack")

    machine_table = read_table(machines, "machines")
    machine_data = _columns(machine_table, MACHINE_COLUMNS)
    machine_row: dict[str, int] = {}
    for row, machine in enumerate(machine_data["id"]):
        if machine in machine_row:
            raise machine_table.error(f"duplicate id '{machine}' (first on row {machine_row[machine] + 1})", row, "id")
        machine_row[machine] = row

    job_table = read_table(workloads, "workloads")
    job_columns = _columns(job_table, WORKLOAD_COLUMNS, optional=("tenant",))
    workload_rows, job_row = _workloads(job_table, job_columns)
    extra.setdefault("clusters", list(dict.fromkeys(machine_data["cluster"])))
    extra.setdefault("hardware_types", list(dict.fromkeys([*machine_data["hardware"], *job_columns["hardware"]])))

    running_data: dict[str, Any] = {name: [] for name in RUNNING_COLUMNS}
    running_table = holding_table = None
    if running is not None:
        running_table = read_table(running, "running")
        running_data = _columns(running_table, RUNNING_COLUMNS, optional=("tenant",))
    running_row = {job: row for row, job in enumerate(running_data["id"])}
    holding_data: dict[str, Any] = {name: [] for name in HOLDING_COLUMNS}
    if holdings is not None:
        holding_table = read_table(holdings, "holdings")
        holding_data = _columns(holding_table, HOLDING_COLUMNS)
        for column, rows, what in (("job", running_row, "running job"), ("machine", machine_row, "machine")):
            for row, value in enumerate(holding_data[column]):
                if value not in rows:
                    raise holding_table.error(f"unknown {what} '{value}'", row, column)
            holding_data[column] = [rows[value] for value in holding_data[column]]

    data = {"kind": "binpack", **extra, "machines": machine_data,
            "running": {**running_data, "holdings": holding_data}, "workloads": workload_rows}

    def resolve(path: str) -> tuple[Table, int | None, str | None] | None:
        head, row, rest = split_path(path)
        column, _, index = rest.partition("[")
        number = int(index.split("]")[0]) if index.split("]")[0].isdigit() else None
        if head == "machines":
            return machine_table, number, column or None
        if head == "running" and rest.startswith("holdings.") and holding_table is not None:
            sub, _, sub_index = rest[len("holdings."):].partition("[")
            digits = sub_index.split("]")[0]
            return holding_table, int(digits) if digits.isdigit() else None, sub or None
        if head == "running" and running_table is not None:
            return running_table, number, column or None
        if head == "workloads" and row is not None:
            field, _, tail = rest.partition(".")
            if field.startswith("jobs[") and field.endswith("]") and field[5:-1].isdigit():
                return job_table, job_row[row][int(field[5:-1])], {"id": "job"}.get(tail, tail) or None
            return job_table, job_row[row][0], {"id": "workload"}.get(field, field) or None
        return None

    try:
        return validate_model(BinpackInstance, data)
    except InstanceError as error:
        if resolve(error.path) is None:  # a setting: name the settings file
            raise InstanceError(error.path, error.reason, settings_label) from None
        raise relabel(error, resolve) from None


def _workloads(table: Table, columns: dict[str, list[Any]]) -> tuple[list[dict[str, Any]], list[list[int]]]:
    """The workloads of the job rows (consecutive rows of one workload id), and each job's row."""
    workloads: list[dict[str, Any]] = []
    rows: list[list[int]] = []
    first_row: dict[str, int] = {}
    for row, workload in enumerate(columns["workload"]):
        if not workloads or workloads[-1]["id"] != workload:
            if workload in first_row:
                raise table.error(f"workload '{workload}' continues here after other workloads' rows (its rows "
                                  f"start on row {first_row[workload] + 1}); list a workload's jobs together",
                                  row, "workload")
            first_row[workload] = row
            workloads.append({"id": workload, "tenant": columns["tenant"][row], "priority": columns["priority"][row],
                              "jobs": []})
            rows.append([])
        else:
            for column, key in (("tenant", "tenant"), ("priority", "priority")):
                if columns[column][row] != workloads[-1][key]:
                    raise table.error(f"differs from the workload's first row (row {first_row[workload] + 1}: "
                                      f"{workloads[-1][key]!r})", row, column)
        workloads[-1]["jobs"].append({"id": columns["job"][row], "tasks": columns["tasks"][row],
                                      "hardware": columns["hardware"][row],
                                      "gpus_per_task": columns["gpus_per_task"][row],
                                      "cpus_per_task": columns["cpus_per_task"][row],
                                      "memory_gb_per_task": columns["memory_gb_per_task"][row]})
        rows[-1].append(row)
    return workloads, rows


def to_frames(instance: BinpackInstance) -> dict[str, Any]:
    """The instance as ``machines``, ``workloads``, ``running`` and ``holdings`` frames plus a
    ``settings`` dict; :func:`from_frames` reads them back into an equal instance."""
    import pandas as pd

    m = instance.machines
    machines = pd.DataFrame({"id": list(m.id), "cluster": list(m.cluster), "rack": np.asarray(m.rack, dtype=np.int64),
                             "hardware": list(m.hardware), "gpus": np.asarray(m.gpus, dtype=np.int64),
                             "cpus": np.asarray(m.cpus, dtype=np.int64), "memory_gb": float_column(m.memory_gb)})
    jobs = [(w, job) for w in instance.workloads for job in w.jobs]
    workloads = pd.DataFrame({
        "workload": [w.id for w, _ in jobs], "tenant": [w.tenant for w, _ in jobs],
        "priority": np.array([w.priority for w, _ in jobs], dtype=np.int64), "job": [j.id for _, j in jobs],
        "tasks": np.array([j.tasks for _, j in jobs], dtype=np.int64), "hardware": [j.hardware for _, j in jobs],
        "gpus_per_task": np.array([j.gpus_per_task for _, j in jobs], dtype=np.int64),
        "cpus_per_task": np.array([j.cpus_per_task for _, j in jobs], dtype=np.int64),
        "memory_gb_per_task": float_column([j.memory_gb_per_task for _, j in jobs])})
    r = instance.running
    running = pd.DataFrame({"id": list(r.id), "workload": list(r.workload), "tenant": list(r.tenant),
                            "priority": np.asarray(r.priority, dtype=np.int64),
                            "start_hours": float_column(r.start_hours)}, columns=list(RUNNING_COLUMNS))
    h = r.holdings
    holdings = pd.DataFrame({"job": [r.id[k] for k in h.job], "machine": [m.id[k] for k in h.machine],
                             "gpus": np.asarray(h.gpus, dtype=np.int64), "cpus": np.asarray(h.cpus, dtype=np.int64),
                             "memory_gb": float_column(h.memory_gb)}, columns=list(HOLDING_COLUMNS))
    settings: dict[str, Any] = {"name": instance.name, "now_hours": instance.now_hours}
    if list(instance.clusters) != list(dict.fromkeys(m.cluster)):
        settings["clusters"] = list(instance.clusters)
    derived = list(dict.fromkeys([*m.hardware, *(j.hardware for _, j in jobs)]))
    if list(instance.hardware_types) != derived:
        settings["hardware_types"] = list(instance.hardware_types)
    return {"machines": machines, "workloads": workloads, "running": running, "holdings": holdings,
            "settings": settings}


# --- plans --------------------------------------------------------------------------------

def plan_to_frame(instance: BinpackInstance, plan: BinpackPlan) -> pd.DataFrame:
    """A binpack plan as one row per (job, machine) of each placed workload and one row per
    workload left waiting (see the module docstring)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for workload in plan.workloads:
        base = {"workload": workload.workload, "placed": workload.placed, "reason": workload.reason or None,
                "score": workload.score}
        if not workload.jobs:
            rows.append(base)
        for job in workload.jobs:
            preempted = join_ids(job.preempted, f"preempted (job '{job.job}')") if job.preempted else None
            machines = list(zip(job.machines, job.tasks, strict=True)) or [(None, None)]
            for k, (machine, tasks) in enumerate(machines):
                rows.append({**base, "job": job.job, "cluster": job.cluster, "machine": machine, "tasks": tasks,
                             "preempted": preempted if k == 0 else None})
    frame = pd.DataFrame(rows, columns=list(PLAN_COLUMNS))
    for column in ("workload", "reason", "job", "cluster", "machine", "preempted"):
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    frame["placed"] = frame["placed"].astype(bool)
    frame["tasks"] = frame["tasks"].astype("Int64")
    frame["score"] = frame["score"].astype(float)
    frame.attrs = {"kind": "binpack", "solver": plan.solver, "options": dict(plan.options)}
    return frame


def plan_from_frame(instance: BinpackInstance, source: Any) -> BinpackPlan:
    """A binpack plan from a table written by :func:`plan_to_frame` (or by hand: a workload's
    rows together, a job's rows together)."""
    table = read_table(source, "plan")
    table.check_columns(PLAN_COLUMNS)
    table.require(["workload", "placed"])
    workloads = table.values("workload", "str", required=True)
    placed = table.values("placed", "bool", required=True)
    reasons = table.values("reason", "str", default="")
    scores = table.values("score", "float")
    jobs = table.values("job", "str")
    clusters = table.values("cluster", "str")
    machines = table.values("machine", "str")
    tasks = table.values("tasks", "int")
    preempted = [[part.strip() for part in value.split(";") if part.strip()] if value else []
                 for value in table.values("preempted", "str")]
    out: list[dict[str, Any]] = []
    first_row: dict[str, int] = {}
    for row, workload in enumerate(workloads):
        if not out or out[-1]["workload"] != workload:
            if workload in first_row:
                raise table.error(f"workload '{workload}' continues here after other workloads' rows (its rows "
                                  f"start on row {first_row[workload] + 1})", row, "workload")
            first_row[workload] = row
            out.append({"workload": workload, "placed": placed[row], "reason": reasons[row], "score": scores[row],
                        "jobs": []})
        elif placed[row] != out[-1]["placed"]:
            raise table.error("differs from the workload's first row", row, "placed")
        if jobs[row] is None:
            if placed[row]:
                raise table.error("a placed workload's row needs its job", row, "job")
            continue
        entry = out[-1]
        if not entry["jobs"] or entry["jobs"][-1]["job"] != jobs[row]:
            if clusters[row] is None:
                raise table.error("a job's row needs its cluster", row, "cluster")
            entry["jobs"].append({"job": jobs[row], "cluster": clusters[row], "machines": [], "tasks": [],
                                  "preempted": preempted[row]})
        job = entry["jobs"][-1]
        if machines[row] is not None:
            if tasks[row] is None:
                raise table.error("a machine's row needs its tasks", row, "tasks")
            job["machines"].append(machines[row])
            job["tasks"].append(tasks[row])
    attrs = getattr(table.frame, "attrs", {}) or {}
    return validate_model(BinpackPlan, {"kind": "binpack", "workloads": out, "solver": str(attrs.get("solver", "")),
                                        "options": dict(attrs.get("options") or {})})


def from_folder(folder: Any, tables: dict[str, str], settings: str | None) -> Any:
    """The instance of a folder of this kind's tables (``tables``: name -> file, ``settings`` the
    settings file or None), as :func:`fleetplan.instances.frames.load_folder` finds them."""
    return from_frames(**tables, settings=settings, default_name=Path(folder).name)
