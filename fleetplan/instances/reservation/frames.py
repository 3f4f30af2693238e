"""Tables in and out for the ``reservation`` kind (RAS, MAST §2): the region's server types, fault
domains, racks, servers and reservations from CSV/Parquet or DataFrames, and an assignment out
as one table naming servers and reservations by id.

Layouts (``docs/data-in-out.md`` has the reference):

* **server_types** — one row per type: ``id``, ``category`` (gpu, cpu, storage), ``rru``.
* **fault_domains** — one row per fault domain (MSB): ``id``, ``datacenter``. The datacenters
  are those named here, in order of first appearance (the settings' ``datacenters`` lists them
  when one has no fault domain, or in another order).
* **racks** — one row per rack: ``id``, ``fault_domain``.
* **servers** — one row per server: ``type``, ``rack`` (a rack id), ``current`` (today's
  reservation; empty: the free pool), optional ``maintenance`` (default false) and ``id``.
* **reservations** — one row per reservation: ``id``, ``capacity_rru``, ``accepts`` (server type
  ids, most preferred first, separated by ``;``), optional ``workload`` (ml, general),
  ``guarantee`` (none, fault_domain, datacenter), ``storage_ratio`` and ``rru_<type>`` (the RRU
  of one server of that type for this reservation; empty: the type's).
* **settings** (optional; a dict or a YAML/JSON file) — ``name``, ``weights``,
  ``disruption_budget``, ``datacenters``.
* **plan** — one row per server: ``server`` (its id, or its row number when servers have no
  ids), ``current`` (today's reservation, for reading; not read back) and ``reservation`` (the
  plan's; empty: the free pool).

Example
-------
>>> import pandas as pd
>>> from fleetplan.instances.reservation import frames as reservation_frames
>>> instance = reservation_frames.from_frames(
...     server_types=pd.DataFrame({"id": ["cpu"], "category": ["cpu"], "rru": [1.0]}),
...     fault_domains=pd.DataFrame({"id": ["msb1", "msb2"], "datacenter": ["dc1", "dc1"]}),
...     racks=pd.DataFrame({"id": ["r1", "r2"], "fault_domain": ["msb1", "msb2"]}),
...     servers=pd.DataFrame({"type": ["cpu"] * 4, "rack": ["r1", "r1", "r2", "r2"],
...                           "current": ["web", None, "web", None]}),
...     reservations=pd.DataFrame({"id": ["web"], "capacity_rru": [1.0], "accepts": ["cpu"]}))
>>> instance.arrays().server_current.tolist()
[0, -1, 0, -1]
>>> frame = reservation_frames.plan_to_frame(instance, ReservationPlan.current(instance))
>>> frame["reservation"].tolist()
['web', None, 'web', None]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fleetplan.instances.base import InstanceError, validate_model
from fleetplan.instances.reservation import ReservationInstance, ReservationPlan
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

RRU = "rru_"
TYPE_COLUMNS = ("id", "category", "rru")
FAULT_DOMAIN_COLUMNS = ("id", "datacenter")
RACK_COLUMNS = ("id", "fault_domain")
SERVER_COLUMNS = ("id", "type", "rack", "current", "maintenance")
RESERVATION_COLUMNS = ("id", "capacity_rru", "accepts", "workload", "guarantee", "storage_ratio")
SETTINGS = ("name", "weights", "disruption_budget", "datacenters")
PLAN_COLUMNS = ("server", "current", "reservation")


def from_frames(server_types: Any, fault_domains: Any, racks: Any, servers: Any, reservations: Any, *,
                settings: Any = None, name: str | None = None, default_name: str | None = None
                ) -> ReservationInstance:
    """A reservation instance from its tables (each a DataFrame or a ``.csv``/``.parquet`` path);
    ``settings`` a dict or a YAML/JSON file; ``name`` overrides the settings' name,
    ``default_name`` is used when neither gives one (else the servers file's stem). Raises
    :class:`InstanceError` naming the file, row and column of a bad cell."""
    extra, settings_label = read_settings(settings, SETTINGS, ("kind", "server_types", "fault_domains", "racks",
                                                               "servers", "reservations"))
    if name is not None:
        extra["name"] = name
    if not extra.get("name"):
        extra["name"] = default_name or (Path(servers).stem if isinstance(servers, (str, os.PathLike))
                                         else "reservation")

    types = read_table(server_types, "server_types")
    types.check_columns(TYPE_COLUMNS)
    types.require(TYPE_COLUMNS)
    type_rows = [{"id": i, "category": c.lower(), "rru": r} for i, c, r in zip(
        types.values("id", "str", required=True), types.values("category", "str", required=True),
        types.values("rru", "float", required=True), strict=True)]

    domains = read_table(fault_domains, "fault_domains")
    domains.check_columns(FAULT_DOMAIN_COLUMNS)
    domains.require(FAULT_DOMAIN_COLUMNS)
    domain_dc = domains.values("datacenter", "str", required=True)
    if "datacenters" not in extra:
        extra["datacenters"] = list(dict.fromkeys(domain_dc))

    rack_table = read_table(racks, "racks")
    rack_table.check_columns(RACK_COLUMNS)
    rack_table.require(RACK_COLUMNS)
    rack_ids = rack_table.values("id", "str", required=True)
    rack_row: dict[str, int] = {}
    for row, rack in enumerate(rack_ids):
        if rack in rack_row:
            raise rack_table.error(f"duplicate id '{rack}' (first on row {rack_row[rack] + 1})", row, "id")
        rack_row[rack] = row

    server_table = read_table(servers, "servers")
    server_table.check_columns(SERVER_COLUMNS)
    server_table.require(["type", "rack"])
    rack_of = []
    for row, rack in enumerate(server_table.values("rack", "str", required=True)):
        if rack not in rack_row:
            raise server_table.error(f"unknown rack '{rack}'", row, "rack")
        rack_of.append(rack_row[rack])
    server_data: dict[str, Any] = {"type": server_table.values("type", "str", required=True), "rack": rack_of,
                                   "current": server_table.values("current", "str")}
    if "maintenance" in server_table.columns:
        server_data["maintenance"] = server_table.values("maintenance", "bool", default=False)
    if "id" in server_table.columns:
        server_data["id"] = server_table.values("id", "str", required=True)

    reservation_table = read_table(reservations, "reservations")
    reservation_table.check_columns(RESERVATION_COLUMNS, (RRU,))
    reservation_table.require(["id", "capacity_rru", "accepts"])
    overrides = {c[len(RRU):]: reservation_table.values(c, "float") for c in reservation_table.columns
                 if c.startswith(RRU)}
    reservation_rows = []
    columns = {c: reservation_table.values(c, kind, required=c in ("id", "capacity_rru")) for c, kind in (
        ("id", "str"), ("capacity_rru", "float"), ("workload", "str"), ("guarantee", "str"),
        ("storage_ratio", "float"))}
    accepts = reservation_table.values("accepts", "ids", required=True)
    for row in range(len(reservation_table)):
        entry: dict[str, Any] = {"id": columns["id"][row], "capacity_rru": columns["capacity_rru"][row],
                                 "accepts": accepts[row],
                                 "rru": {t: v[row] for t, v in overrides.items() if v[row] is not None}}
        for optional in ("workload", "guarantee", "storage_ratio"):
            if columns[optional][row] is not None:
                entry[optional] = columns[optional][row]
        reservation_rows.append(entry)

    data = {"kind": "reservation", **extra, "server_types": type_rows,
            "fault_domains": {"id": domains.values("id", "str", required=True), "datacenter": domain_dc},
            "racks": {"id": rack_ids, "fault_domain": rack_table.values("fault_domain", "str", required=True)},
            "servers": server_data, "reservations": reservation_rows}
    files = {"fault_domains": domains, "racks": rack_table, "servers": server_table}

    def resolve(path: str) -> tuple[Table, int | None, str | None] | None:
        head, row, rest = split_path(path)
        if head in files:
            column, _, index = rest.partition("[")
            number = index.split("]")[0]
            return files[head], int(number) if number.isdigit() else None, column or None
        if head == "reservations" and row is not None:
            field, _, key = rest.partition(".")
            field = field.split("[")[0]
            return reservation_table, row, (RRU + key if field == "rru" and key else field or None)
        if head == "server_types" and row is not None:
            return types, row, rest or None
        if head == "server_types[*]":
            return types, None, "id"
        if head == "reservations[*]":
            return reservation_table, None, "id"
        return None

    try:
        return validate_model(ReservationInstance, data)
    except InstanceError as error:
        if resolve(error.path) is None:  # a setting: name the settings file
            raise InstanceError(error.path, error.reason, settings_label) from None
        raise relabel(error, resolve) from None


def to_frames(instance: ReservationInstance) -> dict[str, Any]:
    """The instance as ``server_types``, ``fault_domains``, ``racks``, ``servers`` and
    ``reservations`` frames plus a ``settings`` dict; :func:`from_frames` reads them back into
    an equal instance."""
    import pandas as pd

    servers: dict[str, Any] = {}
    if instance.servers.id is not None:
        servers["id"] = list(instance.servers.id)
    servers["type"] = list(instance.servers.type)
    servers["rack"] = [instance.racks.id[r] for r in instance.servers.rack]
    servers["current"] = pd.Series(list(instance.servers.current), dtype=object)
    if instance.servers.maintenance is not None:
        servers["maintenance"] = np.asarray(instance.servers.maintenance, dtype=bool)
    reservations: dict[str, Any] = {
        "id": [r.id for r in instance.reservations],
        "capacity_rru": float_column([r.capacity_rru for r in instance.reservations]),
        "accepts": [join_ids(r.accepts, f"reservations.accepts (reservation '{r.id}')") for r in instance.reservations],
        "workload": [r.workload for r in instance.reservations],
        "guarantee": [r.guarantee for r in instance.reservations],
        "storage_ratio": float_column([r.storage_ratio for r in instance.reservations]),
    }
    for kind in dict.fromkeys(t for r in instance.reservations for t in r.rru):
        reservations[RRU + kind] = float_column([r.rru.get(kind) for r in instance.reservations])
    settings: dict[str, Any] = {"name": instance.name, "weights": instance.weights.model_dump(),
                                "disruption_budget": instance.disruption_budget}
    if list(instance.datacenters) != list(dict.fromkeys(instance.fault_domains.datacenter)):
        settings["datacenters"] = list(instance.datacenters)
    return {
        "server_types": pd.DataFrame({"id": [t.id for t in instance.server_types],
                                      "category": [t.category for t in instance.server_types],
                                      "rru": float_column([t.rru for t in instance.server_types])}),
        "fault_domains": pd.DataFrame({"id": list(instance.fault_domains.id),
                                       "datacenter": list(instance.fault_domains.datacenter)}),
        "racks": pd.DataFrame({"id": list(instance.racks.id), "fault_domain": list(instance.racks.fault_domain)}),
        "servers": pd.DataFrame(servers),
        "reservations": pd.DataFrame(reservations, columns=[*RESERVATION_COLUMNS, *(
            c for c in reservations if c.startswith(RRU))]),
        "settings": settings,
    }


# --- plans --------------------------------------------------------------------------------

def _server_names(instance: ReservationInstance) -> list[str]:
    ids = instance.servers.id
    return list(ids) if ids is not None else [str(i) for i in range(len(instance.servers.type))]


def plan_to_frame(instance: ReservationInstance, plan: ReservationPlan) -> pd.DataFrame:
    """A reservation plan as one row per server: ``server``, ``current`` (today's reservation)
    and ``reservation`` (the plan's; None: the free pool)."""
    import pandas as pd

    plan.assignment_array(instance)  # the plan fits the instance (one entry per server, known ids)
    out = pd.DataFrame({"server": _server_names(instance),
                        "current": pd.Series(list(instance.servers.current), dtype=object),
                        "reservation": pd.Series(list(plan.assignment), dtype=object)})
    out.attrs = {"kind": "reservation", "solver": plan.solver, "options": dict(plan.options)}
    return out


def plan_from_frame(instance: ReservationInstance, source: Any) -> ReservationPlan:
    """A reservation plan from a table written by :func:`plan_to_frame` (or by hand: ``server``
    and ``reservation``, one row per server in any order; every server once)."""
    table = read_table(source, "plan")
    table.check_columns(PLAN_COLUMNS)
    table.require(["server", "reservation"])
    names = _server_names(instance)
    row_of = {name: i for i, name in enumerate(names)}
    known = set(instance.arrays().res_ids)
    assignment: list[str | None] = [None] * len(names)
    seen: list[int | None] = [None] * len(names)
    targets = table.values("reservation", "str")
    for row, server in enumerate(table.values("server", "str", required=True)):
        if server not in row_of:
            raise table.error(f"unknown server '{server}'", row, "server")
        index = row_of[server]
        if seen[index] is not None:
            raise table.error(f"server '{server}' has two rows (the first is row {seen[index] + 1})", row, "server")
        seen[index] = row
        if targets[row] is not None and targets[row] not in known:
            raise table.error(f"unknown reservation '{targets[row]}'", row, "reservation")
        assignment[index] = targets[row]
    missing = [names[i] for i, row in enumerate(seen) if row is None]
    if missing:
        raise table.error(f"no row for {len(missing)} server(s): {', '.join(missing[:5])}", column="server")
    attrs = getattr(table.frame, "attrs", {}) or {}
    return validate_model(ReservationPlan, {"kind": "reservation", "assignment": assignment,
                                            "solver": str(attrs.get("solver", "")),
                                            "options": dict(attrs.get("options") or {})})


def from_folder(folder: Any, tables: dict[str, str], settings: str | None) -> Any:
    """The instance of a folder of this kind's tables (``tables``: name -> file, ``settings`` the
    settings file or None), as :func:`fleetplan.instances.frames.load_folder` finds them."""
    return from_frames(**tables, settings=settings, default_name=Path(folder).name)
