"""The level LPs of Gavel's water filling (Gavel §4.3, Appendix A.1) and the batches of cap
events they decide (:mod:`~fleetplan.solvers.allocation.water_filling.events` explains why the
batches keep the procedure's answers).

Every level LP of a run has the same rows and columns, so HiGHS starts each from the last one's
simplex basis (:class:`LevelHints`), which also keeps the last capacity prices. A batch
simulates the cap events ahead, drops those the prices (or each worker type alone) prove past
the capacity point, and finds the last feasible one with a few probes: the last state the
prices leave first, bisection when that misses. On 2,048 distinct jobs, half of them at weight
8 (381 iterations, 379 of them cap events), that took 18 LPs by HiGHS from scratch (0.1-0.7 s
each) and 51 calls of the price decomposition (46 declined); now 9 LPs, all but the first from
a neighbour's basis (0.01-0.11 s), and 4 declined calls (benchmarks/results/allocation.md,
"Water filling with weighted jobs (adversarial mixes, part 2)").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fleetplan.models.allocation.water_filling import JobClasses, level_lp
from fleetplan.solvers import highs as highs_runner
from fleetplan.solvers.allocation.price_decomposition import separable
from fleetplan.solvers.allocation.water_filling.events import (
    State,
    capacity_prices,
    priced_out,
    simulate_events,
    usage_bound,
    witnessed_prefix,
)
from fleetplan.solvers.deadline import Deadline

# The bottleneck MILP's feasibility tolerances (solve_highs explains).
MILP_TOLERANCE = 1e-9
# Cap events simulated in one batch: first FIRST_EVENTS, then doubling while the last one is
# feasible, up to MAX_EVENTS (each costs one call of the weights; the search over them about
# twice log2 of their number in level LPs).
FIRST_EVENTS = 64
MAX_EVENTS = 1 << 16
# A batch's first HiGHS probe tries the simplex for this long per column (see solve_highs): about
# the interior point method's own time on a level LP the capacity ends (0.15 s at 6,145 columns,
# 0.6 s at 24,577), so a wrong guess costs at most about twice that LP.
SIMPLEX_FIRST_S_PER_COLUMN = 25e-6
# From this many classes the level LPs try the price decomposition before HiGHS.
SEPARABLE_CLASSES = 1000
# Its reduced LP's feasibility tolerances: with HiGHS's default 1e-7 the worker prices are off by
# about that much, and the dual proof of a bottleneck (rise <= gap / u, u ~ 5e-5 at 8,192 jobs)
# then fails by three orders of magnitude; at 1e-10 the gap is at rounding level.
REDUCED_LP_TOLERANCE = 1e-10


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
    simulates (:func:`~fleetplan.solvers.allocation.water_filling.events.priced_out`)."""

    warm: bool = True
    basis: object | None = None
    prices: list[np.ndarray] = field(default_factory=list)

    def learn(self, classes: JobClasses, row_dual: np.ndarray | None) -> None:
        """Keep the capacity prices of an optimal level LP's duals, unless they are all zero."""
        if row_dual is not None:
            self.prices = capacity_prices(classes, row_dual) or self.prices


def solve_highs(lp, deadline: Deadline, threads: int, seed: int, algorithm, mip: bool = False,
                reserve: float = 0.0, duals: bool = False, hints: LevelHints | None = None,
                simplex_first: bool = False):
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


def cap_event_batch(classes: JobClasses, caps: np.ndarray, rates: Callable[[np.ndarray], np.ndarray],
                    levels: np.ndarray, done: np.ndarray, run, deadline: Deadline, threads: int, seed: int,
                    algorithm: highs_runner.LpAlgorithm, reserve: float, hints: LevelHints, known=None):
    """Commit the iterations that cap events decide (Gavel §4.3 iterations, outcomes proven as
    :mod:`~fleetplan.solvers.allocation.water_filling.events` explains) to ``run`` (a
    :class:`~fleetplan.solvers.allocation.water_filling.WaterFillingRun`).

    The first probe is the next iteration's own level LP (``known``, when the last iteration
    solved it): if the capacity binds before the first cap event, that LP is the plain
    iteration's and nothing else is solved. Otherwise the events are simulated in doubling
    chunks (FIRST_EVENTS, then as many again), those the prices refute dropped, while the last
    one probes feasible; then the last state the prices leave is probed, the prices of a probe
    past the capacity point cut again, and bisection takes over when two guesses miss. The last
    feasible state's LP solution witnesses the events before it and is the level LP of the
    iteration after them. (Simulating ahead to the usage bound instead cost one weights call per
    event, 60% of them past the capacity point: 24 s of 67 s at 16,384 distinct jobs.) Returns
    (levels, done, the next iteration's level LP outcome or None), or None when nothing was
    learnt."""
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

    def probe(k: int, by_highs: bool = True, far: bool = False) -> str:
        """The level LP at state ``k`` with t free: "beyond" (it reaches the next event, whose
        levels are then feasible too), "feasible" (it stops short: the next state is not),
        "infeasible" (t < 0: state ``k``'s levels are not; its prices are kept), or "declined"
        / "failed". A ``far`` probe asks the decomposition even after declines: the batch's
        last state when its events ran out before any probe or price stopped them, whose LP can
        be a long step from HiGHS's last basis (2,048 distinct jobs, 1% at weight 8: 0.33 s by
        HiGHS from there, 0.01 s by the decomposition). A guess the prices made lies just past
        the probes HiGHS followed: HiGHS from its basis (0.02 s at the 50% mix's capacity
        point, where the decomposition declined in 0.09 s)."""
        state = states[k]
        if k == 0 and known is not None and known[0].status == "optimal" and known[0].values is not None:
            outcome = known[0]
            probes[k] = (outcome.objective, outcome.values[: len(classes.cell_class)], known)
            return "beyond" if outcome.objective >= state.next_t * (1 - 1e-9) else "feasible"
        nonlocal declines
        if separable_probes and (declines < 2 or far) and np.isfinite(state.next_t):
            answer = separable_level(classes, state.levels, state.next_rate, deadline, threads, seed)
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
        outcome, row_dual = solve_highs(lp, deadline, threads, seed, algorithm, reserve=reserve, duals=True, hints=hints,
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
    if low not in probes and (deadline.expired(reserve) or probe(low, far=True) not in ("feasible", "beyond")):
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


def separable_level(classes: JobClasses, levels: np.ndarray, rate: np.ndarray, deadline: Deadline, threads: int,
                    seed: int):
    """:func:`level_lp` by the price decomposition (:func:`fleetplan.solvers.allocation.price_decomposition.separable.max_min`:
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


def level_answer(classes: JobClasses, levels: np.ndarray, rate: np.ndarray, run, hints: LevelHints,
                 deadline: Deadline, threads: int, seed: int, algorithm: highs_runner.LpAlgorithm, reserve: float,
                 shortcuts: bool):
    """The level LP at ``levels`` and ``rate``: (outcome, row duals), by the price
    decomposition first from SEPARABLE_CLASSES classes (with ``shortcuts``), else by HiGHS from
    the last basis; its prices are kept in ``hints``."""
    if shortcuts and classes.num_classes >= SEPARABLE_CLASSES:
        answer = separable_level(classes, levels, rate, deadline, threads, seed)
        if answer is not None:
            run.separable_probes += 1
            hints.learn(classes, answer[2][1])
            return answer[2]
    outcome, row_dual = solve_highs(level_lp(classes, levels, rate), deadline, threads, seed, algorithm,
                                    reserve=reserve, duals=True, hints=hints)
    run.lp_solves += 1
    if shortcuts and outcome.status == "optimal":
        hints.learn(classes, row_dual)
    return outcome, row_dual
