"""The ParSync scenario: cluster, schedulers, synchronisation and workload (ParSync §4.3, §6).

Defaults are the paper's (§4.3 "default setting", §6 "Settings"): 200k slots with scores
~ Normal(10, V = 2), 20 schedulers, G = 0.5 s, 20 partitions, 40k tasks/s in batches of 100,
5 s tasks, 0.25 ms of decision time per task.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from fleetplan.instances.base import InstanceError, StrictModel, validate_model
from fleetplan.instances.resources import Estimate

#: §6.1's five 60-second phases: 50%, 80%, 95%, 80%, 50% of the reference rate.
FIVE_PHASES: tuple[float, ...] = (0.5, 0.8, 0.95, 0.8, 0.5)

SYNCS: tuple[str, ...] = ("parsync", "samesyn", "statesync")
STRATEGIES: tuple[str, ...] = ("latency-first", "quality-first", "adaptive", "random")

Sync = Literal["parsync", "samesyn", "statesync"]
Strategy = Literal["latency-first", "quality-first", "adaptive", "random"]


def scheduler_names() -> tuple[str, ...]:
    """Every ``SYNC-STRATEGY`` combination, ParSync (DiffSyn) first."""
    return tuple(f"{sync}-{strategy}" for sync in SYNCS for strategy in STRATEGIES)


def parse_scheduler(name: str) -> tuple[str, str]:
    """``"parsync-latency-first"`` -> ``("parsync", "latency-first")``."""
    sync, _, strategy = name.partition("-")
    if sync not in SYNCS or strategy not in STRATEGIES:
        raise InstanceError("scheduler", f"unknown scheduler '{name}' (SYNC-STRATEGY with SYNC in "
                                         f"{'|'.join(SYNCS)} and STRATEGY in {'|'.join(STRATEGIES)})")
    return sync, strategy


# What a scenario may ask: a year of simulated time, time steps of at least a
# millisecond, and sizes whose memory is estimated before the run (:func:`estimate`).
MAX_SECONDS = 365.25 * 86400.0


class Scenario(StrictModel):
    """One ParSync experiment. Times are in seconds unless the name says ``_ms``.

    The load is ``rate`` x ``phases[k]`` tasks/s during the k-th of ``len(phases)`` equal parts
    of ``duration_s``; after it, no task arrives and the run drains the backlog for at most
    ``drain_s`` more seconds.
    """

    slots: int = Field(200_000, gt=0, le=100_000_000, description="S, slots in the cluster (one task per slot)")
    score_mean: float = Field(10.0, description="mean of the slot quality scores (§4.3)")
    score_variance: float = Field(2.0, ge=0, description="V, variance of the slot scores (§4.3)")
    score_power: float = Field(8.0, ge=0, description="Quality-first samples a slot with weight score**power (1: §5.2's linear weights; 8 gives §6's clear preference)")
    preferred_share: float = Field(0.5, gt=0, le=1, description="share of slots (highest scores) a task prefers; quality = share of tasks placed on them (§6)")
    schedulers: int = Field(20, gt=0, le=10_000, description="N, scheduler instances")
    sync_gap_s: float = Field(0.5, ge=1e-3, le=MAX_SECONDS, description="G, every local state entry is refreshed once per G")
    partitions: int = Field(20, gt=0, le=100_000_000, description="P, partitions of the cluster state (must divide slots; ParSync: a multiple of N)")
    master_partitions: int = Field(1, gt=0, le=100_000_000, description="partitions of the master, each a FIFO queue (must divide slots)")
    master_time_ms: float = Field(0.0, ge=0, le=1e3 * MAX_SECONDS, description="master service time per commit request (0: no queueing)")
    rate: float = Field(40_000.0, gt=0, le=1e9, description="R, tasks/s at 100% load")
    batch_size: int = Field(100, gt=0, le=100_000_000, description="B, tasks per batch; a scheduler commits a batch before the next")
    phases: list[float] = Field(default_factory=lambda: [1.0], min_length=1, description="load per equal-length phase, as a fraction of rate")
    schedulers_a: int = Field(0, ge=0, description="§5.2's Figure 4: the first schedulers_a schedulers (group A) follow phases_a")
    phases_a: list[float] = Field(default_factory=list, description="group A's load per phase (as many phases as 'phases')")
    duration_s: float = Field(90.0, gt=0, le=MAX_SECONDS, description="submission period")
    drain_s: float = Field(90.0, ge=0, le=MAX_SECONDS, description="at most this long after the submission period to commit the backlog")
    task_duration: Literal["fixed", "production"] = Field("fixed", description="fixed, or lognormal (sigma 1) like §2 (88% under 10 s at mean 5 s)")
    task_duration_s: float = Field(5.0, gt=0, le=MAX_SECONDS, description="T, the task duration (mean for 'production')")
    alpha: float = Field(1.0, gt=0, le=1, description="§6.4: a task on a preferred slot runs alpha x its duration")
    decision_time_ms: float = Field(0.25, gt=0, le=1e3 * MAX_SECONDS, description="decision time per task")
    quality_scan_factor: float = Field(1.5, ge=1, le=1e6, description="Quality-first's decision time multiplier: it checks all partitions (§6.2)")
    tau_s: float = Field(1.5, gt=0, le=MAX_SECONDS, description="Adaptive: Quality-first while the delay EMA is below tau")
    ema_alpha: float = Field(0.1, gt=0, le=1, description="Adaptive: weight of the newest commit's delay in the EMA")
    metrics_interval_s: float = Field(1.0, ge=1e-3, description="width of the time buckets of the series")
    stagger: bool = Field(True, description="spread the schedulers' batch arrivals evenly over one batch interval")

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        for i, load in enumerate(self.phases):
            if not 0 <= load <= 10:
                raise InstanceError(f"phases[{i}]", "must be a load fraction in [0, 10]")
        if self.schedulers_a > self.schedulers:
            raise InstanceError("schedulers_a", f"must not exceed schedulers ({self.schedulers})")
        if self.schedulers_a and len(self.phases_a) != len(self.phases):
            raise InstanceError("phases_a", f"needs one load per phase ({len(self.phases)})")
        for i, load in enumerate(self.phases_a):
            if not 0 <= load <= 10:
                raise InstanceError(f"phases_a[{i}]", "must be a load fraction in [0, 10]")
        if self.slots % self.partitions:
            raise InstanceError("partitions", f"must divide slots ({self.slots}) into equal partitions")
        if self.slots % self.master_partitions:
            raise InstanceError("master_partitions", f"must divide slots ({self.slots})")
        if self.metrics_interval_s > self.duration_s + self.drain_s:
            raise InstanceError("metrics_interval_s", "must not exceed duration_s + drain_s")
        return self

    def estimate(self) -> Estimate:
        """Memory and time of the run (measured: 60 bytes per slot, 10 per task, 0.25 MB per
        scheduler, 40 bytes per series bucket; 1.8 us per task per 20 schedulers)."""
        tasks = self.rate * max(max(self.phases), max(self.phases_a, default=0.0)) * self.duration_s
        buckets = (self.duration_s + self.drain_s) / self.metrics_interval_s
        return Estimate(memory_bytes=60.0 * self.slots + 10.0 * tasks + 0.25e6 * self.schedulers + 40.0 * buckets,
                        seconds=1.8e-6 * tasks * max(self.schedulers / 20.0, 1.0),
                        what=f"slots = {self.slots:,}, {tasks:,.0f} tasks, schedulers = {self.schedulers:,}")

    def check_sync(self, sync: str) -> None:
        """ParSync's DiffSyn gives scheduler i partitions i*P/N.. (§5.1): P must be a multiple of N."""
        if sync == "parsync" and self.partitions % self.schedulers:
            raise InstanceError("partitions", f"ParSync needs a multiple of the {self.schedulers} "
                                              f"schedulers (got {self.partitions})")


def figure4_scenario(**changes: object) -> Scenario:
    """§5.2's Figure 4: groups A and B of 5 schedulers each (N = 10 at full capacity), three
    30 s phases: both at 2/3 load, A at full load, both at full load."""
    data: dict[str, object] = {"schedulers": 10, "partitions": 10, "schedulers_a": 5,
                               "phases": [2 / 3, 2 / 3, 1.0], "phases_a": [2 / 3, 1.0, 1.0],
                               "duration_s": 90.0, "drain_s": 60.0,
                               # §5.2's simulator charges Quality-first no extra decision time
                               "quality_scan_factor": 1.0}
    data.update(changes)
    return Scenario.model_validate(data)


def paper_scenario(**changes: object) -> Scenario:
    """§6.1's setting: 200k slots, 20 schedulers, 20 partitions, G = 0.5 s, 300 s in five phases."""
    data: dict[str, object] = {"phases": list(FIVE_PHASES), "duration_s": 300.0, "drain_s": 120.0}
    data.update(changes)
    return Scenario.model_validate(data)


#: ``fleetplan simulate parsync`` flags that name a scenario field differently.
FLAG_FIELDS = {"sync_gap": "sync_gap_s", "duration": "duration_s", "tau": "tau_s"}
FLAGS_HELP: tuple[tuple[str, str], ...] = (
    ("--strategy S", f"{'|'.join(STRATEGIES)} (default latency-first); with --sync, instead of --scheduler"),
    ("--sync S", f"{'|'.join(SYNCS)} (default parsync, i.e. DiffSyn)"),
    ("--sync-gap G", "G in seconds (the field sync_gap_s)"),
    ("--duration D", "submission period in seconds (duration_s)"),
    ("--tau T", "Adaptive's tau in seconds (tau_s)"),
    ("--phases", "§6.1's five-phase load (50/80/95/80/50% over --duration); or a list of loads"),
)


def command_line_flags(params: dict[str, Any], scheduler: str | None) -> tuple[dict[str, Any], str | None]:
    """``fleetplan simulate parsync``'s flags as scenario fields and a scheduler.

    ``--sync-gap``, ``--duration`` and ``--tau`` name ``sync_gap_s``, ``duration_s`` and
    ``tau_s``; a bare ``--phases`` is §6.1's five phases; ``--sync`` and ``--strategy`` make the
    scheduler name ``SYNC-STRATEGY``. The scenario is validated here so that an error names the
    option as given (``--sync-gap: Input should be greater than 0``).
    """
    def flag(name: str) -> str:   # as the user wrote it: the aliases with '-', fields as named
        return "--" + (name.replace("_", "-") if name in FLAG_FIELDS else name)

    fields: dict[str, Any] = {}
    flag_of: dict[str, str] = {}
    for name, value in params.items():
        if name in ("sync", "strategy"):
            continue
        field = FLAG_FIELDS.get(name, name)
        if field in fields:
            raise InstanceError(flag(name), f"given twice (also as {flag_of[field]})")
        fields[field], flag_of[field] = value, flag(name)
    if fields.get("phases") is True:
        fields["phases"] = list(FIVE_PHASES)
    choice = {key: params[key] for key in ("sync", "strategy") if key in params}
    for key, allowed in (("sync", SYNCS), ("strategy", STRATEGIES)):
        if key in choice and choice[key] not in allowed:
            raise InstanceError(f"--{key}", f"must be one of {'|'.join(allowed)} (got {choice[key]!r})")
    if choice and scheduler is not None:
        raise InstanceError("--scheduler", "give either --scheduler or --sync/--strategy, not both")
    if choice:
        scheduler = f"{choice.get('sync', SYNCS[0])}-{choice.get('strategy', STRATEGIES[0])}"
    alias_of = {field: name for name, field in FLAG_FIELDS.items()}
    try:
        scenario = validate_model(Scenario, fields)
        scenario.check_sync(parse_scheduler(scheduler or scheduler_names()[0])[0])
    except InstanceError as error:
        if error.path == "scheduler":
            raise
        field = error.path.split("[")[0].split(".")[0]
        raise InstanceError((flag_of.get(field) or flag(alias_of.get(field, field))) + error.path[len(field):],
                            error.reason) from None
    return fields, scheduler
