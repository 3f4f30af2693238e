"""What each metric means: one entry per metric name the judges and simulators report, with its
unit and which direction is better — the one place the command line, ``compare`` and the docs
read (as solver options have theirs in :mod:`fleetplan.solvers.options`).

A name is looked up exactly, then by pattern (``utilization_<type>``, ``preempted_count_p<k>``).

>>> describe("min_time_share").unit, describe("min_time_share").better
('fraction', 'higher')
>>> describe("utilization_v100").meaning
'share of the v100 workers busy under the plan'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Better = Literal["higher", "lower"] | None


@dataclass(frozen=True)
class Metric:
    """A metric's meaning (one line), unit and better direction (None: neither)."""

    name: str
    meaning: str
    unit: str
    better: Better = None
    # Relative to the instance it is measured on (changes when the instance grows), so it does
    # not compare across instances; absolute metrics do.
    relative: bool = False


_ENTRIES: dict[str, tuple[str, str, Better, bool]] = {
    # allocation: service metrics (comparable across instances)
    "min_time_share": ("smallest fraction of time a job holds GPUs", "fraction", "higher", False),
    "p10_time_share": ("10th percentile over jobs of the fraction of time a job holds GPUs", "fraction", "higher", False),
    "median_time_share": ("median over jobs of the fraction of time a job holds GPUs", "fraction", "higher", False),
    "min_throughput_vs_fastest": ("smallest effective throughput of a job as a multiple of its throughput "
                                  "alone on its fastest GPU type", "x fastest alone", "higher", False),
    "p10_throughput_vs_fastest": ("10th percentile of effective throughput as a multiple of the job alone on "
                                  "its fastest type", "x fastest alone", "higher", False),
    "median_throughput_vs_fastest": ("median effective throughput as a multiple of the job alone on its "
                                     "fastest type", "x fastest alone", "higher", False),
    "min_speedup_over_isolated": ("smallest effective throughput of a job as a multiple of its isolated 1/n "
                                  "share of this cluster", "x isolated share", "higher", True),
    "p10_speedup_over_isolated": ("10th percentile of the speed-up over the isolated 1/n share of this cluster",
                                  "x isolated share", "higher", True),
    "median_speedup_over_isolated": ("median speed-up over the isolated 1/n share of this cluster",
                                     "x isolated share", "higher", True),
    "mean_speedup_over_isolated": ("mean speed-up over the isolated 1/n share of this cluster",
                                   "x isolated share", "higher", True),
    "starved_jobs": ("jobs given no GPU time at all", "jobs", "lower", False),
    "jobs_below_isolated": ("jobs getting less than their isolated 1/n share of this cluster", "jobs", "lower", True),
    "slo_missed_jobs": ("jobs whose throughput does not finish their steps within their SLO", "jobs", "lower", False),
    "total_throughput": ("sum of every job's effective throughput", "steps/s", "higher", False),
    "min_normalized_throughput": ("smallest throughput as a multiple of the job's equal share of this cluster "
                                  "(Gavel §4.1)", "x equal share", "higher", True),
    "mean_normalized_throughput": ("mean throughput as a multiple of the equal share of this cluster",
                                   "x equal share", "higher", True),
    "jain_index": ("Jain's fairness index of normalized throughputs (1: all equal)", "index", "higher", True),
    "cost_per_hour": ("price of the busy worker-hours per hour", "cost/h", "lower", False),
    "makespan_s": ("time until the last job finishes at the plan's rates", "s", "lower", False),
    "pair_rows": ("job pairs sharing workers (space sharing)", "pairs", None, False),
    # placement
    "hp_demand_supply_max": ("largest high-priority GPU demand/supply ratio of a region (MAST §5.6)", "ratio",
                             "lower", False),
    "hp_demand_supply_std": ("standard deviation over regions of the high-priority demand/supply ratio", "ratio",
                             "lower", False),
    "hp_gpu_hours_unserved": ("high-priority GPU-hours above supply, summed over regions and GPU types",
                              "GPU-hours", "lower", False),
    "storage_over_capacity_bytes": ("bytes stored above capacity, summed over regions", "bytes", "lower", False),
    "bytes_moved": ("bytes of tables whose home region changes", "bytes", "lower", False),
    "tables_moved": ("tables whose home region changes", "tables", "lower", False),
    "cross_region_bytes": ("bytes jobs read from other regions", "bytes", "lower", False),
    "home_training_rate": ("share of high-priority GPU-hours trained in their home region", "fraction",
                           "higher", False),
    "collocation_rate": ("share of high-priority ML GPU-hours whose job has a region with all its tables",
                         "fraction", "higher", False),
    "storage_utilization_max": ("largest share of a region's storage used", "fraction", "lower", False),
    # reservation
    "shortfall_rru": ("RRU by which reservations fall short of their request under their guarantee", "RRU",
                      "lower", False),
    "buffer_rru": ("RRU held above the requests", "RRU", None, False),
    "servers_moved": ("servers whose reservation changes", "servers", "lower", False),
    "reservations_short": ("reservations below their request under their guarantee", "reservations", "lower", False),
    # binpack
    "placed_workloads": ("pending workloads placed", "workloads", "higher", False),
    "unplaced_workloads": ("pending workloads left waiting", "workloads", "lower", False),
    "preempted_jobs": ("running jobs preempted", "jobs", "lower", False),
    "preempted_gpus": ("GPUs of the preempted jobs", "GPUs", "lower", False),
    "gpus_idle": ("GPUs left free after the plan", "GPUs", None, False),
    # every kind
    "objective": ("the policy's objective (normalized: compare within one instance only)", "objective", None, True),
    "violations": ("constraints the plan violates", "violations", "lower", False),
}

_PATTERNS: list[tuple[re.Pattern[str], str, str, Better, bool]] = [
    (re.compile(r"^utilization_(.+)$"), "share of the {0} workers busy under the plan", "fraction", None, False),
    (re.compile(r"^preempted_count_p(\d)$"), "running jobs of priority {0} preempted", "jobs", "lower", False),
]


def describe(name: str) -> Metric | None:
    """The glossary entry of metric ``name``, or None when the glossary has none."""
    entry = _ENTRIES.get(name)
    if entry is not None:
        return Metric(name, *entry)
    for pattern, meaning, unit, better, relative in _PATTERNS:
        match = pattern.match(name)
        if match:
            return Metric(name, meaning.format(*match.groups()), unit, better, relative)
    return None


def better_direction(name: str) -> Better:
    """``higher``, ``lower`` or None for metric ``name``."""
    entry = describe(name)
    return None if entry is None else entry.better


def names() -> list[str]:
    """Every exact name the glossary holds."""
    return sorted(_ENTRIES)


describe_metric = describe  # the top-level name: fleetplan.describe_metric
