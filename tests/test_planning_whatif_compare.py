"""fleetplan whatif and compare: sweeps over one's own instance (resumable, same table as an
uninterrupted run) and plans side by side."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan.cli.app import main
from fleetplan.errors import InstanceError
from fleetplan.instances.paths import apply_changes, leaves
from fleetplan.planning.compare import compare
from fleetplan.planning.whatif import parse_vary, whatif

ALLOCATION = str(EXAMPLES / "allocation-64-jobs.json")
PLACEMENT = str(EXAMPLES / "placement-small.json")


def test_paths_reach_named_elements_and_scale_every_job():
    data = json.loads(open(ALLOCATION).read())
    assert leaves(data, "worker_types.v100.count") == [16]
    heavier = apply_changes(data, {"jobs.*.weight*": 2})
    assert [job["weight"] for job in heavier["jobs"]] == [2 * job["weight"] for job in data["jobs"]]
    with pytest.raises(InstanceError, match="close: v100"):
        leaves(data, "worker_types.v10.count")
    with pytest.raises(InstanceError, match="unknown field 'worker_typs'"):
        leaves(data, "worker_typs.v100.count")


@pytest.mark.parametrize("text,message", [
    ("worker_types.v100.count", "expected FIELD"), ("x=1:0:1", "STOP"), ("x=0:5:0", "STEP"),
    ("x=0:1e9:1", "at most"), ("x=a,b", "not a number"),
])
def test_bad_vary_is_one_error(text, message):
    with pytest.raises(InstanceError, match=message):
        parse_vary(text)


def test_whatif_table_and_plot(tmp_path):
    out = tmp_path / "sweep"
    result = whatif(ALLOCATION, ["worker_types.v100.count=8:24:8"], out, progress=None, plot=True)
    assert [row["worker_types.v100.count"] for row in result.rows] == [8, 16, 24]
    assert all(row["status"] == "optimal" for row in result.rows)
    totals = [row["total_throughput"] for row in result.rows]
    assert totals == sorted(totals) and totals[0] < totals[-1]
    # the point at the instance's own count equals a plain solve of it
    plain = fleetplan.solve(fleetplan.load_instance(ALLOCATION)).evaluation.metrics
    assert result.rows[1]["total_throughput"] == pytest.approx(plain["total_throughput"], rel=1e-9)
    assert {"whatif.csv", "whatif.parquet", "whatif.png", "results.csv"} <= set(os.listdir(out))


def test_whatif_unknown_field_is_exit_2_before_any_point(tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["whatif", ALLOCATION, "--vary", "worker_types.h100.count=1:2:1", "-o", str(out)]) == 2
    assert "h100" in capsys.readouterr().err and not out.exists()


def test_whatif_resumes_with_the_same_table_as_an_uninterrupted_run(tmp_path):
    vary = ["--vary", "worker_types.k80.count=4:40:4"]
    whole = tmp_path / "whole"
    assert main(["whatif", ALLOCATION, *vary, "-o", str(whole), "--json"]) == 0
    # What an interrupted sweep leaves: the rows appended (each flushed and synced) before the
    # signal, possibly a torn last line, and no table yet.
    part = tmp_path / "part"
    assert main(["whatif", ALLOCATION, *vary, "-o", str(part), "--json"]) == 0
    lines = (part / "results.csv").read_text().splitlines(keepends=True)
    (part / "results.csv").write_text("".join(lines[:4]) + lines[4][: len(lines[4]) // 2])
    for name in ("whatif.csv", "whatif.parquet", "whatif.png"):
        (part / name).unlink()
    started = time.monotonic()
    assert main(["whatif", ALLOCATION, *vary, "-o", str(part), "--resume", "--json"]) == 0
    assert time.monotonic() - started < 60

    def table(folder):
        with open(folder / "whatif.csv") as stream:
            return [{k: v for k, v in row.items() if k != "wall_s"} for row in csv.DictReader(stream)]

    assert table(part) == table(whole)
    rows = (part / "results.csv").read_text().splitlines()
    assert len(rows) == 11  # the header, the 3 whole rows kept, the 7 points run again: none twice


def test_whatif_stops_on_ctrl_c_with_its_finished_points_kept(tmp_path):
    """A real interruption: Ctrl-C while the points run (one process each, so the sweep takes
    long enough to be interrupted) leaves the finished rows for --resume."""
    part = tmp_path / "part"
    child = subprocess.Popen([sys.executable, "-m", "fleetplan", "whatif", ALLOCATION, "--vary",
                              "worker_types.k80.count=2:80:2", "--workers", "2", "-o", str(part), "--json"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    results = part / "results.csv"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (results.exists() and len(results.read_text().splitlines()) >= 3):
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130 and "Traceback" not in err
    done = len(results.read_text().splitlines()) - 1
    assert 2 <= done < 40
    assert main(["whatif", ALLOCATION, "--vary", "worker_types.k80.count=2:80:2", "-o", str(part), "--resume",
                 "--json"]) == 0
    assert len(results.read_text().splitlines()) - 1 == 40


def test_whatif_resume_of_another_sweep_is_refused(tmp_path, capsys):
    out = tmp_path / "sweep"
    main(["whatif", ALLOCATION, "--vary", "worker_types.k80.count=8,16", "-o", str(out), "--json"])
    capsys.readouterr()
    assert main(["whatif", ALLOCATION, "--vary", "worker_types.v100.count=8,16", "-o", str(out), "--resume"]) == 2
    assert "another sweep" in capsys.readouterr().err


def test_a_metric_that_worsens_as_gpus_are_added_is_named_and_the_frontier_drawn(tmp_path):
    """Under max-min fairness two more V100s lower the slowest job's time share (11.1% to 10.8%
    on the 30-job inventory): the sweep says so, names the policy, and draws the best any
    allocation reaches, which never falls below the policy's."""
    inventory = str(EXAMPLES / "inventory-30-jobs.json")
    result = whatif(inventory, ["worker_types.v100.count=3,5,7"], tmp_path / "sweep", progress=None, frontier=True,
                    metrics=["min_time_share", "total_throughput"])
    assert result.solver == "max-min-fairness"
    assert any(line.startswith("min_time_share gets worse as worker_types.v100.count grows under max-min-fairness")
               for line in result.warnings)
    assert result.frontier == ["min_time_share", "total_throughput"]
    for row in result.rows:
        assert row["frontier_min_time_share"] >= row["min_time_share"] - 1e-9
        assert row["frontier_total_throughput"] >= row["total_throughput"] - 1e-6
    best = fleetplan.solve(fleetplan.load_instance(inventory), "max-throughput").evaluation.metrics
    assert result.rows[2]["frontier_total_throughput"] == pytest.approx(best["total_throughput"], rel=1e-6)  # 7: as given
    with pytest.raises(fleetplan.InstanceError, match="--frontier"):
        whatif(PLACEMENT, ["regions.region0.gpu_supply.h100=100,200"], tmp_path / "p", progress=None, frontier=True)


def test_a_reservation_sweep_shows_how_short_the_unservable_points_are(tmp_path):
    """A request no assignment can hold is 'infeasible' for the solver; the sweep still shows the
    least shortfall there (the elastic model), not a blank."""
    result = whatif(str(EXAMPLES / "reservation-small.json"), ["reservations.res0001.capacity_rru=61,400"],
                    tmp_path / "sweep", progress=None, plot=False, time_limit=20)
    served, short = result.rows
    assert served["status"] == "optimal" and served["shortfall_rru"] == 0
    assert short["status"] == "infeasible" and short["shortfall_rru"] == pytest.approx(294)


def test_compare_of_a_plan_with_itself_shows_no_change(tmp_path):
    instance = fleetplan.load_instance(ALLOCATION)
    plan = fleetplan.solve(instance).plan
    table = compare({"a": (instance, plan), "b": (instance, plan)})
    assert all(row["verdicts"] == ["same"] or row["verdicts"] == [None] for row in table.rows)
    assert all(row["changes"] in ([0.0], [None]) for row in table.rows)


def test_compare_says_which_is_better_with_units(tmp_path, capsys):
    instance = fleetplan.load_instance(ALLOCATION)
    for name in ("max-min-fairness", "max-throughput"):
        fleetplan.save(fleetplan.solve(instance, name).plan, tmp_path / f"{name}.json")
    csv_out = tmp_path / "table.csv"
    assert main(["compare", str(tmp_path / "max-min-fairness.json"), str(tmp_path / "max-throughput.json"),
                 "--instance", ALLOCATION, "-o", str(csv_out)]) == 0
    rows = {row["metric"]: row for row in csv.DictReader(open(csv_out))}
    assert rows["total_throughput"]["verdict max-throughput"] == "better"
    assert rows["total_throughput"]["unit"] == "steps/s"
    png = tmp_path / "table.png"
    assert main(["compare", str(tmp_path / "max-min-fairness.json"), str(tmp_path / "max-throughput.json"),
                 "--instance", ALLOCATION, "-o", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_compare_ranks_objectives_only_between_plans_of_one_policy(tmp_path, capsys):
    """Max-min fairness's objective (a normalised value) and max throughput's (steps/s) are
    different quantities: shown, never ranked; fractions change in percentage points; the
    picture's bars are coloured by each plan's verdict, not by its position."""
    instance = fleetplan.load_instance(ALLOCATION)
    las = fleetplan.solve(instance, "max-min-fairness").plan
    table = compare({"las": (instance, las), "thr": (instance, fleetplan.solve(instance, "max-throughput").plan)})
    objective = table.row("objective")
    assert objective["verdicts"] == ["not comparable"] and objective["changes"] == [None]
    assert table.rows[0]["metric"] == "min_time_share"  # the kind's decisive metrics lead
    same = compare({"a": (instance, las), "b": (instance, fleetplan.solve(instance, "max-min-fairness",
                                                                              aggregate=False).plan)})
    assert same.row("objective")["verdicts"] != ["not comparable"]
    for name in ("max-min-fairness", "max-throughput"):
        fleetplan.save(fleetplan.solve(instance, name).plan, tmp_path / f"{name}.json")
    assert main(["compare", str(tmp_path / "max-min-fairness.json"), str(tmp_path / "max-throughput.json"),
                 "--instance", ALLOCATION]) == 0
    out = capsys.readouterr().out
    assert "different objectives" in out and " pp" in out
    from fleetplan.plotting.planning import VERDICT_COLOURS, plot_comparison

    figure = plot_comparison(table)
    for ax in figure.axes:
        title = ax.get_title().split(" (")[0]
        row = table.row(title)
        colours = [patch.get_facecolor()[:3] for patch in ax.patches]
        from matplotlib.colors import to_rgb

        assert colours[1] == pytest.approx(to_rgb(VERDICT_COLOURS.get(row["verdicts"][0], "#8c8c8c")))


def test_compare_refuses_plans_of_different_kinds(tmp_path, capsys):
    fleetplan.save(fleetplan.solve(fleetplan.load_instance(ALLOCATION)).plan, tmp_path / "a.json")
    fleetplan.save(fleetplan.solve(fleetplan.load_instance(PLACEMENT), "keep").plan, tmp_path / "p.json")
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "p.json"),
                 "--instance", ALLOCATION, "--instance", PLACEMENT]) == 2
    assert "different kinds" in capsys.readouterr().err


def test_whatif_on_a_dask_cluster_and_in_separate_processes_gives_the_same_table(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    vary = ["worker_types.v100.count=8,16,24"]
    inline = whatif(ALLOCATION, vary, tmp_path / "inline", progress=None, plot=False)
    processes = whatif(ALLOCATION, vary, tmp_path / "processes", progress=None, plot=False, workers=2)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        on_dask = whatif(ALLOCATION, vary, tmp_path / "dask", progress=None, plot=False, executor="dask",
                         address=cluster.scheduler_address)

    def answers(result):
        return [(row["worker_types.v100.count"], row["status"], row["objective"], row["total_throughput"])
                for row in result.rows]

    assert answers(inline) == answers(processes) == answers(on_dask)


@pytest.mark.parametrize("changes", [
    {"worker_types.v100.count": 3}, {"worker_types.k80.count": 40, "worker_types.v100.cost_per_hour": 2.5},
    {"jobs.*.weight*": 2}, {"worker_types.v100.count": 0, "worker_types.p100.count": 0, "worker_types.k80.count": 0},
    {"worker_types.v100.count": 0, "worker_types.p100.count": 0, "worker_types.k80.count": 1},
])
def test_a_changed_instance_equals_a_whole_validation_of_the_changed_file(changes):
    """changed_instance checks only what a change can break; its answer (the instance, its
    arrays, or the error) is the whole file's validation's."""
    import numpy as np

    from fleetplan.instances import instance_from_data
    from fleetplan.instances.paths import changed_instance

    data = json.loads(open(ALLOCATION).read())
    base = instance_from_data(data)
    try:
        whole = instance_from_data(apply_changes(data, changes))
    except InstanceError as error:
        with pytest.raises(InstanceError) as raised:
            changed_instance(base, data, changes)
        assert raised.value.lines() == error.lines()
        return
    quick = changed_instance(base, data, changes)
    assert quick.model_dump() == whole.model_dump()
    for name in ("throughput", "num_workers", "cost_per_hour", "scale_factor", "weight"):
        assert np.array_equal(getattr(quick.arrays(), name), getattr(whole.arrays(), name))


def test_size_whatif_and_compare_write_self_contained_reports(tmp_path, capsys):
    """--report FILE.html: the question, the inputs, the answer, the pictures inline (no file or
    script to fetch), the command that reproduces it; --plot draws the sizing."""
    import re

    inventory = str(EXAMPLES / "inventory-30-jobs.json")
    size_report, picture = tmp_path / "size.html", tmp_path / "size.png"
    assert main(["size", inventory, "--target", "min_time_share>=0.5", "--buy", "k80", "--policy",
                 "max-min-fairness", "--plot", str(picture), "--report", str(size_report)]) == 0
    assert picture.read_bytes()[:4] == b"\x89PNG"
    sweep_report = tmp_path / "sweep.html"
    assert main(["whatif", inventory, "--vary", "worker_types.v100.count=3,7", "-o", str(tmp_path / "sweep"),
                 "--report", str(sweep_report)]) == 0
    for name in ("max-min-fairness", "max-throughput"):
        fleetplan.save(fleetplan.solve(fleetplan.load_instance(inventory), name).plan, tmp_path / f"{name}.json")
    compare_report = tmp_path / "compare.html"
    assert main(["compare", str(tmp_path / "max-min-fairness.json"), str(tmp_path / "max-throughput.json"),
                 "--instance", inventory, "--report", str(compare_report)]) == 0
    for report in (size_report, sweep_report, compare_report):
        text = report.read_text()
        assert text.startswith("<!DOCTYPE html>") and "The question" in text and "Reproduce" in text
        assert "data:image/png;base64," in text
        assert not re.search(r"<script|<link|src=\"http", text)
    assert "fleetplan size" in size_report.read_text() and "24" in size_report.read_text()
    assert main(["size", inventory, "--target", "min_time_share>=0.5", "--buy", "k80",
                 "--report", str(tmp_path / "x.txt")]) == 2
    assert "--report" in capsys.readouterr().err


def test_whatif_reads_a_folder_of_tables_as_the_file(tmp_path):
    folder = tmp_path / "tables"
    assert main(["export", ALLOCATION, "--format", "parquet", "-o", str(folder)]) == 0
    vary = ["worker_types.v100.count=8,16"]
    from_folder = whatif(str(folder), vary, progress=None)
    from_file = whatif(ALLOCATION, vary, progress=None)
    assert [row["objective"] for row in from_folder.rows] == [row["objective"] for row in from_file.rows]
