"""The computing requests' path through the service, as a plain ASGI handler: ``POST /v1/solve``
(and evaluate, size, whatif, horizon) and a session's create, change and solve.

These requests are most of a scheduler's traffic, and the event loop's CPU per request bounds
how many it can answer on a small machine. Through FastAPI each one crossed a dozen ASGI layers
(error and telemetry middleware, the body limit, the router, the route's dependency solving) and
built a ``Request`` and a ``Response``: under 50 concurrent clients that handling cost the event
loop more than the request's own checks and its job's bookkeeping together (cProfile of the
service's process, ``benchmarks/results/service.md``). :class:`Guard <fleetplan.service.app.Guard>`
hands them here once the token, the media type and the declared size have passed; the answers,
headers and error objects are the ones FastAPI's routes gave, byte for byte (Starlette's
``JSONResponse`` rendering). The FastAPI routes stay declared, for the OpenAPI document, and
reach the same code (:func:`delegated`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from typing import Any

from fleetplan.errors import InstanceError, error_object
from fleetplan.service.jobs import FINAL, KeyReused, QueueFull

TASK_PREFIX = "/v1/"
SESSIONS = "/v1/sessions"
_JSON = (b"content-type", b"application/json")


def json_bytes(content: Any) -> bytes:
    """``content`` as Starlette's ``JSONResponse`` renders it (compact, UTF-8, no NaN)."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


async def answer(send: Any, code: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> int:
    """Send a whole JSON answer: the given headers, then its length and media type (Starlette's
    order); returns ``code``."""
    raw = [*(headers or ()), (b"content-length", str(len(body)).encode()), _JSON]
    await send({"type": "http.response.start", "status": code, "headers": raw})
    await send({"type": "http.response.body", "body": body})
    return code


async def refuse(send: Any, code: int, message: str, path: str = "", headers: dict[str, str] | None = None,
                 exit_code: int = 2) -> int:
    """Send the service's error object (``error_response``'s answer); returns ``code``."""
    raw = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in (headers or {}).items()]
    return await answer(send, code, json_bytes(error_object(InstanceError(path, message), exit_code)), raw)


def route(method: str, path: str, tasks: frozenset[str]) -> tuple[str, str | None] | None:
    """``(task, session id)`` of a computing request, or None for any other route.

    >>> route("POST", "/v1/solve", frozenset({"solve"})), route("GET", "/v1/solve", frozenset({"solve"}))
    (('solve', None), None)
    >>> route("POST", "/v1/sessions/abc/solve", frozenset()), route("PATCH", "/v1/sessions/abc", frozenset())
    (('session_solve', 'abc'), ('session_patch', 'abc'))
    """
    if method == "POST":
        if path.startswith(TASK_PREFIX) and path[len(TASK_PREFIX):] in tasks:
            return path[len(TASK_PREFIX):], None
        if path == SESSIONS:
            return "session_create", None
        if path.startswith(SESSIONS + "/") and path.endswith("/solve"):
            session_id = path[len(SESSIONS) + 1:-len("/solve")]
            return ("session_solve", session_id) if session_id and "/" not in session_id else None
    elif method == "PATCH" and path.startswith(SESSIONS + "/"):
        session_id = path[len(SESSIONS) + 1:]
        return ("session_patch", session_id) if session_id and "/" not in session_id else None
    return None


# The request headers the service reads, by their ASGI names (lower case): the guard's three (a
# later one of a name wins, as it always has) and the two a computing request reads (the first
# wins, as in Starlette's ``request.headers.get``).
HEADERS = {b"authorization": "authorization", b"content-type": "content-type", b"content-length": "content-length",
           b"x-client-id": "x-client-id", b"idempotency-key": "idempotency-key"}
FIRST_WINS = frozenset({"x-client-id", "idempotency-key"})


def request_headers(scope: dict[str, Any]) -> dict[str, str]:
    """The headers of :data:`HEADERS` that the request has, in one pass over its headers.

    >>> request_headers({"headers": [(b"x-client-id", b"a"), (b"accept", b"*/*"), (b"x-client-id", b"b")]})
    {'x-client-id': 'a'}
    """
    found: dict[str, str] = {}
    for name, value in scope["headers"]:
        key = HEADERS.get(name)
        if key is not None and (key not in found or key not in FIRST_WINS):
            found[key] = value.decode("latin-1")
    return found


async def _body(receive: Any, limit: int) -> bytes | None:
    """The request's body (None: above ``limit`` bytes, counted as it streams); raises
    :class:`ConnectionAbortedError` when the client leaves before sending it all."""
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ConnectionAbortedError
    body = message.get("body", b"")
    if not message.get("more_body", False):  # the usual case: one message, no copy
        return body if len(body) <= limit else None
    raw = bytearray(body)
    while True:
        if len(raw) > limit:
            return None
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionAbortedError
        raw += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(raw) if len(raw) <= limit else None


def held_session(jobs: Any, session_id: str) -> Any:
    """The session a request names, or ``(code, message, exit code)`` for why it cannot run."""
    held = jobs.sessions.get(session_id)
    if held is None:
        return 404, f"no session '{session_id[:64]}' (idle sessions expire after {jobs.session_ttl_s:g} s)", 2
    if held.state == "lost":
        return 410, "the worker process holding the session ended; create the session again", 1
    if held.state == "creating":
        return 409, "the session is still being created; retry", 1
    return held


async def compute(service: Any, task: str, session_id: str | None, scope: dict[str, Any], receive: Any,
                  send: Any, headers: dict[str, str] | None = None) -> int:
    """Answer one computing request: read and check its body, queue its job, wait up to ``wait``
    for the answer (a client that leaves meanwhile cancels the job), then send the answer, or 202
    with the job's id to poll. Returns the answer's status code (500: none was sent, the client
    left). ``headers``: :func:`request_headers`, when the caller has them."""
    settings, jobs = service.settings, service.jobs
    held = None
    if session_id is not None:
        held = held_session(jobs, session_id)
        if isinstance(held, tuple):
            code, message, exit_code = held
            return await refuse(send, code, message, "id", exit_code=exit_code)
    try:
        body = await _body(receive, settings.max_body_bytes)
    except ConnectionAbortedError:
        return 500  # nobody is left to answer
    if body is None:
        return await refuse(send, 413, f"the body exceeds {settings.max_body_bytes:,} bytes", "body")
    code, envelope = await service.check(task, body)
    if code != 200:
        return await answer(send, code, json_bytes(envelope))
    if task == "session_patch":
        from fleetplan.service.sessions import operations

        known = operations(held.kind)
        for k, op in enumerate(envelope["ops"]):
            if op not in known:
                return await refuse(send, 422, f"'{op[:40]}' is not a change of a {held.kind} session (known: "
                                               f"{', '.join(known)})", f"changes[{k}].op")
    if task == "session_create":
        held = jobs.open_session(envelope["kind"], envelope.get("solver"))
        if held is None:
            return await refuse(send, 503, "no worker is up to hold the session; retry later", exit_code=1)
    if held is not None:
        held.used = time.time()
    limit = min(envelope["time_limit"] or settings.default_time_limit_s, settings.max_time_limit_s)
    wait_s = settings.sync_wait_s if envelope["wait"] is None else envelope["wait"]
    if headers is None:
        headers = request_headers(scope)
    client = headers.get("x-client-id", "")[:64] or (scope["client"][0] if scope.get("client") else "")
    key = headers.get("idempotency-key")
    if key is not None and not (0 < len(key) <= 200 and key.isprintable()):
        return await refuse(send, 422, "must be 1 to 200 printable characters", "idempotency-key")
    try:
        job = jobs.submit(task, body, limit, client, key, session=held.id if held else None,
                          worker=held.worker if held else None)
    except QueueFull:
        return await refuse(send, 429, f"the queue is full ({jobs.queue_size} jobs); retry later", "",
                            {"Retry-After": str(retry_after(jobs))}, exit_code=1)
    except KeyReused:
        return await refuse(send, 422, "this key was sent before with a different request (a retry must send "
                                       "the same body to the same route)", "idempotency-key")
    del body
    if job.persisted is not None:
        await job.persisted  # on disk before the client hears of it
    if wait_s > 0 and job.state not in FINAL:
        await wait_for_answer(job, wait_s, receive, jobs)
    named = (b"x-job-id", job.id.encode())
    if job.state in FINAL:
        code, answer_headers = job.http or 500, [named]
        if task == "session_create" and code == 200:
            code, answer_headers = 201, [named, (b"location", f"/v1/sessions/{held.id}".encode())]
        return await answer(send, code, job.body, answer_headers)
    url = f"/v1/jobs/{job.id}"
    return await answer(send, 202, json_bytes({"id": job.id, "state": job.state, "url": url}),
                        [(b"location", url.encode()), named])


async def wait_for_answer(job: Any, wait_s: float, receive: Any, jobs: Any) -> None:
    """Wait for the job's answer, at most ``wait_s``; a client that disconnects meanwhile
    cancels the job (nobody is left to read its answer, and it holds a worker).

    One future, which the answer, the timer or the task reading the connection settles:
    ``asyncio.wait`` would add a waiter future, a set and callbacks on each, per request."""
    loop = asyncio.get_running_loop()
    answered = loop.create_future()
    job.waiters.append(answered)
    timer = loop.call_later(wait_s, _settle, answered)
    watch = loop.create_task(_watch(receive, answered))
    try:
        await answered
    finally:
        timer.cancel()
        watch.cancel()
    if answered.result() and job.state not in FINAL:
        jobs.cancel(job, 499, "cancelled: the client disconnected before the answer")


def _settle(future: asyncio.Future[Any], left: bool = False) -> None:
    if not future.done():
        future.set_result(left)


async def _watch(receive: Any, answered: asyncio.Future[Any]) -> None:
    """Settle ``answered`` with True when the client disconnects."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            _settle(answered, True)
            return


def retry_after(jobs: Any) -> int:
    """Seconds until a queue slot frees, guessed from the running jobs' deadlines."""
    now = time.time()
    remaining = [max(job.deadline - now, 0.0) for job in jobs.running.values()]
    return max(1, int(min(remaining) + 0.999) if remaining else 1)


def delegated(call: Any) -> Any:
    """A Starlette ``Response`` whose sending is ``call(scope, receive, send)``: a FastAPI
    route's endpoint returns it to answer through this module."""
    return _delegated_class()(call)


@functools.cache
def _delegated_class() -> type:
    from starlette.responses import Response

    class Delegated(Response):
        def __init__(self, call: Any) -> None:  # nothing to render: ``call`` sends the answer
            self.call, self.background = call, None

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await self.call(scope, receive, send)

    return Delegated
