"""Every problem kind is known to planning, told once (fleetplan/planning/kinds.py): a kind added
to the instances' registry without its planning entry fails here."""

import pytest

import fleetplan
from fleetplan.planning.kinds import PLANNING_KINDS, planning_kind, service_metrics
from fleetplan.planning.targets import TARGETABLE


@pytest.mark.parametrize("kind", sorted(fleetplan.KINDS))
def test_every_kind_has_its_planning_entry(kind):
    entry = planning_kind(kind)
    assert entry.name == kind
    instance = fleetplan.load_instance(f"examples/{_example(kind)}")
    from fleetplan.instances.glossary import describe

    unknown = [name for name in (*entry.decisive, *entry.service_metrics) if describe(name, kind) is None]
    assert not unknown, f"metrics the glossary does not know: {unknown}"
    if entry.sizer_path is None:  # not offered yet: said in one line
        with pytest.raises(fleetplan.InstanceError, match="no sizing for kind"):
            entry.sizer()
        return
    assert callable(entry.sizer())
    assert kind in TARGETABLE and service_metrics(kind)[: len(TARGETABLE[kind])] == list(TARGETABLE[kind])
    if entry.capacity_units_path is None:  # no marginal values yet: said in one line
        with pytest.raises(fleetplan.InstanceError, match="no marginal values"):
            entry.capacity_units(instance)
        return
    units = list(entry.capacity_units(instance))
    assert units and all(len(unit) == 4 and callable(unit[2]) for unit in units)
    # One fewer is a build, or the reason none can be removed (shown instead of a bare dash).
    assert all(callable(unit[3]) or (isinstance(unit[3], str) and unit[3]) for unit in units)


def test_no_entry_for_an_unknown_kind():
    assert set(PLANNING_KINDS) == set(fleetplan.KINDS)
    with pytest.raises(fleetplan.InstanceError, match="no planning for kind"):
        planning_kind("teleport")


def _example(kind):
    return {"allocation": "allocation-gavel-4.1.json", "placement": "placement-small.json",
            "reservation": "reservation-small.json", "binpack": "binpack-small.json",
            "gpushare": "gpushare-small.json"}[kind]
