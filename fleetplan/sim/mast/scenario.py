"""The MAST fast-path scenario: fleet, tenants, load and scheduler parameters (MAST §2, §4, §5.6).

A scenario is a set of fields with defaults (``fleetplan simulate mast --help`` lists them). The
fleet (regions of ML dynamic clusters of 8-GPU machines, §2), the tenants (priority level and
quotas, §4.2) and the trace are generated from the seed unless given explicitly (``fleet``,
``tenant_list``, ``workloads``), inline or in a JSON scenario ``file``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import Field, model_validator

from fleetplan.instances.base import InstanceError, StrictModel, read_json_file, validate_model
from fleetplan.instances.resources import Estimate

GPUS_PER_MACHINE = 8


# What a scenario may ask: ten years of simulated time at most, GMS scans and
# series buckets no shorter than a few seconds (a scan every 1e-300 minutes never ends), and a
# fleet whose memory is estimated before it is built (:func:`estimate`).
MAX_HOURS = 10 * 8766.0


class ClusterSpec(StrictModel):
    """One ML dynamic cluster: machines per hardware type."""

    name: str = Field(min_length=1)
    machines: dict[str, int] = Field(description="machines per GPU hardware type (8 GPUs each)")


class RegionSpec(StrictModel):
    """One region and its ML dynamic clusters (§2)."""

    name: str = Field(min_length=1)
    clusters: list[ClusterSpec] = Field(min_length=1)


class TenantSpec(StrictModel):
    """A tenant: a priority level (0 highest .. 6 lowest) and quotas (§4.2)."""

    name: str = Field(min_length=1)
    priority: int = Field(ge=0, le=6)
    gpu_quota: float = Field(ge=0, description="GPUs the tenant may use at once within quota")
    cpu_quota: float = Field(ge=0, description="CPU cores the tenant may use at once within quota")


class WorkloadSpec(StrictModel):
    """One workload of an explicit trace: a single gang-scheduled GPU job."""

    id: str = Field(min_length=1)
    arrival_hours: float = Field(ge=0, le=MAX_HOURS, description="submission time from the start of the trace")
    gpus: int = Field(description="GPUs (a multiple of 8, or 1, 2 or 4 on one machine)")
    duration_hours: float = Field(le=MAX_HOURS, description="run time without preemption")
    tenant: str
    hardware: str
    data_regions: list[str] = Field(min_length=1, description="regions holding the workload's data")
    recurring: bool = False


class MastScenario(StrictModel):
    """What to simulate. Times are hours unless the name says ``_minutes``."""

    file: str | None = Field(None, description="JSON file of scenario fields (fleet, tenant_list, workloads ...); "
                                               "fields given beside it override the file's")
    hours: float = Field(8.0, gt=0, le=MAX_HOURS, description="length of the measured trace")
    warmup_hours: float = Field(2.0, ge=0, le=MAX_HOURS, description="simulated before the measured hours, so the fleet settles "
                                                      "from its initial fill (generated traces only)")
    regions: int = Field(4, ge=1, le=10_000, description="regions (generated fleet)")
    machines_per_region: int = Field(128, ge=1, le=1_000_000, description="8-GPU machines per region (generated fleet)")
    clusters_per_region: int = Field(2, ge=1, le=10_000, description="ML dynamic clusters per region (generated fleet)")
    machines_per_rack: int = Field(16, ge=1, description="machines per rack")
    cpus_per_machine: int = Field(96, ge=8, le=1_000_000, description="CPU cores per machine (a task takes cores in proportion "
                                                         "to its GPUs)")
    hardware_types: list[str] = Field(default_factory=lambda: ["h100", "a100"], min_length=1,
                                      description="GPU hardware types of the generated fleet")
    hardware_skew: float = Field(1.0, gt=0, description="Dirichlet concentration of each region's hardware mix "
                                                         "(small: uneven regions, Figure 2)")
    tenants: int = Field(40, ge=1, le=1_000_000, description="tenants (generated)")
    quota_total: float = Field(0.8, gt=0, description="sum of the tenants' GPU quotas / fleet GPUs (MAST guarantees "
                                                          "within-quota latency, so quotas fit in the fleet)")
    over_quota_share: float = Field(0.25, ge=0, le=1, description="share of tenants with a small quota (quota_over "
                                                                   "x the others' per unit of demand)")
    quota_over: float = Field(0.3, gt=0, description="relative quota of the small-quota tenants")
    load: float = Field(1.2, gt=0, le=5, description="offered GPU demand / fleet GPUs, averaged over the day (§3.2: "
                                                     "demand exceeds supply; the surplus runs over quota)")
    daily_amplitude: float = Field(0.3, ge=0, lt=1, description="arrival rate = mean x (1 + a cos(2 pi (t - peak) "
                                                                "/ 24))")
    peak_hour: float = Field(13.0, ge=0, lt=24, description="hour of the day of the busiest arrivals")
    start_hour: float = Field(8.0, ge=0, lt=24, description="hour of the day the trace starts")
    recurring_share: float = Field(0.3, ge=0, le=1, description="share of recurring workloads (§5.1)")
    replicas_recurring: int = Field(3, ge=1, description="regions holding a recurring workload's data")
    replicas_first_time: int = Field(2, ge=1, description="regions holding a first-time workload's data")
    tenant_regions: int = Field(3, ge=0, description="home regions per tenant: its workloads' data is there (0: any "
                                                     "region)")
    region_skew: float = Field(0.5, ge=0, description="data popularity of region i ~ 1 / (i + 1)^skew")
    replication_hours: float = Field(1.0, ge=0, le=MAX_HOURS, description="delay to replicate a workload's data to a region")
    initial_fill: bool = Field(True, description="start with the workloads that arrived before the trace and "
                                                 "still run (steady state)")
    scan_minutes: float = Field(5.0, ge=0.1, description="GMS-scan period (§5.4: every 5 minutes)")
    checkpoint_minutes: float = Field(30.0, ge=0.1, le=60 * MAX_HOURS, description="checkpoint interval: a preempted workload loses the "
                                                               "work since its last checkpoint")
    restart_minutes: float = Field(2.5, ge=0, le=60 * MAX_HOURS, description="restore time after a preemption (wasted GPU time)")
    preemption: bool = Field(True, description="RMS may preempt lower-priority jobs (§4.3)")
    slo_minutes: float = Field(30.0, gt=0, le=60 * MAX_HOURS, description="SLO on the start latency of within-quota workloads")
    federated_data_aware: bool = Field(True, description="federated: choose among regions holding the data (else "
                                                         "among all regions with the GPU type, replicating)")
    federated_refresh_minutes: float = Field(5.0, ge=0, description="federated: how often the dispatcher's view of "
                                                                    "each region's demand/supply is refreshed (at "
                                                                    "the GMS passes; 0: exact at every arrival); "
                                                                    "between refreshes it does not see its own "
                                                                    "dispatches (§4.1: the current *estimated* load)")
    age_weight: float = Field(1.0, ge=0, description="GMS eq. 10 weight of the capped age (per hour)")
    fair_share_weight: float = Field(1.0, ge=0, description="GMS eq. 11 weight of the fair share")
    age_cap_hours: float = Field(24.0, gt=0, le=MAX_HOURS, description="GMS eq. 10 age cap")
    window_hours: float = Field(24.0, gt=0, le=MAX_HOURS, description="GMS eq. 11 usage window")
    series_minutes: float = Field(30.0, ge=1, description="bucket width of the time series")
    fleet: list[RegionSpec] | None = Field(None, description="explicit fleet (overrides regions, machines_per_region, "
                                                            "clusters_per_region, hardware_types)")
    tenant_list: list[TenantSpec] | None = Field(None, description="explicit tenants (overrides tenants)")
    workloads: list[WorkloadSpec] | None = Field(None, description="explicit trace (overrides the generated one "
                                                                   "and initial_fill)")

    @model_validator(mode="after")
    def _check(self) -> MastScenario:
        if len(set(self.hardware_types)) != len(self.hardware_types):
            raise InstanceError("hardware_types", "duplicate hardware type")
        if self.workloads is not None and (self.fleet is None or self.tenant_list is None):
            raise InstanceError("workloads", "an explicit trace needs an explicit fleet and tenant_list")
        if self.series_minutes / 60 > self.hours:
            raise InstanceError("series_minutes", "must not exceed the simulated hours")
        return self


def load_scenario(scenario: MastScenario) -> MastScenario:
    """Merge a scenario ``file`` under the fields set beside it; errors name the file."""
    if scenario.file is None:
        return scenario
    path = Path(scenario.file)
    if not path.is_file():
        raise InstanceError("file", f"no such file '{path}'")
    # The instance files' reader: bounded nesting and numbers, one-line errors (a scenario
    # nested 50,000 deep raised RecursionError).
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise InstanceError("", "a scenario file holds a JSON object of scenario fields", str(path))
    data.pop("file", None)
    data.update({k: v for k, v in scenario.model_dump().items() if k in scenario.model_fields_set and k != "file"})
    return validate_model(MastScenario, data, str(path))


@dataclass
class Fleet:
    """Regions x hardware as arrays, and each region's machines for its RMS."""

    region_names: list[str]
    hardware: list[str]
    gpus: np.ndarray  # (R, H) GPUs of each type per region
    # per region: machine columns (cluster name, rack, hardware name) for a binpack instance
    machines: list[dict[str, list]]
    clusters: list[list[str]]

    @property
    def num_regions(self) -> int:
        return len(self.region_names)


def build_fleet(scenario: MastScenario, rng: np.random.Generator) -> Fleet:
    """The explicit fleet, or ``regions`` regions whose hardware mix is Dirichlet(skew) (§2,
    Figure 2: hardware is unevenly spread over regions)."""
    if scenario.fleet is not None:
        specs = scenario.fleet
        hardware: list[str] = []
        for r, region in enumerate(specs):
            for c, cluster in enumerate(region.clusters):
                for hw, count in cluster.machines.items():
                    if count < 0:
                        raise InstanceError(f"fleet[{r}].clusters[{c}].machines.{hw}", "must be >= 0")
                    if hw not in hardware:
                        hardware.append(hw)
        names = [region.name for region in specs]
        for r, name in enumerate(names):
            if names.index(name) != r:
                raise InstanceError(f"fleet[{r}].name", f"duplicate region '{name}'")
    else:
        hardware = list(scenario.hardware_types)
        names = [f"region{r}" for r in range(scenario.regions)]
        specs = []
        for r in range(scenario.regions):
            mix = rng.dirichlet(np.full(len(hardware), scenario.hardware_skew))
            per_cluster = np.diff(np.linspace(0, scenario.machines_per_region, scenario.clusters_per_region + 1)
                                  .round().astype(int))
            clusters = []
            for c, n in enumerate(per_cluster):
                counts = np.floor(mix * n).astype(int)
                counts[int(np.argmax(mix))] += n - counts.sum()
                clusters.append(ClusterSpec(name=f"c{c}", machines={hw: int(k) for hw, k in
                                                                    zip(hardware, counts, strict=True)}))
            specs.append(RegionSpec(name=names[r], clusters=clusters))
    gpus = np.zeros((len(specs), len(hardware)))
    machines, clusters = [], []
    for r, region in enumerate(specs):
        cols: dict[str, list] = {"cluster": [], "rack": [], "hardware": []}
        rack = 0
        for cluster in region.clusters:
            for hw, count in cluster.machines.items():
                if count == 0:
                    continue
                cols["cluster"] += [cluster.name] * count
                cols["hardware"] += [hw] * count
                cols["rack"] += [rack + i // scenario.machines_per_rack for i in range(count)]
                rack += -(-count // scenario.machines_per_rack)
                gpus[r, hardware.index(hw)] += count * GPUS_PER_MACHINE
        if not cols["cluster"]:
            raise InstanceError(f"fleet[{r}]" if scenario.fleet else "machines_per_region",
                                f"region '{region.name}' has no machine")
        machines.append(cols)
        clusters.append([cluster.name for cluster in region.clusters])
    return Fleet(names, hardware, gpus, machines, clusters)


def daily_curve(hours: np.ndarray, scenario: MastScenario) -> np.ndarray:
    """Relative arrival rate at trace time ``hours`` (mean 1 over a day): busy hours around
    ``peak_hour``."""
    clock = scenario.start_hour + np.asarray(hours, dtype=float)
    return 1.0 + scenario.daily_amplitude * np.cos(2 * np.pi * (clock - scenario.peak_hour) / 24.0)


__all__ = ["GPUS_PER_MACHINE", "ClusterSpec", "Fleet", "MastScenario", "RegionSpec", "TenantSpec",
           "WorkloadSpec", "build_fleet", "daily_curve", "load_scenario"]


def estimate(scenario: MastScenario) -> Estimate:
    """Memory and time a generated fleet and trace need (measured at 4-128 regions of 128
    machines, 10 simulated hours: about 85 kB per pair of regions, the per-region state of
    every workload's data, and 0.16 s per region per 10 hours at a 5-minute scan)."""
    regions = len(scenario.fleet) if scenario.fleet is not None else scenario.regions
    machines = regions * scenario.machines_per_region
    hours = scenario.hours + scenario.warmup_hours
    return Estimate(memory_bytes=85e3 * regions ** 2 + 10e3 * machines,
                    seconds=0.016 * hours * regions * (scenario.machines_per_region / 128) * (5.0 / scenario.scan_minutes),
                    what=f"regions = {regions:,} of {scenario.machines_per_region:,} machines")
