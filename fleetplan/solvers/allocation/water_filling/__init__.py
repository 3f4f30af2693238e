"""Gavel's water filling (Gavel §4.3, Appendix A.1): hierarchical and single-level max-min fairness.

This package holds the two solvers and the procedure (here), the closed-form shortcuts through
its cap events (:mod:`~fleetplan.solvers.allocation.water_filling.events`) and the level LPs with
the batches of events they decide (:mod:`~fleetplan.solvers.allocation.water_filling.batches`).

Water filling raises every unsaturated job together, at rates given by the jobs' weights, until
some jobs are *bottlenecked* (they cannot rise without another job falling); those keep their
level, the weights are redistributed, and the rest rise again — until every job is bottlenecked.
The result is Pareto-efficient (§4.4): no job can rise without another falling.

* ``hierarchical-water-filling`` — entities share the cluster by weighted fairness; inside an
  entity, jobs share by fairness (weights in proportion to the jobs' own) or FIFO (all of it to
  the earliest unbottlenecked job). Weights are redistributed after every iteration by
  :func:`fleetplan.instances.allocation.hierarchical.hierarchical_job_weights`.
* ``water-filling`` — single-level weighted max-min fairness (LAS, §4.1) made Pareto-efficient.

Each iteration solves :func:`~fleetplan.models.allocation.water_filling.level_lp`, then finds the newly
bottlenecked jobs with one of two exact tests (option ``bottleneck_test``):

* ``"milp"`` — the paper's MILP (Appendix A.1), solved by HiGHS.
* ``"lp"`` (default) — rounds of :func:`~fleetplan.models.allocation.water_filling.rise_lp`. A job whose
  capped rise ``d`` exceeds the tolerance in a solution is free (that solution is the witness);
  the rounds end when the best total rise of the undecided jobs is within the tolerance, which
  proves each of them bottlenecked (a single job's rise would already give a better total).
  About two or three LPs per iteration on the generated instances (benchmarks/RESULTS.md).

With the LP test, shortcuts keep those answers at a fraction of the LPs
(:mod:`~fleetplan.solvers.allocation.water_filling.events`,
:mod:`~fleetplan.solvers.allocation.water_filling.batches`; ``water_fill(shortcuts=False)`` is
the reference the tests compare them with): iterations whose level is set by a job reaching its
own best score (*cap events*: 112 of 113 at 2,048 distinct jobs, 379 of 381 when half of them
weigh 8) are computed in closed form and proven in batches by one feasible allocation each,
the batch's end found with capacity prices and level LPs warm-started from each other; the
level LP's prices prove bottlenecks by weak duality before any rise LP, and the next level LP
witnesses the classes that can still rise; and from ``SEPARABLE_CLASSES`` classes each level LP
goes to the price decomposition (:func:`fleetplan.solvers.allocation.price_decomposition.separable.max_min`,
bottlenecked jobs as floors), HiGHS only where it declines (the iterations and times at 2,048
and 8,192 distinct jobs: benchmarks/results/allocation.md, "Gavel on distinct jobs: price
decomposition").

Jobs not yet bottlenecked but of zero weight (FIFO jobs behind their entity's head) are tested
too: one that cannot rise now never will (the other jobs' levels only grow), so marking it now
gives the same allocation as the paper's procedure in fewer iterations.

Numerics: a class's new level is the LP's promise capped by what the LP's solution delivers, so
the next problems stay feasible without handing out slack; a rise counts when it exceeds ``RISE_TOLERANCE`` (1e-6) times the largest
level — the same tolerance the judge uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fleetplan.instances.allocation import AllocationInstance, AllocationPlan
from fleetplan.instances.allocation.hierarchical import (
    HIERARCHICAL,
    RISE_CAP,
    WATER_FILLING,
    entity_view,
    hierarchical_job_weights,
)
from fleetplan.models.allocation.water_filling import (
    JobClasses,
    bottleneck_milp,
    job_classes,
    rise_lp,
)
from fleetplan.solvers import highs as highs_runner
from fleetplan.solvers.allocation.lp import load_backend
from fleetplan.solvers.allocation.water_filling.batches import (
    LevelHints,
    cap_event_batch,
    level_answer,
    solve_highs,
)
from fleetplan.solvers.allocation.water_filling.events import (
    dual_stuck,
    individual_caps,
    tolerance,
)
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.deadline import Deadline

BottleneckTest = Literal["lp", "milp"]
# Kept back from the iterations for expanding the plan.
JUDGE_RESERVE_S = 0.05
# The judge (``bottlenecked_jobs``) re-proves every job's bottleneck with LP rounds of its own,
# on the clock of the solve: at 16,384 distinct jobs its first LP took 2.9-3.9 s of CPU on the
# isolated allocation (49,152 cells; benchmarks/results/reliability.md, "Time limits"). The iterations keep
# that much back. (The judge uses highspy, which the solver has loaded already.)
JUDGE_S_PER_CELL = 70e-6


def judge_reserve(classes: JobClasses) -> float:
    """Seconds kept back for expanding and judging the plan: the judge's classes (jobs with
    equal throughputs, scale factor and score) are never more than the solver's, so its LP has
    at most as many cells as ``classes``."""
    return JUDGE_RESERVE_S + JUDGE_S_PER_CELL * len(classes.cell_class)


@dataclass
class WaterFillingRun:
    """The outcome of :func:`water_fill`: per-class levels, the final cell values, the log."""

    status: str
    values: np.ndarray | None
    levels: np.ndarray
    first_level: float | None
    bottlenecked: np.ndarray
    iterations: int = 0
    event_iterations: int = 0  # iterations decided as cap events (no LP of their own)
    separable_probes: int = 0  # level LPs solved by the price decomposition (events' probes or not)
    lp_solves: int = 0
    log: list[str] = field(default_factory=list)
    history: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # (levels, bottlenecked)


def water_fill(classes: JobClasses, rates: Callable[[np.ndarray], np.ndarray], *,
               bottleneck_test: BottleneckTest = "lp", time_limit: float | None = None,
               threads: int = 1, seed: int = 0, lp_algorithm: highs_runner.LpAlgorithm = "auto",
               progress: Callable[[float | None, str], None] | None = None,
               deadline: Deadline | None = None, reserve: float | None = None,
               shortcuts: bool = True) -> WaterFillingRun:
    """Run water filling on job classes.

    ``rates(bottlenecked)`` gives each class's per-member weight given the boolean mask of
    bottlenecked classes (0 for those). Returns the levels every class reached. ``deadline``
    (the solve's one clock; else one made from ``time_limit`` now) bounds every LP: each gets
    what is left of it less ``reserve`` (default :func:`judge_reserve`: expanding and judging
    the plan, in CPU seconds, divided by the share of a core the process gets), and the run
    stops with the last feasible iteration when it runs out.

    ``shortcuts`` (with the LP test) takes the iterations that cap events decide in batches and
    lets the level LP's duals prove bottlenecks before any rise LP
    (:mod:`~fleetplan.solvers.allocation.water_filling.events`); ``False`` runs every iteration's
    LPs, the reference the tests compare it with.
    """
    deadline = deadline if deadline is not None else Deadline(time_limit)
    fixed = reserve
    reserve = judge_reserve(classes) if fixed is None else fixed
    n = classes.num_classes
    levels = np.zeros(n)
    done = np.zeros(n, dtype=bool)
    run = WaterFillingRun("optimal", None, levels, None, done)
    shortcuts = shortcuts and bottleneck_test == "lp"
    caps = individual_caps(classes) if shortcuts else None
    pending = None  # the next iteration's level LP, already solved (a batch's probe, a witness)
    plain_next = False  # a batch handed over the LP where the capacity binds: a plain iteration next
    hints = LevelHints(warm=shortcuts and lp_algorithm in ("auto", "simplex"))
    try_events = shortcuts
    while not done.all():
        if fixed is None:
            # The judge's CPU seconds take longer in wall time when the machine is shared.
            reserve = judge_reserve(classes) / deadline.cpu_share()
        if deadline.expired(reserve):
            run.status = "time_limit"
            run.log.append(f"time limit after {run.iterations} iterations: {int((~done).sum())} classes "
                           "not yet bottlenecked")
            break
        if try_events and not plain_next:
            before = run.iterations
            batch = cap_event_batch(classes, caps, rates, levels, done, run, deadline, threads, seed,
                                lp_algorithm, reserve, hints, pending)
            if batch is not None:
                levels, done, pending = batch
                plain_next = pending is not None
                run.levels, run.bottlenecked = levels, done
                if progress is not None and run.iterations > before:
                    progress(float(classes.count[done].sum() / classes.count.sum()),
                             f"iteration {run.iterations}: cap events, {int(classes.count[done].sum())} "
                             "jobs bottlenecked")
                continue
        try_events = shortcuts  # a batch that commits nothing is followed by one plain iteration
        plain_next = False
        rate = np.where(done, 0.0, rates(done))
        if pending is not None:
            (outcome, row_dual), pending = pending, None
        else:
            outcome, row_dual = level_answer(classes, levels, rate, run, hints, deadline, threads, seed, lp_algorithm,
                                       reserve, shortcuts)
        if outcome.values is None or outcome.status not in ("optimal",):
            run.status = outcome.status if outcome.status == "time_limit" else "error"
            run.log += outcome.log + [f"iteration {run.iterations}: level LP ended {outcome.status}"]
            break
        step = max(0.0, outcome.objective)
        if run.first_level is None:
            run.first_level = float(outcome.objective)
        run.values = classes.feasible_part(outcome.values[: len(classes.cell_class)])
        # New levels: what the LP promised, but never more than its solution delivers once made
        # exactly feasible (the LP's tolerance lets it overshoot rows by ~1e-7), so that
        # solution satisfies every later floor exactly and no slack is handed out as a rise.
        levels = np.minimum(levels + rate * step, classes.scores(run.values))
        tested = np.flatnonzero(~done)
        if bottleneck_test == "milp":
            stuck, solves = _milp_test(classes, levels, tested, deadline, threads, seed, reserve)
        else:
            proven = free = None
            if shortcuts and row_dual is not None:
                proven = dual_stuck(classes, levels, row_dual, tolerance(levels))[tested]
            if proven is not None and not proven.all():
                # The next iteration's level LP with the classes the duals leave taken as free:
                # each it lifts by more than the tolerance is free (its solution the witness, the
                # rise LP's own criterion); only the others go to the rise LP, and when it finds
                # none bottlenecked, this LP is the next iteration's.
                after = done.copy()
                after[tested[proven]] = True
                witness = level_answer(classes, levels, np.where(after, 0.0, rates(after)), run, hints, deadline,
                                 threads, seed, lp_algorithm, reserve, shortcuts)
                if witness[0].status == "optimal" and witness[0].values is not None:
                    scores = classes.scores(classes.feasible_part(witness[0].values[: len(classes.cell_class)]))
                    free = ~proven & ((classes.count * (scores - levels))[tested] > tolerance(levels))
            stuck, solves = _lp_test(classes, levels, tested, deadline, threads, seed, lp_algorithm, reserve,
                                     proven, free)
            if free is not None and stuck is not None and np.array_equal(stuck, proven):
                pending = witness
        run.lp_solves += solves
        if stuck is None:
            run.status = "time_limit" if deadline.expired(reserve) else "error"
            run.log.append(f"iteration {run.iterations}: the bottleneck test failed")
            break
        if not stuck.any():
            # In exact arithmetic some job with positive rate is always bottlenecked at the
            # optimum; if rounding hides it, stop the ones that rose least rather than loop.
            active = tested[rate[tested] > 0]
            stuck = np.isin(tested, active)
            run.log.append(f"iteration {run.iterations}: no bottleneck found within tolerance; "
                           f"stopping {len(active)} active classes")
        done = done.copy()
        done[tested[stuck]] = True
        run.iterations += 1
        run.history.append((levels, done))
        if progress is not None:
            progress(float(classes.count[done].sum() / classes.count.sum()),
                     f"iteration {run.iterations}: level {step:.6g}, {int(classes.count[done].sum())} "
                     "jobs bottlenecked")
    run.levels, run.bottlenecked = levels, done
    run.log.append(f"water filling: {run.iterations} iterations, {run.lp_solves} LP/MILP solves by HiGHS"
                   + (f", {run.separable_probes} level LPs by price decomposition" if run.separable_probes else "")
                   + (f" ({run.event_iterations} iterations decided as cap events)" if run.event_iterations else ""))
    return run


def _lp_test(classes, levels, tested, deadline, threads, seed, algorithm, reserve: float = 0.0,
             proven: np.ndarray | None = None, free: np.ndarray | None = None) -> tuple[np.ndarray | None, int]:
    """Rounds of the rise LP; returns the mask over ``tested`` of bottlenecked classes. Those in
    ``proven`` (a mask over ``tested``) are bottlenecked already, those in ``free`` free already:
    neither is tested again."""
    tol = tolerance(levels)
    cap = RISE_CAP * max(1.0, float(levels.max(initial=0.0))) * classes.count
    proven = np.zeros(len(tested), dtype=bool) if proven is None else proven
    undecided = ~proven if free is None else ~proven & ~free
    solves = 0
    while undecided.any():
        if deadline.expired(reserve):
            return None, solves
        subset = tested[undecided]
        outcome = solve_highs(rise_lp(classes, levels, subset, cap[subset]), deadline, threads, seed, algorithm,
                         reserve=reserve)
        solves += 1
        if outcome.status != "optimal" or outcome.values is None:
            return None, solves
        rise = outcome.values[len(classes.cell_class):]
        found = rise > tol
        if outcome.objective <= tol or not found.any():
            break
        index = np.flatnonzero(undecided)
        undecided[index[found]] = False
    return undecided | proven, solves


def _milp_test(classes, levels, tested, deadline, threads, seed,
               reserve: float = 0.0) -> tuple[np.ndarray | None, int]:
    """The paper's MILP; returns the mask over ``tested`` of bottlenecked classes (z = 0)."""
    epsilon = np.full(len(tested), tolerance(levels)) / classes.count[tested]
    outcome = solve_highs(bottleneck_milp(classes, levels, tested, epsilon), deadline, threads, seed, "simplex",
                     mip=True, reserve=reserve)
    if outcome.status != "optimal" or outcome.values is None:
        return None, 1
    z = outcome.values[len(classes.cell_class):]
    return z < 0.5, 1


def hierarchical_run(instance: AllocationInstance, *, aggregate: bool = True,
                     **options) -> tuple[JobClasses, WaterFillingRun]:
    """Water filling with the hierarchical weights of §4.3 (``options`` go to :func:`water_fill`)."""
    arrays = instance.arrays()
    view = entity_view(instance)
    # FIFO orders an entity's jobs, so those never share a class.
    fifo_id = np.where(view.fifo[view.entity_of], np.arange(len(view.entity_of)), -1)
    classes = job_classes(arrays, np.column_stack([arrays.weight, view.entity_of, fifo_id]), aggregate)

    def rates(done: np.ndarray) -> np.ndarray:
        weights = hierarchical_job_weights(instance, done[classes.class_of_job], view)
        return weights[classes.first_job]

    return classes, water_fill(classes, rates, **options)


def single_level_run(instance: AllocationInstance, *, aggregate: bool = True,
                     **options) -> tuple[JobClasses, WaterFillingRun]:
    """Water filling where every job keeps its own weight (single-level LAS)."""
    arrays = instance.arrays()
    classes = job_classes(arrays, arrays.weight[:, None], aggregate)
    weight = arrays.weight[classes.first_job]
    return classes, water_fill(classes, lambda done: weight, **options)


def _result(instance: AllocationInstance, classes: JobClasses, run: WaterFillingRun, policy: str,
            aggregate: bool) -> SolveResult:
    stats = {"iterations": float(run.iterations), "lp_solves": float(run.lp_solves),
             "event_iterations": float(run.event_iterations), "separable_probes": float(run.separable_probes),
             "classes": float(classes.num_classes),
             "bottlenecked_jobs": float(classes.count[run.bottlenecked].sum())}
    if run.values is None and run.status == "time_limit":
        # No iteration finished in time: X_isolated (1/n of every type a job fits) is feasible.
        matrix = instance.arrays().isolated_allocation()
        run.log.append("time limit before the first level LP answered: returning the isolated allocation")
        return SolveResult(status="time_limit", plan=AllocationPlan.from_matrix(instance, matrix, policy=policy),
                           log=run.log, message="water filling: time limit before the first iteration",
                           stats=stats)
    if run.values is None:
        return SolveResult(status="error" if run.status == "optimal" else run.status, log=run.log,
                           message="water filling produced no allocation", stats=stats)
    matrix = np.clip(classes.job_matrix(run.values), 0.0, 1.0)
    plan = AllocationPlan.from_matrix(instance, matrix, policy=policy)
    status = "optimal" if run.status == "optimal" else run.status
    # The first iteration maximizes exactly the judge's objective; later ones never lower a job.
    bound = run.first_level if status == "optimal" else None
    return SolveResult(status=status, plan=plan, objective=run.first_level, bound=bound, log=run.log,
                       message=f"water filling {run.status} after {run.iterations} iterations"
                               f"{' on ' + str(classes.num_classes) + ' job classes' if aggregate else ''}",
                       stats=stats)


@register("allocation", "hierarchical-water-filling", exact=True,
          description="Gavel §4.3 hierarchical policy: weighted fairness across entities, fairness or "
                      "FIFO inside, by water filling with an exact bottleneck test (LP rounds or the "
                      "App. A.1 MILP); Pareto-efficient",
          reference="Narayanan et al., Gavel, OSDI 2020, §4.3 and Appendix A.1")
def hierarchical_water_filling(instance: AllocationInstance, *, time_limit: float | None = None,
                               seed: int = 0, threads: int = 1, progress: Progress,
                               bottleneck_test: BottleneckTest = "lp", aggregate: bool = True,
                               lp_algorithm: highs_runner.LpAlgorithm = "auto") -> SolveResult:
    """Hierarchical max-min fairness by water filling (Gavel §4.3).

    >>> import fleetplan
    >>> instance = fleetplan.generate("allocation", {"jobs": 16, "entities": 2}, seed=0)
    >>> result = fleetplan.solve(instance, "hierarchical-water-filling")
    >>> result.status, result.evaluation.metrics["pareto_efficient"]
    ('optimal', 1.0)
    """
    deadline = Deadline(time_limit)
    load_backend("highspy")
    classes, run = hierarchical_run(instance, bottleneck_test=bottleneck_test, aggregate=aggregate,
                                    deadline=deadline, threads=threads, seed=seed,
                                    lp_algorithm=lp_algorithm, progress=progress)
    return _result(instance, classes, run, HIERARCHICAL, aggregate)


@register("allocation", "water-filling", exact=True,
          description="Gavel §4.1 weighted max-min fairness (LAS) with scale factors, made "
                      "Pareto-efficient by water filling (§4.3) with an exact bottleneck test",
          reference="Narayanan et al., Gavel, OSDI 2020, §4.1, §4.3 and Appendix A.1")
def water_filling(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                  threads: int = 1, progress: Progress, bottleneck_test: BottleneckTest = "lp",
                  aggregate: bool = True, lp_algorithm: highs_runner.LpAlgorithm = "auto") -> SolveResult:
    """Single-level weighted max-min fairness by water filling: each job keeps its own weight.

    >>> import fleetplan
    >>> instance = fleetplan.generate("allocation", {"jobs": 16}, seed=0)
    >>> fleetplan.solve(instance, "water-filling").status
    'optimal'
    """
    deadline = Deadline(time_limit)
    load_backend("highspy")
    classes, run = single_level_run(instance, bottleneck_test=bottleneck_test, aggregate=aggregate,
                                    deadline=deadline, threads=threads, seed=seed,
                                    lp_algorithm=lp_algorithm, progress=progress)
    return _result(instance, classes, run, WATER_FILLING, aggregate)
