"""The Python API of tables in and out: ``Instance.from_frames(...)`` and
``plan.to_frame(instance)`` on each kind with frames support give what the module functions give."""

import doctest

import pytest
from conftest import EXAMPLES

import fleetplan
import fleetplan.instances.allocation as allocation_module
import fleetplan.instances.placement as placement_module
from fleetplan.instances.allocation import AllocationInstance
from fleetplan.instances.allocation import frames as af
from fleetplan.instances.placement import PlacementInstance
from fleetplan.instances.placement import frames as pf

TABLES = EXAMPLES / "tables"


def test_allocation_from_frames_and_to_frame_equal_the_functions():
    folder = TABLES / "allocation"
    by_method = AllocationInstance.from_frames(jobs=folder / "jobs.csv", cluster=folder / "gpus.csv", name="x")
    by_function = af.from_frames(folder / "jobs.csv", folder / "gpus.csv", name="x")
    assert by_method.model_dump() == by_function.model_dump()
    plan = fleetplan.solve(by_method, "max-min-fairness").plan
    assert plan.to_frame(by_method).equals(af.plan_to_frame(by_method, plan))


def test_placement_from_frames_and_to_frame_equal_the_functions():
    folder = TABLES / "placement"
    files = {"tables": folder / "tables.csv", "jobs": folder / "jobs.csv", "regions": folder / "regions.csv"}
    by_method = PlacementInstance.from_frames(**files, settings=folder / "settings.yaml")
    by_function = pf.from_frames(**files, settings=folder / "settings.yaml")
    assert by_method.model_dump() == by_function.model_dump()
    plan = fleetplan.solve(by_method, "hill-climb", time_limit=20).plan
    frame = plan.to_frame(by_method)
    assert frame.equals(pf.plan_to_frame(by_method, plan))
    assert fleetplan.evaluate(by_method, pf.plan_from_frame(by_method, frame)).objective == pytest.approx(
        fleetplan.evaluate(by_method, plan).objective)


def test_bad_table_through_the_method_is_one_line():
    with pytest.raises(fleetplan.InstanceError, match="placement.jobs.csv: column .id.: unknown column"):
        AllocationInstance.from_frames(jobs=TABLES / "allocation" / "jobs.csv", cluster=TABLES / "placement" / "jobs.csv")


@pytest.mark.parametrize("module", [allocation_module, placement_module])
def test_method_examples_run(module):
    failures, tried = doctest.testmod(module)
    assert tried >= 3 and failures == 0
