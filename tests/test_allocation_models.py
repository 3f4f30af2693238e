"""The Pyomo reference model and the sparse highspy model are the same LP."""

import numpy as np
import pytest

import fleetplan
from fleetplan.models.allocation import max_min_fairness_lp, max_min_fairness_pyomo
from fleetplan.solvers import highs


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("aware", [True, False])
def test_pyomo_and_highspy_reach_the_same_optimum(seed, aware):
    instance = fleetplan.generate("allocation", {"jobs": 40, "multi_gpu": True}, seed=seed)
    arrays = instance.arrays()
    lp, _ = max_min_fairness_lp(arrays, heterogeneity_aware=aware)
    direct = highs.solve_lp(lp)
    model, _ = max_min_fairness_pyomo(arrays, heterogeneity_aware=aware)
    through_pyomo = highs.solve_pyomo(model)
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
    lp, cells = max_min_fairness_lp(arrays)
    runnable = (arrays.throughput > 0) & (arrays.num_workers[None, :] >= arrays.scale_factor[:, None])
    assert lp.num_cols == runnable.sum() + 1
    assert np.all(arrays.scale_factor[cells.job] <= arrays.num_workers[cells.worker_type])


def test_time_limit_and_unknown_option_are_checked(gavel_example):
    with pytest.raises(fleetplan.InstanceError, match="options.colour"):
        fleetplan.solve(gavel_example, "max-min-fairness", colour="red")
    with pytest.raises(fleetplan.InstanceError, match="time_limit"):
        fleetplan.solve(gavel_example, "max-min-fairness", time_limit=-1)
    with pytest.raises(fleetplan.InstanceError, match="unknown solver"):
        fleetplan.solve(gavel_example, "simulated-annealing")
