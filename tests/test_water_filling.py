"""Gavel water filling (§4.3, App. A.1): hand-solved cases, LP test = MILP test, aggregation is
exact, Pareto efficiency checked by an independent LP, and the judge's bottleneck metric."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

import fleetplan
from fleetplan.instances import InstanceError, instance_from_data
from fleetplan.instances.allocation import AllocationPlan
from fleetplan.instances.allocation.hierarchical import (
    bottlenecked_jobs,
    hierarchical_job_weights,
    job_scores,
)
from fleetplan.solvers.allocation.water_filling import hierarchical_run, single_level_run


def identical_gpus(jobs: list[dict], gpus: int = 4, entities: list[dict] | None = None):
    return instance_from_data({
        "kind": "allocation", "worker_types": [{"name": "gpu", "count": gpus}],
        "entities": entities or [],
        "jobs": [{"id": f"job{i + 1}", "throughput": {"gpu": 1.0}, **job} for i, job in enumerate(jobs)],
    })


def check_plan(instance, result):
    """Every plan passes the judge and the reported objective is the judge's."""
    assert result.status == "optimal", result.log
    evaluation = fleetplan.evaluate(instance, result.plan)
    assert evaluation.violations == []
    assert result.objective == pytest.approx(evaluation.objective)
    assert result.model_objective == pytest.approx(evaluation.objective, rel=1e-6)
    return evaluation


def scores_of(instance, result):
    return job_scores(instance, result.plan.matrix(instance))


def no_job_can_rise(instance, matrix) -> float:
    """Independent Pareto check: max sum of scores subject to no score falling, minus the plan's
    sum (0 when the plan is Pareto-efficient). Job-by-job LP, no aggregation."""
    arrays = instance.arrays()
    n, k = arrays.throughput.shape
    share = arrays.num_workers / arrays.num_workers.sum()
    a = arrays.throughput * (arrays.scale_factor / (arrays.throughput @ share))[:, None]
    a = np.where(arrays.num_workers[None, :] >= arrays.scale_factor[:, None], a, 0.0)
    floor = (a * matrix).sum(axis=1) * (1 - 1e-9)
    rows = [np.kron(np.eye(n), np.ones((1, k))),                         # job time <= 1
            np.tile(np.diag(np.ones(k)), n) * np.repeat(arrays.scale_factor, k)[None, :],  # workers
            -np.kron(np.eye(n), np.ones((1, k))) * a.reshape(1, -1)]      # -score <= -floor
    a_ub = np.vstack(rows)
    b_ub = np.concatenate([np.ones(n), arrays.num_workers, -floor])
    result = linprog(-a.reshape(-1), A_ub=a_ub, b_ub=b_ub, bounds=(0, 1), method="highs")
    assert result.status == 0
    return -result.fun - floor.sum()


# --- the §4.3 example -------------------------------------------------------------------------

def test_paper_example_single_level():
    """4 identical jobs, weights 3, 1, 1, 1, on 4 identical GPUs (§4.3): job 1 reaches
    throughput 1.0 at the first iteration while jobs 2-4 get 1/3; then jobs 2-4 get full GPUs."""
    instance = identical_gpus([{"weight": 3.0}, {}, {}, {}])
    classes, run = single_level_run(instance)
    (levels1, done1), (levels2, done2) = run.history
    by_job = lambda values: values[classes.class_of_job]  # noqa: E731
    np.testing.assert_allclose(by_job(levels1), [1.0, 1 / 3, 1 / 3, 1 / 3], rtol=1e-6)
    assert by_job(done1).tolist() == [True, False, False, False]
    np.testing.assert_allclose(by_job(levels2), [1.0, 1.0, 1.0, 1.0], rtol=1e-6)
    assert by_job(done2).all()
    result = fleetplan.solve(instance, "water-filling")
    check_plan(instance, result)
    np.testing.assert_allclose(result.plan.matrix(instance).ravel(), [1, 1, 1, 1], rtol=1e-6)
    assert result.objective == pytest.approx(1 / 3)  # min score / weight = job 1's 1.0 / 3


@pytest.mark.parametrize("entities, owner", [
    ([{"id": f"e{i}", "weight": w} for i, w in enumerate([3, 1, 1, 1])], ["e0", "e1", "e2", "e3"]),
    ([{"id": "a", "weight": 3}, {"id": "b", "weight": 3}], ["a", "b", "b", "b"]),
])
@pytest.mark.parametrize("test", ["lp", "milp"])
def test_paper_example_hierarchical(entities, owner, test):
    instance = identical_gpus([{"entity": e} for e in owner], entities=entities)
    classes, run = hierarchical_run(instance, bottleneck_test=test)
    levels1, done1 = run.history[0]
    np.testing.assert_allclose(levels1[classes.class_of_job], [1.0, 1 / 3, 1 / 3, 1 / 3], rtol=1e-6)
    assert done1[classes.class_of_job].tolist() == [True, False, False, False]
    result = fleetplan.solve(instance, "hierarchical-water-filling", bottleneck_test=test)
    evaluation = check_plan(instance, result)
    np.testing.assert_allclose(result.plan.matrix(instance).ravel(), [1, 1, 1, 1], rtol=1e-6)
    assert evaluation.metrics["pareto_efficient"] == 1.0


def test_fifo_inside_an_entity():
    """One FIFO entity of three jobs on two GPUs: the earliest arrivals get whole GPUs."""
    instance = identical_gpus([{"entity": "q", "arrival_time": t} for t in (5.0, 1.0, 3.0)], gpus=2,
                              entities=[{"id": "q", "policy": "fifo"}])
    result = fleetplan.solve(instance, "hierarchical-water-filling")
    check_plan(instance, result)
    np.testing.assert_allclose(result.plan.matrix(instance).ravel(), [0, 1, 1], atol=1e-7)


def test_fairness_entity_beside_a_fifo_entity():
    """Equal entities on 2 GPUs: fairness splits its GPU between its two jobs, FIFO gives its
    GPU to its first job (worked by hand: t = 1 in the first iteration fills the cluster)."""
    instance = identical_gpus(
        [{"entity": "fair"}, {"entity": "fair"}, {"entity": "queue"}, {"entity": "queue", "arrival_time": 1.0}],
        gpus=2, entities=[{"id": "fair"}, {"id": "queue", "policy": "fifo"}])
    for test in ("lp", "milp"):
        result = fleetplan.solve(instance, "hierarchical-water-filling", bottleneck_test=test)
        check_plan(instance, result)
        np.testing.assert_allclose(result.plan.matrix(instance).ravel(), [0.5, 0.5, 1.0, 0.0], atol=1e-7)


def test_weights_are_redistributed_by_each_entity_policy():
    instance = identical_gpus(
        [{"entity": "f", "weight": 2.0}, {"entity": "f"}, {"entity": "f"}, {"entity": "q"}, {"entity": "q"}],
        entities=[{"id": "f", "weight": 4.0}, {"id": "q", "weight": 2.0, "policy": "fifo"}])
    np.testing.assert_allclose(hierarchical_job_weights(instance), [2, 1, 1, 2, 0])
    done = np.array([True, False, False, True, False])
    np.testing.assert_allclose(hierarchical_job_weights(instance, done), [0, 2, 2, 0, 2])


# --- the two bottleneck tests agree, aggregation is exact, Pareto efficiency ---------------------

def generated(jobs: int, entities: int, seed: int, fifo: bool = False, multi_gpu: bool = True,
              throughput_noise: float = 0.0):
    params = {"jobs": jobs, "entities": entities, "multi_gpu": multi_gpu, "throughput_noise": throughput_noise}
    data = fleetplan.generate("allocation", params, seed=seed).model_dump()
    if fifo:
        data["entities"][0]["policy"] = "fifo"
        for index, job in enumerate(data["jobs"]):
            job["arrival_time"] = float((index * 7) % jobs)
    return instance_from_data(data)


# Two draws of each of the four shapes (FIFO or not, multi-GPU or not) by default; the third
# draw of each runs with the slow set.
@pytest.mark.parametrize("seed", [0, 1, pytest.param(2, marks=pytest.mark.slow)])
@pytest.mark.parametrize("fifo", [False, True])
@pytest.mark.parametrize("multi_gpu", [False, True])
def test_lp_test_and_milp_test_give_the_same_allocation(seed, fifo, multi_gpu):
    instance = generated(48 if multi_gpu else 160, 3, seed, fifo, multi_gpu)
    lp = fleetplan.solve(instance, "hierarchical-water-filling", bottleneck_test="lp")
    milp = fleetplan.solve(instance, "hierarchical-water-filling", bottleneck_test="milp")
    check_plan(instance, lp)
    check_plan(instance, milp)
    # Water filling fixes every job's score (its level); X itself need not be unique.
    np.testing.assert_allclose(scores_of(instance, lp), scores_of(instance, milp), rtol=1e-6, atol=1e-8)
    assert lp.stats["iterations"] == milp.stats["iterations"]


@pytest.mark.parametrize("solver", ["water-filling", "hierarchical-water-filling"])
def test_aggregating_identical_jobs_is_exact(solver):
    instance = generated(96, 3, 4, fifo=solver == "hierarchical-water-filling")
    grouped = fleetplan.solve(instance, solver, aggregate=True)
    single = fleetplan.solve(instance, solver, aggregate=False)
    assert grouped.stats["classes"] < single.stats["classes"] == 96
    np.testing.assert_allclose(scores_of(instance, grouped), scores_of(instance, single), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("solver", ["water-filling", "hierarchical-water-filling"])
@pytest.mark.parametrize("seed", [0, 3])
def test_water_filling_is_pareto_efficient(solver, seed):
    instance = generated(40, 4, seed, fifo=seed == 3)
    result = fleetplan.solve(instance, solver)
    evaluation = check_plan(instance, result)
    assert evaluation.metrics["pareto_efficient"] == 1.0
    assert evaluation.metrics["bottlenecked_fraction"] == 1.0
    assert no_job_can_rise(instance, result.plan.matrix(instance)) < 1e-6


def test_levels_never_drop_and_first_level_is_the_max_min_optimum():
    instance = generated(64, 0, 5)
    classes, run = single_level_run(instance)
    previous = np.zeros(classes.num_classes)
    for levels, _ in run.history:
        assert (levels >= previous * (1 - 1e-9) - 1e-12).all()  # up to feasibility rounding
        previous = levels
    lp = fleetplan.solve(instance, "max-min-fairness")
    result = fleetplan.solve(instance, "water-filling")
    check_plan(instance, result)
    assert result.objective == pytest.approx(lp.objective, rel=1e-6)
    # Water filling never leaves a job below the max-min LP's level, and uses spare capacity.
    assert fleetplan.evaluate(instance, result.plan).metrics["total_throughput"] >= \
        lp.evaluation.metrics["total_throughput"] * (1 - 1e-6)


def test_judge_finds_jobs_that_can_rise():
    """Two jobs sharing two GPUs at half time each: both can rise, so neither is bottlenecked;
    with the GPUs fully used, both are."""
    instance = identical_gpus([{}, {}], gpus=2)
    assert not bottlenecked_jobs(instance, np.array([[0.5], [0.5]])).any()
    assert bottlenecked_jobs(instance, np.array([[1.0], [1.0]])).all()
    assert bottlenecked_jobs(instance, np.array([[1.0], [0.5]])).tolist() == [True, False]
    plan = AllocationPlan.from_matrix(instance, np.array([[0.5], [0.5]]), policy="hierarchical")
    evaluation = fleetplan.evaluate(instance, plan)
    assert evaluation.metrics["bottlenecked_fraction"] == 0.0
    assert evaluation.metrics["pareto_efficient"] == 0.0
    assert evaluation.objective == pytest.approx(0.5)


def test_unknown_bottleneck_test_is_an_instance_error():
    instance = identical_gpus([{}])
    with pytest.raises(InstanceError, match="bottleneck_test"):
        fleetplan.solve(instance, "hierarchical-water-filling", bottleneck_test="exhaustive")
