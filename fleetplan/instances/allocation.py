"""The ``allocation`` kind: Gavel's heterogeneity-aware allocation of accelerator time (Gavel §3.1, §4).

A cluster has a number of workers of each accelerator type; each job has a throughput on every
type it can run on, a scale factor (how many workers it uses at once) and a weight. A plan is the
allocation matrix X: X[m, j] is the fraction of wall-clock time job m spends on type j.

Constraints (Gavel §3.1, eqs. 1-3)::

    0 <= X[m, j] <= 1,   sum_j X[m, j] <= 1,   sum_m X[m, j] * scale_factor[m] <= num_workers[j]

The effective throughput of job m is ``sum_j T[m, j] * X[m, j]``; it is *normalized* against
``X_equal`` (Gavel §4.1), the allocation giving the job an equal time share of every worker,
``X_equal[m, j] = num_workers[j] / sum_k num_workers[k]``.

Example
-------
>>> from fleetplan.instances.allocation import AllocationInstance
>>> instance = AllocationInstance.model_validate({
...     "kind": "allocation",
...     "worker_types": [{"name": "v100", "count": 1}, {"name": "k80", "count": 1}],
...     "jobs": [{"id": "a", "throughput": {"v100": 4.0, "k80": 1.0}}]})
>>> instance.arrays().throughput.tolist()
[[4.0, 1.0]]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

import numpy as np
from pydantic import Field, PrivateAttr, model_validator

from fleetplan.instances.base import (
    Evaluation,
    InstanceBase,
    InstanceError,
    PlanBase,
    StrictModel,
    Violation,
)

KIND = "allocation"
# Relative slack when judging a plan: LP solvers return solutions feasible to ~1e-7.
FEASIBILITY_TOLERANCE = 1e-6


class WorkerType(StrictModel):
    name: str = Field(min_length=1)
    count: int = Field(ge=0, description="number of workers (accelerators) of this type")
    cost_per_hour: float = Field(default=0.0, ge=0, description="price of one worker-hour")


class Job(StrictModel):
    id: str = Field(min_length=1)
    throughput: dict[str, float] = Field(
        description="training iterations per second on each worker type; a type left out "
        "(or 0) means the job cannot run there"
    )
    scale_factor: int = Field(default=1, ge=1, description="workers the job uses at once")
    weight: float = Field(default=1.0, gt=0, description="fairness weight (priority)")
    job_type: str | None = Field(default=None, description="model name, informational")
    entity: str | None = Field(default=None, description="owning entity (user, team)")
    steps_left: float | None = Field(default=None, gt=0, description="training steps to go")
    arrival_time: float = Field(default=0.0, ge=0, description="seconds since the trace start")

    @model_validator(mode="after")
    def _throughputs_non_negative(self) -> Job:
        for name, value in self.throughput.items():
            if value < 0:
                raise InstanceError(f"throughput.{name}", "must be >= 0")
        return self


class Entity(StrictModel):
    id: str = Field(min_length=1)
    weight: float = Field(default=1.0, gt=0)
    policy: Literal["fairness", "fifo"] = "fairness"


@dataclass(frozen=True)
class AllocationArrays:
    """Column-wise view of an instance: what the models and the evaluator compute with."""

    job_ids: list[str]
    worker_types: list[str]
    throughput: np.ndarray  # (jobs, types), 0 where a job cannot run
    scale_factor: np.ndarray  # (jobs,)
    weight: np.ndarray  # (jobs,)
    num_workers: np.ndarray  # (types,)
    cost_per_hour: np.ndarray  # (types,)

    @property
    def equal_share_throughput(self) -> np.ndarray:
        """throughput(m, X_equal) of Gavel §4.1: every worker's time shared equally."""
        share = self.num_workers / self.num_workers.sum()
        return self.throughput @ share

    @property
    def isolated_throughput(self) -> np.ndarray:
        """Throughput under the isolated allocation: each of n jobs gets 1/n of every worker's
        time (divided by its scale factor, since it holds that many workers at once)."""
        n_jobs = len(self.job_ids)
        fractions = self.num_workers[None, :] / (n_jobs * self.scale_factor[:, None])
        row_sum = fractions.sum(axis=1, keepdims=True)
        fractions = fractions / np.maximum(row_sum, 1.0)
        return (self.throughput * fractions).sum(axis=1)


class AllocationInstance(InstanceBase):
    """A cluster of heterogeneous accelerators and the jobs sharing it."""

    kind: Literal["allocation"] = KIND
    worker_types: list[WorkerType] = Field(min_length=1)
    jobs: list[Job]
    entities: list[Entity] = Field(default_factory=list)

    _arrays: AllocationArrays | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check_references(self) -> AllocationInstance:
        if not self.jobs:
            raise InstanceError("jobs", "must list at least one job")
        type_names = _unique([t.name for t in self.worker_types], "worker_types", "name")
        if sum(t.count for t in self.worker_types) == 0:
            raise InstanceError("worker_types", "the cluster has no workers (every count is 0)")
        counts = {t.name: t.count for t in self.worker_types}
        _unique([job.id for job in self.jobs], "jobs", "id")
        entity_ids = set(_unique([e.id for e in self.entities], "entities", "id"))
        for index, job in enumerate(self.jobs):
            for name in job.throughput:
                if name not in type_names:
                    raise InstanceError(
                        f"jobs[{index}].throughput.{name}", f"unknown worker type '{name}'"
                    )
            runnable = [
                name for name, value in job.throughput.items()
                if value > 0 and counts[name] >= job.scale_factor
            ]
            if not runnable:
                raise InstanceError(
                    f"jobs[{index}]",
                    f"job '{job.id}' can run on no worker type (needs a positive throughput on a "
                    f"type with at least {job.scale_factor} workers)",
                )
            if job.entity is not None and job.entity not in entity_ids:
                raise InstanceError(f"jobs[{index}].entity", f"unknown entity '{job.entity}'")
        return self

    def arrays(self) -> AllocationArrays:
        """The instance as numpy arrays (computed once)."""
        if self._arrays is None:
            types = [t.name for t in self.worker_types]
            throughput = np.array(
                [[job.throughput.get(name, 0.0) for name in types] for job in self.jobs],
                dtype=float,
            ).reshape(len(self.jobs), len(types))
            self._arrays = AllocationArrays(
                job_ids=[job.id for job in self.jobs],
                worker_types=types,
                throughput=throughput,
                scale_factor=np.array([job.scale_factor for job in self.jobs], dtype=float),
                weight=np.array([job.weight for job in self.jobs], dtype=float),
                num_workers=np.array([t.count for t in self.worker_types], dtype=float),
                cost_per_hour=np.array([t.cost_per_hour for t in self.worker_types], dtype=float),
            )
        return self._arrays


def _unique(values: list[str], field: str, key: str) -> list[str]:
    seen: set[str] = set()
    for index, value in enumerate(values):
        if value in seen:
            raise InstanceError(f"{field}[{index}].{key}", f"duplicate {key} '{value}'")
        seen.add(value)
    return values


class AllocationPlan(PlanBase):
    """Gavel's allocation matrix: ``allocation[m][j]`` is job m's time fraction on type j."""

    kind: Literal["allocation"] = KIND
    policy: str = "max_min_fairness"
    job_ids: list[str]
    worker_types: list[str]
    allocation: list[list[float]]

    @model_validator(mode="after")
    def _check_shape(self) -> AllocationPlan:
        if len(self.allocation) != len(self.job_ids):
            raise InstanceError("allocation", f"has {len(self.allocation)} rows for {len(self.job_ids)} jobs")
        for index, row in enumerate(self.allocation):
            if len(row) != len(self.worker_types):
                raise InstanceError(
                    f"allocation[{index}]", f"has {len(row)} entries for {len(self.worker_types)} worker types"
                )
        return self

    @classmethod
    def from_matrix(
        cls, instance: AllocationInstance, matrix: np.ndarray, *, solver: str = "",
        options: dict | None = None, policy: str = "max_min_fairness",
    ) -> AllocationPlan:
        arrays = instance.arrays()
        # Solvers return tiny negative values (-1e-12) for zeros; a plan file should not.
        clean = np.where(np.abs(matrix) < 1e-12, 0.0, matrix)
        return cls.model_construct(
            kind=KIND, schema_version=1, solver=solver, options=dict(options or {}), policy=policy,
            job_ids=list(arrays.job_ids), worker_types=list(arrays.worker_types),
            allocation=clean.tolist(),
        )

    def matrix(self, instance: AllocationInstance) -> np.ndarray:
        """The allocation as a (jobs, types) array ordered like the instance."""
        arrays = instance.arrays()
        if sorted(self.job_ids) != sorted(arrays.job_ids):
            missing = sorted(set(arrays.job_ids) - set(self.job_ids))
            extra = sorted(set(self.job_ids) - set(arrays.job_ids))
            what = f"missing jobs {missing[:3]}" if missing else f"unknown jobs {extra[:3]}"
            raise InstanceError("job_ids", f"plan does not match the instance: {what}")
        if sorted(self.worker_types) != sorted(arrays.worker_types):
            raise InstanceError("worker_types", "plan does not match the instance's worker types")
        raw = np.asarray(self.allocation, dtype=float).reshape(len(self.job_ids), len(self.worker_types))
        row_of = {job: i for i, job in enumerate(self.job_ids)}
        col_of = {name: j for j, name in enumerate(self.worker_types)}
        rows = [row_of[job] for job in arrays.job_ids]
        cols = [col_of[name] for name in arrays.worker_types]
        return raw[np.ix_(rows, cols)]


# --- the judge ---------------------------------------------------------------------------

def effective_throughput(instance: AllocationInstance, matrix: np.ndarray) -> np.ndarray:
    """throughput(m, X) = sum_j T[m, j] X[m, j] (Gavel §3.1)."""
    return (instance.arrays().throughput * matrix).sum(axis=1)


def normalized_throughput(instance: AllocationInstance, matrix: np.ndarray) -> np.ndarray:
    """throughput(m, X) / throughput(m, X_equal) (Gavel §4.1)."""
    arrays = instance.arrays()
    return effective_throughput(instance, matrix) / arrays.equal_share_throughput


def jain_index(values: np.ndarray) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one gets all."""
    square_sum = float(np.square(values).sum())
    if square_sum == 0:
        return 1.0
    return float(values.sum() ** 2 / (len(values) * square_sum))


def _max_min_fairness_objective(instance: AllocationInstance, matrix: np.ndarray) -> dict[str, float]:
    """min_m normalized_throughput(m) * scale_factor(m) / weight(m) (Gavel §4.1, with scale factors)."""
    arrays = instance.arrays()
    scores = normalized_throughput(instance, matrix) * arrays.scale_factor / arrays.weight
    return {"min_weighted_normalized_throughput": float(scores.min())}


@dataclass(frozen=True)
class PolicyObjective:
    """How the judge scores a plan for one policy: the direction and the terms (summed)."""

    sense: Literal["min", "max"]
    terms: object  # Callable[[AllocationInstance, np.ndarray], dict[str, float]]


POLICY_OBJECTIVES: dict[str, PolicyObjective] = {
    "max_min_fairness": PolicyObjective("max", _max_min_fairness_objective),
}


def _violations(instance: AllocationInstance, matrix: np.ndarray) -> list[Violation]:
    arrays = instance.arrays()
    tol = FEASIBILITY_TOLERANCE
    found: list[Violation] = []
    negative = np.argwhere(matrix < -tol)
    for m, j in negative[:20]:
        found.append(Violation(constraint="non_negative", where=f"{arrays.job_ids[m]}/{arrays.worker_types[j]}",
                               amount=float(-matrix[m, j]), message="time fraction below 0"))
    cannot_run = np.argwhere((matrix > tol) & (arrays.throughput <= 0))
    for m, j in cannot_run[:20]:
        found.append(Violation(constraint="cannot_run", where=f"{arrays.job_ids[m]}/{arrays.worker_types[j]}",
                               amount=float(matrix[m, j]), message="time on a type the job cannot run on"))
    row_sum = matrix.sum(axis=1)
    for m in np.flatnonzero(row_sum > 1 + tol)[:20]:
        found.append(Violation(constraint="job_time", where=arrays.job_ids[m], amount=float(row_sum[m] - 1),
                               message="time fractions sum above 1"))
    used = (matrix * arrays.scale_factor[:, None]).sum(axis=0)
    for j in np.flatnonzero(used > arrays.num_workers * (1 + tol) + tol):
        found.append(Violation(constraint="workers", where=arrays.worker_types[j],
                               amount=float(used[j] - arrays.num_workers[j]),
                               message=f"{used[j]:.6g} workers used of {arrays.num_workers[j]:g}"))
    return found


def evaluate(instance: AllocationInstance, plan: AllocationPlan) -> Evaluation:
    """Judge an allocation plan: the policy's objective, every violated constraint, and metrics.

    Metrics: total and mean effective throughput, min/mean normalized throughput (against
    X_equal), Jain's index of normalized throughput, the speed-up over the isolated 1/n
    allocation, and the utilization of each worker type.
    """
    if plan.policy not in POLICY_OBJECTIVES:
        raise InstanceError("policy", f"unknown policy '{plan.policy}' (known: {', '.join(sorted(POLICY_OBJECTIVES))})")
    matrix = plan.matrix(instance)
    arrays = instance.arrays()
    scoring = POLICY_OBJECTIVES[plan.policy]
    terms = scoring.terms(instance, matrix)
    throughput = effective_throughput(instance, matrix)
    normalized = throughput / arrays.equal_share_throughput
    speedup = throughput / arrays.isolated_throughput
    used = (matrix * arrays.scale_factor[:, None]).sum(axis=0)
    metrics = {
        "total_throughput": float(throughput.sum()),
        "min_normalized_throughput": float(normalized.min()),
        "mean_normalized_throughput": float(normalized.mean()),
        "jain_index": jain_index(normalized),
        "min_speedup_over_isolated": float(speedup.min()),
        "mean_speedup_over_isolated": float(speedup.mean()),
    }
    for name, workers, busy in zip(arrays.worker_types, arrays.num_workers, used, strict=True):
        metrics[f"utilization_{name}"] = float(busy / workers) if workers else 0.0
    return Evaluation(
        kind=KIND, objective=float(sum(terms.values())), sense=scoring.sense, terms=terms,
        violations=_violations(instance, matrix), metrics=metrics,
    )


# --- the generator ------------------------------------------------------------------------

class AllocationParams(StrictModel):
    """Parameters of :func:`generate`. Defaults follow Gavel §7.1 and §7.4."""

    jobs: int = Field(default=32, ge=1, le=10_000_000)
    workers_per_type: int | None = Field(
        default=None, ge=1, description="workers of each type; default jobs/4 as in Gavel §7.4"
    )
    worker_types: list[str] = Field(default_factory=lambda: ["v100", "p100", "k80"], min_length=1)
    multi_gpu: bool = Field(
        default=True, description="scale factors 1 (70%), 2 or 4 (25%), 8 (5%) as in Gavel §7.1; "
        "False makes every job single-GPU"
    )
    entities: int = Field(default=0, ge=0, description="spread jobs over this many weighted entities")


@cache
def gavel_throughputs() -> dict:
    """The measured throughput table of Gavel (Table 2), bundled with the package (MIT)."""
    text = resources.files("fleetplan").joinpath("data/gavel_throughputs.json").read_text("utf-8")
    return json.loads(text)


def generate(params: AllocationParams | None = None, seed: int = 0) -> AllocationInstance:
    """A seeded Gavel-like instance: jobs drawn from the measured throughput table.

    >>> instance = generate(AllocationParams(jobs=8), seed=1)
    >>> len(instance.jobs), [t.count for t in instance.worker_types]
    (8, [8, 8, 8])
    """
    params = params or AllocationParams()
    rng = np.random.default_rng(seed)
    table = gavel_throughputs()
    by_scale: dict[int, list[dict]] = {}
    for entry in table["jobs"]:
        if all(entry["throughput"].get(t, 0) > 0 for t in params.worker_types):
            by_scale.setdefault(entry["scale_factor"], []).append(entry)
    if 1 not in by_scale:
        raise InstanceError("worker_types", "no measured job runs on all of these worker types")
    workers = params.workers_per_type or max(1, params.jobs // 4)
    if params.multi_gpu:
        draw = rng.random(params.jobs)
        small = rng.choice([2, 4], size=params.jobs)
        scale = np.where(draw < 0.70, 1, np.where(draw < 0.95, small, 8))
    else:
        scale = np.ones(params.jobs, dtype=int)
    # A job bigger than every type's worker count could never run: shrink it to fit.
    scale = np.minimum(scale, _largest_power_of_two_at_most(workers))
    scale = np.array([s if s in by_scale else 1 for s in scale])
    entity_ids = [f"entity{e}" for e in range(params.entities)]
    jobs = []
    for index in range(params.jobs):
        choices = by_scale[int(scale[index])]
        entry = choices[int(rng.integers(len(choices)))]
        jobs.append({
            "id": f"job{index}",
            "job_type": entry["job_type"],
            "scale_factor": int(scale[index]),
            "throughput": {t: float(entry["throughput"][t]) for t in params.worker_types},
            **({"entity": entity_ids[int(rng.integers(len(entity_ids)))]} if entity_ids else {}),
        })
    return AllocationInstance.model_validate({
        "kind": KIND,
        "name": f"gavel-{params.jobs}jobs-seed{seed}",
        "worker_types": [{"name": t, "count": workers} for t in params.worker_types],
        "jobs": jobs,
        "entities": [{"id": e, "weight": float(w + 1)} for w, e in enumerate(entity_ids)],
    })


def _largest_power_of_two_at_most(value: int) -> int:
    return 1 << (int(value).bit_length() - 1)


# The water-filling policies (§4.3) live in their own module; they extend the judge here.
from fleetplan.instances.allocation_hierarchical import with_water_filling_policies  # noqa: E402

evaluate = with_water_filling_policies(evaluate)
