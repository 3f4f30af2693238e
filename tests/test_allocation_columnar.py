"""An allocation instance's exported Parquet folder read column-wise
(:mod:`fleetplan.instances.allocation.columnar`): the same instance as the table reader
(``frames.from_frames``) on generated instances and on hand-edited tables, and on every bad table
the table reader's own one-line error (exit 2 from ``fleetplan solve``, no plan file)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

import fleetplan
from fleetplan.cli.app import main as cli
from fleetplan.instances.allocation import frames
from fleetplan.instances.allocation.columns import ColumnAllocationInstance
from fleetplan.instances.frames import write_table

GENERATED = {
    "plain": {"jobs": 40},
    "multi-gpu, SLOs": {"jobs": 40, "multi_gpu": True, "slo_fraction": 0.5},
    "entities (weights)": {"jobs": 30, "entities": 3},
    "space sharing": {"jobs": 30, "space_sharing": True, "multi_gpu": True},
    "noisy throughputs": {"jobs": 30, "throughput_noise": 0.1},
}


def export(instance, folder):
    folder.mkdir(parents=True, exist_ok=True)
    for name, frame in frames.to_frames(instance).items():
        write_table(frame, folder / f"{name}.parquet")
    return folder


def table_reader(folder):
    """The row-by-row reader on the same files: what the folder must give."""
    tables = {path.stem: str(path) for path in sorted(folder.glob("*.parquet"))}
    return frames.from_frames(**tables, name=folder.name)


def assert_same(fast, slow):
    a, b = fast.arrays(), slow.arrays()
    for field in ("throughput", "scale_factor", "weight", "num_workers", "cost_per_hour", "steps_left",
                  "time_elapsed", "isolated_time_elapsed", "slo_seconds", "arrival_rank", "colocation_class",
                  "colocation_throughput"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert a.job_ids == b.job_ids and a.worker_types == b.worker_types
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_dump_json() == slow.model_dump_json()  # the saved file, key order included


@pytest.mark.parametrize("params", GENERATED.values(), ids=GENERATED.keys())
def test_the_folder_is_the_table_readers_instance(tmp_path, params):
    instance = fleetplan.generate("allocation", params, seed=5)
    folder = export(instance, tmp_path / "tables")
    loaded = fleetplan.load_instance(folder)
    assert isinstance(loaded, ColumnAllocationInstance)  # read column-wise, not handed over
    slow = table_reader(folder)
    assert_same(loaded, slow)
    assert loaded.model_dump() == instance.model_copy(update={"name": "tables"}).model_dump()
    solver = "max-min-fairness"
    mine, theirs = fleetplan.solve(loaded, solver), fleetplan.solve(slow, solver)
    assert fleetplan.evaluate(loaded, mine.plan).objective == fleetplan.evaluate(slow, theirs.plan).objective
    assert mine.plan.allocation == theirs.plan.allocation


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    instance = fleetplan.generate("allocation", {"jobs": 12, "multi_gpu": True, "entities": 2,
                                                 "space_sharing": True, "slo_fraction": 0.5}, seed=7)
    return export(instance, tmp_path_factory.mktemp("allocation") / "tables")


def _mutated(folder, tmp_path, name, change):
    target = tmp_path / "tables"
    shutil.copytree(folder, target)
    frame = pd.read_parquet(target / f"{name}.parquet")
    result = change(frame)  # in place, or a new frame
    frame = frame if result is None else result
    frame.to_parquet(target / f"{name}.parquet", index=False)
    return target


def _set(column, value, row=1):
    def change(frame):
        frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value
        frame[column] = frame[column].infer_objects()
    change.__name__ = f"{column}={value!r}"
    return change


def _retyped(column, convert, label):
    def change(frame):
        frame[column] = convert(frame[column] if column in frame else None)
    change.__name__ = label
    return change


def _drop(column):
    def change(frame):
        del frame[column]
    change.__name__ = f"no {column}"
    return change


def _reordered(frame):
    return frame[list(reversed(frame.columns))]


def _first_steps_gone(frame):
    row = frame.index[frame["slo_hours"].notna()][0]
    frame.loc[row, "steps_left"] = np.nan


def _everywhere_zero(frame):
    for column in [c for c in frame.columns if c.startswith("throughput_")]:
        frame.loc[2, column] = np.nan


def _pair_half(frame):
    column = next(c for c in frame.columns if c.startswith("throughput_") and c.endswith("_a"))
    frame.loc[0, column] = np.nan if frame.loc[0, column] == frame.loc[0, column] else 1.0


# Edits the table reader accepts (the folder must give its instance, read column-wise or not)
# and edits it refuses (the folder must give its error, word for word).
MUTATIONS = [
    ("jobs", _set("throughput_k80", 0.0)),  # given as 0: kept in the job's dict
    ("jobs", _set("throughput_v100", np.nan)),
    ("jobs", _reordered),  # the dict lists the types in the table's column order
    ("jobs", _set("job_type", "")),  # an empty text cell is not given
    ("jobs", _set("id", " job1 ")),  # stripped
    ("jobs", _set("id", "job0")),  # a duplicate
    ("jobs", _set("id", None)),
    ("jobs", _set("throughput_v100", -1.0)),
    ("jobs", _set("throughput_v100", np.inf)),
    ("jobs", _set("scale_factor", 0)),
    ("jobs", _set("scale_factor", 1.5)),
    ("jobs", _set("scale_factor", 2.0, row=0)),  # an integral float: the reader takes it
    ("jobs", _retyped("scale_factor", lambda c: c.astype("uint64") + np.uint64(2**63), "scale factor >= 2^63")),
    ("jobs", _set("weight", 0.0)),
    ("jobs", _set("weight", None)),  # not given: the default weight
    ("jobs", _retyped("weight", lambda c: c.round().astype("int64").clip(lower=1), "integer weights")),
    ("jobs", _retyped("weight", lambda c: c > 0, "boolean weights")),
    ("jobs", _retyped("weight", lambda c: c.astype(str), "text weights")),
    ("jobs", _set("steps_left", -5.0)),
    ("jobs", _set("arrival_time", -1.0)),
    ("jobs", _set("time_elapsed", np.inf)),
    ("jobs", _set("slo_hours", 0.0)),
    ("jobs", _first_steps_gone),  # an SLO without the steps left
    ("jobs", _set("entity", "nobody")),
    ("jobs", _everywhere_zero),  # runnable nowhere
    ("jobs", _retyped("throughput_tpu", lambda c: 1.0, "unknown type")),
    ("jobs", _retyped("colour", lambda c: "red", "unknown column")),
    ("jobs", _drop("id")),
    ("jobs", lambda frame: frame.iloc[:0]),
    ("cluster", _set("name", "v100")),  # a duplicate type
    ("cluster", _set("count", -1)),
    ("cluster", _set("count", 0, row=0)),
    ("cluster", _set("cost_per_hour", None)),
    ("cluster", _drop("count")),
    ("entities", _set("policy", "lottery", row=0)),
    ("entities", _set("weight", -2.0, row=0)),
    ("entities", _set("id", "x ", row=0)),
    ("colocations", _pair_half),
    ("colocations", _set("scale_factor", 0, row=0)),
]


@pytest.mark.parametrize("name,change", MUTATIONS, ids=[f"{m[0]}: {getattr(m[1], '__name__', 'edit')}"
                                                        for m in MUTATIONS])
def test_an_edited_table_gives_the_table_readers_answer(exported, tmp_path, name, change):
    edited = _mutated(exported, tmp_path, name, change)
    try:
        expected = table_reader(edited)
    except fleetplan.InstanceError as error:
        with pytest.raises(fleetplan.InstanceError) as raised:
            fleetplan.load_instance(edited)
        assert str(raised.value) == str(error)
        assert "\n" not in str(raised.value)
        return
    assert_same(fleetplan.load_instance(edited), expected)


def test_zero_throughputs_and_reordered_columns_stay_on_the_fast_path(exported, tmp_path):
    edited = _mutated(exported, tmp_path, "jobs", lambda f: _reordered(f.assign(throughput_k80=0.0)))
    loaded = fleetplan.load_instance(edited)
    assert isinstance(loaded, ColumnAllocationInstance)
    assert_same(loaded, table_reader(edited))
    assert list(loaded.jobs[0].throughput)[-1] == "v100" and loaded.jobs[0].throughput["k80"] == 0.0


@pytest.mark.parametrize("name,change", [("jobs", _set("weight", 0.0)), ("cluster", _set("name", "v100"))],
                         ids=["bad weight", "duplicate type"])
def test_solve_on_a_bad_folder_exits_2_with_one_line_and_no_plan(exported, tmp_path, capsys, name, change):
    edited = _mutated(exported, tmp_path, name, change)
    output = tmp_path / "plan.json"
    code = cli(["solve", str(edited), "--solver", "max-min-fairness", "-o", str(output)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not output.exists()
    assert err.count("\n") == 0 and f"{name}.parquet" in err and "Traceback" not in err


def test_a_csv_folder_goes_through_the_table_reader(exported, tmp_path):
    for path in exported.glob("*.parquet"):
        pd.read_parquet(path).to_csv(tmp_path / f"{path.stem}.csv", index=False)
    loaded = fleetplan.load_instance(tmp_path)
    assert not isinstance(loaded, ColumnAllocationInstance)
    assert loaded.model_dump() == fleetplan.load_instance(exported).model_dump() | {"name": tmp_path.name}


def test_arrow_types_pandas_does_not_write_are_read_the_same(exported, tmp_path):
    """Files written by other tools: several row groups, large strings, 32-bit numbers, a null
    in an integer column, a column of nulls only, text held as a dictionary (the last goes
    through the table reader)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.copytree(exported, tmp_path / "tables")
    table = pq.read_table(tmp_path / "tables" / "jobs.parquet")
    columns = {name: table[name] for name in table.column_names}
    columns["id"] = columns["id"].cast(pa.large_string())
    scale = columns["scale_factor"].to_pylist()
    columns["scale_factor"] = pa.array([None, *scale[1:]], type=pa.int32())  # a null: the default, 1
    columns["throughput_k80"] = columns["throughput_k80"].cast(pa.float32())
    columns["arrival_time"] = pa.nulls(table.num_rows)
    edited = pa.table(columns)
    pq.write_table(edited, tmp_path / "tables" / "jobs.parquet", row_group_size=5)
    loaded = fleetplan.load_instance(tmp_path / "tables")
    assert isinstance(loaded, ColumnAllocationInstance)
    assert_same(loaded, table_reader(tmp_path / "tables"))
    columns["job_type"] = columns["job_type"].dictionary_encode()
    pq.write_table(pa.table(columns), tmp_path / "tables" / "jobs.parquet")
    assert_same(fleetplan.load_instance(tmp_path / "tables"), table_reader(tmp_path / "tables"))


def test_reading_a_folder_does_not_load_pandas(exported):
    import subprocess
    import sys

    code = ("import sys, fleetplan; instance = fleetplan.load_instance(sys.argv[1]); "
            "print(type(instance).__name__, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(exported)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["ColumnAllocationInstance", "False"]


def test_isolated_time_elapsed_survives_export_and_import(tmp_path):
    from fleetplan.cli import main

    data = fleetplan.generate("allocation", {"jobs": 6}, seed=0).model_dump()
    data["jobs"][0]["isolated_time_elapsed"] = 123.5
    source = tmp_path / "a.json"
    source.write_text(json.dumps(data))
    for fmt in ("parquet", "csv"):
        assert main(["export", str(source), "--format", fmt, "-o", str(tmp_path / fmt)]) == 0
        back = fleetplan.load_instance(tmp_path / fmt)
        assert [job.isolated_time_elapsed for job in back.jobs][:2] == [123.5, None]
