"""Per-call re-solves of a binpack region: :class:`fleetplan.embed.BinpackSession`,
MAST's RMS called one workload at a time against a region that changes between calls.

The property: after any sequence of placements, finished jobs, failed and restored machines
and a moving clock, each call's plan is exactly the plan of a cold ``fleetplan.solve`` of the
region at that moment, read back from its JSON file.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fleetplan
from fleetplan.embed import BinpackSession
from fleetplan.instances import InstanceError, instance_from_data
from fleetplan.instances.base import parse_json_text, to_json_text


def _region(seed: int, machines: int = 48) -> tuple[dict, list[dict]]:
    instance = fleetplan.generate("binpack", {"clusters": 3, "machines": machines, "workloads": 24, "load": 0.7,
                                              "gpu_types": 2, "gpu_scale": 0.5}, seed=seed)
    data = instance.model_dump()
    pool = [{**workload, "id": f"pending-{k}"} for k, workload in enumerate(data["workloads"])]
    return data, pool


def _cold(session: BinpackSession, workloads: list[dict], solver: str) -> fleetplan.SolveResult:
    return fleetplan.solve(parse_json_text(to_json_text(session.instance(workloads))), solver)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), seed=st.integers(0, 10_000))
def test_session_plans_equal_cold_solves(data, seed):
    region, pool = _region(seed)
    session = BinpackSession(region)
    queue = list(pool)
    for _ in range(data.draw(st.integers(2, 8))):
        what = data.draw(st.sampled_from(["place", "place", "pass", "finish", "fail", "restore", "advance"]))
        if what in ("place", "pass") and queue:
            count = 1 if what == "place" else min(len(queue), data.draw(st.integers(2, 4)))
            workloads, queue = queue[:count], queue[count:]
            cold = _cold(session, workloads, "rms-greedy")
            result = session.place(workloads)
            assert result.plan.model_dump() == cold.plan.model_dump()
            assert result.objective == cold.objective and result.status == cold.status
            assert result.evaluation.feasible
            if session.calls > 1:
                assert result.stats["warm_hints_used"] == 1  # the machines' grouping was kept
            placed = [f"{entry.workload}/{job.job}" for entry in result.plan.workloads if entry.placed
                      for job in entry.jobs]
            assert set(placed) <= set(session.running_ids)
            for entry in result.plan.workloads:
                for job in entry.jobs:
                    assert not set(job.preempted) & set(session.running_ids)  # preempted jobs left
        elif what == "finish" and session.running_ids:
            ids = data.draw(st.permutations(session.running_ids))[: data.draw(st.integers(1, 3))]
            session.finish(ids)
            assert not set(ids) & set(session.running_ids)
        elif what == "fail":
            machines = data.draw(st.permutations(session.machine_ids))[: data.draw(st.integers(1, 6))]
            stopped = session.fail_machines(machines)
            assert not set(stopped) & set(session.running_ids)
            rows = [session.machine_ids.index(m) for m in machines]
            assert (session.free[rows] == 0).all()
        elif what == "restore":
            session.restore_machines(data.draw(st.permutations(session.machine_ids))[:8])
        else:
            session.advance(data.draw(st.floats(0.0, 48.0)))
        # The region now is a valid instance file (every change was checked as it came).
        instance_from_data(parse_json_text(to_json_text(session.instance({**pool[0], "id": "probe"}))), "region")


def test_exact_solver_session_matches_its_cold_solve():
    region, pool = _region(3, machines=12)
    session = BinpackSession(region, solver="cpsat", time_limit=30)
    for workload in pool[:3]:
        cold = _cold(session, [workload], "cpsat")
        result = session.place(workload)
        assert result.status == cold.status
        assert result.objective == pytest.approx(cold.objective)


def test_refusals_leave_the_region_as_it_was():
    region, pool = _region(1)
    session = BinpackSession(region)
    before = to_json_text(session.instance(pool[:1]))
    with pytest.raises(InstanceError, match=r"finish\[0\]"):
        session.finish(["no-such-job"])
    with pytest.raises(InstanceError, match=r"fail_machines\[1\]"):
        session.fail_machines([session.machine_ids[0], "m-none"])
    with pytest.raises(InstanceError, match=r"workloads\[0\]\.jobs\[0\]\.hardware"):
        session.place({"id": "x", "priority": 1, "jobs": [{"id": "a", "tasks": 1, "hardware": "tpu",
                                                          "gpus_per_task": 1, "cpus_per_task": 1,
                                                          "memory_gb_per_task": 1.0}]})
    with pytest.raises(InstanceError, match=r"workloads\[0\]\.priority"):
        session.place({"id": "x", "priority": 9, "jobs": []})
    with pytest.raises(InstanceError, match="hours"):
        session.advance(-1.0)
    assert to_json_text(session.instance(pool[:1])) == before
    session.place(pool[0])
    with pytest.raises(InstanceError, match="running already"):
        session.place(pool[0])


def test_place_without_apply_changes_nothing():
    region, pool = _region(2)
    session = BinpackSession(region)
    before = session.running_ids
    result = session.place(pool[:3], apply=False)
    assert result.plan is not None and session.running_ids == before


def test_a_workload_object_is_checked_again_when_placed():
    from conftest import EXAMPLES

    from fleetplan.instances.binpack import Workload

    region = fleetplan.load_instance(EXAMPLES / "binpack-small.json")
    session = fleetplan.session(region, "rms-greedy")
    workload = Workload.model_validate(region.workloads[0].model_dump())
    workload.jobs[0].tasks = -3  # changed after it was made, past pydantic's checks
    with pytest.raises(InstanceError, match=r"workloads\[0\]\.jobs\[0\]\.tasks"):
        session.place([workload])
