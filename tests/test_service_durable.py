"""Durable, idempotent jobs of the solve service (``fleetplan serve --state DIR``): a retried
submission with the same ``Idempotency-Key`` is the same job, ``GET /v1/jobs`` lists them, and a
restart — after SIGTERM or SIGKILL mid-load — loses no accepted job and answers none twice.
Loopback only; every loop bounded in count and time."""

from __future__ import annotations

import signal
import time

import pytest
from test_service import AUTH, GAVEL, Service, long_placement

httpx = pytest.importorskip("httpx")


def wait_final(service: Service, job: str, seconds: float = 60) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = service.get(f"/v1/jobs/{job}").json()
        if state["state"] in ("done", "failed", "cancelled"):
            return state
        time.sleep(0.05)
    raise AssertionError(f"job {job} not final within {seconds} s")


def test_an_idempotency_key_returns_the_same_job(tmp_path):
    served = Service("--state", str(tmp_path / "state"), "--workers", "1")
    try:
        body = {"instance": GAVEL, "seed": 3}
        first = served.post("/v1/solve", body, headers={"Idempotency-Key": "round-17"})
        again = served.post("/v1/solve", body, headers={"Idempotency-Key": "round-17"})
        assert first.status_code == again.status_code == 200
        assert first.headers["X-Job-Id"] == again.headers["X-Job-Id"] and first.json() == again.json()
        listed = served.get("/v1/jobs").json()
        assert listed["total"] == 1 and listed["jobs"][0]["idempotency_key"] == "round-17"
        other = served.post("/v1/solve", {"instance": GAVEL, "seed": 4}, headers={"Idempotency-Key": "round-17"})
        assert other.status_code == 422 and other.json()["path"] == "idempotency-key"
        assert served.get("/v1/jobs?state=teleported").status_code == 422
        assert served.get("/v1/jobs?state=done").json()["total"] == 1
    finally:
        served.stop()


def test_a_restart_keeps_finished_answers_and_keys(tmp_path):
    state = str(tmp_path / "state")
    served = Service("--state", state, "--workers", "1")
    try:
        answer = served.post("/v1/solve", {"instance": GAVEL}, headers={"Idempotency-Key": "k1"})
        job = answer.headers["X-Job-Id"]
    finally:
        assert served.stop() == 143
    again = Service("--state", state, "--workers", "1")
    try:
        kept = again.get(f"/v1/jobs/{job}").json()
        assert kept["state"] == "done" and kept["result"] == answer.json()
        retried = again.post("/v1/solve", {"instance": GAVEL}, headers={"Idempotency-Key": "k1"})
        assert retried.headers["X-Job-Id"] == job and retried.json() == answer.json()
    finally:
        again.stop()


@pytest.mark.slow
def test_sigkill_mid_load_loses_nothing_accepted_and_answers_nothing_twice(tmp_path):
    state = str(tmp_path / "state")
    served = Service("--state", state, "--workers", "1")
    accepted: dict[str, dict | None] = {}  # job id -> its answer if final before the kill
    try:
        # A long job holds the only worker; short ones queue behind it, some finished before.
        for seed in range(4):
            answer = served.post("/v1/solve", {"instance": GAVEL, "seed": seed})
            accepted[answer.headers["X-Job-Id"]] = answer.json()
        long = served.post("/v1/solve", {"instance": long_placement(), "solver": "mip-highs", "time_limit": 8,
                                         "wait": 0}, headers={"Idempotency-Key": "long"})
        accepted[long.json()["id"]] = None
        for seed in range(4, 10):
            answer = served.post("/v1/solve", {"instance": GAVEL, "seed": seed, "wait": 0})
            assert answer.status_code == 202
            accepted[answer.json()["id"]] = None
        served.process.send_signal(signal.SIGKILL)
        served.process.wait(timeout=30)
    finally:
        served.stop()
    again = Service("--state", state, "--workers", "1")
    try:
        for job, before in accepted.items():
            final = wait_final(again, job, 90)
            if before is not None:
                assert final["result"] == before  # answered once: the same answer
            else:
                assert final["state"] == "done" and final["http"] == 200, final
        assert again.get("/v1/jobs").json()["total"] == len(accepted)
        retried = again.post("/v1/solve", {"instance": long_placement(), "solver": "mip-highs", "time_limit": 8,
                                           "wait": 0}, headers={"Idempotency-Key": "long", **AUTH})
        assert retried.headers["X-Job-Id"] == long.json()["id"]
    finally:
        again.stop()
