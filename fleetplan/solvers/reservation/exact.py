"""Exact solvers of the ``reservation`` kind: the aggregated RAS MIP (MAST §2) solved by HiGHS
(``mip-highs``) and by OR-Tools CP-SAT (``cpsat``).

Both build :func:`fleetplan.models.reservation.build` once, warm-start from today's assignment
when the model admits it (HiGHS as a MIP start, CP-SAT as a hint), turn the optimal counts into
servers with :func:`~fleetplan.models.reservation.disaggregate` (minimal moves) and report the
solver's bound plus the model's constant as the bound on the evaluator's objective.

Infeasible requests are not input errors: when the model is infeasible, the *elastic* model
(a shortfall per reservation, total shortfall minimised) is solved in the time left and the
status is ``infeasible`` with a message naming the reservation with the largest shortfall, the
failure domain that leaves it short and the shortfall in RRU (within the disruption budget).
"""

from __future__ import annotations

import math
import time
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from fleetplan.instances import evaluate
from fleetplan.instances.reservation import FD_LEVEL, ReservationInstance, ReservationPlan
from fleetplan.lazy import not_loaded
from fleetplan.models.build_clock import BuildTimeout
from fleetplan.models.reservation import (
    ReservationModel,
    build,
    counts_from_assignment,
    disaggregate,
    full_solution,
)
from fleetplan.models.reservation.cuts import with_cuts
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.cpsat_run import solve_interruptibly
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.reservation.bounded import (
    GRACE_S,
    PRESOLVE_RULES_OFF,
    highs_solution,
    run_bounded,
)
from fleetplan.solvers.reservation.relax_fix import LARGE_COLUMNS

# Seconds kept back from the solver for disaggregation and the judge.
RESERVE_S = 0.5
# ... and per server (the judge took 1.3 s at 10^6 servers), at most MAX_RESERVE_S.
RESERVE_S_PER_SERVER = 2e-6
MAX_RESERVE_S = 10.0
# HiGHS's model status (as a string) -> SolveResult status; the child that run_bounded kills
# at the deadline and an interrupted run are both out of time.
_BOUNDED_STATUS = {"Optimal": "optimal", "Time limit reached": "time_limit", "Interrupted by user": "time_limit",
                   "Killed at the deadline": "time_limit", "Infeasible": "infeasible",
                   "Primal infeasible or unbounded": "infeasible"}
SHORT = 1e-6
# Relative slack when checking a claimed bound against a known feasible objective.
BOUND_SLACK = 1e-6
# Share of the time left that mip-highs gives relax-and-fix; the whole model's MIP gets the
# rest. At 10^5 servers the binary MIP's bound rose faster than the whole MIP's (50,782 after
# 22 s of CPU against 50,727 after 43 s), and the whole MIP did not finish its root LP in the
# 25 % left of a 60 s limit (benchmarks/results/reservation.md).
RELAX_SHARE = 0.85
# Above LARGE_COLUMNS nothing runs after relax-and-fix's neighbourhood search but the
# disaggregation and the judge (a few seconds at 10^6 servers), so it gets nearly all the time.
LARGE_SHARE = 0.97


# Seconds OR-Tools takes to load the first time (0.3-1.6 s measured for placement, the larger
# on a loaded machine; fleetplan.solvers.placement.exact.COLD_IMPORT_S is 2 s).
COLD_IMPORT_S = 1.0


def _shortened(deadline: Deadline, seconds: float) -> Deadline:
    """The same clock, ``seconds`` earlier (what a warm start may use)."""
    if deadline.time_limit is None:
        return deadline
    return Deadline(max(deadline.time_limit - seconds, 0.0), started=deadline.started)


class _Reserved:
    """A deadline seen by a model builder: expired ``reserve`` seconds early."""

    def __init__(self, deadline: Deadline, reserve: float) -> None:
        self.deadline, self.reserve = deadline, reserve

    def expired(self, reserve: float = 0.0) -> bool:
        return self.deadline.expired(reserve + self.reserve)


def _no_time(instance: ReservationInstance, model: ReservationModel, start: np.ndarray | None,
             log: list[str]) -> SolveResult:
    """What is returned when the clock stops a back-end before it starts: the warm start."""
    if start is None:
        return SolveResult(status="time_limit", log=log, message="no plan found before the time limit")
    log.append("the warm start is returned")
    return _finish(instance, model, start, "time_limit", None, float(model.lp.cost @ start + model.constant), log)


def _forced_over_budget(model: ReservationModel, instance: ReservationInstance) -> str | None:
    budget = instance.arrays().budget
    if model.forced > budget:
        return (f"disruption budget: {model.forced} servers sit today in reservations that do not "
                f"accept their type and must move, more than the budget of {budget:.0f}")
    return _single_fault_domain(instance)


def _single_fault_domain(instance: ReservationInstance) -> str | None:
    """Why a reservation with a fault-domain guarantee cannot keep it: every available server
    of a type it accepts lies in one fault domain (or there is none), so losing that domain
    loses all it holds (the model was built, and its cuts crashed)."""
    arrays = instance.arrays()
    for r in np.flatnonzero((arrays.res_level == FD_LEVEL) & (arrays.res_request > 0)).tolist():
        usable = arrays.available & arrays.accepts[r, arrays.server_type]
        domains = np.unique(arrays.server_fd[usable])
        if domains.size <= 1:
            where = (f"all lie in fault domain '{arrays.fd_ids[int(domains[0])]}'" if domains.size
                     else "there are none")
            return (f"reservation '{arrays.res_ids[r]}' has a fault-domain guarantee of "
                    f"{arrays.res_request[r]:.6g} RRU, but the available servers of the types it "
                    f"accepts {where}: losing one fault domain loses everything it could hold")
    return None


def _warm_values(model: ReservationModel, instance: ReservationInstance, how: str, deadline: Deadline,
                 seed: int, log: list[str], lp=None, share: float = 0.5,
                 large_columns: int = LARGE_COLUMNS, threads: int = 1,
                 search_rounds: int | None = None) -> tuple[np.ndarray | None, float | None]:
    """A starting point for the solver: today's assignment, or the better feasible plan of
    the greedy (up to 40 % of the time; 8 s at 10^6 servers) and the hill climb (a fifth of
    what is left) or relax-and-fix (``share`` of the time left, on ``lp``); None when
    there is none. Also the bound relax-and-fix proved (None without it)."""
    if how == "none":
        return None, None
    from fleetplan.solvers.reservation.relax_fix import relax_and_fix

    start, bound = None, None
    # Relax-and-fix first, the greedy only as a fallback (it took 33 s of a 60 s limit at 10^5
    # servers on a loaded machine, for a plan 16 % worse); first above LARGE_COLUMNS, where the
    # LP may not be solved in time (the greedy takes 8 s at 10^6 servers, the LP 255 s of CPU).
    greedy_first = how == "hill-climb" or (lp or model.lp).num_cols > large_columns
    if how == "relax-and-fix" and not greedy_first:
        relaxed = relax_and_fix(model, deadline, 1, seed, log, lp=lp, share=share, large_columns=large_columns)
        bound = relaxed.bound
        if relaxed.values is not None:
            start = _checked_start(model, instance, relaxed.values[model.lp.names["x"]], how, log)
    if start is None or greedy_first:
        start = _better(model, start, _heuristic_start(model, instance, how, deadline, seed, log))
    if how == "relax-and-fix" and greedy_first:
        relaxed = relax_and_fix(model, deadline, threads, seed, log, lp=lp, share=share, arrays=instance.arrays(),
                                start=start, large_columns=large_columns, search_rounds=search_rounds)
        bound = relaxed.bound
        if relaxed.values is not None:
            start = _better(model, start, _checked_start(model, instance, relaxed.values[model.lp.names["x"]],
                                                         how, log))
    return start, bound


def _better(model: ReservationModel, one: np.ndarray | None, other: np.ndarray | None) -> np.ndarray | None:
    if one is None or (other is not None and model.lp.cost @ other < model.lp.cost @ one):
        return other
    return one


def _heuristic_start(model: ReservationModel, instance: ReservationInstance, how: str, deadline: Deadline,
                     seed: int, log: list[str]) -> np.ndarray | None:
    """Today's assignment, or the better plan of the greedy and (for ``hill-climb``) the hill
    climb, as the model's columns; None when it is infeasible."""
    arrays = instance.arrays()
    assignment = arrays.server_current
    if how in ("hill-climb", "relax-and-fix"):
        from fleetplan.solvers.reservation.heuristics import ras_greedy, ras_hill_climb

        best = None
        for heuristic, share in ((ras_greedy, 0.4), (ras_hill_climb, 0.2))[:2 if how == "hill-climb" else 1]:
            found = heuristic(instance, time_limit=deadline.share(share), seed=seed, threads=1,
                              progress=lambda fraction, message: None)
            objective = "no plan" if found.objective is None else f"objective {found.objective:.6g}"
            log.append(f"warm start ({heuristic.__name__}): {found.status}, {objective}")
            if found.plan is not None and found.status != "error" and (best is None or found.objective < best.objective):
                best = found
        if best is not None:
            assignment = best.plan.assignment_array(instance)
    x = counts_from_assignment(model, arrays, assignment)
    return None if x is None else _checked_start(model, instance, x, how, log)


def _checked_start(model: ReservationModel, instance: ReservationInstance, x: np.ndarray, how: str,
                   log: list[str]) -> np.ndarray | None:
    """Every column's value for counts ``x`` if the judge finds their plan feasible, else None."""
    arrays = instance.arrays()
    if not evaluate(instance, ReservationPlan.from_arrays(instance, disaggregate(model, arrays, x))).feasible:
        log.append(f"warm start ({how}) is infeasible; not used")
        return None
    return full_solution(model, np.round(x))


def _highs(model: ReservationModel, deadline: Deadline, threads: int, seed: int, mip_rel_gap: float,
           presolve: str, start: np.ndarray | None, log: list[str], lp=None):
    from fleetplan.solvers import highs as runner

    # The reserve is CPU work (expanding and judging the plan): on a loaded machine it takes
    # 1 / share times as long in wall time (61.2 s against a 60 s limit at 10^5 servers, load 7).
    reserve = min((RESERVE_S + RESERVE_S_PER_SERVER * model.groups.of_server.size) / deadline.cpu_share(),
                  MAX_RESERVE_S)
    reserve += GRACE_S
    highs = runner.new_highs(deadline.remaining(reserve), threads, seed)
    runner.pass_lp(highs, model.lp if lp is None else lp, "simplex")
    highs.setOptionValue("solver", "choose")
    # With the constant inside, HiGHS's relative gap is the gap on the evaluator's objective.
    highs.changeObjectiveOffset(float(model.constant))
    highs.setOptionValue("presolve", presolve)
    if presolve != "off":
        highs.setOptionValue("presolve_rule_off", PRESOLVE_RULES_OFF)
    highs.setOptionValue("mip_rel_gap", float(mip_rel_gap))
    if start is not None:
        highs.setSolution(highs_solution(start))
    # HiGHS checks its own limit only between phases (its root cut loop ran 4-8x over a 20 s
    # limit here); the interrupt callbacks stop simplex and branch-and-bound at the deadline.
    stop_at = None if deadline.time_limit is None else deadline.started + deadline.time_limit - reserve
    runner.interrupt_at(highs, stop_at)
    started = time.perf_counter()
    ran = run_bounded(highs, stop_at)
    status = _BOUNDED_STATUS.get(ran.status, "error")
    if status == "optimal" and ran.values is None:
        status = "error"
    outcome = runner.LpOutcome(status=status, values=ran.values,
                               objective=None if ran.values is None
                               else float(model.lp.cost @ ran.values + model.constant),
                               log=[f"HiGHS: {ran.status} in {time.perf_counter() - started:.3f} s"])
    log.extend(outcome.log)
    return outcome, ran.bound


def _pyomo(model: ReservationModel, deadline: Deadline, threads: int, seed: int, mip_rel_gap: float,
           presolve: str, log: list[str]):
    """The same model through Pyomo (:func:`fleetplan.models.reservation.cpsat.to_pyomo`)."""
    from fleetplan.models.reservation.cpsat import read_pyomo, to_pyomo
    from fleetplan.solvers.highs import solve_pyomo

    declared = to_pyomo(model.lp)
    outcome = solve_pyomo(declared, time_limit=deadline.remaining(RESERVE_S), threads=threads, seed=seed,
                          algorithm="simplex")
    log.extend(outcome.log)
    if outcome.objective is not None:
        outcome.values = read_pyomo(declared, model.lp)
        outcome.objective += model.constant
    bound = outcome.objective if outcome.status == "optimal" and outcome.objective is not None else math.nan
    return outcome, bound


def _explain(instance: ReservationInstance, deadline: Deadline, threads: int, seed: int,
             log: list[str]) -> str:
    """Solve the elastic model and name the reservation left shortest (module docstring)."""
    arrays = instance.arrays()
    elastic = build(arrays, elastic=True)
    outcome, _ = _highs(elastic, deadline, threads, seed, 1e-6, "off", None, log)
    if outcome.values is None:
        return "the model is infeasible (no time was left to find which reservation is short)"
    shortfall = outcome.values[elastic.lp.names["s"]]
    r = int(np.argmax(shortfall))
    assignment = disaggregate(elastic, arrays, outcome.values[elastic.lp.names["x"]])
    verdict = evaluate(instance, ReservationPlan.from_arrays(instance, assignment))
    reason = next((v.message for v in verdict.violations
                   if v.constraint == "guarantee" and v.where.split("/")[0] == arrays.res_ids[r]), "")
    best = "at best" if outcome.status == "optimal" else "in the best plan found"
    budget = f" within the disruption budget of {arrays.budget:.0f} servers" if np.isfinite(arrays.budget) else ""
    total = float(shortfall.sum())
    return (f"reservation '{arrays.res_ids[r]}' is short by {shortfall[r]:.6g} RRU {best}{budget} "
            f"(all reservations: {total:.6g} RRU){': ' + reason if reason else ''}")


def _finish(instance: ReservationInstance, model: ReservationModel, values: np.ndarray | None,
            status: str, bound: float | None, model_objective: float | None, log: list[str],
            message: str = "") -> SolveResult:
    if values is None:
        return SolveResult(status=status, log=log, message=message or "no plan found")
    assignment = disaggregate(model, instance.arrays(), values[model.lp.names["x"]])
    plan = ReservationPlan.from_arrays(instance, assignment)
    stats = {name: float(value) for name, value in model.sizes.items()}
    return SolveResult(status=status, plan=plan, objective=model_objective, bound=bound,
                       model_objective=model_objective, log=log, message=message, stats=stats)


@register("reservation", "mip-highs", exact=True,
          description="aggregated RAS MIP (counts per reservation x type x fault domain) by HiGHS, "
                      "then minimal-move disaggregation",
          reference="Choudhury et al., MAST, OSDI 2024, §2 (RAS)")
def mip_highs(instance: ReservationInstance, *, time_limit: float | None = None, seed: int = 0,
              threads: int = 1, progress: Progress, mip_rel_gap: float = 1e-4,
              presolve: Literal["off", "on", "choose"] = "off",
              warm_start: Literal["hill-climb", "relax-and-fix", "current", "none"] = "relax-and-fix",
              backend: Literal["highspy", "pyomo"] = "highspy", cuts: bool = True,
              large_columns: int = LARGE_COLUMNS,
              search_rounds: Annotated[int, Field(ge=1)] | None = None) -> SolveResult:
    """Solve the aggregated MIP with HiGHS (MAST §2: "RAS formulates a MIP problem").

    Parameters
    ----------
    mip_rel_gap : float
        Relative gap at which HiGHS stops and calls the plan optimal.
    presolve : {"off", "on", "choose"}
        HiGHS MIP presolve: off (default: with it on, HiGHS's root cut loop ignored the time
        limit, 54 s at a 20 s limit on 30,000 servers), on or choose, always without the
        column-substitution rules that prove false optima on this model (PRESOLVE_RULES_OFF).
    warm_start : {"hill-climb", "relax-and-fix", "current", "none"}
        MIP start: the better of the greedy's and the hill climb's plans (at most 40 % and a
        fifth of the rest of the time), the better of the greedy's and relax-and-fix's (default:
        LP, binary MIP, count MIP in 85 % of the time left; its relaxations' bounds count),
        today's assignment, or none; used when feasible, and returned if HiGHS finds nothing
        better in time.
    backend : {"highspy", "pyomo"}
        Hand HiGHS the sparse model directly, or the same model declared in Pyomo (slower to
        build; no MIP start, cuts or proven bound short of optimality).
    cuts : bool
        Add the valid inequalities of fleetplan.models.reservation.cuts (capacity covers and
        buffer tangents on the ML datacenter binaries) to the model HiGHS solves.
    large_columns : int
        Above this many model columns (with ``warm_start="relax-and-fix"``) the whole MIP is not
        run: the greedy's plan, improved by the neighbourhood search of
        fleetplan.solvers.reservation.neighbourhood, is returned with the better of the
        datacenter relaxation's bound and the search's Lagrangian bound, status ``feasible``
        (the default, 60,000, is where the model's LP stops being solvable in minutes). There
        ``threads`` > 1 runs the Lagrangian pass on a core of its own.
    search_rounds : int or None
        Above ``large_columns``: the neighbourhood search stops after this many sub-MIPs (or at
        the time limit, if sooner), so what it does does not depend on the machine's speed
        (each sub-MIP keeps its own seconds cap; on its own core the Lagrangian pass counts
        apart and is waited for). None (default): until the time limit; without one, until a
        pass of each kind improves nothing.
    """
    deadline = Deadline(time_limit)
    log: list[str] = []
    model = build(instance.arrays())
    log.append(f"model: {model.sizes}")
    progress(0.1, f"aggregated model: {model.sizes['columns']} columns, {model.sizes['rows']} rows")
    reason = _forced_over_budget(model, instance)
    if reason:
        return SolveResult(status="infeasible", log=log, message=reason)
    lp = with_cuts(model, instance.arrays()) if cuts else model.lp
    large = backend == "highspy" and warm_start == "relax-and-fix" and lp.num_cols > large_columns
    start, relaxed = _warm_values(model, instance, warm_start, deadline, seed, log, lp=lp,
                                  share=LARGE_SHARE if large else RELAX_SHARE, large_columns=large_columns,
                                  threads=threads, search_rounds=search_rounds)
    if backend == "pyomo":
        outcome, bound = _pyomo(model, deadline, threads, seed, mip_rel_gap, presolve, log)
    elif large:
        # HiGHS could not solve the root LP in the time (module relax_fix): the plan and bound
        # are relax-and-fix's.
        if start is None:
            return SolveResult(status="time_limit", log=log, message="no plan found before the time limit")
        return _finish(instance, model, start, "feasible", relaxed, float(model.lp.cost @ start + model.constant), log)
    else:
        outcome, bound = _highs(model, deadline, threads, seed, mip_rel_gap, presolve, start, log, lp=lp)
    if relaxed is not None and outcome.status != "infeasible" and not bound >= relaxed:
        # A relaxation's proven bound (the LP's, or the binary MIP's) bounds the model too.
        log.append(f"bound: relax-and-fix's {relaxed:.9g} (HiGHS's on the whole model: {bound:.9g})")
        bound = relaxed
    if outcome.values is None and start is not None and outcome.status != "infeasible":
        outcome.values, outcome.objective = start, float(model.lp.cost @ start + model.constant)
        log.append("HiGHS found no plan in time: the warm start is returned")
    if outcome.status == "infeasible":
        return SolveResult(status="infeasible", log=log, message=_explain(instance, deadline, threads, seed, log))
    status = outcome.status if outcome.status in ("optimal", "time_limit") else "error"
    claimed = outcome.objective
    proven = bound if math.isfinite(bound) else None
    if start is not None and outcome.values is not None:
        known = float(model.lp.cost @ start + model.constant)
        status, proven, outcome.values, claimed = _cross_check(
            status, proven, outcome.values, claimed, start, known, log)
    if status == "time_limit" and proven is not None and claimed is not None \
            and claimed - proven <= mip_rel_gap * max(abs(claimed), 1e-9):
        status = "optimal"  # the relaxation's bound proves the plan within the gap
    return _finish(instance, model, outcome.values, status, proven, claimed, log)


def _cross_check(status: str, bound: float | None, values: np.ndarray, objective: float | None,
                 start: np.ndarray, known: float, log: list[str], who: str = "HiGHS"):
    """Refuse a claim the warm start refutes: a bound above a feasible plan's
    objective is not proven, and neither is the optimality of a plan worse than that plan, so
    the bound is dropped, ``optimal`` becomes ``feasible``; the better plan is returned (HiGHS
    keeps a MIP start as its incumbent, so a worse plan means it lost the start)."""
    slack = BOUND_SLACK * max(1.0, abs(known))
    false_bound = bound is not None and bound > known + slack
    worse = objective is None or objective > known + slack
    if not (false_bound or worse):
        return status, bound, values, objective
    log.append(f"{who}: {status}, objective {objective}, bound {bound}, but the warm start is "
               f"feasible at {known:.9g}: " + ("the claim is not proven and is dropped"
                                               if false_bound or status == "optimal" else "it is returned"))
    if false_bound:
        bound = None
    if status == "optimal":
        status = "feasible"
    if worse:
        values, objective = start, known
    return status, bound, values, objective


@register("reservation", "cpsat", exact=True, default=True,
          description="the same aggregated RAS model in OR-Tools CP-SAT (integer RRU units). The default: "
                      "a heuristic plan first (relax-and-fix's, or the greedy's and the hill climb's with "
                      "warm_start=hill-climb), then the exact model hinted with it, keeping the better of "
                      "the two, with CP-SAT's bound: never worse than its start",
          reference="Choudhury et al., MAST, OSDI 2024, §2 (RAS)")
def cpsat(instance: ReservationInstance, *, time_limit: float | None = None, seed: int = 0,
          threads: int = 1, progress: Progress,
          warm_start: Literal["hill-climb", "relax-and-fix", "current", "none"] = "relax-and-fix") -> SolveResult:
    """Solve the aggregated model with CP-SAT (see :mod:`fleetplan.models.reservation.cpsat`).

    Parameters
    ----------
    warm_start : {"hill-climb", "relax-and-fix", "current", "none"}
        Hint: the better of the greedy's and the hill climb's plans, the better of the greedy's
        and relax-and-fix's (as for mip-highs; the default: the lower objective at equal CPU
        at 10^4 and 10^5 servers, benchmarks/RESULTS.md), today's assignment, or none; used
        when feasible.
    """
    from fleetplan.models.reservation.cpsat import (
        TRANSLATE_S_PER_ROW,
        add_hint,
        read_values,
        to_cpsat,
    )

    deadline = Deadline(time_limit)
    log: list[str] = []
    model = build(instance.arrays())
    reason = _forced_over_budget(model, instance)
    if reason:
        return SolveResult(status="infeasible", log=log, message=reason)
    # The warm start comes first, so that a translation the clock stops leaves a plan; it may
    # not use the time the translation needs (1.9 s of CPU at 10^5 servers).
    translate_s = TRANSLATE_S_PER_ROW * model.lp.num_rows + (COLD_IMPORT_S if not_loaded("ortools.sat.python.cp_model")
                                                             else 0.0)
    start, relaxed = _warm_values(model, instance, warm_start, _shortened(deadline, translate_s), seed, log,
                                  lp=with_cuts(model, instance.arrays()))
    if not_loaded("ortools.sat.python.cp_model") and deadline.expired(RESERVE_S + COLD_IMPORT_S):
        log.append("CP-SAT: not started, too little time left to load OR-Tools")
        return _no_time(instance, model, start, log)
    from ortools.sat.python import cp_model

    try:
        cp = to_cpsat(model.lp, model.col_unit, deadline=_Reserved(deadline, RESERVE_S))
    except BuildTimeout as stop:
        log.append(f"CP-SAT: {stop}")
        return _no_time(instance, model, start, log)
    log.append(f"model: {model.sizes}; objective scale {cp.objective_scale:g}"
               + ("" if cp.exact_objective else " (rounded)"))
    if start is not None:
        add_hint(cp, start)
    solver = cp_model.CpSolver()
    remaining = deadline.remaining(RESERVE_S)
    if remaining is not None:
        solver.parameters.max_time_in_seconds = remaining
    solver.parameters.num_workers = max(1, threads)
    solver.parameters.random_seed = int(seed) % 2_147_483_647
    code = solve_interruptibly(solver, cp.model)  # Ctrl-C: exit 130, not a quiet early stop
    name = solver.StatusName(code)
    log.append(f"CP-SAT: {name} in {solver.WallTime():.3f} s")
    if code == cp_model.INFEASIBLE:
        return SolveResult(status="infeasible", log=log, message=_explain(instance, deadline, threads, seed, log))
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        if start is not None:
            log.append("CP-SAT found no plan in time: the warm start is returned")
            objective = float(model.lp.cost @ start + model.constant)
            # CP-SAT proved nothing, but relax-and-fix's relaxations bound the model (at
            # 10^5 servers the bound 50,562.2 was in the log and not in the result).
            bound = relaxed if relaxed is not None and relaxed <= objective + BOUND_SLACK * max(1.0, abs(objective)) \
                else None
            if bound is not None:
                log.append(f"bound: relax-and-fix's {bound:.9g} (CP-SAT ended {name})")
            return _finish(instance, model, start, "time_limit", bound, objective, log)
        return SolveResult(status="time_limit" if deadline.expired(RESERVE_S) else "error", log=log,
                           message=f"CP-SAT: {name}, no plan")
    values = read_values(cp, solver)
    claimed = float(model.lp.cost @ values + model.constant)
    bound = None
    if cp.exact_objective:
        bound = solver.BestObjectiveBound() / cp.objective_scale + model.constant
    if relaxed is not None and relaxed <= claimed + BOUND_SLACK * max(1.0, abs(claimed)) \
            and (bound is None or relaxed > bound):
        # relax-and-fix's relaxations bound the model too (the LP's, the binary MIP's)
        log.append(f"bound: relax-and-fix's {relaxed:.9g} (CP-SAT's: {bound})")
        bound = relaxed
    exact_optimal = code == cp_model.OPTIMAL and cp.exact_objective
    status = "optimal" if exact_optimal else ("time_limit" if deadline.expired(RESERVE_S) else "feasible")
    if start is not None:
        # The better of the warm start and CP-SAT's plan: a hint is only a hint (CP-SAT may
        # repair it or drop it and end, at the limit, on a worse plan of its own).
        known = float(model.lp.cost @ start + model.constant)
        status, bound, values, claimed = _cross_check(status, bound, values, claimed, start, known, log, "CP-SAT")
    return _finish(instance, model, values, status, bound, claimed, log)
