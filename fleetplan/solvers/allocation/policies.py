"""Solvers for every policy of Gavel's Table 1, heterogeneity-aware and agnostic (Gavel §4.1-4.2).

Each policy maps onto one LP form of :mod:`fleetplan.models.allocation.policies`:

================================  ==========================================================
policy (solver name)              how it is solved
================================  ==========================================================
max-min-fairness (LAS)            max_min, coefficient scale_factor / (weight * throughput(m, X_equal))
min-makespan                      max_min, coefficient 1 / steps: t = 1 / makespan, one LP
                                  (the reciprocal variable), exact
min-makespan-binary-search        App. A.1: bisection on the makespan M, a feasibility LP
                                  throughput(m, X) >= steps / M per step
finish-time-fairness              minimize max rho: Dinkelbach-type max_min LPs with offsets and
                                  a certified gap (below), since rho is not linear in X when t_m > 0
fifo                              linear, weight (M - arrival rank) / throughput(m, X_fastest)
shortest-job-first                closed form for the shortest job, then a linear LP (below)
max-throughput                    linear, weight 1
min-cost                          charnes_cooper (throughput per dollar, linear-fractional)
min-cost-slo                      charnes_cooper with floors throughput(m, X) >= steps / SLO
================================  ==========================================================

The ``-agnostic`` form of each sees every runnable throughput as 1 (time shares, as Gavel's
heterogeneity-agnostic baselines); the judge still scores it with the measured throughputs.

*Finish-time fairness* (default ``method="dinkelbach"``): rho_m = (t_m r_m + s_m) / (D_m r_m) is a
generalized linear-fractional program; the Dinkelbach-type iteration of Crouzeix, Ferland and
Schaible (``_ftf_dinkelbach``) normalizes each job's row by its denominator at the previous
allocation and converges superlinearly — 2-3 LPs where the level sequence below takes 5-6.
``method="levels"``: rho(m, X) <= R holds iff throughput(m, X) >= g_m(R) =
steps_m / (R D_m - t_m), with D_m = t^isolated_m + steps_m / throughput(m, X_isolated) (the
job's ``isolated_time_elapsed``, t_m when absent: Gavel §4.2). For a level R, the
max-min LP with coefficients 1 / g_m(R) gives lambda(R) = max_X min_m throughput(m, X) / g_m(R);
its allocation X_R has rho <= R when lambda >= 1, so ``UB = max_m rho(m, X_R)`` is an achieved
value, and since min_m a_m b_m <= (min_m a_m)(max_m b_m), lambda(R') < 1 — no allocation
reaches R' — for every R' below ``LB = min_m (t_m + (R D_m - t_m) / lambda) / D_m``. Iterating
R <- UB from R = max_m rho(m, X_isolated) (1 without history: X_isolated is a feasible plan)
shrinks both until UB - LB <= 1e-6 UB. With every t_m = 0 one step is exact (rho is then a
ratio of throughputs).

*Shortest job first* minimizes min_m steps_m / throughput(m, X): each job's shortest possible
duration is steps_m over its fastest throughput (alone on its fastest type), so the optimum gives
the job with the least such duration its fastest type; the rest of the cluster then goes to the
other jobs in SJF order (a linear LP weighting each job's fraction of its fastest throughput by
M - its rank in remaining duration, as Gavel's FIFO does by arrival).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from fleetplan.instances import InstanceError
from fleetplan.instances.allocation import AllocationArrays, AllocationInstance, AllocationPlan
from fleetplan.models.allocation.policies import PolicySpec, model_throughput
from fleetplan.solvers import highs as highs_runner
from fleetplan.solvers.allocation.lp import (
    BACKENDS,
    Backend,
    LpOptions,
    SpecOutcome,
    effective_model_throughput,
    load_backend,
    solve_spec,
)
from fleetplan.solvers.allocation.partitioning import solve_partitioned
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.deadline import Deadline

FTF_TOLERANCE = 1e-6
FTF_MAX_STEPS = 60


@dataclass
class PolicyAnswer:
    """A driver's answer for one set of arrays: the allocation and its own objective claim."""

    outcome: SpecOutcome
    model_objective: float | None = None
    bound: float | None = None
    messages: list[str] = field(default_factory=list)


def _equal_share(arrays: AllocationArrays, throughput: np.ndarray) -> np.ndarray:
    return throughput @ (arrays.num_workers / arrays.num_workers.sum())


def _fastest(arrays: AllocationArrays, throughput: np.ndarray) -> np.ndarray:
    return np.where(arrays.runnable, throughput, 0.0).max(axis=1)


def _isolated(arrays: AllocationArrays, throughput: np.ndarray, aware: bool) -> np.ndarray:
    if aware:
        return arrays.isolated_throughput
    n_jobs = len(arrays.job_ids)
    fractions = arrays.num_workers[None, :] * arrays.runnable / (n_jobs * arrays.scale_factor[:, None])
    fractions = fractions / np.maximum(fractions.sum(axis=1, keepdims=True), 1.0)
    return (throughput * fractions).sum(axis=1)


# --- drivers: one per policy, each over a set of arrays ---------------------------------------

def drive_max_min_fairness(arrays, options, n_total, weighted=True) -> PolicyAnswer:
    throughput = model_throughput(arrays, options.heterogeneity_aware)
    weight = arrays.weight if weighted else np.ones(len(arrays.job_ids))
    coefficient = arrays.scale_factor / (weight * _equal_share(arrays, throughput))
    outcome = solve_spec(arrays, PolicySpec("max_min", coefficient), options)
    return PolicyAnswer(outcome, outcome.objective)


def drive_min_makespan(arrays, options, n_total) -> PolicyAnswer:
    outcome = solve_spec(arrays, PolicySpec("max_min", 1.0 / arrays.steps_left), options)
    level = outcome.objective
    return PolicyAnswer(outcome, 1.0 / level if level else None)


def drive_max_throughput(arrays, options, n_total) -> PolicyAnswer:
    outcome = solve_spec(arrays, PolicySpec("linear", np.ones(len(arrays.job_ids))), options)
    return PolicyAnswer(outcome, outcome.objective)


def drive_fifo(arrays, options, n_total) -> PolicyAnswer:
    throughput = model_throughput(arrays, options.heterogeneity_aware)
    coefficient = (n_total - arrays.arrival_rank) / _fastest(arrays, throughput)
    outcome = solve_spec(arrays, PolicySpec("linear", coefficient), options)
    return PolicyAnswer(outcome, outcome.objective)


def drive_shortest_job_first(arrays, options, n_total) -> PolicyAnswer:
    throughput = model_throughput(arrays, options.heterogeneity_aware)
    fastest = _fastest(arrays, throughput)
    best_duration = arrays.steps_left / fastest
    shortest = int(np.argmin(best_duration))
    rank = np.empty(len(best_duration), dtype=int)
    rank[np.argsort(best_duration, kind="stable")] = np.arange(len(best_duration))
    floor = np.zeros(len(best_duration))
    # The shortest job keeps its whole fastest type (less LP rounding); the rest is shared.
    floor[shortest] = fastest[shortest] * (1 - 1e-9)
    spec = PolicySpec("linear", (n_total - rank) / fastest, floor=floor, floor_measured=False)
    outcome = solve_spec(arrays, spec, options)
    return PolicyAnswer(outcome, float(best_duration[shortest]))


def _cost_spec(arrays: AllocationArrays, options: LpOptions, with_slo: bool) -> PolicySpec:
    if not np.all(arrays.cost_per_hour[arrays.runnable.any(axis=0)] > 0):
        raise InstanceError("worker_types", "min-cost needs a positive cost_per_hour on every type jobs can run on")
    floor = None
    if with_slo:
        floor = np.where(np.isfinite(arrays.slo_seconds), arrays.steps_left / arrays.slo_seconds, 0.0)
    return PolicySpec("charnes_cooper", np.ones(len(arrays.job_ids)), floor=floor,
                      cost_per_hour=arrays.cost_per_hour)


def drive_min_cost(arrays, options, n_total, with_slo=False) -> PolicyAnswer:
    outcome = solve_spec(arrays, _cost_spec(arrays, options, with_slo), options)
    messages = []
    if outcome.status == "infeasible":
        needed = arrays.steps_left / arrays.slo_seconds
        alone = needed > arrays.fastest_throughput
        if alone.any():
            job = arrays.job_ids[int(np.flatnonzero(alone)[0])]
            messages.append(f"job '{job}' cannot meet its SLO even alone on its fastest type")
        else:
            messages.append("the SLO throughput floors together exceed the cluster's capacity")
    return PolicyAnswer(outcome, outcome.objective, messages=messages)


def drive_finish_time_fairness(arrays, options, n_total, method="dinkelbach") -> PolicyAnswer:
    throughput = model_throughput(arrays, options.heterogeneity_aware)
    steps, elapsed = arrays.steps_left, arrays.time_elapsed
    isolated = _isolated(arrays, throughput, options.heterogeneity_aware)
    # D_m = t^isolated_m + steps_m / throughput(m, X_isolated): the paper's denominator (§4.2),
    # t_m where the instance gives no isolated time.
    finish_isolated = arrays.isolated_time_elapsed + steps / isolated
    # rho_m > t_m / D_m whatever the allocation: levels at or below that are unreachable.
    lower = float(np.max(elapsed / finish_isolated))
    # X_isolated is a feasible plan (it gives each job 1/n of the types it runs on): its max rho
    # is an achieved level to start from. Starting from rho = 1 on faith made the first LP
    # infeasible wherever X_isolated does not reach 1 (issue 15, item 3).
    start = float(np.max((elapsed + steps / isolated) / finish_isolated))
    if method == "dinkelbach":
        return _ftf_dinkelbach(arrays, options, steps, elapsed, isolated, finish_isolated, lower, start)
    level = start
    best: SpecOutcome | None = None
    best_rho = np.inf
    log: list[str] = []
    solve_s = build_s = 0.0
    iterate = LpOptions(**{**options.__dict__, "refine": False})
    timed_out = False
    for step in range(FTF_MAX_STEPS):
        if best is not None and options.deadline.expired(options.reserve):
            timed_out = True
            break
        needed = steps / (level * finish_isolated - elapsed)
        outcome = solve_spec(arrays, PolicySpec("max_min", 1.0 / needed), iterate)
        solve_s += outcome.stats.get("solve_s", 0.0)
        build_s += outcome.stats.get("build_s", 0.0)
        if outcome.matrix is None or outcome.status != "optimal" or not outcome.objective:
            if best is not None and outcome.status == "time_limit":
                timed_out = True
                break
            return PolicyAnswer(SpecOutcome(status=outcome.status, log=log + outcome.log))
        reached = outcome.objective
        rho, _ = _ftf_rho(arrays, outcome, options, steps, elapsed, finish_isolated)
        if rho.max() < best_rho:
            best, best_rho = outcome, float(rho.max())
        lower = max(lower, float(np.min((elapsed + (level * finish_isolated - elapsed) / reached) / finish_isolated)))
        if reached < 1.0:
            lower = max(lower, level)  # no allocation reaches this level
        log.append(f"step {step}: level {level:.9g} lambda {reached:.9g} -> rho {best_rho:.9g}, bound {lower:.9g}")
        if best_rho - lower <= FTF_TOLERANCE * best_rho:
            break
        # R <- the achieved max rho: monotone, and exact in one step when every t_m is 0.
        # (A secant step on lambda(R) = 1 was tried: lambda is too curved near R = max t/D.)
        # An unreachable level (lambda < 1) moves up to the best achieved one instead.
        if best_rho >= level and reached >= 1.0:
            break
        level = best_rho
    return _ftf_finish(arrays, options, best, best_rho, lower, log, step, solve_s, build_s, steps, elapsed,
                       finish_isolated, timed_out)


def _ftf_rho(arrays, outcome, options, steps, elapsed, finish_isolated):
    rate = effective_model_throughput(arrays, outcome, options.heterogeneity_aware)
    with np.errstate(divide="ignore"):
        rho = (elapsed + np.where(rate > 0, steps / np.maximum(rate, 1e-300), np.inf)) / finish_isolated
    return rho, rate


def _ftf_dinkelbach(arrays, options, steps, elapsed, isolated, finish_isolated, lower, start) -> PolicyAnswer:
    """Finish-time fairness by the Dinkelbach-type method of Crouzeix, Ferland and Schaible for
    generalized fractional programs: rho_m = (t_m r_m + s_m) / (D_m r_m) with r_m =
    throughput(m, X). At level R and weights w_m = 1 / (D_m r_m(X_k)) (the denominators at the
    previous allocation, which makes the convergence superlinear), one LP

        maximize z  s.t.  w_m (R D_m - t_m) r_m(X) - z >= w_m s_m

    gives X_{k+1}; R <- max_m rho_m(X_{k+1}). Bound: any X' with max rho <= R' < R has
    w_m ((R D_m - t_m) r'_m - s_m) >= (R - R') w_m D_m s_m / (R D_m - t_m), so R' >= R - z / c
    with c = min_m w_m D_m s_m / (R D_m - t_m). The level z is a free variable: z < 0 proves
    that no allocation reaches R (every X has a job with rho > R), so R becomes a lower bound and
    the next level is the max rho achieved by the LP's allocation."""
    level, rate = start, isolated  # X_isolated achieves max rho = start
    best: SpecOutcome | None = None
    best_rho = np.inf
    log: list[str] = []
    solve_s = build_s = 0.0
    iterate = LpOptions(**{**options.__dict__, "refine": False})
    timed_out = False
    for step in range(FTF_MAX_STEPS):
        if best is not None and options.deadline.expired(options.reserve):
            timed_out = True
            break
        weight = 1.0 / (finish_isolated * rate)
        room = level * finish_isolated - elapsed
        outcome = solve_spec(arrays, PolicySpec("max_min", weight * room, offset=weight * steps), iterate)
        solve_s += outcome.stats.get("solve_s", 0.0)
        build_s += outcome.stats.get("build_s", 0.0)
        if outcome.matrix is None or outcome.status != "optimal" or outcome.objective is None:
            if best is not None and outcome.status == "time_limit":
                timed_out = True
                break
            return PolicyAnswer(SpecOutcome(status=outcome.status, log=log + outcome.log))
        rho, new_rate = _ftf_rho(arrays, outcome, options, steps, elapsed, finish_isolated)
        if rho.max() < best_rho:
            best, best_rho = outcome, float(rho.max())
        if outcome.objective < 0:
            lower = max(lower, level)  # no allocation has every rho <= level
        else:
            lower = max(lower, level - outcome.objective / float(np.min(weight * finish_isolated * steps / room)))
        log.append(f"step {step}: level {level:.9g} z {outcome.objective:.6g} -> rho {best_rho:.9g}, bound {lower:.9g}")
        if best_rho - lower <= FTF_TOLERANCE * best_rho or not np.isfinite(rho.max()):
            break
        if rho.max() >= level and outcome.objective >= 0:
            break
        level, rate = float(rho.max()), new_rate
    return _ftf_finish(arrays, options, best, best_rho, lower, log, step, solve_s, build_s, steps, elapsed,
                       finish_isolated, timed_out)


def _ftf_finish(arrays, options, best, best_rho, lower, log, step, solve_s, build_s, steps, elapsed,
                finish_isolated, timed_out=False) -> PolicyAnswer:
    status = "optimal" if best_rho - lower <= FTF_TOLERANCE * best_rho else "time_limit" if timed_out else "feasible"
    if timed_out:
        log.append("time limit: the best allocation so far is kept")
    if options.refine and not options.deadline.expired(options.reserve):
        # Keep every job at or under the final level; share what is left (max-min refinement).
        needed = steps / (best_rho * finish_isolated - elapsed)
        refined = solve_spec(arrays, PolicySpec("max_min", 1.0 / needed), options)
        solve_s += refined.stats.get("solve_s", 0.0)
        if refined.matrix is not None and refined.status == "optimal":
            rho, _ = _ftf_rho(arrays, refined, options, steps, elapsed, finish_isolated)
            if rho.max() <= best_rho * (1 + 1e-9):
                best, best_rho = refined, float(rho.max())
    best.log = log + best.log
    best.status = status
    best.stats.update(ftf_steps=float(step + 1), solve_s=solve_s, build_s=build_s)
    return PolicyAnswer(best, best_rho, bound=lower)


def drive_min_makespan_binary_search(arrays, options, n_total, tolerance=1e-6) -> PolicyAnswer:
    """Gavel App. A.1: bisection on M; each step asks an LP whether every job can reach
    steps / M. Feasibility is tested as a max-min LP (lambda >= 1 means M is reachable)."""
    throughput = model_throughput(arrays, options.heterogeneity_aware)
    steps = arrays.steps_left
    upper = float(np.max(steps / _isolated(arrays, throughput, options.heterogeneity_aware)))  # X_isolated
    lower = float(np.max(steps / _fastest(arrays, throughput)))  # no job beats its fastest type
    feasible: SpecOutcome | None = None
    probes = 0
    solve_s = 0.0
    iterate = LpOptions(**{**options.__dict__, "refine": False})
    timed_out = False
    while feasible is None or upper - lower > tolerance * upper:
        if feasible is not None and options.deadline.expired(options.reserve):
            timed_out = True
            break
        middle = upper if feasible is None else 0.5 * (lower + upper)
        outcome = solve_spec(arrays, PolicySpec("max_min", middle / steps), iterate)
        probes += 1
        solve_s += outcome.stats.get("solve_s", 0.0)
        if outcome.status != "optimal" or outcome.objective is None:
            if feasible is not None and outcome.status == "time_limit":
                timed_out = True  # keep the last feasible probe's allocation
                break
            return PolicyAnswer(SpecOutcome(status=outcome.status, log=outcome.log))
        if outcome.objective >= 1.0 - 1e-9:
            upper, feasible = middle, outcome
        else:
            lower = middle
    feasible.stats.update(probes=float(probes), solve_s=solve_s)
    feasible.log.append(f"binary search: {probes} LPs, makespan in [{lower:.9g}, {upper:.9g}]"
                        + (" (time limit)" if timed_out else ""))
    if timed_out:
        feasible.status = "time_limit"
    rate = effective_model_throughput(arrays, feasible, options.heterogeneity_aware)
    return PolicyAnswer(feasible, float(np.max(steps / rate)), bound=lower)


# --- the common entry point ---------------------------------------------------------------------

AgnosticBaseline = Literal["runnable", "gavel"]
Decomposition = Literal["auto", "prices", "none"]
DECOMPOSITION_METHOD = {"auto": "auto", "prices": "separable", "none": "lp"}
DECOMPOSITION_MEANING = (
    "how a max-min or linear LP is solved: auto (the price decomposition of "
    "fleetplan.solvers.allocation.separable from 1,000 distinct jobs up, the full LP below), prices "
    "(the decomposition at any size) or none (always the full LP, the reference); the "
    "decomposition is certified optimal and falls back to the full LP where it does not apply")


def gavel_agnostic_arrays(arrays: AllocationArrays) -> AllocationArrays:
    """The arrays Gavel's heterogeneity-agnostic baselines see (Gavel §7.2-7.3, its policies'
    ``_agnostic`` forms): throughput 1 on *every* type the job fits on (enough workers for its
    scale factor), zeros included — a type where the job cannot run looks as good as any.

    fleetplan's default agnostic model (``baseline="runnable"``) sees 1 only where the job can
    run and normalizes by the equal share of those types; it is the stronger baseline, so the
    cost of ignoring heterogeneity measured against it is the smaller one. Under ``"gavel"``
    time the model gives a job on a type where its measured throughput is 0 is idle time, which
    the plan drops (the judge would otherwise reject time on a type the job cannot run on)."""
    workers = arrays.num_workers if arrays.fit_workers is None else arrays.fit_workers
    fits = workers[None, :] >= arrays.scale_factor[:, None]
    return replace(arrays, throughput=fits.astype(float))


def judging_reserve(arrays: AllocationArrays) -> float:
    """Seconds kept back from the LPs for expanding the plan and judging it: about 4 us per
    (job, type) cell (plan to lists, the judge's passes; measured at 65,536 jobs), at least 20 ms."""
    return 0.02 + 4e-6 * arrays.throughput.size


def _isolated_fallback(arrays: AllocationArrays, answer: PolicyAnswer, check_slo: bool) -> PolicyAnswer:
    """The clock ran out before any LP answered: X_isolated is a feasible plan of every policy
    (of min-cost-slo only when it meets every SLO), so it is returned with status time_limit."""
    matrix = arrays.isolated_allocation()
    if check_slo:
        needed = np.where(np.isfinite(arrays.slo_seconds), arrays.steps_left / arrays.slo_seconds, 0.0)
        if np.any((arrays.throughput * matrix).sum(axis=1) < needed):
            return answer
    outcome = SpecOutcome(status="time_limit", matrix=matrix, log=answer.outcome.log + [
        "time limit reached before an LP answered: returning the isolated allocation (1/n of each type)"],
        stats=answer.outcome.stats)
    return PolicyAnswer(outcome, None, messages=answer.messages)


POLICY_NAMES = {
    drive_max_min_fairness: "max_min_fairness", drive_min_makespan: "min_makespan",
    drive_max_throughput: "max_throughput", drive_fifo: "fifo", drive_shortest_job_first: "shortest_job_first",
    drive_min_cost: "min_cost", drive_finish_time_fairness: "finish_time_fairness",
    drive_min_makespan_binary_search: "min_makespan",
}


def solve_policy(instance: AllocationInstance, driver, *, aware: bool, policy: str, time_limit: float | None,
                 seed: int, threads: int, progress: Progress, backend: Backend,
                 lp_algorithm: highs_runner.LpAlgorithm, partitions: int, space_sharing: bool,
                 prune_pairs: bool, aggregate: bool, refine: bool, needs_steps: bool = False,
                 baseline: AgnosticBaseline = "runnable", decomposition: Decomposition = "auto",
                 **driver_options) -> SolveResult:
    """Validate the options, run ``driver`` (on POP parts when ``partitions`` > 1) and package
    the allocation as a plan of ``policy``. ``baseline`` (agnostic forms only) picks the
    heterogeneity-agnostic model: see :func:`gavel_agnostic_arrays`."""
    deadline = Deadline(time_limit)
    if backend not in BACKENDS:
        raise InstanceError("options.backend", f"unknown backend '{backend}' (known: {', '.join(BACKENDS)})")
    load_backend(backend)
    measured = arrays = instance.arrays()
    if baseline == "gavel":
        if space_sharing:
            raise InstanceError("options.baseline", "Gavel's all-ones baseline has no space-sharing form")
        arrays = gavel_agnostic_arrays(arrays)
    if needs_steps and np.isnan(arrays.steps_left).any():
        missing = int(np.flatnonzero(np.isnan(arrays.steps_left))[0])
        raise InstanceError(f"jobs[{missing}].steps_left", f"is required by the {policy} policy")
    if space_sharing and not instance.colocations:
        raise InstanceError("options.space_sharing", "the instance lists no colocations (pair throughputs)")
    n_total = len(arrays.job_ids)
    stats: dict[str, float] = {}
    reserve = judging_reserve(arrays)
    parts_left = [partitions]

    def solve_part(part_arrays: AllocationArrays) -> SpecOutcome:
        # POP: each part gets an equal share of what is left, so one slow part cannot starve
        # the ones after it; a part that finishes early leaves its time to the rest.
        remaining = deadline.remaining(reserve)
        part_deadline = deadline if remaining is None or parts_left[0] == 1 else \
            Deadline(remaining / parts_left[0] + reserve)
        parts_left[0] -= 1
        options = LpOptions(backend=backend, lp_algorithm=lp_algorithm, deadline=part_deadline, reserve=reserve,
                            threads=threads, seed=seed, aggregate=aggregate, refine=refine,
                            method=DECOMPOSITION_METHOD[decomposition],
                            heterogeneity_aware=aware, space_sharing=space_sharing, prune_pairs=prune_pairs)
        answer = driver(part_arrays, options, n_total, **driver_options)
        if answer.outcome.matrix is None and answer.outcome.status == "time_limit":
            answer = _isolated_fallback(part_arrays, answer, check_slo=policy == "min_cost_slo")
        for key in ("pairs_possible", "pairs_kept"):
            if key in answer.outcome.stats:
                stats[key] = stats.get(key, 0.0) + answer.outcome.stats[key]
        answer.outcome.stats.update(model_objective=answer.model_objective if answer.model_objective is not None else np.nan,
                                    bound=answer.bound if answer.bound is not None else np.nan)
        answer.outcome.log += answer.messages
        return answer.outcome

    progress(0.05, f"solving {policy} ({'aware' if aware else 'agnostic'}, {partitions} part(s))")
    if partitions == 1:
        outcome = solve_part(arrays)
        model_objective = outcome.stats.pop("model_objective")
        bound = outcome.stats.pop("bound")
    else:
        outcome, _ = solve_partitioned(arrays, partitions, seed, solve_part)
        model_objective = bound = np.nan
    progress(1.0, f"{policy}: {outcome.status}")
    stats.update(outcome.stats)
    if outcome.matrix is None:
        status = outcome.status if outcome.status != "optimal" else "error"
        return SolveResult(status=status, log=outcome.log, stats=stats,
                           message="; ".join([f"{policy} LP ended {outcome.status}", *outcome.log[-1:]]))
    if baseline == "gavel":
        # Time the all-ones model gives a job on a type it cannot run on is idle: dropped.
        outcome.matrix = np.where(measured.throughput > 0, outcome.matrix, 0.0)
    status = outcome.status
    if partitions > 1 and status == "optimal":
        status = "feasible"  # optimal per part, not proven optimal for the whole instance
    plan = AllocationPlan.from_matrix(instance, outcome.matrix, policy=policy, pair_jobs=outcome.pair_jobs,
                                      pair_matrix=outcome.pair_matrix)
    # An agnostic model optimizes time shares, not the judge's score: its value is no bound.
    exact_claim = aware and np.isfinite(model_objective)
    return SolveResult(status=status, plan=plan, objective=float(model_objective) if exact_claim else None,
                       bound=float(bound) if aware and np.isfinite(bound) else None, log=outcome.log,
                       message=f"{policy}: {outcome.status}", stats=stats)


BASELINE_MEANING = ("agnostic model: runnable (throughput 1 on the types a job can run on, normalized by "
                    "their equal share; fleetplan's default) or gavel (1 on every type the job fits, zeros "
                    "included, as Gavel's baselines; time on a type it cannot run on is dropped)")


def document(solver, summary: str, own: dict[str, str] | None = None) -> None:
    """Give ``solver`` its docstring: ``summary`` and a numpydoc ``Parameters`` section where
    ``own`` explains the options the shared glossary does not (see fleetplan.solvers.options)."""
    from fleetplan.solvers.options import option_specs, parameters_section

    own = {"decomposition": DECOMPOSITION_MEANING, **(own or {})}
    own_section = "".join(f"{name} : value\n    {meaning}\n" for name, meaning in own.items())
    solver.__doc__ = f"{summary}\n\nParameters\n----------\n{own_section}"
    solver.__doc__ = f"{summary}\n\n{parameters_section(option_specs(solver))}\n"


def _register_pair(name: str, driver, policy: str, summary: str, reference: str, needs_steps: bool = False,
                   exact: bool = True, baseline_option: bool = True, **driver_options) -> None:
    """Register ``name`` (heterogeneity-aware) and ``name-agnostic`` for ``driver``; the agnostic
    form takes ``baseline`` (see :func:`gavel_agnostic_arrays`) unless ``baseline_option`` is False."""

    def aware_solver(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                     threads: int = 1, progress: Progress, backend: Backend = "highspy",
                     lp_algorithm: highs_runner.LpAlgorithm = "auto", partitions: int = 1,
                     space_sharing: bool = False, prune_pairs: bool = True, aggregate: bool = True,
                     decomposition: Decomposition = "auto",
                     refine: bool = False) -> SolveResult:
        return solve_policy(instance, driver, aware=True, policy=policy, time_limit=time_limit, seed=seed,
                            threads=threads, progress=progress, backend=backend, lp_algorithm=lp_algorithm,
                            partitions=partitions, space_sharing=space_sharing, prune_pairs=prune_pairs,
                            aggregate=aggregate, decomposition=decomposition, refine=refine, needs_steps=needs_steps, **driver_options)

    def agnostic_solver(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                        threads: int = 1, progress: Progress, backend: Backend = "highspy",
                        lp_algorithm: highs_runner.LpAlgorithm = "auto", partitions: int = 1,
                        space_sharing: bool = False, prune_pairs: bool = True, aggregate: bool = True,
                        decomposition: Decomposition = "auto",
                        refine: bool = False, baseline: AgnosticBaseline = "runnable") -> SolveResult:
        return solve_policy(instance, driver, aware=False, policy=policy, time_limit=time_limit, seed=seed,
                            threads=threads, progress=progress, backend=backend, lp_algorithm=lp_algorithm,
                            partitions=partitions, space_sharing=space_sharing, prune_pairs=prune_pairs,
                            aggregate=aggregate, decomposition=decomposition, refine=refine, needs_steps=needs_steps, baseline=baseline,
                            **driver_options)

    def plain_agnostic_solver(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                              threads: int = 1, progress: Progress, backend: Backend = "highspy",
                              lp_algorithm: highs_runner.LpAlgorithm = "auto", partitions: int = 1,
                              space_sharing: bool = False, prune_pairs: bool = True, aggregate: bool = True,
                              decomposition: Decomposition = "auto",
                              refine: bool = False) -> SolveResult:
        return solve_policy(instance, driver, aware=False, policy=policy, time_limit=time_limit, seed=seed,
                            threads=threads, progress=progress, backend=backend, lp_algorithm=lp_algorithm,
                            partitions=partitions, space_sharing=space_sharing, prune_pairs=prune_pairs,
                            aggregate=aggregate, decomposition=decomposition, refine=refine, needs_steps=needs_steps, **driver_options)

    for solver, aware in ((aware_solver, True), (agnostic_solver if baseline_option else plain_agnostic_solver, False)):
        solver_name = name if aware else f"{name}-agnostic"
        solver.__name__ = solver_name.replace("-", "_")
        document(solver, f"{summary} ({'heterogeneity-aware' if aware else 'heterogeneity-agnostic'}).",
                 {"baseline": BASELINE_MEANING} if not aware and baseline_option else None)
        register("allocation", solver_name, exact=exact and aware, reference=reference,
                 description=summary + ("" if aware else ", blind to throughput differences (baseline)"))(solver)


GAVEL = "Narayanan et al., Gavel, OSDI 2020"
_register_pair("fifo", drive_fifo, "fifo", "FIFO: arrival-weighted progress on each job's fastest type",
               f"{GAVEL}, §4.2")
_register_pair("shortest-job-first", drive_shortest_job_first, "shortest_job_first",
               "shortest job first: the shortest job on its fastest type, the rest in SJF order",
               f"{GAVEL}, §4.2", needs_steps=True)
_register_pair("min-makespan", drive_min_makespan, "min_makespan",
               "minimum makespan as one LP through the reciprocal variable t = 1 / makespan",
               f"{GAVEL}, §4.2", needs_steps=True)
_register_pair("max-throughput", drive_max_throughput, "max_throughput", "maximize total effective throughput",
               f"{GAVEL}, §3.1 and §4.2")
_register_pair("min-cost", drive_min_cost, "min_cost",
               "maximize throughput per dollar (linear-fractional, Charnes-Cooper LP)", f"{GAVEL}, §4.2")
# SLO floors are measured throughputs, which the all-ones model cannot express: no gavel baseline.
_register_pair("min-cost-slo", drive_min_cost, "min_cost_slo",
               "maximize throughput per dollar subject to every job meeting its SLO (Charnes-Cooper LP)",
               f"{GAVEL}, §4.2", baseline_option=False, with_slo=True)


FtfMethod = Literal["dinkelbach", "levels"]
FTF_SUMMARY = "Themis finish-time fairness: minimize the maximum rho, by Dinkelbach-type LPs with a certified gap"


def finish_time_fairness(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                         threads: int = 1, progress: Progress, backend: Backend = "highspy",
                         lp_algorithm: highs_runner.LpAlgorithm = "auto", partitions: int = 1,
                         space_sharing: bool = False, prune_pairs: bool = True, aggregate: bool = True,
                         decomposition: Decomposition = "auto",
                         refine: bool = False, method: FtfMethod = "dinkelbach") -> SolveResult:
    """Minimize the maximum finish-time fairness rho (Gavel §4.2, Themis), heterogeneity-aware:
    ``dinkelbach`` (default, the Crouzeix-Ferland-Schaible iteration) or ``levels``."""
    return solve_policy(instance, drive_finish_time_fairness, aware=True, policy="finish_time_fairness",
                        time_limit=time_limit, seed=seed, threads=threads, progress=progress,
                        backend=backend, lp_algorithm=lp_algorithm, partitions=partitions,
                        space_sharing=space_sharing, prune_pairs=prune_pairs, aggregate=aggregate, decomposition=decomposition,
                        refine=refine, needs_steps=True, method=method)


def finish_time_fairness_agnostic(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                                  threads: int = 1, progress: Progress, backend: Backend = "highspy",
                                  lp_algorithm: highs_runner.LpAlgorithm = "auto", partitions: int = 1,
                                  space_sharing: bool = False, prune_pairs: bool = True, aggregate: bool = True,
                                  decomposition: Decomposition = "auto",
                                  refine: bool = False, method: FtfMethod = "dinkelbach",
                                  baseline: AgnosticBaseline = "runnable") -> SolveResult:
    """Finish-time fairness over time shares (the agnostic baseline of Gavel §7.2)."""
    return solve_policy(instance, drive_finish_time_fairness, aware=False, policy="finish_time_fairness",
                        time_limit=time_limit, seed=seed, threads=threads, progress=progress,
                        backend=backend, lp_algorithm=lp_algorithm, partitions=partitions,
                        space_sharing=space_sharing, prune_pairs=prune_pairs, aggregate=aggregate, decomposition=decomposition,
                        refine=refine, needs_steps=True, method=method, baseline=baseline)


document(finish_time_fairness, finish_time_fairness.__doc__)
document(finish_time_fairness_agnostic, finish_time_fairness_agnostic.__doc__, {"baseline": BASELINE_MEANING})
register("allocation", "finish-time-fairness", exact=True, reference=f"{GAVEL}, §4.2",
         description=FTF_SUMMARY)(finish_time_fairness)
register("allocation", "finish-time-fairness-agnostic", exact=False, reference=f"{GAVEL}, §4.2",
         description=FTF_SUMMARY + ", blind to throughput differences (baseline)")(finish_time_fairness_agnostic)


def _binary_search(instance: AllocationInstance, aware: bool, tolerance: float, options: dict) -> SolveResult:
    if not 0 < tolerance < 1:
        raise InstanceError("options.tolerance", "must be between 0 and 1 (a relative gap)")
    result = solve_policy(instance, drive_min_makespan_binary_search, aware=aware, policy="min_makespan",
                          needs_steps=True, tolerance=tolerance, **options)
    if result.status == "optimal" and tolerance > FTF_TOLERANCE:
        result.status = "feasible"  # stopped at the requested gap, short of the optimum
    return result


@register("allocation", "min-makespan-binary-search", exact=False, reference=f"{GAVEL}, Appendix A.1",
          description="minimum makespan by Gavel's binary search over feasibility LPs, to a relative gap")
def min_makespan_binary_search(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                               threads: int = 1, progress: Progress, backend: Backend = "highspy",
                               lp_algorithm: highs_runner.LpAlgorithm = "auto", partitions: int = 1,
                               space_sharing: bool = False, prune_pairs: bool = True, aggregate: bool = True,
                               decomposition: Decomposition = "auto",
                               refine: bool = False, tolerance: float = 1e-6) -> SolveResult:
    """Minimum makespan by bisection on M (Gavel App. A.1); ``tolerance`` is the relative gap
    at which it stops (the paper's own runs stop at 5%)."""
    return _binary_search(instance, True, tolerance, dict(
        time_limit=time_limit, seed=seed, threads=threads, progress=progress, backend=backend,
        lp_algorithm=lp_algorithm, partitions=partitions, space_sharing=space_sharing, prune_pairs=prune_pairs,
        aggregate=aggregate, decomposition=decomposition, refine=refine))


@register("allocation", "min-makespan-binary-search-agnostic", exact=False, reference=f"{GAVEL}, Appendix A.1",
          description="heterogeneity-agnostic minimum makespan by binary search (baseline)")
def min_makespan_binary_search_agnostic(instance: AllocationInstance, *, time_limit: float | None = None,
                                        seed: int = 0, threads: int = 1, progress: Progress,
                                        backend: Backend = "highspy", lp_algorithm: highs_runner.LpAlgorithm = "auto",
                                        partitions: int = 1, space_sharing: bool = False, prune_pairs: bool = True,
                                        aggregate: bool = True,
        decomposition: Decomposition = "auto", refine: bool = False,
                                        tolerance: float = 1e-6,
                                        baseline: AgnosticBaseline = "runnable") -> SolveResult:
    """The binary search over time shares instead of throughputs (the agnostic baseline)."""
    return _binary_search(instance, False, tolerance, dict(
        time_limit=time_limit, seed=seed, threads=threads, progress=progress, backend=backend,
        lp_algorithm=lp_algorithm, partitions=partitions, space_sharing=space_sharing, prune_pairs=prune_pairs,
        aggregate=aggregate, decomposition=decomposition, refine=refine, baseline=baseline))


document(min_makespan_binary_search, min_makespan_binary_search.__doc__.split("\n\nParameters")[0])
document(min_makespan_binary_search_agnostic, min_makespan_binary_search_agnostic.__doc__.split("\n\nParameters")[0],
         {"baseline": BASELINE_MEANING})
