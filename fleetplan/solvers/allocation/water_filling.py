"""Gavel's water filling (Gavel §4.3, Appendix A.1): hierarchical and single-level max-min fairness.

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

With the LP test, three shortcuts keep those answers at a fraction of the LPs
(:mod:`~fleetplan.solvers.allocation.water_filling_events`; ``water_fill(shortcuts=False)`` is
the reference the tests compare them with): iterations whose level is set by a job reaching its
own best score (*cap events*: 112 of 113 at 2,048 distinct jobs) are computed in closed form and
proven in batches by one feasible allocation each; the level LP's prices prove bottlenecks by
weak duality before any rise LP; and from ``SEPARABLE_CLASSES`` classes each level LP goes to
the price decomposition (:func:`fleetplan.solvers.allocation.separable.max_min`, bottlenecked
jobs as floors), HiGHS only where it declines (the iterations and times at 2,048 and 8,192
distinct jobs: benchmarks/results/allocation.md, "Gavel on distinct jobs: price decomposition").

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
    level_lp,
    rise_lp,
)
from fleetplan.solvers import highs as highs_runner
from fleetplan.solvers.allocation import separable
from fleetplan.solvers.allocation.lp import load_backend
from fleetplan.solvers.allocation.water_filling_events import (
    State,
    capacity_prices,
    dual_stuck,
    individual_caps,
    priced_out,
    simulate_events,
    tolerance,
    usage_bound,
    witnessed_prefix,
)
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.deadline import Deadline

BottleneckTest = Literal["lp", "milp"]
MILP_TOLERANCE = 1e-9
# Kept back from the iterations for expanding the plan.
JUDGE_RESERVE_S = 0.05
# The judge (``bottlenecked_jobs``) re-proves every job's bottleneck with LP rounds of its own,
# on the clock of the solve: at 16,384 distinct jobs its first LP took 2.9-3.9 s of CPU on the
# isolated allocation (49,152 cells; benchmarks/results/reliability.md, "Time limits"). The iterations keep
# that much back. (The judge uses highspy, which the solver has loaded already.)
JUDGE_S_PER_CELL = 70e-6
# Cap events simulated in one batch: first FIRST_EVENTS, then doubling while the last one is
# feasible, up to MAX_EVENTS (each costs one call of the weights; the search over them about
# twice log2 of their number in level LPs).
FIRST_EVENTS = 64
MAX_EVENTS = 1 << 16
# A batch's first HiGHS probe tries the simplex for this long per column (see _solve): about
# the interior point method's own time on a level LP the capacity ends (0.15 s at 6,145 columns,
# 0.6 s at 24,577), so a wrong guess costs at most about twice that LP.
SIMPLEX_FIRST_S_PER_COLUMN = 25e-6
# From this many classes the level LPs try the price decomposition before HiGHS.
SEPARABLE_CLASSES = 1000
# Its reduced LP's feasibility tolerances: with HiGHS's default 1e-7 the worker prices are off by
# about that much, and the dual proof of a bottleneck (rise <= gap / u, u ~ 5e-5 at 8,192 jobs)
# then fails by three orders of magnitude; at 1e-10 the gap is at rounding level.
REDUCED_LP_TOLERANCE = 1e-10


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


@dataclass
class LevelHints:
    """What the level LPs of a run leave for the next ones: HiGHS's last simplex basis and the
    last nonzero capacity prices.

    Every level LP of a run has the same rows and columns (only the rates in ``t``'s column and
    the levels change), and neighbouring ones share most of their optimal basis: on 2,048
    distinct jobs, half of them at weight 8, a probe two events from the last one took 5-140
    simplex iterations (0.01-0.05 s) from its basis against 5,900 (0.4-0.5 s, the interior point
    method or the simplex from scratch). ``warm`` is False when the caller asked for another
    algorithm than the simplex (``lp_algorithm``). The prices bound the cap events a batch
    simulates (:func:`~fleetplan.solvers.allocation.water_filling_events.priced_out`)."""

    warm: bool = True
    basis: object | None = None
    prices: list[np.ndarray] = field(default_factory=list)

    def learn(self, classes: JobClasses, row_dual: np.ndarray | None) -> None:
        """Keep the capacity prices of an optimal level LP's duals, unless they are all zero."""
        if row_dual is not None:
            self.prices = capacity_prices(classes, row_dual) or self.prices


def _solve(lp, deadline: Deadline, threads: int, seed: int, algorithm, mip: bool = False, reserve: float = 0.0,
           duals: bool = False, hints: LevelHints | None = None, simplex_first: bool = False):
    """Solve ``lp`` with HiGHS: from ``hints``' basis when it has one. ``simplex_first`` (a
    batch's probe with no basis yet) gives the simplex SIMPLEX_FIRST_S_PER_COLUMN seconds per
    column before ``algorithm``: it leaves a basis for the next probes, and a probe the caps end
    is a quick vertex for it, one the capacity ends is not (a level LP from zero levels, 2,048
    / 8,192 distinct jobs, half at weight 8: 0.05 / 0.47 s against 0.14 / 1.5 s by the interior
    point method; no weights, where the capacity ends it: 0.6 / 16 s against 0.17 / 1.2 s)."""
    warm = hints is not None and hints.warm and hints.basis is not None
    if hints is not None and hints.warm and not warm and simplex_first and not mip:
        budget = SIMPLEX_FIRST_S_PER_COLUMN * lp.num_cols
        left = deadline.remaining(reserve)
        highs = highs_runner.new_highs(budget if left is None else min(left, budget), threads, seed)
        highs_runner.pass_lp(highs, lp, "simplex")
        outcome = highs_runner.run(highs)
        if outcome.status != "time_limit" or deadline.expired(reserve):
            return _finish(highs, outcome, duals, hints)
    highs = highs_runner.new_highs(deadline.remaining(reserve), threads, seed)
    highs_runner.pass_lp(highs, lp, "simplex" if mip or warm else algorithm)
    if warm:
        highs.setBasis(hints.basis)
    if mip:
        # Big-M rows: an integrality slack of 1e-6 times Y would fake a rise larger than the
        # test's epsilon, so the MILP runs with tight tolerances. With those, HiGHS 1.14's MIP
        # presolve returned a wrong "optimal" count here (2 instead of 46 on a 48-job
        # instance), so presolve is off: the MILPs are small.
        highs.setOptionValue("presolve", "off")
        highs.setOptionValue("mip_rel_gap", 0.0)
        highs.setOptionValue("mip_feasibility_tolerance", MILP_TOLERANCE)
        highs.setOptionValue("primal_feasibility_tolerance", MILP_TOLERANCE)
    return _finish(highs, highs_runner.run(highs), duals, hints)


def _finish(highs, outcome, duals: bool, hints: LevelHints | None):
    """Keep the basis in ``hints``; the outcome, with the row duals when asked for."""
    if hints is not None and hints.warm:
        basis = highs.getBasis()
        # An infeasible LP's last basis is as near the next probe as an optimal one's.
        hints.basis = basis if basis.valid and outcome.status in ("optimal", "infeasible") else hints.basis
    if not duals:
        return outcome
    solution = highs.getSolution()
    return outcome, (np.asarray(solution.row_dual, dtype=float) if solution.dual_valid else None)


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
    (:mod:`~fleetplan.solvers.allocation.water_filling_events`); ``False`` runs every iteration's
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
            batch = _cap_events(classes, caps, rates, levels, done, run, deadline, threads, seed,
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
            outcome, row_dual = _level(classes, levels, rate, run, hints, deadline, threads, seed, lp_algorithm,
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
                witness = _level(classes, levels, np.where(after, 0.0, rates(after)), run, hints, deadline,
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


def _cap_events(classes, caps, rates, levels, done, run, deadline, threads, seed, algorithm, reserve, hints,
                known=None):
    """Commit the iterations that cap events decide (Gavel §4.3 iterations, outcomes proven as
    :mod:`~fleetplan.solvers.allocation.water_filling_events` explains).

    The first probe is the next iteration's own level LP: if the capacity binds before the
    first cap event, that LP is the plain iteration's and nothing else is solved. Otherwise the
    events are simulated in doubling chunks (FIRST_EVENTS, then as many again) while the last one
    probes feasible, and a binary search of level LPs over them finds the last state whose levels
    are feasible; its LP's solution witnesses the events before it and is the level LP of the
    iteration after them. (Simulating ahead to the usage bound instead cost one weights call per
    event, 60% of them past the capacity point: 24 s of 67 s at 16,384 distinct jobs.) Returns
    (levels, done, the next iteration's level LP outcome or None), or None when nothing was
    learnt. ``known``: the level LP at the current state, when the last iteration solved it."""
    bound = usage_bound(classes)
    # Each worker type alone (unit prices) bounds the events too: the levels need at least the
    # workers of that type each class cannot do without. With the last level LP's prices these
    # refute the events past the capacity point without an LP.
    type_prices = list(np.eye(len(classes.num_workers)))
    priced = False  # the states were cut by prices: the last one is the search's first guess

    def unrefuted(states: list[State], low: int, high: int) -> int:
        """The last of states low..high the prices leave (levels only grow from state to state,
        so the refuted ones are a suffix)."""
        while low < high:
            mid = (low + high + 1) // 2
            if priced_out(classes, states[mid].levels, hints.prices + type_prices):
                high = mid - 1
            else:
                low = mid
        return low

    def simulate(start: State, count: int) -> tuple[list[State], bool]:
        """Up to ``count`` events after ``start`` that the prices leave, and whether more may
        follow."""
        nonlocal priced
        more = simulate_events(start.levels, start.done, caps, classes.count, rates, bound, count,
                               lambda: deadline.expired(reserve))
        kept = unrefuted(more, 0, len(more) - 1)
        if kept < len(more) - 1:
            priced = True
            return more[: kept + 1], False
        return more, len(more) - 1 == count

    states, open_ended = simulate(State(levels, done, np.zeros(0), 0.0), FIRST_EVENTS)
    last = len(states) - 1
    probes = {}  # state -> (t, cell values, the HiGHS outcome and duals when HiGHS solved it)
    separable_probes = classes.num_classes >= SEPARABLE_CLASSES
    # Once the decomposition declines twice (or a search probe), the batch's other probes go to
    # HiGHS, warm-started from each other: declined probes cost 0.01-0.1 s each at 2,048 classes,
    # and a HiGHS probe far from the last basis 0.27 s against 0.02-0.13 s along a chain.
    declines = 0

    def probe(k: int, by_highs: bool = True) -> str:
        """The level LP at state ``k`` with t free: "beyond" (it reaches the next event, whose
        levels are then feasible too), "feasible" (it stops short: the next state is not),
        "infeasible" (t < 0: state ``k``'s levels are not; its prices are kept), or "declined"
        / "failed"."""
        state = states[k]
        if k == 0 and known is not None and known[0].status == "optimal" and known[0].values is not None:
            outcome = known[0]
            probes[k] = (outcome.objective, outcome.values[: len(classes.cell_class)], known)
            return "beyond" if outcome.objective >= state.next_t * (1 - 1e-9) else "feasible"
        nonlocal declines
        if separable_probes and declines < 2 and np.isfinite(state.next_t):
            answer = _separable_level(classes, state.levels, state.next_rate, deadline, threads, seed)
            if answer is not None:
                level, values, solved = answer
                run.separable_probes += 1
                hints.learn(classes, solved[1])
                if level < 0:
                    return "infeasible"
                probes[k] = (level, values, solved)
                return "beyond" if level >= state.next_t * (1 - 1e-9) else "feasible"
            declines += 1
            if not by_highs:
                return "declined"
        lp = level_lp(classes, state.levels, state.next_rate)
        # The caps bound t by next_t anyway; written out, it keeps an all-capped state bounded.
        # A free t answers an infeasible state with prices instead of a bare "infeasible".
        lp.col_upper[-1] = state.next_t if np.isfinite(state.next_t) else 0.0
        lp.col_lower[-1] = -np.inf
        outcome, row_dual = _solve(lp, deadline, threads, seed, algorithm, reserve=reserve, duals=True, hints=hints,
                                   simplex_first=True)
        run.lp_solves += 1
        if outcome.status == "optimal" and outcome.values is not None:
            hints.learn(classes, row_dual)
            if outcome.objective < 0:
                return "infeasible"
            probes[k] = (outcome.objective, outcome.values[: len(classes.cell_class)], (outcome, row_dual))
            # Reaching the bound proves the next state's levels feasible too.
            return "beyond" if outcome.objective >= state.next_t * (1 - 1e-9) else "feasible"
        return "infeasible" if outcome.status == "infeasible" else "failed"

    if last == 0 or not np.isfinite(states[0].next_t):
        return None
    first = probe(0, by_highs=False)
    if first == "declined" and last >= 1:
        # State 0's level LP is set by one job's cap and can be degenerate for the interior-point
        # prices (8,192 distinct jobs: declined, 3 s by HiGHS). Whether the capacity binds first
        # is also whether state 1 is feasible; if it is not, the plain iteration follows.
        second = probe(1)
        first = "beyond" if second in ("beyond", "feasible") else "failed"
    if first in ("failed", "declined", "infeasible"):
        return None
    if first != "beyond":
        return levels, done, probes[0][2]  # the capacity binds first: a plain iteration

    def search_probe(k: int, low: int, exact: bool = False) -> tuple[int, str]:
        """Probe state ``k``; where the decomposition declines, the state before it (if that is
        still above ``low``, a bisection learns nearly as much; not for an ``exact`` guess) by
        HiGHS."""
        nonlocal declines
        answer = probe(k, by_highs=False)
        if answer != "declined":
            return k, answer
        declines = 2
        k = k - 1 if k - 1 > low and not exact else k
        return k, probe(k)

    low, high = 1, last  # state ``low`` is feasible, every state past ``high`` infeasible
    while open_ended and low < high and len(states) - 1 < MAX_EVENTS and not deadline.expired(reserve):
        at, answer = search_probe(high, low)
        if answer == "failed":
            return None
        if answer == "infeasible":
            high = at - 1
            break
        low = at
        if answer == "feasible":
            high = at
            break
        more, open_ended = simulate(states[-1], len(states) - 1)
        states += more[1:]
        high = len(states) - 1
    # The search: the last state the prices leave is probed first (prices near the capacity
    # point's refute exactly the states past it), and after each infeasible probe the new
    # prices cut again; bisection takes over when a guess misses twice in a row.
    misses = 0
    while low < high:
        if deadline.expired(reserve):
            return None
        cut = unrefuted(states, low, high)
        if cut < high:
            priced, high = True, cut
        guess = priced and misses < 2
        k, answer = search_probe(high if guess else (low + high + 1) // 2, low, exact=guess)
        if answer == "failed":
            return None
        if answer == "infeasible":
            high = k - 1
            misses += guess
            priced = False
        elif answer == "feasible":
            low = high = k
        else:
            low = min(k + 1, high) if answer == "beyond" and k < high else k
    if low not in probes and (deadline.expired(reserve) or probe(low) not in ("feasible", "beyond")):
        return None
    _, values, solved = probes[low]
    values = classes.feasible_part(values)
    proven = witnessed_prefix(states, low, classes.scores(values), classes.count)
    if proven == 0:
        return None
    if run.first_level is None:
        run.first_level = float(states[0].next_t)
    for state in states[1: proven + 1]:
        run.iterations += 1
        run.event_iterations += 1
        run.history.append((state.levels, state.done))
    run.values = values
    reusable = proven == low and np.isfinite(states[low].next_t)
    return states[proven].levels, states[proven].done, solved if reusable else None


def _separable_level(classes: JobClasses, levels: np.ndarray, rate: np.ndarray, deadline: Deadline, threads: int,
                     seed: int):
    """:func:`level_lp` by the price decomposition (:func:`fleetplan.solvers.allocation.separable.max_min`:
    rows divided by their rates, classes of rate 0 as floors, t free): (t, cell values, the LP's
    outcome and row duals in :func:`level_lp`'s layout) of a certified optimum, or None when it
    does not certify (the caller solves the LP). A negative t means the levels are infeasible."""
    live = rate > 0
    if not live.any():
        return None
    rate = np.where(live, rate, 1.0)[:, None]
    result = separable.max_min(classes.coefficient / rate, levels / rate[:, 0], classes.count,
                               classes.scale_factor, classes.num_workers, free_level=True, floor=~live,
                               deadline=deadline, threads=threads, seed=seed, lp_tolerance=REDUCED_LP_TOLERANCE)
    if result.status != "optimal":
        return None
    values = result.matrix[classes.cell_class, classes.cell_type]
    outcome = highs_runner.LpOutcome("optimal", np.concatenate([values, [result.level]]), float(result.level),
                                     log=result.log[-1:])
    # Rows of level_lp: scores (the scaled row's dual over the rate), job times, workers (<=, so
    # their duals enter with the opposite sign); dual_stuck checks whatever it is given.
    n = classes.num_classes
    row_dual = np.concatenate([result.score_duals / rate[:, 0], np.zeros(n), -result.prices])
    return float(result.level), values, (outcome, row_dual)


def _level(classes, levels, rate, run, hints, deadline, threads, seed, algorithm, reserve, shortcuts):
    """The level LP at ``levels`` and ``rate``: (outcome, row duals), by the price
    decomposition first from SEPARABLE_CLASSES classes (with ``shortcuts``), else by HiGHS from
    the last basis; its prices are kept in ``hints``."""
    if shortcuts and classes.num_classes >= SEPARABLE_CLASSES:
        answer = _separable_level(classes, levels, rate, deadline, threads, seed)
        if answer is not None:
            run.separable_probes += 1
            hints.learn(classes, answer[2][1])
            return answer[2]
    outcome, row_dual = _solve(level_lp(classes, levels, rate), deadline, threads, seed, algorithm, reserve=reserve,
                               duals=True, hints=hints)
    run.lp_solves += 1
    if shortcuts and outcome.status == "optimal":
        hints.learn(classes, row_dual)
    return outcome, row_dual


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
        outcome = _solve(rise_lp(classes, levels, subset, cap[subset]), deadline, threads, seed, algorithm,
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
    outcome = _solve(bottleneck_milp(classes, levels, tested, epsilon), deadline, threads, seed, "simplex",
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
