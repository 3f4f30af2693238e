"""The Pyomo reference model and the sparse highspy model are the same LP (the builders the
allocation solvers use, :mod:`fleetplan.models.allocation.policies`)."""

import numpy as np
import pytest

import fleetplan
from fleetplan.models.allocation.policies import (
    PolicySpec,
    build_space,
    model_throughput,
    policy_lp,
    policy_pyomo,
)
from fleetplan.solvers import highs


def max_min_spec(arrays, aware):
    """Gavel §4.1's max-min fairness rows: scale_factor / (weight * throughput(m, X_equal))."""
    throughput = model_throughput(arrays, aware)
    equal_share = throughput @ (arrays.num_workers / arrays.num_workers.sum())
    return PolicySpec("max_min", arrays.scale_factor / (arrays.weight * equal_share))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("aware", [True, False])
def test_pyomo_and_highspy_reach_the_same_optimum(seed, aware):
    instance = fleetplan.generate("allocation", {"jobs": 40, "multi_gpu": True}, seed=seed)
    arrays = instance.arrays()
    space = build_space(arrays, heterogeneity_aware=aware)
    spec = max_min_spec(arrays, aware)
    direct = highs.solve_lp(policy_lp(space, spec))
    through_pyomo = highs.solve_pyomo(policy_pyomo(space, spec))
    assert direct.status == through_pyomo.status == "optimal"
    assert direct.objective == pytest.approx(through_pyomo.objective, rel=1e-7)


@pytest.mark.parametrize("backend", ["highspy", "pyomo"])
@pytest.mark.parametrize("algorithm", ["simplex", "ipm"])
def test_every_backend_and_algorithm_gives_the_same_plan_value(backend, algorithm, gavel_example):
    result = fleetplan.solve(gavel_example, "max-min-fairness", backend=backend, lp_algorithm=algorithm)
    assert result.status == "optimal"
    assert result.objective == pytest.approx(8 / 11, rel=1e-6)


def test_refinement_keeps_the_level_and_uses_spare_capacity():
    instance = fleetplan.generate("allocation", {"jobs": 60}, seed=4)
    plain = fleetplan.solve(instance, "max-min-fairness", refine=False)
    refined = fleetplan.solve(instance, "max-min-fairness", refine=True)
    assert refined.objective == pytest.approx(plain.objective, rel=1e-6)
    plain_total = plain.evaluation.metrics["mean_normalized_throughput"]
    assert refined.evaluation.metrics["mean_normalized_throughput"] >= plain_total - 1e-9


def test_lp_shape_counts_only_runnable_cells():
    instance = fleetplan.generate("allocation", {"jobs": 10, "workers_per_type": 2}, seed=0)
    arrays = instance.arrays()
    space = build_space(arrays)
    lp = policy_lp(space, max_min_spec(arrays, True))
    runnable = (arrays.throughput > 0) & (arrays.num_workers[None, :] >= arrays.scale_factor[:, None])
    assert space.n_cols == runnable.sum() and lp.num_cols == space.n_cols + 1
    assert np.all(arrays.scale_factor[space.single_job] <= arrays.num_workers[space.single_type])


def test_time_limit_and_unknown_option_are_checked(gavel_example):
    with pytest.raises(fleetplan.InstanceError, match="options.colour"):
        fleetplan.solve(gavel_example, "max-min-fairness", colour="red")
    with pytest.raises(fleetplan.InstanceError, match="time_limit"):
        fleetplan.solve(gavel_example, "max-min-fairness", time_limit=-1)
    with pytest.raises(fleetplan.InstanceError, match="unknown solver"):
        fleetplan.solve(gavel_example, "simulated-annealing")
