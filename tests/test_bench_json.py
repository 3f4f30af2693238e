"""`--json` on `bench` and `bench report`: the result summary on stdout; errors as a JSON object
on stdout plus one line on stderr, exit code 2 for bad suite files and flags."""

from __future__ import annotations

import json

import pytest
from test_bench_report import _table

from fleetplan.benchmarks.report import summarize
from fleetplan.cli import main
from fleetplan.runs.results import finalize, write_results


def test_bench_report_json_is_the_summary(tmp_path, capsys):
    write_results(tmp_path, _table())
    assert main(["bench", "report", str(tmp_path), "--no-plots", "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data == json.loads(json.dumps(summarize(tmp_path) | {"report": str(tmp_path / "report.md"),
                                                                  "exit_code": 0}))
    [group] = data["groups"]
    [objective] = group["objectives"]
    lines = {line["solver"]: line for line in objective["solvers"]}
    assert lines["a"]["at_target"] == 3 and lines["a"]["wins"] == 2 and lines["c"]["at_target"] == 0
    assert data["rows"] == 9 and data["failed"] == 0


def test_bench_json_prints_the_summary_and_the_exit_code(tmp_path, capsys):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\ngroups: [{kind: allocation, generator: {jobs: 4}, "
                     "solvers: [{name: max-min-fairness}, {name: max-min-fairness, label: bad, "
                     "options: {partitions: 1000}}]}]\n")  # a value this instance cannot take
    code = main(["bench", str(suite), "-o", str(tmp_path / "out"), "--no-plots", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 == data["exit_code"]  # one cell failed
    assert data["suite"] == "s" and data["rows"] == 2 and data["failed"] == 1
    lines = {line["solver"]: line for line in data["groups"][0]["objectives"][0]["solvers"]}
    assert lines["max-min-fairness"]["failed"] == 0 and lines["bad"]["failed"] == 1


@pytest.mark.parametrize("argv", [
    ["bench", "SUITE", "--json"],                                    # a suite that does not validate
    ["bench", "quick", "--workers", "0", "--json"],                  # a bad flag value
    ["bench", "quick", "--grace", "nan", "--json"],
    ["bench", "quick", "--no-such-flag", "--json"],                  # an unknown flag
    ["bench", "report", "--json"],                                   # report without its folder
    ["bench", "report", "NOWHERE", "--json"],
    ["bench", "quick", "--executor", "dask", "--address", "tcp://10.2.3.4:8786", "--json"],
])
def test_errors_under_json_are_an_object_on_stdout_and_one_line_on_stderr(tmp_path, capsys, argv):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: t\ngroups: [{kind: allocation, solvers: [{name: nope}]}]\n")
    argv = [str(bad) if part == "SUITE" else str(tmp_path / "nowhere") if part == "NOWHERE" else part
            for part in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["exit_code"] == 2 and data["error"]
    assert len(captured.err.strip().splitlines()) == 1 and captured.err.startswith("error: ")


def test_summary_of_a_migrated_table_has_every_group(tmp_path):
    write_results(tmp_path, finalize(_table()))
    assert [group["group"] for group in summarize(tmp_path)["groups"]] == ["g"]
