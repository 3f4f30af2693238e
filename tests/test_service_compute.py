"""The solve service's hot path, in process: the plain ASGI route of the computing requests
answers as FastAPI's route did, the small-body parser refuses what the files' parser refuses with
the same error, the worker pipe's framing is multiprocessing's both ways, finished jobs are
forgotten oldest first, and /metrics' buckets stay cumulative. No worker process is started."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import threading

import pytest
from conftest import EXAMPLES

pytest.importorskip("fastapi")

GAVEL = json.loads((EXAMPLES / "allocation-gavel-4.1.json").read_text())
TOKEN = "test-token-of-some-length"


def _call(app, method: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
    """One request through an ASGI app: (status, headers, body)."""
    sent: list[dict] = []
    raw_headers = [(b"content-type", b"application/json"), (b"authorization", f"Bearer {TOKEN}".encode()),
                   (b"content-length", str(len(body)).encode())]
    raw_headers += [(name.encode(), value.encode()) for name, value in (headers or {}).items()]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": raw_headers,
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80), "state": {}}
    chunks = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if chunks:
            return chunks.pop()
        await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = sent[0]
    return start["status"], {name.decode(): value.decode() for name, value in start["headers"]}, sent[1]["body"]


@pytest.fixture()
def guarded():
    """The service's ASGI app (its jobs never started: nothing reaches a worker)."""
    from fleetplan.service import ServiceSettings, create_app

    app = create_app(ServiceSettings(token=TOKEN))
    yield app
    app.service.jobs.close()  # removes its scratch folder


@pytest.mark.parametrize("method,path,body", [
    ("POST", "/v1/solve", {"instance": GAVEL, "solvr": "max-min-fairness"}),
    ("POST", "/v1/solve", {"instance": GAVEL, "options": {"no_such": 1}}),
    ("POST", "/v1/evaluate", {"instance": GAVEL}),
    ("POST", "/v1/sessions/unknown/solve", {}),
    ("PATCH", "/v1/sessions/unknown", {"changes": []}),
])
def test_the_plain_route_answers_refusals_as_fastapis_route(guarded, method, path, body):
    raw = json.dumps(body).encode()
    fast = _call(guarded, method, path, raw)  # the Guard hands it to fleetplan.service.compute
    routed = _call(guarded.app, method, path, raw)  # FastAPI's route (its endpoint delegates)
    assert fast == routed
    assert fast[0] in (404, 422) and json.loads(fast[2])["exit_code"] == 2


def test_a_queued_job_is_answered_202_with_its_id_on_either_route(guarded):
    raw = json.dumps({"instance": GAVEL, "wait": 0}).encode()
    for app in (guarded, guarded.app):
        code, headers, body = _call(app, "POST", "/v1/solve", raw, {"x-client-id": "me"})
        answer = json.loads(body)
        assert code == 202 and answer["state"] == "queued" and headers["x-job-id"] == answer["id"]
        assert headers["location"] == answer["url"] == f"/v1/jobs/{answer['id']}"
        assert headers["content-type"] == "application/json" and int(headers["content-length"]) == len(body)
    jobs = guarded.service.jobs
    assert jobs.queued == 2 and [job.client for job in jobs.jobs.values()] == ["me", "me"]
    assert all(job.digest == "" for job in jobs.jobs.values())  # no Idempotency-Key: no digest to keep


@pytest.mark.parametrize("text", [
    '{"a": [1, 2.5, -3e10, true, null, "x"]}',
    '{"n": 9223372036854775807}',
    '{"n": 9223372036854775808}',
    '{"n": -9223372036854775808}',
    '{"x": {"y": [1e30, -1e30]}}',
    '{"x": {"y": [0.5, 1e31]}}',
    '{"x": 1e999}',
    '{"x": NaN}',
    '{"x": -Infinity}',
    '{"x": 1' + "0" * 5000 + '}',
    '{"x": [1, 2,]}',
    '[1, 2]',
    '[' * 30_000 + ']' * 30_000,
])
def test_a_small_body_is_refused_as_the_files_parser_refuses_it(text):
    from fleetplan.errors import InstanceError
    from fleetplan.instances.base import parse_json_text
    from fleetplan.service.schemas import HOOKED_PARSE_BYTES, parse_body

    assert len(text.encode()) <= HOOKED_PARSE_BYTES  # parsed with the numbers checked as met

    def outcome(parse):
        try:
            return "ok", parse()
        except InstanceError as error:
            return "error", str(error)

    raw = text.encode()
    ours = outcome(lambda: parse_body(raw))
    theirs = outcome(lambda: parse_json_text(text))
    if theirs[0] == "ok" and not isinstance(theirs[1], dict):
        theirs = ("error", "the body must be a JSON object")
    assert ours == theirs


@pytest.mark.parametrize("instance", [
    {"worker_types": []},
    {"kind": "teleport"},
    {**GAVEL, "jobs": "none"},
    {**GAVEL, "worker_types": [{"name": "v100", "count": "16"}]},
])
def test_an_instance_whose_numbers_were_checked_gets_the_same_errors(instance):
    from fleetplan.errors import InstanceError
    from fleetplan.service.schemas import check_fields

    errors = []
    for numbers_checked in (False, True):
        with pytest.raises(InstanceError) as raised:
            check_fields("solve", {"instance": instance}, 60.0, numbers_checked=numbers_checked)
        errors.append(str(raised.value))
    assert errors[0] == errors[1]


def test_the_pipe_framing_is_multiprocessings_both_ways():
    from fleetplan.service.tasks import READ_CHUNK, read_messages, write_message

    ours, theirs = multiprocessing.Pipe()
    big = bytes(range(256)) * (3 * READ_CHUNK // 256)  # past one read, and past the socket's buffer
    writer = threading.Thread(target=lambda: [theirs.send_bytes(message) for message in (b"one", b"", b"two", big)])
    writer.start()
    received: list[bytes] = []
    while len(received) < 4:
        received += [bytes(message) for message in read_messages(ours.fileno())]
    writer.join()
    assert received == [b"one", b"", b"two", big]
    write_message(ours.fileno(), b'{"task": "solve"}')
    assert theirs.recv_bytes() == b'{"task": "solve"}'
    theirs.close()
    with pytest.raises(EOFError):
        read_messages(ours.fileno())
    ours.close()


def test_finished_jobs_are_forgotten_oldest_first():
    from fleetplan.service.jobs import JobManager

    manager = JobManager(workers=0, queue_size=8, max_kept=2)
    try:
        jobs = [manager.submit("solve", b"{}", 60.0, "me", idempotency_key=f"key-{k}") for k in range(4)]
        for job in jobs:
            manager.cancel(job)
        manager.forget_old()
        assert list(manager.jobs) == [jobs[2].id, jobs[3].id]
        assert manager.submit("solve", b"{}", 60.0, "me", idempotency_key="key-3") is jobs[3]  # still known
        assert manager.submit("solve", b"{}", 60.0, "me", idempotency_key="key-0") is not jobs[0]  # forgotten
        manager.retention_s = 0.0
        manager.forget_old()
        assert [job.state for job in manager.jobs.values()] == ["queued"]
    finally:
        manager.close()


def test_the_latency_buckets_are_cumulative():
    from fleetplan.service.metrics import LATENCY_BUCKETS, Metrics

    metrics = Metrics()
    for seconds in (0.001, 0.005, 0.3, 1.0, 400.0):
        metrics.observe("POST", "/v1/solve", 200, seconds)
    buckets = {line.split('le="')[1].split('"')[0]: int(line.split()[-1])
               for line in metrics.render(None).splitlines() if line.startswith("fleetplan_request_seconds_bucket")}
    expected = {str(bound): sum(seconds <= bound for seconds in (0.001, 0.005, 0.3, 1.0, 400.0))
                for bound in LATENCY_BUCKETS}
    assert buckets == {**expected, "+Inf": 5}
