"""Drivers of Gavel's Table 1 policies: one function per policy over a set of job arrays
(Gavel §4.1-4.2, Appendix A.1), each returning the LP outcome and its own objective claim.

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

from dataclasses import dataclass, field

import numpy as np

from fleetplan.instances import InstanceError
from fleetplan.instances.allocation import AllocationArrays
from fleetplan.instances.allocation.rows import row_max
from fleetplan.models.allocation.policies import PolicySpec, model_throughput
from fleetplan.solvers.allocation.lp import (
    LpOptions,
    SpecOutcome,
    effective_model_throughput,
    solve_spec,
)

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
    return row_max(np.where(arrays.runnable, throughput, 0.0))


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
            jobs = [arrays.job_ids[m] for m in np.flatnonzero(alone)]
            who = f"job '{jobs[0]}'" if len(jobs) == 1 else \
                f"{len(jobs)} jobs ({', '.join(jobs[:5])}{' ...' if len(jobs) > 5 else ''}): each"
            messages.append(f"{who} cannot meet its SLO even alone on its fastest type")
        else:
            messages.append(slo_shortfall(arrays, options))
    return PolicyAnswer(outcome, outcome.objective, messages=messages)


def slo_shortfall(arrays: AllocationArrays, options: LpOptions) -> str:
    """Why SLOs that each fit alone do not fit together: an elastic LP lets every type's worker
    row exceed its count by a slack and minimizes the total slack — the fewest GPUs (GPU-hours
    per hour) short, per type — and its floor rows' duals name the jobs that need them."""
    import scipy.sparse as sp

    from fleetplan.models.allocation.policies import build_space
    from fleetplan.models.linear import INF, LinearProgram
    from fleetplan.solvers import highs as highs_runner

    floor = np.where(np.isfinite(arrays.slo_seconds), arrays.steps_left / arrays.slo_seconds, 0.0)
    space = build_space(arrays)
    jobs = np.flatnonzero(floor > 0)
    n_x, n_types = space.n_cols, space.n_types
    matrix = sp.vstack([
        sp.hstack([space.time, sp.csr_matrix((space.n_jobs, n_types))]),
        sp.hstack([space.workers, -sp.identity(n_types)]),
        sp.hstack([space.measured[jobs], sp.csr_matrix((len(jobs), n_types))]),
    ], format="csr")
    lp = LinearProgram(
        cost=np.concatenate([np.zeros(n_x), np.ones(n_types)]), matrix=matrix,
        row_lower=np.concatenate([np.full(space.n_jobs + n_types, -INF), floor[jobs]]),
        row_upper=np.concatenate([np.ones(space.n_jobs), space.num_workers, np.full(len(jobs), INF)]),
        col_lower=np.zeros(n_x + n_types), col_upper=np.concatenate([space.column_upper(), np.full(n_types, INF)]),
        sense="min")
    outcome = highs_runner.solve_lp(lp, time_limit=options.deadline.remaining(options.reserve),
                                    threads=options.threads, seed=options.seed, algorithm="simplex")
    if outcome.values is None:
        return "the SLO throughput floors together exceed the cluster's capacity"
    slack = outcome.values[n_x:]
    short = [f"{name} by {value:.4g} GPUs ({value:.4g} GPU-hours per hour)"
             for name, value in zip(arrays.worker_types, slack, strict=True) if value > 1e-7]
    involved: list[str] = []
    if outcome.row_duals is not None:
        binding = np.abs(outcome.row_duals[space.n_jobs + n_types:]) > 1e-9
        involved = [arrays.job_ids[m] for m in jobs[binding]]
    who = (f"; the SLOs that need them: {', '.join(involved[:8])}{' ...' if len(involved) > 8 else ''} "
           f"({len(involved)} jobs)") if involved else ""
    return f"the SLOs fit alone but not together: capacity short of {', '.join(short) or 'no type'}{who}"


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
    # infeasible wherever X_isolated does not reach 1.
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
