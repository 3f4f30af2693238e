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
    assert result.status == "optimal" and result.evaluation.violations == []
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
