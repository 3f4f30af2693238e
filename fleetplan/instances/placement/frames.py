"""Tables in and out for the ``placement`` kind (Tetris, MAST §3): regions, tables and jobs from
CSV/Parquet or DataFrames, and placement plans out as one table naming tables by id.

Layouts (``docs/data-in-out.md`` has the full reference and a worked example):

* **regions** — one row per region: ``id``, ``storage_capacity_bytes``, optional ``dr_partner``,
  ``gpu_supply_<type>`` (GPU-hours per day; one column per GPU type, which declares the type) and
  ``cpu_capacity_<application>`` (CPU-hours; one column per application, which declares it).
  An empty cell means "none there".
* **tables** — one row per table: ``id``, ``size_bytes``, ``home`` (today's region id).
* **jobs** — one row per job: ``id``, ``kind`` (ml, spark, presto), ``tables`` (the ids of the
  tables it reads, separated by ``;``), ``gpu_type`` (ML only), ``gpu_hours``, ``cpu_hours``,
  ``priority`` (0 highest .. 6), ``application``, ``recurring`` (default true), optional
  ``weight`` and ``read_fraction``.
* **settings** (optional; a dict or a YAML/JSON file) — the instance's scalar fields: ``name``,
  ``weights``, ``sigmoid_scale_gpu_hours``, ``high_priority_levels``, ``home_training_threshold``,
  ``daily_move_quota_bytes``, ``dr_policy``, ``split_ml_demand``, ``overload_form``.
* **plan** — one row per table (``role=home``: ``region`` is the plan's home, ``source`` today's),
  one per replica (``role=replica``: ``region``, ``bytes``, ``reason``) and one per listed move
  (``role=move``, in the order applied: ``source`` -> ``region``, ``bytes``, ``gain`` and the change
  of each objective term in ``term_<name>``). Tables are named by id everywhere.

Example
-------
>>> import pandas as pd
>>> from fleetplan.instances import evaluate
>>> from fleetplan.instances.placement import frames as placement_frames
>>> regions = pd.DataFrame({"id": ["east", "west"], "storage_capacity_bytes": [10.0, 10.0],
...                         "gpu_supply_h100": [100.0, None], "cpu_capacity_ads": [50.0, 50.0]})
>>> tables = pd.DataFrame({"id": ["clicks", "users"], "size_bytes": [4.0, 2.0],
...                        "home": ["west", "west"]})
>>> jobs = pd.DataFrame({"id": ["train"], "kind": ["ml"], "tables": ["clicks;users"],
...                      "gpu_type": ["h100"], "gpu_hours": [64.0], "cpu_hours": [1.0],
...                      "priority": [0], "application": ["ads"]})
>>> instance = placement_frames.from_frames(tables=tables, jobs=jobs, regions=regions)
>>> instance.jobs.tables, instance.regions[1].gpu_supply
([[0, 1]], {})
>>> from fleetplan.instances.placement import PlacementPlan
>>> plan = PlacementPlan.from_arrays(instance, [0, 0])
>>> frame = placement_frames.plan_to_frame(instance, plan)
>>> frame[["role", "table", "source", "region"]].values.tolist()
[['home', 'clicks', 'west', 'east'], ['home', 'users', 'west', 'east']]
>>> evaluate(instance, placement_frames.plan_from_frame(instance, frame)).objective == \\
...     evaluate(instance, plan).objective
True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fleetplan.instances.base import InstanceError, validate_model
from fleetplan.instances.placement import (
    JOB_KINDS,
    PlacementInstance,
    PlacementPlan,
)
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

GPU_SUPPLY = "gpu_supply_"
CPU_CAPACITY = "cpu_capacity_"
TERM = "term_"
REGION_COLUMNS = {"id": "str", "storage_capacity_bytes": "float", "dr_partner": "str"}
TABLE_COLUMNS = {"id": "str", "size_bytes": "float", "home": "str"}
JOB_COLUMNS = ("id", "kind", "tables", "gpu_type", "gpu_hours", "cpu_hours", "priority",
               "application", "recurring", "weight", "read_fraction")
SETTINGS = ("name", "weights", "sigmoid_scale_gpu_hours", "high_priority_levels",
            "home_training_threshold", "daily_move_quota_bytes", "dr_policy", "split_ml_demand",
            "overload_form")
PLAN_COLUMNS = ("role", "table", "region", "source", "bytes", "reason", "gain")
ROLES = ("home", "replica", "move")


def _settings(settings: Any) -> tuple[dict[str, Any], str]:
    return read_settings(settings, SETTINGS, ("kind", "gpu_types", "applications", "regions", "tables", "jobs"))


def _regions(regions: Any, settings: Any, name: str | None
             ) -> tuple[dict[str, Any], str, Table, list[str], list[str], list[dict[str, Any]]]:
    """The settings and the regions table, read and checked cell by cell (they are small)."""
    extra, settings_label = _settings(settings)
    if name is not None:
        extra["name"] = name

    region_table = read_table(regions, "regions")
    region_table.check_columns(list(REGION_COLUMNS), (GPU_SUPPLY, CPU_CAPACITY))
    region_table.require(["id", "storage_capacity_bytes"])
    gpu_types = [c[len(GPU_SUPPLY):] for c in region_table.columns if c.startswith(GPU_SUPPLY)]
    apps = [c[len(CPU_CAPACITY):] for c in region_table.columns if c.startswith(CPU_CAPACITY)]
    if not gpu_types:
        raise region_table.error(f"no {GPU_SUPPLY}<type> column: declare at least one GPU type")
    if not apps:
        raise region_table.error(f"no {CPU_CAPACITY}<application> column: declare at least one application")
    if not len(region_table):
        raise region_table.error("no rows: list at least one region")
    ids = region_table.values("id", "str", required=True)
    storage = region_table.values("storage_capacity_bytes", "float", required=True)
    partner = region_table.values("dr_partner", "str")
    region_rows: list[dict[str, Any]] = []
    for row in range(len(region_table)):
        entry: dict[str, Any] = {"id": ids[row], "gpu_supply": {}, "storage_capacity_bytes": storage[row],
                                 "cpu_capacity": {}}
        if partner[row] is not None:
            entry["dr_partner"] = partner[row]
        region_rows.append(entry)
    for prefix, names, key in ((GPU_SUPPLY, gpu_types, "gpu_supply"), (CPU_CAPACITY, apps, "cpu_capacity")):
        for label in names:
            for row, value in enumerate(region_table.values(prefix + label, "float")):
                if value is not None:
                    region_rows[row][key][label] = value

    return extra, settings_label, region_table, gpu_types, apps, region_rows


def region_part(regions: Any, settings: Any = None) -> tuple[PlacementInstance, list[str], list[str]]:
    """An instance with the regions and settings of these tables and no tables or jobs,
    validated as :func:`from_frames` validates them, with its GPU types and applications: what
    the columnar reader (:mod:`fleetplan.instances.placement.columnar`) completes with the
    tables and jobs. Raises :class:`InstanceError` (the columnar reader then falls back to
    :func:`from_frames`, whose message names the file, row and column)."""
    extra, _, _, gpu_types, apps, region_rows = _regions(regions, settings, None)
    data = {"kind": "placement", **extra, "gpu_types": gpu_types, "applications": apps, "regions": region_rows,
            "tables": {"id": [], "size_bytes": [], "home": []},
            "jobs": {"id": [], "kind": [], "tables": [], "gpu_type": [], "gpu_hours": [], "cpu_hours": [],
                     "priority": [], "application": [], "recurring": []}}
    return validate_model(PlacementInstance, data), gpu_types, apps


def from_frames(tables: Any, jobs: Any, regions: Any, *, settings: Any = None,
                name: str | None = None, default_name: str | None = None) -> PlacementInstance:
    """A placement instance from tables: each a DataFrame or a ``.csv``/``.parquet`` path;
    ``settings`` a dict or a YAML/JSON file of the instance's scalar fields; ``name`` overrides
    the settings' name, ``default_name`` is used when neither gives one (else the tables
    file's stem, else ``"placement"``: never an empty name). Raises :class:`InstanceError`
    naming the file, row and column.

    Without ``weights.traffic`` in the settings, w1 is normalised as generated instances have it
    (:func:`traffic_weight`): 1 / (bytes the jobs read, over every job and table it reads), so
    reading everything across regions costs 1, like a GPU balance slice. A weight of 1 per byte
    made the objective ~3e11 and drowned every balance term."""
    extra, settings_label, region_table, gpu_types, apps, region_rows = _regions(regions, settings, name)
    if not extra.get("name"):
        extra["name"] = default_name or (Path(tables).stem if isinstance(tables, (str, os.PathLike)) else "placement")

    table_table = read_table(tables, "tables")
    table_table.check_columns(list(TABLE_COLUMNS))
    table_table.require(list(TABLE_COLUMNS))
    table_ids = table_table.values("id", "str", required=True)
    table_data = {"id": table_ids, "size_bytes": table_table.values("size_bytes", "float", required=True),
                  "home": table_table.values("home", "str", required=True)}
    row_of: dict[str, int] = {}
    for row, table_id in enumerate(table_ids):
        if table_id in row_of:
            raise table_table.error(f"duplicate id '{table_id}' (first on row {row_of[table_id] + 1})", row, "id")
        row_of[table_id] = row

    job_table = read_table(jobs, "jobs")
    job_table.check_columns(list(JOB_COLUMNS))
    job_table.require(["id", "kind", "tables", "priority", "application"])
    job_data: dict[str, Any] = {
        "id": job_table.values("id", "str", required=True),
        "kind": [k.lower() for k in job_table.values("kind", "str", required=True)],
        "tables": _table_rows(job_table, row_of),
        "gpu_type": job_table.values("gpu_type", "str"),
        "gpu_hours": job_table.values("gpu_hours", "float", default=0.0),
        "cpu_hours": job_table.values("cpu_hours", "float", default=0.0),
        "priority": job_table.values("priority", "int", required=True),
        "application": job_table.values("application", "str", required=True),
        "recurring": job_table.values("recurring", "bool", default=True),
    }
    for optional in ("weight", "read_fraction"):
        if optional in job_table.columns:
            job_data[optional] = job_table.values(optional, "float", default=1.0)
    for row, kind in enumerate(job_data["kind"]):
        if kind not in JOB_KINDS:
            raise job_table.error(f"unknown job kind '{kind}' (known: {', '.join(JOB_KINDS)})", row, "kind")

    weights = extra.get("weights")
    if not isinstance(weights, dict) or "traffic" not in weights:
        weights = dict(weights) if isinstance(weights, dict) else {}
        weights["traffic"] = traffic_weight(table_data["size_bytes"], job_data["tables"])
        extra["weights"] = weights
    data = {"kind": "placement", **extra, "gpu_types": gpu_types, "applications": apps,
            "regions": region_rows, "tables": table_data, "jobs": job_data}
    files = {"tables": table_table, "jobs": job_table}

    def resolve(path: str) -> tuple[Table, int | None, str | None] | None:
        head, row, rest = split_path(path)
        if head in files:
            column, _, index = rest.partition("[")
            number = index.split("]")[0]
            return files[head], int(number) if number.isdigit() else None, column or None
        if head == "regions" and row is not None:
            field, _, key = rest.partition(".")
            prefix = {"gpu_supply": GPU_SUPPLY, "cpu_capacity": CPU_CAPACITY}.get(field)
            return region_table, row, (prefix + key if prefix and key else field or None)
        if head == "regions[*]" and rest.startswith("id["):
            return region_table, int(rest[3:].split("]")[0]), "id"
        if head in ("gpu_types", "applications"):
            return region_table, None, None
        return None

    try:
        return validate_model(PlacementInstance, data)
    except InstanceError as error:
        found = resolve(error.path)
        if found is None:  # a setting: name the settings file and the setting's path
            raise InstanceError(error.path, error.reason, settings_label) from None
        raise relabel(error, resolve) from None


def traffic_weight(sizes: list[float], job_tables: list[list[int]]) -> float:
    """w1 as generated instances have it: 1 / (bytes of every (job, table) read), so that every
    job reading every table across regions costs 1 (1.0 when nothing is read)."""
    size = np.asarray([0.0 if value is None else value for value in sizes], dtype=float)
    flat = np.fromiter((t for rows in job_tables for t in rows), dtype=np.int64)
    total = float(size[flat].sum()) if flat.size else 0.0
    return 1.0 / total if total > 0 else 1.0


def _table_rows(job_table: Table, row_of: dict[str, int]) -> list[list[int]]:
    lists = job_table.values("tables", "ids", required=True)
    try:  # every id known: one dict look-up each
        return [[row_of[name] for name in names] for names in lists]
    except KeyError:
        pass
    out = []
    for row, names in enumerate(lists):
        rows = []
        for name in names:
            if name not in row_of:
                raise job_table.error(f"unknown table '{name}'", row, "tables")
            rows.append(row_of[name])
        out.append(rows)
    return out


def settings_of(instance: PlacementInstance) -> dict[str, Any]:
    """The instance's scalar fields (what ``settings=`` takes back)."""
    return instance.model_dump(include=set(SETTINGS))


def to_frames(instance: PlacementInstance) -> dict[str, Any]:
    """The instance as ``regions``, ``tables`` and ``jobs`` frames plus a ``settings`` dict;
    :func:`from_frames` reads them back into an equal instance."""
    import pandas as pd

    regions: dict[str, Any] = {
        "id": [r.id for r in instance.regions],
        "storage_capacity_bytes": float_column([r.storage_capacity_bytes for r in instance.regions]),
        "dr_partner": pd.array([r.dr_partner for r in instance.regions], dtype=object),
    }
    for name in instance.gpu_types:
        regions[GPU_SUPPLY + name] = float_column([r.gpu_supply.get(name) for r in instance.regions])
    for name in instance.applications:
        regions[CPU_CAPACITY + name] = float_column([r.cpu_capacity.get(name) for r in instance.regions])
    t = instance.tables
    j = instance.jobs
    jobs: dict[str, Any] = {
        "id": list(j.id), "kind": list(j.kind),
        "tables": [join_ids([t.id[i] for i in rows], f"tables.id (job '{job}')")
                   for job, rows in zip(j.id, j.tables, strict=True)],
        "gpu_type": pd.array(list(j.gpu_type), dtype=object),
        "gpu_hours": float_column(j.gpu_hours), "cpu_hours": float_column(j.cpu_hours),
        "priority": np.asarray(j.priority, dtype=np.int64), "application": list(j.application),
        "recurring": np.asarray(j.recurring, dtype=bool),
    }
    if j.weight is not None:
        jobs["weight"] = float_column(j.weight)
    if j.read_fraction is not None:
        jobs["read_fraction"] = float_column(j.read_fraction)
    return {
        "regions": pd.DataFrame(regions),
        "tables": pd.DataFrame({"id": list(t.id), "size_bytes": float_column(t.size_bytes), "home": list(t.home)}),
        "jobs": pd.DataFrame(jobs),
        "settings": settings_of(instance),
    }


# --- plans --------------------------------------------------------------------------------

def plan_to_frame(instance: PlacementInstance, plan: PlacementPlan) -> pd.DataFrame:
    """A placement plan as one table naming tables by id: a ``home`` row per table (``source`` is
    today's home, ``region`` the plan's), a ``replica`` row per replica (``bytes`` copied,
    ``reason``) and a ``move`` row per listed move, in the order applied (``gain``, ``term_*``)."""
    import pandas as pd

    arrays = instance.arrays()
    home = plan.home_array(instance)
    replica_table, replica_region, replica_bytes = plan.replica_arrays(instance)
    regions, tables = arrays.region_ids, arrays.table_ids
    n_tables, n_replicas, n_moves = arrays.num_tables, len(replica_table), len(plan.moves)
    nothing: list[Any] = [None]
    frame: dict[str, Any] = {
        "role": ["home"] * n_tables + ["replica"] * n_replicas + ["move"] * n_moves,
        "table": list(tables) + [tables[i] for i in replica_table] + [m.table for m in plan.moves],
        "region": [regions[r] for r in home] + [regions[r] for r in replica_region]
        + [m.target for m in plan.moves],
        "source": [regions[r] for r in arrays.table_home] + nothing * n_replicas
        + [m.source for m in plan.moves],
        "bytes": np.concatenate([arrays.table_size, replica_bytes,
                                 np.array([m.bytes for m in plan.moves], dtype=float)]),
        "reason": nothing * n_tables + list(plan.replicas.reason) + nothing * n_moves,
        "gain": np.concatenate([np.full(n_tables + n_replicas, np.nan),
                                np.array([m.gain for m in plan.moves], dtype=float)]),
    }
    frame["source"] = pd.array(frame["source"], dtype=object)
    frame["reason"] = pd.array(frame["reason"], dtype=object)
    for term in sorted({name for move in plan.moves for name in move.terms}):
        frame[TERM + term] = np.concatenate([np.full(n_tables + n_replicas, np.nan),
                                             float_column([m.terms.get(term) for m in plan.moves])])
    out = pd.DataFrame(frame)
    out.attrs = {"kind": "placement", "solver": plan.solver, "options": dict(plan.options)}
    return out


def plan_from_frame(instance: PlacementInstance, source: Any) -> PlacementPlan:
    """A placement plan from a table written by :func:`plan_to_frame` (or by hand: ``role``,
    ``table`` and ``region`` suffice for homes; a table without a ``home`` row is an error)."""
    table = read_table(source, "plan")
    table.check_columns(list(PLAN_COLUMNS), (TERM,))
    table.require(["role", "table", "region"])
    arrays = instance.arrays()
    row_of = {name: i for i, name in enumerate(arrays.table_ids)}
    roles = table.values("role", "str", required=True)
    names = table.values("table", "str", required=True)
    targets = table.values("region", "str", required=True)
    sources = table.values("source", "str")
    sizes = table.values("bytes", "float")
    reasons = table.values("reason", "str")
    gains = table.values("gain", "float")
    terms = {c[len(TERM):]: table.values(c, "float") for c in table.columns if c.startswith(TERM)}
    home: list[str | None] = [None] * arrays.num_tables
    home_row: list[int] = [0] * arrays.num_tables
    replicas: dict[str, list[Any]] = {"table": [], "region": [], "bytes": [], "reason": []}
    replica_row: list[int] = []
    moves: list[dict[str, Any]] = []
    move_row: list[int] = []
    for row, role in enumerate(roles):
        if role not in ROLES:
            raise table.error(f"unknown role '{role}' (known: {', '.join(ROLES)})", row, "role")
        name = names[row]
        if name not in row_of:
            raise table.error(f"unknown table '{name}'", row, "table")
        index = row_of[name]
        if role == "home":
            if home[index] is not None:
                raise table.error(f"table '{name}' has two home rows (the first is row {home_row[index] + 1})",
                                  row, "table")
            home[index], home_row[index] = targets[row], row
            continue
        for column, values in (("bytes", sizes), *((("reason", reasons),) if role == "replica" else
                                                   (("source", sources), ("gain", gains)))):
            if values[row] is None:
                raise table.error(f"a {role} row needs a value", row, column)
        if role == "replica":
            for key, value in (("table", index), ("region", targets[row]), ("bytes", sizes[row]),
                               ("reason", reasons[row])):
                replicas[key].append(value)
            replica_row.append(row)
        else:
            moves.append({"table": name, "source": sources[row], "target": targets[row], "bytes": sizes[row],
                          "gain": gains[row], "terms": {k: v[row] for k, v in terms.items() if v[row] is not None}})
            move_row.append(row)
    missing = [arrays.table_ids[i] for i, region in enumerate(home) if region is None]
    if missing:
        raise table.error(f"no home row for {len(missing)} table(s): {', '.join(missing[:5])}", column="table")
    replicas["table"] = [arrays.table_ids[i] for i in replicas["table"]]
    attrs = getattr(table.frame, "attrs", {}) or {}
    data = {"kind": "placement", "home": {"table": list(arrays.table_ids), "region": home},
            "replicas": replicas, "moves": moves,
            "solver": str(attrs.get("solver", "")), "options": dict(attrs.get("options") or {})}

    def resolve(path: str) -> tuple[Table, int | None, str | None] | None:
        head, row, rest = split_path(path)
        column, _, index = rest.partition("[")
        number = index.split("]")[0]
        if head == "home" and column == "region" and number.isdigit():
            return table, home_row[int(number)], "region"
        if head == "replicas" and number.isdigit() and int(number) < len(replica_row):
            return table, replica_row[int(number)], column
        if head == "moves" and row is not None:
            return table, move_row[row], rest.split(".")[0] or None
        return None

    try:
        plan = validate_model(PlacementPlan, data)
        plan.home_array(instance)
        plan.replica_arrays(instance)
    except InstanceError as error:
        raise relabel(error, resolve) from None
    return plan


# --- per-region view ----------------------------------------------------------------------

def region_frame(instance: PlacementInstance, plan: PlacementPlan) -> pd.DataFrame:
    """Per region, today and under ``plan``: GPU supply and the demand of planned ML jobs
    (GPU-hours per day, all types and priorities), and storage: capacity, bytes stored today
    (homes), and under the plan its homes, replicas and total (MAST §3.3, Expressions 2-4)."""
    import pandas as pd

    from fleetplan.instances.placement.evaluate import gpu_demand, job_regions

    arrays = instance.arrays()
    home = plan.home_array(instance)
    _, replica_region, replica_bytes = plan.replica_arrays(instance)
    n = arrays.num_regions
    today = gpu_demand(arrays, job_regions(arrays, arrays.table_home)).sum(axis=(1, 2))
    planned = gpu_demand(arrays, job_regions(arrays, home)).sum(axis=(1, 2))
    homes_today = np.bincount(arrays.table_home, weights=arrays.table_size, minlength=n).astype(float)
    homes_plan = np.bincount(home, weights=arrays.table_size, minlength=n).astype(float)
    replicas = np.bincount(replica_region, weights=replica_bytes, minlength=n).astype(float)
    return pd.DataFrame({
        "region": list(arrays.region_ids),
        "gpu_supply_gpu_hours": arrays.gpu_supply.sum(axis=1),
        "gpu_demand_today_gpu_hours": today,
        "gpu_demand_plan_gpu_hours": planned,
        "storage_capacity_bytes": arrays.storage_capacity.astype(float),
        "stored_today_bytes": homes_today,
        "home_plan_bytes": homes_plan,
        "replica_plan_bytes": replicas,
        "stored_plan_bytes": homes_plan + replicas,
    })
