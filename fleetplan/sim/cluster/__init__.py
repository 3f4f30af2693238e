"""Cluster simulator: deep-learning training jobs on a heterogeneous GPU cluster, scheduled by
Gavel's round-based mechanism (Gavel §5), Astraea's fair lease scheduler (Astraea §5) or the
baselines they are compared with (FIFO, YARN-CS, Tiresias-LAS, Themis FTF, agnostic LAS).

A plain deterministic function of (scenario, scheduler, seed)::

    from fleetplan import sim
    result = sim.run("cluster", {"generate": "gavel", "jobs": 50, "rate_per_hour": 4},
                     scheduler="gavel", seed=1)
    result.metrics["avg_jct_s"]

:func:`run_cluster` returns the per-job arrays too (for the plots in
:mod:`fleetplan.sim.cluster.metrics`). See docs/cluster-sim.md.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Literal

from pydantic import Field, model_validator

from fleetplan.errors import clip, excerpt
from fleetplan.instances.base import InstanceError, StrictModel
from fleetplan.instances.resources import Estimate
from fleetplan.sim.cluster.engine import Sim
from fleetplan.sim.cluster.gavel import GavelAgnosticScheduler, GavelIdealScheduler, GavelScheduler
from fleetplan.sim.cluster.metrics import ClusterRun, collect
from fleetplan.sim.cluster.schedulers import (
    AstraeaEq8Scheduler,
    AstraeaScheduler,
    FifoScheduler,
    ThemisScheduler,
    TiresiasScheduler,
    YarnCapacityScheduler,
)
from fleetplan.sim.cluster.traces import (
    ASTRAEA_DEFAULTS,
    MAX_TRACE_SECONDS,
    Trace,
    astraea_trace,
    gavel_trace,
    read_csv_trace,
)
from fleetplan.sim.engine import SimResult, SimulatorSpec

SCHEDULERS = {cls.name: cls for cls in (
    GavelScheduler, GavelIdealScheduler, GavelAgnosticScheduler, AstraeaScheduler, AstraeaEq8Scheduler,
    FifoScheduler, YarnCapacityScheduler, TiresiasScheduler, ThemisScheduler)}
GAVEL_CLUSTER = {"v100": 36, "p100": 36, "k80": 36}  # Gavel §7.1's simulated cluster
# What the simulator can be asked: time steps of at least a second (a round
# of 1e-300 s never ends), clusters and traces it can hold in memory (the memory a size needs is
# estimated before it runs: :func:`estimate`).
MIN_STEP_S = 1.0
MAX_CLUSTER_GPUS = 1 << 24
MAX_JOBS = 100_000_000


class ClusterScenario(StrictModel):
    """What to simulate. Defaults: Gavel §7.1 (108 GPUs, 6-minute rounds) for Gavel traces and
    CSV files, Astraea §6.1.3 (10 s interval, 900 s leases, 800 / 1680 GPUs) for Venus/Philly."""

    trace: str | None = Field(default=None, description="CSV trace file (see traces.py); overrides generate")
    generate: Literal["gavel", "venus", "philly"] = "gavel"
    jobs: int | None = Field(default=None, ge=1, le=MAX_JOBS, description="generated jobs (gavel: 100; venus/philly: "
                                                             "the paper's two-week counts)")
    rate_per_hour: float | None = Field(default=None, gt=0, description="gavel: Poisson arrivals per hour; "
                                                                        "None: a static trace")
    multi_gpu: bool = Field(default=True, description="gavel: 70/25/5 scale-factor mix, else all single-GPU")
    tenants: int | None = Field(default=None, ge=1, description="venus/philly tenants (16 / 15)")
    span_days: float = Field(default=14.0, gt=0, le=MAX_TRACE_SECONDS / 86400.0, description="venus/philly: days over which jobs arrive")
    duration_gpu_correlation: float | None = Field(default=None, ge=-1, le=1, description=(
        "venus/philly: rank correlation of running time with GPU demand (None: calibrated, venus 0.15, "
        "philly 0; 0: independent)"))
    cluster: dict[str, int] | None = Field(default=None, description="GPUs per type")
    server_size: int = Field(default=8, ge=1, le=1024, description="GPUs per server (4 or 8)")
    round_s: float = Field(default=360.0, ge=MIN_STEP_S, description="Gavel round length")
    interval_s: float = Field(default=10.0, ge=MIN_STEP_S, description="scheduling interval of the other schedulers")
    lease_s: float = Field(default=900.0, ge=MIN_STEP_S, description="lease term of preemptive schedulers")
    checkpoint_s: float = Field(default=10.0, ge=0, le=MAX_TRACE_SECONDS, description="progress lost when a preempted job resumes")
    policy: str = Field(default="max-min-fairness", description="Gavel's allocation policy (a solver)")
    quotas: dict[str, float] | None = Field(default=None, description="GPU quota per tenant name")
    strict_consolidation: bool = Field(default=False, description="never spread a job over extra servers")
    themis_error: float = Field(default=0.1, ge=0, description="sigma of Themis' lognormal time estimate error")
    tiresias_thresholds: list[float] = Field(default_factory=lambda: [3250.0, 7200.0],
                                             description="2D-LAS queue thresholds, GPU-seconds (Tiresias's "
                                                         "simulator: 3,250 and 7,200)")
    tiresias_order: Literal["tiresias", "submit"] = Field(
        default="tiresias", description="order inside a Tiresias queue: tiresias (new and demoted jobs at the "
                                        "tail, waiting jobs behind running ones after every pass) or submit "
                                        "(submit time)")
    window_s: float = Field(default=3600.0, ge=MIN_STEP_S, description="window of the per-tenant LTGF series")
    steady_state: tuple[float, float] = Field(default=(0.0, 1.0), description="job-index fractions of the "
                                                                               "steady-state JCT window")
    max_time_s: float | None = Field(default=None, gt=0, le=MAX_TRACE_SECONDS, description="stop the simulation here")

    @model_validator(mode="after")
    def _check(self) -> ClusterScenario:
        lo, hi = self.steady_state
        if not 0 <= lo < hi <= 1:
            raise InstanceError("steady_state", "must be fractions 0 <= lo < hi <= 1")
        if self.cluster is not None:
            if not self.cluster or any(v < 0 for v in self.cluster.values()) or sum(self.cluster.values()) == 0:
                raise InstanceError("cluster", "needs at least one GPU and no negative counts")
            if sum(self.cluster.values()) > MAX_CLUSTER_GPUS:
                raise InstanceError("cluster", f"at most {MAX_CLUSTER_GPUS:,} GPUs in all")
        for name, quota in (self.quotas or {}).items():
            if not 0 <= quota <= MAX_CLUSTER_GPUS:
                raise InstanceError(f"quotas.{clip(name)}", f"must be a number of GPUs in [0, {MAX_CLUSTER_GPUS:,}], "
                                                            f"got {quota:g}")
        thresholds = self.tiresias_thresholds
        if any(not 0 < value <= 1e30 for value in thresholds) or thresholds != sorted(set(thresholds)):
            raise InstanceError("tiresias_thresholds", "must be positive GPU-seconds in increasing order, got "
                                                       f"{excerpt(thresholds)}")
        return self


def build_trace(scenario: ClusterScenario, seed: int) -> tuple[Trace, ClusterScenario]:
    """The trace of a scenario and the scenario with its cluster filled in."""
    if scenario.trace is not None:
        cluster = scenario.cluster or GAVEL_CLUSTER
        trace = read_csv_trace(scenario.trace, worker_types=list(cluster))
    elif scenario.generate == "gavel":
        cluster = scenario.cluster or GAVEL_CLUSTER
        trace = gavel_trace(scenario.jobs or 100, seed, scenario.rate_per_hour, scenario.multi_gpu,
                            tuple(cluster), max_gpus=min(c for c in cluster.values() if c > 0))
    else:
        shape = scenario.generate
        gpus = sum(scenario.cluster.values()) if scenario.cluster else ASTRAEA_DEFAULTS[shape]["gpus"]
        cluster = scenario.cluster or {"gpu": gpus}
        if list(cluster) != ["gpu"]:
            raise InstanceError("cluster", f"{shape} traces run on one GPU type named 'gpu'")
        trace = astraea_trace(shape, scenario.jobs, seed, gpus, scenario.tenants, scenario.span_days * 86400.0,
                              scenario.duration_gpu_correlation)
    _check_fits(trace, cluster, scenario)
    return trace, scenario.model_copy(update={"cluster": dict(cluster)})


def _check_fits(trace: Trace, cluster: dict[str, int], scenario: ClusterScenario) -> None:
    import numpy as np

    counts = np.array([cluster.get(t, 0) for t in trace.worker_types])
    fits = ((trace.throughput > 0) & (counts[None, :] >= trace.gpus[:, None])).any(axis=1)
    if not fits.all():
        m = int(np.flatnonzero(~fits)[0])
        where = f"{scenario.trace}: row {m + 2}, column 'gpus'" if scenario.trace else f"jobs[{m}].gpus"
        raise InstanceError(where, f"job '{trace.ids[m]}' needs {int(trace.gpus[m])} GPUs of one type; "
                                   f"the cluster has {dict(cluster)}")


def run_cluster(scenario: ClusterScenario | dict, scheduler: str, seed: int = 0,
                trace: Trace | None = None, progress: Callable[[float, float], None] | None = None) -> ClusterRun:
    """Simulate and keep per-job arrays; ``trace`` overrides the scenario's trace;
    ``progress(now_s, end_s)`` as the simulation advances (``end_s`` inf unless ``max_time_s``)."""
    if isinstance(scenario, dict):
        scenario = SIMULATOR.scenario(scenario)
    if scheduler not in SCHEDULERS:
        raise InstanceError("scheduler", f"unknown scheduler '{scheduler}' (known: {', '.join(SCHEDULERS)})")
    if trace is None:
        trace, scenario = build_trace(scenario, seed)
    else:
        cluster = scenario.cluster or (GAVEL_CLUSTER if trace.worker_types != ["gpu"]
                                       else {"gpu": int(trace.meta.get("gpus", 800))})
        _check_fits(trace, cluster, scenario)
        scenario = scenario.model_copy(update={"cluster": dict(cluster)})
    sched = SCHEDULERS[scheduler](scenario, trace, seed)
    sim = Sim(trace, scenario, sched)
    sim.run(scenario.max_time_s or float("inf"), progress)
    return collect(sim, scheduler, seed)


def simulate(scenario: ClusterScenario, scheduler: str, seed: int,
             progress: Callable[[float, float], None] | None = None) -> SimResult:
    """The :class:`SimulatorSpec` entry point."""
    return run_cluster(scenario, scheduler, seed, progress=progress).result


def estimate(scenario: ClusterScenario) -> Estimate:
    """Memory and time a scenario needs (measured: 0.5 kB per job at 10^6 jobs, a CSV trace
    about 12 times its file size, 60 bytes per server; the time depends on the scheduler and
    the load, so only trace building is estimated: 25 us per generated job)."""
    if scenario.trace is not None:
        try:
            size = os.path.getsize(scenario.trace)
        except OSError:
            size = 0
        jobs, what = size / 40.0, f"trace = {clip(scenario.trace)} ({size / 1e6:,.1f} MB)"
        memory = 12.0 * size
    else:
        jobs = scenario.jobs or (100 if scenario.generate == "gavel" else ASTRAEA_DEFAULTS[scenario.generate]["jobs"])
        what, memory = f"jobs = {jobs:,}", 0.0
    gpus = sum((scenario.cluster or GAVEL_CLUSTER).values())
    memory += 520.0 * jobs + 60.0 * gpus / scenario.server_size
    return Estimate(memory_bytes=memory, seconds=25e-6 * jobs, what=what)


SIMULATOR = SimulatorSpec(
    name="cluster", simulate=simulate, scenario_type=ClusterScenario, schedulers=tuple(SCHEDULERS), estimate=estimate,
    description="DL training jobs on a heterogeneous GPU cluster: Gavel rounds, Astraea leases, baselines",
    reference="Gavel OSDI'20 §5, §7; Astraea TPDS §4-6",
)

__all__ = ["SCHEDULERS", "SIMULATOR", "ClusterRun", "ClusterScenario", "Trace", "build_trace", "run_cluster",
           "simulate"]
