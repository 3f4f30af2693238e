"""The generator's adversarial mixes (priorities, types a job cannot use, one huge job): what
each parameter draws, instances without them unchanged, and every allocation policy's plan on
each mix judged feasible."""

from __future__ import annotations

import pytest

import fleetplan

PLAIN = {"jobs": 48, "throughput_noise": 0.1, "multi_gpu": False, "slo_fraction": 0.0}


def test_each_parameter_draws_what_it_says():
    plain = fleetplan.generate("allocation", PLAIN, seed=3)
    weighted = fleetplan.generate("allocation", {**PLAIN, "priority_share": 0.25, "priority_weight": 8}, seed=3)
    assert sorted({job.weight for job in weighted.jobs}) == [1.0, 8.0]
    assert sum(job.weight == 8 for job in weighted.jobs) == 12
    unusable = fleetplan.generate("allocation", {**PLAIN, "unusable_share": 0.5}, seed=3)
    zeros = [sum(value == 0 for value in job.throughput.values()) for job in unusable.jobs]
    assert sum(zeros) > 0 and max(zeros) < len(unusable.worker_types)  # every job keeps a type
    huge = fleetplan.generate("allocation", {**PLAIN, "huge_job": True}, seed=3)
    assert huge.jobs[0].scale_factor == 8 and all(job.scale_factor == 1 for job in huge.jobs[1:])  # 12 workers a type
    # what the mixes do not touch is drawn as before
    for mix in (weighted, unusable, huge):
        assert [job.id for job in mix.jobs] == [job.id for job in plain.jobs]
    assert [job.throughput for job in weighted.jobs] == [job.throughput for job in plain.jobs]
    assert fleetplan.generate("allocation", PLAIN, seed=3) == plain


@pytest.mark.parametrize("mix", [{"priority_share": 0.2, "priority_weight": 8}, {"unusable_share": 0.4},
                                 {"huge_job": True}, {"multi_gpu": True}, {"slo_fraction": 0.5}])
def test_every_policy_plans_every_mix(mix):
    instance = fleetplan.generate("allocation", {**PLAIN, "jobs": 24, **mix}, seed=1)
    for spec in fleetplan.list_solvers("allocation"):
        result = fleetplan.solve(instance, spec.name, time_limit=30)
        assert result.plan is not None, (spec.name, result.message)
        assert result.evaluation is not None and not result.evaluation.violations, (spec.name, mix)


def test_a_level_set_by_one_jobs_ceiling_is_refined_without_the_full_lp():
    # Types a job cannot use: the max-min level is one job's best score, the refinement decides
    # every other allocation, and its first reduced LP (16 jobs) prices the capacity for itself
    # alone: its certificate rejected 1,862 jobs and the solve fell back to the full LP (17x).
    instance = fleetplan.generate("allocation", {**PLAIN, "jobs": 2048, "unusable_share": 0.3}, seed=0)
    result = fleetplan.solve(instance, "max-min-fairness")
    assert not any("falling back" in line for line in result.log), result.log
    assert any("refinement: certified optimal" in line for line in result.log)
    full = fleetplan.solve(instance, "max-min-fairness", decomposition="none")
    assert result.evaluation.objective == pytest.approx(full.evaluation.objective, rel=1e-9)
    assert not result.evaluation.violations
