"""Water filling with many weighted jobs (Gavel §4.1, §4.3): the batches of cap events find
their capacity point with prices (warm-started level LPs, capacity prices and each worker type
alone refuting the events past it) and the run is still the plain procedure's, iteration by
iteration; and the price test by hand (weak duality of the level LP)."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan
from fleetplan.instances import instance_from_data
from fleetplan.models.allocation.water_filling import job_classes
from fleetplan.solvers.allocation.water_filling import hierarchical_run, single_level_run
from fleetplan.solvers.allocation.water_filling.events import capacity_prices, priced_out
from tests.test_water_filling_events import assert_same_run


def weighted(jobs: int, share: float, weight: float, seed: int, noise: float = 0.1):
    """The adversarial mix's shape: single-GPU jobs, no SLO, ``share`` of them at ``weight``."""
    return fleetplan.generate("allocation", {
        "jobs": jobs, "multi_gpu": False, "slo_fraction": 0.0, "throughput_noise": noise,
        "priority_share": share, "priority_weight": weight}, seed=seed)


@pytest.mark.parametrize(("jobs", "share", "weight", "seed"), [
    (48, 0.5, 8.0, 0), (96, 0.5, 8.0, 1), pytest.param(192, 0.5, 8.0, 2, marks=pytest.mark.slow),
    pytest.param(192, 0.25, 3.0, 3, marks=pytest.mark.slow), (128, 0.1, 16.0, 4)])
@pytest.mark.parametrize("run", [single_level_run, hierarchical_run])
def test_weighted_runs_equal_the_plain_procedure(jobs, share, weight, seed, run):
    instance = weighted(jobs, share, weight, seed)
    classes, reference = run(instance, aggregate=False, shortcuts=False)
    _, fast = run(instance, aggregate=False, shortcuts=True)
    assert_same_run(reference, fast)
    np.testing.assert_allclose(classes.scores(fast.values), classes.scores(reference.values), rtol=1e-7, atol=1e-9)
    # Most iterations are cap events; the batches find their end in a few LPs.
    assert fast.event_iterations >= reference.iterations // 2
    assert fast.lp_solves * 4 < reference.lp_solves


@pytest.mark.parametrize("aggregate", [True, False])
def test_ties_between_identical_jobs(aggregate):
    """Without noise, identical jobs reach their caps at the same moment: several classes in
    one event (``aggregate=False``) or one class of several members (``True``)."""
    instance = weighted(96, 0.5, 8.0, 1, noise=0.0)
    classes, reference = single_level_run(instance, aggregate=aggregate, shortcuts=False)
    _, fast = single_level_run(instance, aggregate=aggregate, shortcuts=True)
    assert (classes.count.max() > 1) == aggregate
    assert_same_run(reference, fast)
    np.testing.assert_allclose(classes.scores(fast.values), classes.scores(reference.values), rtol=1e-7, atol=1e-9)
    if not aggregate:
        changes = [int((b & ~a).sum()) for (_, a), (_, b) in zip(fast.history, fast.history[1:], strict=False)]
        assert max(changes) > 1


@pytest.mark.parametrize(("jobs", "share", "weight", "seed"), [(128, 0.1, 16.0, 4), (160, 0.5, 8.0, 1)])
def test_weighted_runs_with_the_decomposition_equal_the_plain_procedure(monkeypatch, jobs, share, weight, seed):
    """From SEPARABLE_CLASSES classes the probes go to the price decomposition first; forced on
    at a small size, the run is the same where it certifies them (its prices feeding the cuts)
    and where it declines (after two declines a batch's probes go to HiGHS)."""
    from fleetplan.solvers.allocation.water_filling import batches

    instance = weighted(jobs, share, weight, seed)
    _, reference = single_level_run(instance, aggregate=False, shortcuts=False)
    monkeypatch.setattr(batches, "SEPARABLE_CLASSES", 0)
    decompose, answers = batches.separable_level, []

    def counted(*args):
        answers.append(decompose(*args))
        return answers[-1]

    monkeypatch.setattr(batches, "separable_level", counted)
    _, fast = single_level_run(instance, aggregate=False, shortcuts=True)
    declined = sum(answer is None for answer in answers)
    if seed == 4:
        assert fast.separable_probes > 0 and declined == 0
    else:
        assert declined > 0 and fast.lp_solves > 0
    assert_same_run(reference, fast)


def test_without_warm_starts_the_run_is_the_same():
    """``lp_algorithm="ipm"`` turns the simplex warm starts off (the prices still cut)."""
    instance = weighted(96, 0.5, 8.0, 6)
    _, reference = single_level_run(instance, aggregate=False, shortcuts=False)
    _, fast = single_level_run(instance, aggregate=False, shortcuts=True, lp_algorithm="ipm")
    assert_same_run(reference, fast)


@pytest.mark.parametrize("solver", ["water-filling", "hierarchical-water-filling"])
def test_weighted_plans_pass_the_judge(solver):
    instance = weighted(200, 0.5, 8.0, 7)
    result = fleetplan.solve(instance, solver)
    assert result.status == "optimal"
    assert result.evaluation.violations == []
    assert result.evaluation.metrics["pareto_efficient"] == 1.0
    assert result.objective == pytest.approx(result.evaluation.objective, rel=1e-6)


def test_priced_out_by_hand():
    """Two jobs on one type of 1 worker, throughput 1 (score per unit of time 1). Levels 0.6
    each need 0.6 of the worker each: 1.2 workers at price 1, refuted; 0.5 each fits exactly,
    not refuted; no prices prove nothing."""
    instance = instance_from_data({
        "kind": "allocation", "worker_types": [{"name": "gpu", "count": 1}],
        "jobs": [{"id": f"j{i}", "throughput": {"gpu": 1.0}} for i in range(2)]})
    classes = job_classes(instance.arrays(), np.arange(2)[:, None], aggregate=False)
    assert np.allclose(classes.coefficient, 1.0)
    assert priced_out(classes, np.array([0.6, 0.6]), [np.array([1.0])])
    assert priced_out(classes, np.array([0.6, 0.6]), [np.array([1e-3])])  # the scale does not matter
    assert not priced_out(classes, np.array([0.5, 0.5]), [np.array([1.0])])
    assert not priced_out(classes, np.array([0.6, 0.6]), [])
    # Above a job's best score no allocation reaches it, whatever the prices.
    assert priced_out(classes, np.array([1.5, 0.0]), [np.array([1e-3])])
    # The worker rows' duals in either sign convention; zero prices are dropped.
    row_dual = np.array([0.0, 0.0, 0.0, 0.0, -0.5])
    assert [list(lam) for lam in capacity_prices(classes, row_dual)] == [[0.5]]
    assert capacity_prices(classes, np.zeros(5)) == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_priced_out_never_refutes_feasible_levels(seed):
    """The scores of any feasible allocation are never refuted, at any prices."""
    instance = weighted(60, 0.5, 8.0, seed)
    arrays = instance.arrays()
    classes = job_classes(arrays, arrays.weight[:, None], aggregate=False)
    rng = np.random.default_rng(seed)
    matrix = arrays.isolated_allocation()
    values = matrix[classes.first_job[classes.cell_class], classes.cell_type]
    for _ in range(20):
        values = classes.feasible_part(values * rng.uniform(0.5, 2.0, size=values.shape))
        lam = rng.exponential(size=len(classes.num_workers)) * (rng.random(len(classes.num_workers)) < 0.7)
        assert not priced_out(classes, classes.scores(values), [lam, *np.eye(len(lam))])


def test_the_level_lps_own_prices_refute_any_higher_levels():
    """At the first level LP's optimum the capacity binds (no job is near its cap with equal
    weights): its prices refute the levels raised by 0.1%, and leave the optimum's own."""
    from fleetplan.models.allocation.water_filling import level_lp
    from fleetplan.solvers import highs as highs_runner

    instance = weighted(80, 0.0, 1.0, 3)
    arrays = instance.arrays()
    classes = job_classes(arrays, arrays.weight[:, None], aggregate=False)
    highs = highs_runner.new_highs(None, 1, 0)
    highs_runner.pass_lp(highs, level_lp(classes, np.zeros(classes.num_classes), np.ones(classes.num_classes)),
                         "simplex")
    outcome = highs_runner.run(highs)
    prices = capacity_prices(classes, np.asarray(highs.getSolution().row_dual))
    assert prices
    levels = np.full(classes.num_classes, outcome.objective)
    assert not priced_out(classes, levels, prices)
    assert priced_out(classes, levels * 1.001, prices)
