"""The results table's format versions: every older table is read (migrated, never refused),
the committed standard report re-renders, run.json records the git state, a run that ends
without a plan counts as failed, and memory is the solve's own."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from fleetplan.benchmarks import profiles
from fleetplan.benchmarks.report import write_report
from fleetplan.benchmarks.suite import parse_suite
from fleetplan.benchmarks.sweep import run_sweep
from fleetplan.cli import main
from fleetplan.instances import InstanceError
from fleetplan.runs.cells import COLUMNS, FORMAT_VERSION
from fleetplan.runs.memory import MemoryProbe
from fleetplan.runs.results import (
    V1_COLUMNS,
    finalize,
    read_results,
    row_failed,
    write_results,
)

STANDARD = Path(__file__).resolve().parents[1] / "benchmarks" / "reports" / "standard"


def _table(columns, rows):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({column: row.get(column, "") for column in columns})
    return buffer.getvalue()


def _row(**values):
    row = dict(suite="s", group="g", kind="allocation", instance="i", params='{"jobs": 4}', seed="0",
               solver="a", label="a", options="{}", repeat="0", status="optimal", objective="1.0",
               bound="1.0", wall_s="0.5", peak_mem_mb="150", violations="0", message="", sense="max",
               objective_name="score")
    row.update(values)
    return row


@pytest.mark.parametrize("version", [1, 2])
def test_older_tables_are_migrated_not_refused(tmp_path, version):
    columns = list(V1_COLUMNS) + (["stats"] if version == 2 else [])
    (tmp_path / "results.csv").write_text(_table(columns, [_row(stats='{"x": 1}')]))
    [row] = read_results(tmp_path)
    assert list(row) == list(COLUMNS)
    assert row["format_version"] == str(FORMAT_VERSION)
    # Before version 3, peak_mem_mb was the whole child process's peak; the row says so.
    assert row["mem_measure"] == "process-peak" and row["peak_mem_mb"] == "150"
    assert row["stats"] == ('{"x": 1}' if version == 2 else "")


def test_a_current_table_round_trips_and_a_newer_one_is_refused_by_name(tmp_path):
    (tmp_path / "results.csv").write_text(_table(COLUMNS, [_row(format_version=FORMAT_VERSION, mem_measure="rss-increase")]))
    [row] = read_results(tmp_path)
    assert row["mem_measure"] == "rss-increase"
    (tmp_path / "results.csv").write_text(_table(COLUMNS, [_row(format_version=FORMAT_VERSION + 1)]))
    with pytest.raises(InstanceError, match=f"format {FORMAT_VERSION + 1} by a newer fleetplan"):
        read_results(tmp_path)
    (tmp_path / "results.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InstanceError, match="not a fleetplan results table"):
        read_results(tmp_path)


def test_the_committed_standard_report_rerenders(tmp_path, capsys):
    # A copy, as on a fresh clone; plots are drawn by the slow test below.
    for name in ("results.csv", "run.json"):
        shutil.copy(STANDARD / name, tmp_path / name)
    assert main(["bench", "report", str(tmp_path), "--no-plots"]) == 0, capsys.readouterr().err
    text = (tmp_path / "report.md").read_text()
    assert "# Benchmark report: standard" in text and "## Group `placement-all` (placement)" in text


@pytest.mark.slow
def test_the_committed_standard_report_rerenders_with_plots(tmp_path, capsys):
    shutil.copytree(STANDARD, tmp_path / "standard")
    assert main(["bench", "report", str(tmp_path / "standard")]) == 0, capsys.readouterr().err
    text = (tmp_path / "standard" / "report.md").read_text()
    for png in (tmp_path / "standard").glob("*.png"):
        assert f"]({png.name})" in text


def test_a_run_without_a_plan_counts_as_failed():
    no_plan = _row(status="time_limit", objective="", bound="", sense="", objective_name="")
    assert row_failed(no_plan) and row_failed(_row(status="infeasible", objective=""))
    assert row_failed(_row(status="error", objective=""))
    assert not row_failed(_row()) and not row_failed(_row(status="time_limit"))
    rows = finalize([_row(solver="a", label="a"), _row(solver="b", label="b", **{k: v for k, v in no_plan.items()
                                                                                 if k not in ("solver", "label")})])
    table = {line["solver"]: line for line in profiles.solver_table(profiles.median_runs(rows))}
    assert table["b"]["failed"] == 1 and table["a"]["failed"] == 0


def test_run_json_records_the_commit_and_memory_is_the_solves_own(tmp_path):
    suite = parse_suite("name: t\ngroups: [{kind: allocation, generator: {jobs: 4}, solvers: [{name: max-min-fairness}]}]")
    [row] = run_sweep(suite, tmp_path, progress=None)
    [session] = json.loads((tmp_path / "run.json").read_text())
    git = session["git"]
    if git is not None:  # None only outside a git checkout
        assert len(git["commit"]) == 40 and isinstance(git["dirty"], bool)
    assert session["results_format"] == FORMAT_VERSION
    assert row["format_version"] == str(FORMAT_VERSION)
    # The baseline (interpreter, numpy, preloaded back-ends) is far above a 4-job LP's own use.
    assert float(row["mem_baseline_mb"]) > 50 > float(row["peak_mem_mb"]) >= 0
    assert row["mem_measure"] in ("rss-increase", "maxrss-increase")


def test_memory_probe_sees_an_allocation_inside_and_not_before():
    before = bytearray(80 * 1024 * 1024)
    before[::4096] = b"y" * len(before[::4096])
    probe = MemoryProbe()
    with probe:
        block = bytearray(40 * 1024 * 1024)
        block[::4096] = b"x" * len(block[::4096])
    if probe.method == "rss-increase":  # exact on Linux; ru_maxrss elsewhere is only a lower bound
        assert 35 <= probe.increase_mb <= 60
    del before, block


def test_report_names_the_memory_measure(tmp_path):
    write_results(tmp_path, finalize([_row(format_version="3", mem_measure="rss-increase")]))
    assert "solve's own peak" in write_report(tmp_path, plots=False).read_text()
