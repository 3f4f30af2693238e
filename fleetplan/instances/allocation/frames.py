"""Tables in and out for the ``allocation`` kind (Gavel §3.1): jobs and GPUs from CSV/Parquet or
DataFrames, and the allocation matrix X out as a table.

Layouts (``docs/data-in-out.md`` has the full reference and a worked example):

* **cluster** — one row per GPU (worker) type: ``name``, ``count``, ``cost_per_hour`` (optional).
* **jobs** — one row per job: ``id``; ``throughput_<type>`` for each type the job can run on
  (iterations/s; empty or absent: cannot run there); optional ``scale_factor``, ``weight``,
  ``job_type``, ``entity``, ``steps_left``, ``arrival_time``, ``time_elapsed``,
  ``isolated_time_elapsed``, ``slo_hours``.
* **entities** (optional) — ``id``, ``weight``, ``policy``.
* **colocations** (optional, space sharing) — ``job_type_a``, ``job_type_b``, ``scale_factor``,
  ``throughput_<type>_a`` and ``throughput_<type>_b``.
* **plan** — one row per job: ``job``, ``share_<type>`` (X[m, j], the fraction of time on the
  type), ``effective_throughput`` and ``normalized_throughput`` (read-only, for people),
  ``policy``; with space sharing a ``partner`` column marks the rows of job pairs.

Example
-------
>>> import pandas as pd
>>> from fleetplan.instances import evaluate
>>> from fleetplan.instances.allocation import frames as allocation_frames
>>> cluster = pd.DataFrame({"name": ["v100", "k80"], "count": [2, 2]})
>>> jobs = pd.DataFrame({"id": ["a", "b"], "throughput_v100": [4.0, 2.0],
...                      "throughput_k80": [1.0, 1.5]})
>>> instance = allocation_frames.from_frames(jobs=jobs, cluster=cluster, name="tiny")
>>> [t.count for t in instance.worker_types], instance.jobs[1].throughput
([2, 2], {'v100': 2.0, 'k80': 1.5})
>>> from fleetplan.instances.allocation import AllocationPlan
>>> import numpy as np
>>> plan = AllocationPlan.from_matrix(instance, np.array([[1.0, 0.0], [0.0, 1.0]]))
>>> frame = allocation_frames.plan_to_frame(instance, plan)
>>> frame[["job", "share_v100", "share_k80", "effective_throughput"]].values.tolist()
[['a', 1.0, 0.0, 4.0], ['b', 0.0, 1.0, 1.5]]
>>> again = allocation_frames.plan_from_frame(instance, frame)
>>> evaluate(instance, again).objective == evaluate(instance, plan).objective
True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fleetplan.instances.allocation import AllocationInstance, AllocationPlan, PairAllocation
from fleetplan.instances.allocation.evaluate import effective_throughput
from fleetplan.instances.base import InstanceError, validate_model
from fleetplan.instances.tables import Table, float_column, read_table, relabel, split_path

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd

THROUGHPUT = "throughput_"
SHARE = "share_"
CLUSTER_COLUMNS = {"name": "str", "count": "int", "cost_per_hour": "float"}
JOB_COLUMNS = {
    "id": "str", "scale_factor": "int", "weight": "float", "job_type": "str", "entity": "str",
    "steps_left": "float", "arrival_time": "float", "time_elapsed": "float", "isolated_time_elapsed": "float",
    "slo_hours": "float",
}
ENTITY_COLUMNS = {"id": "str", "weight": "float", "policy": "str"}
COLOCATION_COLUMNS = {"job_type_a": "str", "job_type_b": "str", "scale_factor": "int"}
PLAN_OUTPUT_COLUMNS = ("effective_throughput", "normalized_throughput")


def _records(table: Table, spec: dict[str, str], required: tuple[str, ...]) -> list[dict[str, Any]]:
    """Rows as dicts holding only the cells given (so the schema's defaults apply to the rest)."""
    table.require(required)
    columns = {name: table.values(name, kind, required=name in required)
               for name, kind in spec.items() if name in table.columns}
    return [{name: values[row] for name, values in columns.items() if values[row] is not None}
            for row in range(len(table))]


def from_frames(jobs: Any, cluster: Any, *, entities: Any = None, colocations: Any = None,
                name: str = "") -> AllocationInstance:
    """An allocation instance from tables: each a DataFrame or a ``.csv``/``.parquet`` path.

    Raises :class:`InstanceError` naming the file (or argument), row and column of a bad cell.
    Without ``name``, the instance is named after the jobs file (``"allocation"`` for a
    DataFrame): never an empty name.
    """
    if not name:
        name = Path(jobs).stem if isinstance(jobs, (str, os.PathLike)) else "allocation"
    cluster_table = read_table(cluster, "cluster")
    cluster_table.check_columns(list(CLUSTER_COLUMNS))
    worker_types = _records(cluster_table, CLUSTER_COLUMNS, ("name", "count"))
    if not worker_types:
        raise cluster_table.error("no rows: list at least one GPU type")
    type_names = [str(t.get("name")) for t in worker_types]
    for row, type_name in enumerate(type_names):
        if type_names.index(type_name) != row:  # before the jobs' columns are matched to names
            raise cluster_table.error(f"duplicate name '{type_name}' (first on row {type_names.index(type_name) + 1})",
                                      row, "name")

    jobs_table = read_table(jobs, "jobs")
    hint = f" (GPU types in {cluster_table.source}: {', '.join(type_names)})"
    jobs_table.check_columns(list(JOB_COLUMNS), (THROUGHPUT,), hint)
    throughput_columns = [c for c in jobs_table.columns if c.startswith(THROUGHPUT)]
    for column in throughput_columns:
        if column[len(THROUGHPUT):] not in type_names:
            raise jobs_table.error(f"unknown GPU type '{column[len(THROUGHPUT):]}'{hint}", column=column)
    job_rows = _records(jobs_table, JOB_COLUMNS, ("id",))
    if not job_rows:
        raise jobs_table.error("no rows: list at least one job")
    for column in throughput_columns:
        values = jobs_table.values(column, "float")
        for row, value in zip(job_rows, values, strict=True):
            if value is not None:
                row.setdefault("throughput", {})[column[len(THROUGHPUT):]] = value
    for row in job_rows:
        row.setdefault("throughput", {})

    data: dict[str, Any] = {"kind": "allocation", "name": name, "worker_types": worker_types, "jobs": job_rows}
    tables: dict[str, Table] = {"worker_types": cluster_table, "jobs": jobs_table}
    if entities is not None:
        entity_table = read_table(entities, "entities")
        entity_table.check_columns(list(ENTITY_COLUMNS))
        data["entities"] = _records(entity_table, ENTITY_COLUMNS, ("id",))
        tables["entities"] = entity_table
    if colocations is not None:
        coloc_table = read_table(colocations, "colocations")
        data["colocations"] = _colocation_records(coloc_table, type_names)
        tables["colocations"] = coloc_table

    def resolve(path: str) -> tuple[Table, int | None, str | None] | None:
        head, row, rest = split_path(path)
        if head not in tables:
            return None
        table = tables[head]
        field = rest.split(".")[0] if rest else None
        if head == "jobs" and rest.startswith("throughput."):
            return table, row, THROUGHPUT + rest.split(".", 1)[1]
        if head == "colocations" and rest.startswith("throughput."):
            gpu = rest.split(".", 1)[1]
            return table, row, f"{THROUGHPUT}{gpu}_a/_b"
        if head == "colocations" and field == "job_types":
            field = "job_type_a"
        return table, row, field

    try:
        return validate_model(AllocationInstance, data)
    except InstanceError as error:
        raise relabel(error, resolve) from None


def _colocation_records(table: Table, type_names: list[str]) -> list[dict[str, Any]]:
    pair_columns = [f"{THROUGHPUT}{t}_{side}" for t in type_names for side in "ab"]
    table.check_columns([*COLOCATION_COLUMNS, *pair_columns])
    rows = _records(table, COLOCATION_COLUMNS, ("job_type_a", "job_type_b"))
    for row in rows:
        row["job_types"] = [row.pop("job_type_a"), row.pop("job_type_b")]
        row["throughput"] = {}
    for gpu in type_names:
        a_values = table.values(f"{THROUGHPUT}{gpu}_a", "float")
        b_values = table.values(f"{THROUGHPUT}{gpu}_b", "float")
        for index, (a, b) in enumerate(zip(a_values, b_values, strict=True)):
            if (a is None) != (b is None):
                column = f"{THROUGHPUT}{gpu}_{'b' if a is not None else 'a'}"
                raise table.error("give both throughputs of the pair, or neither", index, column)
            if a is not None:
                rows[index]["throughput"][gpu] = [a, b]
    return rows


def to_frames(instance: AllocationInstance) -> dict[str, pd.DataFrame]:
    """The instance as tables: ``cluster`` and ``jobs``, plus ``entities`` and ``colocations``
    when it has them. :func:`from_frames` reads them back into an equal instance."""
    import pandas as pd

    types = [t.name for t in instance.worker_types]
    frames = {"cluster": pd.DataFrame({
        "name": types,
        "count": np.array([t.count for t in instance.worker_types], dtype=np.int64),
        "cost_per_hour": float_column([t.cost_per_hour for t in instance.worker_types]),
    })}
    jobs: dict[str, Any] = {"id": [job.id for job in instance.jobs]}
    for name in types:
        jobs[THROUGHPUT + name] = float_column([job.throughput.get(name) for job in instance.jobs])
    jobs["scale_factor"] = np.array([job.scale_factor for job in instance.jobs], dtype=np.int64)
    for name, kind in JOB_COLUMNS.items():
        if name in ("id", "scale_factor"):
            continue
        values = [getattr(job, name) for job in instance.jobs]
        jobs[name] = float_column(values) if kind == "float" else pd.array(values, dtype=object)
    frames["jobs"] = pd.DataFrame(jobs)
    if instance.entities:
        frames["entities"] = pd.DataFrame({
            "id": [e.id for e in instance.entities], "weight": float_column([e.weight for e in instance.entities]),
            "policy": [e.policy for e in instance.entities]})
    if instance.colocations:
        coloc: dict[str, Any] = {
            "job_type_a": [c.job_types[0] for c in instance.colocations],
            "job_type_b": [c.job_types[1] for c in instance.colocations],
            "scale_factor": np.array([c.scale_factor for c in instance.colocations], dtype=np.int64),
        }
        for name in types:
            for side, index in (("a", 0), ("b", 1)):
                coloc[f"{THROUGHPUT}{name}_{side}"] = float_column(
                    [c.throughput[name][index] if name in c.throughput else None for c in instance.colocations])
        frames["colocations"] = pd.DataFrame(coloc)
    return frames


# --- plans --------------------------------------------------------------------------------

def plan_to_frame(instance: AllocationInstance, plan: AllocationPlan) -> pd.DataFrame:
    """The allocation matrix X as a table: one row per job (instance order), ``share_<type>``
    columns, the job's effective throughput (iterations/s, pairs included) and its throughput
    normalized by the equal-share allocation (Gavel §4.1), and the plan's ``policy``.

    Space-sharing plans get a ``partner`` column and one more row per job pair."""
    import pandas as pd

    arrays = instance.arrays()
    matrix = plan.matrix(instance)
    pair_jobs, pair_matrix = plan.pair_matrix(instance)
    throughput = effective_throughput(instance, matrix, pair_jobs, pair_matrix)
    columns: dict[str, Any] = {"job": list(arrays.job_ids)}
    if len(pair_jobs):
        columns["job"] += [arrays.job_ids[a] for a, _ in pair_jobs]
        columns["partner"] = [None] * len(arrays.job_ids) + [arrays.job_ids[b] for _, b in pair_jobs]
    rows = np.vstack([matrix, pair_matrix]) if len(pair_jobs) else matrix
    for j, name in enumerate(arrays.worker_types):
        columns[SHARE + name] = rows[:, j]
    padding = np.full(len(pair_jobs), np.nan)
    columns["effective_throughput"] = np.concatenate([throughput, padding])
    columns["normalized_throughput"] = np.concatenate([throughput / arrays.equal_share_throughput, padding])
    columns["policy"] = plan.policy
    frame = pd.DataFrame(columns)
    frame.attrs = {"kind": "allocation", "solver": plan.solver, "options": dict(plan.options)}
    return frame


def plan_from_frame(instance: AllocationInstance, source: Any, *, policy: str | None = None) -> AllocationPlan:
    """An allocation plan from a table written by :func:`plan_to_frame` (or by hand: ``job`` and
    one ``share_<type>`` column per GPU type; an empty share is 0). ``policy`` overrides the
    table's ``policy`` column; without either the plan's default policy applies."""
    table = read_table(source, "plan")
    types = instance.arrays().worker_types
    table.check_columns(["job", "partner", "policy", *PLAN_OUTPUT_COLUMNS], (SHARE,))
    table.require(["job", *(SHARE + name for name in types)])
    for column in table.columns:
        if column.startswith(SHARE) and column[len(SHARE):] not in types:
            raise table.error(f"unknown GPU type '{column[len(SHARE):]}' (instance: {', '.join(types)})",
                              column=column)
    jobs = table.values("job", "str", required=True)
    partners = table.values("partner", "str")
    shares = np.array([table.values(SHARE + name, "float", default=0.0) for name in types]).T
    shares = shares.reshape(len(table), len(types))
    policies = {p for p in table.values("policy", "str") if p is not None}
    if policy is None and len(policies) > 1:
        raise table.error(f"one plan has one policy, found {sorted(policies)}", column="policy")
    known = set(instance.arrays().job_ids)
    single: dict[str, int] = {}
    pairs: list[PairAllocation] = []
    for row, (job, partner) in enumerate(zip(jobs, partners, strict=True)):
        for column, value in (("job", job), ("partner", partner)):
            if value is not None and value not in known:
                raise table.error(f"unknown job '{value}'", row, column)
        if partner is None:
            if job in single:
                raise table.error(f"job '{job}' has two rows (the first is row {single[job] + 1})", row, "job")
            single[job] = row
        else:
            pairs.append(PairAllocation(jobs=[job, partner], allocation=shares[row].tolist()))
    missing = [job for job in instance.arrays().job_ids if job not in single]
    if missing:
        raise table.error(f"no row for {len(missing)} job(s): {', '.join(missing[:5])}", column="job")
    order = [single[job] for job in instance.arrays().job_ids]
    attrs = getattr(table.frame, "attrs", {}) or {}
    data: dict[str, Any] = {
        "kind": "allocation", "job_ids": list(instance.arrays().job_ids), "worker_types": list(types),
        "allocation": shares[order].tolist(), "pairs": [p.model_dump() for p in pairs],
        "solver": str(attrs.get("solver", "")), "options": dict(attrs.get("options") or {}),
    }
    chosen = policy if policy is not None else next(iter(policies), None)
    if chosen is not None:
        data["policy"] = chosen
    return validate_model(AllocationPlan, data, table.source)


def from_folder(folder: Any, tables: dict[str, str], settings: str | None) -> Any:
    """The instance of a folder of this kind's tables (``tables``: name -> file, ``settings`` the
    settings file or None), as :func:`fleetplan.instances.frames.load_folder` finds them."""
    return from_frames(**tables, name=Path(folder).name)
