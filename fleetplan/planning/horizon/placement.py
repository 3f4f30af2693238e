"""The placement kind over a horizon: GPU-hours per region and GPU type, storage per region.

Each period's model is :func:`fleetplan.planning.sizing.placement` 's sizing LP with today's
placement held fixed (every table in its current home, as ``size`` holds it by default), the
period's installed capacity as its supply, and the high-priority GPU-hour demand per region and
type and the bytes stored per region from the judge's breakdown (of the base instance, scaled
per region as the period's instance scales them).

Items are named as ``size`` names them: ``REGION/GPU_TYPE`` (GPU-hours a day of supply) and
``REGION/storage`` (bytes); both are continuous (``integer = False``). A wildcard ``*/TYPE`` is
refused: a horizon's options are per item, so name each region.

How demand moves. A period's instance is the base instance with, under the fixed placement,

* every ML job's GPU-hours times the multiplier of its region R(job) (a job whose tables are
  split has no region and takes the global multiplier: ``growth`` or ``multipliers``);
* every table's bytes times the multiplier of its home region;

where ``demand.classes`` is keyed by region id (growth per region) and ``growth`` /
``multipliers`` apply to regions left out. With the placement fixed, a job's region does not
depend on bytes (an ML job's region is its tables' common home), so the judge's breakdown of
the period's instance is the base breakdown scaled per region. CPU-hours do not move (a horizon
buys GPU-hours and storage only). ``new_jobs`` is refused: placement jobs read tables by row
and have no home of their own, so growth is per region.

Bytes run to 10^16 where GPU-hours run to 10^3, so the model counts storage in columns of 10^k
bytes (k from the instance: a region's bytes near 10^3 of them) and asks for 10^-6 of a column
more than is stored, so that the LP's tolerance cannot leave the judge short of a byte; the
schedule reports bytes.

Every period is judged on its own instance: the existing fleet of that period (less what has
retired) plus every purchase in use, each purchase rounded up to 1e-6 GPU-hours and to a whole
byte as ``size`` rounds its purchases (the LP meets its rows to about 1e-7, and 1e12 bytes have
no finer resolution than 1e-4), with today's placement as its plan.

>>> import fleetplan
>>> from fleetplan.planning.horizon import plan_horizon
>>> instance = fleetplan.load_instance("examples/placement-small.json")
>>> horizon = {"periods": 2, "targets": ["hp_demand_supply_max<=1.5"], "demand": {"growth": 0.1},
...            "buy": {"region0/h100": {"price": 1.0}, "region1/h100": {"price": 1.0},
...                    "region2/a100": {"price": 1.0}, "region3/h100": {"price": 1.0}}}
>>> result = plan_horizon(instance, horizon)
>>> result.status, all(all(row["checks"].values()) for row in result.periods)
('optimal', True)
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.planning.horizon.model import PeriodBlock
from fleetplan.planning.horizon.spec import HorizonSpec, Scenario
from fleetplan.planning.targets import Target, parse_targets

STORAGE = "storage"


def is_storage_item(item: str) -> bool:
    """``REGION/storage``: an item counted in bytes, where the GPU items are GPU-hours a day.

    >>> is_storage_item("eu/storage"), is_storage_item("eu/h100")
    (True, False)
    """
    return item.endswith(f"/{STORAGE}")

# Purchases are rounded up to this many GPU-hours (and to whole bytes) before judging: size's rounding.
GPU_HOURS_STEP = 1e-6


class PlacementPeriods:
    """The placement kind's side of :func:`~fleetplan.planning.horizon.model.build_horizon_model`
    (periods and scenarios 0-based). Capacities are held as one vector of cells: GPU-hours of
    region r and type g at ``r * types + g``, then the storage of region r at ``regions * types
    + r`` — the order of the sizing LP's purchase columns."""

    integer = False
    unit = "GPU-hours/day"

    def __init__(self, instance: Any, spec: HorizonSpec, scenarios: list[Scenario]) -> None:
        from fleetplan.instances.placement.evaluate import job_regions

        self.instance, self.spec, self.scenarios = instance, spec, scenarios
        arrays = instance.arrays()
        self.regions, self.types = list(arrays.region_ids), list(arrays.gpu_types)
        self.n_gpu = len(self.regions) * len(self.types)
        self.base = np.concatenate([arrays.gpu_supply.ravel(), arrays.storage_capacity]).astype(float)
        self.items = list(spec.buy)
        self.item_cell = np.array([self._cell(name, f"buy.{name}") for name in self.items], dtype=int)
        self.retired = [np.zeros_like(self.base) for _ in range(spec.periods + 1)]  # retired by period t (1-based)
        for name, existing in spec.existing.items():
            cell = self._cell(name, f"existing.{name}")
            retiring = sum(r.count for r in existing.retire)
            if retiring > self.base[cell] * (1 + 1e-12) + 1e-9:
                raise InstanceError(f"existing.{name}.retire", f"retires {retiring:g} of the {self.base[cell]:g} "
                                    f"{self._unit(cell)} the instance holds")
            for retirement in existing.retire:
                for period in range(retirement.after + 1, spec.periods + 1):
                    self.retired[period][cell] += retirement.count
        for s, scenario in enumerate(scenarios):
            where = "demand" if len(scenarios) == 1 and spec.scenarios is None else f"scenarios.cases[{s}].demand"
            if scenario.demand.new_jobs:
                raise InstanceError(f"{where}.new_jobs", "placement grows its jobs per region (demand.classes keyed "
                                                         "by region id); new jobs are for the allocation kind")
            if scenario.demand.jobs_by_period is not None:
                raise InstanceError(f"{where}.jobs_by_period", "placement grows its jobs per region (demand.classes "
                                                               "keyed by region id); jobs stated per period are for "
                                                               "the allocation kind")
            for name in scenario.demand.classes:
                if name not in self.regions:
                    raise InstanceError(f"{where}.classes.{name}", f"unknown region (placement's classes are "
                                                                   f"regions: {_listed(self.regions)})")
        self.targets = [_period_targets(spec, t) for t in range(spec.periods)]
        hours = spec.hours_per_period
        self.opex_rate = np.zeros_like(self.base)
        for name, option in spec.buy.items():
            self.opex_rate[self._cell(name, f"buy.{name}")] = option.opex_per_hour * hours
        for name, existing in spec.existing.items():
            self.opex_rate[self._cell(name, f"existing.{name}")] = existing.opex_per_hour * hours
        # today's placement, held fixed in every period
        self.home = np.asarray(arrays.table_home)
        self.job_region = job_regions(arrays, self.home)
        # Bytes are counted in columns of 10^k bytes, k putting a region's bytes near 10^3: HiGHS
        # fails on rows of 10^16 bytes beside GPU-hours near 10^3 (model.py, "scale").
        largest = float(max(np.bincount(self.home, weights=arrays.table_size, minlength=len(self.regions)).max(),
                            arrays.storage_capacity.max(), 1.0))
        self.storage_scale = 10.0 ** max(0, int(np.floor(np.log10(largest))) - 3)
        self.scale = np.where(self.item_cell < self.n_gpu, 1.0, self.storage_scale)
        self._data: dict[str, Any] | None = None
        self._base_needs: tuple[np.ndarray, np.ndarray] | None = None

    # --- the fleet ---------------------------------------------------------------------------

    def existing_cells(self, period: int) -> np.ndarray:
        """Every cell's existing capacity in ``period``: the instance's, less what has retired."""
        return np.maximum(self.base - self.retired[period + 1], 0.0)

    def existing(self, period: int) -> np.ndarray:
        return self.existing_cells(period)[self.item_cell]

    def existing_opex(self, period: int) -> float:
        return float(self.opex_rate @ self.existing_cells(period))

    def installed(self, period: int, added: np.ndarray) -> np.ndarray:
        """Every cell's capacity in ``period`` with ``added`` of each item in use, each purchase
        rounded up as ``size`` rounds it (module docstring)."""
        cells = self.existing_cells(period)
        added = np.maximum(np.asarray(added, dtype=float), 0.0)
        gpu = self.item_cell < self.n_gpu
        rounded = np.where(gpu, np.ceil(added / GPU_HOURS_STEP - 1e-6) * GPU_HOURS_STEP, np.ceil(added - 1e-9))
        cells[self.item_cell] += np.maximum(rounded, 0.0)
        return cells

    def fleet(self, period: int, added: np.ndarray) -> dict[str, float]:
        """GPU-hours a day installed per GPU type (every region summed) in ``period``."""
        supply = self.installed(period, added)[: self.n_gpu].reshape(len(self.regions), len(self.types))
        return {name: float(total) for name, total in zip(self.types, supply.sum(axis=0), strict=True)}

    def needs(self, period: int, scenario: int) -> tuple[np.ndarray, np.ndarray]:
        """(high-priority GPU-hours per region x type, bytes stored per region) of the period's
        instance under today's placement: the judge's breakdown of the base instance, each
        region's row times its multiplier — what the breakdown of the period's instance is, every
        job and table of a region scaled alike (module docstring); the judge measures that one."""
        if self._base_needs is None:
            from fleetplan.instances.placement import PlacementPlan
            from fleetplan.instances.placement.evaluate import evaluate

            breakdown = evaluate(self.instance, PlacementPlan.current(self.instance)).breakdown
            demand = np.asarray(breakdown["region_gpu_types"]["hp_gpu_demand"], dtype=float).reshape(
                len(self.regions), len(self.types))
            self._base_needs = (demand, np.asarray(breakdown["regions"]["storage_used_bytes"], dtype=float))
        demand, stored = self._base_needs
        by_region = self._multipliers(period, scenario)[0]
        return demand * by_region[:, None], stored * by_region

    def _multipliers(self, period: int, scenario: int) -> tuple[np.ndarray, float]:
        """The period's demand multiplier of each region, and of jobs with no region."""
        demand = self.scenarios[scenario].demand
        return (np.array([demand.multiplier(period + 1, name) for name in self.regions]),
                demand.multiplier(period + 1, None))

    def useful(self, period: int, scenario: int) -> np.ndarray:
        """The most of each item any target of the period could need: the demand it must cover
        (divided by the ratio a ratio target allows), the bytes stored."""
        demand, stored = self.needs(period, scenario)
        most = np.zeros(len(self.base))
        gpu = np.zeros_like(demand)
        for target in self.targets[period]:
            if target.metric == "hp_demand_supply_max":
                gpu = np.maximum(gpu, demand.sum(axis=1, keepdims=True) / target.value)
            elif target.metric == "hp_demand_supply_max_per_type":
                gpu = np.maximum(gpu, demand / target.value)
            elif target.metric == "hp_gpu_hours_unserved":
                gpu = np.maximum(gpu, demand)
            elif target.metric == "storage_over_capacity_bytes":
                most[self.n_gpu:] = stored
        most[: self.n_gpu] = gpu.ravel()
        return most[self.item_cell]

    def demand_gpus(self, period: int, scenario: int) -> float:
        """High-priority GPU-hours a day the period's jobs ask for (every region and type)."""
        return float(self.needs(period, scenario)[0].sum())

    # --- the period's model and its judge ----------------------------------------------------

    def block(self, period: int, scenario: int, add_cap: np.ndarray, role: str) -> PeriodBlock:
        """The sizing LP of :mod:`fleetplan.planning.sizing.placement` on the period's existing
        fleet and demand, its purchase columns bounded by what can be in use (``add_cap``)."""
        from fleetplan.planning.sizing.placement import placement_sizing_lp

        demand, stored = self.needs(period, scenario)
        cells = self.existing_cells(period)
        cap = np.zeros(len(self.base))
        cap[self.item_cell] = add_cap
        n_r, n_t = len(self.regions), len(self.types)
        # Storage in columns of storage_scale bytes, and 1e-6 of one more than is stored: the LP
        # meets its rows to about 1e-7, and the judge wants every byte.
        unit = self.storage_scale
        fleet = SimpleNamespace(gpu_supply=cells[: self.n_gpu].reshape(n_r, n_t),
                                storage_capacity=cells[self.n_gpu:] / unit)
        targets = [Target(t.metric, t.op, t.value / unit) if t.metric == "storage_over_capacity_bytes" else t
                   for t in self.targets[period]]
        lp = placement_sizing_lp(fleet, targets, demand, stored / unit + 1e-6, np.zeros((n_r, n_t)),
                    cap[: self.n_gpu].reshape(n_r, n_t), np.zeros(n_r), cap[self.n_gpu:] / unit, None)
        # The LP's purchase columns are a (regions x types, row-major), then b (regions): the cells.
        return PeriodBlock(lp, self.item_cell.copy(), True, None)

    def judge(self, period: int, scenario: int, block: PeriodBlock, values: np.ndarray,
              added: np.ndarray) -> dict[str, Any]:
        """The period's instance with what is installed, today's placement as its plan, and the
        judge's metrics of it (the model never judges itself)."""
        from fleetplan.instances.placement import PlacementPlan
        from fleetplan.instances.placement.evaluate import evaluate
        from fleetplan.planning.sizing import check_targets

        instance = self.period_instance(period, scenario, self.installed(period, added))
        plan = PlacementPlan.current(instance)
        metrics = dict(evaluate(instance, plan).metrics)
        return {"instance": instance, "plan": plan, "metrics": metrics,
                "checks": check_targets(self.targets[period], metrics)}

    def period_instance(self, period: int, scenario: int, cells: np.ndarray) -> Any:
        """The period's demand (module docstring) on capacity ``cells``, as a validated instance."""
        from fleetplan.instances.placement import PlacementInstance

        by_region, overall = self._multipliers(period, scenario)
        data = dict(self._base_data())
        arrays = self.instance.arrays()
        job_factor = np.where(self.job_region >= 0, by_region[np.maximum(self.job_region, 0)], overall)
        data["jobs"] = {**data["jobs"], "gpu_hours": (arrays.job_gpu_hours * job_factor).tolist()}
        data["tables"] = {**data["tables"], "size_bytes": (arrays.table_size * by_region[self.home]).tolist()}
        supply = cells[: self.n_gpu].reshape(len(self.regions), len(self.types))
        regions = []
        for r, region in enumerate(data["regions"]):
            regions.append({**region, "storage_capacity_bytes": float(cells[self.n_gpu + r]),
                            "gpu_supply": {name: float(supply[r, g]) for g, name in enumerate(self.types)
                                           if supply[r, g] > 0 or name in region["gpu_supply"]}})
        data["regions"] = regions
        label = self.scenarios[scenario].name
        data["name"] = f"{self.instance.name or 'placement'}-{self.spec.period_name}{period + 1}-{label}"
        return PlacementInstance.model_validate(data)

    def shortfall(self, period: int, scenario: int, add_cap: np.ndarray) -> str:
        """``"; region3 short of 120 GPU-hours/day for hp_demand_supply_max<=1"`` with every unit
        that can arrive installed."""
        demand, stored = self.needs(period, scenario)
        cells = self.existing_cells(period)
        cells[self.item_cell] += add_cap
        supply = cells[: self.n_gpu].reshape(demand.shape)
        storage = cells[self.n_gpu:]
        parts = []
        for target in self.targets[period]:
            if target.metric == "hp_demand_supply_max":
                short = demand.sum(axis=1) / target.value - supply.sum(axis=1)
                parts += [f"{self.regions[r]} short of {short[r]:.6g} GPU-hours/day for {target}"
                          for r in np.flatnonzero((short > 1e-9) & (demand.sum(axis=1) > 0))[:3]]
            elif target.metric == "hp_demand_supply_max_per_type":
                short = demand / target.value - supply
                parts += [f"{self.regions[r]}/{self.types[g]} short of {short[r, g]:.6g} GPU-hours/day for {target}"
                          for r, g in np.argwhere((short > 1e-9) & (supply > 0))[:3]]
            elif target.metric == "hp_gpu_hours_unserved":
                least = float(np.maximum(demand - supply, 0.0).sum())
                if least > target.value:
                    parts.append(f"hp_gpu_hours_unserved {least:.6g} at best (target {target.op}{target.value:g})")
            elif target.metric == "storage_over_capacity_bytes":
                least = float(np.maximum(stored - storage, 0.0).sum())
                if least > target.value:
                    parts.append(f"storage_over_capacity_bytes {least:.6g} at best "
                                 f"(target {target.op}{target.value:g})")
        return f"; {', '.join(parts)}" if parts else ""

    # --- helpers -----------------------------------------------------------------------------

    def _cell(self, name: str, field: str) -> int:
        region, slash, what = name.partition("/")
        if not slash:
            raise InstanceError(field, f"'{name}': name a region and what is bought there: REGION/GPU_TYPE or "
                                       f"REGION/{STORAGE}")
        if region == "*":
            raise InstanceError(field, f"'{name}': a horizon's options are per item; name each region "
                                       f"({_listed(self.regions)})")
        if region not in self.regions:
            raise InstanceError(field, f"unknown region '{region}' (regions: {_listed(self.regions)})")
        r = self.regions.index(region)
        if what == STORAGE:
            return self.n_gpu + r
        if what not in self.types:
            raise InstanceError(field, f"unknown GPU type '{what}' (types: {', '.join(self.types)}, or {STORAGE})")
        return r * len(self.types) + self.types.index(what)

    def _unit(self, cell: int) -> str:
        return "GPU-hours/day" if cell < self.n_gpu else "bytes"

    def _base_data(self) -> dict[str, Any]:
        if self._data is None:
            self._data = self.instance.model_dump()
        return self._data


def _listed(names: list[str]) -> str:
    return ", ".join(names[:12]) + (" ..." if len(names) > 12 else "")


def _period_targets(spec: HorizonSpec, period: int) -> list[Target]:
    field = f"targets_by_period.{period + 1}" if (period + 1) in spec.targets_by_period else "targets"
    try:
        targets = parse_targets(spec.targets_of(period + 1), "placement")
    except InstanceError as error:  # a ratio of 0 or below among them (targets.check_target_value)
        raise InstanceError(field, error.reason) from None
    return targets
