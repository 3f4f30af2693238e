"""The solve service, started for real on a free loopback port and spoken to over HTTP with a
real client (httpx): endpoints, errors, auth, the queue limit, cancellation, a killed worker,
SIGTERM with requests in flight. Loopback only; every loop bounded in count and time."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES

import fleetplan

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

GAVEL = json.loads((EXAMPLES / "allocation-gavel-4.1.json").read_text())
BINPACK = json.loads((EXAMPLES / "binpack-small.json").read_text())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Service:
    """A `fleetplan serve` child process on a free loopback port."""

    def __init__(self, *flags: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([sys.executable, "-m", "fleetplan", "serve", "--port", str(self.port), *flags],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service ended: {self.process.stderr.read()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("the service did not start within 60 s")

    def post(self, path: str, body, **kwargs):
        return httpx.post(self.url + path, json=body, timeout=kwargs.pop("timeout", 60), **kwargs)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


@pytest.fixture(scope="module")
def service():
    running = Service("--workers", "2", "--queue", "8")
    yield running
    running.stop()


def long_placement() -> dict:
    """A placement instance the exact MIP does not finish quickly: the job then runs until its
    time limit, long enough to be cancelled or queued behind."""
    return fleetplan.generate("placement", {"regions": 5, "tables": 300, "jobs": 300}, seed=5).model_dump()


def test_solve_evaluate_and_size_answer_like_the_library(service):
    answer = service.post("/v1/solve", {"instance": GAVEL})
    assert answer.status_code == 200
    result = answer.json()
    local = fleetplan.solve(GAVEL)
    assert result["status"] == "optimal" and result["objective"] == pytest.approx(local.objective, rel=1e-9)
    judged = service.post("/v1/evaluate", {"instance": GAVEL, "plan": result["plan"]}).json()
    assert judged["objective"] == pytest.approx(result["objective"])
    sized = service.post("/v1/size", {"instance": GAVEL, "targets": ["min_time_share>=1"],
                                      "buy": ["v100=3", "k80=1"]}).json()
    assert sized["status"] == "optimal" and sized["additions"] == {"v100": 0, "k80": 1}
    binpack = service.post("/v1/solve", {"instance": BINPACK, "solver": "rms-greedy"})
    assert binpack.status_code == 200 and binpack.json()["kind"] == "binpack"


def test_catalog_schema_health_metrics_and_openapi(service):
    names = {entry["name"] for entry in httpx.get(service.url + "/v1/solvers").json()}
    assert {"max-min-fairness", "hill-climb", "rms-greedy", "mip-highs"} <= names
    schema = httpx.get(service.url + "/v1/schema/allocation").json()
    assert schema == fleetplan.schema("allocation")
    assert httpx.get(service.url + "/v1/schema/teleport").status_code == 404
    document = httpx.get(service.url + "/openapi.json").json()
    assert "/v1/solve" in document["paths"] and "AllocationInstance" in document["components"]["schemas"]
    text = httpx.get(service.url + "/metrics").text
    assert "fleetplan_requests_total" in text and "fleetplan_queue_depth" in text


@pytest.mark.parametrize("body,code,message", [
    (b"{not json", 400, "malformed JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (b"[" * 100_000 + b"]" * 100_000, 400, "nested too deeply"),
    (json.dumps({"instance": GAVEL, "solver": "teleport"}).encode(), 422, "known: "),
    (json.dumps({"instance": GAVEL, "options": {"no_such": 1}}).encode(), 422, "no_such"),
    (json.dumps({"instance": {"kind": "allocation"}}).encode(), 422, "worker_types"),
    (json.dumps({"solver": "max-min-fairness"}).encode(), 422, "instance"),
    (json.dumps({"instance": GAVEL, "time_limit": "soon"}).encode(), 422, "time_limit"),
])
def test_bad_requests_get_the_json_error_object(service, body, code, message):
    answer = httpx.post(service.url + "/v1/solve", content=body, headers={"Content-Type": "application/json"},
                        timeout=60)
    assert answer.status_code == code
    data = answer.json()
    assert message in data["error"] and data["exit_code"] == 2 and isinstance(data["errors"], list)


def test_an_oversized_body_is_refused_before_it_is_read():
    small = Service("--max-body-mb", "1")
    try:
        answer = httpx.post(small.url + "/v1/solve", content=b"x" * (2 * 2**20),
                            headers={"Content-Type": "application/json"}, timeout=60)
        assert answer.status_code == 413 and "at most" in answer.json()["error"]
        assert httpx.post(small.url + "/v1/solve", json={"instance": GAVEL}, timeout=60).status_code == 200
    finally:
        small.stop()


def test_a_token_is_required_when_configured(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token-of-some-length\n")
    guarded = Service("--token-file", str(token_file))
    try:
        assert guarded.post("/v1/solve", {"instance": GAVEL}).status_code == 401
        assert guarded.post("/v1/solve", {"instance": GAVEL},
                            headers={"Authorization": "Bearer wrong-token-of-some-length"}).status_code == 401
        ok = guarded.post("/v1/solve", {"instance": GAVEL},
                          headers={"Authorization": "Bearer s3cret-token-of-some-length"})
        assert ok.status_code == 200
        assert httpx.get(guarded.url + "/healthz").status_code == 200
    finally:
        guarded.stop()


def test_listening_beyond_loopback_without_a_token_is_refused(capsys):
    from fleetplan.cli.app import main

    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 2
    assert "token" in capsys.readouterr().err


def test_a_long_job_is_polled_and_cancelled(service):
    started = service.post("/v1/solve", {"instance": long_placement(), "solver": "mip-highs", "time_limit": 60,
                                         "wait": 0})
    assert started.status_code == 202
    job = started.json()["id"]
    state = httpx.get(f"{service.url}/v1/jobs/{job}").json()
    assert state["state"] in ("queued", "running")
    cancelled = httpx.delete(f"{service.url}/v1/jobs/{job}").json()
    assert cancelled["state"] == "cancelled"
    assert httpx.get(f"{service.url}/v1/jobs/{job}").json()["state"] == "cancelled"
    assert httpx.get(f"{service.url}/v1/jobs/unknown").status_code == 404


def test_a_full_queue_answers_429_with_retry_after():
    tight = Service("--workers", "1", "--queue", "1")
    try:
        long = {"instance": long_placement(), "solver": "mip-highs", "time_limit": 60, "wait": 0}
        first, second = tight.post("/v1/solve", long), tight.post("/v1/solve", long)
        assert first.status_code == second.status_code == 202
        third = tight.post("/v1/solve", long)
        assert third.status_code == 429 and int(third.headers["Retry-After"]) >= 1
        for answer in (first, second):
            httpx.delete(f"{tight.url}/v1/jobs/{answer.json()['id']}")
        assert tight.post("/v1/solve", {"instance": GAVEL}).status_code == 200
    finally:
        tight.stop()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def test_a_killed_worker_loses_one_request_not_the_service():
    one = Service("--workers", "1")
    try:
        started = one.post("/v1/solve", {"instance": long_placement(), "solver": "mip-highs", "time_limit": 60,
                                         "wait": 0}).json()["id"]
        deadline = time.monotonic() + 30
        while httpx.get(f"{one.url}/v1/jobs/{started}").json()["state"] != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        # The job's process is a child of the fork server, itself a child of the service.
        workers = [child for server in _children(one.process.pid) for child in _children(server)]
        assert workers
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = httpx.get(f"{one.url}/v1/jobs/{started}").json()
            if state["state"] in ("done", "failed"):
                break
            time.sleep(0.05)
        assert state["state"] == "failed" and state["http"] == 500 and "died" in state["result"]["error"]
        assert one.post("/v1/solve", {"instance": GAVEL}).status_code == 200
    finally:
        one.stop()


def test_sigterm_with_requests_in_flight_answers_them_and_ends():
    ending = Service("--workers", "2", "--grace", "20")
    answers = []
    body = {"instance": long_placement(), "solver": "mip-highs", "time_limit": 4}

    def ask():
        answers.append(ending.post("/v1/solve", body, timeout=60))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while httpx.get(ending.url + "/healthz").json()["running"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    ending.process.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(timeout=60)
    # SIGTERM's exit code, as every fleetplan command (uvicorn re-raises the signal once it has
    # shut down gracefully).
    assert ending.process.wait(timeout=60) == 143
    # Both were in flight: both get their answer before the service ends.
    assert [answer.status_code for answer in answers] == [200, 200]
    assert all(answer.json()["kind"] == "placement" for answer in answers)


def test_the_time_limit_holds_end_to_end(service):
    started = time.monotonic()
    answer = service.post("/v1/solve", {"instance": long_placement(), "solver": "mip-highs", "time_limit": 3})
    elapsed = time.monotonic() - started
    assert answer.status_code == 200 and answer.json()["status"] in ("time_limit", "feasible", "optimal")
    assert elapsed < 3 + 8  # the solver's share of the limit, judging, and the process start
