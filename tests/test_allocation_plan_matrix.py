"""The solver's matrix a plan keeps for its first judging: the same judgment as reading the
plan's own fields, and never seen again after it."""

import numpy as np

import fleetplan
from fleetplan.instances.allocation import AllocationPlan


def test_the_solver_matrix_judges_as_the_fields_and_is_dropped():
    instance = fleetplan.generate("allocation", {"jobs": 200, "throughput_noise": 0.1}, seed=4)
    result = fleetplan.solve(instance, "max-min-fairness")
    assert result.plan._solver_matrix is None  # the caller's plan holds only its fields
    again = fleetplan.evaluate(instance, result.plan)
    assert again.metrics == result.evaluation.metrics

    matrix = np.array(result.plan.allocation)
    plan = AllocationPlan.from_matrix(instance, matrix)
    first = fleetplan.evaluate(instance, plan)  # read from the kept matrix
    assert first.metrics == again.metrics
    plan.allocation[0] = [0.0] * len(plan.worker_types)  # changed after its first judging
    changed = fleetplan.evaluate(instance, plan)
    assert np.array_equal(plan.matrix(instance)[0], np.zeros(len(plan.worker_types)))
    assert changed.metrics != first.metrics
