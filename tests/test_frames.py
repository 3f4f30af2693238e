"""Tables in and out: CSV/Parquet/DataFrame round trips give instances equal to
the JSON ones, exported plans read back evaluate the same, bad cells name file, row and column,
and the import/export/plot commands (fleetplan.cli.commands.tables) behave as documented."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import edit_line, write_frames

import fleetplan
from fleetplan.cli.commands.tables import add_arguments
from fleetplan.instances import InstanceError, evaluate, generate, load_instance, load_plan
from fleetplan.instances.allocation import frames as af
from fleetplan.instances.frames import plan_from_frame, plan_to_frame, write_table
from fleetplan.instances.placement import frames as pf

ROOT = Path(__file__).resolve().parent.parent
ALLOCATION = ROOT / "examples" / "allocation-64-jobs.json"
PLACEMENT = ROOT / "examples" / "placement-small.json"
FORMATS = ("csv", "parquet")


def space_sharing_instance():
    """A small instance with every optional allocation table: entities, colocations, SLOs."""
    return fleetplan.instances.instance_from_data({
        "kind": "allocation", "name": "spaced",
        "worker_types": [{"name": "v100", "count": 2, "cost_per_hour": 2.5}, {"name": "k80", "count": 2}],
        "entities": [{"id": "team-a", "weight": 2.0}, {"id": "team-b", "policy": "fifo"}],
        "colocations": [{"job_types": ["A", "B"], "throughput": {"v100": [3.0, 1.5]}},
                        {"job_types": ["A", "A"], "scale_factor": 1, "throughput": {"v100": [2.0, 2.0],
                                                                                   "k80": [0.5, 0.25]}}],
        "jobs": [
            {"id": "a1", "throughput": {"v100": 4.0, "k80": 1.0}, "job_type": "A", "entity": "team-a",
             "steps_left": 1e5, "slo_hours": 40.0},
            {"id": "a2", "throughput": {"v100": 4.0, "k80": 0.0}, "job_type": "A", "entity": "team-b",
             "weight": 3.0, "arrival_time": 12.5},
            {"id": "b1", "throughput": {"v100": 2.0}, "job_type": "B", "time_elapsed": 7200.0},
        ],
    })


# --- instances ----------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_allocation_example_round_trips(tmp_path, fmt):
    instance = load_instance(ALLOCATION)
    paths = write_frames(af.to_frames(instance), tmp_path, fmt)
    assert set(paths) == {"cluster", "jobs"}
    back = af.from_frames(jobs=paths["jobs"], cluster=paths["cluster"], name=instance.name)
    assert back.model_dump() == instance.model_dump()


@pytest.mark.parametrize("fmt", FORMATS)
def test_allocation_optional_tables_round_trip(tmp_path, fmt):
    instance = space_sharing_instance()
    paths = write_frames(af.to_frames(instance), tmp_path, fmt)
    assert set(paths) == {"cluster", "jobs", "entities", "colocations"}
    back = af.from_frames(jobs=paths["jobs"], cluster=paths["cluster"], entities=paths["entities"],
                          colocations=paths["colocations"], name="spaced")
    assert back.model_dump() == instance.model_dump()
    # A throughput written as 0 stays 0; one left out stays left out.
    assert back.jobs[1].throughput == {"v100": 4.0, "k80": 0.0}
    assert back.jobs[2].throughput == {"v100": 2.0}


def test_dataframes_in_directly():
    instance = load_instance(ALLOCATION)
    frames = af.to_frames(instance)
    back = af.from_frames(jobs=frames["jobs"], cluster=frames["cluster"], name=instance.name)
    assert back.model_dump() == instance.model_dump()


@pytest.mark.parametrize("fmt", FORMATS)
def test_placement_example_round_trips(tmp_path, fmt):
    instance = load_instance(PLACEMENT)
    paths = write_frames(pf.to_frames(instance), tmp_path, fmt)
    back = pf.from_frames(tables=paths["tables"], jobs=paths["jobs"], regions=paths["regions"],
                          settings=paths["settings"])
    assert back.model_dump() == instance.model_dump()
    np.testing.assert_array_equal(back.arrays().job_tables, instance.arrays().job_tables)


def test_placement_generated_round_trips_without_optional_columns(tmp_path):
    instance = generate("placement", {"regions": 5, "tables": 60, "jobs": 80}, seed=2)
    data = instance.model_dump()
    data["jobs"]["weight"] = data["jobs"]["read_fraction"] = None
    instance = fleetplan.instances.instance_from_data(data)
    frames = pf.to_frames(instance)
    assert "weight" not in frames["jobs"].columns
    paths = write_frames(frames, tmp_path, "csv")
    back = pf.from_frames(tables=paths["tables"], jobs=paths["jobs"], regions=paths["regions"],
                          settings=frames["settings"])
    assert back.model_dump() == instance.model_dump()


def test_placement_defaults_without_settings():
    frames = pf.to_frames(load_instance(PLACEMENT))
    jobs = frames["jobs"].drop(columns=["recurring", "gpu_hours"])
    instance = pf.from_frames(tables=frames["tables"], jobs=jobs, regions=frames["regions"], name="bare")
    assert instance.name == "bare" and all(instance.jobs.recurring)
    assert instance.home_training_threshold == 0.0  # the schema's default, not the example's
    ml = [k == "ml" for k in instance.jobs.kind]
    assert not any(h > 0 for h, is_ml in zip(instance.jobs.gpu_hours, ml, strict=True) if not is_ml)


# --- plans --------------------------------------------------------------------------------

def _same_evaluation(instance, plan, again):
    first, second = evaluate(instance, plan), evaluate(instance, again)
    assert second.model_dump() == first.model_dump()


@pytest.mark.parametrize("fmt", FORMATS)
def test_allocation_plan_round_trips(tmp_path, fmt):
    instance = load_instance(ALLOCATION)
    result = fleetplan.solve(instance, "max-min-fairness")
    frame = plan_to_frame(instance, result.plan)
    assert list(frame.columns) == ["job", "share_v100", "share_p100", "share_k80", "effective_throughput",
                                   "normalized_throughput", "policy"]
    evaluation = evaluate(instance, result.plan)
    assert frame["normalized_throughput"].min() == pytest.approx(evaluation.metrics["min_normalized_throughput"])
    path = write_table(frame, tmp_path / f"plan.{fmt}")
    again = plan_from_frame(instance, path)
    np.testing.assert_array_equal(again.matrix(instance), result.plan.matrix(instance))
    assert again.policy == result.plan.policy
    _same_evaluation(instance, result.plan, again)
    if fmt == "parquet":  # Parquet keeps the plan's metadata
        assert again.solver == result.plan.solver


def test_allocation_pair_plan_round_trips(tmp_path):
    instance = generate("allocation", {"jobs": 16, "space_sharing": True}, seed=4)
    result = fleetplan.solve(instance, "max-min-fairness", space_sharing=True)
    assert result.plan.pairs, "the case needs a plan with pair rows"
    frame = plan_to_frame(instance, result.plan)
    assert "partner" in frame.columns and frame["partner"].notna().sum() == len(result.plan.pairs)
    again = plan_from_frame(instance, write_table(frame, tmp_path / "plan.csv"))
    _same_evaluation(instance, result.plan, again)


@pytest.mark.parametrize("fmt", FORMATS)
def test_placement_plan_round_trips(tmp_path, fmt):
    instance = load_instance(PLACEMENT)
    result = fleetplan.solve(instance, "hill-climb")
    plan = result.plan
    assert plan.moves and plan.replicas.table, "the case needs moves and replicas"
    frame = plan_to_frame(instance, plan)
    homes = frame[frame["role"] == "home"]
    assert homes["table"].tolist() == instance.tables.id  # tables by id, not by row number
    replicas = frame[frame["role"] == "replica"]
    assert set(replicas["table"]) <= set(instance.tables.id)
    again = plan_from_frame(instance, write_table(frame, tmp_path / f"plan.{fmt}"))
    _same_evaluation(instance, plan, again)
    assert [m.model_dump() for m in again.moves] == [m.model_dump() for m in plan.moves]
    assert again.replicas.model_dump() == plan.replicas.model_dump()


def test_placement_plan_by_hand_needs_only_homes():
    instance = load_instance(PLACEMENT)
    frame = pd.DataFrame({"role": "home", "table": instance.tables.id[::-1], "region": "region1"})
    plan = plan_from_frame(instance, frame)
    assert plan.home.region == ["region1"] * len(instance.tables.id)
    assert plan.home.table == instance.tables.id  # by id, in the instance's order
    assert evaluate(instance, plan).metrics["tables_moved"] == len(instance.tables.id)


def test_region_frame_counts_every_byte():
    instance = load_instance(PLACEMENT)
    plan = fleetplan.solve(instance, "hill-climb").plan
    regions = pf.region_frame(instance, plan)
    sizes = sum(instance.tables.size_bytes)
    assert regions["stored_today_bytes"].sum() == pytest.approx(sizes)
    assert regions["home_plan_bytes"].sum() == pytest.approx(sizes)
    assert regions["replica_plan_bytes"].sum() == pytest.approx(sum(plan.replicas.bytes))
    metrics = evaluate(instance, plan).metrics
    utilisation = (regions["stored_plan_bytes"] / regions["storage_capacity_bytes"]).max()
    assert utilisation == pytest.approx(metrics["storage_utilization_max"])


# --- bad tables ---------------------------------------------------------------------------

def _alloc_csvs(tmp_path):
    frames = af.to_frames(load_instance(ALLOCATION))
    return {name: write_table(frame, tmp_path / f"{name}.csv") for name, frame in frames.items()}


@pytest.mark.parametrize("file, line, old, new, where", [
    ("jobs", 3, ",2,1.0,", ",two,1.0,", "row 2 (line 3), column 'scale_factor'"),
    ("jobs", 4, "job2,7.922054367597505", "job2,-7.9", "row 3 (line 4), column 'throughput_v100'"),
    ("jobs", 5, ",1,1.0,", ",0,1.0,", "row 4 (line 5), column 'scale_factor'"),
    ("jobs", 6, "job4,", "job3,", "row 5 (line 6), column 'id'"),
    ("jobs", 1, "scale_factor", "scale_facter", "column 'scale_facter'"),
    ("jobs", 1, "throughput_k80", "throughput_a100", "column 'throughput_a100'"),
    ("jobs", 1, "id,", "ident,", "column 'ident'"),
    ("jobs", 2, ",0.0,0.0,", ",inf,0.0,", "row 1 (line 2), column 'arrival_time'"),
    ("cluster", 3, ",16,", ",sixteen,", "row 2 (line 3), column 'count'"),
    ("cluster", 2, ",16,", ",-1,", "row 1 (line 2), column 'count'"),
    ("cluster", 3, "p100,", "v100,", "row 2 (line 3), column 'name'"),
])
def test_bad_allocation_csv_names_file_row_and_column(tmp_path, file, line, old, new, where):
    paths = _alloc_csvs(tmp_path)
    edit_line(paths[file], line, old, new)
    with pytest.raises(InstanceError) as caught:
        af.from_frames(jobs=paths["jobs"], cluster=paths["cluster"])
    message = str(caught.value)
    assert message.startswith(f"{paths[file]}: {where}: "), message
    assert "\n" not in message


def test_job_that_can_run_nowhere_names_its_row(tmp_path):
    paths = _alloc_csvs(tmp_path)
    edit_line(paths["jobs"], 2, "job0,4.426088263367452,2.4026681703106223,0.5047705689725351", "job0,,,")
    with pytest.raises(InstanceError, match=r"jobs\.csv: row 1 \(line 2\): job 'job0' can run on no worker type"):
        af.from_frames(jobs=paths["jobs"], cluster=paths["cluster"])


def _place_csvs(tmp_path):
    frames = pf.to_frames(load_instance(PLACEMENT))
    return {name: write_table(frame, tmp_path / f"{name}.csv") for name, frame in frames.items() if name != "settings"}


@pytest.mark.parametrize("file, line, old, new, where", [
    ("jobs", 3, "t22", "t999", "row 2 (line 3), column 'tables'"),
    ("jobs", 3, ",ml,", ",gpu,", "row 2 (line 3), column 'kind'"),
    ("jobs", 3, ",h100,", ",,", "row 2 (line 3), column 'gpu_type'"),
    ("jobs", 3, ",h100,", ",b200,", "row 2 (line 3), column 'gpu_type'"),
    ("jobs", 3, ",True", ",maybe", "row 2 (line 3), column 'recurring'"),
    ("jobs", 3, ";t33;", ";t33;t33;", "row 2 (line 3), column 'tables'"),
    ("jobs", 4, ",0,app0,", ",9,app0,", "row 3 (line 4), column 'priority'"),
    ("jobs", 4, ",app0,", ",app7,", "row 3 (line 4), column 'application'"),
    ("tables", 4, "region0", "region9", "row 3 (line 4), column 'home'"),
    ("tables", 5, "t3,876752138011.0", "t3,big", "row 4 (line 5), column 'size_bytes'"),
    ("tables", 5, "t3,", "t2,", "row 4 (line 5), column 'id'"),
    ("regions", 2, ",125.751,", ",-1,", "row 1 (line 2), column 'gpu_supply_h100'"),
    ("regions", 2, "region1,", "region7,", "row 1 (line 2), column 'dr_partner'"),
    ("regions", 1, "storage_capacity_bytes", "storage", "column 'storage'"),
])
def test_bad_placement_csv_names_file_row_and_column(tmp_path, file, line, old, new, where):
    paths = _place_csvs(tmp_path)
    edit_line(paths[file], line, old, new)
    with pytest.raises(InstanceError) as caught:
        pf.from_frames(tables=paths["tables"], jobs=paths["jobs"], regions=paths["regions"])
    message = str(caught.value)
    assert message.startswith(f"{paths[file]}: {where}: "), message


def test_bad_settings_name_the_settings_file(tmp_path):
    paths = _place_csvs(tmp_path)
    settings = tmp_path / "settings.yaml"
    settings.write_text("weights:\n  priority: [1, 2, 3]\n")
    with pytest.raises(InstanceError, match=r"settings\.yaml: weights\.priority: "):
        pf.from_frames(tables=paths["tables"], jobs=paths["jobs"], regions=paths["regions"], settings=settings)
    settings.write_text("tables: 3\n")
    with pytest.raises(InstanceError, match=r"settings\.yaml: tables: unknown setting \(it comes from the tables\)"):
        pf.from_frames(tables=paths["tables"], jobs=paths["jobs"], regions=paths["regions"], settings=settings)


def test_bad_plan_tables_name_row_and_column(tmp_path):
    instance = load_instance(PLACEMENT)
    frame = plan_to_frame(instance, fleetplan.solve(instance, "hill-climb").plan)
    path = write_table(frame, tmp_path / "plan.csv")
    edit_line(path, 5, "home,t3,region1,", "home,t3,region9,")
    with pytest.raises(InstanceError, match=r"plan\.csv: row 4 \(line 5\), column 'region': unknown region 'region9'"):
        plan_from_frame(instance, path)
    cut = frame[~((frame["role"] == "home") & (frame["table"] == "t7"))]
    with pytest.raises(InstanceError, match=r"plan: column 'table': no home row for 1 table\(s\): t7"):
        plan_from_frame(instance, cut)
    allocation = load_instance(ALLOCATION)
    wrong = pd.DataFrame({"job": ["job0"], "share_v100": [1.0], "share_p100": [0.0]})
    with pytest.raises(InstanceError, match=r"column 'share_k80': required column is missing"):
        plan_from_frame(allocation, wrong)


def test_empty_and_duplicate_headers(tmp_path):
    empty = tmp_path / "jobs.csv"
    empty.write_text("")
    with pytest.raises(InstanceError, match="jobs.csv: empty file"):
        af.from_frames(jobs=empty, cluster=empty)
    twice = tmp_path / "cluster.csv"
    twice.write_text("name,count,count\nv100,1,1\n")
    with pytest.raises(InstanceError, match=r"cluster\.csv: line 1, column 'count': appears twice"):
        af.from_frames(jobs=empty, cluster=twice)


# --- the commands -------------------------------------------------------------------------

def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """The commands through their own parser, with cli.main's error convention (exit 2)."""
    parser = argparse.ArgumentParser(prog="fleetplan")
    add_arguments(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
    except InstanceError as error:
        print(f"error: {error}", file=sys.stderr)
        code = 2
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_import_export_round_trip(tmp_path, capsys):
    code, out, _ = run(["export", str(ALLOCATION), "-o", str(tmp_path / "tables")], capsys)
    assert code == 0 and "cluster.csv" in out
    cluster = tmp_path / "cluster.json"
    code, out, _ = run(["import", "allocation", "--jobs", str(tmp_path / "tables" / "jobs.csv"),
                        "--cluster", str(tmp_path / "tables" / "cluster.csv"), "--name", "gavel-64-jobs-multi-gpu",
                        "-o", str(cluster), "--json"], capsys)
    assert code == 0 and json.loads(out)["jobs"] == 64
    assert load_instance(cluster).model_dump() == load_instance(ALLOCATION).model_dump()

    plan_json = tmp_path / "plan.json"
    fleetplan.instances.save(fleetplan.solve(load_instance(cluster)).plan, plan_json)
    for fmt in FORMATS:
        table = tmp_path / f"plan.{fmt}"
        code, out, _ = run(["export", str(plan_json), "--instance", str(cluster), "-o", str(table)], capsys)
        assert code == 0 and f"as a {fmt} table (64 rows)" in out
        back = tmp_path / f"back-{fmt}.json"
        code, _, _ = run(["import", "plan", str(table), "--instance", str(cluster), "-o", str(back)], capsys)
        assert code == 0
        instance = load_instance(cluster)
        _same_evaluation(instance, load_plan(plan_json), load_plan(back))


def test_cli_import_placement_and_plot(tmp_path, capsys):
    code, _, _ = run(["export", str(PLACEMENT), "--format", "parquet", "-o", str(tmp_path / "t")], capsys)
    assert code == 0
    folder = tmp_path / "t"
    assert sorted(p.name for p in folder.iterdir()) == ["jobs.parquet", "regions.parquet", "settings.yaml",
                                                        "tables.parquet"]
    out_file = tmp_path / "tables.json"
    code, _, _ = run(["import", "placement", "--tables", str(folder / "tables.parquet"), "--jobs",
                      str(folder / "jobs.parquet"), "--regions", str(folder / "regions.parquet"),
                      "--settings", str(folder / "settings.yaml"), "-o", str(out_file)], capsys)
    assert code == 0
    assert load_instance(out_file).model_dump() == load_instance(PLACEMENT).model_dump()
    plan = tmp_path / "plan.json"
    fleetplan.instances.save(fleetplan.solve(load_instance(out_file)).plan, plan)
    image = tmp_path / "plan.png"
    code, out, _ = run(["plot", str(out_file), str(plan), "-o", str(image), "--json"], capsys)
    assert code == 0 and json.loads(out)["output"] == str(image)
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv, message", [
    (["export", "{plan}", "-o", "{tmp}/x"], "is a plan, not an instance: pass --instance"),
    (["export", "{plan}", "--instance", "{alloc}", "-o", "{tmp}/p.csv", "--format", "parquet"],
     "the suffix says csv but --format is parquet"),
    (["export", "{plan}", "--instance", "{place}", "-o", "{plan}"], "is also an input of this command"),
    (["export", "{plan}", "--instance", "{place}", "-o", "{tmp}/p.txt"], "a plan table is a .csv or .parquet file"),
    (["plot", "{alloc}", "{plan}", "-o", "{tmp}/x.png"], "a plan of kind 'placement' cannot go with an instance of kind 'allocation'"),
    (["plot", "{place}", "{plan}", "-o", "{tmp}/x.gif"], "unknown image type '.gif'"),
    (["plot", "{place}", "{plan}", "-o", "{tmp}/nowhere/x.png"], "does not exist"),
    (["import", "plan", "{tmp}/missing.csv", "--instance", "{place}", "-o", "{tmp}/p.json"], "missing.csv: file not found"),
    (["import", "plan", "{tmp}/missing.csv", "--instance", "{place}", "--policy", "fifo", "-o", "{tmp}/p.json"],
     "only allocation plans have a policy"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, message):
    instance = load_instance(PLACEMENT)
    plan = tmp_path / "placement-plan.json"
    fleetplan.instances.save(fleetplan.solve(instance, "keep").plan, plan)
    values = {"plan": plan, "alloc": ALLOCATION, "place": PLACEMENT, "tmp": tmp_path}
    code, _, err = run([a.format(**values) for a in argv], capsys)
    assert code == 2
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "x").exists() and not (tmp_path / "p.json").exists()
    assert load_plan(plan).kind == "placement"  # never overwritten


def test_heavy_libraries_load_only_when_used():
    code = (
        "import sys, fleetplan.instances\n"
        "before = {m for m in ('pandas', 'pyarrow', 'matplotlib') if m in sys.modules}\n"
        "import fleetplan.cli.commands.tables, fleetplan.plotting, fleetplan.instances.frames\n"
        "import fleetplan.instances.allocation.frames, fleetplan.instances.placement.frames\n"
        "after = {m for m in ('pandas', 'pyarrow', 'matplotlib') if m in sys.modules}\n"
        "print(sorted(after - before))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_several_bad_cells_are_all_listed(tmp_path):
    paths = _alloc_csvs(tmp_path)
    edit_line(paths["jobs"], 3, ",2,1.0,", ",-2,1.0,")
    edit_line(paths["jobs"], 5, ",1,1.0,", ",0,1.0,")
    with pytest.raises(InstanceError) as caught:
        af.from_frames(jobs=paths["jobs"], cluster=paths["cluster"])
    lines = caught.value.lines()
    assert [line.split(": ")[1] for line in lines] == ["row 2 (line 3), column 'scale_factor'",
                                                       "row 4 (line 5), column 'scale_factor'"]
    assert all(line.startswith(f"{paths['jobs']}: ") for line in lines)


def test_documented_example_tables_import(capsys, tmp_path):
    """The CSVs docs/data-in-out.md walks through (examples/tables/) import as documented."""
    folder = ROOT / "examples" / "tables"
    code, out, _ = run(["import", "allocation", "--jobs", str(folder / "allocation" / "jobs.csv"),
                        "--cluster", str(folder / "allocation" / "gpus.csv"), "--name", "four-jobs",
                        "-o", str(tmp_path / "cluster.json")], capsys)
    assert code == 0 and "(4 jobs, 2 GPU types)" in out
    instance = load_instance(tmp_path / "cluster.json")
    assert instance.jobs[3].throughput == {"k80": 0.8} and instance.jobs[3].scale_factor == 2
    code, out, _ = run(["import", "placement", "--tables", str(folder / "placement" / "tables.csv"),
                        "--jobs", str(folder / "placement" / "jobs.csv"),
                        "--regions", str(folder / "placement" / "regions.csv"),
                        "--settings", str(folder / "placement" / "settings.yaml"),
                        "-o", str(tmp_path / "tables.json")], capsys)
    assert code == 0 and "'three-regions' (3 regions, 5 tables, 4 jobs)" in out
    placement = load_instance(tmp_path / "tables.json")
    assert placement.daily_move_quota_bytes == 2e12  # written 2.0e12 in YAML: a number, not a string
    assert placement.jobs.tables[0] == [0, 1] and placement.jobs.recurring == [True, True, True, False]


def test_docs_python_examples_run(monkeypatch):
    """docs/data-in-out.md's Python examples are doctests, run from the repository root."""
    import doctest

    monkeypatch.chdir(ROOT)
    failures, tried = doctest.testfile(str(ROOT / "docs" / "data-in-out.md"), module_relative=False)
    assert tried > 10 and failures == 0


@pytest.mark.parametrize("module", [af, pf])
def test_module_examples_run(module):
    import doctest

    failures, tried = doctest.testmod(module)
    assert tried > 3 and failures == 0


@pytest.mark.parametrize("column, values, message", [
    ("weight", ["1.0", "nan", "1.0"], "row 2, column 'weight': must be a finite number"),
    ("weight", [1.0, float("inf"), 1.0], "row 2, column 'weight': must be a finite number"),
    ("weight", [1.0, True, 1.0], "row 2, column 'weight': must be a number, got True"),
    ("scale_factor", [1, 1.5, 1], "row 2, column 'scale_factor': must be an integer, got 1.5"),
    ("scale_factor", ["1", " ", "1"], None),  # an empty cell takes the default
    ("scale_factor", ["1", "2.0", "1"], None),  # a whole number written as 2.0 is an integer
    ("job_type", ["A", 7, "B"], "row 2, column 'job_type': must be text, got 7"),
    ("id", ["a", "", "c"], "row 2, column 'id': a value is required"),
])
def test_typed_and_text_cells_in_dataframes(column, values, message):
    """The fast conversions and the careful one agree: same values, same first bad cell."""
    cluster = pd.DataFrame({"name": ["v100"], "count": [4]})
    jobs = pd.DataFrame({"id": ["a", "b", "c"], "throughput_v100": [1.0, 2.0, 3.0]})
    jobs[column] = pd.Series(values, dtype=object)
    if message is None:
        instance = af.from_frames(jobs=jobs, cluster=cluster)
        assert [job.scale_factor for job in instance.jobs] == [1, 2 if values[1].strip() else 1, 1]
        return
    with pytest.raises(InstanceError) as caught:
        af.from_frames(jobs=jobs, cluster=cluster)
    assert str(caught.value).startswith(f"jobs: {message}"), str(caught.value)


def test_booleans_and_id_lists_fast_and_careful_agree():
    frames = pf.to_frames(load_instance(PLACEMENT))
    jobs = frames["jobs"].copy()
    jobs["recurring"] = ["yes" if r else "no" for r in jobs["recurring"]]
    jobs["tables"] = [" ; ".join(t.split(";")) for t in jobs["tables"]]  # spaces around ids
    instance = pf.from_frames(tables=frames["tables"], jobs=jobs, regions=frames["regions"],
                              settings=frames["settings"])
    assert instance.model_dump() == load_instance(PLACEMENT).model_dump()
    jobs.loc[3, "tables"] = "t1;;t2"
    with pytest.raises(InstanceError, match=r"jobs: row 4, column 'tables': empty id in the list"):
        pf.from_frames(tables=frames["tables"], jobs=jobs, regions=frames["regions"])
