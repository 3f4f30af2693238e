"""The command line: exit codes, one-line errors, no half-written files."""

import json
import os
import subprocess
import sys

import pytest
from conftest import EXAMPLES, ROOT

from fleetplan.cli import main

GAVEL = str(EXAMPLES / "allocation-gavel-4.1.json")


def run_cli(*args, cwd=None):
    """Run the real console entry point in a child process, as a user would."""
    return subprocess.run([sys.executable, "-m", "fleetplan.cli", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)


def test_solve_then_evaluate_reports_no_violations(tmp_path):
    plan = tmp_path / "plan.json"
    solved = run_cli("solve", GAVEL, "--solver", "max-min-fairness", "-o", str(plan))
    assert solved.returncode == 0, solved.stderr
    assert "optimal" in solved.stdout
    evaluated = run_cli("evaluate", GAVEL, str(plan))
    assert evaluated.returncode == 0, evaluated.stderr
    assert "no violations" in evaluated.stdout


def test_json_output_is_machine_readable(tmp_path, capsys):
    assert main(["solve", GAVEL, "--json", "--time-limit", "30"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "optimal"
    assert data["objective"] == pytest.approx(8 / 11, rel=1e-6)
    assert data["evaluation"]["violations"] == []


@pytest.mark.parametrize("content,expected", [
    ("{not json", "malformed JSON"),
    ('{"kind": "allocation", "worker_types": [{"name": "v100", "count": -2}], "jobs": []}', "worker_types[0].count"),
    ('{"kind": "allocation", "worker_types": [{"name": "v100", "count": 1}], "jobs": [{"id": "a", "throughput": {"v100": NaN}}]}', "NaN"),
])
def test_broken_files_exit_2_with_one_line(tmp_path, content, expected):
    broken = tmp_path / "broken.json"
    broken.write_text(content)
    result = run_cli("validate", str(broken))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0] and str(broken) in lines[0]
    assert "Traceback" not in result.stderr


def test_failed_solve_leaves_no_output_file(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "allocation"}')
    out = tmp_path / "plan.json"
    assert main(["solve", str(broken), "-o", str(out)]) == 2
    assert not out.exists()
    assert os.listdir(tmp_path) == ["broken.json"]


def test_unknown_solver_and_option_are_usage_errors(capsys):
    assert main(["solve", GAVEL, "--solver", "nope"]) == 2
    assert "unknown solver 'nope'" in capsys.readouterr().err
    assert main(["solve", GAVEL, "--option", "colour=red"]) == 2
    assert "options.colour" in capsys.readouterr().err


def test_missing_output_directory_fails_before_solving(tmp_path, capsys):
    assert main(["solve", GAVEL, "-o", str(tmp_path / "no" / "plan.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_generate_with_flags_and_params(tmp_path, capsys):
    out = tmp_path / "inst.json"
    assert main(["generate", "allocation", "--jobs", "12", "--param", "multi_gpu=false", "--seed", "3", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert len(data["jobs"]) == 12 and all(job["scale_factor"] == 1 for job in data["jobs"])
    assert main(["generate", "allocation", "--jobs", "-3", "-o", str(tmp_path / "bad.json")]) == 2
    assert "jobs" in capsys.readouterr().err
    assert not (tmp_path / "bad.json").exists()


def test_evaluate_flags_violations_with_exit_1(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"kind": "allocation", "schema_version": 1, "job_ids": ["job0", "job1", "job2"],
                                "worker_types": ["v100", "k80"], "allocation": [[1, 0], [1, 0], [0, 1]]}))
    assert main(["evaluate", GAVEL, str(plan)]) == 1
    assert "workers" in capsys.readouterr().out


def test_schema_solvers_and_demo(capsys, tmp_path):
    assert main(["schema", "allocation"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert "jobs" in schema["properties"]
    assert main(["solvers", "allocation", "--json"]) == 0
    names = {entry["name"] for entry in json.loads(capsys.readouterr().out)}
    assert {"max-min-fairness", "max-min-fairness-agnostic"} <= names
    assert main(["solvers", "teleport"]) == 2
    capsys.readouterr()
    assert main(["demo", "--examples", str(EXAMPLES), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(row["violations"] == 0 for kind_rows in rows.values() for row in kind_rows)
    assert main(["demo", "--examples", str(tmp_path)]) == 2


def test_placement_solve_shows_today_beside_the_new_plan(capsys):
    example = str(EXAMPLES / "placement-small.json")
    assert main(["solve", example, "--solver", "hill-climb"]) == 0
    out = capsys.readouterr().out
    assert "today's plan and the new plan" in out and "hp_demand_supply_max" in out
    assert main(["solve", example, "--solver", "hill-climb", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    keep = data["current_evaluation"]
    assert keep["metrics"]["bytes_moved"] == 0
    assert data["objective"] <= keep["objective"]
