"""Sessions over HTTP (``/v1/sessions``): a scheduler sends the change, not the cluster. Each
round's answer equals the in-process session's after the same changes (and so a cold solve's);
changes are checked as in process and named in the error; sessions expire when idle and can be
listed and deleted. Loopback only; every loop bounded in count and time."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from conftest import EXAMPLES
from test_service import Service

import fleetplan

httpx = pytest.importorskip("httpx")
BINPACK = json.loads((EXAMPLES / "binpack-small.json").read_text())


@pytest.fixture(scope="module")
def service():
    running = Service("--workers", "2", "--session-ttl", "2")
    yield running
    running.stop()


def test_rounds_over_http_answer_as_the_session_in_process(service):
    instance = fleetplan.generate("allocation", {"jobs": 20}, seed=4).model_dump()
    types = list(instance["worker_types"])
    created = service.post("/v1/sessions", {"instance": instance, "solver": "max-min-fairness"})
    assert created.status_code == 201 and created.json()["jobs"] == 20
    session_id = created.json()["id"]
    assert created.headers["Location"] == f"/v1/sessions/{session_id}"
    local = fleetplan.session(instance, "max-min-fairness")
    rng = np.random.default_rng(0)
    for round_number in range(4):
        gone = [job["id"] for job in instance["jobs"][round_number * 2:round_number * 2 + 2]]
        arriving = {"id": [f"r{round_number}-{k}" for k in range(3)],
                    "throughput": rng.uniform(0.5, 3.0, size=(3, len(types))).round(3).tolist()}
        changes = [{"op": "remove_jobs", "ids": gone}, {"op": "add_jobs", "jobs": arriving},
                   {"op": "update_jobs", "changes": {"id": [arriving["id"][0]], "weight": [2.0]}}]
        patched = service.patch(f"/v1/sessions/{session_id}", {"changes": changes})
        assert patched.status_code == 200 and patched.json()["jobs"] == 20 + round_number + 1
        local.remove_jobs(gone)
        local.add_jobs({"id": arriving["id"], "throughput": np.array(arriving["throughput"])})
        local.update_jobs({"id": [arriving["id"][0]], "weight": [2.0]})
        remote = service.post(f"/v1/sessions/{session_id}/solve", {})
        assert remote.status_code == 200
        expected = local.solve()
        assert remote.json()["status"] == "optimal"
        assert remote.json()["objective"] == pytest.approx(expected.objective, rel=1e-9)
        assert remote.json()["plan"]["job_ids"] == expected.plan.job_ids
    listed = service.get("/v1/sessions").json()["sessions"]
    assert session_id in [row["id"] for row in listed]
    assert service.delete(f"/v1/sessions/{session_id}").json()["state"] == "deleted"
    assert service.post(f"/v1/sessions/{session_id}/solve", {}).status_code == 404


def test_changes_are_checked_and_named(service):
    session_id = service.post("/v1/sessions", {"instance": json.loads(
        (EXAMPLES / "allocation-gavel-4.1.json").read_text())}).json()["id"]
    before = service.post(f"/v1/sessions/{session_id}/solve", {}).json()["objective"]
    unknown_op = service.patch(f"/v1/sessions/{session_id}", {"changes": [{"op": "teleport"}]})
    assert unknown_op.status_code == 422 and unknown_op.json()["path"] == "changes[0].op"
    bad = service.patch(f"/v1/sessions/{session_id}", {"changes": [
        {"op": "add_jobs", "jobs": {"id": ["x"], "throughput": [[1.0, 1.0]]}},
        {"op": "update_jobs", "changes": {"id": ["x"], "weight": [-5.0]}}]})
    assert bad.status_code == 422 and bad.json()["path"].startswith("changes[1].update_jobs[0].weight")
    missing = service.patch(f"/v1/sessions/{session_id}", {"changes": [{"op": "remove_jobs"}]})
    assert missing.status_code == 422 and missing.json()["path"] == "changes[0]"
    strict = service.patch(f"/v1/sessions/{session_id}", {"changes": [], "chnages": []})
    assert strict.status_code == 422 and strict.json()["path"] == "chnages"
    # The change before the failing one stays applied, the failing one changed nothing.
    state = service.post(f"/v1/sessions/{session_id}/solve", {}).json()
    assert "x" in state["plan"]["job_ids"] and state["objective"] != before
    assert service.patch("/v1/sessions/nope", {"changes": []}).status_code == 404
    not_a_kind = service.post("/v1/sessions", {"instance": fleetplan.generate(
        "placement", {"regions": 2, "tables": 4, "jobs": 4}, seed=0).model_dump()})
    assert not_a_kind.status_code == 422 and not_a_kind.json()["path"] == "instance.kind"


def test_a_binpack_session_places_workloads(service):
    created = service.post("/v1/sessions", {"instance": BINPACK, "solver": "rms-greedy"})
    assert created.status_code == 201, created.text
    session_id = created.json()["id"]
    placed = service.post(f"/v1/sessions/{session_id}/solve", {"workloads": BINPACK["workloads"][:1]})
    assert placed.status_code == 200 and placed.json()["kind"] == "binpack"
    no_workloads = service.post(f"/v1/sessions/{session_id}/solve", {})
    assert no_workloads.status_code == 422 and no_workloads.json()["path"] == "workloads"


def test_idle_sessions_expire(service):
    session_id = service.post("/v1/sessions", {"instance": json.loads(
        (EXAMPLES / "allocation-gavel-4.1.json").read_text())}).json()["id"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and service.get(f"/v1/sessions/{session_id}").status_code == 200:
        time.sleep(0.2)
    assert service.get(f"/v1/sessions/{session_id}").status_code == 404
