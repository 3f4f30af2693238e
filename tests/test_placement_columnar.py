"""A placement instance's exported folder read directly: the columnar fast path
gives the JSON file's instance, and on any bad table the same error as the ``import`` reader."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

import fleetplan
from fleetplan.instances.placement import frames
from fleetplan.instances.placement.columnar import load_folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    instance = fleetplan.generate("placement", {"regions": 4, "tables": 60, "jobs": 50}, seed=3)
    folder = tmp_path_factory.mktemp("placement") / "tables"
    folder.mkdir()
    for name, frame in frames.to_frames(instance).items():
        if name == "settings":
            import yaml

            (folder / "settings.yaml").write_text(yaml.safe_dump(frame))
        else:
            frame.to_parquet(folder / f"{name}.parquet")
    return instance, folder


def test_the_folder_is_the_instance(exported):
    instance, folder = exported
    loaded = fleetplan.load_instance(folder)
    assert loaded.model_dump() == instance.model_dump()
    a, b = loaded.arrays(), instance.arrays()
    assert (a.job_tables == b.job_tables).all() and (a.table_home == b.table_home).all()
    assert fleetplan.evaluate(loaded, fleetplan.solve(loaded, "keep").plan).objective == \
        fleetplan.evaluate(instance, fleetplan.solve(instance, "keep").plan).objective


def _mutated(folder, tmp_path, name, change):
    target = tmp_path / "bad"
    shutil.copytree(folder, target)
    frame = pd.read_parquet(target / f"{name}.parquet")
    change(frame)
    frame.to_parquet(target / f"{name}.parquet")
    return target


def _dup_table(f):
    f.loc[1, "id"] = f.loc[0, "id"]


def _unknown_home(f):
    f.loc[2, "home"] = "atlantis"


def _negative_size(f):
    f.loc[3, "size_bytes"] = -1.0


def _spaced_id(f):
    f.loc[4, "id"] = " " + f.loc[4, "id"]


def _unknown_table(f):
    f.loc[0, "tables"] = "nope"


def _twice(f):
    first = f.loc[0, "tables"].split(";")[0]
    f.loc[0, "tables"] = f"{first};{first}"


def _bad_priority(f):
    f.loc[1, "priority"] = 9


def _spark_gpu(f):
    row = f.index[f["kind"] != "ml"][0]
    f.loc[row, "gpu_type"] = f.loc[f.index[f["kind"] == "ml"][0], "gpu_type"]


def _text_hours(f):
    f["gpu_hours"] = f["gpu_hours"].astype(str)  # a text column: the fast path hands it over
    f.loc[0, "gpu_hours"] = "lots"


MUTATIONS = [("tables", _dup_table), ("tables", _unknown_home), ("tables", _negative_size), ("tables", _spaced_id),
             ("jobs", _unknown_table), ("jobs", _twice), ("jobs", _bad_priority), ("jobs", _spark_gpu),
             ("jobs", _text_hours)]


@pytest.mark.parametrize("name,change", MUTATIONS, ids=[m[1].__name__ for m in MUTATIONS])
def test_a_bad_table_gives_the_import_readers_error(exported, tmp_path, name, change):
    _, folder = exported
    bad = _mutated(folder, tmp_path, name, change)
    kwargs = {n: str(bad / f"{n}.parquet") for n in ("tables", "jobs", "regions")}
    try:
        frames.from_frames(**kwargs, settings=str(bad / "settings.yaml"))
    except fleetplan.InstanceError as error:
        expected = str(error)
    else:  # the reader accepts it (spaces are stripped): so must the folder
        assert load_folder(bad).model_dump() == frames.from_frames(
            **kwargs, settings=str(bad / "settings.yaml")).model_dump()
        return
    with pytest.raises(fleetplan.InstanceError) as raised:
        load_folder(bad)
    assert str(raised.value) == expected


def test_a_folder_without_the_tables_is_one_clear_error(tmp_path):
    with pytest.raises(fleetplan.InstanceError, match="reservation: server_types, fault_domains, racks, servers, reservations; placement: regions, tables, jobs"):
        fleetplan.load_instance(tmp_path)


def test_a_csv_folder_goes_through_the_import_reader(exported, tmp_path):
    instance, folder = exported
    for name in ("regions", "tables", "jobs"):
        pd.read_parquet(folder / f"{name}.parquet").to_csv(tmp_path / f"{name}.csv", index=False)
    shutil.copy(folder / "settings.yaml", tmp_path / "settings.yaml")
    assert fleetplan.load_instance(tmp_path).arrays().num_tables == instance.arrays().num_tables
