"""The command line's contract: exit codes 0/1/2, one line per
error naming the file, path or option, JSON errors under --json, options checked by type,
every validation error at once, and no half-written file whatever happens."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fleetplan
from fleetplan.cli import main
from fleetplan.instances import InstanceError
from fleetplan.solvers.options import GLOSSARY

ROOT = Path(__file__).resolve().parent.parent
GAVEL = str(ROOT / "examples" / "allocation-gavel-4.1.json")
PLACEMENT = str(ROOT / "examples" / "placement-small.json")


def run_cli(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "fleetplan", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, **kwargs)


# --- exit codes ------------------------------------------------------------------------------

def test_exit_0_for_a_plan_2_for_bad_input_1_for_no_plan(tmp_path, capsys, monkeypatch):
    assert main(["solve", GAVEL]) == 0
    assert main(["solve", GAVEL, "--time-limit", "-1"]) == 2
    assert "--time-limit" in capsys.readouterr().err

    # A run that ends with no plan exits 1 and writes nothing.
    from fleetplan.solvers import base

    spec = fleetplan.get_solver("allocation", "max-min-fairness")

    def no_plan(instance, **kwargs):
        return base.SolveResult(status="time_limit", message="stopped before any plan")

    monkeypatch.setitem(base._REGISTRY, ("allocation", "max-min-fairness"),
                        base.SolverSpec("allocation", spec.name, no_plan, spec.description, spec.exact,
                                        default=True))
    out = tmp_path / "plan.json"
    assert main(["solve", GAVEL, "-o", str(out)]) == 1
    assert not out.exists()
    assert "no plan" in capsys.readouterr().out


@pytest.mark.parametrize("option,expected", [
    ("refine=maybe", "options.refine: 'maybe' is not allowed: must be a bool"),
    ("lp_algorithm=barrier", "options.lp_algorithm: 'barrier' is not allowed: must be one of"),
    ("partitions=abc", "options.partitions: 'abc' is not allowed: must be an int >= 1"),
    ("partitions=0", "options.partitions: 0 is not allowed"),
    ("tolerance=-1", None),  # not an option of max-min-fairness: unknown
])
def test_bad_option_values_are_usage_errors(option, expected, capsys):
    assert main(["solve", GAVEL, "--option", option]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert (expected or "unknown option") in err[0]


@pytest.mark.parametrize("solver,option,value", [
    ("placement/hill-climb", "replicas", "3"),            # bool
    ("placement/hill-climb", "max_moves", "-5"),          # int (optional, bounded)
    ("placement/hill-climb", "hot_replica_share", "2"),   # float in [0, 1]
    ("placement/mip-highs", "warm_start", "yesterday"),   # choice
])
def test_every_option_type_rejects_a_bad_value(solver, option, value, capsys):
    kind, name = solver.split("/")
    assert main(["solve", PLACEMENT, "--solver", name, "--option", f"{option}={value}"]) == 2
    assert f"options.{option}" in capsys.readouterr().err


def test_api_checks_option_values_before_work():
    instance = fleetplan.load_instance(GAVEL)
    with pytest.raises(InstanceError, match="options.partitions"):
        fleetplan.solve(instance, "max-min-fairness", partitions="abc")
    with pytest.raises(InstanceError, match="threads"):
        fleetplan.solve(instance, threads=10**6)
    with pytest.raises(InstanceError, match="seed"):
        fleetplan.solve(instance, seed=-1)
    # a plain dict is an instance too
    result = fleetplan.solve(json.loads(Path(GAVEL).read_text()), "max-min-fairness")
    assert result.success


def test_every_option_of_every_solver_is_documented_and_its_default_valid():
    for spec in fleetplan.list_solvers():
        for option in spec.option_specs.values():
            assert option.meaning, f"{spec.kind}/{spec.name}: option {option.name} has no meaning"
            option.validate(option.default)
        if spec.option_specs:
            assert "Parameters" in (spec.function.__doc__ or ""), spec.name
    assert {"partitions", "backend", "warm_start"} <= set(GLOSSARY)


def test_solvers_name_shows_options(capsys):
    assert main(["solvers", "placement/mip-highs", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    names = {option["name"]: option for option in data["options"]}
    assert names["warm_start"]["type"].startswith("one of") and names["presolve"]["meaning"]
    assert main(["solvers", "max-min-fairness"]) == 0
    assert "partitions" in capsys.readouterr().out
    assert main(["solvers", "no-such-thing"]) == 2
    capsys.readouterr()
    if len([spec for spec in fleetplan.list_solvers() if spec.name == "mip-highs"]) > 1:
        assert main(["solvers", "mip-highs"]) == 2
        assert "several kinds" in capsys.readouterr().err


def test_solve_help_with_solver_and_generate_help_with_kind():
    solve = run_cli("solve", GAVEL, "--solver", "max-min-fairness", "--help")
    assert solve.returncode == 0 and "lp_algorithm" in solve.stdout and "--time-limit" in solve.stdout
    generate = run_cli("generate", "placement", "--help")
    assert generate.returncode == 0 and "ml_share" in generate.stdout


# --- errors: one line each, all of them, JSON too ---------------------------------------------

def test_every_validation_error_is_listed(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({
        "kind": "allocation", "schema_version": 1,
        "worker_types": [{"name": "v100", "count": -1}, {"name": "k80", "count": "16"}],
        "jobs": [{"id": "a", "throughput": {"v100": 1.0}, "scale_factor": True}],
    }))
    run = run_cli("validate", str(bad))
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) >= 3, lines
    joined = "\n".join(lines)
    for path in ("worker_types[0].count", "worker_types[1].count", "jobs[0].scale_factor"):
        assert path in joined
    assert all(str(bad) in line for line in lines)


def test_errors_under_json_are_a_json_object(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "missing.json"), "--json"]) == 2
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload["exit_code"] == 2 and "file not found" in payload["error"]
    assert captured.err.count("\n") == 1
    assert main(["solve", GAVEL, "--json", "--threads", "0"]) == 2
    assert json.loads(capsys.readouterr().out)["exit_code"] == 2


def test_plan_given_as_instance_and_the_reverse(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    assert main(["solve", GAVEL, "-o", str(plan)]) == 0
    capsys.readouterr()
    assert main(["validate", str(plan)]) == 2
    assert "is a allocation plan, not an instance" in capsys.readouterr().err
    assert main(["evaluate", GAVEL, GAVEL]) == 2
    assert "instance, not a plan" in capsys.readouterr().err
    assert main(["schema", "allocation", "--plan"]) == 0
    assert "allocation" in json.loads(capsys.readouterr().out)["properties"]


def test_output_that_is_an_input_is_refused(tmp_path, capsys):
    copy = tmp_path / "x.json"
    copy.write_text(Path(GAVEL).read_text())
    before = copy.read_text()
    assert main(["solve", str(copy), "-o", str(copy)]) == 2
    assert "is also an input of this command" in capsys.readouterr().err
    assert copy.read_text() == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_output_directory(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    assert main(["solve", GAVEL, "-o", str(locked / "plan.json")]) == 2


# --- the bad-input sweep: each a clear line and exit 2 ----------------------

def _allocation(**changes):
    data = json.loads(Path(GAVEL).read_text())
    data.update(changes)
    return data


BAD_FILES = {
    "worker count beyond 64 bits": (_allocation(worker_types=[{"name": "v100", "count": 10**400},
                                                              {"name": "k80", "count": 1}]), "worker_types[0].count"),
    "integer 2^70": (_allocation(worker_types=[{"name": "v100", "count": 2**70}, {"name": "k80", "count": 1}]),
                     "worker_types[0].count"),
    "throughput 1e308": (_allocation(jobs=[{"id": "a", "throughput": {"v100": 1e308, "k80": 1.0}}]),
                         "jobs[0].throughput.v100"),
    "count given as a string": (_allocation(worker_types=[{"name": "v100", "count": "16"},
                                                          {"name": "k80", "count": 1}]), "worker_types[0].count"),
    "scale factor true": (_allocation(jobs=[{"id": "a", "throughput": {"v100": 1.0, "k80": 1.0},
                                             "scale_factor": True}]), "jobs[0].scale_factor"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_give_one_line_and_exit_2(case, tmp_path, capsys):
    data, path = BAD_FILES[case]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    out = tmp_path / "plan.json"
    assert main(["solve", str(bad), "-o", str(out)]) == 2, case
    err = capsys.readouterr().err
    assert path in err and "internal error" not in err, err
    assert not out.exists()


def test_missing_schema_version_and_deep_nesting(tmp_path, capsys):
    data = _allocation()
    del data["schema_version"]
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps(data))
    assert main(["validate", str(missing)]) == 2
    assert "schema_version" in capsys.readouterr().err
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["validate", str(deep)]) == 2
    err = capsys.readouterr().err
    assert "nested too deeply" in err and "internal error" not in err


@pytest.mark.parametrize("args,needle", [
    (["generate", "allocation", "--seed", "-1"], "--seed"),
    (["generate", "allocation", "--jobs", "abc"], "jobs"),
    (["generate", "allocation", "--colour", "red"], "colour"),
    (["solve", GAVEL, "--threads", "1000000"], "--threads"),
    (["solve", GAVEL, "--time-limit", "nan"], "--time-limit"),
])
def test_bad_flags_exit_2(args, needle, tmp_path, capsys):
    assert main([*args, "-o", str(tmp_path / "out.json")] if args[0] == "generate" else args) == 2
    assert needle in capsys.readouterr().err


# --- signals -----------------------------------------------------------------------------

def test_sigterm_ends_with_one_line_and_no_temporary_file(tmp_path):
    """SIGTERM during a long generation: exit 143, one line, nothing left in the folder."""
    out = tmp_path / "big.json"
    process = subprocess.Popen([sys.executable, "-m", "fleetplan", "generate", "placement", "--tables",
                                "400000", "--jobs", "400000", "-o", str(out)],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3.0)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    if process.returncode == 0:
        pytest.skip("the generation finished before the signal")
    assert process.returncode == 143, err
    assert err.strip().splitlines() == ["fleetplan: terminated"]
    assert list(tmp_path.iterdir()) == []


def test_sigint_during_startup_prints_no_traceback():
    process = subprocess.Popen([sys.executable, "-m", "fleetplan", "solvers"], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert "Traceback" not in err
    assert process.returncode in (0, 130)


def test_options_doc_is_generated_from_the_solvers(capsys):
    """docs/solver-options.md is what `fleetplan solvers --markdown` prints (regenerate it when a
    solver or option changes)."""
    assert main(["solvers", "--markdown"]) == 0
    assert (ROOT / "docs" / "solver-options.md").read_text() == capsys.readouterr().out


def test_simulate_lists_runs_and_writes(tmp_path, capsys):
    assert main(["simulate", "--json"]) == 0
    listed = {item["name"] for item in json.loads(capsys.readouterr().out)}
    assert "parsync" in listed
    out = tmp_path / "result.json"
    args = ["simulate", "parsync", "--slots", "2000", "--partitions", "20", "--schedulers", "4",
            "--rate", "400", "--duration_s", "5", "--drain_s", "5", "-o", str(out), "--json"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads(out.read_text())
    assert printed["metrics"] == saved["metrics"] and saved["metrics"]["tasks_committed"] > 0
    assert main(["simulate", "parsync", "--slots", "-3"]) == 2
    assert "slots" in capsys.readouterr().err
    assert main(["simulate", "teleport"]) == 2


def test_a_solve_json_output_is_read_as_a_plan(tmp_path, capsys):
    assert main(["solve", GAVEL, "--json"]) == 0
    saved = tmp_path / "solve.json"
    saved.write_text(capsys.readouterr().out)
    assert main(["evaluate", GAVEL, str(saved)]) == 0


def test_a_command_module_that_cannot_load_fails_loudly(monkeypatch):
    """A broken command family is a bug to see, not a command quietly missing from --help."""
    import sys

    from fleetplan.cli.app import build_parser

    monkeypatch.setitem(sys.modules, "fleetplan.cli.commands.serve", None)  # importing it raises ImportError
    with pytest.raises(ImportError, match="fleetplan.cli.commands.serve"):
        build_parser()
