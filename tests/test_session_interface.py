"""One session interface: every in-process session (fleetplan.embed) re-solves by ``solve``, with
the same keyword arguments (``time_limit`` for this call, ``progress``); binpack's ``place``
(MAST's word for an RMS call) is the same call by another name."""

from __future__ import annotations

import inspect

import pytest

import fleetplan
from fleetplan.embed import session_kinds
from fleetplan.instances import KINDS

SHARED_KEYWORDS = ("time_limit", "progress")
SMALL = {"allocation": {"jobs": 6}, "binpack": {"clusters": 2, "machines": 16, "workloads": 2},
         "reservation": {"servers": 60, "reservations": 3, "datacenters": 2}}


def test_every_session_kind_is_covered_here():
    assert set(session_kinds()) == set(SMALL)


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_every_session_class_solves_with_the_shared_keywords(kind):
    parameters = inspect.signature(KINDS[kind].load("session").solve).parameters
    for name in SHARED_KEYWORDS:
        assert name in parameters, f"{kind}: solve lacks {name}"
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY and parameters[name].default is None


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_solve_reports_progress_and_takes_a_time_limit(kind):
    instance = fleetplan.generate(kind, SMALL[kind], seed=0)
    session = fleetplan.session(instance)
    seen: list[float | None] = []
    arguments = (instance.workloads[0],) if kind == "binpack" else ()
    result = session.solve(*arguments, time_limit=60.0, progress=lambda fraction, message: seen.append(fraction))
    assert result.success and result.evaluation.feasible
    assert seen and seen[-1] == 1.0
    assert result.plan.options["time_limit"] == 60.0


def test_binpack_place_is_solve_by_another_name():
    region = fleetplan.generate("binpack", SMALL["binpack"], seed=0)
    by_solve, by_place = fleetplan.session(region), fleetplan.session(region)
    for workload in region.workloads:
        solved, placed = by_solve.solve(workload), by_place.place(workload)
        assert solved.plan.model_dump(exclude={"options"}) == placed.plan.model_dump(exclude={"options"})
    assert by_solve.running_ids == by_place.running_ids and len(by_solve.running_ids) > 0
    assert "solve" in (type(by_place).place.__doc__ or "")
