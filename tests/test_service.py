"""The solve service, started for real on a free loopback port and spoken to over HTTP with a
real client (httpx): endpoints, errors, auth, strict bodies, the queue limit, cancellation, the
warm worker pool (reuse, replacement, a killed worker), a client that disconnects, SIGTERM with
requests in flight, exit codes. Loopback only; every loop bounded in count and time."""

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
TOKEN = "test-token-of-some-length"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BINPACK = json.loads((EXAMPLES / "binpack-small.json").read_text())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Service:
    """A `fleetplan serve` child process on a free loopback port.

    A test whose point is not the worker pool starts one worker (``--workers 1``): every worker
    warms up by importing each kind's solvers before the service answers, most of a start's cost
    on busy cores."""

    def __init__(self, *flags: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        if not any(flag in flags for flag in ("--token", "--token-file", "--insecure", "--no-default-token")):
            flags = ("--token", TOKEN, *flags)
        flags = tuple(flag for flag in flags if flag != "--no-default-token")
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
        headers = {**AUTH, **kwargs.pop("headers", {})}
        return httpx.post(self.url + path, json=body, timeout=kwargs.pop("timeout", 60), headers=headers, **kwargs)

    def get(self, path: str, **kwargs):
        return httpx.get(self.url + path, headers={**AUTH, **kwargs.pop("headers", {})}, timeout=60, **kwargs)

    def patch(self, path: str, body):
        return httpx.patch(self.url + path, json=body, headers=AUTH, timeout=60)

    def delete(self, path: str):
        return httpx.delete(self.url + path, headers=AUTH, timeout=60)

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


@pytest.fixture(scope="module")
def configured(tmp_path_factory):
    """One service for the options the pool does not touch: the token read from a file, a
    scratch folder of the test's, a 1 MB body limit (one start for three tests)."""
    folder = tmp_path_factory.mktemp("configured")
    token_file = folder / "token"
    token_file.write_text(TOKEN + "\n")
    running = Service("--token-file", str(token_file), "--scratch", str(folder / "scratch"), "--max-body-mb", "1",
                      "--workers", "1")
    running.scratch = folder / "scratch"
    yield running
    running.stop()


def long_placement() -> dict:
    """A placement instance the exact MIP does not finish quickly: the job then runs until its
    time limit, long enough to be cancelled or queued behind."""
    return fleetplan.generate("placement", {"regions": 5, "tables": 300, "jobs": 300}, seed=5).model_dump()


def start_long_job(service: Service) -> dict:
    """Post a long placement MIP (``long_placement``) and wait (at most 30 s) until a worker runs
    it; its last state (with ``id`` and, once running, ``pid``)."""
    job = service.post("/v1/solve", {"instance": long_placement(), "solver": "mip-highs", "time_limit": 60,
                                     "wait": 0}).json()["id"]
    deadline = time.monotonic() + 30
    while (state := service.get(f"/v1/jobs/{job}").json())["state"] != "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    return {**state, "id": job}


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
    assert answer.headers["X-Job-Id"]  # every answer to a queued job names it


def test_jobs_are_listed_without_a_state_folder(service):
    answer = service.post("/v1/solve", {"instance": GAVEL})
    listed = service.get("/v1/jobs?limit=5").json()
    assert listed["jobs"][0]["id"] == answer.headers["X-Job-Id"] and len(listed["jobs"]) <= 5
    assert all(row["state"] == "done" for row in service.get("/v1/jobs?state=done").json()["jobs"])


def test_catalog_schema_health_metrics_and_openapi(service):
    names = {entry["name"] for entry in service.get("/v1/solvers").json()}
    assert {"max-min-fairness", "hill-climb", "rms-greedy", "mip-highs"} <= names
    assert service.get("/v1/schema/allocation").json() == fleetplan.schema("allocation")
    assert service.get("/v1/schema/teleport").status_code == 404
    text = service.get("/metrics").text
    assert "fleetplan_requests_total" in text and "fleetplan_queue_depth" in text
    ready = httpx.get(service.url + "/readyz").json()  # probes need no token
    assert ready == {"ready": True, "workers": 2, "idle": ready["idle"], "scratch": True, "draining": False}


def test_the_openapi_document_describes_strict_bodies_and_one_error_shape(service):
    document = service.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    assert "AllocationInstance" in schemas and "ErrorBody" in schemas
    for task in ("Solve", "Evaluate", "Size", "Whatif"):
        body = schemas[f"{task}Request"]
        assert body["additionalProperties"] is False
        assert body["properties"]["instance"] == {"$ref": "#/components/schemas/AnyInstance"}
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            for code, response in operation["responses"].items():
                assert "content" in response, (path, method, code)
                if code.startswith(("4", "5")) and path.startswith("/v1/"):
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (path, method, code)
    solve = document["paths"]["/v1/solve"]["post"]
    assert {"400", "413", "415", "422", "429"} <= set(solve["responses"])
    assert solve["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/SolveRequest"}


@pytest.mark.parametrize("body,code,message", [
    (b"{not json", 400, "malformed JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (b"[" * 100_000 + b"]" * 100_000, 400, "nested too deeply"),
    (json.dumps({"instance": GAVEL, "solver": "teleport"}).encode(), 422, "known: "),
    (json.dumps({"instance": GAVEL, "options": {"no_such": 1}}).encode(), 422, "no_such"),
    (json.dumps({"instance": {"kind": "allocation"}}).encode(), 422, "worker_types"),
    (json.dumps({"solver": "max-min-fairness"}).encode(), 422, "instance"),
    (json.dumps({"instance": GAVEL, "time_limit": "soon"}).encode(), 422, "time_limit"),
    (json.dumps({"instance": GAVEL, "solvr": "max-min-fairness"}).encode(), 422, "solvr: unknown field"),
    (json.dumps({"instance": GAVEL, "time_limt": 3}).encode(), 422, "time_limt: unknown field"),
    (json.dumps({"instance": GAVEL, "time_limit": 100_000}).encode(), 422, "above this service's limit"),
    (json.dumps({"instance": GAVEL, "wait": -1}).encode(), 422, "wait"),
    (json.dumps({"instance": GAVEL, "seed": "7"}).encode(), 422, "seed"),
])
def test_bad_requests_get_the_json_error_object_before_queueing(service, body, code, message):
    answer = httpx.post(service.url + "/v1/solve", content=body, timeout=60,
                        headers={"Content-Type": "application/json", **AUTH})
    assert answer.status_code == code
    data = answer.json()
    assert message in data["error"] and data["exit_code"] == 2 and isinstance(data["errors"], list)
    assert "X-Job-Id" not in answer.headers  # refused before it became a job


def test_size_and_evaluate_bodies_are_strict(service):
    as_string = service.post("/v1/size", {"instance": GAVEL, "targets": "min_time_share>=1", "buy": ["v100=3"]})
    assert as_string.status_code == 422 and as_string.json()["path"] == "targets"
    no_plan = service.post("/v1/evaluate", {"instance": GAVEL})
    assert no_plan.status_code == 422 and no_plan.json()["path"] == "plan"
    bad_plan = service.post("/v1/evaluate", {"instance": GAVEL, "plan": {"kind": "allocation"}})
    assert bad_plan.status_code == 422


def test_only_json_bodies_are_taken(service):
    for media in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {**AUTH, **({"Content-Type": media} if media else {})}
        answer = httpx.post(service.url + "/v1/solve", content=json.dumps({"instance": GAVEL}), headers=headers,
                            timeout=60)
        assert answer.status_code == 415 and answer.json()["path"] == "content-type"
    charset = httpx.post(service.url + "/v1/solve", content=json.dumps({"instance": GAVEL}), timeout=60,
                         headers={**AUTH, "Content-Type": "application/json; charset=utf-8"})
    assert charset.status_code == 200
    missing = service.get("/v1/nothing-here")
    assert missing.status_code == 404 and missing.json()["exit_code"] == 2


def test_an_oversized_body_is_refused_before_it_is_read(configured):
    small = configured  # --max-body-mb 1
    answer = small.post("/v1/solve", None, content=b"x" * (2 * 2**20), headers={"Content-Type": "application/json"})
    assert answer.status_code == 413 and "at most" in answer.json()["error"]

    def chunks():  # no Content-Length: counted as it streams
        for _ in range(3):
            yield b" " * 2**20

    streamed = httpx.post(small.url + "/v1/solve", content=chunks(), timeout=60,
                          headers={"Content-Type": "application/json", **AUTH})
    assert streamed.status_code == 413
    assert small.post("/v1/solve", {"instance": GAVEL}).status_code == 200


def test_a_token_is_required_by_default_on_loopback_too():
    guarded = Service("--no-default-token", "--workers", "1")
    try:
        line = next(line for line in guarded.process.stderr if line.startswith("token: "))
        token = line.split(": ", 1)[1].strip()
        assert len(token) >= 16
        assert httpx.post(guarded.url + "/v1/solve", json={"instance": GAVEL}, timeout=60).status_code == 401
        wrong = httpx.post(guarded.url + "/v1/solve", json={"instance": GAVEL}, timeout=60,
                           headers={"Authorization": "Bearer wrong-token-of-some-length"})
        assert wrong.status_code == 401 and wrong.json()["path"] == "authorization"
        ok = httpx.post(guarded.url + "/v1/solve", json={"instance": GAVEL}, timeout=60,
                        headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200
        assert httpx.get(guarded.url + "/healthz").status_code == 200
        assert httpx.get(guarded.url + "/openapi.json").status_code == 401
    finally:
        guarded.stop()


def test_a_token_file_and_bad_token_options(configured, capsys):
    from fleetplan.cli.app import main

    # The service was given no --token: it takes the token its --token-file holds, and no other.
    ok = configured.post("/v1/solve", {"instance": GAVEL})
    assert ok.status_code == 200
    wrong = configured.post("/v1/solve", {"instance": GAVEL}, headers={"Authorization": "Bearer s3cret-token-of-some-length"})
    assert wrong.status_code == 401
    assert main(["serve", "--port", "0", "--token", "short"]) == 2
    assert "--token" in capsys.readouterr().err
    assert main(["serve", "--port", "0", "--token", "a" * 20, "--insecure"]) == 2
    assert "do not go together" in capsys.readouterr().err


def test_a_port_in_use_is_one_line_and_exit_code_2():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ended = subprocess.run([sys.executable, "-m", "fleetplan", "serve", "--port", str(port)],
                               capture_output=True, text=True, timeout=60)
    assert ended.returncode == 2
    assert f"--port {port}" in ended.stderr and "in use" in ended.stderr and "Traceback" not in ended.stderr


def test_a_long_job_is_polled_and_cancelled(service):
    started = service.post("/v1/solve", {"instance": long_placement(), "solver": "mip-highs", "time_limit": 60,
                                         "wait": 0})
    assert started.status_code == 202
    job = started.json()["id"]
    assert started.headers["X-Job-Id"] == job
    assert service.get(f"/v1/jobs/{job}").json()["state"] in ("queued", "running")
    cancelled = service.delete(f"/v1/jobs/{job}").json()
    assert cancelled["state"] == "cancelled" and cancelled["http"] == 409
    assert service.get(f"/v1/jobs/{job}").json()["state"] == "cancelled"
    assert service.get("/v1/jobs/unknown").status_code == 404
    # The cancelled job's worker was replaced: the next solve is answered.
    assert service.post("/v1/solve", {"instance": GAVEL}).status_code == 200


def test_a_full_queue_answers_429_with_retry_after():
    tight = Service("--workers", "1", "--queue", "1")
    try:
        long = {"instance": long_placement(), "solver": "mip-highs", "time_limit": 60, "wait": 0}
        first, second = tight.post("/v1/solve", long), tight.post("/v1/solve", long)
        assert first.status_code == second.status_code == 202
        third = tight.post("/v1/solve", long)
        assert third.status_code == 429 and int(third.headers["Retry-After"]) >= 1
        for answer in (first, second):
            tight.delete(f"/v1/jobs/{answer.json()['id']}")
        assert tight.post("/v1/solve", {"instance": GAVEL}).status_code == 200
    finally:
        tight.stop()


def _worker_restarts(service: Service) -> float:
    line = next(line for line in service.get("/metrics").text.splitlines()
                if line.startswith("fleetplan_worker_restarts_total "))
    return float(line.split()[1])


def test_workers_are_reused_then_replaced_after_max_jobs():
    pool = Service("--workers", "1", "--max-jobs-per-worker", "3")
    try:
        for seed in range(7):
            answer = pool.post("/v1/solve", {"instance": GAVEL, "seed": seed})
            assert answer.status_code == 200 and answer.json()["status"] == "optimal"
        # 7 jobs on one worker slot, 3 jobs a worker: two replacements (a process per job would
        # be 7), and no job lost.
        deadline = time.monotonic() + 30
        while _worker_restarts(pool) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _worker_restarts(pool) == 2
    finally:
        pool.stop()


def test_a_client_that_disconnects_cancels_its_job(service):
    before = service.get("/metrics").text.count('code="499"')
    with pytest.raises(httpx.ReadTimeout):
        service.post("/v1/solve", {"instance": long_placement(), "solver": "mip-highs", "time_limit": 60, "wait": 30},
                     timeout=1.5)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and service.get("/healthz").json()["running"] > 0:
        time.sleep(0.05)
    assert service.get("/healthz").json()["running"] == 0
    assert service.get("/metrics").text.count('code="499"') > before


def test_a_removed_scratch_folder_is_made_again(configured):
    import shutil

    scratch, served = configured.scratch, configured
    shutil.rmtree(scratch)
    assert httpx.get(served.url + "/readyz").json()["scratch"] is True and scratch.is_dir()
    shutil.rmtree(scratch)
    sweep = served.post("/v1/whatif", {"instance": GAVEL, "vary": ["worker_types.v100.count=1:2:1"]})
    assert sweep.status_code == 200 and len(sweep.json()["rows"]) == 2


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


@pytest.mark.slow
def test_a_killed_worker_loses_one_request_not_the_service():
    one = Service("--workers", "1")
    try:
        state = start_long_job(one)
        started = state["id"]
        os.kill(state["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = one.get(f"/v1/jobs/{started}").json()
            if state["state"] in ("done", "failed"):
                break
            time.sleep(0.05)
        assert state["state"] == "failed" and state["http"] == 500 and "died" in state["result"]["error"]
        assert one.post("/v1/solve", {"instance": GAVEL}).status_code == 200
    finally:
        one.stop()


@pytest.mark.slow
def test_sigterm_with_requests_in_flight_answers_them_and_ends():
    ending = Service("--workers", "2", "--grace", "20")
    answers = []
    body = {"instance": long_placement(), "solver": "mip-highs", "time_limit": 4, "wait": 30}

    def ask():
        answers.append(ending.post("/v1/solve", body, timeout=60))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while ending.get("/healthz").json()["running"] < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    ending.process.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(timeout=60)
    assert ending.process.wait(timeout=60) == 143
    # Both were in flight: both get their answer before the service ends.
    assert [answer.status_code for answer in answers] == [200, 200]
    assert all(answer.json()["kind"] == "placement" for answer in answers)
    assert "Traceback" not in ending.process.stderr.read()


@pytest.mark.slow
def test_sigterm_past_the_grace_answers_503_in_json_and_exits_143():
    ending = Service("--workers", "1", "--grace", "1")
    answers = []
    body = {"instance": long_placement(), "solver": "mip-highs", "time_limit": 60, "wait": 30}
    thread = threading.Thread(target=lambda: answers.append(ending.post("/v1/solve", body, timeout=60)))
    thread.start()
    deadline = time.monotonic() + 30
    while ending.get("/healthz").json()["running"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    signalled = time.monotonic()
    ending.process.send_signal(signal.SIGTERM)
    thread.join(timeout=60)
    assert ending.process.wait(timeout=60) == 143
    took = time.monotonic() - signalled
    assert answers[0].status_code == 503 and "grace" in answers[0].json()["error"]
    assert took < 1 + 8  # the grace period, not twice it (plus stopping the processes)
    assert "Traceback" not in ending.process.stderr.read()


def test_the_time_limit_holds_end_to_end(service):
    started = time.monotonic()
    answer = service.post("/v1/solve", {"instance": long_placement(), "solver": "mip-highs", "time_limit": 3})
    elapsed = time.monotonic() - started
    assert answer.status_code == 200 and answer.json()["status"] in ("time_limit", "feasible", "optimal")
    assert elapsed < 3 + 8  # the solver's share of the limit, judging, and the process start


@pytest.mark.slow
def test_ctrl_c_on_an_idle_service_exits_130():
    idle = Service()
    idle.process.send_signal(signal.SIGINT)
    assert idle.process.wait(timeout=60) == 130
    assert "Traceback" not in idle.process.stderr.read()


@pytest.mark.slow
def test_health_answers_while_a_large_body_is_checked():
    served = Service()
    try:
        big = json.dumps({"instance": fleetplan.generate("allocation", {"jobs": 30_000}, seed=1).model_dump(),
                          "wait": 0}).encode()
        answers = []
        sender = threading.Thread(target=lambda: answers.append(served.post(
            "/v1/solve", None, content=big, headers={"Content-Type": "application/json"}, timeout=120)))
        sender.start()
        slowest = 0.0
        with httpx.Client(base_url=served.url, timeout=30) as client:
            for _ in range(2000):
                if not sender.is_alive():
                    break
                started = time.monotonic()
                assert client.get("/healthz").status_code == 200
                slowest = max(slowest, time.monotonic() - started)
                time.sleep(0.02)
        sender.join(timeout=120)
        assert answers[0].status_code in (200, 202)
        assert slowest < 1.0  # the body is parsed and checked off the event loop
    finally:
        served.stop()


@pytest.mark.slow
def test_the_queue_takes_turns_between_clients():
    one = Service("--workers", "1")
    try:
        # The first job holds the only worker for its 3 s while the rest queue behind it. The
        # rest are quick solves with the default time limit, so each of them does start (one
        # with the blocker's 3 s, counted from its arrival, could run out of time in the queue,
        # and its "start" would then be the moment it was dropped).
        blocker = {"instance": long_placement(), "solver": "mip-highs", "time_limit": 3, "wait": 0}
        quick = {"instance": GAVEL, "wait": 0}
        burst = [one.post("/v1/solve", body, headers={"X-Client-Id": "busy"}).json()["id"]
                 for body in (blocker, quick, quick, quick)]
        single = one.post("/v1/solve", quick, headers={"X-Client-Id": "other"}).json()["id"]
        states = {job: wait_final_state(one, job) for job in [*burst, single]}
        assert [states[job]["http"] for job in [*burst, single]] == [200] * 5
        arrived = {row["id"]: row["arrived"] for row in one.get("/v1/jobs").json()["jobs"]}
        started = {job: arrived[job] + state["queued_s"] for job, state in states.items()}
        # First come, first served would start it last; taking turns starts it before the
        # burst's third and fourth jobs.
        assert started[single] < started[burst[2]] < started[burst[3]]
    finally:
        one.stop()


def wait_final_state(service: Service, job: str) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = service.get(f"/v1/jobs/{job}").json()
        if state["state"] in ("done", "failed", "cancelled"):
            return state
        time.sleep(0.05)
    raise AssertionError(f"job {job} did not end within 60 s")


def test_a_purchase_schedule_over_http(service):
    horizon = {"periods": 2, "targets": ["min_time_share>=0.6"], "demand": {"multipliers": [1, 2]},
               "buy": {"k80": {"price": 1.0, "price_decline": 0.1}}}
    answer = service.post("/v1/horizon", {"instance": GAVEL, "horizon": horizon, "wait": 60})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "optimal" and body["schedule"] and all(
        all(row["checks"].values()) for row in body["periods"])
    assert body["periods"][0]["policy"] == "max-min-fairness"
    # checked before it is queued: the horizon's own field is named, and so is an unknown one
    bad = service.post("/v1/horizon", {"instance": GAVEL, "horizon": {**horizon, "periods": 0}})
    assert bad.status_code == 422 and bad.json()["error"].startswith("periods")
    typo = service.post("/v1/horizon", {"instance": GAVEL, "horizon": horizon, "polcy": "x"})
    assert typo.status_code == 422 and "polcy" in typo.json()["error"]


@pytest.mark.slow
def test_a_job_sent_ahead_to_a_worker_is_not_lost_when_that_worker_dies():
    # A worker gets its next job while it runs one (the round trip through the event loop no
    # longer sets the pace); if the worker dies, that job never ran and goes back to the queue.
    one = Service("--workers", "1")
    try:
        state = start_long_job(one)
        long = state["id"]
        ahead = one.post("/v1/solve", {"instance": GAVEL, "wait": 0}).json()["id"]
        dropped = one.post("/v1/solve", {"instance": GAVEL, "wait": 0}).json()["id"]
        assert one.get(f"/v1/jobs/{ahead}").json()["state"] == "queued"
        assert one.delete(f"/v1/jobs/{dropped}").json()["state"] == "cancelled"
        os.kill(state["pid"], signal.SIGKILL)
        assert wait_final_state(one, long)["http"] == 500
        answered = wait_final_state(one, ahead)
        assert answered["state"] == "done" and answered["http"] == 200
        assert one.get(f"/v1/jobs/{dropped}").json()["state"] == "cancelled"
        assert one.get("/healthz").json()["queued"] == 0
    finally:
        one.stop()


@pytest.mark.slow
def test_a_job_cancelled_while_it_waits_at_a_worker_stays_cancelled():
    one = Service("--workers", "1")
    try:
        long = start_long_job(one)["id"]
        ahead = one.post("/v1/solve", {"instance": GAVEL, "wait": 0}).json()["id"]
        assert one.delete(f"/v1/jobs/{ahead}").json()["state"] == "cancelled"
        assert one.delete(f"/v1/jobs/{long}").json()["state"] == "cancelled"  # its worker is replaced
        assert one.post("/v1/solve", {"instance": GAVEL}).status_code == 200
        assert one.get(f"/v1/jobs/{ahead}").json()["state"] == "cancelled"
        assert one.get("/healthz").json() == {"ok": True, "queued": 0, "running": 0}
    finally:
        one.stop()
