"""The heterogeneity-agnostic baselines (Gavel §4.1, §7.2-7.3): fleetplan's default sees
throughput 1 where a job can run; ``baseline="gavel"`` sees 1 on every type it fits, zeros
included, as Gavel's own baselines do."""

import numpy as np
import pytest

import fleetplan
from fleetplan.instances import instance_from_data
from fleetplan.solvers.allocation.policies import gavel_agnostic_arrays

AGNOSTIC = ["max-min-fairness-agnostic", "finish-time-fairness-agnostic", "min-makespan-agnostic",
            "max-throughput-agnostic", "fifo-agnostic"]


def _with_zeros():
    # Job a cannot run on the K80 (throughput 0); job c needs 2 workers and fits only the K80s.
    return instance_from_data({
        "kind": "allocation",
        "worker_types": [{"name": "v100", "count": 1}, {"name": "k80", "count": 2}],
        "jobs": [
            {"id": "a", "throughput": {"v100": 4.0, "k80": 0.0}, "steps_left": 100.0},
            {"id": "b", "throughput": {"v100": 3.0, "k80": 1.0}, "steps_left": 100.0},
            {"id": "c", "throughput": {"v100": 2.0, "k80": 1.0}, "scale_factor": 2, "steps_left": 100.0},
        ]})


def test_gavel_arrays_see_one_on_every_type_a_job_fits_zeros_included():
    arrays = gavel_agnostic_arrays(_with_zeros().arrays())
    assert arrays.throughput.tolist() == [[1.0, 1.0], [1.0, 1.0], [0.0, 1.0]]  # c does not fit one V100


@pytest.mark.parametrize("solver", AGNOSTIC)
def test_gavel_baseline_drops_time_where_a_job_cannot_run(solver):
    instance = _with_zeros()
    result = fleetplan.solve(instance, solver, baseline="gavel")
    assert result.status == "feasible" and result.evaluation.violations == []
    assert np.array(result.plan.allocation)[0, 1] == 0.0  # a's K80 time, if any, was idle


@pytest.mark.parametrize("solver", AGNOSTIC)
def test_without_zeros_both_baselines_are_the_same_model(solver):
    instance = fleetplan.generate("allocation", {"jobs": 24, "multi_gpu": True}, seed=3)
    assert (instance.arrays().throughput > 0).all()
    runnable = fleetplan.solve(instance, solver)
    gavel = fleetplan.solve(instance, solver, baseline="gavel")
    assert gavel.evaluation.objective == pytest.approx(runnable.evaluation.objective, rel=1e-9)


def test_gavel_baseline_wastes_what_the_runnable_baseline_uses():
    # Two jobs that run only on the V100, one V100 and one K80. The runnable baseline splits the
    # V100 (each job 0.5 of it: normalized throughput 0.5 / 0.5 = 1). Gavel's all-ones model sees
    # two interchangeable types: it gives each job time 1 in total, and whatever lands on the K80
    # is lost, so its judged minimum is at most 1 and its V100 may sit partly idle.
    instance = instance_from_data({
        "kind": "allocation", "worker_types": [{"name": "v100", "count": 1}, {"name": "k80", "count": 1}],
        "jobs": [{"id": "a", "throughput": {"v100": 1.0}}, {"id": "b", "throughput": {"v100": 1.0}}]})
    runnable = fleetplan.solve(instance, "max-min-fairness-agnostic")
    gavel = fleetplan.solve(instance, "max-min-fairness-agnostic", baseline="gavel")
    assert runnable.objective == pytest.approx(1.0)
    assert gavel.objective <= runnable.objective + 1e-9
    assert gavel.evaluation.violations == []


def test_space_sharing_has_no_gavel_baseline():
    instance = fleetplan.generate("allocation", {"jobs": 8, "space_sharing": True, "multi_gpu": False}, seed=0)
    with pytest.raises(Exception, match="options.baseline"):
        fleetplan.solve(instance, "max-min-fairness-agnostic", baseline="gavel", space_sharing=True)


# --- ties -------------------------------------------------------------------

EVERY_AGNOSTIC = sorted(spec.name for spec in fleetplan.list_solvers("allocation") if spec.name.endswith("-agnostic"))
GAVEL_TYPES = {"v100": 3.0, "p100": 2.0, "k80": 1.0}


def _identical(n, counts=(8, 8, 8), slo_hours=None):
    extra = {} if slo_hours is None else {"slo_hours": slo_hours}
    return instance_from_data({
        "kind": "allocation",
        "worker_types": [{"name": t, "count": c, "cost_per_hour": 1.0} for t, c in zip(GAVEL_TYPES, counts, strict=True)],
        "jobs": [{"id": f"j{i}", "throughput": GAVEL_TYPES, "steps_left": 10_000.0, "time_elapsed": 60.0, **extra}
                 for i in range(n)]})


def test_twelve_identical_jobs_on_8_8_8_get_every_type_in_proportion():
    # The case: a simplex vertex gave each job (0, 1/3, 2/3) and left every V100 idle.
    result = fleetplan.solve(_identical(12), "max-min-fairness-agnostic")
    matrix = np.array(result.plan.allocation)
    assert np.allclose(matrix, 1 / 3, atol=1e-9)
    assert result.evaluation.violations == []
    vertex = np.array(fleetplan.solve(_identical(12), "max-min-fairness-agnostic", ties="vertex").plan.allocation)
    assert not np.allclose(vertex, 1 / 3)  # the old behaviour, still reachable, is a vertex


def test_proportion_follows_capacity_not_type_count():
    matrix = np.array(fleetplan.solve(_identical(6, counts=(4, 8, 12)), "max-min-fairness-agnostic").plan.allocation)
    assert np.allclose(matrix, [[4 / 24, 8 / 24, 12 / 24]] * 6, atol=1e-9)


@pytest.mark.parametrize("solver", EVERY_AGNOSTIC)
def test_a_single_jobs_agnostic_plan_spreads_over_every_type(solver):
    # (No SLO: a floor met only on the V100 would pin min-cost-slo's time there, rightly.)
    result = fleetplan.solve(_identical(1), solver)
    assert result.evaluation.violations == []
    matrix = np.array(result.plan.allocation)
    if solver.startswith("min-cost"):
        # Equal costs: spreading keeps the cost, so the job's time is spread too.
        assert matrix[0].sum() > 0
    assert np.allclose(matrix[0], matrix[0].sum() / 3, atol=1e-9), matrix


@pytest.mark.parametrize("solver", EVERY_AGNOSTIC)
def test_spreading_keeps_the_agnostic_optimum(solver):
    # Jobs a run only on the V100: the proportional split of the others does not fit, so the
    # least-squares QP spreads them; each job's total time (what the agnostic model scores) stays.
    jobs = [{"id": f"a{i}", "throughput": {"v100": 3.0}, "steps_left": 1000.0, "slo_hours": 5.0} for i in range(6)]
    jobs += [{"id": f"b{i}", "throughput": GAVEL_TYPES, "steps_left": 3000.0, "slo_hours": 5.0} for i in range(12)]
    instance = instance_from_data({"kind": "allocation", "jobs": jobs, "worker_types": [
        {"name": t, "count": 8, "cost_per_hour": c} for t, c in zip(GAVEL_TYPES, (3.0, 1.5, 0.9), strict=True)]})
    spread = fleetplan.solve(instance, solver)
    vertex = fleetplan.solve(instance, solver, ties="vertex")
    assert spread.evaluation.violations == []
    assert np.allclose(np.array(spread.plan.allocation).sum(axis=1), np.array(vertex.plan.allocation).sum(axis=1),
                       atol=1e-6)
    rows = np.array(spread.plan.allocation)[6:]
    assert np.allclose(rows, rows[0], atol=1e-6)  # identical jobs, identical rows
    if solver.startswith("min-cost"):
        cost = np.array([3.0, 1.5, 0.9])
        assert (np.array(spread.plan.allocation) @ cost).sum() <= (np.array(vertex.plan.allocation) @ cost).sum() + 1e-6


@pytest.mark.parametrize("solver", ["max-min-fairness-agnostic", "max-throughput-agnostic"])
def test_agnostic_status_says_what_it_certifies(solver):
    result = fleetplan.solve(_identical(3), solver)
    assert result.status == "feasible"
    assert "agnostic LP was solved to optimality" in result.message and "judge" in result.message
    assert fleetplan.solve(_identical(3), solver.removesuffix("-agnostic")).status == "optimal"
