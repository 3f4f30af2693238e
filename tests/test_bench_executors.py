"""Executors: a run past its limit is killed; an interrupted sweep resumes without redoing
finished cells; a real Dask LocalCluster on loopback gives the local executor's table."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from fleetplan.benchmarks.suite import expand_cells, parse_suite
from fleetplan.benchmarks.sweep import run_sweep
from fleetplan.cli import main
from fleetplan.instances import InstanceError
from fleetplan.runs import executors
from fleetplan.runs.cells import KILLED_MESSAGE, CellProcess
from fleetplan.runs.results import read_results, row_key

SMALL = """
name: small
groups:
  - name: g
    kind: allocation
    generator: {jobs: [4, 8], multi_gpu: false}
    seeds: [0, 1]
    time_limit: 20
    solvers:
      - {name: max-min-fairness}
      - {name: max-min-fairness-agnostic, label: agnostic}
"""
# Columns that measure the machine rather than the answer.
TIMINGS = ("wall_s", "peak_mem_mb", "mem_baseline_mb", "mem_measure")


def _answers(rows):
    """Each row without what differs from run to run: timings, memory, and the solver's own
    timings inside ``stats`` (keys ending in ``_s``)."""
    answers = []
    for row in rows:
        answer = {k: v for k, v in row.items() if k not in TIMINGS}
        if answer.get("stats"):
            stats = json.loads(answer["stats"])
            answer["stats"] = {k: v for k, v in stats.items() if not k.endswith("_s")}
        answers.append(answer)
    return answers


def test_a_run_past_its_time_limit_is_killed(tmp_path):
    # time_limit 0.01 s with no grace: generating 5000 jobs alone takes longer than 0.015 s.
    suite = parse_suite("name: k\ngroups: [{kind: allocation, generator: {jobs: 5000}, time_limit: 0.01, "
                        "solvers: [{name: max-min-fairness}]}]")
    # The fork server's one-time start (it preloads every back-end) is not the cell's time.
    CellProcess(expand_cells(parse_suite(SMALL))[0]).start().wait()
    started = time.monotonic()
    rows = run_sweep(suite, tmp_path, grace_s=0.0, progress=None)
    assert time.monotonic() - started < 10
    assert [(row["status"], row["message"]) for row in rows] == [("error", KILLED_MESSAGE)]
    assert float(rows[0]["wall_s"]) >= 0.015
    assert rows[0]["gap"] == "" and rows[0]["objective"] == ""


def test_the_child_process_gives_the_in_process_answer():
    from fleetplan.runs.cells import run_cell

    cell = expand_cells(parse_suite(SMALL))[1]
    here, there = run_cell(cell), CellProcess(cell).start().wait()
    assert _answers([here]) == _answers([there])
    assert there["status"] == "feasible" and float(there["peak_mem_mb"]) >= 0  # agnostic: feasible
    # The baseline holds the interpreter, numpy and the preloaded back-ends; the peak is the solve's own.
    assert float(there["mem_baseline_mb"]) > 50 and there["mem_measure"] in ("rss-increase", "maxrss-increase")


def test_a_failing_cell_is_a_row_not_a_crash(tmp_path):
    # A bad option value is refused when the suite loads, so provoke a
    # solver-side error with a value of the right type that this instance cannot take.
    with pytest.raises(InstanceError, match="options.backend"):
        parse_suite("name: f\ngroups: [{kind: allocation, generator: {jobs: 4}, "
                    "solvers: [{name: max-min-fairness, options: {backend: nope}}]}]")
    suite = parse_suite("name: f\ngroups: [{kind: allocation, generator: {jobs: 4}, "
                        "solvers: [{name: max-min-fairness, options: {partitions: 1000}}]}]")
    rows = run_sweep(suite, tmp_path, progress=None)
    assert rows[0]["status"] == "error"
    assert "partitions" in rows[0]["message"]


# Enough cells that the interrupt lands mid-sweep: eight cells of a few milliseconds each could
# all finish between two polls of the results file. Twenty (each a child process of its own)
# leave eighteen to resume; more only lengthen the resumed run.
LONGER = SMALL.replace("seeds: [0, 1]", "seeds: [0, 1, 2, 3, 4]")


def test_interrupted_sweep_resumes_without_redoing_finished_cells(tmp_path, monkeypatch):
    suite_file = tmp_path / "small.yaml"
    suite_file.write_text(LONGER)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "fleetplan.cli", "bench", str(suite_file), "-o", str(out),
               "--workers", "1", "--no-report"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results = out / "results.csv"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 3:  # header + 2 rows
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr.decode()
    before = read_results(out)
    total = len(expand_cells(parse_suite(LONGER)))
    assert 2 <= len(before) < total, "interrupt came too late to test resuming"

    handed_out = []
    real_run_local = executors.run_local

    def spy(cells, on_row, **kwargs):
        handed_out.extend(cells)
        return real_run_local(cells, on_row, **kwargs)

    monkeypatch.setattr(executors, "run_local", spy)
    assert main(["bench", str(suite_file), "-o", str(out), "--resume", "--no-report"]) == 0
    after = read_results(out)
    done_before = {row_key(row) for row in before}
    assert not done_before & {cell.key for cell in handed_out}, "a finished cell ran again"
    assert len(handed_out) == total - len(before)
    assert len(after) == total and len({row_key(row) for row in after}) == total
    # The rows from before the interrupt are kept as measured (same timings).
    kept = {row_key(row): row for row in after}
    for row in before:
        assert kept[row_key(row)]["wall_s"] == row["wall_s"]
    # Without --resume the command refuses to overwrite a finished table.
    assert main(["bench", str(suite_file), "-o", str(out)]) == 2


def test_a_torn_last_line_is_rerun(tmp_path):
    suite = parse_suite(SMALL)
    rows = run_sweep(suite, tmp_path, progress=None)
    text = (tmp_path / "results.csv").read_text()
    lines = text.splitlines(keepends=True)
    # Keep three rows and half of the fourth, as a crash mid-write would.
    (tmp_path / "results.csv").write_text("".join(lines[:4]) + lines[4][: len(lines[4]) // 2])
    assert len(read_results(tmp_path)) == 3
    again = run_sweep(suite, tmp_path, resume=True, progress=None)
    assert _answers(again) == _answers(rows)
    assert [row["wall_s"] for row in again[:3]] == [row["wall_s"] for row in rows[:3]]


def test_local_workers_do_not_change_the_answers(tmp_path):
    suite = parse_suite(SMALL)
    one = run_sweep(suite, tmp_path / "one", workers=1, progress=None)
    two = run_sweep(suite, tmp_path / "two", workers=2, progress=None)
    assert _answers(one) == _answers(two)


DASK_SUITE = SMALL.replace("seeds: [0, 1]", "seeds: [0]")  # 4 cells: each starts an interpreter


def test_dask_local_cluster_gives_the_local_table(tmp_path, capsys):
    distributed = pytest.importorskip("dask.distributed")
    suite_file = tmp_path / "small.yaml"
    suite_file.write_text(DASK_SUITE)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tcp://127.0.0.1:")
        code = main(["bench", str(suite_file), "-o", str(tmp_path / "dask"), "--executor", "dask",
                     "--address", address, "--no-report"])
    assert code == 0, capsys.readouterr().err
    run_sweep(parse_suite(DASK_SUITE), tmp_path / "local", workers=2, progress=None)
    dask_rows = read_results(tmp_path / "dask")
    local_rows = read_results(tmp_path / "local")
    assert len(dask_rows) == len(local_rows) == 4
    assert _answers(dask_rows) == _answers(local_rows)
    # The agnostic baseline reports feasible: its optimum is its time-share model's, not the judge's.
    assert all(row["status"] == ("feasible" if "agnostic" in row["solver"] else "optimal") for row in dask_rows)
    # A fresh interpreter per Dask cell does not preload the back-ends, and says so.
    assert {row["mem_measure"] for row in dask_rows} <= {"rss-increase+imports", "maxrss-increase+imports"}
    assert {row["mem_measure"] for row in local_rows} <= {"rss-increase", "maxrss-increase"}


def test_unreachable_scheduler_is_a_one_line_error():
    pytest.importorskip("dask.distributed")
    # Port 9 (discard) on loopback: nothing listens there in the test environment.
    with pytest.raises(InstanceError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        executors.connect_dask("tcp://127.0.0.1:9", timeout_s=1)


def test_interrupt_leaves_no_child_running(monkeypatch):
    suite = parse_suite("name: s\ngroups: [{kind: allocation, generator: {jobs: 4}, time_limit: 30, "
                        "solvers: [{name: max-min-fairness}]}]")
    started = []

    class Recording(CellProcess):
        def start(self):
            started.append(super().start())
            return self

    def interrupt(cell):
        raise KeyboardInterrupt  # as if Ctrl-C arrived while the child runs

    monkeypatch.setattr(executors, "CellProcess", Recording)
    with pytest.raises(KeyboardInterrupt):
        executors.run_local(expand_cells(suite), lambda cell, row: None, workers=1, on_start=interrupt)
    assert len(started) == 1
    assert started[0]._exit_code() is not None, "the child outlived the interrupt"


def test_a_finished_cell_polled_again_gives_the_same_row():
    # Ctrl-C between a cell's poll and its row's write made the cleanup poll it again, which
    # raised AssertionError (exit 1) instead of letting the interrupt end the sweep (exit 130).
    process = CellProcess(expand_cells(parse_suite(SMALL))[0]).start()
    row = process.wait()
    assert process.poll() == row and process.poll() is row
