"""The shared pieces of the neighbourhood model (:mod:`fleetplan.models.placement.neighbourhood`):
what the fixed tables of a placement contribute (:class:`Background`) and the builder of sparse
columns and rows that the model's parts (:mod:`.neighbourhood_gpu`, :mod:`.neighbourhood_rows`)
append to. Split from that module so each part can take them without importing the whole model.

>>> b = _Builder()
>>> x = b.col(1.0, 0.0, 1.0, True, 0.0)
>>> b.row({x: 1.0}, -np.inf, 1.0)
>>> b.program().num_cols, b.program().num_rows
(1, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.placement import ML, PRIORITY_LEVELS, PlacementArrays
from fleetplan.instances.placement.evaluate import demand_regions, gpu_demand, job_regions
from fleetplan.lazy import lazy_module
from fleetplan.models.linear import LinearProgram

sp = lazy_module("scipy.sparse")


@dataclass
class Background:
    """What the fixed part of a placement contributes, as the hill climb's state keeps it:
    homes, R(job), the demand regions, GPU demand per (region, type x priority) and the jobs
    counted in each cell, CPU per (application, region), high-priority GPU-hours at home,
    bytes homed per region, and the planned readers of each table (CSR)."""

    home: np.ndarray
    region: np.ndarray
    dregion: np.ndarray
    demand: np.ndarray  # (R, G*P)
    demand_count: np.ndarray  # (R, G*P) jobs with GPU-hours in each cell
    cpu: np.ndarray  # (A, R)
    hp_at_home: float
    home_bytes: np.ndarray  # (R,)
    reader_ptr: np.ndarray
    readers: np.ndarray

    @classmethod
    def of(cls, arrays: PlacementArrays, home: np.ndarray) -> Background:
        """Computed from scratch (the search passes its state's arrays instead)."""
        a = arrays
        home = np.asarray(home, dtype=np.int64)
        region = job_regions(a, home)
        dregion = demand_regions(a, home, region)
        demand = gpu_demand(a, dregion).reshape(a.num_regions, -1)
        counted = a.planned & (a.job_kind == ML) & (a.job_gpu_hours > 0) & (dregion >= 0)
        count = np.zeros(demand.shape, dtype=np.int64)
        cell = a.job_gpu_type * PRIORITY_LEVELS + a.job_priority
        np.add.at(count, (dregion[counted], cell[counted]), 1)
        placed = a.planned & (region >= 0)
        cpu = np.zeros((len(a.app_ids), a.num_regions))
        np.add.at(cpu, (a.job_app[placed], region[placed]), a.job_cpu_hours[placed])
        hp = a.high_priority_ml & (region >= 0)
        at_home = hp & (a.gpu_supply[np.maximum(region, 0), np.maximum(a.job_gpu_type, 0)] > 0)
        keep = a.planned[a.table_jobs]
        owner = np.repeat(np.arange(a.num_tables), np.diff(a.table_ptr))
        ptr = np.concatenate([[0], np.cumsum(np.bincount(owner[keep], minlength=a.num_tables))]).astype(np.int64)
        return cls(home=home, region=region, dregion=dregion, demand=demand, demand_count=count, cpu=cpu,
                   hp_at_home=float(a.job_gpu_hours[at_home].sum()),
                   home_bytes=np.bincount(home, weights=a.table_size, minlength=a.num_regions).astype(float),
                   reader_ptr=ptr, readers=a.table_jobs[keep])


class _Builder:
    """Columns and COO rows, appended in blocks."""

    def __init__(self) -> None:
        self.cost: list[float] = []
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.integer: list[int] = []
        self.start: list[float] = []
        self.tag = "x"
        self.tags: list[str] = []
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []

    def col(self, cost: float, lower: float, upper: float, integer: bool, start: float) -> int:
        self.cost.append(float(cost))
        self.lower.append(lower)
        self.upper.append(upper)
        self.integer.append(int(integer))
        self.start.append(float(start))
        self.tags.append(self.tag)
        return len(self.cost) - 1

    def row(self, terms: dict[int, float] | list[tuple[int, float]], lower: float, upper: float) -> None:
        r = len(self.row_lower)
        items = terms.items() if isinstance(terms, dict) else terms
        for c, v in items:
            if v != 0.0:
                self.rows.append(r)
                self.cols.append(c)
                self.vals.append(float(v))
        self.row_lower.append(float(lower))
        self.row_upper.append(float(upper))

    def program(self) -> LinearProgram:
        n = len(self.cost)
        matrix = sp.csr_matrix((np.array(self.vals, dtype=float), (np.array(self.rows, dtype=np.int64),
                                                                  np.array(self.cols, dtype=np.int64))),
                               shape=(len(self.row_lower), n))
        return LinearProgram(cost=np.array(self.cost), matrix=matrix, row_lower=np.array(self.row_lower),
                             row_upper=np.array(self.row_upper), col_lower=np.array(self.lower),
                             col_upper=np.array(self.upper), integrality=np.array(self.integer))


def _add(terms: dict[int, float], col: int, value: float) -> None:
    terms[col] = terms.get(col, 0.0) + value
