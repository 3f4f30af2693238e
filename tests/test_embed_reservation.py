"""Re-solves of a RAS region between events: :class:`fleetplan.embed.ReservationSession`.

The property: after any sequence of maintenance, requests that grow or shrink, generator events
and applied plans, each re-solve's objective is a cold ``fleetplan.solve`` of the same instance
(read back from its JSON file) with the same options, to the MIP gap both are solved to.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fleetplan
from fleetplan.embed import ReservationSession
from fleetplan.instances import InstanceError, instance_from_data
from fleetplan.instances.base import parse_json_text, to_json_text
from fleetplan.instances.reservation import ReservationPlan

OPTIONS = {"mip_rel_gap": 1e-7}


def _region(seed: int):
    return fleetplan.generate("reservation", {"servers": 300, "reservations": 5, "datacenters": 2,
                                              "fault_domains_per_datacenter": 3, "servers_per_rack": 10}, seed=seed)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 10_000))
def test_resolves_equal_cold_solves(data, seed):
    session = ReservationSession(_region(seed), solver="mip-highs", time_limit=60, **OPTIONS)
    for _ in range(data.draw(st.integers(1, 5))):
        what = data.draw(st.sampled_from(["solve", "maintenance", "back", "request", "event"]))
        arrays = session.instance().arrays()
        if what == "maintenance":
            session.set_maintenance(session.servers_in_fault_domain(data.draw(st.integers(0, arrays.num_fds - 1))))
        elif what == "back":
            session.set_maintenance(np.flatnonzero(arrays.server_maintenance)[:50], on=False)
        elif what == "request":
            name = data.draw(st.sampled_from(session.reservation_ids))
            session.set_request(name, session.request(name) * data.draw(st.floats(0.5, 1.5)))
        elif what == "event":
            session.event(data.draw(st.sampled_from(["growth", "new-datacenter"])), seed=seed)
        # The region now is a valid instance file, and a re-solve equals a cold solve of it.
        text = to_json_text(session.instance())
        cold = fleetplan.solve(parse_json_text(text), "mip-highs", time_limit=60, warm_start="current", **OPTIONS)
        result = session.solve()
        assert result.status == cold.status, (result.message, cold.message)
        if cold.plan is not None:
            assert result.objective == pytest.approx(cold.objective, rel=1e-6, abs=1e-6)
            assert result.evaluation.feasible
            if result.status == "optimal":  # the applied plan is today's assignment now
                assert session.instance().servers.current == result.plan.assignment
        instance_from_data(parse_json_text(to_json_text(session.instance())), "region")


def test_changes_are_checked_and_leave_the_region_alone_when_refused():
    session = ReservationSession(_region(1), solver="mip-highs")
    before = to_json_text(session.instance())
    with pytest.raises(InstanceError, match=r"set_maintenance\[0\]"):
        session.set_maintenance([10_000])
    with pytest.raises(InstanceError, match="no ids"):
        session.set_maintenance(["s1"])
    with pytest.raises(InstanceError, match="unknown reservation"):
        session.set_request("nobody", 3.0)
    with pytest.raises(InstanceError, match=r"capacity_rru"):
        session.set_request(session.reservation_ids[0], -1.0)
    with pytest.raises(InstanceError, match="assignment"):
        session.assign(ReservationPlan(assignment=[None]))
    with pytest.raises(InstanceError, match="--event"):
        session.event("earthquake")
    assert to_json_text(session.instance()) == before


def test_the_last_plan_is_the_next_start():
    session = ReservationSession(_region(2), solver="mip-highs")
    first = session.solve()
    assert first.status == "optimal"
    assert session.instance().servers.current == first.plan.assignment
    # Nothing changed: keeping the last plan now moves nothing, so the optimum is at most its
    # objective without the moves it made; and the plan kept scores exactly that.
    keep = fleetplan.evaluate(session.instance(), ReservationPlan.current(session.instance()))
    assert keep.objective == pytest.approx(first.objective - first.evaluation.terms["moves"], rel=1e-9)
    again = session.solve()
    assert again.status == "optimal" and again.objective <= keep.objective + 1e-6


def test_the_session_keeps_its_own_copy_of_the_region():
    region = _region(3)
    session = ReservationSession(region, solver="mip-highs", time_limit=60, **OPTIONS)
    asked = session.request(session.reservation_ids[0])
    region.reservations[0].capacity_rru = -5.0  # the caller edits its own object afterwards
    assert session.request(session.reservation_ids[0]) == asked
    assert session.instance().reservations[0].capacity_rru == asked
