"""The Python API is as strict as the files: a dict given to ``fleetplan.solve``, ``evaluate``
or ``save`` meets the same checks as the file with the same content (64-bit integers, numbers
up to 1e30 in magnitude, finite), and anything that is not an instance gets a ``TypeError``
naming what is accepted instead of an ``AttributeError`` from deep inside."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan.instances.base import MAX_MAGNITUDE

GAVEL = json.loads((EXAMPLES / "allocation-gavel-4.1.json").read_text())
RESERVATION = json.loads((EXAMPLES / "reservation-small.json").read_text())
PLACEMENT = json.loads((EXAMPLES / "placement-small.json").read_text())


def _set(data, path, value):
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


# (instance data, JSON path, value a file may not hold, the path the error names)
OUT_OF_RANGE = [
    (GAVEL, ("worker_types", 0, "count"), 2**70, "worker_types[0].count"),
    (GAVEL, ("jobs", 0, "throughput", "v100"), 1e308, "jobs[0].throughput.v100"),
    (GAVEL, ("jobs", 0, "weight"), 1e308, "jobs[0].weight"),
    (GAVEL, ("jobs", 1, "steps_left"), -(2**64), "jobs[1].steps_left"),
    (RESERVATION, ("reservations", 0, "capacity_rru"), 2**63, "reservations[0].capacity_rru"),
    (RESERVATION, ("weights", "moves"), -1e31, "weights.moves"),
]


@pytest.mark.parametrize(("data", "path", "value", "named"), OUT_OF_RANGE,
                         ids=[case[3] for case in OUT_OF_RANGE])
def test_a_dict_is_refused_where_the_file_is(tmp_path, data, path, value, named):
    bad = _set(data, path, value)
    file = tmp_path / "bad.json"
    file.write_text(json.dumps(bad))
    with pytest.raises(fleetplan.InstanceError) as from_file:
        fleetplan.load_instance(file)
    for call in (lambda: fleetplan.solve(bad), lambda: fleetplan.instances.evaluate_current(bad),
                 lambda: fleetplan.save(bad, tmp_path / "out.json")):
        with pytest.raises(fleetplan.InstanceError) as from_dict:
            call()
        assert from_dict.value.path == from_file.value.path == named
        assert "out of range" in str(from_dict.value)
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_are_refused_wherever_they_sit(value):
    # the instance's name holds no number; `settings`-like free fields are checked as well
    for path in (("jobs", 0, "throughput", "v100"), ("worker_types", 0, "cost_per_hour")):
        with pytest.raises(fleetplan.InstanceError, match="finite"):
            fleetplan.solve(_set(GAVEL, path, value))


def test_a_plan_dict_meets_the_plan_files_bounds():
    plan = fleetplan.solve(GAVEL).plan.model_dump(mode="json")
    plan["allocation"][0][0] = 1e300
    with pytest.raises(fleetplan.InstanceError, match="out of range") as error:
        fleetplan.evaluate(GAVEL, plan)
    assert error.value.path == "allocation[0][0]"


def test_an_array_column_built_in_python_is_checked_too():
    data = copy.deepcopy(PLACEMENT)
    data["tables"]["size_bytes"] = np.asarray(data["tables"]["size_bytes"], dtype=float)
    data["tables"]["size_bytes"][2] = MAX_MAGNITUDE * 10
    with pytest.raises(fleetplan.InstanceError, match="out of range") as error:
        fleetplan.solve(data, "greedy")
    assert error.value.path == "tables.size_bytes[2]"


def test_dicts_within_the_bounds_still_solve():
    result = fleetplan.solve(_set(GAVEL, ("worker_types", 0, "count"), 2**40), "max-min-fairness")
    assert result.success
    assert fleetplan.evaluate(GAVEL, fleetplan.solve(GAVEL).plan.model_dump(mode="json")).feasible


# --- what is not an instance or a plan: a TypeError naming what is accepted -----------------

NOT_AN_INSTANCE = ["allocation-gavel-4.1.json", EXAMPLES / "allocation-gavel-4.1.json", None, [], 42]


@pytest.mark.parametrize("given", NOT_AN_INSTANCE, ids=["str", "Path", "None", "list", "int"])
def test_what_is_not_an_instance_gets_a_type_error_naming_what_is_accepted(given):
    plan = fleetplan.solve(GAVEL).plan
    calls = {"solve": lambda: fleetplan.solve(given), "evaluate": lambda: fleetplan.evaluate(given, plan),
             "to_frame": lambda: fleetplan.to_frame(given, plan),
             "evaluate_current": lambda: fleetplan.instances.evaluate_current(given)}
    for name, call in calls.items():
        with pytest.raises(TypeError) as error:
            call()
        assert isinstance(error.value, fleetplan.InstanceError), name  # input errors stay ValueErrors
        message = str(error.value)
        assert "expected an instance" in message and "load_instance or generate" in message, name
        assert f"got {'None' if given is None else type(given).__name__}" in message, name
        if isinstance(given, (str, type(EXAMPLES))):
            assert "fleetplan.load_instance(" in message, name


@pytest.mark.parametrize("given", ["plan.json", None, 3.5], ids=["str", "None", "float"])
def test_what_is_not_a_plan_gets_a_type_error_naming_what_is_accepted(given):
    with pytest.raises(TypeError, match="expected a plan .*load_plan") as error:
        fleetplan.evaluate(GAVEL, given)
    assert isinstance(error.value, ValueError)
