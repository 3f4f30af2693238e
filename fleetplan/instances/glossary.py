"""What each metric means: one entry per name the judges, the solvers' statistics and the
simulators report — its meaning, unit and which direction is better — the one place the
command line (``fleetplan metrics``, ``--explain``, number formats), ``compare`` and
``docs/metrics.md`` read, as solver options have theirs in :mod:`fleetplan.solvers.options`.

The unit decides how a value is printed (:func:`format_value`), never the value: a
``fraction`` is a percentage whether it is 0.68 or 1.10, ``bytes`` are GB/TB, seconds a
readable duration that still names seconds.

A name is looked up in its scope (a problem kind or a simulator: ``utilization`` is GPU time
in ``cluster`` and slot time in ``parsync``), exactly, then by pattern (``utilization_<type>``,
``preempted_count_p<k>``). Standard library only: ``fleetplan metrics`` loads nothing heavy.

>>> describe("min_time_share").unit, describe("min_time_share").better
('fraction', 'higher')
>>> describe("utilization_v100").meaning
'share of the v100 GPUs busy under the plan'
>>> format_value("buffer_share", 1.0956938), format_value("buffer_share", 0.6794)
('109.57%', '67.94%')
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

Better = Literal["higher", "lower"] | None
Role = Literal["metric", "term", "stat", "group"]

# Where a name is reported: the four problem kinds (their judges' metrics and terms, their
# solvers' statistics) and the three simulators (metrics and per-group values).
KIND_SCOPES = ("allocation", "placement", "reservation", "binpack", "gpushare")
SIMULATOR_SCOPES = ("cluster", "parsync", "mast")
SCOPES = (*KIND_SCOPES, *SIMULATOR_SCOPES)
ROLES: dict[str, str] = {
    "metric": "metrics", "term": "objective terms", "stat": "solver statistics (solve --json)",
    "group": "per group (simulate --json: groups)",
}


@dataclass(frozen=True)
class Metric:
    """A metric's meaning (one line), unit and better direction (None: neither).

    ``relative``: relative to the instance it is measured on (it moves when the instance
    grows), so it does not compare across instances; absolute metrics do. ``alert``: a
    ``(op, threshold, note)`` the command line flags when the value is past it.
    """

    name: str
    meaning: str
    unit: str
    better: Better = None
    relative: bool = False
    scope: str = ""
    role: Role = "metric"
    alert: tuple[str, float, str] | None = None

    def alerts(self, value: float | None) -> str | None:
        """The alert's note when ``value`` is past its threshold, else None."""
        if self.alert is None or value is None or not math.isfinite(value):
            return None
        op, threshold, note = self.alert
        past = value < threshold if op == "<" else value > threshold
        return note if past else None


@dataclass(frozen=True)
class _E:
    meaning: str
    unit: str
    better: Better = None
    relative: bool = False
    role: Role = "metric"
    alert: tuple[str, float, str] | None = None


def _term(meaning: str, unit: str = "objective", relative: bool = True) -> _E:
    return _E(meaning, unit, "lower", relative, "term")


def _stat(meaning: str, unit: str) -> _E:
    return _E(meaning, unit, None, False, "stat")


# --- allocation (Gavel) -------------------------------------------------------------------------

_ALLOCATION: dict[str, _E] = {
    # service metrics (comparable across instances)
    "min_time_share": _E("smallest fraction of time a job holds GPUs", "fraction", "higher"),
    "p10_time_share": _E("10th percentile over jobs of the fraction of time a job holds GPUs", "fraction", "higher"),
    "median_time_share": _E("median over jobs of the fraction of time a job holds GPUs", "fraction", "higher"),
    "min_throughput_vs_fastest": _E("smallest effective throughput of a job as a multiple of its throughput alone "
                                    "on its fastest GPU type", "x fastest alone", "higher"),
    "p10_throughput_vs_fastest": _E("10th percentile of effective throughput as a multiple of the job alone on its "
                                    "fastest type", "x fastest alone", "higher"),
    "median_throughput_vs_fastest": _E("median effective throughput as a multiple of the job alone on its fastest "
                                       "type", "x fastest alone", "higher"),
    "min_speedup_over_isolated": _E("smallest effective throughput of a job as a multiple of its isolated 1/n share "
                                    "of this cluster (below 1: some job is worse off than with 1/n of every GPU)",
                                    "x isolated share", "higher", True,
                                    alert=("<", 1.0 - 1e-6, "some job gets less than its isolated 1/n share")),
    "p10_speedup_over_isolated": _E("10th percentile of the speed-up over the isolated 1/n share of this cluster",
                                    "x isolated share", "higher", True),
    "median_speedup_over_isolated": _E("median speed-up over the isolated 1/n share of this cluster",
                                       "x isolated share", "higher", True),
    "mean_speedup_over_isolated": _E("mean speed-up over the isolated 1/n share of this cluster",
                                     "x isolated share", "higher", True),
    "starved_jobs": _E("jobs given no GPU time at all", "jobs", "lower",
                       alert=(">", 0.0, "some jobs get no GPU time")),
    "jobs_below_isolated": _E("jobs getting less than their isolated 1/n share of this cluster", "jobs", "lower",
                              True),
    "slo_missed_jobs": _E("jobs whose throughput does not finish their steps within their SLO", "jobs", "lower",
                          alert=(">", 0.0, "some jobs miss their SLO")),
    "total_throughput": _E("sum of every job's effective throughput (max-throughput's objective)", "steps/s",
                           "higher"),
    "min_normalized_throughput": _E("smallest throughput as a multiple of the job's equal share of this cluster "
                                    "(Gavel §4.1; LAS's objective)", "x equal share", "higher", True),
    "mean_normalized_throughput": _E("mean throughput as a multiple of the equal share of this cluster",
                                     "x equal share", "higher", True),
    "jain_index": _E("Jain's fairness index of normalized throughputs (1: all equal)", "index", "higher", True),
    "cost_per_hour": _E("price of the busy GPU-hours per hour (an idle GPU costs nothing here: see "
                        "fleet_cost_per_hour)", "cost/h", "lower"),
    "fleet_cost_per_hour": _E("price of every GPU of the cluster per hour, busy or idle (count x cost_per_hour)",
                              "cost/h", "lower"),
    "fleet_cost_per_month": _E("fleet_cost_per_hour over a month of 730 hours", "cost/month", "lower"),
    "makespan_s": _E("time until the last job finishes its steps at the plan's rates (min-makespan's objective)",
                     "s", "lower"),
    "pair_rows": _E("job pairs sharing GPUs (space sharing)", "pairs"),
    "bottlenecked_fraction": _E("share of jobs whose throughput no reallocation can raise without lowering "
                                "another's (water filling's bottleneck test)", "fraction", "higher", True),
    "pareto_efficient": _E("1 when every job is bottlenecked (the plan is Pareto-efficient), else 0", "boolean",
                           "higher"),
    "min_entity_share": _E("smallest over entities of their jobs' summed normalized throughput per unit of entity "
                           "weight (hierarchical policies)", "x equal share", "higher", True),
    # objective terms, one per policy (Gavel Table 1)
    "min_weighted_normalized_throughput": _E("smallest normalized throughput times scale factor over weight "
                                             "(weighted max-min fairness's objective)", "x equal share", "higher",
                                             True, "term"),
    "min_hierarchical_weighted_score": _E("smallest job score over its weight inside the entity hierarchy "
                                          "(hierarchical water filling's objective)", "x equal share", "higher",
                                          True, "term"),
    "max_finish_time_fairness": _E("largest finish-time ratio rho: time to finish under the plan over under the "
                                   "isolated share (finish-time fairness's objective; 1: as isolated)", "ratio",
                                   "lower", True, "term"),
    "arrival_weighted_fastest_fraction": _E("sum over jobs of throughput as a fraction of the fastest type, "
                                            "weighted by arrival order (FIFO's objective)", "score", "higher", True,
                                            "term"),
    "shortest_duration_s": _E("time the shortest job needs to finish at the plan's rate (shortest-job-first's "
                              "objective)", "s", "lower", False, "term"),
    "throughput_per_cost": _E("total throughput per unit of cost rate (min-cost's objective)", "steps/s per cost/h",
                              "higher", False, "term"),
    # solver statistics
    "lp_columns": _stat("columns (variables) of the LP handed to the solver", "columns"),
    "lp_jobs": _stat("jobs (or classes of identical jobs) in the LP", "jobs"),
    "space_s": _stat("time building the LP's variable space", "s"),
    "build_s": _stat("time building the model", "s"),
    "solve_s": _stat("time inside the LP/MIP solver", "s"),
    "separable_s": _stat("time of the separable (closed-form) solve", "s"),
    "separable_buckets": _stat("buckets of the separable solve's price search", "buckets"),
    "separable_rounds": _stat("rounds of the separable solve", "rounds"),
    "separable_free": _stat("jobs left free by the separable solve's last round", "jobs"),
    "separable_probes": _stat("separable probes made by water filling instead of LPs", "probes"),
    "ipm_iterations": _stat("interior-point iterations", "iterations"),
    "ipm_s": _stat("time in the interior-point method", "s"),
    "pairs_possible": _stat("job pairs that could share GPUs (space sharing)", "pairs"),
    "pairs_kept": _stat("job pairs kept after pruning dominated pairs", "pairs"),
    "iterations": _stat("water-filling iterations (levels raised)", "iterations"),
    "event_iterations": _stat("water-filling iterations solved by the event method instead of an LP", "iterations"),
    "lp_solves": _stat("LPs solved", "LPs"),
    "classes": _stat("classes of identical jobs the solver aggregated", "classes"),
    "bottlenecked_jobs": _stat("jobs found bottlenecked", "jobs"),
    "ftf_steps": _stat("bisection steps of finish-time fairness", "steps"),
    "probes": _stat("feasibility probes of the binary search", "probes"),
    "ties_qp": _stat("1 when a heterogeneity-agnostic policy's ties were spread by the quadratic program, 0 by "
                     "the cheaper method", "boolean"),
}

# --- placement (Tetris, MAST §3) ----------------------------------------------------------------

_PLACEMENT: dict[str, _E] = {
    "hp_demand_supply_max": _E("largest high-priority GPU demand/supply ratio of a region (MAST §5.6; above 1: "
                               "overloaded)", "ratio", "lower", alert=(">", 1.0, "a region's high-priority demand "
                                                                             "exceeds its supply")),
    "hp_demand_supply_std": _E("standard deviation over regions of the high-priority demand/supply ratio (§5.6)",
                               "ratio", "lower"),
    "hp_demand_supply_overall": _E("high-priority GPU demand over supply of the whole fleet (the level a perfect "
                                   "balance reaches)", "ratio", None),
    "hp_gpu_hours_in_regions_without_gpus": _E("high-priority GPU-hours whose region has no GPUs", "GPU-hours",
                                               "lower"),
    "hp_gpu_hours_unserved": _E("high-priority GPU-hours above supply, summed over regions and GPU types",
                                "GPU-hours", "lower"),
    "hp_gpu_hours_split_share": _E("share of high-priority GPU-hours in ML jobs whose tables are split across "
                                   "regions (their demand counts nowhere in the objective)", "fraction", "lower"),
    "hp_demand_supply_max_split_counted": _E("hp_demand_supply_max with each split job counted in the region "
                                             "holding most of its bytes", "ratio", "lower"),
    "hp_demand_supply_max_per_type": _E("largest high-priority demand/supply ratio of a (region, GPU type) with "
                                        "supply", "ratio", "lower"),
    "hp_gpu_hours_without_their_type": _E("high-priority GPU-hours placed in a region without their GPU type",
                                          "GPU-hours", "lower"),
    "hp_demand_supply_total_max_type": _E("fleet-wide demand/supply of the most loaded GPU type (above 1 no "
                                          "placement brings the per-type maximum to 1)", "ratio", None),
    "overload_combined_high_priority": _E("Expression 8's overload with all high priority levels combined "
                                          "(split jobs left out)", "objective", "lower"),
    "objective_constant_floor": _E("part of the objective no placement can remove (sigmoid(0) = 1/2 of every "
                                   "demand slice): read gaps against objective_above_floor", "objective", None,
                                   True),
    "objective_above_floor": _E("the objective minus objective_constant_floor", "objective", "lower", True),
    "home_training_rate": _E("share of high-priority ML GPU-hours trained in their home region (MAST §5.6)",
                             "fraction", "higher"),
    "collocation_rate": _E("share of high-priority ML GPU-hours whose job has a region with all its tables and "
                           "its GPU type", "fraction", "higher"),
    "collocation_rate_first_time": _E("share of first-time (not recurring) ML GPU-hours whose job has a region "
                                      "with all its tables and its GPU type", "fraction", "higher"),
    "collocation_rate_jobs": _E("share of ML jobs (counted, not weighted) with a region holding all their tables "
                                "and their GPU type", "fraction", "higher"),
    "candidate_regions_mean": _E("mean number of regions holding all of an ML job's tables and its GPU type "
                                 "(replicas add regions)", "regions", "higher"),
    "ml_jobs_no_feasible_region": _E("ML jobs with no region holding all their tables and their GPU type",
                                     "jobs", "lower"),
    "hp_ml_jobs_no_feasible_region": _E("high-priority ML jobs with no region holding all their tables and their "
                                        "GPU type", "jobs", "lower"),
    "ml_jobs_split": _E("planned ML jobs whose tables sit in several regions (no home region)", "jobs", "lower"),
    "cross_region_bytes": _E("bytes jobs read from other regions", "bytes", "lower"),
    "home_bytes": _E("bytes of the tables' home copies", "bytes"),
    "replica_bytes": _E("bytes of the replicas (§3.5)", "bytes"),
    "replica_storage_overhead": _E("replica bytes as a share of the home copies' bytes (MAST: +75-125%)",
                                   "fraction", "lower"),
    "storage_utilization_max": _E("largest share of a region's storage used", "fraction", "lower",
                                  alert=(">", 1.0, "a region stores more than its capacity")),
    "storage_over_capacity_bytes": _E("bytes stored above capacity, summed over regions", "bytes", "lower"),
    # Moves are what a plan pays (within the quota) for what it gains: neither direction is better.
    "bytes_moved": _E("bytes of the tables whose home region differs from today's (within the daily move quota)",
                      "bytes"),
    "tables_moved": _E("tables whose home region differs from today's (a table moved twice, or moved and moved "
                       "back, counts once or not at all: the hill climb's list of moves can be longer)", "tables"),
    "moves_listed": _E("moves the plan lists (the hill climb lists every move in order, so a table can appear "
                       "twice; exact solvers list one move per table moved)", "moves"),
    "move_quota_bytes": _E("the daily move quota in bytes (the instance's)", "bytes"),
    # objective terms (Figure 4, weighted)
    "traffic": _term("w1 x bytes read across regions (Expression 1)"),
    "gpu_balance": _term("w2 x sum of w_p (demand share - supply share)^2 over regions, GPU types and priorities "
                         "(Expression 7)"),
    "gpu_overload": _term("w2 x sum of w_p x demand share x sigmoid(overload / tau) (Expression 8)"),
    "storage_balance": _term("w3 x sum over regions of (storage share - capacity share)^2 (Expression 9)"),
    # solver statistics
    "moves": _stat("table moves the hill climb applied (a table can move more than once)", "moves"),
    "evaluations": _stat("moves whose gain the hill climb computed", "evaluations"),
    "batches": _stat("batches of moves the hill climb applied together", "batches"),
    "refused_undo": _stat("moves refused because they undid an earlier move", "moves"),
    "estimated": _stat("gains first estimated, then recomputed before a move", "gains"),
    "over_quota": _stat("moves skipped because they exceed the move quota", "moves"),
    "requeued": _stat("tables put back in the queue with a recomputed gain", "tables"),
    "climb_s": _stat("time of the hill climb", "s"),
    "total_gain": _stat("objective the hill climb removed", "objective"),
    "climb_gain": _stat("objective the hill climb removed before the neighbourhood search", "objective"),
    "first_move_s": _stat("seconds from the climb's start to its first applied move", "s"),
    "components": _stat("independent components of the instance the exact model splits into", "components"),
    "parts": _stat("models solved (components, or the whole instance)", "models"),
    "exact_model": _stat("1 when the model is exact (no piecewise-linear approximation was needed)", "boolean"),
    "polish_gain": _stat("objective removed by polishing the MIP's plan with the hill climb", "objective"),
    "gap_above_floor": _stat("gap to the bound, relative to the objective above its constant floor", "fraction"),
    "instance_bound": _stat("lower bound on the objective from the instance alone (per GPU group, forced traffic, "
                            "storage; never negative), without the MIP", "objective"),
    "solver_bound": _stat("lower bound the MIP or CP-SAT solver proved itself (the reported bound is the larger "
                          "of this and instance_bound)", "objective"),
    "kept_warm_start": _stat("1 when the warm start beat the MIP's plan and was kept", "boolean"),
    "fallback_parts": _stat("parts the MIP did not solve in time (their warm start is kept)", "models"),
    "neighbourhoods": _stat("neighbourhoods the search re-optimised exactly", "neighbourhoods"),
    "neighbourhoods_kept": _stat("re-optimised neighbourhoods whose improvement was kept", "neighbourhoods"),
    "lns_gain": _stat("objective the neighbourhood search removed after the climb", "objective"),
    "lns_mip_s": _stat("time in the neighbourhood MIPs", "s"),
    "lns_build_s": _stat("time building the neighbourhood MIPs", "s"),
    "group_splits": _stat("GPU groups (type x priority) whose every job the search split at once, removing the "
                          "group's Expressions 7-8", "groups"),
}

# --- reservation (RAS, MAST §2) -----------------------------------------------------------------

_RESERVATION: dict[str, _E] = {
    "reservations": _E("reservations in the instance", "reservations"),
    "servers": _E("servers in the region", "servers"),
    "requested_rru": _E("RRU the reservations request, summed", "RRU"),
    "capacity_rru": _E("RRU the reservations hold, summed", "RRU"),
    "guaranteed_rru": _E("RRU each reservation keeps with its worst fault domain (or datacenter) down, summed",
                         "RRU", "higher"),
    "buffer_rru": _E("RRU held above the requests, summed over reservations", "RRU"),
    "buffer_share": _E("buffer_rru as a share of the requested RRU", "fraction"),
    "shortfall_rru": _E("RRU by which reservations fall short of their request with their worst domain down",
                        "RRU", "lower", alert=(">", 1e-9, "some reservations fall short of their guarantee")),
    "reservations_short": _E("reservations below their request with their worst domain down", "reservations",
                             "lower"),
    "guarantee_ratio_min": _E("smallest guaranteed RRU over requested RRU of a reservation (below 1: short)",
                              "ratio", "higher"),
    "fault_domains_per_reservation": _E("mean number of fault domains a reservation holds servers in",
                                        "fault domains", "higher"),
    "datacenters_per_ml_reservation": _E("mean number of datacenters an ML reservation spans", "datacenters",
                                         "lower"),
    "largest_fault_domain_share": _E("mean over reservations of the share of their RRU in their largest fault "
                                     "domain", "fraction", "lower"),
    "first_choice_share": _E("share of assigned servers of their reservation's first-choice type", "fraction",
                             "higher"),
    "ratio_deviation_rru": _E("storage RRU off the requested storage/compute ratio, summed over reservations and "
                              "datacenters", "RRU", "lower"),
    "servers_moved": _E("servers taken out of the reservation they are in today", "servers", "lower"),
    "servers_added": _E("free servers given to a reservation", "servers"),
    "servers_idle": _E("available servers left in the free pool", "servers"),
    "servers_in_maintenance": _E("servers in maintenance (left where they are)", "servers"),
    "disruption_budget": _E("servers that may be taken out of their reservation (the instance's)", "servers"),
    # objective terms
    "moves": _term("w_moves x servers taken out of today's reservation"),
    "buffer": _term("w_buffer x RRU above the requests"),
    "spread": _term("w_spread x RRU of general reservations in their largest fault domain"),
    "compactness": _term("w_compactness x datacenters ML reservations span"),
    "preference": _term("w_preference x preference ranks of the assigned server types"),
    "ratio": _term("w_ratio x storage/compute ratio deviation (RRU)"),
    # solver statistics (the aggregated model's size)
    "keys": _stat("(server type, fault domain) groups of interchangeable servers", "groups"),
    "groups": _stat("groups of interchangeable servers in the aggregated model", "groups"),
    "columns": _stat("variables of the aggregated model", "columns"),
    "rows": _stat("constraints of the aggregated model", "rows"),
    "nonzeros": _stat("non-zero coefficients of the aggregated model", "non-zeros"),
}

# --- binpack (RMS, MAST §4.3) -------------------------------------------------------------------

_BINPACK: dict[str, _E] = {
    "objective": _E("the RMS score (§4.3): 64^8 per workload waiting plus each preempted job's level weight "
                    "64^(7-priority) and youth, a float encoding of the exact order (placed, then preemptions per "
                    "priority, then youth) that loses its low digits on large counts", "score", "lower"),
    "placed_workloads": _E("pending workloads placed", "workloads", "higher"),
    "unplaced_workloads": _E("pending workloads left waiting", "workloads", "lower",
                             alert=(">", 0.0, "some workloads are left waiting")),
    "preempted_jobs": _E("running jobs preempted, all priorities", "jobs", "lower"),
    "preempted_gpus": _E("GPUs the preempted jobs held", "GPUs", "lower"),
    "preempted_youth": _E("sum over preempted jobs of 1/(1 + hours running): preempting young jobs costs more "
                          "(§4.3)", "youth", "lower"),
    "placed_gpus": _E("GPUs the placed workloads take", "GPUs", "higher"),
    "machines_used": _E("machines the placed jobs use, summed over jobs (fewer: tighter packing)", "machines",
                        "lower"),
    "racks_used": _E("racks the placed jobs use, summed over jobs", "racks", "lower"),
    "rack_spread": _E("racks used beyond one per placed job", "racks", "lower"),
    "gpu_allocation_before": _E("share of the region's GPUs in use before the plan", "fraction"),
    "gpu_allocation_after": _E("share of the region's GPUs in use after the plan", "fraction", "higher"),
    "gpus_idle": _E("GPUs left free after the plan", "GPUs"),
    # objective terms: the RMS score (§4.3), a float encoding of the lexicographic order
    "unplaced": _term("64^8 per workload left waiting (more than any preemption)", "score", False),
    "youth": _term("sum of 1/(1 + hours running) over preempted jobs (the tie-break among equal counts)",
                   "score", False),
    # solver statistics
    "placed": _stat("workloads the solver placed", "workloads"),
    "latency_median_ms": _stat("median wall time to place one workload", "ms"),
    "latency_p95_ms": _stat("95th percentile of the wall time to place one workload", "ms"),
    "latency_cpu_median_ms": _stat("median CPU time to place one workload", "ms"),
    "latency_cpu_p95_ms": _stat("95th percentile of the CPU time to place one workload", "ms"),
    "cache_lookups": _stat("negative-cache lookups (shapes that failed earlier in the pass)", "lookups"),
    "cache_hits": _stat("negative-cache hits: workloads skipped without a search", "hits"),
    "cache_hit_rate": _stat("share of negative-cache lookups that hit", "fraction"),
}

# --- cluster simulator (Gavel §5, §7; Astraea §6) -----------------------------------------------

_CLUSTER: dict[str, _E] = {
    "jobs": _E("jobs in the trace (per group: the group's jobs)", "jobs"),
    "jobs_finished": _E("jobs that finished before the simulation stopped", "jobs", "higher"),
    "avg_jct_s": _E("mean job completion time (end - submit) of finished jobs", "s", "lower"),
    "median_jct_s": _E("median job completion time of finished jobs", "s", "lower"),
    "p95_jct_s": _E("95th percentile job completion time of finished jobs", "s", "lower"),
    "avg_jct_steady_s": _E("mean JCT of the steady-state window of jobs (Gavel §7.1)", "s", "lower"),
    "steady_jobs_unfinished": _E("jobs of the steady-state window that did not finish", "jobs", "lower",
                                 alert=(">", 0.0, "the steady-state JCT leaves out unfinished jobs")),
    "makespan_s": _E("time from the first submission to the last job's end", "s", "lower"),
    "avg_ftf_rho": _E("mean finish-time fairness rho = JCT / time with the isolated 1/N share (Themis; 1: as "
                      "isolated)", "ratio", "lower"),
    "max_ftf_rho": _E("largest finish-time fairness rho of a job", "ratio", "lower"),
    "avg_ltgf_job": _E("mean long-term GPU-time fairness of a job: GPU time attained over its fair share "
                       "(Astraea eq. 15; 1: its fair share)", "ratio", "higher"),
    "sharing_loss_fraction": _E("share of jobs whose LTGF is below 0.95 (Astraea §6.3's sharing loss)", "fraction",
                                "lower"),
    "avg_slowdown": _E("mean (pending + running) / running time of finished jobs (Astraea §6.1.4)", "ratio",
                       "lower"),
    "preemptions": _E("preemptions of running jobs", "preemptions", "lower"),
    "preemptions_per_job": _E("preemptions per job", "preemptions", "lower"),
    "overhead_s": _E("progress lost to checkpoint restarts after preemption, summed over jobs", "s", "lower"),
    "overhead_fraction": _E("checkpoint overhead as a share of the summed JCT of finished jobs", "fraction",
                            "lower"),
    "utilization": _E("share of GPU time busy over the run", "fraction", "higher"),
    "tenant_unfairness_ratio": _E("share of (tenant, window) cells with demand whose tenant got less than its fair "
                                  "share (Astraea §6.3)", "fraction", "lower"),
    "min_ltgf_tenant": _E("smallest tenant LTGF over the run: GPU time attained over fair share (Astraea eq. 12)",
                          "ratio", "higher"),
    "lp_solves": _E("allocation LPs Gavel's scheduler solved", "LPs"),
    "lp_solve_s": _E("time Gavel's scheduler spent solving LPs", "s", "lower"),
    # per group (tenant, final state, GPUs per job)
    "quota": _E("the tenant's GPU quota", "GPUs", role="group"),
    "jct_s": _E("the JCT at this percentile of finished jobs (group jct_percentile)", "s", "lower", role="group"),
    "ltgf": _E("the tenant's GPU time attained over its fair share over the run", "ratio", "higher", role="group"),
    "unfairness_ratio": _E("share of the tenant's windows with demand below its fair share", "fraction", "lower",
                           role="group"),
}

# --- parsync simulator (ParSync, ATC'21 §4-6) ---------------------------------------------------

_PARSYNC: dict[str, _E] = {
    "tasks_submitted": _E("tasks submitted", "tasks"),
    "tasks_committed": _E("tasks committed to a slot", "tasks", "higher"),
    "unfinished_tasks": _E("tasks submitted but not committed by the end (drain_s too short)", "tasks", "lower",
                           alert=(">", 0.0, "the backlog did not drain")),
    "finished": _E("1 when every submitted task was committed, else 0", "boolean", "higher"),
    "makespan_s": _E("time of the last commit", "s", "lower"),
    "delay_mean_s": _E("mean scheduling delay: commit time minus submission time", "s", "lower"),
    "delay_median_s": _E("median scheduling delay", "s", "lower"),
    "delay_p90_s": _E("90th percentile scheduling delay", "s", "lower"),
    "conflicts": _E("commit requests the master rejected because the slot was taken", "conflicts", "lower"),
    "conflict_rate": _E("rejected requests as a share of all requests", "fraction", "lower"),
    "first_round_conflicts": _E("conflicts on tasks' first commit (not re-decisions)", "conflicts", "lower"),
    "throughput": _E("tasks committed per second", "tasks/s", "higher"),
    "quality": _E("share of tasks placed on a preferred slot (§6)", "fraction", "higher"),
    "mean_score": _E("mean score of the slots tasks were placed on", "score", "higher"),
    "utilization_mean": _E("mean share of slots busy, over the sampled times", "fraction"),
    "backlog_mean": _E("mean tasks submitted and not yet committed", "tasks", "lower"),
    "backlog_max": _E("largest backlog of tasks submitted and not yet committed", "tasks", "lower"),
    "staleness_mean_s": _E("mean age of a scheduler's view of the state (time since its partitions synced)", "s",
                           "lower"),
    "staleness_min_s": _E("smallest mean view age seen", "s", "lower"),
    "staleness_max_s": _E("largest view age seen", "s", "lower"),
    "jsd_mean_s": _E("mean job scheduling delay: submission to all its tasks committed (Table 1's JSD)", "s",
                     "lower"),
    "jct_mean_s": _E("mean job completion time: submission to all its tasks completed (Table 1's JCT)", "s",
                     "lower"),
    "stet_mean_s": _E("mean over jobs of the sum of their tasks' execution times (Table 1's STET)", "s", "lower"),
    "quality_first_share": _E("share of Adaptive's decisions made quality-first", "fraction"),
    # per group (scheduler, phase, Figure 4's groups)
    "committed": _E("tasks the scheduler committed", "tasks", "higher", role="group"),
    "conflicts_per_s": _E("rejected requests per second in the phase", "conflicts/s", "lower", role="group"),
    "utilization": _E("share of slots busy in the phase", "fraction", role="group"),
}

# --- mast simulator (MAST §4.2-4.3, §5.5-5.6) ---------------------------------------------------

_MAST: dict[str, _E] = {
    "workloads": _E("workloads submitted in the measured hours", "workloads"),
    "initial_running": _E("workloads running at the start", "workloads"),
    "initial_dropped": _E("initially running workloads that did not fit the fleet and were dropped", "workloads",
                          "lower"),
    "regions": _E("regions of the fleet", "regions"),
    "gpus": _E("GPUs of the fleet", "GPUs"),
    "scheduling_events": _E("waits in the queue: a submission, or a preemption (§5.5)", "events"),
    "started": _E("scheduling events that ended with a start", "events", "higher"),
    "waiting_at_end": _E("scheduling events still waiting at the end", "events", "lower",
                         alert=(">", 0.0, "workloads still waiting at the end (their waits are lower bounds)")),
    "slo_violation_rate": _E("share of decided within-quota events that waited longer than the SLO", "fraction",
                             "lower"),
    "slo_violation_rate_high": _E("slo_violation_rate of priority levels 0-2", "fraction", "lower"),
    "max_slo_violation_rate_over_time": _E("largest SLO violation rate of a time bucket", "fraction", "lower"),
    "max_slo_violation_rate_high_over_time": _E("largest high-priority SLO violation rate of a time bucket",
                                                "fraction", "lower"),
    "latency_p50_minutes": _E("median start latency of within-quota events (the SLO's wait)", "min", "lower"),
    "latency_p95_minutes": _E("95th percentile start latency of within-quota events", "min", "lower"),
    "wait_p50_minutes": _E("median whole wait in the queue, over-quota time and data replication included", "min",
                           "lower"),
    "wait_p95_minutes": _E("95th percentile whole wait in the queue", "min", "lower"),
    "slo_minutes": _E("the SLO on the start latency of within-quota workloads (the scenario's)", "min"),
    "gpu_allocation_rate": _E("share of GPU-hours allocated over the measured hours (§5.2)", "fraction", "higher"),
    "preemptions": _E("running workloads preempted", "preemptions", "lower"),
    "data_moves": _E("data replications started so a workload could run in another region", "moves", "lower"),
    "gms_passes": _E("GMS queue scans", "passes"),
    "gpu_hours_run": _E("GPU-hours workloads ran, warm-up included", "GPU-hours"),
    "gpu_hours_finished_work": _E("GPU-hours of work that finished", "GPU-hours", "higher"),
    "gpu_hours_wasted": _E("GPU-hours lost to preemption (progress since the last checkpoint)", "GPU-hours",
                           "lower"),
    "gpu_hours_unfinished_work": _E("GPU-hours of work done but not finished at the end", "GPU-hours"),
    "conservation_error_gpu_hours": _E("GPU-hours run minus finished + wasted + unfinished (0: the books balance)",
                                       "GPU-hours", None),
    # per priority level
    "events": _E("scheduling events of the priority level", "events", role="group"),
    "within_quota_events": _E("scheduling events found within their tenant's quota", "events", role="group"),
}

# --- gpushare (FGD, ATC'23) ----------------------------------------------------------------------

_GPUSHARE: dict[str, _E] = {
    "objective": _E("GPU milli the placed tasks take (1,000 per whole GPU)", "milli", "higher", True),
    "gpu_milli_allocated": _E("GPU milli the placed tasks take", "milli", "higher", True, "term"),
    "tasks": _E("tasks in the instance", "tasks"),
    "tasks_placed": _E("tasks placed", "tasks", "higher", True),
    "tasks_pending": _E("tasks left pending (no node could take them when they arrived)", "tasks", "lower", True),
    "tasks_tried": _stat("tasks the policy tried before it stopped (all but on a time limit)", "tasks"),
    "pattern_rounds": _stat("column-generation rounds of offline-patterns' bound", "rounds"),
    "patterns": _stat("node patterns offline-patterns generated (its master program's columns)", "columns"),
    "bound_s": _stat("seconds offline-patterns spent on its bound's rounds", "s"),
    "relaxation_milli": _stat("GPU milli of the last linear relaxation of offline-patterns' master program",
                              "milli"),
    "greedy_milli": _stat("GPU milli of the better of offline-patterns' two greedy starting plans", "milli"),
    "rounded_milli": _stat("GPU milli offline-patterns' rounding of the relaxation placed, before the greedy "
                           "fills the rest", "milli"),
    "gpu_milli_capacity": _E("GPU milli of the cluster (1,000 per GPU)", "milli"),
    "gpu_milli_requested": _E("GPU milli all tasks ask for, placed or not", "milli"),
    "gpu_allocated_share": _E("GPU milli allocated as a share of the cluster's (the FGD paper's GPU allocation "
                              "rate)", "fraction", "higher"),
    "cpu_allocated_share": _E("CPU allocated as a share of the cluster's", "fraction"),
    "memory_allocated_share": _E("memory allocated as a share of the cluster's", "fraction"),
    "fragmentation_milli": _E("idle GPU milli the expected task mix cannot use (the FGD paper's fragmentation, "
                              "summed over nodes)", "milli", "lower", True),
    "fragmentation_share": _E("fragmentation as a share of the cluster's GPU milli", "fraction", "lower"),
    "fragmentation_of_idle": _E("fragmentation as a share of the idle GPU milli (the FGD paper's fragmentation "
                                "rate)", "fraction", "lower"),
    # the gpushare simulator (the paper's inflation experiment): percents of the cluster's GPU milli
    "tasks_arrived": _E("tasks that arrived (the trace shuffled, then inflated)", "tasks"),
    "idle_gpu_pct_cpu_stranded": _E("idle GPU milli at the end on nodes with less CPU left than any GPU shape of "
                                    "the mix asks for, % of the cluster's", "%", "lower"),
    "trace_tasks": _E("tasks in the trace before inflation", "tasks"),
    "gpus": _E("GPUs of the cluster", "GPUs"),
    "arrived_gpu_pct": _E("GPU demand that arrived, % of the cluster's GPU milli", "%"),
    "allocated_gpu_pct": _E("GPU milli allocated at the end, % of the cluster's", "%", "higher"),
    "fragmentation_gpu_pct": _E("GPU milli fragmented at the end, % of the cluster's", "%", "lower"),
    "fragmentation_of_idle_pct": _E("fragmented share of the idle GPU milli at the end, %", "%", "lower"),
    "unallocated_gpu_pct": _E("arrived GPU demand left pending, % of the cluster's GPU milli", "%", "lower"),
    "allocated_gpu_pct_at_100": _E("GPU milli allocated once the arrived demand reached 100 % of the cluster's, %",
                                   "%", "higher"),
    "fragmentation_gpu_pct_at_100": _E("GPU milli fragmented once the arrived demand reached 100 % of the "
                                       "cluster's, %", "%", "lower"),
}

# --- every kind ---------------------------------------------------------------------------------

_COMMON: dict[str, _E] = {
    "objective": _E("the plan's objective as the judge scores it (normalized objectives compare within one "
                    "instance only)", "objective", None, True),
    "violations": _E("constraints the plan violates", "violations", "lower",
                     alert=(">", 0.0, "the plan violates constraints")),
}

_TABLES: dict[str, dict[str, _E]] = {
    "allocation": _ALLOCATION, "placement": _PLACEMENT, "reservation": _RESERVATION, "binpack": _BINPACK,
    "gpushare": _GPUSHARE, "cluster": _CLUSTER, "parsync": _PARSYNC, "mast": _MAST,
}

# name pattern -> (meaning with {0}, unit, better, role); per scope
_PATTERNS: dict[str, list[tuple[re.Pattern[str], str, str, Better, Role]]] = {
    "allocation": [(re.compile(r"^utilization_(.+)$"), "share of the {0} GPUs busy under the plan", "fraction",
                    None, "metric")],
    "binpack": [
        (re.compile(r"^preempted_count_p(\d)$"), "running jobs of priority {0} preempted (0 is the highest)", "jobs",
         "lower", "metric"),
        (re.compile(r"^preempted_p(\d)$"), "64^(7-{0}) per preempted job of priority {0}: the RMS score's level "
                                           "weight", "score", "lower", "term"),
    ],
    "mast": [(re.compile(r"^slo_violation_rate_p(\d)$"), "SLO violation rate of priority level {0}", "fraction",
              "lower", "group")],
}
# Pattern examples for listings and the docs.
_PATTERN_EXAMPLES = {"utilization_(.+)": "utilization_<GPU type>", "preempted_count_p(\\d)": "preempted_count_p<k>",
                     "preempted_p(\\d)": "preempted_p<k>", "slo_violation_rate_p(\\d)": "slo_violation_rate_p<k>"}


def _metric(name: str, entry: _E, scope: str) -> Metric:
    return Metric(name, entry.meaning, entry.unit, entry.better, entry.relative, scope, entry.role, entry.alert)


def describe(name: str, scope: str | None = None) -> Metric | None:
    """The glossary entry of metric ``name`` in ``scope`` (a kind or simulator; None: the
    first scope that has it), or None when the glossary has none.

    >>> entry = describe_metric("min_time_share")
    >>> entry.unit, entry.better
    ('fraction', 'higher')
    """
    scopes = [scope] if scope is not None else list(SCOPES)
    for where in scopes:
        entry = _TABLES.get(where, {}).get(name)
        if entry is not None:
            return _metric(name, entry, where)
    if name in _COMMON:
        return _metric(name, _COMMON[name], scope or "")
    for where in scopes:
        for pattern, meaning, unit, better, role in _PATTERNS.get(where, []):
            match = pattern.match(name)
            if match:
                return Metric(name, meaning.format(*match.groups()), unit, better, False, where, role)
    return None


describe_metric = describe  # the top-level name: fleetplan.describe_metric


def better_direction(name: str, scope: str | None = None) -> Better:
    """``higher``, ``lower`` or None for metric ``name``."""
    entry = describe(name, scope)
    return None if entry is None else entry.better


def names(scope: str | None = None) -> list[str]:
    """Every exact name the glossary holds (of one scope, or all)."""
    tables = [_TABLES[scope]] if scope is not None else list(_TABLES.values())
    return sorted({name for table in tables for name in table} | set(_COMMON))


def entries(scope: str) -> Iterator[Metric]:
    """A scope's entries — metrics, terms, statistics, per-group values, then name patterns
    (shown as ``utilization_<GPU type>``) — each group in name order."""
    if scope not in _TABLES:
        raise KeyError(scope)
    table = _TABLES[scope]
    rows = [_metric(name, entry, scope) for name, entry in table.items()]
    if scope in KIND_SCOPES:
        rows += [_metric(name, entry, scope) for name, entry in _COMMON.items() if name not in table]
    for pattern, meaning, unit, better, role in _PATTERNS.get(scope, []):
        shown = _PATTERN_EXAMPLES.get(pattern.pattern.strip("^$"), pattern.pattern)
        rows.append(Metric(shown, meaning.format("<" + shown.rsplit("<", 1)[-1].rstrip(">") + ">"), unit, better,
                           False, scope, role))
    order = list(ROLES)
    yield from sorted(rows, key=lambda m: (order.index(m.role), m.name))


# --- formats: one per unit -----------------------------------------------------------------------

def fmt_number(value: float, digits: int = 6) -> str:
    """A number to ``digits`` significant digits; whole numbers, and any number from 1,000 up to
    1e15, in full with thousands marks (18,000 GPU-hours, never 1.8e+04)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    if 1e3 <= abs(value) < 1e15:
        return f"{value:,.0f}" if abs(value) >= 10 ** (digits - 1) else f"{value:,.{digits - 4}f}"
    return f"{value:.{digits}g}"


def fmt_bytes(value: float) -> str:
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.3g} B"


def fmt_duration(seconds: float) -> str:
    """A duration in seconds, readable: up to two minutes in seconds, then minutes, hours, and
    from two days on hours with the days beside them (``341 h = 14.2 d``), never bare days."""
    magnitude = abs(seconds)
    if magnitude == 0:
        return "0 s"
    if magnitude < 1:
        return f"{seconds * 1000:.3g} ms"
    if magnitude < 120:
        return f"{seconds:.3g} s"
    if magnitude < 7200:
        return f"{seconds / 60:.3g} min"
    if magnitude < 2 * 86400:
        return f"{seconds / 3600:.3g} h"
    return f"{seconds / 3600:,.0f} h = {seconds / 86400:.3g} d"


def fmt_percent(value: float) -> str:
    return f"{100 * value:.2f}%"


def fmt_money(value: float) -> str:
    """An amount of money as a planner writes it: cents below 100,000 (27,696.20, 37.94), whole
    units above (1,234,567), three significant digits below 1 (0.057).

    >>> fmt_money(27696.2), fmt_money(1234567.8), fmt_money(0.0571)
    ('27,696.20', '1,234,568', '0.0571')
    """
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if magnitude < 1:
        return f"{value:.3g}"
    return f"{value:,.0f}" if magnitude >= 1e5 else f"{value:,.2f}"


_UNIT_FORMATS = {
    "fraction": fmt_percent,
    "bytes": fmt_bytes,
    "s": fmt_duration,
    "min": lambda value: f"{value:.3g} min" if abs(value) < 120 else f"{value:,.0f} min = {value / 60:.3g} h",
    "ms": lambda value: f"{value:.3g} ms",
    "cost/h": fmt_money,
    "cost/month": fmt_money,
}
# Units printed to 8 significant digits (the judge's objective and terms, scores).
_PRECISE_UNITS = {"objective", "score"}


def format_value(name: str, value: float | None, digits: int = 6, scope: str | None = None) -> str:
    """``value`` of metric ``name`` in its unit's one format (a fraction as a percentage, bytes
    as GB/TB, seconds as a readable duration), whatever the value. Names the glossary lacks
    fall back on their suffix (``*_bytes``, ``*_s``, ``*_rate``/``*_share``)."""
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    entry = describe(name, scope)
    unit = entry.unit if entry is not None else _unit_from_name(name)
    formatter = _UNIT_FORMATS.get(unit)
    if formatter is not None:
        return formatter(value)
    if unit in _PRECISE_UNITS:
        return f"{value:.{max(digits, 8)}g}"
    return fmt_number(value, digits)


def format_change(name: str, change: float | None, scope: str | None = None) -> str:
    """A change of metric ``name`` with its sign: a fraction's in percentage points ("+1.5 pp"),
    others in the metric's own format ("-1.09 d", "+30.2")."""
    if change is None:
        return "-"
    if isinstance(change, float) and not math.isfinite(change):
        return str(change)
    entry = describe(name, scope)
    unit = entry.unit if entry is not None else _unit_from_name(name)
    sign = "+" if change > 0 else ("-" if change < 0 else "")
    if unit == "fraction":
        return f"{sign}{abs(change) * 100:.3g} pp"
    return f"{sign}{format_value(name, abs(change), 4, scope)}"


def _unit_from_name(name: str) -> str:
    if "bytes" in name:
        return "bytes"
    if name.endswith("_s") or "seconds" in name:
        return "s"
    if name.endswith(("_rate", "_share", "_gap")) or name == "gap":
        return "fraction"
    return ""


def unit_label(name: str, scope: str | None = None) -> str:
    """The unit a reader sees beside a value (``%`` for fractions)."""
    entry = describe(name, scope)
    unit = entry.unit if entry is not None else _unit_from_name(name)
    return {"fraction": "%", "s": "time (s)", "min": "time (min)"}.get(unit, unit)


# --- the reference page ------------------------------------------------------------------------

DOC_HEADER = """# Metrics

What every number fleetplan prints means: the judges' metrics and objective terms of each
problem kind, the solvers' statistics (`solve --json`: `stats`) and the simulators' metrics and
per-group values, each with its unit and which direction is better. Generated by
`fleetplan metrics --markdown > docs/metrics.md` from `fleetplan/instances/glossary.py`, the one
place the command line reads too (`fleetplan metrics KIND`, `--explain` on `solve`, `evaluate`
and `simulate`); a test keeps this file equal to that output.

Units decide how a value is printed, never the value: a `fraction` is a percentage (1.0957 is
109.57%, not a bare number), `bytes` are kB/MB/GB/TB, `s` is a duration that reads in seconds,
minutes or hours, with days beside hours from two days on. *Relative* metrics move when the
instance grows (a share of this cluster), so compare them within one instance only; the others
compare across instances (`fleetplan compare`, `fleetplan size --target`).
"""


def markdown() -> str:
    """``docs/metrics.md``: one section per kind and simulator, one table per role."""
    lines = [DOC_HEADER]
    titles = {"allocation": "allocation (Gavel)", "placement": "placement (Tetris, MAST §3)",
              "reservation": "reservation (RAS, MAST §2)", "binpack": "binpack (RMS, MAST §4.3)",
              "gpushare": "gpushare (FGD, ATC'23, Alibaba's GPU trace)",
              "cluster": "simulator cluster (Gavel, Astraea)", "parsync": "simulator parsync (ParSync)",
              "mast": "simulator mast (MAST's GMS and auction)"}
    for scope in SCOPES:
        lines.append(f"## {titles[scope]}\n")
        rows = list(entries(scope))
        for role, heading in ROLES.items():
            mine = [row for row in rows if row.role == role]
            if not mine:
                continue
            lines.append(f"### {heading}\n")
            lines.append("| name | unit | better | meaning |")
            lines.append("|---|---|---|---|")
            for row in mine:
                better = row.better or "-"
                relative = " *(relative)*" if row.relative else ""
                lines.append(f"| `{row.name}` | {row.unit} | {better} | {row.meaning.replace('|', '/')}{relative} |")
            lines.append("")
    return "\n".join(lines)
