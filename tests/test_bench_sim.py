"""Simulation cells in suites: validated like solver groups, run in child processes (locally
and on Dask), one row per cell with the simulator's metrics as JSON, reported per scenario."""

from __future__ import annotations

import json

import pytest

from fleetplan import sim
from fleetplan.benchmarks.report import write_report
from fleetplan.benchmarks.suite import expand_cells, parse_suite
from fleetplan.benchmarks.sweep import run_sweep
from fleetplan.instances import InstanceError
from fleetplan.runs.cells import CellProcess, run_cell
from fleetplan.runs.results import read_results

SUITE = """
name: sims
groups:
  - name: toy
    simulator: toy
    scenario: {jobs: [5, 40], mean_size: 1.5}
    schedulers: [fifo, shortest]
    seeds: [0, 1]
    time_limit: 30
"""


@pytest.fixture(autouse=True)
def toy_registered(monkeypatch):
    monkeypatch.setitem(sim._MODULES, "toy", "bench_toy_sim")


def test_simulation_groups_expand_like_solver_groups():
    cells = expand_cells(parse_suite(SUITE))
    assert len(cells) == 2 * 2 * 2  # scenarios x seeds x schedulers
    first = cells[0]
    assert (first.kind, first.instance, first.solver, first.sim_module) == (
        "simulation", "toy[jobs=5,mean_size=1.5]", "fifo", "bench_toy_sim")
    assert first.params == {"jobs": 5, "mean_size": 1.5}
    # `schedulers: all` comes from the simulator.
    every = parse_suite("name: s\ngroups: [{simulator: toy, scenario: {jobs: 3}}]")
    assert [cell.solver for cell in expand_cells(every)] == ["fifo", "shortest", "crash"]


@pytest.mark.parametrize(("text", "path", "reason"), [
    ("{simulator: nope}", "groups[0].simulator", "unknown simulator 'nope'"),
    ("{simulator: toy, schedulers: [lifo]}", "groups[0].schedulers[0]", "unknown scheduler 'lifo'"),
    ("{simulator: toy, scenario: {jobs: [3, 0]}}", "groups[0].scenario.jobs", ""),
    ("{simulator: toy, scenario: {jobz: 3}}", "groups[0].scenario.jobz", "unknown field"),
    ("{simulator: toy, kind: allocation}", "groups[0].kind", "not both"),
    ("{simulator: toy, solvers: all}", "groups[0].solvers", "scenario"),
    ("{kind: allocation, schedulers: [fifo]}", "groups[0].schedulers", "only a simulation group"),
    ("{name: x}", "groups[0].kind", "required field is missing"),
])
def test_bad_simulation_groups_name_the_yaml_path(text, path, reason):
    with pytest.raises(InstanceError) as caught:
        parse_suite(f"name: s\ngroups: [{text}]", "s.yaml")
    assert caught.value.path == path and reason in caught.value.reason


def test_a_simulation_cell_gives_its_metrics_in_process_and_in_a_child():
    cell = expand_cells(parse_suite(SUITE))[1]
    here = run_cell(cell)
    there = CellProcess(cell).start().wait()
    expected = sim.run("toy", {"jobs": 5, "mean_size": 1.5}, "shortest", 0).metrics
    for row in (here, there):
        assert row["status"] == "done", row["message"]
        assert json.loads(row["metrics"]) == pytest.approx(expected)
        assert json.loads(row["stats"])["events"] == 10
        assert row["objective"] == "" and row["mem_measure"]


def test_a_sweep_writes_one_row_per_cell_and_the_report_tabulates_metrics(tmp_path):
    suite = parse_suite(SUITE.replace("[fifo, shortest]", "[fifo, shortest, crash]"))
    rows = run_sweep(suite, tmp_path, workers=2, progress=None, save_plans=True)
    assert len(rows) == 12
    crashed = [row for row in rows if row["label"] == "crash"]
    assert all(row["status"] == "error" and "crashed on purpose" in row["message"] for row in crashed)
    done = [row for row in rows if row["status"] == "done"]
    assert len(done) == 8
    for row in done:
        params = json.loads(row["params"])
        expected = sim.run("toy", params, row["solver"], int(row["seed"])).metrics
        assert json.loads(row["metrics"]) == pytest.approx(expected)
    # Shortest-first never waits longer on average than FIFO on the same arrivals.
    by_key = {(row["instance"], row["seed"], row["solver"]): json.loads(row["metrics"]) for row in done}
    for (instance, seed, solver), metrics in by_key.items():
        if solver == "shortest":
            assert metrics["avg_wait_s"] <= by_key[(instance, seed, "fifo")]["avg_wait_s"] + 1e-9
    saved = list((tmp_path / "plans").glob("*.json"))
    assert len(saved) == 8 and "series" in json.loads(saved[0].read_text())
    text = write_report(tmp_path).read_text()
    assert "## Group `toy` (simulation)" in text
    assert "| scenario | scheduler | runs | failed | median s | jobs | avg_wait_s |" in text  # report_metrics first
    assert "| toy[jobs=5,mean_size=1.5] | crash | 2 | 2 |" in text
    assert read_results(tmp_path)[0]["metrics"]


@pytest.mark.slow
def test_simulation_cells_run_on_dask(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    suite = parse_suite(SUITE.replace("seeds: [0, 1]", "seeds: [0]").replace("[5, 40]", "[5]"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        rows = run_sweep(suite, tmp_path / "dask", executor="dask", address=cluster.scheduler_address,
                         progress=None)
    local = run_sweep(suite, tmp_path / "local", progress=None)
    assert [row["status"] for row in rows] == ["done", "done"]
    assert [row["metrics"] for row in rows] == [row["metrics"] for row in local]


def test_the_report_shows_a_simulators_report_metrics_first():
    from fleetplan.benchmarks.simcells import sim_section

    rows = [{"instance": "toy[jobs=5]", "label": "fifo", "status": "done", "wall_s": "0.1", "message": "",
             "metrics": json.dumps({"avg_wait_s": 1.0, "jobs": 5.0, "aaa": 2.0})}]
    header = sim_section(rows)[0]
    assert header.index("| jobs |") < header.index("| aaa |") < header.index("| avg_wait_s |")
