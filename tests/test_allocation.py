"""The allocation kind end to end: Gavel §4.1 example, the judge, the generator, bad input."""

import json
import math

import numpy as np
import pytest
from conftest import gavel_example_data
from hypothesis import given, settings
from hypothesis import strategies as st

import fleetplan
from fleetplan.instances import InstanceError, instance_from_data
from fleetplan.instances.allocation import AllocationPlan
from fleetplan.instances.allocation.evaluate import evaluate

ALLOCATION_SOLVERS = [spec.name for spec in fleetplan.list_solvers("allocation")]


def test_gavel_section_4_1_example(gavel_example):
    result = fleetplan.solve(gavel_example, "max-min-fairness")
    assert result.status == "optimal"
    matrix = np.array(result.plan.allocation)
    # The paper prints the allocation rounded to two digits.
    expected = np.array([[0.45, 0.0], [0.45, 0.09], [0.09, 0.91]])
    assert np.allclose(matrix, expected, atol=0.01)
    # The exact optimum: every job reaches 8/11 of its equal-share throughput.
    assert result.objective == pytest.approx(8 / 11, rel=1e-6)
    # "about 10% higher throughput than the isolated 1/n allocation"
    speedup = result.evaluation.metrics["mean_speedup_over_isolated"]
    assert 1.05 < speedup < 1.15


def test_hand_solved_homogeneous_cluster():
    # One GPU, weights 1 and 3. Gavel maximizes min_m x_m / w_m, so a heavier job needs a
    # larger share to score the same: x_a / 1 = x_b / 3 and x_a + x_b = 1 give 1/4 and 3/4.
    data = {
        "kind": "allocation",
        "worker_types": [{"name": "gpu", "count": 1}],
        "jobs": [{"id": "a", "throughput": {"gpu": 2.0}, "weight": 1.0},
                 {"id": "b", "throughput": {"gpu": 2.0}, "weight": 3.0}],
    }
    instance = instance_from_data(data)
    result = fleetplan.solve(instance, "max-min-fairness")
    assert np.allclose(np.array(result.plan.allocation)[:, 0], [0.25, 0.75], atol=1e-6)
    assert result.objective == pytest.approx(0.25, rel=1e-6)


@pytest.mark.parametrize("solver", ALLOCATION_SOLVERS)
@pytest.mark.parametrize("multi_gpu", [False, True])
def test_every_solver_plan_passes_the_judge(solver, multi_gpu):
    instance = fleetplan.generate("allocation", {"jobs": 48, "multi_gpu": multi_gpu}, seed=3)
    result = fleetplan.solve(instance, solver)
    # An agnostic plan is optimal for its time-share model only: it reports feasible.
    assert result.status == ("feasible" if solver.endswith("-agnostic") else "optimal")
    evaluation = fleetplan.evaluate(instance, result.plan)
    assert evaluation.violations == []
    assert result.objective == evaluation.objective
    if fleetplan.get_solver("allocation", solver).exact:
        assert result.model_objective == pytest.approx(evaluation.objective, rel=1e-6)


def test_aware_beats_agnostic_on_heterogeneous_clusters():
    instance = fleetplan.generate("allocation", {"jobs": 64}, seed=11)
    aware = fleetplan.solve(instance, "max-min-fairness")
    agnostic = fleetplan.solve(instance, "max-min-fairness-agnostic")
    assert aware.objective > agnostic.objective


def test_judge_reports_each_violation(gavel_example):
    plan = AllocationPlan(job_ids=["job0", "job1", "job2"], worker_types=["v100", "k80"],
                          allocation=[[0.9, 0.3], [0.5, 0.0], [-0.1, 0.2]])
    evaluation = evaluate(gavel_example, plan)
    kinds = sorted(v.constraint for v in evaluation.violations)
    assert kinds == ["job_time", "non_negative", "workers"]
    workers = next(v for v in evaluation.violations if v.constraint == "workers")
    assert workers.where == "v100" and workers.amount == pytest.approx(0.3)


def test_judge_accepts_rows_in_any_order(gavel_example):
    result = fleetplan.solve(gavel_example, "max-min-fairness")
    plan = result.plan
    shuffled = AllocationPlan(job_ids=plan.job_ids[::-1], worker_types=plan.worker_types[::-1],
                              allocation=[row[::-1] for row in plan.allocation[::-1]])
    assert evaluate(gavel_example, shuffled).objective == pytest.approx(result.objective)


def test_judge_rejects_a_plan_for_other_jobs(gavel_example):
    plan = AllocationPlan(job_ids=["x", "job1", "job2"], worker_types=["v100", "k80"],
                          allocation=[[0, 0]] * 3)
    with pytest.raises(InstanceError, match="job_ids"):
        evaluate(gavel_example, plan)


def _broken(mutate):
    data = gavel_example_data()
    mutate(data)
    return data


@pytest.mark.parametrize("mutate,path,reason", [
    (lambda d: d["jobs"][1].pop("throughput"), "jobs[1].throughput", "required field is missing"),
    (lambda d: d["worker_types"][0].update(count=-1), "worker_types[0].count", "greater than or equal to 0"),
    (lambda d: d["jobs"][2]["throughput"].update(a100=3.0), "jobs[2].throughput.a100", "unknown worker type"),
    (lambda d: d.update(jobs=[]), "jobs", "at least one job"),
    (lambda d: d["jobs"][0]["throughput"].update(v100=math.nan), "jobs[0].throughput.v100", "finite"),
    (lambda d: d["jobs"][2]["throughput"].update(k80=-1.0), "jobs[2].throughput.k80", "greater than or equal to 0"),
    (lambda d: d["jobs"][0].update(scale_factor=0), "jobs[0].scale_factor", "greater than or equal to 1"),
    (lambda d: d["jobs"][1].update(id="job0"), "jobs[1].id", "duplicate"),
    (lambda d: d["jobs"][0].update(weight=0), "jobs[0].weight", "greater than 0"),
    (lambda d: d["jobs"][0].update(colour="red"), "jobs[0].colour", "unknown field"),
    (lambda d: d["jobs"][0].update(scale_factor=2), "jobs[0]", "can run on no worker type"),
    (lambda d: d.update(kind="teleport"), "kind", "unknown problem kind"),
])
def test_bad_instances_name_the_path_and_reason(mutate, path, reason):
    with pytest.raises(InstanceError) as caught:
        instance_from_data(_broken(mutate))
    assert caught.value.path == path
    assert reason in caught.value.reason
    assert "\n" not in str(caught.value)


def test_generator_is_deterministic_and_valid():
    first = fleetplan.generate("allocation", {"jobs": 100}, seed=5)
    second = fleetplan.generate("allocation", {"jobs": 100}, seed=5)
    other = fleetplan.generate("allocation", {"jobs": 100}, seed=6)
    assert first.model_dump() == second.model_dump()
    assert first.model_dump() != other.model_dump()
    assert [t.count for t in first.worker_types] == [25, 25, 25]


def test_generator_scale_factor_mix_follows_gavel_7_1():
    instance = fleetplan.generate("allocation", {"jobs": 4000}, seed=0)
    scale = np.array([job.scale_factor for job in instance.jobs])
    assert abs((scale == 1).mean() - 0.70) < 0.03
    assert abs(np.isin(scale, [2, 4]).mean() - 0.25) < 0.03
    assert abs((scale == 8).mean() - 0.05) < 0.015


def test_generator_rejects_bad_parameters():
    with pytest.raises(InstanceError, match="jobs"):
        fleetplan.generate("allocation", {"jobs": 0})
    with pytest.raises(InstanceError, match="unknown field"):
        fleetplan.generate("allocation", {"gpus": 3})


@settings(max_examples=25, deadline=None)
@given(jobs=st.integers(1, 40), multi_gpu=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_generated_instances_round_trip_and_solve(jobs, multi_gpu, seed):
    instance = fleetplan.generate("allocation", {"jobs": jobs, "multi_gpu": multi_gpu}, seed=seed)
    reloaded = instance_from_data(json.loads(instance.model_dump_json()))
    assert reloaded.model_dump() == instance.model_dump()
    result = fleetplan.solve(reloaded, "max-min-fairness")
    assert result.status == "optimal" and result.evaluation.violations == []


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.floats(allow_nan=True) | st.text(max_size=5),
                    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
                    max_leaves=10))
def test_arbitrary_json_never_crashes_the_loader(data):
    try:
        instance_from_data(data)
    except InstanceError as error:
        assert "\n" not in str(error)
