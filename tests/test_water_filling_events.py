"""The water-filling shortcuts (cap events in batches, bottlenecks from duals) against the plain
procedure, which stays the reference: the same iterations, the same levels, a plan the judge
finds Pareto-efficient, and hand-solved pieces (Gavel §4.3, Appendix A.1)."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan
from fleetplan.instances import instance_from_data
from fleetplan.models.allocation.water_filling import job_classes, level_lp
from fleetplan.solvers import highs as highs_runner
from fleetplan.solvers.allocation.water_filling import hierarchical_run, single_level_run
from fleetplan.solvers.allocation.water_filling.events import (
    State,
    dual_stuck,
    individual_caps,
    tolerance,
    witnessed_prefix,
)
from tests.test_water_filling import generated


def distinct(jobs: int, entities: int, seed: int, fifo: bool = False, multi_gpu: bool = True):
    return generated(jobs, entities, seed, fifo, multi_gpu, throughput_noise=0.1)


def assert_same_run(reference, fast):
    """The same sequence of bottlenecked sets and levels, iteration by iteration."""
    assert fast.status == reference.status == "optimal"
    assert fast.iterations == reference.iterations
    for (levels_a, done_a), (levels_b, done_b) in zip(reference.history, fast.history, strict=True):
        assert np.array_equal(done_a, done_b)
        np.testing.assert_allclose(levels_b, levels_a, rtol=1e-7, atol=1e-9)
    assert fast.first_level == pytest.approx(reference.first_level, rel=1e-7)


# Two draws with and without FIFO by default; seeds 2 and 3 run with the slow set.
@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(seed, marks=pytest.mark.slow) for seed in (2, 3))])
@pytest.mark.parametrize("fifo", [False, True])
def test_hierarchical_shortcuts_equal_the_plain_procedure(seed, fifo):
    instance = distinct(160, 4, seed, fifo)
    _, reference = hierarchical_run(instance, aggregate=False, shortcuts=False)
    classes, fast = hierarchical_run(instance, aggregate=False, shortcuts=True)
    assert_same_run(reference, fast)
    np.testing.assert_allclose(classes.scores(fast.values), classes.scores(reference.values), rtol=1e-6, atol=1e-8)


def test_cap_events_replace_most_lps():
    """The suite's shape (5 entities, distinct multi-GPU jobs): 30 of 31 iterations are cap
    events (one job reaching its best score each), decided with a handful of LPs."""
    instance = distinct(256, 5, 0)
    _, reference = hierarchical_run(instance, aggregate=False, shortcuts=False)
    _, fast = hierarchical_run(instance, aggregate=False, shortcuts=True)
    assert_same_run(reference, fast)
    assert fast.event_iterations >= 20
    assert fast.lp_solves * 5 < reference.lp_solves


@pytest.mark.parametrize("multi_gpu", [False, True])
def test_shortcuts_on_aggregated_classes_and_single_level(multi_gpu):
    # Without noise, classes hold several jobs: caps and rises are counted per class.
    data = fleetplan.generate("allocation", {"jobs": 120, "entities": 3, "multi_gpu": multi_gpu}, seed=5)
    for run in (hierarchical_run, single_level_run):
        classes, reference = run(data, shortcuts=False)
        _, fast = run(data, shortcuts=True)
        assert classes.count.max() > 1
        assert_same_run(reference, fast)


@pytest.mark.parametrize("solver", ["hierarchical-water-filling", "water-filling"])
def test_fast_plans_pass_the_judge(solver):
    instance = distinct(300, 5, 7)
    result = fleetplan.solve(instance, solver)
    assert result.status == "optimal"
    evaluation = result.evaluation
    assert evaluation.violations == []
    assert evaluation.metrics["pareto_efficient"] == 1.0
    assert result.objective == pytest.approx(evaluation.objective, rel=1e-6)


def test_individual_caps_by_hand():
    """One class of identical jobs, two types (4 and 1 workers), throughputs 3 and 1. With 2
    members each may spend all its time on type 0 (4 / 2 workers each): cap 3. With 8, type 0
    gives each at most 4 / 8 of its time and type 1 1 / 8: cap 3/2 + 1/8."""
    def instance(jobs):
        return instance_from_data({
            "kind": "allocation", "worker_types": [{"name": "a", "count": 4}, {"name": "b", "count": 1}],
            "jobs": [{"id": f"j{i}", "throughput": {"a": 3.0, "b": 1.0}} for i in range(jobs)]})
    for jobs, cap in ((2, 3.0), (8, 1.5 + 0.125)):
        arrays = instance(jobs).arrays()
        classes = job_classes(arrays, np.zeros((jobs, 0)))
        assert classes.num_classes == 1
        # Coefficients are normalised by the throughput at the equal share (4/5 a, 1/5 b).
        norm = 3.0 * 0.8 + 1.0 * 0.2
        assert individual_caps(classes)[0] * norm == pytest.approx(cap)


def test_witnessed_prefix_needs_a_rise_above_the_tolerance_in_every_event():
    levels = [np.array([0.0, 0.0]), np.array([1.0, 0.5]), np.array([1.0, 0.8])]
    done = [np.array([False, False]), np.array([True, False]), np.array([True, False])]
    states = [State(lv, d, np.ones(2), 1.0) for lv, d in zip(levels, done, strict=True)]
    count = np.ones(2)
    assert witnessed_prefix(states, 2, np.array([1.0, 0.9]), count) == 2
    # Job 1 only reaches state 2's level: event 2 is not witnessed, event 1 is.
    assert witnessed_prefix(states, 2, np.array([1.0, 0.8]), count) == 1
    assert witnessed_prefix(states, 2, np.array([1.0, 0.5]), count) == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dual_proof_never_calls_a_free_job_bottlenecked(seed):
    """At the first level LP's optimum, every class the duals prove bottlenecked is one the
    independent rise LP (max that class's score, every other class at its level) cannot lift."""
    from scipy.optimize import linprog

    instance = distinct(40, 3, seed)
    arrays = instance.arrays()
    classes = job_classes(arrays, arrays.weight[:, None], aggregate=False)
    rate = arrays.weight[classes.first_job]
    lp = level_lp(classes, np.zeros(classes.num_classes), rate)
    highs = highs_runner.new_highs(None, 1, 0)
    highs_runner.pass_lp(highs, lp, "simplex")
    outcome = highs_runner.run(highs)
    values = classes.feasible_part(outcome.values[:-1])
    levels = np.minimum(rate * outcome.objective, classes.scores(values))
    proven = dual_stuck(classes, levels, np.asarray(highs.getSolution().row_dual), tolerance(levels))
    assert proven.any()
    matrix = lp.matrix.tocsr()[:, :-1]
    n = classes.num_classes
    for m in np.flatnonzero(proven)[:8]:
        # max score_m s.t. score >= levels (rows 0..n-1), time <= 1, workers <= W.
        a_ub = -matrix[:n].toarray()
        res = linprog(a_ub[m], A_ub=np.vstack([a_ub, matrix[n:].toarray()]),
                      b_ub=np.concatenate([-levels, np.ones(n), classes.num_workers]), bounds=(0, 1),
                      method="highs")
        assert res.status == 0
        assert -res.fun - levels[m] <= 2 * tolerance(levels)


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
@pytest.mark.parametrize("fifo", [False, True])
def test_level_lps_by_the_decomposition_equal_the_plain_procedure(monkeypatch, seed, fifo):
    """From SEPARABLE_CLASSES classes every level LP (events' probes and plain iterations) goes
    to the price decomposition with floors, and bottlenecks come from its duals; forced on here
    at a small size, the run is still the plain procedure's."""
    from fleetplan.solvers.allocation.water_filling import batches

    instance = distinct(256, 5, seed, fifo)
    _, reference = hierarchical_run(instance, aggregate=False, shortcuts=False)
    monkeypatch.setattr(batches, "SEPARABLE_CLASSES", 0)
    classes, fast = hierarchical_run(instance, aggregate=False, shortcuts=True)
    assert fast.separable_probes > 0
    assert_same_run(reference, fast)
    np.testing.assert_allclose(classes.scores(fast.values), classes.scores(reference.values), rtol=1e-6, atol=1e-8)
    _, single_reference = single_level_run(instance, aggregate=False, shortcuts=False)
    _, single = single_level_run(instance, aggregate=False, shortcuts=True)
    assert_same_run(single_reference, single)
    result = fleetplan.solve(instance, "hierarchical-water-filling")
    assert result.evaluation.metrics["pareto_efficient"] == 1.0


@pytest.mark.slow
def test_shortcuts_equal_the_plain_procedure_at_2048_distinct_jobs():
    """The benchmark's instance: 113
    iterations, the same in both; the plain procedure needs about two minutes of CPU."""
    instance = distinct(2048, 5, 0)
    classes, reference = hierarchical_run(instance, shortcuts=False)
    _, fast = hierarchical_run(instance, shortcuts=True)
    assert_same_run(reference, fast)
    assert fast.separable_probes > 0 and fast.lp_solves < 5
    np.testing.assert_allclose(classes.scores(fast.values), classes.scores(reference.values), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("declined", [3, 2])
def test_a_declined_decomposition_falls_back_without_changing_the_run(monkeypatch, declined):
    """Where the decomposition declines (its prices too far off), the first probe moves to the
    first event's state, a search probe goes to HiGHS (a bisection's to the state before it), and
    so do the batch's later probes: the run is still the plain procedure's. Declined here: the
    first probe and every third call, or two calls in three."""
    from fleetplan.solvers.allocation.water_filling import batches

    instance = distinct(256, 5, 0)
    _, reference = hierarchical_run(instance, aggregate=False, shortcuts=False)
    decompose = batches.separable_level
    calls = []

    def sometimes(classes, levels, rate, *args):
        calls.append(levels.max())
        refuse = len(calls) % 3 == 0 if declined == 3 else len(calls) % 3 != 1
        return None if levels.max() == 0 or refuse else decompose(classes, levels, rate, *args)

    monkeypatch.setattr(batches, "SEPARABLE_CLASSES", 0)
    monkeypatch.setattr(batches, "separable_level", sometimes)
    _, fast = hierarchical_run(instance, aggregate=False, shortcuts=True)
    assert len(calls) >= 2 and fast.lp_solves > 0
    assert declined == 2 or fast.separable_probes > 0
    assert_same_run(reference, fast)
