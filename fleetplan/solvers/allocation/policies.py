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
Every split of a job's time between its types then scores alike, so the agnostic plan's ties
are broken by spreading each job's time over its types in proportion to their workers
(``ties="spread"``, :mod:`fleetplan.solvers.allocation.agnostic`) rather than left at whatever
vertex the LP solver returns (``ties="vertex"``). An agnostic plan's status is ``feasible`` when
its LP was solved to optimality: the optimum is the time-share model's, and certifies nothing
about the heterogeneity-aware objective the judge scores (the result's message says so).

The drivers that solve each policy (and the mathematics of finish-time fairness and
shortest job first) are in :mod:`fleetplan.solvers.allocation.drivers`; this module holds the
common entry point :func:`solve_policy` and registers the solvers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import numpy as np

from fleetplan.instances import InstanceError
from fleetplan.instances.allocation import AllocationArrays, AllocationInstance, AllocationPlan
from fleetplan.solvers.allocation.agnostic import spread_agnostic
from fleetplan.solvers.allocation.drivers import (
    FTF_TOLERANCE,
    PolicyAnswer,
    drive_fifo,
    drive_finish_time_fairness,
    drive_max_min_fairness,
    drive_max_throughput,
    drive_min_cost,
    drive_min_makespan,
    drive_min_makespan_binary_search,
    drive_shortest_job_first,
)
from fleetplan.solvers.allocation.lp import (
    AllocationLpOptions,
    LpOptions,
    SpecOutcome,
    load_backend,
)
from fleetplan.solvers.allocation.partitioning import solve_partitioned
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.deadline import Deadline

# --- the common entry point ---------------------------------------------------------------------

AgnosticBaseline = Literal["runnable", "gavel"]
Ties = Literal["spread", "vertex"]
TIES_MEANING = ("how the agnostic LP's ties are broken: spread (each job's time over the types it may "
                "use in proportion to their workers, keeping the agnostic optimum) or vertex (whatever "
                "optimal vertex the LP solver returns, often all of a job's time on one type)")
AGNOSTIC_STATUS_NOTE = ("the heterogeneity-agnostic LP was solved to optimality; status 'feasible' because "
                        "that optimum is of the time-share model, not of the heterogeneity-aware objective "
                        "the judge scores")
# The LP options' defaults: max-min fairness refines its plan (``refine=True``); the other
# policies solve one LP (a refinement only exists for max-min forms) unless asked.
REFINED = AllocationLpOptions(refine=True)
UNREFINED = AllocationLpOptions(refine=False)


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
                 seed: int, threads: int, progress: Progress, lp: AllocationLpOptions, needs_steps: bool = False,
                 baseline: AgnosticBaseline = "runnable", ties: Ties = "spread", **driver_options) -> SolveResult:
    """Check what the instance must hold for these options, run ``driver`` (on POP parts when
    ``lp.partitions`` > 1) and package the allocation as a plan of ``policy``. The options'
    values were checked against their declared types and bounds by :func:`fleetplan.solve`.
    ``baseline`` and ``ties`` (agnostic forms only) pick the heterogeneity-agnostic model (see
    :func:`gavel_agnostic_arrays`) and how its ties are broken (see
    :mod:`fleetplan.solvers.allocation.agnostic`)."""
    deadline = Deadline(time_limit)
    partitions, space_sharing = lp.partitions, lp.space_sharing
    load_backend(lp.backend)
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
        options = LpOptions.of(lp, deadline=part_deadline, reserve=reserve, threads=threads, seed=seed,
                               heterogeneity_aware=aware)
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
    if not aware and ties == "spread":
        spread = _spread_ties(arrays, measured, outcome, policy, Deadline(deadline.remaining(reserve)), threads)
        outcome.log += spread.log
        stats["ties_qp"] = float(spread.method == "qp")
    if baseline == "gavel":
        # Time the all-ones model gives a job on a type it cannot run on is idle: dropped.
        outcome.matrix = np.where(measured.throughput > 0, outcome.matrix, 0.0)
    status = outcome.status
    if partitions > 1 and status == "optimal":
        status = "feasible"  # optimal per part, not proven optimal for the whole instance
    message = f"{policy}: {outcome.status}"
    if not aware and status == "optimal":
        status = "feasible"
        message = f"{policy} (agnostic): {AGNOSTIC_STATUS_NOTE}"
    plan = AllocationPlan.from_matrix(instance, outcome.matrix, policy=policy, pair_jobs=outcome.pair_jobs,
                                      pair_matrix=outcome.pair_matrix)
    # An agnostic model optimizes time shares, not the judge's score: its value is no bound.
    exact_claim = aware and np.isfinite(model_objective)
    result = SolveResult(status=status, plan=plan, objective=float(model_objective) if exact_claim else None,
                         bound=float(bound) if aware and np.isfinite(bound) else None, log=outcome.log,
                         message=message, stats=stats)
    if aware and partitions == 1 and outcome.status == "optimal":
        result.duals = policy_duals(policy, outcome, arrays)
        result.duals_source = "lp" if result.duals else ""
    return result


# Per policy whose LP objective is the judge's (or a known function of it): the gain in the
# judge's objective, better direction, from the LP's dual price ``price`` at its level ``level``.
# Min-makespan maximizes t = 1/makespan: a unit more capacity shortens the makespan by price/t^2.
_PRICE_IN_JUDGE_UNITS = {
    "max_min_fairness": lambda price, level: price,
    "max_min_fairness_unweighted": lambda price, level: price,
    "max_throughput": lambda price, level: price,
    "fifo": lambda price, level: price,
    "min_cost": lambda price, level: price,
    "min_cost_slo": lambda price, level: price,
    "min_makespan": lambda price, level: price / level**2 if level else float("nan"),
}


def policy_duals(policy: str, outcome: SpecOutcome, arrays: AllocationArrays) -> dict[str, dict[str, float]]:
    """The capacity and SLO-floor prices of an optimal LP, in the judge's objective units
    (empty for policies whose LP objective is not the judge's: finish-time fairness's
    iterations, shortest-job-first's ordering LP)."""
    convert = _PRICE_IN_JUDGE_UNITS.get(policy)
    if convert is None or outcome.capacity_prices is None:
        return {}
    level = outcome.objective or 0.0
    duals = {"workers": {name: float(convert(price, level)) for name, price in
                         zip(arrays.worker_types, outcome.capacity_prices, strict=True)}}
    if outcome.floor_prices is not None and policy == "min_cost_slo":
        duals["slo"] = {arrays.job_ids[m]: float(convert(outcome.floor_prices[m], level))
                        for m in np.flatnonzero(outcome.floor_prices > 0)}
    return duals


def _spread_ties(arrays: AllocationArrays, measured: AllocationArrays, outcome: SpecOutcome, policy: str,
                 deadline: Deadline, threads: int):
    """Break an agnostic plan's ties in place (see :mod:`fleetplan.solvers.allocation.agnostic`):
    the cost policies keep their cost, min-cost-slo its SLO floors."""
    floor = None
    if policy == "min_cost_slo":
        floor = np.where(np.isfinite(measured.slo_seconds), measured.steps_left / measured.slo_seconds, 0.0)
        if len(outcome.pair_jobs):
            # Pair time is not moved: the floors the single-type time must meet are what is left.
            shared = measured.pair_throughput(outcome.pair_jobs[:, 0], outcome.pair_jobs[:, 1])
            earned = (shared * outcome.pair_matrix[:, :, None]).sum(axis=1)
            pair_part = np.zeros(len(floor))
            np.add.at(pair_part, outcome.pair_jobs[:, 0], earned[:, 0])
            np.add.at(pair_part, outcome.pair_jobs[:, 1], earned[:, 1])
            floor = np.maximum(floor - pair_part, 0.0)
    spread = spread_agnostic(arrays, outcome.matrix, measured=measured.throughput, pair_jobs=outcome.pair_jobs,
                             pair_matrix=outcome.pair_matrix, keep_cost=policy in ("min_cost", "min_cost_slo"),
                             floor=floor, deadline=deadline, threads=threads)
    outcome.matrix = spread.matrix
    return spread


BASELINE_MEANING = ("agnostic model: runnable (throughput 1 on the types a job can run on, normalized by "
                    "their equal share; fleetplan's default) or gavel (1 on every type the job fits, zeros "
                    "included, as Gavel's baselines; time on a type it cannot run on is dropped)")


def document(solver, summary: str, own: dict[str, str] | None = None) -> None:
    """Give ``solver`` its docstring: ``summary`` and a numpydoc ``Parameters`` section where
    ``own`` explains the options the shared glossary does not (see fleetplan.solvers.options)."""
    from fleetplan.solvers.options import option_specs, parameters_section

    own = own or {}
    own_section = "".join(f"{name} : value\n    {meaning}\n" for name, meaning in own.items())
    solver.__doc__ = f"{summary}\n\nParameters\n----------\n{own_section}"
    solver.__doc__ = f"{summary}\n\n{parameters_section(option_specs(solver))}\n"


def _register_pair(name: str, driver, policy: str, summary: str, reference: str, needs_steps: bool = False,
                   exact: bool = True, baseline_option: bool = True, **driver_options) -> None:
    """Register ``name`` (heterogeneity-aware) and ``name-agnostic`` for ``driver``; the agnostic
    form takes ``baseline`` (see :func:`gavel_agnostic_arrays`) unless ``baseline_option`` is False."""
    fixed = dict(driver=driver, policy=policy, needs_steps=needs_steps, **driver_options)

    def aware_solver(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                     threads: int = 1, progress: Progress, lp: AllocationLpOptions = UNREFINED) -> SolveResult:
        return solve_policy(instance, aware=True, time_limit=time_limit, seed=seed, threads=threads,
                            progress=progress, lp=lp, **fixed)

    def agnostic_solver(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                        threads: int = 1, progress: Progress, lp: AllocationLpOptions = UNREFINED,
                        baseline: AgnosticBaseline = "runnable", ties: Ties = "spread") -> SolveResult:
        return solve_policy(instance, aware=False, time_limit=time_limit, seed=seed, threads=threads,
                            progress=progress, lp=lp, baseline=baseline, ties=ties, **fixed)

    def plain_agnostic_solver(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                              threads: int = 1, progress: Progress, lp: AllocationLpOptions = UNREFINED,
                              ties: Ties = "spread") -> SolveResult:
        return solve_policy(instance, aware=False, time_limit=time_limit, seed=seed, threads=threads,
                            progress=progress, lp=lp, ties=ties, **fixed)

    for solver, aware in ((aware_solver, True), (agnostic_solver if baseline_option else plain_agnostic_solver, False)):
        solver_name = name if aware else f"{name}-agnostic"
        solver.__name__ = solver_name.replace("-", "_")
        own = None if aware else {"baseline": BASELINE_MEANING, "ties": TIES_MEANING} if baseline_option \
            else {"ties": TIES_MEANING}
        document(solver, f"{summary} ({'heterogeneity-aware' if aware else 'heterogeneity-agnostic'}).", own)
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
                         threads: int = 1, progress: Progress, lp: AllocationLpOptions = UNREFINED,
                         method: FtfMethod = "dinkelbach") -> SolveResult:
    """Minimize the maximum finish-time fairness rho (Gavel §4.2, Themis), heterogeneity-aware:
    ``dinkelbach`` (default, the Crouzeix-Ferland-Schaible iteration) or ``levels``."""
    return solve_policy(instance, drive_finish_time_fairness, aware=True, policy="finish_time_fairness",
                        time_limit=time_limit, seed=seed, threads=threads, progress=progress, lp=lp,
                        needs_steps=True, method=method)


def finish_time_fairness_agnostic(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                                  threads: int = 1, progress: Progress, lp: AllocationLpOptions = UNREFINED,
                                  method: FtfMethod = "dinkelbach", baseline: AgnosticBaseline = "runnable",
                                  ties: Ties = "spread") -> SolveResult:
    """Finish-time fairness over time shares (the agnostic baseline of Gavel §7.2)."""
    return solve_policy(instance, drive_finish_time_fairness, aware=False, policy="finish_time_fairness",
                        time_limit=time_limit, seed=seed, threads=threads, progress=progress, lp=lp,
                        needs_steps=True, method=method, baseline=baseline, ties=ties)


document(finish_time_fairness, finish_time_fairness.__doc__)
document(finish_time_fairness_agnostic, finish_time_fairness_agnostic.__doc__,
         {"baseline": BASELINE_MEANING, "ties": TIES_MEANING})
register("allocation", "finish-time-fairness", exact=True, reference=f"{GAVEL}, §4.2",
         description=FTF_SUMMARY)(finish_time_fairness)
register("allocation", "finish-time-fairness-agnostic", exact=False, reference=f"{GAVEL}, §4.2",
         description=FTF_SUMMARY + ", blind to throughput differences (baseline)")(finish_time_fairness_agnostic)


def _binary_search(instance: AllocationInstance, aware: bool, tolerance: float, **options) -> SolveResult:
    # ``tolerance`` is in (0, 1) by its declared bounds (fleetplan.solvers.options.GLOSSARY).
    result = solve_policy(instance, drive_min_makespan_binary_search, aware=aware, policy="min_makespan",
                          needs_steps=True, tolerance=tolerance, **options)
    if result.status == "optimal" and tolerance > FTF_TOLERANCE:
        result.status = "feasible"  # stopped at the requested gap, short of the optimum
    return result


@register("allocation", "min-makespan-binary-search", exact=False, reference=f"{GAVEL}, Appendix A.1",
          description="minimum makespan by Gavel's binary search over feasibility LPs, to a relative gap")
def min_makespan_binary_search(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                               threads: int = 1, progress: Progress, lp: AllocationLpOptions = UNREFINED,
                               tolerance: float = 1e-6) -> SolveResult:
    """Minimum makespan by bisection on M (Gavel App. A.1); ``tolerance`` is the relative gap
    at which it stops (the paper's own runs stop at 5%)."""
    return _binary_search(instance, True, tolerance, time_limit=time_limit, seed=seed, threads=threads,
                          progress=progress, lp=lp)


@register("allocation", "min-makespan-binary-search-agnostic", exact=False, reference=f"{GAVEL}, Appendix A.1",
          description="heterogeneity-agnostic minimum makespan by binary search (baseline)")
def min_makespan_binary_search_agnostic(instance: AllocationInstance, *, time_limit: float | None = None,
                                        seed: int = 0, threads: int = 1, progress: Progress,
                                        lp: AllocationLpOptions = UNREFINED, tolerance: float = 1e-6,
                                        baseline: AgnosticBaseline = "runnable",
                                        ties: Ties = "spread") -> SolveResult:
    """The binary search over time shares instead of throughputs (the agnostic baseline)."""
    return _binary_search(instance, False, tolerance, time_limit=time_limit, seed=seed, threads=threads,
                          progress=progress, lp=lp, baseline=baseline, ties=ties)


document(min_makespan_binary_search, min_makespan_binary_search.__doc__.split("\n\nParameters")[0])
document(min_makespan_binary_search_agnostic, min_makespan_binary_search_agnostic.__doc__.split("\n\nParameters")[0],
         {"baseline": BASELINE_MEANING, "ties": TIES_MEANING})
