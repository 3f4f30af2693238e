"""Seeded generator of RAS regions (MAST §2 "Dynamic clusters") and the events RAS reacts to.

What follows the paper, and what is this generator's own assumption:

* A region of datacenters split into fault domains (MSBs) of racks; a correlated failure of
  one fault domain takes "tens of thousands of machines" out at 10^6 servers (§2). [paper]
* ML dynamic clusters hold GPU machines and are kept compact; general ones spread (§4.4, the
  Chinese summary: online services spread across fault domains, ML training prefers not to).
  [paper]
* Hardware: three CPU generations, three GPU generations and two storage generations, each
  datacenter holding a random subset (newer datacenters newer hardware); a rack holds one
  type. RRU per server grows with the generation; 30 % of general reservations count their
  newest CPU type 20 % higher (a service that gains more from it). [ours]
* Reservation sizes are log-normal (a few large, many small); today's assignment fills each
  from the free pool (ML from the datacenter with most free accepted servers, general in
  proportion over all fault domains) and the request is the capacity that assignment
  guarantees times U(0.85, 1.02), so most reservations hold a buffer today and some are short.
  [ours]

Events (``events`` parameter, applied in order; :func:`apply_event` applies one to any
instance): ``new-datacenter`` (a datacenter of free servers with the newest hardware comes
online), ``fault-domain-maintenance`` (the largest fault domain goes into maintenance),
``reservation-growth`` (a share of reservations ask for more), ``hardware-refresh`` (the
oldest CPU generation of one datacenter is replaced by a new generation: the new servers are
free, and reservations that took the old type take the new one first).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from fleetplan.instances.base import InstanceError, StrictModel
from fleetplan.instances.reservation import FREE, GPU, STORAGE, ReservationInstance, ReservationPlan
from fleetplan.instances.reservation.evaluate import guaranteed, holdings
from fleetplan.instances.resources import Estimate

# (id, category, RRU per server, generation)
CATALOG = (
    ("cpu-gen1", "cpu", 1.0, 1), ("cpu-gen2", "cpu", 1.5, 2), ("cpu-gen3", "cpu", 2.0, 3),
    ("gpu-v100", "gpu", 4.0, 1), ("gpu-a100", "gpu", 8.0, 2), ("gpu-h100", "gpu", 16.0, 3),
    ("hdd-gen1", "storage", 1.0, 1), ("hdd-gen2", "storage", 2.0, 2),
)
Event = Literal["new-datacenter", "fault-domain-maintenance", "reservation-growth", "hardware-refresh"]


class ReservationParams(StrictModel):
    """Parameters of :func:`generate` (``fleetplan generate reservation --servers N
    --reservations R --datacenters D --seed K``)."""

    servers: int = Field(default=10_000, ge=4, le=2_000_000, description="servers in the region")
    reservations: int = Field(default=50, ge=1, le=5_000, description="reservations (dynamic clusters)")
    datacenters: int = Field(default=6, ge=1, le=50, description="datacenters in the region")
    fault_domains_per_datacenter: int = Field(default=5, ge=1, le=100, description="fault domains (MSBs) "
                                              "in each datacenter")
    servers_per_rack: int = Field(default=40, ge=1, le=1000, description="servers in each rack (one "
                                  "server type per rack), also in a new datacenter")
    ml_share: float = Field(default=0.3, ge=0, le=1, description="share of reservations that are ML")
    utilization: float = Field(default=0.75, gt=0, le=1, description="share of servers assigned today")
    maintenance_share: float = Field(default=0.01, ge=0, le=1, description="share of servers out for "
                                     "maintenance")
    datacenter_guarantee_share: float = Field(default=0.2, ge=0, le=1, description="share of "
                                              "general reservations guaranteed against a datacenter failure")
    ratio_share: float = Field(default=0.2, ge=0, le=1, description="share of general reservations "
                               "with a storage ratio")
    disruption_budget_share: float | None = Field(default=0.05, ge=0, le=1, description="disruption "
                                                  "budget (most servers moved in one run) as a share of "
                                                  "servers; null: unlimited")
    events: list[Event] = Field(default_factory=list, description="events applied in order: "
                                "new-datacenter, fault-domain-maintenance, reservation-growth, hardware-refresh")
    growth_share: float = Field(default=0.1, gt=0, le=1, description="share of reservations a growth "
                                "event grows")
    growth_factor: float = Field(default=1.3, gt=0, description="request multiplier of a growth event")
    new_datacenter_size: float = Field(default=1.0, gt=0, description="servers of a new datacenter "
                                       "relative to the region's mean datacenter")


def estimate(params: ReservationParams) -> Estimate:
    """Memory and time to generate and save ``params``' instance (measured: 0.4 kB and 3 us per
    server; a new datacenter adds up to its share of servers; :mod:`fleetplan.instances.resources`)."""
    growth = 1.0 + sum(params.new_datacenter_size / params.datacenters for event in params.events
                       if event == "new-datacenter")
    servers = params.servers * growth
    return Estimate(memory_bytes=400.0 * servers + 3_000.0 * params.reservations, seconds=3e-6 * servers,
                    what=f"servers = {params.servers:,}", sizes=("servers",))


def generate(params: ReservationParams, seed: int = 0) -> ReservationInstance:
    """A seeded region with today's assignment, then ``params.events`` applied in order."""
    rng = np.random.default_rng(seed)
    num_dcs, per_dc = params.datacenters, params.fault_domains_per_datacenter
    dc_ids = [f"dc{d + 1:02d}" for d in range(num_dcs)]
    fd_dc = np.repeat(np.arange(num_dcs), per_dc)
    fd_ids = [f"{dc_ids[d]}-msb{i % per_dc + 1:02d}" for i, d in enumerate(fd_dc.tolist())]
    # Each datacenter holds one CPU, one storage and (mostly) one or two GPU generations.
    types = [t[0] for t in CATALOG]
    mix = np.zeros((num_dcs, len(CATALOG)))
    for d in range(num_dcs):
        mix[d, rng.integers(0, 3)] = 0.55
        mix[d, 6 + rng.integers(0, 2)] = 0.2
        gpus = rng.choice([3, 4, 5], size=rng.integers(1, 3), replace=False)
        mix[d, gpus] = 0.25 / len(gpus)
    mix /= mix.sum(axis=1, keepdims=True)
    data = _region(params, rng, dc_ids, fd_ids, fd_dc, mix, types, params.servers)
    data["reservations"] = []
    instance = ReservationInstance.model_validate(data)
    instance = _with_reservations(instance, params, rng)
    for event in params.events:
        instance = apply_event(instance, event, seed=int(rng.integers(2**31)), params=params)
    return instance


def _region(params: ReservationParams, rng: np.random.Generator, dc_ids: list[str], fd_ids: list[str],
            fd_dc: np.ndarray, mix: np.ndarray, types: list[str], num_servers: int) -> dict[str, Any]:
    """Racks spread evenly over the fault domains, one type per rack from its datacenter's mix."""
    num_racks = max(len(fd_ids), -(-num_servers // params.servers_per_rack))
    rack_fd = np.arange(num_racks) % len(fd_ids)
    rack_type = np.empty(num_racks, dtype=np.int64)
    for d in range(len(dc_ids)):
        own = np.flatnonzero(fd_dc[rack_fd] == d)
        rack_type[own] = rng.choice(len(types), size=own.size, p=mix[d])
    server_rack = np.arange(num_servers) * num_racks // num_servers
    maintenance = rng.random(num_servers) < params.maintenance_share
    return {
        "kind": "reservation", "name": f"ras-{num_servers}",
        "datacenters": dc_ids,
        "fault_domains": {"id": fd_ids, "datacenter": [dc_ids[d] for d in fd_dc.tolist()]},
        "racks": {"id": [f"{fd_ids[f]}-rk{i:05d}" for i, f in enumerate(rack_fd.tolist())],
                  "fault_domain": [fd_ids[f] for f in rack_fd.tolist()]},
        "server_types": [{"id": t[0], "category": t[1], "rru": t[2]} for t in CATALOG],
        "servers": {"type": [types[t] for t in rack_type[server_rack].tolist()],
                    "rack": server_rack.tolist(), "current": [None] * num_servers,
                    "maintenance": maintenance.tolist()},
        "disruption_budget": None if params.disruption_budget_share is None
        else int(params.disruption_budget_share * num_servers),
    }


def _with_reservations(instance: ReservationInstance, params: ReservationParams,
                       rng: np.random.Generator) -> ReservationInstance:
    arrays = instance.arrays()
    num_res, num_types, num_fds = params.reservations, arrays.num_types, arrays.num_fds
    group = arrays.server_group()
    free = np.bincount(group[arrays.available], minlength=num_types * num_fds).reshape(num_types, num_fds)
    free = free.astype(float)
    category = arrays.type_category
    ml = rng.random(num_res) < params.ml_share
    size = rng.lognormal(0.0, 1.0, num_res)
    reservations: list[dict[str, Any]] = []
    counts = np.zeros((num_res, num_types, num_fds), dtype=np.int64)
    gpu_types = np.flatnonzero(category == GPU)
    cpu_types = np.flatnonzero(category == 1)
    storage_types = np.flatnonzero(category == STORAGE)
    for kind_mask, pool in ((ml, gpu_types), (~ml, np.concatenate([cpu_types, storage_types]))):
        members = np.flatnonzero(kind_mask)
        if not members.size:
            continue
        budget = free[pool].sum() * params.utilization
        share = size[members] / size[members].sum()
        for r, target in zip(members.tolist(), (share * budget).tolist(), strict=True):
            spec, accepted = _reservation_spec(r, bool(ml[r]), rng, params, gpu_types, cpu_types,
                                               storage_types, arrays.num_dcs)
            reservations.append(spec)
            room = free[accepted]
            if ml[r]:  # compact: the datacenter with the most free accepted servers
                by_dc = np.bincount(arrays.fd_dc, weights=room.sum(axis=0), minlength=arrays.num_dcs)
                room = room * (arrays.fd_dc == int(by_dc.argmax()))[None, :]
            total = room.sum()
            take = np.floor(room * min(1.0, target / total)) if total > 0 else room * 0
            counts[r, accepted] = take.astype(np.int64)
            free[accepted] -= take
    order = np.argsort([spec["_index"] for spec in reservations], kind="stable")
    reservations = [reservations[i] for i in order.tolist()]
    for spec in reservations:
        del spec["_index"]
    current = _disaggregate_counts(arrays, counts, rng)
    data = instance.model_dump()
    data["servers"]["current"] = [None if r < 0 else f"res{r:04d}" for r in current.tolist()]
    data["reservations"] = reservations
    provisional = ReservationInstance.model_validate(data)
    # Requests: what today's assignment guarantees, times U(0.85, 1.02).
    parrays = provisional.arrays()
    held = holdings(parrays, parrays.server_current)
    promise, _ = guaranteed(parrays, held["fd"], held["dc"])
    factor = rng.uniform(0.85, 1.02, num_res)
    for r, spec in enumerate(data["reservations"]):
        spec["capacity_rru"] = float(np.floor(max(promise[r], 1.0) * factor[r]))
    return ReservationInstance.model_validate(data)


def _reservation_spec(r: int, ml: bool, rng: np.random.Generator, params: ReservationParams,
                      gpu_types: np.ndarray, cpu_types: np.ndarray, storage_types: np.ndarray,
                      num_dcs: int) -> tuple[dict[str, Any], np.ndarray]:
    names = [t[0] for t in CATALOG]
    spec: dict[str, Any] = {"_index": r, "id": f"res{r:04d}", "capacity_rru": 0.0}
    if ml:
        accepted = np.sort(rng.choice(gpu_types, size=rng.integers(1, 3), replace=False))[::-1]
        spec.update(workload="ml", guarantee="fault_domain")
    else:
        accepted = np.sort(rng.choice(cpu_types, size=rng.integers(1, 4), replace=False))[::-1]
        guarantee = "datacenter" if num_dcs > 1 and rng.random() < params.datacenter_guarantee_share \
            else "fault_domain"
        spec.update(workload="general", guarantee=guarantee)
        if rng.random() < 0.3:
            spec["rru"] = {names[accepted[0]]: CATALOG[accepted[0]][2] * 1.2}
        if rng.random() < params.ratio_share:
            accepted = np.concatenate([accepted, [storage_types[-1]]])
            spec["storage_ratio"] = 0.25
    if num_dcs == 1 and params.fault_domains_per_datacenter == 1:
        # One fault domain in the whole region: no guarantee can survive losing it, and the
        # validator refuses one; the region is planned without buffers.
        spec["guarantee"] = "none"
    spec["accepts"] = [names[t] for t in accepted.tolist()]
    return spec, accepted


def _disaggregate_counts(arrays, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Concrete servers for counts per (reservation, type, fault domain), at random in a group."""
    num_res = counts.shape[0]
    group = arrays.server_group()
    eligible = np.flatnonzero(arrays.available)
    order = eligible[np.lexsort((rng.random(eligible.size), group[eligible]))]
    starts = np.searchsorted(group[order], np.arange(arrays.num_types * arrays.num_fds))
    current = np.full(arrays.num_servers, FREE, dtype=np.int64)
    flat = counts.reshape(num_res, -1)
    for g in np.flatnonzero(flat.sum(axis=0)).tolist():
        labels = np.repeat(np.arange(num_res), flat[:, g])
        current[order[starts[g]:starts[g] + labels.size]] = labels
    return current


def with_assignment(instance: ReservationInstance, plan: ReservationPlan) -> ReservationInstance:
    """The same region with ``plan`` as today's assignment (RAS re-solving from its last plan)."""
    data = instance.model_dump()
    data["servers"]["current"] = list(plan.assignment)
    return ReservationInstance.model_validate(data)


def apply_event(instance: ReservationInstance, event: Event, seed: int = 0,
                params: ReservationParams | None = None) -> ReservationInstance:
    """The next instance after ``event`` (see the module docstring); deterministic in ``seed``."""
    params = params or ReservationParams()
    rng = np.random.default_rng(seed)
    arrays = instance.arrays()
    data = instance.model_dump()
    servers = data["servers"]
    if servers["maintenance"] is None:
        servers["maintenance"] = [False] * arrays.num_servers
    if event == "new-datacenter":
        _new_datacenter(data, arrays, params, rng)
    elif event == "fault-domain-maintenance":
        sizes = np.bincount(arrays.server_fd[arrays.available], minlength=arrays.num_fds)
        f = int(sizes.argmax())
        servers["maintenance"] = (np.asarray(servers["maintenance"]) | (arrays.server_fd == f)).tolist()
        data["name"] = f"{instance.name}+maintenance({arrays.fd_ids[f]})"
    elif event == "reservation-growth":
        count = max(1, int(round(params.growth_share * arrays.num_reservations)))
        for r in np.sort(rng.choice(arrays.num_reservations, size=min(count, arrays.num_reservations),
                                    replace=False)).tolist():
            data["reservations"][r]["capacity_rru"] *= params.growth_factor
        data["name"] = f"{instance.name}+growth"
    elif event == "hardware-refresh":
        _hardware_refresh(data, arrays, rng)
    else:  # pydantic validates event names; a direct caller may pass anything
        raise ValueError(f"unknown event '{event}'")
    return ReservationInstance.model_validate(data)


def _new_datacenter(data: dict[str, Any], arrays, params: ReservationParams, rng: np.random.Generator) -> None:
    existing = set(arrays.dc_ids)
    number = arrays.num_dcs + 1
    while f"dc{number:02d}" in existing:
        number += 1
    dc = f"dc{number:02d}"
    per_dc = max(1, round(arrays.num_fds / arrays.num_dcs))
    size = max(per_dc, int(params.new_datacenter_size * arrays.num_servers / arrays.num_dcs))
    fd_ids = [f"{dc}-msb{i + 1:02d}" for i in range(per_dc)]
    data["datacenters"].append(dc)
    data["fault_domains"]["id"] += fd_ids
    data["fault_domains"]["datacenter"] += [dc] * per_dc
    # The newest generation of each category: the same mix the other datacenters have.
    newest = {cat: max((i for i, t in enumerate(arrays.type_ids) if arrays.type_category[i] == c),
                       key=lambda i: arrays.type_rru[i]) for c, cat in enumerate(("gpu", "cpu", "storage"))}
    share = np.bincount(arrays.type_category[arrays.server_type], minlength=3) / arrays.num_servers
    num_racks = max(per_dc, -(-size // params.servers_per_rack))
    rack_fd = np.arange(num_racks) % per_dc
    rack_cat = rng.choice(3, size=num_racks, p=share)
    first_rack = len(data["racks"]["id"])
    data["racks"]["id"] += [f"{fd_ids[f]}-rk{i:05d}" for i, f in enumerate(rack_fd.tolist())]
    data["racks"]["fault_domain"] += [fd_ids[f] for f in rack_fd.tolist()]
    server_rack = np.arange(size) * num_racks // size
    servers = data["servers"]
    servers["type"] += [arrays.type_ids[newest[("gpu", "cpu", "storage")[c]]] for c in rack_cat[server_rack].tolist()]
    servers["rack"] += (first_rack + server_rack).tolist()
    servers["current"] += [None] * size
    servers["maintenance"] += [False] * size
    if servers["id"] is not None:
        servers["id"] += [f"{dc}-s{i}" for i in range(size)]
    data["name"] = f"{data['name']}+{dc}"


def _hardware_refresh(data: dict[str, Any], arrays, rng: np.random.Generator) -> None:
    cpu = [t for t in range(arrays.num_types) if arrays.type_category[t] == 1
           and (arrays.server_type == t).any()]
    if not cpu:
        raise InstanceError("event", "hardware-refresh: the region has no CPU servers to replace")
    old = min(cpu, key=lambda t: (arrays.type_rru[t], t))
    dcs = np.unique(arrays.server_dc[arrays.server_type == old])
    dc = int(rng.choice(dcs))
    generation = 1
    while any(t == f"cpu-refresh{generation}" for t in arrays.type_ids):
        generation += 1
    new_id = f"cpu-refresh{generation}"
    data["server_types"].append({"id": new_id, "category": "cpu",
                                 "rru": float(arrays.type_rru[arrays.type_category == 1].max() * 1.25)})
    replaced = (arrays.server_type == old) & (arrays.server_dc == dc)
    servers = data["servers"]
    types = np.asarray(servers["type"], dtype=object)
    types[replaced] = new_id
    servers["type"] = types.tolist()
    current = np.asarray(servers["current"], dtype=object)
    current[replaced] = None
    servers["current"] = current.tolist()
    servers["maintenance"] = (np.asarray(servers["maintenance"]) & ~replaced).tolist()
    old_id = arrays.type_ids[old]
    for spec in data["reservations"]:
        if old_id in spec["accepts"]:
            spec["accepts"] = [new_id, *spec["accepts"]]
    data["name"] = f"{data['name']}+refresh({old_id}@{arrays.dc_ids[dc]})"
