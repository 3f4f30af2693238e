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


def _eager(plan: AllocationPlan) -> AllocationPlan:
    """The same plan with its rows made as before rows were lazy: validated from its fields."""
    return AllocationPlan.model_validate(plan.model_dump())


def test_a_plan_from_a_matrix_makes_its_rows_only_when_read():
    instance = fleetplan.generate("allocation", {"jobs": 60, "throughput_noise": 0.1}, seed=2)
    result = fleetplan.solve(instance, "max-min-fairness")
    assert "allocation" not in result.plan.__dict__  # judged without its rows
    rows = result.plan.allocation
    assert "allocation" in result.plan.__dict__ and result.plan.allocation is rows
    assert all(isinstance(row, list) and all(isinstance(value, float) for value in row) for row in rows)
    assert np.array_equal(np.array(rows), fleetplan.solve(instance, "max-min-fairness").plan.matrix(instance))


def test_every_way_of_reading_a_lazy_plan_sees_its_rows():
    import copy
    import json
    import pickle

    instance = fleetplan.generate("allocation", {"jobs": 40, "throughput_noise": 0.1}, seed=5)
    matrix = np.random.default_rng(0).uniform(0.0, 0.3, (40, 3))
    matrix[3, 1] = -1e-13  # a solver's zero, cleaned in the rows

    def lazy() -> AllocationPlan:
        plan = AllocationPlan.from_matrix(instance, matrix, solver="x")
        assert "allocation" not in plan.__dict__
        return plan

    reference = _eager(lazy())
    assert reference.allocation[3][1] == 0.0 and reference.allocation == np.where(
        np.abs(matrix) < 1e-12, 0.0, matrix).tolist()
    assert lazy().model_dump() == reference.model_dump()
    assert lazy().model_dump(exclude_unset=True) == reference.model_dump(exclude_unset=True)
    assert json.loads(lazy().model_dump_json()) == json.loads(reference.model_dump_json())
    assert lazy() == reference and reference == lazy()
    assert pickle.loads(pickle.dumps(lazy())) == reference
    assert copy.deepcopy(lazy()) == reference and copy.copy(lazy()) == reference
    assert lazy().model_copy() == reference
    assert dict(lazy())["allocation"] == reference.allocation
    assert repr(lazy()) == repr(reference)
    assert fleetplan.evaluate(instance, lazy()).metrics == fleetplan.evaluate(instance, reference).metrics
    plan = lazy()
    plan.drop_solver_arrays()  # the judge's matrix gone, the rows still to make
    assert np.array_equal(plan.matrix(instance), np.array(reference.allocation))
    assert plan.allocation == reference.allocation
    changed = lazy()
    changed.drop_solver_arrays()
    changed.allocation = [[0.0, 0.0, 0.0]] * 40  # rows set before they were made: those are the plan
    assert not changed.matrix(instance).any()
    assert changed.model_dump()["allocation"] == [[0.0, 0.0, 0.0]] * 40
