"""Seeded generator of Gavel-like ``allocation`` instances (Gavel §7.1, §7.4).

Jobs are drawn from the measured throughput table bundled with the package; the cluster has
``jobs / 4`` workers of each type, as in Gavel's scalability experiment (§7.4). What the
Table 1 policies need is attached to every job:

* ``steps_left`` and ``time_elapsed`` — a job's total duration on its fastest type is drawn
  heavy-tailed, 10^U(1.5, 3) minutes for 80% of jobs and 10^U(3, 4) for the rest (the shape of
  the durations in Gavel's simulated traces); a uniform fraction of it is already done, and it
  took between 1 and 3 times as long as it would have alone (the job was sharing);
* ``slo_hours`` for a fraction ``slo_fraction`` of the jobs: between 1 and 3 times the time
  the job needs under the isolated 1/n allocation, so that allocation always meets every SLO
  (Gavel's sharing-incentive argument, §4.4) and min-cost-slo is feasible;
* ``cost_per_hour`` of each type — on-demand cloud prices per GPU-hour by default: V100 3.06
  (AWS p3.2xlarge), K80 0.90 (AWS p2.xlarge), P100 1.46 (Google Cloud; AWS rents no P100);
* with ``space_sharing``, the measured colocated throughputs of every pair of single-GPU job
  types present (Gavel §3.1, Figure 15);
* with ``unconsolidated_fraction`` > 0, placement sensitivity (§3.1): that share of each type's
  workers sits on separate servers, as a worker type ``<type>_unconsolidated`` on which
  multi-GPU jobs run at their measured unconsolidated throughput;
* with ``throughput_noise`` > 0, every throughput is scaled by its own uniform factor in
  [1 - noise, 1 + noise]: jobs of one model differ, as measured throughputs do, and no two jobs
  are identical (the 26 job types of a Gavel trace otherwise merge a 16,384-job LP to 26 rows).

The module returns plain data; :func:`fleetplan.instances.allocation.generate` validates it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
from pydantic import Field

from fleetplan.instances.base import InstanceError, StrictModel
from fleetplan.instances.resources import Estimate

KIND = "allocation"
DEFAULT_COST_PER_HOUR = {"v100": 3.06, "p100": 1.46, "k80": 0.90}


class AllocationParams(StrictModel):
    """Parameters of :func:`~fleetplan.instances.allocation.generate`. Defaults follow Gavel
    §7.1 and §7.4."""

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
    slo_fraction: float = Field(default=0.2, ge=0, le=1, description="share of jobs with an SLO")
    cost_per_hour: dict[str, float] | None = Field(
        default=None, description="price per worker-hour of each type (default: on-demand cloud prices)")
    space_sharing: bool = Field(default=False, description="attach the measured colocated throughputs")
    unconsolidated_fraction: float = Field(
        default=0.0, ge=0, lt=1, description="share of each type's workers on separate servers "
        "(placement sensitivity): added as worker types '<type>_unconsolidated'")
    throughput_noise: float = Field(
        default=0.0, ge=0, lt=1, description="multiply each job's throughput on each type by an "
        "independent factor drawn uniformly from [1 - noise, 1 + noise], as per-job measurements "
        "would differ: every job becomes distinct, so merging identical jobs cannot shrink the LP "
        "(e.g. 0.1 for +-10%)")
    priority_share: float = Field(default=0.0, ge=0, le=1, description="share of jobs given `priority_weight` "
                                  "(the rest keep weight 1): Gavel's priorities")
    priority_weight: float = Field(default=4.0, gt=0, le=1e6, description="the weight of those jobs")
    unusable_share: float = Field(
        default=0.0, ge=0, lt=1, description="share of (job, worker type) pairs on which the job cannot run "
        "(throughput 0); every job keeps at least one type it can use")
    huge_job: bool = Field(default=False, description="make the first job as large as the cluster allows (its "
                                                      "scale factor the largest power of two no type's count is below)")


def estimate(params: AllocationParams) -> Estimate:
    """Memory and time to generate and save ``params``' instance (measured: 2.9 kB and 37 us
    per job at 10^6 jobs, 1.1 kB per entity; :mod:`fleetplan.instances.resources`)."""
    return Estimate(memory_bytes=2_900.0 * params.jobs + 1_100.0 * params.entities,
                    seconds=37e-6 * params.jobs + 7e-6 * params.entities,
                    what=f"jobs = {params.jobs:,}" + (f", entities = {params.entities:,}" if params.entities else ""),
                    sizes=("jobs", "entities"))


@cache
def gavel_throughputs() -> dict:
    """The measured throughput table of Gavel (Table 2), bundled with the package (MIT)."""
    text = resources.files("fleetplan").joinpath("data/gavel_throughputs.json").read_text("utf-8")
    return json.loads(text)


def generated_instance_data(params: AllocationParams, seed: int) -> dict[str, Any]:
    """The instance as plain JSON-able data (see the module docstring)."""
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
    unconsolidated = int(round(workers * params.unconsolidated_fraction))
    consolidated = workers - unconsolidated
    # A job bigger than every type's worker count could never run: shrink it to fit.
    scale = np.minimum(scale, _largest_power_of_two_at_most(max(consolidated, unconsolidated, 1)))
    scale = np.array([s if s in by_scale else 1 for s in scale])
    entity_ids = [f"entity{e}" for e in range(params.entities)]
    chosen = []
    for index in range(params.jobs):
        choices = by_scale[int(scale[index])]
        chosen.append(choices[int(rng.integers(len(choices)))])
        # Keep the draws of the original generator in order: entity after job type.
        if entity_ids:
            chosen[-1] = (chosen[-1], entity_ids[int(rng.integers(len(entity_ids)))])
        else:
            chosen[-1] = (chosen[-1], None)

    types = list(params.worker_types)
    counts = {t: consolidated for t in types}
    if unconsolidated:
        for t in params.worker_types:
            counts[f"{t}_unconsolidated"] = unconsolidated
            types.append(f"{t}_unconsolidated")
    prices = DEFAULT_COST_PER_HOUR if params.cost_per_hour is None else params.cost_per_hour
    for name, price in prices.items():
        if not (price >= 0 and np.isfinite(price)):
            raise InstanceError(f"cost_per_hour.{name}", "must be a finite number >= 0")
    cost = {t: float(prices.get(t.removesuffix("_unconsolidated"), 0.0)) for t in types}

    throughput = np.array([[entry["throughput"].get(t, 0.0) for t in types] for entry, _ in chosen])
    throughput = throughput.reshape(params.jobs, len(types))
    if params.throughput_noise > 0:
        # A stream of its own, so the other draws (and every noise-free instance) stay as they were.
        noise = np.random.default_rng([seed, 2]).uniform(1.0 - params.throughput_noise,
                                                         1.0 + params.throughput_noise, throughput.shape)
        throughput = throughput * noise
    weights, throughput, scale = _adversarial(params, throughput, scale, min(counts.values()), seed)
    steps, elapsed, slo = _progress(throughput, scale, np.array([counts[t] for t in types], dtype=float),
                                    params.slo_fraction, np.random.default_rng([seed, 1]))
    jobs = []
    for index, (entry, entity) in enumerate(chosen):
        job = {
            "id": f"job{index}",
            "job_type": entry["job_type"],
            "scale_factor": int(scale[index]),
            "throughput": {t: float(throughput[index, k]) for k, t in enumerate(types)},
            "steps_left": float(steps[index]),
            "time_elapsed": float(elapsed[index]),
        }
        if weights[index] != 1.0:
            job["weight"] = float(weights[index])
        if entity is not None:
            job["entity"] = entity
        if np.isfinite(slo[index]):
            job["slo_hours"] = float(slo[index])
        jobs.append(job)
    data: dict[str, Any] = {
        "kind": KIND,
        "name": f"gavel-{params.jobs}jobs-seed{seed}",
        "worker_types": [{"name": t, "count": counts[t], "cost_per_hour": cost[t]} for t in types],
        "jobs": jobs,
        "entities": [{"id": e, "weight": float(w + 1)} for w, e in enumerate(entity_ids)],
    }
    if params.space_sharing:
        data["colocations"] = colocations_for({entry["job_type"] for entry, _ in chosen if entry["scale_factor"] == 1},
                                              params.worker_types)
    return data


def _adversarial(params: AllocationParams, throughput: np.ndarray, scale: np.ndarray, smallest_count: int,
                 seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Priorities, unusable types and one huge job, each drawn from a stream of its own so that
    every instance without them stays as it was."""
    jobs = len(scale)
    weights = np.ones(jobs)
    if params.priority_share > 0:
        chosen = np.random.default_rng([seed, 3]).choice(jobs, size=int(round(params.priority_share * jobs)),
                                                         replace=False)
        weights[chosen] = params.priority_weight
    if params.unusable_share > 0 and throughput.shape[1] > 1:
        unusable = np.random.default_rng([seed, 4]).random(throughput.shape) < params.unusable_share
        # a job every type of which was drawn keeps its fastest
        everything = unusable.all(axis=1)
        unusable[everything, throughput[everything].argmax(axis=1)] = False
        throughput = np.where(unusable, 0.0, throughput)
    if params.huge_job and jobs:
        scale = scale.copy()
        scale[0] = _largest_power_of_two_at_most(max(smallest_count, 1))
    return weights, throughput, scale


def _progress(throughput: np.ndarray, scale: np.ndarray, num_workers: np.ndarray, slo_fraction: float,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_jobs = len(scale)
    long_job = rng.random(n_jobs) < 0.2
    exponent = np.where(long_job, rng.uniform(3.0, 4.0, n_jobs), rng.uniform(1.5, 3.0, n_jobs))
    duration_s = 60.0 * 10.0 ** exponent
    done = rng.uniform(0.0, 0.9, n_jobs)
    runnable = num_workers[None, :] >= scale[:, None]
    fastest = np.where(runnable, throughput, 0.0).max(axis=1)
    steps = np.maximum(1.0, np.round((1.0 - done) * duration_s * fastest))
    elapsed = done * duration_s * rng.uniform(1.0, 3.0, n_jobs)
    # Isolated allocation (1/n of every worker), as AllocationArrays.isolated_throughput.
    fractions = num_workers[None, :] * runnable / (n_jobs * scale[:, None])
    fractions = fractions / np.maximum(fractions.sum(axis=1, keepdims=True), 1.0)
    isolated = (throughput * fractions).sum(axis=1)
    has_slo = rng.random(n_jobs) < slo_fraction
    slo_hours = steps / isolated * rng.uniform(1.0, 3.0, n_jobs) / 3600.0
    return steps, elapsed, np.where(has_slo, slo_hours, np.inf)


def colocations_for(job_types: set[str], worker_types: list[str]) -> list[dict[str, Any]]:
    """The measured colocation entries among ``job_types`` on ``worker_types`` (single-GPU)."""
    merged: dict[tuple[str, str], dict[str, list[float]]] = {}
    for row in gavel_throughputs()["colocated"]:
        if row["a"] in job_types and row["b"] in job_types and row["worker_type"] in worker_types:
            merged.setdefault((row["a"], row["b"]), {})[row["worker_type"]] = [float(v) for v in row["throughput"]]
    return [{"job_types": [a, b], "scale_factor": 1, "throughput": throughput}
            for (a, b), throughput in sorted(merged.items())]


def _largest_power_of_two_at_most(value: int) -> int:
    return 1 << (int(value).bit_length() - 1)
