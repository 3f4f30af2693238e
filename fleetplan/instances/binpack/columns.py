"""A ``binpack`` region held as numpy arrays: a :class:`BinpackInstance` built from arrays a
caller has already checked, with no lists of 64,000 machine ids and holdings made per call.

MAST's RMS is called once per workload against a region that changes between calls (§4.3):
machines fail and return, running jobs finish, placed ones start. A caller that keeps the
region as arrays (:class:`fleetplan.embed.BinpackSession`) hands them over as
:class:`RegionColumns`; :class:`ColumnBinpackInstance` answers ``arrays()`` with them at once
and makes its ``machines`` and ``running`` column lists only when something asks for them
(saving the file). The pending workloads are few and validated as usual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetplan.instances.base import ColumnBacked
from fleetplan.instances.binpack import (
    BinpackArrays,
    BinpackInstance,
    HoldingColumns,
    MachineColumns,
    RunningColumns,
    Workload,
)


@dataclass(eq=False)
class RegionColumns:
    """One region column-wise: what a :class:`BinpackInstance` holds, as arrays.

    ``capacity`` is each machine's (GPUs, CPU cores, memory GB); a machine out of service has
    (0, 0, 0). Holdings name running jobs and machines by row.
    """

    cluster_ids: list[str]
    hardware_ids: list[str]
    machine_ids: list[str]
    machine_cluster: np.ndarray  # (M,) index into cluster_ids
    machine_rack: np.ndarray  # (M,)
    machine_hardware: np.ndarray  # (M,) index into hardware_ids
    capacity: np.ndarray  # (M, 3)
    running_ids: list[str] = field(default_factory=list)
    running_workload: list[str] = field(default_factory=list)
    running_tenant: list[str] = field(default_factory=list)
    running_priority: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    running_start: np.ndarray = field(default_factory=lambda: np.zeros(0))
    hold_job: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hold_machine: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    hold_amount: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    now_hours: float = 0.0
    machine_index: dict[str, int] | None = None  # machine id -> row, shared while the machines stay

    def arrays(self) -> BinpackArrays:
        """The judge's and the solvers' arrays (what :func:`build_arrays` makes of a file)."""
        used = np.zeros((len(self.machine_ids), 3))
        np.add.at(used, self.hold_machine, self.hold_amount)
        counts = np.bincount(self.hold_job, minlength=len(self.running_ids))
        cache: dict[str, Any] = {}
        if self.machine_index is not None:
            cache["machine_index"] = self.machine_index
        return BinpackArrays(
            cluster_ids=list(self.cluster_ids), hardware_ids=list(self.hardware_ids), machine_ids=self.machine_ids,
            machine_cluster=self.machine_cluster, machine_rack=self.machine_rack,
            machine_hardware=self.machine_hardware, capacity=self.capacity, used=used,
            running_ids=list(self.running_ids), running_priority=self.running_priority,
            running_age=self.now_hours - self.running_start, hold_job=self.hold_job, hold_machine=self.hold_machine,
            hold_amount=self.hold_amount, hold_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
            hold_order=np.argsort(self.hold_job, kind="stable").astype(np.int64), _cache=cache)

    def machines(self) -> MachineColumns:
        return MachineColumns.model_construct(
            id=list(self.machine_ids), cluster=[self.cluster_ids[c] for c in self.machine_cluster.tolist()],
            rack=self.machine_rack.tolist(), hardware=[self.hardware_ids[h] for h in self.machine_hardware.tolist()],
            gpus=np.rint(self.capacity[:, 0]).astype(np.int64).tolist(),
            cpus=np.rint(self.capacity[:, 1]).astype(np.int64).tolist(), memory_gb=self.capacity[:, 2].tolist())

    def running(self) -> RunningColumns:
        holdings = HoldingColumns.model_construct(
            job=self.hold_job.tolist(), machine=self.hold_machine.tolist(),
            gpus=np.rint(self.hold_amount[:, 0]).astype(np.int64).tolist(),
            cpus=np.rint(self.hold_amount[:, 1]).astype(np.int64).tolist(), memory_gb=self.hold_amount[:, 2].tolist())
        return RunningColumns.model_construct(
            id=list(self.running_ids), workload=list(self.running_workload), tenant=list(self.running_tenant),
            priority=self.running_priority.tolist(), start_hours=self.running_start.tolist(), holdings=holdings)


class ColumnBinpackInstance(ColumnBacked, BinpackInstance):
    """A :class:`BinpackInstance` of :class:`RegionColumns` (see the module docstring); build it
    with :meth:`from_region`."""

    _region: RegionColumns | None = None

    @classmethod
    def from_region(cls, region: RegionColumns, workloads: list[Workload], name: str = "") -> ColumnBinpackInstance:
        """The instance of ``region`` (already checked) and ``workloads`` (validated models)."""
        instance = cls.model_construct(kind="binpack", schema_version=1, name=name, clusters=list(region.cluster_ids),
                                       hardware_types=list(region.hardware_ids), now_hours=float(region.now_hours),
                                       workloads=workloads)
        instance.__dict__.pop("machines", None)
        instance.__dict__.pop("running", None)
        instance._region = region
        instance._arrays = region.arrays()
        return instance

    def __getattr__(self, name: str) -> Any:
        if name in ("machines", "running"):
            region = (self.__pydantic_private__ or {}).get("_region")
            if region is not None:
                value = region.machines() if name == "machines" else region.running()
                self.__dict__[name] = value
                return value
        return super().__getattr__(name)

    def materialize(self) -> None:
        """Make the ``machines`` and ``running`` column lists now (saving needs them)."""
        _ = self.machines, self.running


__all__ = ["ColumnBinpackInstance", "RegionColumns"]
