"""Workload traces for the MAST simulator: generated from §5.1's statistics, or explicit.

Generated trace (MAST §4.2, §5.1):

* GPUs per workload: 16 / 64 / 128 at P50 / P90 / P99. Durations (until the next preemption,
  §5.1): 20 minutes / 6.7 hours / 66 hours. Both come from a quantile function that is
  piecewise linear in log-space through those knots (plus a lower and an upper end,
  :data:`GPU_KNOTS`, :data:`DURATION_KNOTS`), so the three quantiles hold exactly; GPUs are
  then rounded to 1, 2, 4 or a multiple of 8 (8-GPU machines), which keeps them.
* 30% of workloads recur: their data is held by ``replicas_recurring`` regions, a first-time
  workload's by ``replicas_first_time``, among its tenant's ``tenant_regions`` home regions
  (a team's tables live in a few regions). Regions are drawn by popularity ``1 / (i + 1)^skew``;
  for a recurring workload also in proportion to the region's GPUs of its type (Tetris, §3,
  placed the data near the hardware); a first-time workload's data is where it was written.
  When no region holding the data has the workload's GPU type, the data must be replicated.
* Priority from §4.2's mix (:data:`fleetplan.sim.mast.gms.PRIORITY_MIX`); each workload belongs
  to a tenant of that level. Quotas add up to ``quota_total`` x the fleet's GPUs, shared in
  proportion to the tenants' mean demand (``over_quota_share`` of tenants get ``quota_over``
  times less per unit of demand); with ``load`` above ``quota_total`` the surplus runs over
  quota, at the lowest level (§2: "training clusters are always fully utilized due to
  low-priority workloads").
* Arrivals: a Poisson process whose rate follows the daily curve
  (:func:`fleetplan.sim.mast.scenario.daily_curve`) with a mean that offers ``load`` times the
  fleet's GPUs. With ``initial_fill``, the workloads that arrived in the ``DURATION_KNOTS[-1]``
  hours before the trace and still run at its start begin it running (with what is left).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.base import InstanceError
from fleetplan.sim.mast.scenario import GPUS_PER_MACHINE, Fleet, MastScenario, daily_curve

GPU_KNOTS: tuple[tuple[float, float], ...] = ((0.0, 1.0), (0.5, 16.0), (0.9, 64.0), (0.99, 128.0), (1.0, 256.0))
DURATION_KNOTS: tuple[tuple[float, float], ...] = ((0.0, 1 / 60), (0.5, 1 / 3), (0.9, 6.7), (0.99, 66.0),
                                                   (1.0, 240.0))


def log_quantile(u: np.ndarray, knots: tuple[tuple[float, float], ...]) -> np.ndarray:
    """The quantile function through ``knots`` (probability, value), linear in log(value)."""
    p = np.array([k[0] for k in knots])
    v = np.log([k[1] for k in knots])
    return np.exp(np.interp(u, p, v))


def round_gpus(x: np.ndarray) -> np.ndarray:
    """Round GPUs to a whole machine's multiple (>= 8) or a power of two below 8."""
    x = np.asarray(x, dtype=float)
    small = 2.0 ** np.clip(np.round(np.log2(np.maximum(x, 1.0))), 0, 3)
    return np.where(x >= 8, np.maximum(8, np.round(x / GPUS_PER_MACHINE) * GPUS_PER_MACHINE), small).astype(np.int64)


def draw_gpus(u: np.ndarray) -> np.ndarray:
    return round_gpus(log_quantile(u, GPU_KNOTS))


def draw_duration(u: np.ndarray) -> np.ndarray:
    return log_quantile(u, DURATION_KNOTS)


def mean_gpu_hours() -> float:
    """E[GPUs] x E[hours] of a generated workload (independent draws), on a fine grid."""
    u = (np.arange(200_000) + 0.5) / 200_000
    return float(draw_gpus(u).mean() * draw_duration(u).mean())


@dataclass
class Tenants:
    names: list[str]
    priority: np.ndarray  # (T,) 0 highest .. 6 lowest
    gpu_quota: np.ndarray  # (T,)
    cpu_quota: np.ndarray  # (T,)


@dataclass
class Trace:
    """Workloads as arrays, sorted by arrival (hours from the start of the trace)."""

    ids: list[str]
    arrival: np.ndarray  # (W,)
    gpus: np.ndarray  # (W,) int
    duration: np.ndarray  # (W,) hours of work
    tenant: np.ndarray  # (W,) int
    hardware: np.ndarray  # (W,) int, index into fleet.hardware
    data: np.ndarray  # (W, R) bool: regions holding the data
    recurring: np.ndarray  # (W,) bool
    initial: np.ndarray  # (W,) bool: running when the trace starts (initial_fill)

    @property
    def size(self) -> int:
        return len(self.ids)


def cpus_per_gpu(scenario: MastScenario) -> float:
    return scenario.cpus_per_machine / GPUS_PER_MACHINE


def build_tenants(scenario: MastScenario, fleet: Fleet, rng: np.random.Generator) -> Tenants:
    """The explicit tenants, or ``tenants`` spread over the levels by §4.2's mix (at least one
    per level), quotas in proportion to their mean demand."""
    from fleetplan.sim.mast.gms import PRIORITY_MIX

    if scenario.tenant_list is not None:
        names = [t.name for t in scenario.tenant_list]
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise InstanceError(f"tenant_list[{i}].name", f"duplicate tenant '{name}'")
        return Tenants(names, np.array([t.priority for t in scenario.tenant_list], dtype=np.int64),
                       np.array([t.gpu_quota for t in scenario.tenant_list], dtype=float),
                       np.array([t.cpu_quota for t in scenario.tenant_list], dtype=float))
    mix = np.asarray(PRIORITY_MIX)
    per_level = np.maximum(1, np.round(scenario.tenants * mix)).astype(int)
    priority = np.repeat(np.arange(len(mix)), per_level)
    mean_gpus = mix[priority] / per_level[priority]  # each tenant's share of the demand
    small = rng.random(priority.size) < scenario.over_quota_share
    weight = mean_gpus * np.where(small, scenario.quota_over, 1.0)
    quota = scenario.quota_total * fleet.gpus.sum() * weight / weight.sum()
    return Tenants([f"t{i}" for i in range(priority.size)], priority, quota, quota * cpus_per_gpu(scenario))


def _data_regions(rng: np.random.Generator, weight: np.ndarray, replicas: np.ndarray) -> np.ndarray:
    """(n, R) mask of ``replicas[i]`` distinct regions per row drawn with (n, R) ``weight``
    without replacement (Gumbel top-k); regions of weight 0 only when no other is left."""
    n, num_regions = weight.shape
    with np.errstate(divide="ignore"):
        keys = np.log(weight) + rng.gumbel(size=(n, num_regions))
    keys = np.where(np.isfinite(keys), keys, -1e300 + rng.random((n, num_regions)))
    rank = np.argsort(np.argsort(-keys, axis=1), axis=1)
    return rank < np.minimum(replicas, num_regions)[:, None]


def generate_trace(scenario: MastScenario, fleet: Fleet, tenants: Tenants, rng: np.random.Generator) -> Trace:
    """Draw a trace over ``[0, warmup_hours + hours)`` on the simulation clock (and the
    still-running past, with ``initial_fill``)."""
    from fleetplan.sim.mast.gms import PRIORITY_MIX

    gpu_hours = mean_gpu_hours()
    rate = scenario.load * fleet.gpus.sum() / gpu_hours  # workloads per hour, daily mean
    lookback = DURATION_KNOTS[-1][1] if scenario.initial_fill else 0.0
    warmup = scenario.warmup_hours  # the simulation clock starts warmup hours before the trace
    span = lookback + warmup + scenario.hours
    peak = 1.0 + scenario.daily_amplitude
    count = rng.poisson(rate * peak * span)
    arrival = np.sort(rng.random(count) * span - lookback)
    arrival = arrival[rng.random(count) * peak < daily_curve(arrival - warmup, scenario)]  # thinning
    n = arrival.size
    gpus = draw_gpus(rng.random(n))
    duration = draw_duration(rng.random(n))
    # The workload's GPU type, in proportion to the fleet's GPUs of each type.
    share = fleet.gpus.sum(axis=0) / fleet.gpus.sum()
    hardware = rng.choice(len(fleet.hardware), size=n, p=share)
    # A job lives in one dynamic cluster: no generated workload exceeds the largest one.
    biggest = largest_cluster_gpus(fleet)
    gpus = np.minimum(gpus, biggest[hardware]).astype(np.int64)
    level = rng.choice(len(PRIORITY_MIX), size=n, p=np.asarray(PRIORITY_MIX))
    tenant = np.empty(n, dtype=np.int64)
    for p in range(len(PRIORITY_MIX)):
        members = np.flatnonzero(tenants.priority == p)
        if members.size == 0:
            members = np.flatnonzero(tenants.priority == tenants.priority.max())
        at = level == p
        tenant[at] = members[rng.integers(0, members.size, size=int(at.sum()))]
    recurring = rng.random(n) < scenario.recurring_share
    replicas = np.where(recurring, scenario.replicas_recurring, scenario.replicas_first_time)
    # Regions by popularity; a recurring workload's data was placed by Tetris (§3) where its GPU
    # type is (weight x the region's GPUs of that type), a first-time one's where it was written.
    R = fleet.num_regions
    popularity = np.arange(1, R + 1, dtype=float) ** -scenario.region_skew
    # A tenant's data lives in its home regions (drawn by popularity); its workloads' in them.
    homes = min(scenario.tenant_regions or R, R)
    home = _data_regions(rng, np.tile(popularity, (len(tenants.names), 1)), np.full(len(tenants.names), homes))
    supply = (fleet.gpus / np.maximum(fleet.gpus.sum(axis=0), 1e-9)).T  # (H, R)
    weight = np.where(recurring[:, None], supply[hardware] * popularity[None, :], popularity[None, :])
    weight = home[tenant] * (weight + 1e-12)  # a home region without the hardware: a last resort
    data = _data_regions(rng, weight, np.minimum(replicas, homes))
    end = arrival + duration
    keep = end > 0
    initial = arrival < 0
    duration = np.where(initial, end, duration)
    arrival = np.maximum(arrival, 0.0)
    sel = np.flatnonzero(keep)
    return Trace([f"w{i}" for i in range(sel.size)], arrival[sel], gpus[sel], duration[sel], tenant[sel],
                 hardware[sel], data[sel], recurring[sel], initial[sel])


def largest_cluster_gpus(fleet: Fleet, per_region: bool = False) -> np.ndarray:
    """GPUs of the largest dynamic cluster of each hardware type: (H,), or (R, H) per region."""
    biggest = np.zeros((fleet.num_regions, len(fleet.hardware)))
    for r, cols in enumerate(fleet.machines):
        counts: dict[tuple[str, str], int] = {}
        for c, hw in zip(cols["cluster"], cols["hardware"], strict=True):
            counts[(c, hw)] = counts.get((c, hw), 0) + 1
        for (_, hw), k in counts.items():
            h = fleet.hardware.index(hw)
            biggest[r, h] = max(biggest[r, h], k * GPUS_PER_MACHINE)
    return biggest if per_region else biggest.max(axis=0)


def explicit_trace(scenario: MastScenario, fleet: Fleet, tenants: Tenants, source: str | None = None) -> Trace:
    """The scenario's ``workloads``, checked: known tenant, GPU type and regions, a positive
    duration, whole machines, and no workload larger than every cluster of its type."""
    assert scenario.workloads is not None
    tenant_index = {name: i for i, name in enumerate(tenants.names)}
    region_index = {name: r for r, name in enumerate(fleet.region_names)}
    biggest = largest_cluster_gpus(fleet)
    specs = sorted(enumerate(scenario.workloads), key=lambda item: (item[1].arrival_hours, item[0]))
    n, R = len(specs), fleet.num_regions
    data = np.zeros((n, R), dtype=bool)
    tenant, hardware = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    seen: set[str] = set()
    for k, (i, w) in enumerate(specs):
        at = f"workloads[{i}]"
        if w.id in seen:
            raise InstanceError(f"{at}.id", f"duplicate workload id '{w.id}'", source)
        seen.add(w.id)
        if w.tenant not in tenant_index:
            raise InstanceError(f"{at}.tenant", f"unknown tenant '{w.tenant}' (known: {', '.join(tenants.names)})",
                                source)
        if w.hardware not in fleet.hardware:
            raise InstanceError(f"{at}.hardware", f"unknown GPU type '{w.hardware}' (known: "
                                f"{', '.join(fleet.hardware)})", source)
        for j, region in enumerate(w.data_regions):
            if region not in region_index:
                raise InstanceError(f"{at}.data_regions[{j}]", f"unknown region '{region}' (known: "
                                    f"{', '.join(fleet.region_names)})", source)
            data[k, region_index[region]] = True
        if w.duration_hours <= 0:
            raise InstanceError(f"{at}.duration_hours", f"must be > 0, got {w.duration_hours:g}", source)
        if w.gpus < 1 or (w.gpus > 8 and w.gpus % GPUS_PER_MACHINE) or w.gpus in (3, 5, 6, 7):
            raise InstanceError(f"{at}.gpus", f"must be 1, 2, 4 or a multiple of 8, got {w.gpus}", source)
        h = fleet.hardware.index(w.hardware)
        if w.gpus > biggest[h]:
            raise InstanceError(f"{at}.gpus", f"workload '{w.id}' needs {w.gpus} GPUs of type '{w.hardware}'; "
                                f"the largest region has {biggest[h]:g} in one dynamic cluster", source)
        tenant[k], hardware[k] = tenant_index[w.tenant], h
    ws = [w for _, w in specs]
    return Trace([w.id for w in ws], np.array([w.arrival_hours for w in ws], dtype=float),
                 np.array([w.gpus for w in ws], dtype=np.int64), np.array([w.duration_hours for w in ws], dtype=float),
                 tenant, hardware, data, np.array([w.recurring for w in ws], dtype=bool), np.zeros(n, dtype=bool))


__all__ = ["DURATION_KNOTS", "GPU_KNOTS", "Tenants", "Trace", "build_tenants", "cpus_per_gpu", "draw_duration",
           "draw_gpus", "explicit_trace", "generate_trace", "largest_cluster_gpus", "log_quantile",
           "mean_gpu_hours", "round_gpus"]
