"""The ``placement`` kind: Tetris table-to-region placement (MAST, OSDI 2024, §3).

Regions have GPU supply per GPU type (GPU-hours), storage capacity (bytes) and CPU capacity per
application (CPU-hours). Tables have a size and a current home region. Jobs (ML training, Spark,
Presto) read tables; ML jobs need one GPU type for some GPU-hours. The decision is each table's
home region; a job's region R(job) is derived from it (§3.3):

* Spark/Presto: the region holding most of the job's tables. Ties go to the region holding more
  of the job's bytes, then to the lowest region index (the order of ``regions`` in the file).
* ML: the common home region of all its tables, or none (``-1``) when they are split.

File layout. Regions are a list of objects, but tables and jobs are stored *column-wise*
(``"tables": {"id": [...], "size_bytes": [...], "home": [...]}``) so that a million tables load
as a handful of numpy arrays rather than a million Python objects. A job lists the tables it
reads by their row number in ``tables`` (0-based), which keeps a million-job file compact.
Loading validates everything with vectorised checks and fails with an :class:`InstanceError`
naming the JSON path (``jobs.tables[12][3]``) and the reason.

Modelling choices the paper leaves open (documented here, used by the evaluator):

* Priority levels are 0 (highest) to 6 (lowest), as MAST's seven levels (§4.2).
* Tetris plans for *recurring* jobs only: it "does not predict usage information for new
  training jobs" (§3.1). The objective and constraints count jobs with ``recurring=true``;
  first-time jobs are carried for the metrics (do they benefit from the plan?).
* ``home_training_threshold`` is a fraction of the high-priority recurring ML GPU-hours
  (Expression 6's right-hand side divided by the total), so one value fits any instance size.
* A region not listed in an application's ``cpu_capacity`` gives it no CPU there (capacity 0).
* Two readings of Figure 4 are settings (the fidelity of the placement judge), both
  defaulting to the figure as written: ``split_ml_demand`` — does an ML job whose tables are
  split add GPU demand in Expression 2 ("ignored": no, as §3.3 says; "largest_region": in the
  region holding most of its bytes) — and ``overload_form`` — does Expression 8 compare each
  priority level's demand with the supply ("per_priority") or the high-priority levels' demand
  summed ("combined_high_priority"). See :mod:`fleetplan.instances.placement.evaluate`.

Example
-------
>>> from fleetplan.instances.placement import PlacementInstance
>>> instance = PlacementInstance.model_validate({
...     "kind": "placement", "gpu_types": ["h100"], "applications": ["ads"],
...     "regions": [
...         {"id": "east", "gpu_supply": {"h100": 100.0}, "storage_capacity_bytes": 10.0,
...          "cpu_capacity": {"ads": 50.0}},
...         {"id": "west", "gpu_supply": {}, "storage_capacity_bytes": 10.0,
...          "cpu_capacity": {"ads": 50.0}}],
...     "tables": {"id": ["clicks", "users"], "size_bytes": [4.0, 2.0], "home": ["west", "west"]},
...     "jobs": {"id": ["train"], "kind": ["ml"], "tables": [[0, 1]], "gpu_type": ["h100"],
...              "gpu_hours": [64.0], "cpu_hours": [1.0], "priority": [0],
...              "application": ["ads"], "recurring": [True]}})
>>> instance.arrays().table_home.tolist()
[1, 1]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import Field, PrivateAttr, model_validator

from fleetplan.instances.base import InstanceBase, InstanceError, PlanBase, StrictModel
from fleetplan.instances.columns import first_true as _first
from fleetplan.instances.columns import id_index as _unique
from fleetplan.instances.columns import lookup_ids as _lookup

KIND = "placement"
PRIORITY_LEVELS = 7
JOB_KINDS = ("ml", "spark", "presto")
ML, SPARK, PRESTO = 0, 1, 2
NO_REGION = -1


class Region(StrictModel):
    id: str = Field(min_length=1)
    gpu_supply: dict[str, float] = Field(
        default_factory=dict, description="GPU-hours per day of each GPU type; a type left out has none")
    storage_capacity_bytes: float = Field(ge=0)
    cpu_capacity: dict[str, float] = Field(
        default_factory=dict, description="CPU-hours per application; an application left out has none")
    dr_partner: str | None = Field(default=None, description="region holding DR replicas "
                                   "(used by the 'partner' DR policy)")


class TableColumns(StrictModel):
    """Tables column-wise: row i is table i."""

    id: list[str]
    size_bytes: list[float]
    home: list[str] = Field(description="current home region of each table (today's placement)")


class JobColumns(StrictModel):
    """Jobs column-wise: row j is job j. ``tables[j]`` lists row numbers of ``tables``."""

    id: list[str]
    kind: list[Literal["ml", "spark", "presto"]]
    tables: list[list[int]]
    gpu_type: list[str | None] = Field(description="GPU type of an ML job; null for Spark/Presto")
    gpu_hours: list[float]
    cpu_hours: list[float]
    priority: list[int] = Field(description="0 (highest) to 6 (lowest)")
    application: list[str]
    recurring: list[bool] = Field(description="recurring jobs are planned for; first-time are not")
    weight: list[float] | None = Field(default=None, description="per-job weight in Expression 1 "
                                       "(default 1)")
    read_fraction: list[float] | None = Field(
        default=None, description="fraction of each input table's partitions the job reads, in "
        "(0, 1] (default 1); used when replicas copy only the partitions jobs need")


class Weights(StrictModel):
    traffic: float = Field(default=1.0, ge=0, description="w1, per byte read across regions")
    gpu_balance: float = Field(default=1.0, ge=0, description="w2 (Expressions 2, 7, 8)")
    storage_balance: float = Field(default=1.0, ge=0, description="w3 (Expressions 3, 9)")
    priority: list[float] = Field(
        default_factory=lambda: [64.0, 32.0, 16.0, 8.0, 4.0, 2.0, 1.0],
        min_length=PRIORITY_LEVELS, max_length=PRIORITY_LEVELS,
        description="w_Pk for priority levels 0..6")

    @model_validator(mode="after")
    def _non_negative(self) -> Weights:
        for index, value in enumerate(self.priority):
            if value < 0:
                raise InstanceError(f"priority[{index}]", "must be >= 0")
        return self


class DRPolicy(StrictModel):
    """Where each table's disaster-recovery replica goes (§3.5).

    ``partner``: the home region's ``dr_partner`` (administrators pair regions unlikely to fail
    together); ``largest_gpu_supply``: the other region with the most GPU supply (hardware to
    absorb the load after a disaster); ``none``: no DR replicas.
    """

    kind: Literal["partner", "largest_gpu_supply", "none"] = "largest_gpu_supply"


@dataclass(frozen=True, eq=False)
class PlacementArrays:
    """Column-wise view of a placement instance: what the evaluator and solvers compute with.

    Jobs' tables are a CSR index: job j reads ``job_tables[job_ptr[j]:job_ptr[j+1]]``; the
    transpose ``table_ptr``/``table_jobs`` lists the jobs reading each table.
    """

    region_ids: list[str]
    gpu_types: list[str]
    app_ids: list[str]
    gpu_supply: np.ndarray  # (regions, gpu types) GPU-hours
    storage_capacity: np.ndarray  # (regions,) bytes
    cpu_capacity: np.ndarray  # (applications, regions) CPU-hours
    dr_partner: np.ndarray  # (regions,) region index or -1
    table_ids: list[str]
    table_size: np.ndarray  # (tables,) bytes
    table_home: np.ndarray  # (tables,) region index: today's placement
    job_ids: list[str]
    job_kind: np.ndarray  # (jobs,) 0 ml, 1 spark, 2 presto
    job_ptr: np.ndarray  # (jobs + 1,)
    job_tables: np.ndarray  # (pairs,)
    job_gpu_type: np.ndarray  # (jobs,) type index or -1
    job_gpu_hours: np.ndarray
    job_cpu_hours: np.ndarray
    job_priority: np.ndarray  # (jobs,) 0..6
    job_app: np.ndarray  # (jobs,) application index
    job_recurring: np.ndarray  # (jobs,) bool
    job_weight: np.ndarray
    job_read_fraction: np.ndarray
    w_traffic: float
    w_gpu: float
    w_storage: float
    w_priority: np.ndarray  # (7,)
    sigmoid_scale: float
    high_priority: np.ndarray  # (7,) bool
    home_training_threshold: float
    move_quota_bytes: float  # inf when unlimited
    dr_policy: str
    split_ml_demand: str = "ignored"  # PlacementInstance.split_ml_demand
    overload_form: str = "per_priority"  # PlacementInstance.overload_form
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def num_regions(self) -> int:
        return len(self.region_ids)

    @property
    def num_tables(self) -> int:
        return len(self.table_size)

    @property
    def num_jobs(self) -> int:
        return len(self.job_kind)

    def once(self, name: str, make: Callable[[], Any]) -> Any:
        """``make()``, computed the first time and kept with the arrays under ``name``: values
        derived from the instance alone that several steps of a command read (today's job
        regions, today's objective terms)."""
        if name not in self._cache:
            self._cache[name] = make()
        return self._cache[name]

    @property
    def pair_job(self) -> np.ndarray:
        """Job index of every (job, table) pair, aligned with ``job_tables``."""
        if "pair_job" not in self._cache:
            counts = np.diff(self.job_ptr)
            self._cache["pair_job"] = np.repeat(np.arange(self.num_jobs, dtype=np.int64), counts)
        return self._cache["pair_job"]

    @property
    def table_ptr(self) -> np.ndarray:
        self._transpose()
        return self._cache["table_ptr"]

    @property
    def table_jobs(self) -> np.ndarray:
        """Jobs reading each table (CSR with ``table_ptr``), in increasing job order."""
        self._transpose()
        return self._cache["table_jobs"]

    def _transpose(self) -> None:
        if "table_ptr" in self._cache:
            return
        order = np.argsort(self.job_tables, kind="stable")
        counts = np.bincount(self.job_tables, minlength=self.num_tables)
        self._cache["table_ptr"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._cache["table_jobs"] = self.pair_job[order]

    @property
    def planned(self) -> np.ndarray:
        """Jobs Tetris plans for: the recurring ones (§3.1)."""
        return self.job_recurring

    @property
    def high_priority_ml(self) -> np.ndarray:
        """Recurring high-priority ML jobs: the ones Expression 6 and the §5.6 metrics count."""
        return (self.job_kind == ML) & self.high_priority[self.job_priority] & self.job_recurring


class PlacementInstance(InstanceBase):
    """Tables to place in regions, the jobs reading them, and the Tetris objective's settings."""

    kind: Literal["placement"] = KIND
    gpu_types: list[str] = Field(min_length=1)
    applications: list[str] = Field(min_length=1)
    regions: list[Region] = Field(min_length=1)
    tables: TableColumns
    jobs: JobColumns
    weights: Weights = Field(default_factory=Weights)
    sigmoid_scale_gpu_hours: float = Field(
        default=1000.0, gt=0, description="tau: overload max(0, D - S) is divided by it inside the "
        "sigmoid of Expression 8")
    high_priority_levels: list[int] = Field(default_factory=lambda: [0, 1, 2])
    home_training_threshold: float = Field(
        default=0.0, ge=0, le=1, description="Expression 6: minimum fraction of high-priority "
        "recurring ML GPU-hours trained in their home region")
    daily_move_quota_bytes: float | None = Field(default=None, ge=0, description="bytes of tables "
                                                 "that may change home region; null: unlimited")
    dr_policy: DRPolicy = Field(default_factory=DRPolicy)
    split_ml_demand: Literal["ignored", "largest_region"] = Field(
        default="ignored", description="Expression 2's demand of an ML job whose tables are split "
        "(no R(job)): 'ignored' (Figure 4 as written: it adds no demand) or 'largest_region' (counted "
        "in the region holding most of its bytes, ties to the lowest region index)")
    overload_form: Literal["per_priority", "combined_high_priority"] = Field(
        default="per_priority", description="Expression 8: 'per_priority' (each priority level's "
        "demand against the supply, Figure 4 as written) or 'combined_high_priority' (the "
        "high-priority levels' demand summed before the comparison, weighted by the sum of their w_p)")

    _arrays: PlacementArrays | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _validate_columns(self) -> PlacementInstance:
        self._arrays = build_arrays(self)
        return self

    @classmethod
    def from_frames(cls, tables: Any, jobs: Any, regions: Any, *, settings: Any = None,
                    name: str | None = None) -> PlacementInstance:
        """An instance from tables (DataFrames or ``.csv``/``.parquet`` paths) and optional
        settings (a dict or a YAML/JSON file); the layouts are in ``docs/data-in-out.md``. Same
        as :func:`fleetplan.instances.placement.frames.from_frames`.

        Examples
        --------
        >>> import pandas as pd
        >>> instance = PlacementInstance.from_frames(
        ...     tables=pd.DataFrame({"id": ["clicks"], "size_bytes": [4.0], "home": ["west"]}),
        ...     jobs=pd.DataFrame({"id": ["etl"], "kind": ["spark"], "tables": ["clicks"],
        ...                        "cpu_hours": [1.0], "priority": [3], "application": ["ads"]}),
        ...     regions=pd.DataFrame({"id": ["east", "west"], "storage_capacity_bytes": [10.0, 10.0],
        ...                           "gpu_supply_h100": [8.0, 0.0], "cpu_capacity_ads": [5.0, 5.0]}),
        ...     settings={"home_training_threshold": 0.5})
        >>> instance.tables.home, instance.jobs.tables
        (['west'], [[0]])
        """
        from fleetplan.instances.placement.frames import from_frames

        return from_frames(tables, jobs, regions, settings=settings, name=name)

    def arrays(self) -> PlacementArrays:
        """The instance as numpy arrays (built once, when the instance is validated)."""
        if self._arrays is None:
            self._arrays = build_arrays(self)
        return self._arrays


def build_arrays(instance: PlacementInstance) -> PlacementArrays:
    """Validate an instance's cross-references with vectorised checks and build its arrays."""
    types = _unique(instance.gpu_types, "gpu_types")
    apps = _unique(instance.applications, "applications")
    regions = _unique([r.id for r in instance.regions], "regions[*].id")
    num_regions = len(regions)
    supply = np.zeros((num_regions, len(types)))
    storage = np.zeros(num_regions)
    cpu = np.zeros((len(apps), num_regions))
    partner = np.full(num_regions, NO_REGION, dtype=np.int64)
    for r, region in enumerate(instance.regions):
        for name, value in region.gpu_supply.items():
            if name not in types:
                raise InstanceError(f"regions[{r}].gpu_supply.{name}", f"unknown GPU type '{name}'")
            if value < 0:
                raise InstanceError(f"regions[{r}].gpu_supply.{name}", "must be >= 0")
            supply[r, types[name]] = value
        for name, value in region.cpu_capacity.items():
            if name not in apps:
                raise InstanceError(f"regions[{r}].cpu_capacity.{name}", f"unknown application '{name}'")
            if value < 0:
                raise InstanceError(f"regions[{r}].cpu_capacity.{name}", "must be >= 0")
            cpu[apps[name], r] = value
        storage[r] = region.storage_capacity_bytes
        if region.dr_partner is not None:
            if region.dr_partner not in regions:
                raise InstanceError(f"regions[{r}].dr_partner", f"unknown region '{region.dr_partner}'")
            if region.dr_partner == region.id:
                raise InstanceError(f"regions[{r}].dr_partner", "a region cannot be its own DR partner")
            partner[r] = regions[region.dr_partner]
    if instance.dr_policy.kind == "partner" and num_regions > 1 and (partner < 0).any():
        raise InstanceError(f"regions[{_first(partner < 0)}].dr_partner",
                            "required by the 'partner' DR policy")

    tables = instance.tables
    num_tables = len(tables.id)
    for name in ("size_bytes", "home"):
        if len(getattr(tables, name)) != num_tables:
            raise InstanceError(f"tables.{name}", f"has {len(getattr(tables, name))} entries for "
                                f"{num_tables} tables")
    _unique(tables.id, "tables.id")
    size = np.asarray(tables.size_bytes, dtype=float)
    if (size < 0).any():
        raise InstanceError(f"tables.size_bytes[{_first(size < 0)}]", "must be >= 0")
    home = _lookup(tables.home, regions, "tables.home", "region")

    jobs = instance.jobs
    num_jobs = len(jobs.id)
    for name in ("kind", "tables", "gpu_type", "gpu_hours", "cpu_hours", "priority",
                 "application", "recurring", "weight", "read_fraction"):
        column = getattr(jobs, name)
        if column is not None and len(column) != num_jobs:
            raise InstanceError(f"jobs.{name}", f"has {len(column)} entries for {num_jobs} jobs")
    _unique(jobs.id, "jobs.id")
    kind_code = {k: c for c, k in enumerate(JOB_KINDS)}
    job_kind = np.fromiter((kind_code[k] for k in jobs.kind), dtype=np.int8, count=num_jobs)
    counts = np.fromiter((len(t) for t in jobs.tables), dtype=np.int64, count=num_jobs)
    if (counts == 0).any():
        raise InstanceError(f"jobs.tables[{_first(counts == 0)}]", "a job must read at least one table")
    ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    flat = np.fromiter(itertools.chain.from_iterable(jobs.tables), dtype=np.int64, count=int(ptr[-1]))
    bad = (flat < 0) | (flat >= num_tables)
    if bad.any():
        pair = _first(bad)
        job = int(np.searchsorted(ptr, pair, side="right") - 1)
        raise InstanceError(f"jobs.tables[{job}][{pair - ptr[job]}]",
                            f"table row {flat[pair]} does not exist ({num_tables} tables)")
    pair_job = np.repeat(np.arange(num_jobs, dtype=np.int64), counts)
    keys = pair_job * max(num_tables, 1) + flat
    sorted_keys = np.sort(keys)
    repeated = sorted_keys[1:] == sorted_keys[:-1]
    if repeated.any():
        job = int(sorted_keys[_first(repeated)] // max(num_tables, 1))
        raise InstanceError(f"jobs.tables[{job}]", "lists a table twice")

    gpu_type = np.full(num_jobs, NO_REGION, dtype=np.int64)
    for j, name in enumerate(jobs.gpu_type):
        if name is not None:
            if name not in types:
                raise InstanceError(f"jobs.gpu_type[{j}]", f"unknown GPU type '{name}'")
            gpu_type[j] = types[name]
    is_ml = job_kind == ML
    if (is_ml & (gpu_type < 0)).any():
        raise InstanceError(f"jobs.gpu_type[{_first(is_ml & (gpu_type < 0))}]", "an ML job needs a GPU type")
    if (~is_ml & (gpu_type >= 0)).any():
        raise InstanceError(f"jobs.gpu_type[{_first(~is_ml & (gpu_type >= 0))}]",
                            "only ML jobs use GPUs (must be null)")
    gpu_hours = np.asarray(jobs.gpu_hours, dtype=float)
    cpu_hours = np.asarray(jobs.cpu_hours, dtype=float)
    for name, values in (("gpu_hours", gpu_hours), ("cpu_hours", cpu_hours)):
        if (values < 0).any():
            raise InstanceError(f"jobs.{name}[{_first(values < 0)}]", "must be >= 0")
    if (~is_ml & (gpu_hours > 0)).any():
        raise InstanceError(f"jobs.gpu_hours[{_first(~is_ml & (gpu_hours > 0))}]",
                            "only ML jobs use GPU-hours (must be 0)")
    priority = np.asarray(jobs.priority, dtype=np.int64)
    bad = (priority < 0) | (priority >= PRIORITY_LEVELS)
    if bad.any():
        raise InstanceError(f"jobs.priority[{_first(bad)}]", f"must be 0..{PRIORITY_LEVELS - 1}")
    app = _lookup(jobs.application, apps, "jobs.application", "application")
    weight = np.ones(num_jobs) if jobs.weight is None else np.asarray(jobs.weight, dtype=float)
    if (weight < 0).any():
        raise InstanceError(f"jobs.weight[{_first(weight < 0)}]", "must be >= 0")
    fraction = np.ones(num_jobs) if jobs.read_fraction is None else np.asarray(jobs.read_fraction, dtype=float)
    bad = (fraction <= 0) | (fraction > 1)
    if bad.any():
        raise InstanceError(f"jobs.read_fraction[{_first(bad)}]", "must be in (0, 1]")

    high = np.zeros(PRIORITY_LEVELS, dtype=bool)
    for position, level in enumerate(instance.high_priority_levels):
        if not 0 <= level < PRIORITY_LEVELS:
            raise InstanceError(f"high_priority_levels[{position}]", f"must be 0..{PRIORITY_LEVELS - 1}")
        high[level] = True
    quota = instance.daily_move_quota_bytes
    return PlacementArrays(
        region_ids=[r.id for r in instance.regions], gpu_types=list(instance.gpu_types),
        app_ids=list(instance.applications), gpu_supply=supply, storage_capacity=storage,
        cpu_capacity=cpu, dr_partner=partner, table_ids=list(tables.id), table_size=size,
        table_home=home, job_ids=list(jobs.id), job_kind=job_kind, job_ptr=ptr, job_tables=flat,
        job_gpu_type=gpu_type, job_gpu_hours=gpu_hours, job_cpu_hours=cpu_hours,
        job_priority=priority, job_app=app, job_recurring=np.asarray(jobs.recurring, dtype=bool),
        job_weight=weight, job_read_fraction=fraction, w_traffic=instance.weights.traffic,
        w_gpu=instance.weights.gpu_balance, w_storage=instance.weights.storage_balance,
        w_priority=np.asarray(instance.weights.priority, dtype=float),
        sigmoid_scale=instance.sigmoid_scale_gpu_hours, high_priority=high,
        home_training_threshold=instance.home_training_threshold,
        move_quota_bytes=float("inf") if quota is None else float(quota),
        dr_policy=instance.dr_policy.kind, split_ml_demand=instance.split_ml_demand,
        overload_form=instance.overload_form,
    )


# --- the plan ------------------------------------------------------------------------------

# Plans name tables by id everywhere since schema 2. Schema 1 gave ``home`` as a
# list aligned with the instance's tables and ``replicas.table`` as row numbers; such plans still
# load, and :meth:`PlacementPlan.with_ids` (or any use against an instance) reads them.
PLAN_SCHEMA_VERSION = 2


class HomeColumns(StrictModel):
    """Each table's home region under the plan, column-wise: table ``table[i]`` lives in
    ``region[i]`` (ids both). Every table of the instance appears once, in any order."""

    table: list[str] = Field(description="table ids")
    region: list[str] = Field(description="home region id of each table")


class ReplicaColumns(StrictModel):
    """Extra copies of tables (§3.5), column-wise: ``table`` and ``region`` ids.

    Schema 1 plans gave ``table`` as row numbers of the instance's tables; those still load."""

    table: list[str] | list[int] = Field(default_factory=list, description="table ids (row "
                                         "numbers in schema 1 plans)")
    region: list[str] = Field(default_factory=list)
    bytes: list[float] = Field(default_factory=list, description="bytes copied (the whole table, "
                               "or only the partitions jobs need)")
    reason: list[Literal["dr", "collocation", "hot"]] = Field(default_factory=list)


class Move(StrictModel):
    """One applied table move, with why: the gain and how each objective term changed."""

    table: str
    source: str
    target: str
    bytes: float
    gain: float
    terms: dict[str, float] = Field(default_factory=dict, description="change of each term "
                                    "(negative: the move lowered it)")


class PlacementPlan(PlanBase):
    """Each table's home region, the replicas, and the moves that got there (ordered as applied).

    Tables and regions are named by id everywhere: ``home`` is ``{"table": [...], "region":
    [...]}``, ``replicas.table`` and ``moves[].table`` are table ids (schema 2). A schema 1 plan
    (``home`` a list aligned with the instance's tables, replica tables as row numbers) still
    loads; :meth:`with_ids` turns it into schema 2 given its instance.

    >>> from fleetplan.instances import generate
    >>> instance = generate("placement", {"regions": 2, "tables": 3, "jobs": 3}, seed=0)
    >>> old = PlacementPlan.model_validate({"kind": "placement", "schema_version": 1,
    ...                                     "home": ["region1", "region0", "region1"]})
    >>> new = old.with_ids(instance)
    >>> new.schema_version, new.home.table, new.home.region
    (2, ['t0', 't1', 't2'], ['region1', 'region0', 'region1'])
    """

    kind: Literal["placement"] = KIND
    schema_version: Literal[1, 2] = PLAN_SCHEMA_VERSION
    home: HomeColumns | list[str] = Field(description="each table's home region by id; a plain list "
                                          "(aligned with the instance's tables) in schema 1 plans")
    replicas: ReplicaColumns = Field(default_factory=ReplicaColumns)
    moves: list[Move] = Field(default_factory=list)

    @classmethod
    def from_arrays(cls, instance: PlacementInstance, home: np.ndarray, *,
                    replicas: ReplicaColumns | None = None, moves: list[Move] | None = None,
                    solver: str = "") -> PlacementPlan:
        """A plan from home region indices (one per table row); ``replicas`` may name tables by
        row number (solvers do), they are written by id."""
        arrays = instance.arrays()
        regions = arrays.region_ids
        columns = HomeColumns.model_construct(table=list(arrays.table_ids),
                                              region=[regions[r] for r in np.asarray(home).tolist()])
        replicas = replicas or ReplicaColumns.model_construct(table=[], region=[], bytes=[], reason=[])
        if replicas.table and not isinstance(replicas.table[0], str):
            ids = arrays.table_ids
            replicas = replicas.model_copy(update={"table": [ids[t] for t in replicas.table]})
        return cls.model_construct(
            kind=KIND, schema_version=PLAN_SCHEMA_VERSION, solver=solver, options={},
            home=columns, replicas=replicas, moves=list(moves or []))

    @classmethod
    def current(cls, instance: PlacementInstance) -> PlacementPlan:
        """Today's placement (§5.6's V0): every table in its current home, no replicas."""
        return cls.from_arrays(instance, instance.arrays().table_home)

    def to_frame(self, instance: PlacementInstance) -> Any:
        """The plan as one pandas DataFrame naming tables by id: a ``home`` row per table, a
        ``replica`` row per replica, a ``move`` row per move. Same as
        :func:`fleetplan.instances.placement.frames.plan_to_frame`.

        Examples
        --------
        >>> from fleetplan.instances import generate
        >>> instance = generate("placement", {"regions": 2, "tables": 3, "jobs": 3}, seed=0)
        >>> frame = PlacementPlan.current(instance).to_frame(instance)
        >>> frame["role"].tolist(), frame["table"].tolist()
        (['home', 'home', 'home'], ['t0', 't1', 't2'])
        """
        from fleetplan.instances.placement.frames import plan_to_frame

        return plan_to_frame(instance, self)

    def with_ids(self, instance: PlacementInstance) -> PlacementPlan:
        """This plan in schema 2 (tables named by id), checked against ``instance``; a schema 2
        plan comes back as is."""
        if isinstance(self.home, HomeColumns) and all(isinstance(t, str) for t in self.replicas.table[:1]):
            return self
        arrays = instance.arrays()
        home = self.home_array(instance)
        table, _, _ = self.replica_arrays(instance)
        ids = arrays.table_ids
        return self.model_copy(update={
            "schema_version": PLAN_SCHEMA_VERSION,
            "home": HomeColumns.model_construct(table=list(ids), region=[arrays.region_ids[r] for r in home.tolist()]),
            "replicas": self.replicas.model_copy(update={"table": [ids[t] for t in table.tolist()]})})

    def home_array(self, instance: PlacementInstance) -> np.ndarray:
        """Home region index per table row of the instance, checked against the instance."""
        arrays = instance.arrays()
        region_index = {r: i for i, r in enumerate(arrays.region_ids)}
        if not isinstance(self.home, HomeColumns):  # schema 1: aligned with the instance's tables
            if len(self.home) != arrays.num_tables:
                raise InstanceError("home", f"has {len(self.home)} entries for {arrays.num_tables} tables")
            return _lookup(self.home, region_index, "home", "region")
        columns = self.home
        if len(columns.region) != len(columns.table):
            raise InstanceError("home.region", f"has {len(columns.region)} entries for {len(columns.table)} tables")
        region = _lookup(columns.region, region_index, "home.region", "region")
        if columns.table == arrays.table_ids:  # the order plans are written in: no lookup
            return region
        rows = _table_rows(arrays, columns.table, "home.table")
        seen = np.bincount(rows, minlength=arrays.num_tables)
        if (seen > 1).any():
            table = int(np.flatnonzero(seen > 1)[0])
            raise InstanceError(f"home.table[{int(np.flatnonzero(rows == table)[1])}]",
                                f"table '{arrays.table_ids[table]}' is listed twice")
        if (seen == 0).any():
            missing = np.flatnonzero(seen == 0)
            names = ", ".join(arrays.table_ids[t] for t in missing[:5])
            raise InstanceError("home.table", f"no home for {missing.size} table(s): {names}")
        home = np.empty(arrays.num_tables, dtype=np.int64)
        home[rows] = region
        return home

    def replica_arrays(self, instance: PlacementInstance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(table row, region index, bytes) of the replicas, checked against the instance."""
        arrays = instance.arrays()
        rep = self.replicas
        n = len(rep.table)
        for name in ("region", "bytes", "reason"):
            if len(getattr(rep, name)) != n:
                raise InstanceError(f"replicas.{name}", f"has {len(getattr(rep, name))} entries for {n} replicas")
        if n and isinstance(rep.table[0], str):
            table = _table_rows(arrays, rep.table, "replicas.table")
        else:  # schema 1: row numbers
            table = np.asarray(rep.table, dtype=np.int64).reshape(n)
            bad = (table < 0) | (table >= arrays.num_tables)
            if bad.any():
                raise InstanceError(f"replicas.table[{_first(bad)}]", "table row does not exist")
        region = _lookup(rep.region, {r: i for i, r in enumerate(arrays.region_ids)}, "replicas.region", "region")
        size = np.asarray(rep.bytes, dtype=float).reshape(n)
        bad = (size < 0) | (size > arrays.table_size[table] * (1 + 1e-9))
        if bad.any():
            raise InstanceError(f"replicas.bytes[{_first(bad)}]", "must be between 0 and the table's size")
        keys = np.sort(table * arrays.num_regions + region)
        if (keys[1:] == keys[:-1]).any():
            key = int(keys[1:][keys[1:] == keys[:-1]][0])
            raise InstanceError("replicas", f"table '{arrays.table_ids[key // arrays.num_regions]}' has two "
                                f"replicas in region '{arrays.region_ids[key % arrays.num_regions]}'")
        return table, region, size


def _table_rows(arrays: PlacementArrays, ids: list[str], path: str) -> np.ndarray:
    """Row numbers of table ``ids`` in the instance (the id index is built once per instance)."""
    if "table_index" not in arrays._cache:
        arrays._cache["table_index"] = {name: i for i, name in enumerate(arrays.table_ids)}
    return _lookup(ids, arrays._cache["table_index"], path, "table")
