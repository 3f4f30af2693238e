"""The judge of marginal values' re-solves: the numbers only (``metrics_only``), equal to the
full judgement's, and what binds still read from the base's per-job table when it is needed."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan
from fleetplan.instances import instance_from_data
from fleetplan.instances.allocation import AllocationParams, AllocationPlan, generated_instance_data
from fleetplan.instances.allocation.evaluate import metrics_only


def _random_plan(instance, rng) -> AllocationPlan:
    """A plan of random time fractions (some breaking the job-time and capacity rows, some on
    types a job cannot run on, some below 0): every violation the judge counts can occur."""
    arrays = instance.arrays()
    matrix = rng.uniform(0.0, 0.6, arrays.throughput.shape) * (rng.random(arrays.throughput.shape) < 0.7)
    matrix[rng.random(len(matrix)) < 0.05, 0] = -0.01
    return AllocationPlan.from_matrix(instance, matrix, policy=str(rng.choice(
        ["max_min_fairness", "max_throughput", "min_cost", "finish_time_fairness", "min_makespan"])))


@pytest.mark.parametrize("seed", range(6))
def test_numbers_only_equal_the_full_judgement(seed):
    rng = np.random.default_rng(seed)
    params = AllocationParams(jobs=int(rng.integers(5, 80)), throughput_noise=0.1, multi_gpu=bool(seed % 2),
                              space_sharing=seed % 3 == 0, slo_fraction=0.0 if seed == 1 else 0.3)
    instance = instance_from_data(generated_instance_data(params, seed), "instance")
    for plan in (fleetplan.solve(instance, "max-min-fairness").plan, _random_plan(instance, rng)):
        full = fleetplan.evaluate(instance, plan)
        with metrics_only():
            quick = fleetplan.evaluate(instance, plan)
        assert quick.breakdown == {} and full.breakdown["jobs"]["id"] == instance.arrays().job_ids
        assert (quick.objective, quick.sense, quick.terms) == (full.objective, full.sense, full.terms)
        assert quick.metrics == full.metrics  # every metric, to the bit
        assert quick.violations == full.violations
    assert {"non_negative", "job_time"} <= {violation.constraint for violation in full.violations}  # the random plan's
    assert fleetplan.evaluate(instance, plan).breakdown  # the full judgement is back outside the block


def test_marginal_values_name_jobs_at_full_time_from_the_base_plan():
    # Every job has all its time on its fastest type: no GPU moves anything, and what binds is
    # read from the base's per-job table, which its judgement (numbers only) did not build.
    instance = instance_from_data({
        "kind": "allocation", "worker_types": [{"name": "v100", "count": 10}, {"name": "k80", "count": 10}],
        "jobs": [{"id": "a", "throughput": {"v100": 4.0, "k80": 1.0}},
                 {"id": "b", "throughput": {"v100": 2.0, "k80": 1.5}}]}, "instance")
    values = fleetplan.marginal_values(instance, "max-throughput", workers=1)
    assert all(value.more["objective"] == 0.0 for value in values.values)
    assert values.binds == ["2 job(s) already run 100% of the time (a, b): more GPUs cannot speed them"]


def test_row_sums_and_maxima_are_numpys_to_the_bit():
    from fleetplan.instances.allocation import row_max, row_sums

    rng = np.random.default_rng(0)
    for rows in (0, 1, 2, 7, 9, 100, 4097):
        for columns in range(0, 10):
            values = rng.uniform(0, 1, (rows, columns)) * 10.0 ** rng.uniform(-6, 6, (rows, columns))
            if rows and columns:
                values[0, 0], values[-1, -1] = -0.0, np.nan
            assert np.array_equal(row_sums(values), values.sum(axis=1), equal_nan=True), (rows, columns)
            if columns:
                assert np.array_equal(row_max(values), values.max(axis=1), equal_nan=True), (rows, columns)
