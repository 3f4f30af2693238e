"""Binpack capacity as a what-if field: ``clusters.NAME.machines`` adds copies of the cluster's
machine or removes idle ones (holdings renumbered), refuses what it cannot do, and sweeps."""

import json

import numpy as np
import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan.errors import InstanceError
from fleetplan.instances.paths import apply_changes, changed_instance, leaves
from fleetplan.planning.whatif import whatif

BINPACK = EXAMPLES / "binpack-small.json"


def _data(instance):
    return json.loads(instance.model_dump_json())


def _region_with_idle_machines():
    """binpack-small with two idle dc1 machines added before the busy ones' holdings."""
    instance = fleetplan.load_instance(BINPACK)
    data = _data(instance)
    grown = changed_instance(instance, data, {"clusters.dc1.machines": 4})
    data = _data(grown)
    # move the added (idle) machines to the front, so removing them renumbers every holding
    order = list(range(len(data["machines"]["id"]) - 2, len(data["machines"]["id"]))) + \
        list(range(len(data["machines"]["id"]) - 2))
    data["machines"] = {name: [column[i] for i in order] for name, column in data["machines"].items()}
    new_row = {old: new for new, old in enumerate(order)}
    holdings = data["running"]["holdings"]
    holdings["machine"] = [new_row[m] for m in holdings["machine"]]
    return fleetplan.instances.instance_from_data(data), data


def test_more_machines_are_copies_of_the_cluster_s_machine_in_new_racks():
    instance = fleetplan.load_instance(BINPACK)
    data = _data(instance)
    assert leaves(data, "clusters.dc0.machines") == [15]
    grown = changed_instance(instance, data, {"clusters.dc0.machines": 18})
    arrays = grown.arrays()
    added = np.flatnonzero(~np.isin(arrays.machine_ids, instance.arrays().machine_ids))
    assert len(added) == 3 and (arrays.machine_cluster[added] == instance.clusters.index("dc0")).all()
    dc0 = instance.arrays().machine_cluster == instance.clusters.index("dc0")
    assert (arrays.capacity[added] == instance.arrays().capacity[dc0][0]).all()
    assert arrays.machine_rack[added].min() > instance.arrays().machine_rack.max()
    assert (arrays.used[added] == 0).all()
    assert leaves(_data(grown), "clusters.dc0.machines") == [18]
    assert changed_instance(instance, data, {"clusters.dc0.machines*": 2}).arrays().num_machines == 24 + 15
    assert data["machines"]["id"] == instance.machines.id  # the data itself untouched


def test_fewer_machines_removes_idle_ones_and_keeps_every_holding_on_its_machine():
    instance, data = _region_with_idle_machines()
    assert leaves(data, "clusters.dc1.machines") == [4]
    held_before = [(instance.running.id[j], instance.machines.id[m])
                   for j, m in zip(instance.running.holdings.job, instance.running.holdings.machine, strict=True)]
    shrunk = changed_instance(instance, data, {"clusters.dc1.machines": 2})
    assert shrunk.arrays().num_machines == instance.arrays().num_machines - 2
    held_after = [(shrunk.running.id[j], shrunk.machines.id[m])
                  for j, m in zip(shrunk.running.holdings.job, shrunk.running.holdings.machine, strict=True)]
    assert held_after == held_before
    assert fleetplan.solve(shrunk).evaluation is not None


@pytest.mark.parametrize("change, message", [
    ({"clusters.dc0.machines": 4}, "15 machines, 0 of them idle: at least 15 stay"),
    ({"clusters.dc0.machines": 16.5}, "a whole number >= 0, got 16.5"),
    ({"clusters.dc0.machines": -1}, "a whole number >= 0"),
    ({"clusters.dc9.machines": 3}, "no cluster 'dc9'"),
    ({"clusters.dc0.gpu-a100.machines": 3}, "has no 'gpu-a100' machines"),
])
def test_what_cannot_be_done_is_refused_naming_the_path(change, message):
    instance = fleetplan.load_instance(BINPACK)
    with pytest.raises(InstanceError, match=message) as caught:
        apply_changes(_data(instance), change)
    assert str(caught.value).startswith(next(iter(change)))


def test_a_sweep_over_machines_changes_the_plan():
    table = whatif(fleetplan.load_instance(BINPACK), ["clusters.dc0.machines=15:23:4"], progress=None)
    rows = table.rows
    assert [row["clusters.dc0.machines"] for row in rows] == [15, 19, 23]
    assert [row["preempted_jobs"] for row in rows] == [5, 2, 1]
    assert [row["unplaced_workloads"] for row in rows] == [1, 1, 1]
    with pytest.raises(InstanceError, match="at least 15 stay"):
        whatif(fleetplan.load_instance(BINPACK), ["clusters.dc0.machines=3:15:4"], progress=None)
