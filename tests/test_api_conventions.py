"""The Python API behaves as scikit-learn's and scipy's do: input errors are
ValueErrors, every function taking an instance or a plan takes a plain dict as solve does,
solvers are named ``kind/name`` or bare where the instance fixes the kind, and the DataFrame
helpers are at the top level."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import fleetplan
from fleetplan.cli.common import CommandError
from fleetplan.errors import InstanceError, OutputError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GAVEL = EXAMPLES / "allocation-gavel-4.1.json"


def test_toolkit_errors_are_value_errors():
    assert issubclass(InstanceError, ValueError)
    assert issubclass(OutputError, ValueError)
    assert issubclass(CommandError, ValueError)
    instance = fleetplan.load_instance(GAVEL)
    with pytest.raises(ValueError, match="unknown solver"):
        fleetplan.solve(instance, "no-such-solver")
    with pytest.raises(ValueError, match="options.bogus"):
        fleetplan.solve(instance, "max-min-fairness", bogus=1)


def test_a_validator_error_keeps_its_path_inside_pydantic():
    # InstanceError is a ValueError, which pydantic collects from validators: the path and
    # reason the validator wrote must still be what the user sees, not "Value error, ...".
    from fleetplan import sim

    with pytest.raises(InstanceError) as caught:
        sim.get_simulator("cluster").scenario({"steady_state": [0.5, 0.2]})
    assert caught.value.path == "steady_state"
    assert "Value error" not in str(caught.value)


def test_evaluate_accepts_dicts_like_solve():
    data = json.loads(GAVEL.read_text())
    result = fleetplan.solve(data, "max-min-fairness")
    from_models = fleetplan.evaluate(fleetplan.load_instance(GAVEL), result.plan)
    from_dicts = fleetplan.evaluate(data, result.plan.model_dump())
    assert from_dicts.objective == pytest.approx(from_models.objective)
    # A `solve --json` output is accepted as a plan too (its `plan` field).
    assert fleetplan.evaluate(data, result.to_dict()).objective == pytest.approx(from_models.objective)
    with pytest.raises(ValueError, match="expected a plan"):
        fleetplan.evaluate(data, 42)
    with pytest.raises(InstanceError, match="kind"):
        fleetplan.evaluate(data, {"schema_version": 1})


def test_solver_named_kind_slash_name_or_bare():
    assert fleetplan.get_solver("allocation/max-min-fairness").kind == "allocation"
    assert fleetplan.get_solver("allocation", "allocation/max-min-fairness").name == "max-min-fairness"
    assert fleetplan.get_solver("water-filling").kind == "allocation"  # one kind has it
    with pytest.raises(ValueError, match="several kinds.*placement/cpsat"):
        fleetplan.get_solver("cpsat")
    with pytest.raises(ValueError, match="is for kind 'placement'"):
        fleetplan.get_solver("allocation", "placement/cpsat")
    instance = fleetplan.load_instance(GAVEL)
    assert fleetplan.solve(instance, "allocation/max-min-fairness").solver == "max-min-fairness"


def test_frames_from_the_top_level(tmp_path):
    folder = EXAMPLES / "tables" / "allocation"
    instance = fleetplan.from_frames("allocation", jobs=folder / "jobs.csv", cluster=folder / "gpus.csv")
    result = fleetplan.solve(instance, "max-min-fairness")
    frame = fleetplan.to_frame(instance.model_dump(), result.plan)
    assert list(frame["job"]) == [job.id for job in instance.jobs]
    assert set(fleetplan.to_frames(instance)) >= {"jobs", "cluster"}
    with pytest.raises(ValueError, match="not a table or setting"):
        fleetplan.from_frames("allocation", jobs=folder / "jobs.csv", gpus=folder / "gpus.csv")
    with pytest.raises(ValueError, match="needs this table"):
        fleetplan.from_frames("allocation", jobs=folder / "jobs.csv")


def test_save_accepts_a_dict(tmp_path):
    data = json.loads(GAVEL.read_text())
    fleetplan.save(data, tmp_path / "new" / "copy.json")
    assert fleetplan.load_instance(tmp_path / "new" / "copy.json").model_dump() == \
        fleetplan.load_instance(GAVEL).model_dump()


def test_plan_records_the_time_limit_given(tmp_path):
    plan = tmp_path / "plan.json"
    run = subprocess.run([sys.executable, "-m", "fleetplan", "solve", str(GAVEL), "--time-limit", "60",
                          "-o", str(plan)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(plan.read_text())["options"]["time_limit"] == 60.0
    started = __import__("time").perf_counter() - 5.0  # five seconds already spent
    result = fleetplan.solve(fleetplan.load_instance(GAVEL), time_limit=60, started=started)
    assert result.plan.options["time_limit"] == 60


def test_compare_and_binding_take_dicts_too():
    from fleetplan.planning.compare import compare
    from fleetplan.planning.marginal import marginal_values

    data = json.loads(GAVEL.read_text())
    aware = fleetplan.solve(data, "max-min-fairness").plan.model_dump()
    agnostic = fleetplan.solve(data, "max-min-fairness-agnostic").plan.model_dump()
    table = compare({"aware": (data, aware), "agnostic": (data, agnostic)})
    assert table.row("min_time_share")["unit"] == "fraction"
    values = marginal_values(data, "max-min-fairness")
    assert {value.capacity for value in values.values} == {"v100", "k80"}
