"""The allocation kind over a horizon: GPUs per type, each period's jobs the base instance's grown
by the demand (and new jobs from their period on), each period's model the sizing MIP of
:mod:`fleetplan.models.allocation.sizing` with the installed base as its capacity.

A job class (its ``job_type``; jobs without one share the global growth) of ``n`` jobs with
multiplier ``m`` has ``round(n m)`` jobs in the period: every job ``floor`` of the ratio copies,
and the remainder spread evenly over the class (deterministic). A copy is the job again, with
``~K`` appended to its id.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.instances.allocation import AllocationArrays, AllocationInstance
from fleetplan.lazy import lazy_module
from fleetplan.models.linear import LinearProgram
from fleetplan.planning.horizon.model import PeriodBlock
from fleetplan.planning.horizon.spec import Demand, HorizonSpec, Scenario
from fleetplan.planning.targets import Target, parse_targets

sp = lazy_module("scipy.sparse")


def copies(count: int, multiplier: float) -> np.ndarray:
    """How many times each of ``count`` jobs of a class appears at ``multiplier``: ``round(count
    * multiplier)`` in all, spread evenly.

    >>> copies(4, 1.5).tolist()
    [2, 1, 2, 1]
    """
    total = int(math.floor(count * multiplier + 0.5))
    base, extra = divmod(total, count) if count else (0, 0)
    result = np.full(count, base, dtype=int)
    if extra:
        result[(np.arange(extra) * count) // extra] += 1
    return result


class AllocationPeriods:
    """The allocation kind's side of :func:`~fleetplan.planning.horizon.model.build_horizon_model`
    (periods and scenarios 0-based)."""

    integer = True
    unit = "GPU"

    def __init__(self, instance: AllocationInstance, spec: HorizonSpec, scenarios: list[Scenario]) -> None:
        self.instance, self.spec, self.scenarios = instance, spec, scenarios
        base = instance.arrays()
        self.types = list(base.worker_types)
        for name in spec.buy:
            if name not in self.types:
                raise InstanceError(f"buy.{name}", f"unknown GPU type (types: {', '.join(self.types)})")
            for field in ("min_order", "max_order"):
                value = getattr(spec.buy[name], field)
                if value is not None and not float(value).is_integer():
                    raise InstanceError(f"buy.{name}.{field}", f"{value:g}: GPUs are bought whole")
        for name, existing in spec.existing.items():
            if name not in self.types:
                raise InstanceError(f"existing.{name}", f"unknown GPU type (types: {', '.join(self.types)})")
            retiring = sum(r.count for r in existing.retire)
            if retiring > base.num_workers[self.types.index(name)] + 1e-9:
                raise InstanceError(f"existing.{name}.retire", f"retires {retiring:g} GPUs of the "
                                    f"{base.num_workers[self.types.index(name)]:g} the instance holds")
        self.items = list(spec.buy)
        self.item_type = np.array([self.types.index(name) for name in self.items], dtype=int)
        self.targets = [_period_targets(spec, t) for t in range(spec.periods)]
        self.pool_instance, self.pool_start, self.stated, self.display_ids = _job_pool(instance, scenarios)
        self.pool = self.pool_instance.arrays()
        self.pool_class = [job.job_type for job in self.pool_instance.jobs]
        self.base_jobs = len(instance.jobs)
        self._dumps: list[dict[str, Any]] | None = None
        self.jobs = [[self._period_jobs(t, scenario) for scenario in scenarios] for t in range(spec.periods)]
        hours = spec.hours_per_period
        self.opex_rate = np.array([
            (spec.existing[name].opex_per_hour if name in spec.existing
             else spec.buy[name].opex_per_hour if name in spec.buy else 0.0) * hours for name in self.types])

    # --- the fleet ---------------------------------------------------------------------------

    def existing_types(self, period: int) -> np.ndarray:
        """The existing fleet per GPU type in ``period``: the instance's, less what has retired."""
        counts = np.asarray(self.instance.arrays().num_workers, dtype=float).copy()
        for name, existing in self.spec.existing.items():
            for retirement in existing.retire:
                if retirement.after < period + 1:
                    counts[self.types.index(name)] -= retirement.count
        return counts

    def existing(self, period: int) -> np.ndarray:
        return self.existing_types(period)[self.item_type]

    def existing_opex(self, period: int) -> float:
        return float(self.opex_rate @ self.existing_types(period))

    def fleet(self, period: int, added: np.ndarray) -> dict[str, float]:
        """Every GPU type's installed count in ``period`` with ``added`` bought units in use."""
        counts = self.existing_types(period)
        counts[self.item_type] += np.rint(added)
        return {name: float(count) for name, count in zip(self.types, counts, strict=True)}

    def useful(self, period: int, scenario: int) -> np.ndarray:
        """GPUs of each item the period's jobs could use at once (every job there full time)."""
        arrays = self.arrays(period, scenario)
        return np.array([arrays.scale_factor[arrays.throughput[:, k] > 0].sum() for k in self.item_type], dtype=float)

    # --- the period's model and its judge ----------------------------------------------------

    def arrays(self, period: int, scenario: int) -> AllocationArrays:
        """The period's jobs on the existing fleet (no purchase)."""
        index, _ = self.jobs[period][scenario]
        part = self.pool.subset(index)
        return dataclasses.replace(part, job_ids=self._ids(period, scenario),
                                   num_workers=self.existing_types(period), fit_workers=None, isolated_override=None)

    def block(self, period: int, scenario: int, add_cap: np.ndarray, role: str) -> PeriodBlock:
        from fleetplan.models.allocation.sizing import build_sizing_model

        cap = np.zeros(len(self.types))
        cap[self.item_type] = add_cap
        arrays = self.arrays(period, scenario)
        if len(arrays.job_ids) == 0:
            lp = LinearProgram(cost=np.zeros(len(self.types)), matrix=sp.csr_matrix((0, len(self.types))),
                               row_lower=np.zeros(0), row_upper=np.zeros(0), col_lower=np.zeros(len(self.types)),
                               col_upper=cap, integrality=np.ones(len(self.types), dtype=int))
            return PeriodBlock(lp, self.item_type.copy(), True, None)
        model = build_sizing_model(arrays, self.targets[period], np.zeros(len(self.types)), cap, role=role)
        return PeriodBlock(model.lp, model.n_x + self.item_type, model.exact, model)

    def judge(self, period: int, scenario: int, block: PeriodBlock, values: np.ndarray,
              added: np.ndarray) -> dict[str, Any]:
        """The period's instance with what is installed, the model's allocation as its plan, and
        the judge's metrics of it (the model never judges itself)."""
        from fleetplan.instances.allocation import AllocationPlan
        from fleetplan.instances.allocation.evaluate import evaluate
        from fleetplan.planning.sizing import check_targets

        counts = self.existing_types(period)
        counts[self.item_type] += np.rint(added)
        instance = self.period_instance(period, scenario, counts)
        if block.payload is None:
            return {"instance": instance, "plan": None, "metrics": {}, "checks": {str(t): True for t in
                                                                                   self.targets[period]}}
        plan = AllocationPlan.from_matrix(instance, block.payload.allocation(values), solver="horizon",
                                          policy="max_throughput")
        metrics = dict(evaluate(instance, plan).metrics)
        return {"instance": instance, "plan": plan, "metrics": metrics,
                "checks": check_targets(self.targets[period], metrics)}

    def policy_outcome(self, period: int, instance: AllocationInstance, policy: str, *, seed: int,
                       threads: int) -> dict[str, Any]:
        """The named policy's own allocation on the period's instance (solved by the policy,
        judged): the schedule's targets hold for *an* allocation, and this says whether they hold
        for the one the planner runs."""
        from fleetplan.planning.sizing import check_targets
        from fleetplan.solvers import solve

        solved = solve(instance, policy, seed=seed, threads=threads)
        metrics = dict(solved.evaluation.metrics) if solved.evaluation is not None else {}
        return {"policy": policy, "status": solved.status, "metrics": metrics,
                "checks": check_targets(self.targets[period], metrics) if metrics else {}}

    def period_instance(self, period: int, scenario: int, counts: np.ndarray) -> AllocationInstance:
        """The period's jobs on ``counts`` GPUs per type, as a validated instance."""
        index, copy_number = self.jobs[period][scenario]
        data = self.instance.model_dump()
        pool_jobs = self._pool_dumps()
        jobs = []
        for job, copy in zip(index, copy_number, strict=True):
            entry = dict(pool_jobs[job])
            entry["id"] = self.display_ids[job] if not copy else f"{self.display_ids[job]}~{copy}"
            jobs.append(entry)
        data["jobs"] = jobs
        for entry, count in zip(data["worker_types"], counts, strict=True):
            entry["count"] = int(round(count))
        label = self.scenarios[scenario].name
        data["name"] = f"{self.instance.name or 'fleet'}-{self.spec.period_name}{period + 1}-{label}"
        return AllocationInstance.model_validate(data)

    def shortfall(self, period: int, scenario: int, add_cap: np.ndarray) -> str:
        """``"; at best min_time_share 0.42 (target >=0.5)"`` with every unit that can arrive."""
        arrays = self.arrays(period, scenario)
        counts = arrays.num_workers.copy()
        counts[self.item_type] += add_cap
        arrays = dataclasses.replace(arrays, num_workers=counts)
        parts = []
        for target in self.targets[period]:
            best = _frontier_best(arrays, target.metric)
            if best is not None and not target.holds({target.metric: best}):
                parts.append(f"{target.metric} {best:.4g} at best (target {target.op}{target.value:g})")
        return f"; {', '.join(parts)}" if parts else ""

    def demand_gpus(self, period: int, scenario: int) -> float:
        """GPUs the period's jobs ask for at once (the sum of their scale factors)."""
        return float(self.arrays(period, scenario).scale_factor.sum())

    # --- helpers -----------------------------------------------------------------------------

    def _period_jobs(self, period: int, scenario: Scenario) -> tuple[np.ndarray, np.ndarray]:
        """(pool index, copy number) of every job in the period under ``scenario``."""
        demand: Demand = scenario.demand
        if demand.jobs_by_period is not None:  # stated outright: the jobs of that period, once each
            stated = self.stated[scenario.name][period]
            return stated, np.zeros(len(stated), dtype=int)
        index: list[np.ndarray] = []
        copy_number: list[np.ndarray] = []
        new_start = self.pool_start.get(scenario.name, {})
        groups: dict[tuple[str | None, int], list[int]] = {}
        for job, job_class in enumerate(self.pool_class):
            start = 1 if job < self.base_jobs else new_start.get(job)
            if start is not None and start <= period + 1:  # another scenario's new job: never here
                groups.setdefault((job_class, start), []).append(job)
        for (job_class, start), members in groups.items():
            multiplier = demand.multiplier(period + 1, job_class)
            if start > 1:
                at_start = demand.multiplier(start, job_class)
                multiplier = multiplier / at_start if at_start > 0 else multiplier
            counts = copies(len(members), multiplier)
            for job, count in zip(members, counts, strict=True):
                index.append(np.full(count, job))
                copy_number.append(np.arange(count))
        if not index:
            return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
        return np.concatenate(index).astype(int), np.concatenate(copy_number).astype(int)

    def _ids(self, period: int, scenario: int) -> list[str]:
        index, copy_number = self.jobs[period][scenario]
        ids = self.display_ids
        return [ids[j] if c == 0 else f"{ids[j]}~{c}" for j, c in zip(index, copy_number, strict=True)]

    def _pool_dumps(self) -> list[dict[str, Any]]:
        if self._dumps is None:
            self._dumps = [job.model_dump() for job in self.pool_instance.jobs]
        return self._dumps


def _job_pool(instance: AllocationInstance, scenarios: list[Scenario]) -> tuple[AllocationInstance, dict, dict, list]:
    """Every job any period may hold — the instance's, each scenario's new jobs, and the jobs a
    scenario states per period — as one validated instance; per scenario, the first period of
    each of its new jobs (by pool index) and the pool indices of each period's stated jobs; and
    each pool job's id as the reader knows it (a stated job is in the pool once per period and
    scenario, under an id of its own there)."""
    data = instance.model_dump()
    jobs = list(data["jobs"])
    display = [job["id"] for job in jobs]
    start_of: dict[str, dict[int, int]] = {}
    stated: dict[str, list[np.ndarray]] = {}
    seen_ids = {job["id"] for job in jobs}
    for s, scenario in enumerate(scenarios):
        where = "demand" if scenario.name == "base" and len(scenarios) == 1 else f"scenarios.cases[{s}].demand"
        starts: dict[int, int] = {}
        for g, group in enumerate(scenario.demand.new_jobs):
            for j, job in enumerate(group.jobs):
                if not isinstance(job.get("id"), str) or job["id"] in seen_ids:
                    raise InstanceError(f"{where}.new_jobs[{g}].jobs[{j}].id",
                                        "a new job needs an id no other job has")
                seen_ids.add(job["id"])
                starts[len(jobs)] = group.from_period
                jobs.append(job)
                display.append(job["id"])
        start_of[scenario.name] = starts
        if scenario.demand.jobs_by_period is not None:
            per_period = []
            for t, period_jobs in enumerate(scenario.demand.jobs_by_period):
                ids_here: set[str] = set()
                first = len(jobs)
                for j, job in enumerate(period_jobs):
                    name = job.get("id") if isinstance(job, dict) else None
                    if not isinstance(name, str) or name in ids_here:
                        raise InstanceError(f"{where}.jobs_by_period[{t}][{j}].id",
                                            "each job of a period needs an id of its own")
                    ids_here.add(name)
                    jobs.append({**job, "id": f"{name}@{s}.{t}"})
                    display.append(name)
                per_period.append(np.arange(first, len(jobs), dtype=int))
            stated[scenario.name] = per_period
    data["jobs"] = jobs
    try:
        pool = AllocationInstance.model_validate(data)
    except InstanceError as error:
        raise InstanceError(f"demand ({error.path})", error.reason) from None
    return pool, start_of, stated, display


def _period_targets(spec: HorizonSpec, period: int) -> list[Target]:
    field = f"targets_by_period.{period + 1}" if (period + 1) in spec.targets_by_period else "targets"
    try:
        return parse_targets(spec.targets_of(period + 1), "allocation")
    except InstanceError as error:
        raise InstanceError(field, error.reason) from None


def _frontier_best(arrays: AllocationArrays, metric: str) -> float | None:
    """The best ``metric`` any allocation of ``arrays``'s cluster reaches (None: no such LP)."""
    from fleetplan.models.allocation.sizing import FRONTIER_METRICS, build_frontier_lp
    from fleetplan.planning.sizing.mip import solve_sizing_mip

    if metric not in FRONTIER_METRICS:
        return None
    lp, value = build_frontier_lp(arrays, metric)
    outcome = solve_sizing_mip(lp, 60.0, 1, 0, 1e-9)
    return None if outcome["objective"] is None else value(outcome["objective"])
