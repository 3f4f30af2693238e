"""The ``reservation`` kind: RAS server-to-reservation assignment (MAST, OSDI 2024, §2).

MAST's dynamic clusters are RAS "reservations": a slow-path MIP assigns every server of a region
to a reservation so that each keeps its capacity "when a large fault domain fails", spreads over
fault domains, keeps "a proper ratio of compute machines to storage machines in each datacenter",
and is re-run every 30 minutes, moving as few servers as possible (§2 "Dynamic clusters"; §4.4:
RAS moves machines between ML and non-ML clusters).

A region has datacenters; a datacenter has fault domains (a main switchboard, MSB); a fault
domain has racks; a rack holds servers. A server has a type (GPU, CPU or storage hardware) whose
capacity is counted in relative resource units (RRU); a reservation may count a type differently
(``rru`` overrides: a newer CPU counts for more to one service than to another).

A reservation asks for ``capacity_rru`` that must hold at its ``guarantee`` level:

* ``none``: with every server up;
* ``fault_domain``: with any one fault domain down (the capacity outside it);
* ``datacenter``: with any one datacenter down.

``workload`` ``ml`` reservations are compact (as few datacenters as possible, for the network),
``general`` ones spread (their largest fault domain as small as possible). ``accepts`` lists the
server types the reservation takes, most preferred first. ``storage_ratio`` (optional) asks
for that many storage RRU per compute (GPU and CPU) RRU in each datacenter.

File layout. Datacenters are a list of ids, fault domains and racks are columns of ids, and
servers are stored *column-wise* (``"servers": {"type": [...], "rack": [...], "current": [...]}``)
with the rack given by its row number, so that a million servers load as a few numpy arrays.
``current`` is today's assignment (a reservation id, or null for the free pool). Servers in
``maintenance`` are out: they count for nothing and RAS leaves them where they are.
``disruption_budget`` bounds the servers taken out of the reservation they are in today.

Example
-------
>>> instance = ReservationInstance.model_validate({
...     "kind": "reservation", "datacenters": ["dc1"],
...     "fault_domains": {"id": ["msb1", "msb2"], "datacenter": ["dc1", "dc1"]},
...     "racks": {"id": ["r1", "r2"], "fault_domain": ["msb1", "msb2"]},
...     "server_types": [{"id": "cpu", "category": "cpu", "rru": 1.0}],
...     "servers": {"type": ["cpu"] * 4, "rack": [0, 0, 1, 1], "current": ["web", None, "web", None]},
...     "reservations": [{"id": "web", "capacity_rru": 1.0, "accepts": ["cpu"]}]})
>>> arrays = instance.arrays()
>>> arrays.server_fd.tolist(), arrays.server_current.tolist()
([0, 0, 1, 1], [0, -1, 0, -1])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import Field, PrivateAttr, model_validator

from fleetplan.instances.base import InstanceBase, InstanceError, PlanBase, StrictModel
from fleetplan.instances.columns import check_same_length as _same_length
from fleetplan.instances.columns import first_true as _first
from fleetplan.instances.columns import id_index as _unique
from fleetplan.instances.columns import lookup_ids as _lookup

KIND = "reservation"
FREE = -1
CATEGORIES = ("gpu", "cpu", "storage")
GPU, CPU, STORAGE = 0, 1, 2
LEVELS = ("none", "fault_domain", "datacenter")
NONE_LEVEL, FD_LEVEL, DC_LEVEL = 0, 1, 2


class ServerType(StrictModel):
    id: str = Field(min_length=1)
    category: Literal["gpu", "cpu", "storage"]
    rru: float = Field(gt=0, description="capacity of one server in RRU (reservations may override)")


class FaultDomainColumns(StrictModel):
    """Fault domains (MSBs) column-wise: row i is fault domain i."""

    id: list[str]
    datacenter: list[str]


class RackColumns(StrictModel):
    """Racks column-wise: row i is rack i."""

    id: list[str]
    fault_domain: list[str]


class ServerColumns(StrictModel):
    """Servers column-wise: row i is server i; ``rack`` is a row number of ``racks``."""

    type: list[str]
    rack: list[int]
    current: list[str | None] = Field(description="today's reservation, null: free pool")
    maintenance: list[bool] | None = Field(default=None, description="out for maintenance "
                                           "(counts for nothing, stays where it is); default false")
    id: list[str] | None = Field(default=None, description="server names (default: row numbers)")


class Reservation(StrictModel):
    id: str = Field(min_length=1)
    capacity_rru: float = Field(ge=0, description="capacity asked for, at the guarantee level")
    accepts: list[str] = Field(min_length=1, description="server types taken, most preferred first")
    rru: dict[str, float] = Field(default_factory=dict, description="RRU of one server of a type "
                                  "for this reservation (default: the type's rru)")
    workload: Literal["ml", "general"] = "general"
    guarantee: Literal["none", "fault_domain", "datacenter"] = "fault_domain"
    storage_ratio: float | None = Field(default=None, ge=0, description="storage RRU wanted per "
                                        "compute RRU in each datacenter; null: no ratio")


class Weights(StrictModel):
    moves: float = Field(default=1.0, ge=0, description="per server taken out of its reservation")
    buffer: float = Field(default=1.0, ge=0, description="per RRU held beyond the request")
    spread: float = Field(default=0.1, ge=0, description="per RRU in a general reservation's "
                          "largest fault domain")
    compactness: float = Field(default=20.0, ge=0, description="per datacenter an ML reservation uses")
    preference: float = Field(default=0.05, ge=0, description="per server per step down the "
                              "reservation's preference list")
    ratio: float = Field(default=0.5, ge=0, description="per RRU of deviation from the storage ratio")


@dataclass(frozen=True, eq=False)
class ReservationArrays:
    """Column-wise view of a reservation instance: what the evaluator and solvers compute with."""

    dc_ids: list[str]
    fd_ids: list[str]
    fd_dc: np.ndarray  # (F,) datacenter of each fault domain
    rack_ids: list[str]
    rack_fd: np.ndarray  # (racks,)
    type_ids: list[str]
    type_category: np.ndarray  # (T,) 0 gpu, 1 cpu, 2 storage
    type_rru: np.ndarray  # (T,)
    server_type: np.ndarray  # (S,)
    server_rack: np.ndarray
    server_fd: np.ndarray
    server_dc: np.ndarray
    server_current: np.ndarray  # (S,) reservation index or -1
    server_maintenance: np.ndarray  # (S,) bool
    res_ids: list[str]
    res_request: np.ndarray  # (R,) RRU
    res_cap: np.ndarray  # (R, T) RRU of one server; 0 where not accepted
    res_rank: np.ndarray  # (R, T) position in the preference list; -1 not accepted
    res_ml: np.ndarray  # (R,) bool
    res_level: np.ndarray  # (R,) 0 none, 1 fault domain, 2 datacenter
    res_ratio: np.ndarray  # (R,) storage per compute RRU; NaN: none
    w_moves: float
    w_buffer: float
    w_spread: float
    w_compactness: float
    w_preference: float
    w_ratio: float
    budget: float  # servers; inf when unlimited
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def num_servers(self) -> int:
        return len(self.server_type)

    @property
    def num_reservations(self) -> int:
        return len(self.res_ids)

    @property
    def num_types(self) -> int:
        return len(self.type_ids)

    @property
    def num_fds(self) -> int:
        return len(self.fd_ids)

    @property
    def num_dcs(self) -> int:
        return len(self.dc_ids)

    @property
    def accepts(self) -> np.ndarray:
        return self.res_rank >= 0

    @property
    def available(self) -> np.ndarray:
        """Servers RAS may assign: not in maintenance."""
        return ~self.server_maintenance

    def server_group(self) -> np.ndarray:
        """Group (type, fault domain) of every server: ``type * F + fd``; servers of one group
        are interchangeable for every reservation (the aggregation of the MIP)."""
        if "group" not in self._cache:
            self._cache["group"] = self.server_type * self.num_fds + self.server_fd
        return self._cache["group"]


class ReservationInstance(InstanceBase):
    """A region's servers, the reservations asking for them, and today's assignment."""

    kind: Literal["reservation"] = KIND
    datacenters: list[str] = Field(min_length=1)
    fault_domains: FaultDomainColumns
    racks: RackColumns
    server_types: list[ServerType] = Field(min_length=1)
    servers: ServerColumns
    reservations: list[Reservation] = Field(default_factory=list)
    weights: Weights = Field(default_factory=Weights)
    disruption_budget: int | None = Field(default=None, ge=0, description="most servers taken out "
                                          "of their reservation of today in one run; null: unlimited")

    _arrays: ReservationArrays | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _validate_columns(self) -> ReservationInstance:
        self._arrays = build_arrays(self)
        return self

    def arrays(self) -> ReservationArrays:
        """The instance as numpy arrays (built once, when the instance is validated)."""
        if self._arrays is None:
            self._arrays = build_arrays(self)
        return self._arrays


def build_arrays(instance: ReservationInstance) -> ReservationArrays:
    """Validate an instance's cross-references with vectorised checks and build its arrays."""
    dcs = _unique(instance.datacenters, "datacenters")
    fds = instance.fault_domains
    _same_length(fds, ("datacenter",), len(fds.id), "fault_domains", "fault domains")
    if not fds.id:
        raise InstanceError("fault_domains.id", "a region needs at least one fault domain")
    fd_index = _unique(fds.id, "fault_domains.id")
    fd_dc = _lookup(fds.datacenter, dcs, "fault_domains.datacenter", "datacenter")
    racks = instance.racks
    _same_length(racks, ("fault_domain",), len(racks.id), "racks", "racks")
    _unique(racks.id, "racks.id")
    rack_fd = _lookup(racks.fault_domain, fd_index, "racks.fault_domain", "fault domain")
    types = _unique([t.id for t in instance.server_types], "server_types[*].id")
    category = np.array([CATEGORIES.index(t.category) for t in instance.server_types], dtype=np.int64)
    type_rru = np.array([t.rru for t in instance.server_types], dtype=float)

    servers = instance.servers
    count = len(servers.type)
    if count == 0:  # a region of no servers was accepted and "solved"
        raise InstanceError("servers.type", "a region needs at least one server")
    _same_length(servers, ("rack", "current", "maintenance", "id"), count, "servers", "servers")
    if servers.id is not None:
        _unique(servers.id, "servers.id")
    server_type = _lookup(servers.type, types, "servers.type", "server type")
    server_rack = np.asarray(servers.rack, dtype=np.int64).reshape(count)
    bad = (server_rack < 0) | (server_rack >= len(racks.id))
    if bad.any():
        raise InstanceError(f"servers.rack[{_first(bad)}]",
                            f"rack row {server_rack[_first(bad)]} does not exist ({len(racks.id)} racks)")
    server_fd = rack_fd[server_rack]
    maintenance = (np.zeros(count, dtype=bool) if servers.maintenance is None
                   else np.asarray(servers.maintenance, dtype=bool).reshape(count))

    reservations = instance.reservations
    res_index = _unique([r.id for r in reservations], "reservations[*].id")
    res_index_none: dict = {**res_index, None: FREE}
    current = _lookup(servers.current, res_index_none, "servers.current", "reservation")
    num_res, num_types = len(reservations), len(types)
    cap = np.zeros((num_res, num_types))
    rank = np.full((num_res, num_types), -1, dtype=np.int64)
    level = np.zeros(num_res, dtype=np.int64)
    ratio = np.full(num_res, np.nan)
    for r, reservation in enumerate(reservations):
        for position, name in enumerate(reservation.accepts):
            path = f"reservations[{r}].accepts[{position}]"
            if name not in types:
                raise InstanceError(path, f"unknown server type '{name}'")
            if rank[r, types[name]] >= 0:
                raise InstanceError(path, f"server type '{name}' listed twice")
            rank[r, types[name]] = position
            cap[r, types[name]] = type_rru[types[name]]
        for name, value in reservation.rru.items():
            path = f"reservations[{r}].rru.{name}"
            if name not in types:
                raise InstanceError(path, f"unknown server type '{name}'")
            if rank[r, types[name]] < 0:
                raise InstanceError(path, f"server type '{name}' is not in accepts")
            if not value > 0:
                raise InstanceError(path, "must be > 0")
            cap[r, types[name]] = value
        level[r] = LEVELS.index(reservation.guarantee)
        if reservation.guarantee == "datacenter" and len(dcs) < 2:
            raise InstanceError(f"reservations[{r}].guarantee", "a datacenter guarantee needs at least "
                                "two datacenters (the region has one)")
        if reservation.guarantee == "fault_domain" and len(fd_index) < 2:
            raise InstanceError(f"reservations[{r}].guarantee", "a fault-domain guarantee needs at "
                                "least two fault domains (the region has one)")
        if reservation.storage_ratio is not None:
            accepted = category[rank[r] >= 0]
            if not ((accepted == STORAGE).any() and (accepted != STORAGE).any()):
                raise InstanceError(f"reservations[{r}].storage_ratio", "needs both a storage and a "
                                    "compute server type in accepts")
            ratio[r] = reservation.storage_ratio
    weights = instance.weights
    budget = instance.disruption_budget
    return ReservationArrays(
        dc_ids=list(instance.datacenters), fd_ids=list(fds.id), fd_dc=fd_dc, rack_ids=list(racks.id),
        rack_fd=rack_fd, type_ids=[t.id for t in instance.server_types], type_category=category,
        type_rru=type_rru, server_type=server_type, server_rack=server_rack, server_fd=server_fd,
        server_dc=fd_dc[server_fd], server_current=current, server_maintenance=maintenance,
        res_ids=[r.id for r in reservations],
        res_request=np.array([r.capacity_rru for r in reservations], dtype=float).reshape(num_res),
        res_cap=cap, res_rank=rank,
        res_ml=np.array([r.workload == "ml" for r in reservations], dtype=bool).reshape(num_res),
        res_level=level, res_ratio=ratio, w_moves=weights.moves, w_buffer=weights.buffer,
        w_spread=weights.spread, w_compactness=weights.compactness, w_preference=weights.preference,
        w_ratio=weights.ratio, budget=float("inf") if budget is None else float(budget),
    )


# --- the plan ------------------------------------------------------------------------------

class ReservationPlan(PlanBase):
    """Each server's reservation (null: the free pool); ``assignment[i]`` is server row ``i``."""

    kind: Literal["reservation"] = KIND
    assignment: list[str | None]

    @classmethod
    def from_arrays(cls, instance: ReservationInstance, assignment: np.ndarray,
                    solver: str = "") -> ReservationPlan:
        names: list[str | None] = [*instance.arrays().res_ids, None]  # index -1 is the free pool
        return cls.model_construct(kind=KIND, schema_version=1, solver=solver, options={},
                                   assignment=[names[r] for r in np.asarray(assignment).tolist()])

    @classmethod
    def current(cls, instance: ReservationInstance) -> ReservationPlan:
        """Today's assignment: nothing moves."""
        return cls.from_arrays(instance, instance.arrays().server_current)

    def assignment_array(self, instance: ReservationInstance) -> np.ndarray:
        """Reservation index per server (-1: free), checked against the instance."""
        arrays = instance.arrays()
        if len(self.assignment) != arrays.num_servers:
            raise InstanceError("assignment", f"has {len(self.assignment)} entries for "
                                f"{arrays.num_servers} servers")
        index: dict = {name: r for r, name in enumerate(arrays.res_ids)}
        index[None] = FREE
        return _lookup(self.assignment, index, "assignment", "reservation")
