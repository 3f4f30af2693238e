"""Metrics of a MAST run (§5.5's start latency and SLO, §5.2's allocation rate, §5.6's comparison).

A *scheduling event* is one wait in the queue: from a workload's submission (or its preemption,
§5.5: "rescheduling B counts as a new scheduling event") to its start, including the wait for a
data replication (``wait_*`` metrics). An event is *within quota* when the GMS pass that started
it (or the last pass, for one still waiting at the end) found it within its tenant's quota; its
*start latency* (``latency_*``, the SLO's) runs from the start of its within-quota stretch: the
start of the wait if the first pass found it within quota, else the pass that first did (MAST's
guarantee is for within-quota workloads, §2). Events still waiting at the end count with the
wait so far (a lower bound); an event is *decided* when it started, or when it has waited
longer than the SLO by the end. The SLO violation rate is over the decided within-quota events,
grouped by the tenant's priority level (0 highest .. 6 lowest) and, in the series, by the time
the wait began. Only waits that began in the measured hours count (not in the warm-up); the
allocation rate is over the measured hours; the GPU-hour books (``gpu_hours_*``) cover the
whole run, warm-up included, so that they balance.
"""

from __future__ import annotations

import numpy as np

from fleetplan.sim.engine import SimResult
from fleetplan.sim.mast.engine import PENDING, REPLICATING, MastSim

HIGH = (0, 1, 2)  # "high-priority" levels in the summaries


def _rate(violated: np.ndarray, decided: np.ndarray) -> float:
    n = int(decided.sum())
    return float(violated[decided].sum() / n) if n else float("nan")


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else float("nan")


def collect(sim: MastSim, scheduler: str, seed: int) -> SimResult:
    """Summaries per level and over time, and the GPU-hour books."""
    s = sim.scenario
    H = float(s.hours)  # measured hours; the simulation clock is offset by the warm-up
    offset = sim.offset
    slo = s.slo_minutes / 60.0
    waiting = np.flatnonzero((sim.status == PENDING) | (sim.status == REPLICATING))
    w = np.concatenate([np.array(sim.ev_w, dtype=np.int64), waiting])
    queued = np.concatenate([np.array(sim.ev_queued), sim.queued_at[waiting]]) - offset
    started = np.concatenate([np.array(sim.ev_start), np.full(waiting.size, np.nan)]) - offset
    within = np.concatenate([np.array(sim.ev_within, dtype=bool), sim.within[waiting]])
    since = np.concatenate([np.array(sim.ev_since), sim.within_since[waiting]]) - offset
    measured = queued >= 0  # waits that began in the warm-up are not measured
    w, queued, started, within, since = w[measured], queued[measured], started[measured], within[measured], \
        since[measured]
    within &= ~np.isnan(since)
    done = ~np.isnan(started)
    end = np.where(done, started, H)
    latency = end - queued  # the whole wait (§5.5)
    slo_wait = np.where(within, end - np.where(within, since, 0.0), 0.0)  # the wait within quota
    decided = done | (slo_wait > slo)
    violated = slo_wait > slo + 1e-9
    level = sim.level[w] if w.size else np.zeros(0, dtype=np.int64)
    counted = decided & within
    groups: dict[str, dict[str, float]] = {}
    for p in range(7):
        mine = level == p
        lat = slo_wait[mine & within] * 60
        groups[str(p)] = {
            "events": float(mine.sum()), "within_quota_events": float((mine & within).sum()),
            "slo_violation_rate": _rate(violated, counted & mine),
            "latency_p50_minutes": _pct(lat, 50), "latency_p95_minutes": _pct(lat, 95),
            "wait_p50_minutes": _pct(latency[mine] * 60, 50), "wait_p95_minutes": _pct(latency[mine] * 60, 95),
            "preemptions": float(sim.preemptions[p]),
            "waiting_at_end": float((mine & ~done).sum()),
        }
    high = np.isin(level, HIGH)
    # time series: buckets by the time the wait began
    width = sim.bucket
    nb = sim.alloc_area.size
    edges = np.arange(nb + 1) * width
    bucket = np.minimum((queued / width).astype(np.int64), nb - 1) if queued.size else queued.astype(np.int64)
    series: dict[str, np.ndarray] = {"time": edges[:-1] + np.minimum(width, H - edges[:-1]) / 2}
    span = np.minimum(edges[1:], H) - edges[:-1]
    series["gpu_allocation_rate"] = sim.alloc_area / np.maximum(span, 1e-12) / sim.fleet.gpus.sum()

    def per_bucket(mask: np.ndarray) -> np.ndarray:
        n = np.bincount(bucket[mask], minlength=nb).astype(float)
        v = np.bincount(bucket[mask & violated], minlength=nb).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, v / np.maximum(n, 1), np.nan)

    series["slo_violation_rate"] = per_bucket(counted)
    series["slo_violation_rate_high"] = per_bucket(counted & high)
    for p in range(7):
        series[f"slo_violation_rate_p{p}"] = per_bucket(counted & (level == p))
    series["scheduling_events"] = np.bincount(bucket, minlength=nb).astype(float)
    arrived = (~sim.trace.initial) & (sim.trace.arrival >= offset) & (sim.trace.arrival < sim.horizon)
    total_gpus = float(sim.fleet.gpus.sum())
    lat_within = slo_wait[within] * 60
    books = sim.finished_work + sim.wasted + sim.unfinished_work
    metrics = {
        "workloads": float(arrived.sum()),
        "initial_running": float(sim.trace.initial.sum() - sim.dropped),
        "initial_dropped": float(sim.dropped),
        "regions": float(sim.fleet.num_regions),
        "gpus": total_gpus,
        "scheduling_events": float(w.size),
        "started": float(done.sum()),
        "waiting_at_end": float((~done).sum()),
        "slo_violation_rate": _rate(violated, counted),
        "slo_violation_rate_high": _rate(violated, counted & high),
        "max_slo_violation_rate_over_time": float(np.nanmax(series["slo_violation_rate"]))
        if np.isfinite(series["slo_violation_rate"]).any() else float("nan"),
        "max_slo_violation_rate_high_over_time": float(np.nanmax(series["slo_violation_rate_high"]))
        if np.isfinite(series["slo_violation_rate_high"]).any() else float("nan"),
        "latency_p50_minutes": _pct(lat_within, 50),
        "latency_p95_minutes": _pct(lat_within, 95),
        "wait_p50_minutes": _pct(latency * 60, 50),
        "wait_p95_minutes": _pct(latency * 60, 95),
        "slo_minutes": float(s.slo_minutes),
        "gpu_allocation_rate": float(sim.alloc_area.sum() / (H * total_gpus)),
        "preemptions": float(sim.preemptions.sum()),
        "data_moves": float(sim.data_moves),
        "gms_passes": float(sim.passes),
        "gpu_hours_run": sim.gpu_hours_run,
        "gpu_hours_finished_work": sim.finished_work,
        "gpu_hours_wasted": sim.wasted,
        "gpu_hours_unfinished_work": sim.unfinished_work,
        "conservation_error_gpu_hours": sim.gpu_hours_run - books,
    }
    message = (f"{int(arrived.sum())} workloads over {H:g} h (after {offset:g} h of warm-up) on "
               f"{sim.fleet.num_regions} regions ({int(total_gpus)} GPUs); over the whole run, GPU-hours run "
               f"{sim.gpu_hours_run:.1f} = finished "
               f"{sim.finished_work:.1f} + wasted {sim.wasted:.1f} + unfinished {sim.unfinished_work:.1f}")
    return SimResult(simulator="mast", scheduler=scheduler, seed=seed, metrics=metrics,
                     groups={"priority": groups}, series=series, events=sim.events, sim_time=H * 3600.0,
                     message=message)


__all__ = ["HIGH", "collect"]
