"""The HTTP/JSON application of ``fleetplan serve`` (FastAPI on uvicorn).

Endpoints (JSON in and out; every error is one shape, the command line's ``--json`` object)::

    POST   /v1/solve        instance, solver, options, time_limit, seed, threads, wait -> result and plan
    POST   /v1/evaluate     instance, plan -> the judge's evaluation
    POST   /v1/size         instance, targets, buy, budget, policy, time_limit -> purchase, sized instance
    POST   /v1/whatif       instance, vary, solver, options, metrics -> one row per point
    GET    /v1/jobs         the jobs kept (newest first; ?state=, ?limit=)
    GET    /v1/jobs/{id}    a job's state and, once finished, its answer
    DELETE /v1/jobs/{id}    cancel a job
    POST   /v1/sessions     instance, solver, options -> a session kept in one worker (201, its id)
    PATCH  /v1/sessions/{id}  changes -> applied in order;  POST /v1/sessions/{id}/solve: re-solve warm
    GET    /v1/sessions[/{id}]  the sessions;  DELETE /v1/sessions/{id}: drop one
    GET    /v1/solvers      every solver with its options
    GET    /v1/schema/{kind}  the JSON Schema of a kind's instances (?plan=true: plans)
    GET    /healthz         liveness;  GET /readyz: workers and scratch folder;  GET /metrics

A computing request is checked in full before it is queued (:mod:`fleetplan.service.schemas`:
a small solve, evaluate or session request in the event loop's process, where its checks cost
less than the trip to another process; any other in an intake process, so a large body is never
parsed on the event loop), then waits up to ``wait`` seconds
(default the service's ``sync_wait_s``, which fits a 5 s caller budget) for its answer: done by
then, the answer comes back; otherwise 202 with the job's id to poll. Every answer to a queued
job carries its id in the ``X-Job-Id`` header, and a client that disconnects while it waits
cancels its job. Those requests take a plain ASGI path past FastAPI's layers
(:mod:`fleetplan.service.compute`); FastAPI serves the rest and the OpenAPI document.
"""

from __future__ import annotations

import asyncio
import gc
import hmac
import json
import os
import time
from dataclasses import dataclass
from typing import Any

from fleetplan.errors import KIND_NAMES, InstanceError, error_object
from fleetplan.service.compute import compute, delegated, request_headers, route
from fleetplan.service.jobs import FINAL, JobManager
from fleetplan.service.metrics import Metrics
from fleetplan.service.schemas import (
    REQUESTS,
    SESSION_REQUESTS,
    ErrorBody,
    Health,
    JobAccepted,
    JobList,
    JobState,
    Ready,
    SessionBrief,
    SessionList,
    intake,
)

TASK_NAMES = tuple(REQUESTS)  # a route per task: POST /v1/NAME
TASKS = frozenset(TASK_NAMES)
# A computing request's route, as /metrics names it.
COMPUTE_ROUTES = {**{task: f"/v1/{task}" for task in TASK_NAMES}, "session_create": "/v1/sessions",
                  "session_patch": "/v1/sessions/{id}", "session_solve": "/v1/sessions/{id}/solve"}
# The routes /metrics names as they are (the others by their pattern, or "other").
KNOWN_PATHS = frozenset({f"/v1/{task}" for task in TASK_NAMES} | {
    "/v1/jobs", "/v1/sessions", "/v1/solvers", "/healthz", "/readyz", "/metrics", "/openapi.json", "/docs"})
# Routes a probe or a client may call without the token: liveness and readiness only.
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
JSON_TYPES = ("application/json",)
# A request this small of these tasks (a scheduler's round) is checked in the event loop's own
# process. Handing a body to an intake process and back costs the loop 0.14-0.27 ms of CPU (on
# top of the intake's own); checking it about 0.1 ms per KiB (0.10 ms for the 0.75 KiB
# allocation example, 0.4 ms for the 3.4 KiB binpack one; benchmarks/scripts/service_check_cost.py):
# below 2 KiB the check is the cheaper. A larger body, or a task whose checks can take long
# (size, whatif, horizon), goes to an intake process, so it never holds up the loop.
INLINE_CHECK_BYTES = 2 * 1024
INLINE_CHECK_TASKS = frozenset({"solve", "evaluate", "session_create", "session_patch", "session_solve"})


@dataclass
class ServiceSettings:
    """How the service runs (``fleetplan serve``'s flags)."""

    workers: int = 2
    queue_size: int = 64
    max_body_bytes: int = 64 * 1024 * 1024
    sync_wait_s: float = 4.0
    default_time_limit_s: float = 60.0
    max_time_limit_s: float = 300.0
    token: str | None = None
    grace_s: float = 10.0
    scratch: str | None = None
    max_jobs_per_worker: int = 10_000
    intake_processes: int = 2
    state: str | None = None  # a folder for the jobs' database (None: jobs live in memory only)
    session_ttl_s: float = 600.0  # a session idle this long is dropped


def error_response(code: int, message: str, path: str = "", headers: dict[str, str] | None = None,
                   exit_code: int = 2) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse(error_object(InstanceError(path, message), exit_code), status_code=code, headers=headers)


class Guard:
    """Pure ASGI middleware, before any routing or body reading: the bearer token, the draining
    state (503), JSON-only bodies (415) and the body's declared size (413)."""

    def __init__(self, app: Any, service: Service):
        self.app, self.service = app, service
        token = service.settings.token
        self.bearer = b"" if token is None else f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = request_headers(scope)
        refusal = self.refusal(scope, headers)
        computing = route(scope["method"], scope["path"], TASKS) if refusal is None else None
        if computing is not None:  # the hot path: past FastAPI's layers (fleetplan.service.compute)
            code = await compute(self.service, *computing, scope, receive, send, headers)
            self.service.metrics.observe(scope["method"], COMPUTE_ROUTES[computing[0]], code,
                                         time.perf_counter() - started)
            return
        status: list[int] = [500]

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        await (refusal or self.app)(scope, receive, sending)
        self.service.metrics.observe(scope["method"], _route_name(scope["path"]), status[0],
                                     time.perf_counter() - started)

    def refusal(self, scope: dict[str, Any], headers: dict[str, str]) -> Any:
        settings, path = self.service.settings, scope["path"]
        if path in OPEN_PATHS:
            return None
        if settings.token is not None:
            given = headers.get("authorization", "")
            if not hmac.compare_digest(given.encode(), self.bearer):
                return error_response(401, "missing or wrong bearer token (send Authorization: Bearer TOKEN)",
                                      "authorization", {"WWW-Authenticate": "Bearer"})
        if self.service.draining:
            return error_response(503, "the service is shutting down; retry on another instance", "",
                                  {"Connection": "close"}, exit_code=1)
        if scope["method"] in ("POST", "PUT", "PATCH"):
            media = headers.get("content-type", "").split(";")[0].strip().lower()
            if media not in JSON_TYPES:
                return error_response(415, f"the body must be application/json (got "
                                           f"'{media[:60] or 'no Content-Type'}')", "content-type")
            length = headers.get("content-length")
            if length is not None and not length.isdigit():
                return error_response(400, "Content-Length is not a number", "content-length")
            if length is not None and int(length) > settings.max_body_bytes:
                return error_response(413, f"the body has {int(length):,} bytes; this service takes at most "
                                           f"{settings.max_body_bytes:,}", "body")
        return None


class Service:
    """The application's state: settings, jobs, the intake processes, metrics, draining."""

    def __init__(self, settings: ServiceSettings, jobs: JobManager | None = None):
        self.settings = settings
        self.jobs = jobs or JobManager(workers=settings.workers, queue_size=settings.queue_size,
                                       scratch=settings.scratch, max_jobs_per_worker=settings.max_jobs_per_worker,
                                       state=settings.state, session_ttl_s=settings.session_ttl_s)
        self.metrics = Metrics()
        self.draining = False
        self.intake: Any = None
        self._drained: asyncio.Task[None] | None = None
        self._cache: dict[str, bytes] = {}

    def _new_intake(self) -> Any:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from fleetplan.service.schemas import warm_intake

        return ProcessPoolExecutor(self.settings.intake_processes, mp_context=multiprocessing.get_context("forkserver"),
                                   initializer=warm_intake, initargs=(os.getpid(),))

    async def start(self) -> None:
        import multiprocessing

        from fleetplan.service.jobs.processes import PRELOAD

        # One fork server serves the workers and the intake: its imports are set before either starts.
        multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
        self.intake = self._new_intake()
        loop = asyncio.get_running_loop()
        warming = [loop.run_in_executor(self.intake, _nothing) for _ in range(self.settings.intake_processes)]
        warming.append(asyncio.to_thread(_load_checks))  # what the checks in this process import
        await self.jobs.start()
        await asyncio.gather(*warming)

    def begin_drain(self) -> None:
        """SIGTERM: refuse new requests (503), give running jobs the grace period, then stop them.
        Safe to call from a signal handler on the loop's thread."""
        if self._drained is None:
            self.draining = True
            self._drained = asyncio.get_running_loop().create_task(self.jobs.drain(self.settings.grace_s))

    async def stop(self) -> None:
        self.begin_drain()
        await self._drained
        self.jobs.close()
        if self.intake is not None:
            await asyncio.to_thread(self.intake.shutdown, wait=True, cancel_futures=True)

    async def check(self, task: str, raw: bytes) -> tuple[int, Any]:
        if len(raw) <= INLINE_CHECK_BYTES and task in INLINE_CHECK_TASKS:
            return intake(task, raw, self.settings.max_time_limit_s)
        from concurrent.futures.process import BrokenProcessPool

        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.intake, intake, task, raw, self.settings.max_time_limit_s)
        except BrokenProcessPool:
            # An intake process died (the OOM killer on a huge body): a new pool for the next request.
            self.intake.shutdown(wait=False, cancel_futures=True)
            self.intake = self._new_intake()
            return 507, error_object(InstanceError("", "the request could not be checked: its checking process "
                                                       "ran out of memory or died"), 1)

    async def cached(self, key: str, make: Any) -> bytes:
        """A constant answer computed once in a thread (the solver catalog imports every kind)."""
        if key not in self._cache:
            self._cache[key] = await asyncio.to_thread(lambda: json.dumps(make()).encode())
        return self._cache[key]


def _nothing() -> None:
    """A task for each intake process, so they start (and import) before the first request."""


def _load_checks() -> None:
    from fleetplan.solvers import load_kind

    load_kind()


def create_app(settings: ServiceSettings | None = None, jobs: JobManager | None = None) -> Any:
    """The ASGI application (``uvicorn.run(create_app(settings))``); ``app.state.service`` is
    its :class:`Service`."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException
    from starlette.responses import JSONResponse, PlainTextResponse, Response

    service = Service(settings or ServiceSettings(), jobs)
    settings = service.settings
    jobs = service.jobs

    @asynccontextmanager
    async def lifespan(app: Any):  # noqa: ANN202 - the ASGI lifespan protocol
        # The OpenAPI document (0.2 s of CPU) is built now, beside the workers' start, not on
        # the event loop when the first client reads it.
        await asyncio.gather(service.start(), asyncio.to_thread(app.openapi))
        # What is loaded by now (FastAPI, pydantic, every kind's models and solvers) lives as long
        # as the process: out of the collector's sight, its full passes under load walk only
        # what the requests allocate.
        gc.collect()
        gc.freeze()
        housekeeping = asyncio.create_task(_housekeeping(jobs))
        try:
            yield
        finally:
            housekeeping.cancel()
            await service.stop()

    errors = {code: {"model": ErrorBody, "description": text} for code, text in (
        (400, "not a JSON object (malformed, not UTF-8, nested too deeply)"), (401, "no or wrong bearer token"),
        (413, "the body is above the service's limit"), (415, "the body is not application/json"),
        (422, "a bad field, named in the error"), (429, "the queue is full (Retry-After)"),
        (500, "an internal error; a worker died"), (503, "shutting down"),
        (504, "the time limit ran out"))}
    app = FastAPI(title="fleetplan solve service", version=_version(), lifespan=lifespan,
                  description=__doc__.split("\n\n")[0], responses={k: errors[k] for k in (401, 415, 503)})
    app.state.service = service

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> Any:
        return error_response(error.status_code, f"{request.method} {request.url.path[:100]}: {error.detail}",
                              "", getattr(error, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> Any:
        first = error.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        return error_response(422, f"{first['msg']}", path)

    for task in TASK_NAMES:
        app.post(f"/v1/{task}", name=task, openapi_extra=_request_body(REQUESTS[task]),
                 responses={200: {"description": f"the {task} answer",
                                  "content": {"application/json": {"schema": {"type": "object"}}}},
                            202: {"model": JobAccepted, "description": "not done within wait: poll the url"},
                            **{k: errors[k] for k in (400, 413, 422, 429, 500, 504)}})(_bind(service, task))

    session_answers = {200: {"description": "the session's summary, or the solve's result", "content": {
        "application/json": {"schema": {"type": "object"}}}},
        202: {"model": JobAccepted, "description": "not done within wait: poll the url"},
        404: errors[422] | {"description": "no such session"},
        410: errors[422] | {"description": "the worker holding the session ended"},
        **{k: errors[k] for k in (400, 413, 422, 429, 500, 504)}}

    @app.post("/v1/sessions", openapi_extra=_request_body(SESSION_REQUESTS["session_create"]),
              responses={201: session_answers[200], **session_answers})
    async def create_session() -> Any:
        """Keep an instance in one worker between rounds; answers 201 with the session's id."""
        return _delegate(service, "session_create", None)

    @app.get("/v1/sessions", response_model=SessionList)
    async def list_sessions() -> Any:
        return JSONResponse({"sessions": [held.brief(jobs.session_ttl_s) for held in jobs.sessions.values()]})

    @app.get("/v1/sessions/{session_id}", response_model=SessionBrief,
             responses={404: errors[422] | {"description": "no such session"}})
    async def session_state(session_id: str) -> Any:
        held = jobs.sessions.get(session_id)
        if held is None:
            return error_response(404, f"no session '{session_id[:64]}'", "id")
        return JSONResponse(held.brief(jobs.session_ttl_s))

    @app.patch("/v1/sessions/{session_id}", openapi_extra=_request_body(SESSION_REQUESTS["session_patch"]),
               responses=session_answers)
    async def change_session(session_id: str) -> Any:
        """Apply changes in order, as the in-process session's methods."""
        return _delegate(service, "session_patch", session_id)

    @app.post("/v1/sessions/{session_id}/solve", openapi_extra=_request_body(SESSION_REQUESTS["session_solve"]),
              responses=session_answers)
    async def solve_session(session_id: str) -> Any:
        """Re-solve warm (binpack: place the body's workloads)."""
        return _delegate(service, "session_solve", session_id)

    @app.delete("/v1/sessions/{session_id}", response_model=SessionBrief,
                responses={404: errors[422] | {"description": "no such session"}})
    async def delete_session(session_id: str) -> Any:
        held = jobs.sessions.get(session_id)
        if held is None:
            return error_response(404, f"no session '{session_id[:64]}'", "id")
        jobs.close_session(held)
        return JSONResponse({**held.brief(jobs.session_ttl_s), "state": "deleted"})

    @app.get("/v1/jobs", response_model=JobList)
    async def job_list(state: str | None = None, limit: int = 100) -> Any:
        """The jobs kept, newest first, without their answers."""
        if state is not None and state not in ("queued", "running", *FINAL):
            return error_response(422, f"'{state[:40]}' is not a state (queued, running, {', '.join(FINAL)})",
                                  "state")
        if not 1 <= limit <= 10_000:
            return error_response(422, f"{limit} is not allowed: an integer in [1, 10000]", "limit")
        chosen = [job for job in jobs.jobs.values() if state is None or job.state == state]
        chosen.sort(key=lambda job: job.arrived, reverse=True)
        return JSONResponse({"jobs": [job.brief() for job in chosen[:limit]], "total": len(chosen)})

    @app.get("/v1/jobs/{job_id}", response_model=JobState, responses={404: errors[422] | {"description": "no such job"}})
    async def job_state(job_id: str) -> Any:
        job = jobs.jobs.get(job_id)
        if job is None:
            kept = ("jobs are kept across restarts" if jobs.store is not None
                    else "jobs do not survive a restart of the service without --state")
            return error_response(404, f"no job '{job_id[:64]}' (finished jobs are kept {jobs.retention_s:g} s; "
                                       f"{kept})", "id")
        return Response(job.summary(), media_type="application/json")

    @app.delete("/v1/jobs/{job_id}", response_model=JobState, responses={404: errors[422] | {"description": "no such job"}})
    async def cancel(job_id: str) -> Any:
        job = jobs.jobs.get(job_id)
        if job is None:
            return error_response(404, f"no job '{job_id[:64]}'", "id")
        jobs.cancel(job)
        return Response(job.summary(), media_type="application/json")

    @app.get("/v1/solvers", responses={200: {"description": "every solver with its options", "content": {
        "application/json": {"schema": {"type": "array", "items": {"type": "object"}}}}}})
    async def solvers() -> Any:
        from fleetplan.solvers import list_solvers

        return Response(await service.cached("solvers", lambda: [spec.to_dict() for spec in list_solvers()]),
                        media_type="application/json")

    @app.get("/v1/schema/{kind}", responses={200: {"description": "a JSON Schema", "content": {
        "application/json": {"schema": {"type": "object"}}}}, 404: errors[422] | {"description": "no such kind"}})
    async def schema(kind: str, plan: bool = False) -> Any:
        if kind not in KIND_NAMES:
            return error_response(404, f"unknown kind '{kind[:64]}' (known: {', '.join(KIND_NAMES)})", "kind")
        import fleetplan

        return Response(await service.cached(f"{kind}:{plan}", lambda: fleetplan.schema(kind, plan=plan)),
                        media_type="application/json")

    @app.get("/healthz", response_model=Health)
    async def healthz() -> Any:
        return JSONResponse({"ok": True, "queued": jobs.queued, "running": len(jobs.running)})

    @app.get("/readyz", response_model=Ready, responses={503: {"model": Ready, "description": "not ready"}})
    async def readyz() -> Any:
        alive = [worker for worker in jobs.workers if worker.ready and not worker.stopping]
        idle = [worker for worker in alive if worker.job is None]
        scratch = jobs.scratch_ok()
        ready = bool(alive) and scratch and not service.draining
        return JSONResponse({"ready": ready, "workers": len(alive), "idle": len(idle), "scratch": scratch,
                             "draining": service.draining}, status_code=200 if ready else 503)

    @app.get("/metrics", responses={200: {"description": "Prometheus text", "content": {"text/plain": {}}}})
    async def prometheus() -> Any:
        return PlainTextResponse(service.metrics.render(jobs), media_type="text/plain; version=0.0.4")

    _document(app)
    return Guard(app, service)


async def _housekeeping(jobs: JobManager) -> None:
    while True:
        await asyncio.sleep(0.25)
        jobs.forget_old()


def _delegate(service: Service, task: str, session_id: str | None) -> Any:
    """A FastAPI endpoint's answer to a computing request: :func:`fleetplan.service.compute.compute`
    sends it (the same code as the path :class:`Guard` takes before FastAPI)."""
    return delegated(lambda scope, receive, send: compute(service, task, session_id, scope, receive, send))


def _bind(service: Service, task: str) -> Any:
    async def endpoint() -> Any:
        return _delegate(service, task, None)

    endpoint.__name__ = f"{task}_endpoint"
    endpoint.__doc__ = REQUESTS[task].__doc__
    return endpoint


def _route_name(path: str) -> str:
    if path.startswith("/v1/jobs/"):
        return "/v1/jobs/{id}"
    if path.startswith("/v1/schema/"):
        return "/v1/schema/{kind}"
    if path.startswith("/v1/sessions/"):
        return "/v1/sessions/{id}/solve" if path.endswith("/solve") else "/v1/sessions/{id}"
    return path if path in KNOWN_PATHS else "other"


def _version() -> str:
    import fleetplan

    return fleetplan.__version__


# --- OpenAPI: the request bodies, with the instance files' own models --------------------------

def _request_body(model: Any) -> dict[str, Any]:
    name = model.__name__
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{name}"}}}}}


def _document(app: Any) -> None:
    """Put the request models and every kind's instance and plan JSON Schema (from their
    pydantic models) into the OpenAPI document's components."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = get_openapi(title=app.title, version=app.version, description=app.description,
                               routes=app.routes)
        import fleetplan

        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for kind in KIND_NAMES:
            for plan, suffix in ((False, "Instance"), (True, "Plan")):
                name = f"{kind.capitalize()}{suffix}"
                schema = json.loads(json.dumps(fleetplan.schema(kind, plan=plan)).replace(
                    "#/$defs/", f"#/components/schemas/{name}."))
                for sub, definition in schema.pop("$defs", {}).items():
                    schemas[f"{name}.{sub}"] = definition
                schemas[name] = schema
        schemas["AnyInstance"] = {"oneOf": [{"$ref": f"#/components/schemas/{k.capitalize()}Instance"}
                                            for k in KIND_NAMES]}
        schemas["AnyPlan"] = {"oneOf": [{"$ref": f"#/components/schemas/{k.capitalize()}Plan"} for k in KIND_NAMES]}
        for model in (*REQUESTS.values(), *SESSION_REQUESTS.values()):
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            if "instance" in schema["properties"]:
                schema["properties"]["instance"] = {"$ref": "#/components/schemas/AnyInstance"}
            if "plan" in schema["properties"]:
                schema["properties"]["plan"] = {"$ref": "#/components/schemas/AnyPlan"}
            schemas[model.__name__] = schema
        # FastAPI's own validation-error shape is never answered (the handler above answers the
        # service's one error shape): the document says so.
        for operation in (op for methods in document["paths"].values() for op in methods.values()):
            invalid = operation["responses"].get("422")
            if invalid is not None and "HTTPValidationError" in json.dumps(invalid):
                operation["responses"]["422"] = {"description": "a bad parameter, named in the error", "content": {
                    "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
        for name in ("HTTPValidationError", "ValidationError"):
            schemas.pop(name, None)
        app.openapi_schema = document
        return document

    app.openapi = openapi
