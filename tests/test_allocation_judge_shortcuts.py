"""The allocation judge's shortcuts give the numbers of the generic code they replace: the
percentiles of the service metrics (numpy's own, to the bit), a plan's empty pair rows, and the
SLO mask read once for the metrics and the table."""

import numpy as np
import pytest

import fleetplan
from fleetplan.instances.allocation import AllocationPlan
from fleetplan.instances.allocation.evaluate import low_percentiles, service_metrics, slo_met


def _bits(rows):
    return [[value.hex() if value == value else "nan" for value in row] for row in rows]


@pytest.mark.parametrize("seed", range(3))
def test_low_percentiles_are_numpys_to_the_bit(seed):
    rng = np.random.default_rng(seed)
    for n in [*range(1, 40), 2047, 2048, 4099]:
        rows = rng.standard_normal((3, n))
        variant = int(rng.integers(0, 5))
        if variant == 1:  # ties, and 0.0 beside -0.0: which one lands at a place is numpy's rule
            rows = np.round(rows, 1)
        elif variant == 2:
            rows = np.abs(rows) * 1e-9
        elif variant == 3:
            rows[0] = 0.0
            rows[1, ::2] = np.inf
        elif variant == 4:
            rows = rng.uniform(0, 1, (3, n)) ** 5
        with np.errstate(invalid="ignore"):  # inf - inf, numpy's warning
            want = np.percentile(rows, [10, 50], axis=1).T.tolist()
        assert _bits(low_percentiles(rows)) == _bits(want), (n, variant)


def test_a_row_with_nan_keeps_numpys_nan_rule():
    rows = np.array([[1.0, np.nan, 2.0], [3.0, 1.0, 2.0]])
    got = low_percentiles(rows)
    assert np.isnan(got[0]).all() and got[1] == np.percentile(rows[1], [10, 50]).tolist()


def test_service_metrics_take_a_given_slo_mask_as_their_own():
    instance = fleetplan.generate("allocation", {"jobs": 60}, seed=2)
    arrays = instance.arrays()
    assert np.isfinite(arrays.slo_seconds).any() and not np.isfinite(arrays.slo_seconds).all()
    throughput = arrays.isolated_throughput * np.linspace(0.5, 1.5, len(arrays.job_ids))
    shares = np.linspace(0.0, 1.0, len(throughput))
    computed = service_metrics(arrays, shares, throughput, throughput / arrays.fastest_throughput,
                               throughput / arrays.isolated_throughput)
    given = service_metrics(arrays, shares, throughput, throughput / arrays.fastest_throughput,
                            throughput / arrays.isolated_throughput, met=slo_met(arrays, throughput))
    assert computed == given and computed["slo_missed_jobs"] > 0


def test_a_plan_without_pairs_reads_as_empty_pair_rows_and_still_checks_its_types():
    instance = fleetplan.generate("allocation", {"jobs": 5}, seed=0)
    arrays = instance.arrays()
    plan = AllocationPlan.from_matrix(instance, np.full((5, len(arrays.worker_types)), 0.1))
    jobs, matrix = plan.pair_matrix(instance)
    assert jobs.shape == (0, 2) and jobs.dtype.kind == "i" and matrix.shape == (0, len(arrays.worker_types))
    other = plan.model_copy(update={"worker_types": ["a100", *arrays.worker_types[1:]]})
    with pytest.raises(fleetplan.InstanceError, match="worker types"):
        other.pair_matrix(instance)


def test_a_plan_with_its_types_in_another_order_is_read_in_the_instances():
    instance = fleetplan.generate("allocation", {"jobs": 4}, seed=1)
    arrays = instance.arrays()
    matrix = np.arange(4 * len(arrays.worker_types), dtype=float).reshape(4, -1) / 100
    turned = AllocationPlan(job_ids=list(arrays.job_ids), worker_types=list(arrays.worker_types)[::-1],
                            allocation=matrix[:, ::-1].tolist())
    assert np.array_equal(turned.matrix(instance), matrix)
    assert fleetplan.evaluate(instance, turned).metrics == \
        fleetplan.evaluate(instance, AllocationPlan.from_matrix(instance, matrix)).metrics
