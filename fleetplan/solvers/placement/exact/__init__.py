"""Exact solvers of the ``placement`` kind: the Figure 4 MIP (MAST §3.2-§3.3) solved by HiGHS
through Pyomo (``mip-highs``) and by OR-Tools CP-SAT (``cpsat``).

This package holds those two solvers (here) and what they need beside the models of
:mod:`fleetplan.models.placement`: the pre-checks and the splitting into independent parts
(:mod:`~fleetplan.solvers.placement.exact.parts`), the moves of a whole plan replayed on the
climb's state (:mod:`~fleetplan.solvers.placement.exact.moves`), and the brute force the exact
solvers are tested against (:mod:`~fleetplan.solvers.placement.exact.enumeration`).

Both follow the same steps:

1. *Pre-checks* that explain infeasibility in the instance's terms: tables larger than the daily
   move quota cannot move (they are pinned to today's region), so a region whose pinned tables
   exceed its storage makes every plan infeasible; so do more bytes than all regions hold,
   overflowing regions that need more bytes moved out than the quota allows, and high-priority
   jobs that cannot reach the home-training threshold. The message names the region and the
   shortfall. A model the solver itself proves infeasible is reported as such.
2. *Splitting* into independent parts: the connected components of the graph linking each
   planned job to the tables it reads (union-find in numpy, ``parts.components``). Components interact only through region
   totals — GPU demand (Expressions 2, 7, 8), bytes per region (3, 4, 9), CPU per application (5),
   the home-training share (6) and the move quota — so they are solved one by one exactly when
   none of those can matter: w2 and w3 are 0 (or no planned ML demand) and no capacity, quota
   or threshold can bind. Otherwise one model covers the whole instance (the log says why).
3. *Warm start* from the hill climb (the default) or the current placement (``warm_start``),
   when the evaluator finds it feasible: HiGHS gets it as a MIP start, CP-SAT as a hint.
4. *Bound and gap*: the model under-estimates the exact objective (with equality when every
   breakpoint is exact, see :mod:`fleetplan.models.placement`), so the solver's dual bound is a
   bound on the exact optimum; the gap is measured against the evaluator's objective. The bound
   reported is the larger of it and the instance's own lower bound
   (:mod:`fleetplan.models.placement.bound`), which does not need the root LP that HiGHS does
   not finish from about 1,000 tables (it then reports a negative bound). Status
   ``optimal`` is claimed only when the solver proved optimality of an exact model. The
   MIP's capacity, quota, CPU and home-training rows are tightened by ``ROW_SAFETY`` (2e-6 of
   their scale) so that HiGHS's 1e-6 feasibility tolerance cannot produce a plan the judge
   rejects; its bound is proven for those rows. Claims are then checked against the judge: the
   plan is polished by the hill climb, an ``optimal`` it improves on becomes ``feasible``, and a
   bound above a judged plan's objective is not reported.
5. *No plan from the solver* (CP-SAT or HiGHS stopped at the limit without a solution, or HiGHS
   erred): the part keeps the best feasible plan known without it — the warm start, else the
   better of today's placement and the hill climb — scored by the evaluator; the status is
   ``time_limit`` (the limit was hit) or ``feasible`` (the solver erred), and the message names
   the parts concerned. Only when none of those is feasible is there no plan.

The instance's readings of Figure 4 (``split_ml_demand``, ``overload_form``) are
modelled exactly by both models (:mod:`fleetplan.models.placement`): neither solver refuses them,
and the judge, the models and the hill climb (warm start and polish) optimise the same objective.

HiGHS 1.14.0's MIP presolve returns wrong "optimal" answers on some small models (HiGHS issues
#3043, #3094, #2995; reproduced here on a 3-variable MIP: presolve on gives -1, off gives the
true -1.5), so ``presolve`` defaults to ``"off"``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fleetplan.highs_pool import use_threads
from fleetplan.instances import InstanceError, evaluate
from fleetplan.instances.placement import PlacementInstance, PlacementPlan
from fleetplan.instances.resources import check_fits
from fleetplan.lazy import lazy_attribute, lazy_module, not_loaded
from fleetplan.models.placement import ROW_SAFETY, BuildTimeout, PlacementData, prepare
from fleetplan.models.placement.bound import placement_lower_bound
from fleetplan.models.placement.cpsat import (
    add_placement_hint,
    placement_cpsat,
    read_cpsat_placement,
)
from fleetplan.models.placement.mip import placement_mip, read_placement, set_placement
from fleetplan.models.placement.size import model_estimate
from fleetplan.solvers.base import Progress, SolveResult, get_solver, register, relative_gap
from fleetplan.solvers.cpsat_run import solve_interruptibly
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.placement import polish
from fleetplan.solvers.placement.exact.moves import moves_between
from fleetplan.solvers.placement.exact.parts import (  # noqa: F401  (re-exported for callers and tests)
    _common_regions,
    components,
    coupling,
    explain_infeasibility,
)

pyo = lazy_module("pyomo.environ")
cp_model = lazy_module("ortools.sat.python.cp_model")
AppsiHighs = lazy_attribute("pyomo.contrib.appsi.solvers", "Highs")

WarmStart = Literal["hill-climb", "current", "none"]
TOLERANCE = 1e-9
# A claim (bound, optimality) is contradicted when a judged plan beats it by more than this,
# relative: the solvers' own tolerances (HiGHS 1e-6 feasibility, 1e-7 gap) stay below it.
CLAIM_TOLERANCE = 1e-6
# Seconds HiGHS's model translation takes per second of Pyomo build (about 1 when measured).
TRANSLATION_RATIO = 1.0
# Seconds a back-end takes to load the first time (Pyomo 0.4-1.8 s, OR-Tools 0.3-1.6 s as
# measured, the larger on a loaded machine): not started with less time left than that.
COLD_IMPORT_S = 2.0
# Shares of the time limit: the hill-climb warm start, and the polish after the solver.
WARM_SHARE = 0.2
POLISH_SHARE = 0.5


@dataclass
class PartOutcome:
    """One solved part: the placement of its tables, the solver's claim and its bound."""

    status: str
    home: np.ndarray | None
    model_objective: float | None
    bound: float | None
    exact: bool
    log: list[str]


# --- warm start -----------------------------------------------------------------------------

def warm_start_home(instance: PlacementInstance, how: WarmStart, time_limit: float | None,
                    seed: int, log: list[str]) -> np.ndarray | None:
    """A feasible starting placement (or None): today's, or the hill climb's (given
    ``time_limit`` seconds)."""
    if how == "none":
        return None
    arrays = instance.arrays()
    home = arrays.table_home.copy()
    if how == "hill-climb":
        try:
            spec = get_solver("placement", "hill-climb")
        except Exception:  # the heuristic is optional here; fall back to today's placement
            log.append("warm start: no hill-climb solver registered; using the current placement")
        else:
            result = spec.function(instance, time_limit=time_limit, seed=seed, threads=1,
                                   progress=lambda fraction, message: None)
            if result.plan is not None:
                home = result.plan.home_array(instance)
    evaluation = evaluate(instance, PlacementPlan.from_arrays(instance, home))
    if not evaluation.feasible:
        log.append(f"warm start ({how}) is infeasible ({evaluation.violations[0].constraint}); not used")
        return None
    log.append(f"warm start ({how}): objective {evaluation.objective:.6g}")
    return home


def fallback_home(instance: PlacementInstance, warm: np.ndarray | None, warm_start: WarmStart,
                  time_limit: float | None, seed: int, log: list[str]) -> np.ndarray | None:
    """The best feasible plan known without the exact solver: the warm start if it was used,
    else today's placement or the hill climb's, whichever is feasible and cheaper (or None)."""
    if warm is not None:
        return warm
    best, best_objective = None, math.inf
    for how in ("current", "hill-climb"):
        if how == warm_start:
            continue  # already tried and infeasible
        home = warm_start_home(instance, how, time_limit, seed, log)
        if home is None:
            continue
        objective = evaluate(instance, PlacementPlan.from_arrays(instance, home)).objective
        if objective < best_objective:
            best, best_objective = home, objective
    return best


# --- HiGHS ------------------------------------------------------------------------------------

# Keyed by status name, so this module loads without Pyomo ("unbounded" maps to error here).
_STATUS = {
    "optimal": "optimal",
    "maxTimeLimit": "time_limit",
    "maxIterations": "time_limit",
    "infeasible": "infeasible",
    "infeasibleOrUnbounded": "infeasible",
}


def solve_part_highs(data: PlacementData, warm: np.ndarray | None, *, time_limit: float | None,
                     threads: int, seed: int, mip_rel_gap: float, presolve: str) -> PartOutcome:
    """Build the Pyomo MIP of one part and solve it with HiGHS (appsi)."""
    started = time.perf_counter()
    clock = Deadline(time_limit, started)
    if not_loaded("pyomo.environ", "highspy") and clock.expired(reserve=COLD_IMPORT_S):
        return PartOutcome(status="time_limit", home=None, model_objective=None, bound=None, exact=data.exact,
                           log=["HiGHS MIP: not started, too little time left to load Pyomo and HiGHS"])
    try:
        model = placement_mip(data, clock)
    except BuildTimeout as stop:
        return PartOutcome(status="time_limit", home=None, model_objective=None, bound=None, exact=data.exact,
                           log=[f"HiGHS MIP: {stop} after {clock.elapsed():.2f} s"])
    build_s = time.perf_counter() - started
    if clock.expired(reserve=TRANSLATION_RATIO * build_s):
        # Translating the model for HiGHS cannot be interrupted and takes about as long
        # as building it: not started when it would overrun the limit.
        return PartOutcome(status="time_limit", home=None, model_objective=None, bound=None, exact=data.exact,
                           log=[f"HiGHS MIP: built in {build_s:.2f} s, no time left to translate and solve it"])
    if model.constant_violations:
        # Rows whose terms are all fixed and false: no placement satisfies them.
        return PartOutcome(status="infeasible", home=None, model_objective=None, bound=None, exact=data.exact,
                           log=[f"MIP: constraints fixed by pinned tables and decided jobs cannot hold: "
                                f"{', '.join(model.constant_violations[:5])}"])
    use_threads(threads)  # HiGHS has one thread pool per process
    solver = AppsiHighs()
    solver.config.load_solution = False
    solver.config.mip_gap = mip_rel_gap
    if warm is not None:
        set_placement(model, data, warm)
        solver.config.warmstart = True
    # Hand the model to HiGHS first, so the time limit covers only what is left after the
    # translation too (at 500 tables it took seconds, and a 5 s limit ran 7.7 s).
    solver.set_instance(model)
    for flag in ("check_for_new_or_removed_constraints", "check_for_new_or_removed_vars",
                 "check_for_new_or_removed_params", "check_for_new_objective", "update_constraints",
                 "update_vars", "update_params", "update_named_expressions", "update_objective"):
        setattr(solver.update_config, flag, False)
    build_s = time.perf_counter() - started
    if time_limit is not None:
        solver.config.time_limit = clock.remaining()
    # HiGHS's own feasibility tolerances (1e-6): with mip_feasibility_tolerance = 1e-9 on rows
    # whose byte shares reach 1e-8, HiGHS 1.14 certified a MIP start 2.7x above the optimum
    # as optimal. Claims are checked against the judge afterwards.
    solver.highs_options = {"random_seed": int(seed) % 2_147_483_647, "threads": int(threads),
                            "presolve": presolve, "mip_abs_gap": 1e-10}
    try:
        results = solver.solve(model)
    except (RuntimeError, ValueError) as error:  # appsi raises on some HiGHS failures
        return PartOutcome(status="error", home=None, model_objective=None, bound=None, exact=data.exact,
                           log=[f"HiGHS MIP failed: {error}"])
    status = _STATUS.get(results.termination_condition.name, "error")
    objective = results.best_feasible_objective
    bound = results.best_objective_bound
    home = None
    if objective is not None and math.isfinite(objective):
        results.solution_loader.load_vars()
        home = read_placement(model, data)
    elif status == "optimal":
        status = "error"
    bound = float(bound) if bound is not None and math.isfinite(bound) else None
    if status == "infeasible":
        bound = None
    n_vars = sum(1 for _ in model.component_data_objects(pyo.Var))
    log = [f"HiGHS MIP: {results.termination_condition.name} ({n_vars} variables, build "
           f"{build_s:.2f} s, total {time.perf_counter() - started:.2f} s)"]
    return PartOutcome(status=status, home=home, model_objective=objective, bound=bound,
                       exact=data.exact, log=log)


# --- the common driver ------------------------------------------------------------------------

def solve_exact(instance: PlacementInstance, solve_part, *, name: str, time_limit: float | None,
                seed: int, threads: int, progress: Progress, warm_start: WarmStart, split: bool,
                max_exact_levels: int, grid_levels: int) -> SolveResult:
    """Pre-check, split, prepare the parts and check that their models fit in memory (an
    :class:`InstanceError` naming the figure when not, before any work on a plan), warm start,
    solve each part with ``solve_part``, assemble the plan, polish it with the hill climb and
    check the solver's claims against the judge.

    One :class:`~fleetplan.solvers.deadline.Deadline` covers everything: the warm start gets
    a fifth of the time left after preparing, the build and every part draw from what is left,
    and a build that cannot finish leaves the best plan so far with status ``time_limit``.
    """
    deadline = Deadline(time_limit)
    arrays = instance.arrays()
    reason = explain_infeasibility(arrays)
    if reason is not None:
        return SolveResult(status="infeasible", message=reason, log=[f"pre-check: {reason}"])
    log: list[str] = []
    # Judging a plan once (plus expanding it) is kept back from every slice.
    # Timed twice when slow: the first call may pay for loading SciPy.
    for _ in range(2):
        judge_started = time.perf_counter()
        evaluate(instance, PlacementPlan.from_arrays(instance, arrays.table_home))
        judge_s = time.perf_counter() - judge_started
        if judge_s < 0.05:
            break
    reserve = 2.0 * judge_s + 0.05
    stats = {}
    try:
        parts = components(arrays)
        coupled = coupling(arrays)
        stats["components"] = float(len(parts))
        if split and coupled is None and len(parts) > 1:
            log.append(f"solving {len(parts)} components apart (nothing couples them)")
            datas = [prepare(arrays, tables, jobs, max_exact_levels=max_exact_levels, grid_levels=grid_levels,
                             deadline=_Reserved(deadline, reserve)) for tables, jobs in parts]
        else:
            why = coupled or ("splitting disabled" if not split else "one component")
            log.append(f"one model for the whole instance ({len(parts)} components; {why})")
            datas = [prepare(arrays, max_exact_levels=max_exact_levels, grid_levels=grid_levels,
                             deadline=_Reserved(deadline, reserve))]
    except BuildTimeout as stop:
        log.append(f"{name}: {stop} (preparing the model)")
        datas = []
    if datas:
        # Before the warm start and the build: a model that cannot fit in memory is refused at
        # once, with the figure (10^8 exact levels grew past 1 GB unchecked).
        check_fits(model_estimate(datas, name), "instance")
    warm = warm_start_home(instance, warm_start, deadline.share(WARM_SHARE), seed, log)
    if not datas:
        return _best_known(instance, name, warm, warm_start, deadline, seed, log, stats)
    stats["parts"] = float(len(datas))
    home = arrays.table_home.copy() if warm is None else warm.copy()
    bound_total, model_total = 0.0, 0.0
    statuses, exact = [], True
    # Parts the solver left without a plan (time limit with no solution, or a solver error)
    # keep the fallback's tables: "time_limit" promises the best plan so far, never none.
    unsolved: list[str] = []
    fallback: np.ndarray | None = None
    weights = np.array([max(len(d.tables), 1) for d in datas], dtype=float)
    for index, data in enumerate(datas):
        remaining = None
        if time_limit is not None:
            share = weights[index] / weights[index:].sum()
            remaining = deadline.remaining(reserve) * share
        progress(index / len(datas), f"{name}: part {index + 1}/{len(datas)} ({len(data.tables)} tables)")
        outcome = solve_part(data, warm, time_limit=remaining, threads=threads, seed=seed)
        log += outcome.log
        statuses.append(outcome.status)
        exact = exact and outcome.exact
        if outcome.status == "infeasible" and warm is not None:
            # A feasible warm start disproves it: the model's rows are tightened by ROW_SAFETY.
            log.append(f"{name}: the model of part {index + 1} is infeasible with its rows tightened by "
                       f"{ROW_SAFETY:g}, but the warm start is feasible; it is kept")
            outcome = PartOutcome(status="feasible", home=None, model_objective=None, bound=None,
                                  exact=outcome.exact, log=[])
            statuses[-1] = "error"
        if outcome.status == "infeasible":
            return SolveResult(status="infeasible", log=log,
                               message=f"{name}: the solver proved the model infeasible "
                                       f"(part {index + 1} of {len(datas)}, {len(data.tables)} tables)")
        if outcome.home is None:
            if not unsolved:
                fallback = fallback_home(instance, warm, warm_start, deadline.share(0.5), seed, log)
            unsolved.append(f"part {index + 1} ({outcome.status})")
            if fallback is None:
                return SolveResult(status="error" if outcome.status in ("optimal", "feasible") else outcome.status,
                                   log=log, message=f"{name}: no placement found ({outcome.status}) and "
                                                    "neither today's placement nor the hill climb is feasible")
            home[data.tables] = fallback[data.tables]
            model_total = None
            bound_total = None if bound_total is None or outcome.bound is None else bound_total + outcome.bound
            continue
        home[data.tables] = outcome.home[data.tables]
        if model_total is not None:
            model_total += outcome.model_objective or 0.0
        bound_total = None if bound_total is None or outcome.bound is None else bound_total + outcome.bound
    plan = PlacementPlan.from_arrays(instance, home, solver=name)
    judged = evaluate(instance, plan)
    objective = judged.objective
    if not judged.feasible and warm is not None:
        # Within the solver's tolerances but not the judge's: the best feasible plan known.
        log.append(f"{name}: the solver's plan violates {judged.violations[0].constraint} under the judge "
                   f"({judged.violations[0].message}); the warm start is kept")
        home = warm.copy()
        plan = PlacementPlan.from_arrays(instance, home, solver=name)
        objective = evaluate(instance, plan).objective
        unsolved.append("the whole plan (judged infeasible)")
        model_total = None
    kept_warm = False
    if warm is not None and not unsolved:
        # A grid model under-estimates, so its optimum can score worse than the warm start
        # under the evaluator (seen on 2 of 20 instances); the best plan known is returned.
        warm_plan = PlacementPlan.from_arrays(instance, warm, solver=name)
        warm_objective = evaluate(instance, warm_plan).objective
        if warm_objective < objective:
            plan, objective, kept_warm = warm_plan, warm_objective, True
            model_total = None
    # With parts, they hold only traffic; tables outside every part cost nothing (no planned job
    # reads them), so the parts' model objectives add up.
    model_objective = model_total
    if unsolved:
        # The solver's own failure decides between the two: it ran out of time, or it erred.
        status = "time_limit" if any(s == "time_limit" for s in statuses) else "feasible"
    elif all(s == "optimal" for s in statuses):
        status = "optimal" if exact else "feasible"
    elif any(s == "time_limit" for s in statuses):
        status = "time_limit"
    else:
        status = "feasible"
    plan, objective, status, bound_total, polished = _check_claims(
        instance, name, plan, objective, status, bound_total, deadline, reserve, log)
    bound_total = with_instance_bound(instance, name, bound_total, objective, stats, log)
    if polished:
        model_objective = None
        stats["polish_gain"] = polished
    stats["exact_model"] = float(exact)
    if bound_total is not None and not deadline.expired(reserve):
        # About 60% of the objective is Expression 8's constant floor (sigmoid(0) = 1/2 times
        # shares summing to 1): the gap is also given relative to the objective above it.
        floor = evaluate(instance, plan).metrics.get("objective_constant_floor", 0.0)
        stats["objective_constant_floor"] = floor
        stats["gap_above_floor"] = (objective - bound_total) / max(objective - floor, 1e-12)
    message = (f"{name}: {status}; model {'exact' if exact else 'under-estimates (breakpoint grid)'}"
               f", bound {bound_total if bound_total is not None else 'none'}")
    if kept_warm:
        stats["kept_warm_start"] = 1.0
        message += "; the solver's plan scored worse under the evaluator than the warm start, which is returned"
    if unsolved:
        stats["fallback_parts"] = float(len(unsolved))
        message += (f"; the solver returned no placement for {', '.join(unsolved)}: those tables keep the "
                    "best feasible warm start (today's placement or the hill climb)")
    # The plan names its moves as the hill climb's does (what moved, and what each bought).
    plan.moves = moves_between(instance, plan.home_array(instance))
    return SolveResult(status=status, plan=plan, objective=objective, bound=bound_total,
                       gap=relative_gap(objective, bound_total), log=log, message=message,
                       model_objective=model_objective, stats=stats)


def with_instance_bound(instance: PlacementInstance, name: str, bound: float | None, objective: float,
                        stats: dict[str, float], log: list[str]) -> float | None:
    """The larger of the solver's bound and the instance's own lower bound
    (:func:`~fleetplan.models.placement.bound.placement_lower_bound`, proven without the MIP):
    from about 1,000 tables HiGHS stops before its root LP and reports the bound of its column
    bounds, which is negative. Both are kept in ``stats`` (``solver_bound``, ``instance_bound``)."""
    if bound is not None:
        stats["solver_bound"] = bound
    own = placement_lower_bound(instance.arrays()).value
    stats["instance_bound"] = own
    if own > objective + CLAIM_TOLERANCE * max(1.0, abs(objective)):
        log.append(f"{name}: the instance bound {own:.9g} is above a judged plan's objective {objective:.9g}; "
                   "not used")
        return bound
    if bound is None or own > bound:
        log.append(f"bound: the instance's lower bound {own:.6g} (the solver's: "
                   f"{'none' if bound is None else format(bound, '.6g')})")
        return min(own, objective)
    return bound


class _Reserved:
    """A deadline seen by a model builder: expired ``reserve`` seconds early (the judge's)."""

    def __init__(self, deadline: Deadline, reserve: float) -> None:
        self.deadline, self.reserve = deadline, reserve

    def expired(self, reserve: float = 0.0) -> bool:
        return self.deadline.expired(self.reserve + reserve)


def _check_claims(instance: PlacementInstance, name: str, plan: PlacementPlan, objective: float, status: str,
                  bound: float | None, deadline: Deadline, reserve: float, log: list[str]
                  ) -> tuple[PlacementPlan, float, str, float | None, float]:
    """Polish the plan with the hill climb and drop what the judge contradicts:
    an ``optimal`` the climb improves on, or a bound above a judged plan's objective, was not
    proven (the solver's tolerances). Returns plan, objective, status, bound and the polish gain."""
    gain = 0.0
    if not deadline.expired(reserve):
        home, climb = polish(instance, plan.home_array(instance), deadline.share(POLISH_SHARE))
        if climb.applied:
            candidate = PlacementPlan.from_arrays(instance, home, solver=name)
            polished = evaluate(instance, candidate)
            if polished.feasible and polished.objective < objective:
                gain = objective - polished.objective
                log.append(f"polish: the hill climb from {name}'s plan lowered the objective by {gain:.6g} "
                           f"({len(climb.applied)} moves)")
                plan, objective = candidate, polished.objective
    slack = CLAIM_TOLERANCE * max(1.0, abs(objective))
    if status == "optimal" and gain > slack:
        status = "feasible"
        log.append(f"{name}: the solver claimed optimal, but the hill climb improved its plan by {gain:.6g}: "
                   "not proven (solver tolerances); reported as feasible")
    if bound is not None and bound > objective + slack:
        log.append(f"{name}: the solver's bound {bound:.9g} is above the objective {objective:.9g} of a judged "
                   "plan, so it is not a proven bound (solver tolerances); no bound reported")
        bound = None
        if status == "optimal":
            status = "feasible"
    elif bound is not None:
        bound = min(bound, objective)  # within tolerance: a bound cannot beat a plan
    return plan, objective, status, bound, gain


def _best_known(instance: PlacementInstance, name: str, warm: np.ndarray | None, warm_start: WarmStart,
                deadline: Deadline, seed: int, log: list[str], stats: dict[str, float]) -> SolveResult:
    """The time ran out before the model was built: the best feasible plan known, time_limit."""
    home = fallback_home(instance, warm, warm_start, deadline.share(0.5), seed, log) \
        if warm is None and not deadline.expired() else warm
    if home is None:
        home = instance.arrays().table_home.copy()
    plan = PlacementPlan.from_arrays(instance, home, solver=name, moves=moves_between(instance, home))
    objective = evaluate(instance, plan).objective
    stats["fallback_parts"] = 1.0
    bound = with_instance_bound(instance, name, None, objective, stats, log)
    return SolveResult(status="time_limit", plan=plan, objective=objective, log=log, stats=stats,
                       bound=bound, gap=relative_gap(objective, bound),
                       message=f"{name}: the time limit ran out while building the model; the best plan "
                               "known (the warm start, else today's placement) is returned")


def _check_options(warm_start: str, max_exact_levels: int, grid_levels: int) -> None:
    if warm_start not in ("hill-climb", "current", "none"):
        raise InstanceError("options.warm_start", f"unknown warm start '{warm_start}' (hill-climb, current or none)")
    if max_exact_levels < 1:
        raise InstanceError("options.max_exact_levels", "must be >= 1")
    if grid_levels < 1:
        raise InstanceError("options.grid_levels", "must be >= 1")


@register("placement", "mip-highs", exact=True,
          description="Tetris Figure 4 as a MIP (R(job) and demands as variables, non-linear terms "
                      "piecewise-linearised), Pyomo -> HiGHS, with components, warm start and bound",
          reference="Choudhury et al., MAST, OSDI 2024, §3.2-§3.3 (Figure 4)")
def mip_highs(instance: PlacementInstance, *, time_limit: float | None = None, seed: int = 0,
              threads: int = 1, progress: Progress, warm_start: WarmStart = "hill-climb",
              split: bool = True, max_exact_levels: int = 64, grid_levels: int = 16,
              mip_rel_gap: float = 1e-7, presolve: Literal["off", "on", "choose"] = "off") -> SolveResult:
    """Solve the placement MIP with HiGHS; ``optimal`` when proven on an exact model.

    >>> import fleetplan
    >>> instance = fleetplan.generate("placement", {"regions": 2, "tables": 4, "jobs": 3}, seed=0)
    >>> fleetplan.solve(instance, "mip-highs").status
    'optimal'
    """
    _check_options(warm_start, max_exact_levels, grid_levels)
    if presolve not in ("off", "on", "choose"):
        raise InstanceError("options.presolve", "must be off, on or choose")

    def part(data, warm, *, time_limit, threads, seed):
        return solve_part_highs(data, warm, time_limit=time_limit, threads=threads, seed=seed,
                                mip_rel_gap=mip_rel_gap, presolve=presolve)

    return solve_exact(instance, part, name="mip-highs", time_limit=time_limit, seed=seed, threads=threads,
                       progress=progress, warm_start=warm_start, split=split,
                       max_exact_levels=max_exact_levels, grid_levels=grid_levels)


# --- CP-SAT -----------------------------------------------------------------------------------

_CPSAT_STATUS = {
    "OPTIMAL": "optimal",
    "FEASIBLE": "time_limit",
    "INFEASIBLE": "infeasible",
    "MODEL_INVALID": "error",
    "UNKNOWN": "time_limit",
}


def solve_part_cpsat(data: PlacementData, warm: np.ndarray | None, *, time_limit: float | None,
                     threads: int, seed: int) -> PartOutcome:
    """Build the CP-SAT model of one part and solve it; bounds converted to objective units."""
    started = time.perf_counter()
    clock = Deadline(time_limit, started)
    if not_loaded("ortools.sat.python.cp_model") and clock.expired(reserve=COLD_IMPORT_S):
        return PartOutcome(status="time_limit", home=None, model_objective=None, bound=None, exact=data.exact,
                           log=["CP-SAT: not started, too little time left to load OR-Tools"])
    try:
        cpsat = placement_cpsat(data, clock)
    except BuildTimeout as stop:
        return PartOutcome(status="time_limit", home=None, model_objective=None, bound=None, exact=data.exact,
                           log=[f"CP-SAT: {stop} after {clock.elapsed():.2f} s"])
    build_s = time.perf_counter() - started
    if warm is not None:
        add_placement_hint(cpsat, data, warm)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = max(int(threads), 1)
    solver.parameters.random_seed = int(seed) % 2_147_483_647
    if time_limit is not None:
        solver.parameters.max_time_in_seconds = clock.remaining()
    code = solve_interruptibly(solver, cpsat.model)  # Ctrl-C: exit 130, not a quiet early stop
    status = _CPSAT_STATUS.get(solver.status_name(code), "error")
    home = None
    objective = bound = None
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        home = read_cpsat_placement(cpsat, solver, data, data.arrays.table_home)
        objective = solver.objective_value / cpsat.scale
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
        bound = (solver.best_objective_bound - cpsat.rounding_slack) / cpsat.scale
    if code == cp_model.UNKNOWN and home is None:
        status = "time_limit"
    log = [f"CP-SAT: {solver.status_name(code)} ({len(cpsat.model.proto.variables)} variables, "
           f"build {build_s:.2f} s, total {time.perf_counter() - started:.2f} s, scale {cpsat.scale:.6g}, "
           f"rounding slack {cpsat.rounding_slack / cpsat.scale:.3g})"]
    # CP-SAT optimises the rounded model: its optimum is the exact one only up to the rounding.
    return PartOutcome(status=status, home=home, model_objective=objective, bound=bound,
                       exact=data.exact, log=log)


@register("placement", "cpsat", exact=True,
          description="Tetris Figure 4 as an OR-Tools CP-SAT model (integer-scaled, piecewise "
                      "levels for the non-linear terms), with components, hints and bound",
          reference="Choudhury et al., MAST, OSDI 2024, §3.2-§3.3 (Figure 4)")
def cpsat(instance: PlacementInstance, *, time_limit: float | None = None, seed: int = 0,
          threads: int = 1, progress: Progress, warm_start: WarmStart = "hill-climb",
          split: bool = True, max_exact_levels: int = 64, grid_levels: int = 16) -> SolveResult:
    """Solve the placement model with CP-SAT; ``optimal`` when proven on an exact model
    (exact up to the integer scaling documented in :mod:`fleetplan.models.placement.cpsat`).

    >>> import fleetplan
    >>> instance = fleetplan.generate("placement", {"regions": 2, "tables": 4, "jobs": 3}, seed=0)
    >>> fleetplan.solve(instance, "cpsat").status
    'optimal'
    """
    _check_options(warm_start, max_exact_levels, grid_levels)
    return solve_exact(instance, solve_part_cpsat, name="cpsat", time_limit=time_limit, seed=seed,
                       threads=threads, progress=progress, warm_start=warm_start, split=split,
                       max_exact_levels=max_exact_levels, grid_levels=grid_levels)
