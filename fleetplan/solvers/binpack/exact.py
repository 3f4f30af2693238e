"""Exact solvers of the ``binpack`` kind (MAST, OSDI 2024, §4.1 Table 1, §4.3): ``cpsat`` and
``mip-highs`` place the pending workloads one at a time, each optimally (the model of
:mod:`fleetplan.models.binpack`: every job of the workload jointly, lexicographic score), which
measures what the greedy RMS gives up; ``batch-cpsat`` places all pending workloads in one model —
Table 1's "ideal" solution (9) — which measures what one-at-a-time placement gives up.

Each model is solved stage by stage (most workloads placed for the batch; then preemptions per
priority level, youth, machines, racks), each stage keeping the previous optima, so the result
is the judge's :func:`~fleetplan.instances.binpack.evaluate.score_key` optimum. One deadline
covers every stage and every workload (imports of the back-ends included); a stage stopped by
it keeps the best plan found so far (status ``time_limit``). The greedy RMS's plan is each
model's hint; a workload whose model returned no plan keeps it, and workloads left when the time
is up are placed by the greedy. A workload the model proves impossible waits, and the message says which
job falls short (from the same resource totals the greedy uses).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Literal

import numpy as np

from fleetplan.highs_pool import use_threads
from fleetplan.instances.binpack import BinpackInstance
from fleetplan.models.binpack import (
    CPSAT_BUILD_S_PER_CELL,
    PYOMO_BUILD_S_PER_CELL,
    BinpackModelData,
    ModelSolution,
    cell_count,
    prepare,
    read_solution,
)
from fleetplan.models.build_clock import BuildTimeout
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.binpack import (
    JobOption,
    RegionState,
    WorkloadOutcome,
    place_workload,
    plan_cost,
    status_of,
    to_plan,
)
from fleetplan.solvers.cpsat_run import solve_interruptibly
from fleetplan.solvers.deadline import Deadline

Backend = Callable[..., tuple[str, ModelSolution | None, list[str]]]
# Loading a built model into the back-end (CP-SAT's copy and presolve, Pyomo's translation for
# HiGHS) cannot be interrupted; it is not started with less time left than this times the build.
LOAD_RATIO = 1.0


def run_cpsat(data: BinpackModelData, *, batch: bool, deadline: Deadline, seed: int, threads: int,
              hint: ModelSolution | None = None) -> tuple[str, ModelSolution | None, list[str]]:
    """Solve the CP-SAT model stage by stage; (status, solution, log)."""
    from ortools.sat.python import cp_model

    from fleetplan.models.binpack.cpsat import binpack_cpsat

    started = time.perf_counter()
    try:
        built = binpack_cpsat(data, batch=batch, deadline=_Reserved(deadline))
    except BuildTimeout as stop:
        return "time_limit", None, [f"CP-SAT: {stop} after {time.perf_counter() - started:.2f} s"]
    build_s = time.perf_counter() - started
    if deadline.expired(_reserve(deadline) + LOAD_RATIO * build_s):
        # CP-SAT copies and presolves the model before it looks at its clock.
        return "time_limit", None, [f"CP-SAT: built in {build_s:.2f} s, no time left to load and solve it"]
    model = built.model
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = max(int(threads), 1)
    solver.parameters.random_seed = int(seed) % 2_147_483_647
    # CP-SAT 9.15's presolve spends untimed seconds exploiting the symmetry of identical
    # machines once it finds an orbitope: 6.1 s of a 1.6 s stage on 2,000 machines, so a 3 s
    # limit ran 14.6 s. Without it presolve takes 0.1 s there.
    solver.parameters.symmetry_level = 0
    keys = list(built.x)
    values: tuple[np.ndarray, dict, np.ndarray] | None = None
    if hint is not None:
        values = _hint_values(data, hint)
    status, log = "optimal", []
    for name, expr, sense in built.stages:
        # Each stage loads and presolves the model again before CP-SAT looks at its clock, and
        # the hints below are a Python call per cell: a later stage is not started without the
        # time for both.
        if (values is not None and name != built.stages[0][0]
                and deadline.expired(_reserve(deadline) + LOAD_RATIO * build_s)):
            status = "time_limit"
            break
        if values is not None:
            model.ClearHints()
            for w, var in enumerate(built.z):
                model.AddHint(var, int(values[0][w]))
            for key in keys:
                model.AddHint(built.x[key], int(values[1].get(key, 0)))
            for k, var in enumerate(built.p):
                model.AddHint(var, int(values[2][k]))
        (model.Maximize if sense == "max" else model.Minimize)(expr)
        remaining = deadline.remaining(_reserve(deadline))
        if remaining is not None:
            solver.parameters.max_time_in_seconds = remaining
        code = solve_interruptibly(solver, model)  # Ctrl-C: exit 130, not a quiet early stop
        log.append(f"CP-SAT stage {name}: {solver.StatusName(code)} objective "
                   f"{solver.ObjectiveValue() if code in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None} "
                   f"in {solver.WallTime():.2f} s (limit {remaining if remaining is None else round(remaining, 2)})")
        if code == cp_model.INFEASIBLE:
            return "infeasible", None, log
        if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            status = "time_limit" if code == cp_model.UNKNOWN and remaining is not None else "error"
            if hint is not None and name == built.stages[0][0]:
                values = None  # the hint is not a solution of this stage: the caller falls back
            break
        values = (np.array([solver.Value(v) for v in built.z]), {k: solver.Value(built.x[k]) for k in keys},
                  np.array([solver.Value(v) for v in built.p], dtype=np.int64))
        if code == cp_model.FEASIBLE:
            status = "time_limit"
            break
        model.Add(expr == int(round(solver.ObjectiveValue())))
    if values is None:
        return status, None, log
    x = np.zeros(data.fit.shape)
    for (j, m), value in values[1].items():
        x[j, m] = value
    return status, read_solution(data, values[0], x, values[2]), log


class _Reserved:
    """The deadline as a model builder sees it: expired :func:`_reserve` seconds early."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline

    def expired(self, reserve: float = 0.0) -> bool:
        return self.deadline.expired(reserve + _reserve(self.deadline))


def _reserve(deadline: Deadline) -> float:
    """Time kept back for reading the solution and judging the plan (5%, at most 1 s)."""
    return 0.0 if deadline.time_limit is None else min(1.0, 0.05 * deadline.time_limit)


def _hint_values(data: BinpackModelData, hint: ModelSolution) -> tuple[np.ndarray, dict, np.ndarray]:
    local_machine = {int(m): i for i, m in enumerate(data.machines)}
    x = {}
    for j, (rows, tasks) in enumerate(zip(hint.job_machines, hint.job_tasks, strict=True)):
        for m, t in zip(rows.tolist(), tasks.tolist(), strict=True):
            if m in local_machine and data.fit[j, local_machine[m]] > 0:
                x[(j, local_machine[m])] = t
    p = np.zeros(len(data.pairs), dtype=np.int64)
    for k, (r, w) in enumerate(data.pairs.tolist()):
        p[k] = int(data.running[r] in set(hint.preempted[w].tolist()))
    return hint.placed.astype(np.int64), x, p


def run_highs(data: BinpackModelData, *, batch: bool, deadline: Deadline, seed: int, threads: int,
              presolve: str = "off", hint: ModelSolution | None = None
              ) -> tuple[str, ModelSolution | None, list[str]]:
    """Solve the Pyomo MIP with HiGHS (appsi) stage by stage; (status, solution, log)."""
    import pyomo.environ as pyo
    from pyomo.contrib.appsi.base import TerminationCondition
    from pyomo.contrib.appsi.solvers import Highs as AppsiHighs

    from fleetplan.models.binpack.mip import binpack_mip, read_mip

    started = time.perf_counter()
    try:
        built = binpack_mip(data, batch=batch, deadline=_Reserved(deadline),
                            seconds_left=deadline.remaining(_reserve(deadline)))
    except BuildTimeout as stop:
        return "time_limit", None, [f"HiGHS: {stop} after {time.perf_counter() - started:.2f} s"]
    build_s = time.perf_counter() - started
    if deadline.expired(_reserve(deadline) + LOAD_RATIO * build_s):
        # Pyomo's translation for HiGHS cannot be interrupted and takes about as long as the build.
        return "time_limit", None, [f"HiGHS: built in {build_s:.2f} s, no time left to translate and solve it"]
    model = built.model
    use_threads(threads)  # HiGHS has one thread pool per process
    solver = AppsiHighs()
    solver.config.load_solution = False
    solver.config.mip_gap = 1e-9
    solver.highs_options = {"random_seed": int(seed) % 2_147_483_647, "threads": int(threads),
                            "presolve": presolve, "mip_abs_gap": 1e-9,
                            # Near-integral values must not let the big-M rows slip.
                            "mip_feasibility_tolerance": 1e-9}
    status, log, solution = "optimal", [], None
    if hint is not None:
        _set_mip_start(built, data, hint)
    for name, expr, sense in built.stages:
        if solution is not None and deadline.expired(_reserve(deadline)):
            status = "time_limit"
            break
        if model.component("objective") is not None:
            model.del_component("objective")
        model.objective = pyo.Objective(expr=expr, sense=pyo.maximize if sense == "max" else pyo.minimize)
        remaining = deadline.remaining(_reserve(deadline))
        if remaining is not None:
            solver.config.time_limit = remaining
        solver.config.warmstart = solution is not None or hint is not None
        try:
            results = solver.solve(model)
        except (RuntimeError, ValueError) as error:  # appsi raises on some HiGHS failures
            log.append(f"HiGHS stage {name}: failed: {error}")
            status = "error"
            break
        condition = results.termination_condition
        value = results.best_feasible_objective
        log.append(f"HiGHS stage {name}: {condition.name} objective {value}")
        if condition in (TerminationCondition.infeasible, TerminationCondition.infeasibleOrUnbounded):
            return "infeasible", None, log
        if value is None or not math.isfinite(value):
            status = "time_limit" if condition == TerminationCondition.maxTimeLimit else "error"
            break
        results.solution_loader.load_vars()
        solution = read_solution(data, *read_mip(built, data))
        if condition != TerminationCondition.optimal:
            status = "time_limit" if deadline.expired() else "feasible"
            break
        # Keep this stage's optimum: integral stages to the unit, youth to a relative 1e-9.
        slack = 1e-9 * max(1.0, abs(value)) if name == "youth" else 0.5
        model.rows.add(expr >= value - slack if sense == "max" else expr <= value + slack)
    return status, solution, log


def _set_mip_start(built, data: BinpackModelData, hint: ModelSolution) -> None:
    """Give every MIP variable the hint's value (a complete feasible start for HiGHS)."""
    z, x, p = _hint_values(data, hint)
    model = built.model
    for w in range(len(data.workloads)):
        if not model.z[w].fixed:
            model.z[w].set_value(int(z[w]))
    for (j, m), var in model.x.items():
        tasks = int(x.get((j, m), 0))
        var.set_value(tasks)
        model.u[j, m].set_value(int(tasks > 0))
    for (j, c), var in model.y.items():
        var.set_value(int(any(x.get((j, m), 0) > 0 for m in np.flatnonzero(data.cluster == c).tolist())))
    for (j, k), var in model.v.items():
        var.set_value(int(any(x.get((j, m), 0) > 0 for m in np.flatnonzero(data.rack == k).tolist())))
    for k in range(len(data.pairs)):
        model.p[k].set_value(int(p[k]))


def outcomes_from(state: RegionState, instance: BinpackInstance, data: BinpackModelData,
                  solution: ModelSolution) -> dict[int, WorkloadOutcome]:
    """Per-workload outcomes of a model solution, applied to ``state`` (jobs in order)."""
    a = instance.arrays()
    outcomes: dict[int, WorkloadOutcome] = {}
    for local, w in enumerate(data.workloads):
        if not solution.placed[local]:
            outcomes[w] = WorkloadOutcome(False, [], reason="left waiting by the batch model")
            continue
        jobs = [k for k, (ww, _j) in enumerate(data.job_index) if ww == w]
        # Each preempted job is listed on the first job of the workload using one of its machines.
        owner: dict[int, int] = {}
        for k in jobs:
            rows = solution.job_machines[k]
            for r in solution.preempted[local].tolist():
                held = a.hold_machine[a.holdings_of(np.array([r]))]
                if r not in owner and np.isin(held, rows).any():
                    owner[r] = k
        for r in solution.preempted[local].tolist():
            owner.setdefault(r, jobs[0])
        options: list[JobOption | None] = []
        for k in jobs:
            rows, tasks = solution.job_machines[k], solution.job_tasks[k]
            mine = np.array(sorted(r for r, o in owner.items() if o == k), dtype=np.int64)
            option = state._finish(int(a.machine_cluster[rows[0]]), (rows, tasks), mine)
            state.apply(option, data.demand[k])
            options.append(option)
        outcomes[w] = WorkloadOutcome(True, options)
    return outcomes


def why_waiting(state: RegionState, instance: BinpackInstance, w: int) -> str:
    """Which job of a workload the exact model could not place, in the greedy's terms."""
    hw_index = {h: i for i, h in enumerate(instance.hardware_types)}
    workload = instance.workloads[w]
    for j, job in enumerate(workload.jobs):
        demand = instance.job_demand(w, j)
        if state.best_option(hw_index[job.hardware], demand, job.tasks, workload.priority, True) is None:
            return f"job '{job.id}': " + state.shortfall(hw_index[job.hardware], demand, job.tasks,
                                                         workload.priority, True)
    return "its jobs fit one by one but not all together"


def _fits(deadline: Deadline, cells: int, build_s_per_cell: float) -> bool:
    """Whether a model of ``cells`` cells can be built and loaded in the time left."""
    remaining = deadline.remaining(_reserve(deadline))
    return remaining is None or cells * build_s_per_cell * (1.0 + LOAD_RATIO) <= remaining


def solve_one_at_a_time(instance: BinpackInstance, backend: Backend, *, time_limit: float | None,
                        seed: int, threads: int, progress: Progress,
                        build_s_per_cell: float = CPSAT_BUILD_S_PER_CELL) -> SolveResult:
    """Each workload in GMS order placed optimally on what the previous ones left.

    The greedy RMS's plan for the workload is the model's hint (a MIP start for HiGHS); when the
    back-end returns no plan (time limit, failure), the workload keeps the greedy's plan, and the
    workloads left when the time is up are placed by the greedy.
    """
    deadline = Deadline(time_limit)
    state = RegionState(instance)
    outcomes: dict[int, WorkloadOutcome] = {}
    log: list[str] = []
    worst = "optimal"
    for w in range(len(instance.workloads)):
        if deadline.expired():
            # Past the limit itself the rest of the queue waits, as with the greedy RMS (at MAST
            # size the greedy for 200 workloads costs 0.7 s of CPU).
            worst = "time_limit"
            log.append(f"{len(instance.workloads) - w} workloads not tried before the time limit")
            break
        if deadline.expired(_reserve(deadline)):
            # Past the solver's share, the rest of the queue gets the greedy's plans (milliseconds each).
            worst = "time_limit"
            outcomes[w] = place_workload(state, w)
            log.append(f"{instance.workloads[w].id}: past the time limit, placed by the greedy RMS")
            continue
        greedy = place_workload(state, w)
        if not _fits(deadline, cell_count(instance, [w]), build_s_per_cell):
            # Its model could not be built in the time left: the greedy's plan stands.
            worst = "time_limit" if worst in ("optimal", "feasible") else worst
            outcomes[w] = greedy
            log.append(f"{instance.workloads[w].id}: model too large for the time left "
                       f"({cell_count(instance, [w])} cells), placed by the greedy RMS")
            continue
        if greedy.placed:  # the greedy's plan is only a hint: undo it
            for option, demand in reversed(list(zip(greedy.options, _demands(instance, w), strict=True))):
                state.undo(option, demand)
        data = prepare(instance, [w], state.free, state.alive)
        hint = _solution_of(instance, data, {w: greedy}) if greedy.placed else None
        status, solution, lines = backend(data, batch=False, deadline=deadline, seed=seed, threads=threads,
                                          hint=hint)
        log.extend(f"{instance.workloads[w].id}: {line}" for line in lines)
        if solution is None and status == "infeasible":
            outcomes[w] = WorkloadOutcome(False, [], reason=why_waiting(state, instance, w))
            continue
        if solution is None:
            worst = status if worst != "error" else worst
            if hint is None:
                outcomes[w] = WorkloadOutcome(False, [], reason=f"no plan from the exact model ({status})")
                continue
            log.append(f"{instance.workloads[w].id}: no plan from the model ({status}); the greedy's plan is kept")
            solution = hint
        outcomes.update(outcomes_from(state, instance, data, solution))
        if status != "optimal" and worst == "optimal":
            worst = status
        progress((w + 1) / len(instance.workloads), f"workload {w + 1} of {len(instance.workloads)}")
    result = _result(instance, outcomes, worst, log)
    if result.status == "optimal" and len(instance.workloads) > 1:
        # Each workload is optimal given the ones before it; the queue as a whole is not proven
        # (batch-cpsat can do better), so no bound is claimed.
        result.status = "feasible"
        result.message += "; each workload placed optimally in turn (the queue jointly: batch-cpsat)"
    return result


def _demands(instance: BinpackInstance, w: int) -> list[np.ndarray]:
    return [instance.job_demand(w, j) for j in range(len(instance.workloads[w].jobs))]


def _result(instance: BinpackInstance, outcomes: dict[int, WorkloadOutcome], worst: str,
            log: list[str]) -> SolveResult:
    status, message = status_of(instance, outcomes, exact=True, timed_out=worst == "time_limit")
    if worst == "error":
        status, message = "error", message + "; the back-end failed (see the log)"
    elif worst == "feasible" and status == "optimal":
        status = "feasible"
    return SolveResult(status=status, plan=to_plan(instance, outcomes), model_objective=plan_cost(instance, outcomes),
                       message=message, log=log + [message],
                       stats={"placed": float(sum(o.placed for o in outcomes.values()))})


@register("binpack", "cpsat", exact=True,
          description="each workload in GMS order placed optimally (all its jobs jointly, lexicographic "
                      "RMS score) with OR-Tools CP-SAT",
          reference="Choudhury et al., MAST, OSDI 2024, §4.3")
def cpsat(instance: BinpackInstance, *, time_limit: float | None = None, seed: int = 0, threads: int = 1,
          progress: Progress) -> SolveResult:
    """The exact single-workload model, solved by CP-SAT for one workload at a time.

    Status ``optimal`` (with the objective as bound) for a single pending workload; with several,
    each is optimal given the ones before it and the status is ``feasible``.

    Examples
    --------
    >>> import fleetplan
    >>> instance = fleetplan.generate("binpack", {"clusters": 2, "machines": 8, "workloads": 2}, seed=1)
    >>> fleetplan.solve(instance, "cpsat").evaluation.violations
    []
    """
    return solve_one_at_a_time(instance, run_cpsat, time_limit=time_limit, seed=seed, threads=threads,
                               progress=progress)


@register("binpack", "mip-highs", exact=True,
          description="the same exact single-workload model as a Pyomo MIP solved by HiGHS, one workload "
                      "at a time (checks cpsat)",
          reference="Choudhury et al., MAST, OSDI 2024, §4.3")
def mip_highs(instance: BinpackInstance, *, time_limit: float | None = None, seed: int = 0, threads: int = 1,
              progress: Progress, presolve: Literal["off", "on", "choose"] = "off") -> SolveResult:
    """The exact single-workload model, solved by HiGHS for one workload at a time (status as
    for ``cpsat``: ``optimal`` for a single pending workload, else ``feasible``).

    Parameters
    ----------
    presolve : {"off", "on", "choose"}
        HiGHS MIP presolve (off by default: HiGHS 1.14 presolve returned wrong optima on small MIPs).

    Examples
    --------
    >>> import fleetplan
    >>> instance = fleetplan.generate("binpack", {"clusters": 2, "machines": 8, "workloads": 2}, seed=1)
    >>> fleetplan.solve(instance, "mip-highs").evaluation.violations
    []
    """
    def backend(data, **kwargs):
        return run_highs(data, presolve=presolve, **kwargs)

    return solve_one_at_a_time(instance, backend, time_limit=time_limit, seed=seed, threads=threads,
                               progress=progress, build_s_per_cell=PYOMO_BUILD_S_PER_CELL)


@register("binpack", "batch-cpsat", exact=True,
          description="every pending workload in one CP-SAT model (MAST Table 1's ideal solution 9): most "
                      "workloads placed, then the RMS score",
          reference="Choudhury et al., MAST, OSDI 2024, §4.1 (Table 1)")
def batch_cpsat(instance: BinpackInstance, *, time_limit: float | None = None, seed: int = 0, threads: int = 1,
                progress: Progress, warm_start: Literal["rms-greedy", "none"] = "rms-greedy") -> SolveResult:
    """Place all pending workloads jointly; what one-at-a-time placement loses is the difference.

    Parameters
    ----------
    warm_start : {"rms-greedy", "none"}
        Hint CP-SAT with the greedy RMS's one-at-a-time plan, or start cold.

    Examples
    --------
    >>> import fleetplan
    >>> instance = fleetplan.generate("binpack", {"clusters": 2, "machines": 8, "workloads": 3}, seed=1)
    >>> result = fleetplan.solve(instance, "batch-cpsat")
    >>> result.evaluation.violations, result.status
    ([], 'optimal')
    """
    deadline = Deadline(time_limit)
    workloads = list(range(len(instance.workloads)))
    greedy = None
    if warm_start == "rms-greedy":
        greedy_state = RegionState(instance)
        greedy = {}
        for w in workloads:
            # The warm start is also the plan returned when no model can be solved: it stops at
            # the limit like the greedy RMS, leaving the rest of the queue waiting.
            greedy[w] = (place_workload(greedy_state, w) if not deadline.expired() else
                         WorkloadOutcome(False, [], reason="not tried before the time limit"))
    cells = cell_count(instance, workloads)
    if not _fits(deadline, cells, CPSAT_BUILD_S_PER_CELL):
        # At MAST size (7.3 million cells) the build alone would take minutes.
        log = [f"CP-SAT: not started, a model of {cells} cells cannot be built in the time left"]
        if greedy is None:
            return SolveResult(status="time_limit", message="no plan found before the time limit", log=log)
        return _result(instance, greedy, "time_limit", log + ["the greedy's plan is returned"])
    data = prepare(instance, workloads)
    hint = None if greedy is None else _solution_of(instance, data, greedy)
    status, solution, log = run_cpsat(data, batch=True, deadline=deadline, seed=seed, threads=threads, hint=hint)
    state = RegionState(instance)
    if solution is None:
        if status == "infeasible":  # cannot happen with z free, kept for safety
            return _result(instance, {}, "optimal", log)
        if greedy is None:
            return SolveResult(status=status, message="no plan found before the time limit", log=log)
        # The greedy's own outcomes (and its reasons for the workloads it left waiting).
        return _result(instance, greedy, "time_limit", log + ["no CP-SAT solution: the greedy's plan is returned"])
    fresh = RegionState(instance)
    reasons = {w: why_waiting(fresh, instance, w) for local, w in enumerate(workloads)
               if not solution.placed[local]}
    outcomes = outcomes_from(state, instance, data, solution)
    for w, reason in reasons.items():
        if reason.startswith("its jobs fit"):
            reason = "left waiting by the batch model: the joint optimum places others"
        outcomes[w].reason = reason
    progress(1.0, "batch model solved")
    return _result(instance, outcomes, status, log)


def _solution_of(instance: BinpackInstance, data: BinpackModelData, outcomes: dict[int, WorkloadOutcome]
                 ) -> ModelSolution:
    """The greedy's outcomes as a model solution (a hint for the batch model)."""
    placed = np.array([outcomes[w].placed for w in data.workloads], dtype=bool)
    job_machines, job_tasks = [], []
    for w, j in data.job_index:
        outcome = outcomes[w]
        option = outcome.options[j] if outcome.placed else None
        job_machines.append(option.rows if option is not None else np.zeros(0, dtype=np.int64))
        job_tasks.append(option.tasks if option is not None else np.zeros(0, dtype=np.int64))
    preempted = []
    for w in data.workloads:
        outcome = outcomes[w]
        gone = [o.preempted for o in outcome.options if o is not None] if outcome.placed else []
        preempted.append(np.sort(np.concatenate(gone)) if gone else np.zeros(0, dtype=np.int64))
    return ModelSolution(placed=placed, job_machines=job_machines, job_tasks=job_tasks, preempted=preempted)
