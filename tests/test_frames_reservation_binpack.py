"""Reservation and binpack instances and plans as CSV/Parquet tables: table -> instance -> table
round trips give equal instances (and plans that judge the same), a bad cell is one error naming
the file, row and column, and ``fleetplan import reservation|binpack`` / ``export`` work."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import edit_line, write_frames

import fleetplan
from fleetplan.cli.app import main
from fleetplan.instances import InstanceError, evaluate, generate, load_instance, load_plan
from fleetplan.instances.binpack import frames as bf
from fleetplan.instances.frames import (
    from_frames,
    plan_from_frame,
    plan_to_frame,
    to_frames,
    write_table,
)
from fleetplan.instances.reservation import frames as rf

ROOT = Path(__file__).resolve().parent.parent
RESERVATION = ROOT / "examples" / "reservation-small.json"
BINPACK = ROOT / "examples" / "binpack-small.json"


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("path", [RESERVATION, BINPACK], ids=["reservation", "binpack"])
def test_example_round_trips_through_files(tmp_path, path, fmt):
    instance = load_instance(path)
    paths = write_frames(to_frames(instance), tmp_path, fmt)
    again = from_frames(instance.kind, **paths)
    assert again.model_dump() == instance.model_dump()
    # and back to the same tables
    for name, frame in to_frames(again).items():
        if name != "settings":
            pd.testing.assert_frame_equal(frame, to_frames(instance)[name])


@pytest.mark.parametrize("kind, params", [
    ("reservation", {"servers": 60}), ("binpack", {}),
])
def test_generated_instances_round_trip(tmp_path, kind, params):
    instance = generate(kind, params, seed=3)
    again = from_frames(kind, **write_frames(to_frames(instance), tmp_path, "csv"))
    assert again.model_dump() == instance.model_dump()


def test_reservation_extras_round_trip(tmp_path):
    """Server ids, rru overrides, a storage ratio and a datacenter with no fault domain."""
    data = load_instance(RESERVATION).model_dump()
    data["servers"]["id"] = [f"s{i:04d}" for i in range(len(data["servers"]["type"]))]
    data["datacenters"] = [*data["datacenters"], "dc09"]
    first = data["reservations"][1]
    first["rru"] = {first["accepts"][0]: 2.5}
    instance = fleetplan.instances.instance_from_data(data)
    frames = to_frames(instance)
    assert "rru_" + first["accepts"][0] in frames["reservations"] and frames["settings"]["datacenters"][-1] == "dc09"
    again = from_frames("reservation", **write_frames(frames, tmp_path, "csv"))
    assert again.model_dump() == instance.model_dump()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("path", [RESERVATION, BINPACK], ids=["reservation", "binpack"])
def test_plans_round_trip_and_judge_the_same(tmp_path, path, fmt):
    instance = load_instance(path)
    plan = fleetplan.solve(instance).plan
    table = write_table(plan_to_frame(instance, plan), tmp_path / f"plan.{fmt}")
    again = plan_from_frame(instance, table)
    assert again.model_dump(exclude={"solver", "options"}) == plan.model_dump(exclude={"solver", "options"})
    assert evaluate(instance, again).objective == evaluate(instance, plan).objective


def test_a_binpack_plan_with_preemptions_and_a_waiting_workload_reads_back():
    instance = load_instance(BINPACK)
    plan = fleetplan.solve(instance).plan
    assert any(not w.placed for w in plan.workloads) and any(j.preempted for w in plan.workloads for j in w.jobs)
    frame = plan_to_frame(instance, plan)
    waiting = frame[~frame["placed"]]
    assert waiting["job"].isna().all() and waiting["reason"].str.len().gt(0).all()
    assert plan_from_frame(instance, frame).model_dump() == plan.model_dump()


def _csvs(tmp_path, path):
    return write_frames(to_frames(load_instance(path)), tmp_path, "csv")


@pytest.mark.parametrize("file, line, old, new, where", [
    ("servers", 2, "gpu-h100,", "gpu-b200,", "row 1 (line 2), column 'type'"),
    ("servers", 3, ",dc01-msb01-rk00000,", ",rk-nowhere,", "row 2 (line 3), column 'rack'"),
    ("servers", 4, ",res0004,", ",res9999,", "row 3 (line 4), column 'current'"),
    ("servers", 5, ",False", ",perhaps", "row 4 (line 5), column 'maintenance'"),
    ("reservations", 3, "61.0,", "lots,", "row 2 (line 3), column 'capacity_rru'"),
    ("reservations", 3, "61.0,", "-1.0,", "row 2 (line 3), column 'capacity_rru'"),
    ("reservations", 3, "cpu-gen3;", "cpu-gen9;", "row 2 (line 3), column 'accepts'"),
    ("reservations", 3, ",general,", ",batch,", "row 2 (line 3), column 'workload'"),
    ("racks", 3, ",dc01-msb02", ",dc07-msb02", "row 2 (line 3), column 'fault_domain'"),
    ("fault_domains", 2, "dc01-msb01,", "dc01-msb02,", "row 2 (line 3), column 'id'"),
    ("server_types", 3, ",1.5", ",0", "row 2 (line 3), column 'rru'"),
    ("server_types", 3, ",cpu,", ",tpu,", "row 2 (line 3), column 'category'"),
])
def test_bad_reservation_cells_name_file_row_and_column(tmp_path, file, line, old, new, where):
    paths = _csvs(tmp_path, RESERVATION)
    edit_line(paths[file], line, old, new)
    with pytest.raises(InstanceError) as caught:
        from_frames("reservation", **paths)
    message = str(caught.value)
    assert message.startswith(f"{paths[file]}: {where}: "), message
    assert "\n" not in message


@pytest.mark.parametrize("file, line, old, new, where", [
    ("machines", 3, ",8,192,", ",eight,192,", "row 2 (line 3), column 'gpus'"),
    ("machines", 3, ",8,192,", ",-8,192,", "row 2 (line 3), column 'gpus'"),
    ("machines", 3, "m1,", "m0,", "row 2 (line 3), column 'id'"),
    ("workloads", 3, ",13,86.0", ",13,-86.0", "row 2 (line 3), column 'memory_gb_per_task'"),
    ("workloads", 3, "w1,t7,2,", "w1,t7,9,", "row 2 (line 3), column 'priority'"),
    ("workloads", 3, "w1,", "w0,", "row 2 (line 3), column 'job'"),  # w0 has two job0 now
    ("workloads", 4, "w2,t6,", "w1,t6,", "row 3 (line 4), column 'tenant'"),
    ("running", 2, ",3,-0.1503", ",3,5.0", "row 1 (line 2), column 'start_hours'"),
    ("holdings", 2, "r0,m1,", "r0,m99,", "row 1 (line 2), column 'machine'"),
    ("holdings", 2, "r0,m1,", "r99,m1,", "row 1 (line 2), column 'job'"),
    ("holdings", 2, ",4,31,", ",40,31,", "row 1 (line 2), column 'gpus'"),
])
def test_bad_binpack_cells_name_file_row_and_column(tmp_path, file, line, old, new, where):
    paths = _csvs(tmp_path, BINPACK)
    edit_line(paths[file], line, old, new)
    with pytest.raises(InstanceError) as caught:
        from_frames("binpack", **paths)
    message = str(caught.value)
    assert message.startswith(f"{paths[file]}: {where}: "), message
    assert "\n" not in message


def test_bad_plan_rows_name_row_and_column(tmp_path):
    instance = load_instance(RESERVATION)
    path = write_table(plan_to_frame(instance, fleetplan.solve(instance).plan), tmp_path / "plan.csv")
    edit_line(path, 3, ",res0004,res0004", ",res0004,res0404")
    with pytest.raises(InstanceError, match=r"plan\.csv: row 2 \(line 3\), column 'reservation': unknown reservation"):
        plan_from_frame(instance, path)
    frame = plan_to_frame(instance, fleetplan.solve(instance).plan).iloc[:-1]
    with pytest.raises(InstanceError, match=r"column 'server': no row for 1 server\(s\): 239"):
        plan_from_frame(instance, frame)
    binpack = load_instance(BINPACK)
    frame = plan_to_frame(binpack, fleetplan.solve(binpack).plan)
    frame.loc[frame["placed"].idxmax(), "tasks"] = None
    with pytest.raises(InstanceError, match=r"column 'tasks': a machine's row needs its tasks"):
        plan_from_frame(binpack, frame)


def test_bad_settings_name_the_settings_file(tmp_path):
    paths = _csvs(tmp_path, RESERVATION)
    paths["settings"].write_text("servers: 3\n")
    with pytest.raises(InstanceError, match=r"settings\.yaml: servers: unknown setting \(it comes from the tables\)"):
        from_frames("reservation", **paths)
    paths["settings"].write_text("disruption_budget: -1\n")
    with pytest.raises(InstanceError, match=r"settings\.yaml: disruption_budget: "):
        from_frames("reservation", **paths)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_cli_export_and_import_reservation_and_binpack(tmp_path, capsys, fmt):
    folder = tmp_path / "reservation"
    assert main(["export", str(RESERVATION), "--format", fmt, "-o", str(folder)]) == 0
    assert main(["import", "reservation", *[x for name in ("server_types", "fault_domains", "racks", "servers",
                                                         "reservations")
                                            for x in (f"--{name.replace('_', '-')}", str(folder / f"{name}.{fmt}"))],
                 "--settings", str(folder / "settings.yaml"), "-o", str(tmp_path / "r.json")]) == 0
    assert "(240 servers, 6 reservations)" in capsys.readouterr().out
    assert load_instance(tmp_path / "r.json").model_dump() == load_instance(RESERVATION).model_dump()

    folder = tmp_path / "binpack"
    assert main(["export", str(BINPACK), "--format", fmt, "-o", str(folder)]) == 0
    assert main(["import", "binpack", *[x for name in ("machines", "workloads", "running", "holdings")
                                        for x in (f"--{name}", str(folder / f"{name}.{fmt}"))],
                 "--settings", str(folder / "settings.yaml"), "-o", str(tmp_path / "b.json")]) == 0
    assert load_instance(tmp_path / "b.json").model_dump() == load_instance(BINPACK).model_dump()
    plan = tmp_path / "plan.json"
    capsys.readouterr()
    assert main(["solve", str(BINPACK), "-o", str(plan)]) == 0
    assert main(["export", str(plan), "--instance", str(BINPACK), "-o", str(tmp_path / f"plan.{fmt}")]) == 0
    assert main(["import", "plan", str(tmp_path / f"plan.{fmt}"), "--instance", str(BINPACK),
                 "-o", str(tmp_path / "again.json")]) == 0
    assert load_plan(tmp_path / "again.json").workloads == load_plan(plan).workloads


def test_cli_bad_cell_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys):
    paths = _csvs(tmp_path, BINPACK)
    edit_line(paths["machines"], 3, ",8,192,", ",eight,192,")
    out = tmp_path / "b.json"
    code = main(["import", "binpack", "--machines", str(paths["machines"]), "--workloads", str(paths["workloads"]),
                 "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert f"{paths['machines']}: row 2 (line 3), column 'gpus': must be an integer" in err
    assert len(err.strip().splitlines()) == 1
    code = main(["import", "binpack", "--machines", str(paths["machines"]), "--workloads", str(paths["workloads"]),
                 "--holdings", str(paths["holdings"]), "-o", str(out)])
    assert code == 2 and "--holdings: needs --running" in capsys.readouterr().err


@pytest.mark.parametrize("module", [rf, bf])
def test_module_examples_run(module):
    import doctest

    failures, tried = doctest.testmod(module)
    assert tried >= 3 and failures == 0


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_empty_tables_round_trip(tmp_path, fmt):
    """Nothing running (empty running and holdings tables); no reservations and every server free."""
    binpack = load_instance(BINPACK).model_dump()
    binpack["running"] = {"id": [], "workload": [], "tenant": [], "priority": [], "start_hours": [],
                          "holdings": {"job": [], "machine": [], "gpus": [], "cpus": [], "memory_gb": []}}
    reservation = load_instance(RESERVATION).model_dump()
    reservation["reservations"] = []
    reservation["servers"]["current"] = [None] * len(reservation["servers"]["current"])
    for data in (binpack, reservation):
        instance = fleetplan.instances.instance_from_data(data)
        folder = tmp_path / instance.kind
        folder.mkdir()
        again = from_frames(instance.kind, **write_frames(to_frames(instance), folder, fmt))
        assert again.model_dump() == instance.model_dump()


@pytest.mark.parametrize("path", [RESERVATION, BINPACK, ROOT / "examples" / "allocation-gavel-4.1.json"],
                         ids=["reservation", "binpack", "allocation"])
def test_an_exported_folder_loads_as_its_instance(tmp_path, capsys, path):
    """`fleetplan solve DIR` (and load_instance) reads a folder `export` wrote, whatever the kind."""
    folder = tmp_path / "tables"
    assert main(["export", str(path), "--format", "parquet", "-o", str(folder)]) == 0
    original = load_instance(path).model_dump()
    loaded = load_instance(folder).model_dump()
    if original["kind"] == "allocation":  # the allocation tables carry no name: the folder's
        original["name"] = "tables"
    assert loaded == original
    capsys.readouterr()
    assert main(["validate", str(folder)]) == 0


def test_a_folder_of_no_kind_s_tables_names_what_is_read(tmp_path):
    (tmp_path / "machines.csv").write_text("id\n")
    with pytest.raises(InstanceError, match="binpack: machines, workloads"):
        load_instance(tmp_path)
