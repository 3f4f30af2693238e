"""The HTTP/JSON application of ``fleetplan serve`` (FastAPI on uvicorn).

Endpoints (JSON in and out; errors are the command line's ``--json`` error object)::

    POST   /v1/solve        instance, solver, options, time_limit, seed, threads -> result and plan
    POST   /v1/evaluate     instance, plan -> the judge's evaluation
    POST   /v1/size         instance, targets, buy, budget, policy, time_limit -> purchase, sized instance
    POST   /v1/whatif       instance, vary, solver, options, metrics -> one row per point
    GET    /v1/jobs/{id}    a job's state and, once finished, its answer
    DELETE /v1/jobs/{id}    cancel a job (kills its process)
    GET    /v1/solvers      every solver with its options
    GET    /v1/schema/{kind}  the JSON Schema of a kind's instances (?plan=true: plans)
    GET    /healthz         liveness; GET /metrics: Prometheus text

A computing request waits up to ``wait`` seconds (the body's field, default the service's
``sync_wait_s``) for its answer: done by then, the answer comes back (200, or 422 for bad
input); otherwise 202 with the job's id and URL to poll. The instance files' own pydantic models
describe the request bodies in the OpenAPI document (``/openapi.json``), so the service and the
files cannot disagree; the bodies are validated by the same loaders as files (strict, with the
same bounds), in the job's process.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from fleetplan.errors import KIND_NAMES, InstanceError
from fleetplan.service.jobs import FINAL, JobManager, QueueFull
from fleetplan.service.tasks import error_body

TASKS = ("solve", "evaluate", "size", "whatif")
LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


@dataclass
class ServiceSettings:
    """How the service runs (``fleetplan serve``'s flags)."""

    workers: int = 2
    queue_size: int = 64
    max_body_bytes: int = 64 * 1024 * 1024
    sync_wait_s: float = 10.0
    default_time_limit_s: float = 60.0
    max_time_limit_s: float = 3600.0
    token: str | None = None
    grace_s: float = 10.0
    scratch: str | None = None


class Metrics:
    """Counters for ``/metrics`` (Prometheus text format)."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, str, int]] = Counter()
        self.latency_sum: Counter[str] = Counter()
        self.latency_count: Counter[str] = Counter()
        self.latency_buckets: Counter[tuple[str, float]] = Counter()

    def observe(self, method: str, route: str, code: int, seconds: float) -> None:
        self.requests[(method, route, code)] += 1
        self.latency_sum[route] += seconds
        self.latency_count[route] += 1
        for bound in LATENCY_BUCKETS:
            if seconds <= bound:
                self.latency_buckets[(route, bound)] += 1

    def render(self, jobs: JobManager) -> str:
        lines = ["# HELP fleetplan_requests_total HTTP requests by method, route and status code.",
                 "# TYPE fleetplan_requests_total counter"]
        for (method, route, code), count in sorted(self.requests.items()):
            lines.append(f'fleetplan_requests_total{{method="{method}",route="{route}",code="{code}"}} {count}')
        lines += ["# HELP fleetplan_request_seconds Request latency.", "# TYPE fleetplan_request_seconds histogram"]
        for route in sorted(self.latency_count):
            for bound in LATENCY_BUCKETS:
                lines.append(f'fleetplan_request_seconds_bucket{{route="{route}",le="{bound}"}} '
                             f"{self.latency_buckets[(route, bound)]}")
            lines.append(f'fleetplan_request_seconds_bucket{{route="{route}",le="+Inf"}} {self.latency_count[route]}')
            lines.append(f'fleetplan_request_seconds_sum{{route="{route}"}} {self.latency_sum[route]:.6f}')
            lines.append(f'fleetplan_request_seconds_count{{route="{route}"}} {self.latency_count[route]}')
        lines += ["# HELP fleetplan_queue_depth Jobs waiting for a worker.", "# TYPE fleetplan_queue_depth gauge",
                  f"fleetplan_queue_depth {len(jobs.queue)}",
                  "# HELP fleetplan_jobs_running Jobs in a worker process.", "# TYPE fleetplan_jobs_running gauge",
                  f"fleetplan_jobs_running {len(jobs.running)}",
                  "# HELP fleetplan_jobs_total Finished jobs by task and status.",
                  "# TYPE fleetplan_jobs_total counter"]
        for key, count in sorted(jobs.counts.items()):
            task, _, status = key.partition(":")
            lines.append(f'fleetplan_jobs_total{{task="{task}",status="{status}"}} {count}')
        return "\n".join(lines) + "\n"


def _error(code: int, message: str, path: str = "", headers: dict[str, str] | None = None) -> Any:
    from fastapi.responses import JSONResponse

    body = error_body(InstanceError(path, message))
    return JSONResponse(body, status_code=code, headers=headers)


def create_app(settings: ServiceSettings | None = None, jobs: JobManager | None = None) -> Any:
    """The FastAPI application (``uvicorn.run(create_app(settings))``)."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse

    settings = settings or ServiceSettings()
    jobs = jobs or JobManager(workers=settings.workers, queue_size=settings.queue_size, scratch=settings.scratch)
    metrics = Metrics()

    async def lifespan(app: Any):  # noqa: ANN202 - FastAPI's lifespan protocol
        await asyncio.get_running_loop().run_in_executor(None, jobs.start)
        pumping = asyncio.create_task(_pump(jobs))
        try:
            yield
        finally:
            pumping.cancel()
            await asyncio.get_running_loop().run_in_executor(None, jobs.shutdown, settings.grace_s)

    app = FastAPI(title="fleetplan solve service", version=_version(), lifespan=lifespan,
                  description=__doc__.split("\n\n")[0])
    app.state.jobs, app.state.settings, app.state.metrics = jobs, settings, metrics

    @app.middleware("http")
    async def guard(request: Request, call_next: Any) -> Any:
        started = time.perf_counter()
        route = _route_name(request.url.path)
        response = await _guarded(request, call_next, settings)
        metrics.observe(request.method, route, response.status_code, time.perf_counter() - started)
        return response

    async def compute(task: str, request: Request) -> Any:
        body = await _json_body(request, settings)
        if isinstance(body, JSONResponse):
            return body
        limit = _time_limit(body, settings)
        if isinstance(limit, JSONResponse):
            return limit
        wait = body.pop("wait", None)
        wait_s = settings.sync_wait_s if wait is None else wait
        if isinstance(wait_s, bool) or not isinstance(wait_s, (int, float)) or not 0 <= wait_s <= 3600:
            return _error(422, f"{wait!r} is not allowed: a number of seconds in [0, 3600]", "wait")
        try:
            job = jobs.submit(task, body, limit)
        except QueueFull:
            retry = max(1, math.ceil(_expected_wait(jobs)))
            return _error(429, f"the queue is full ({jobs.queue_size} jobs); retry later", "",
                          {"Retry-After": str(retry)})
        if wait_s > 0 and job.state not in FINAL:
            waiter = asyncio.get_running_loop().create_future()
            job.waiters.append(waiter)
            try:
                await asyncio.wait_for(waiter, timeout=wait_s)
            except asyncio.TimeoutError:
                pass
        if job.state in FINAL:
            return JSONResponse(job.body, status_code=job.http or 500, headers={"X-Job-Id": job.id})
        return JSONResponse({"id": job.id, "state": job.state, "url": f"/v1/jobs/{job.id}"}, status_code=202,
                            headers={"Location": f"/v1/jobs/{job.id}"})

    for task in TASKS:
        app.post(f"/v1/{task}", name=task, openapi_extra=_request_schema(task))(_bind(compute, task))

    @app.get("/v1/jobs/{job_id}")
    async def job_state(job_id: str) -> Any:
        job = jobs.jobs.get(job_id)
        if job is None:
            return _error(404, f"no job '{job_id[:64]}' (finished jobs are kept for {jobs.retention_s:g} s)", "id")
        return JSONResponse(job.summary(), status_code=200)

    @app.delete("/v1/jobs/{job_id}")
    async def cancel(job_id: str) -> Any:
        job = jobs.jobs.get(job_id)
        if job is None:
            return _error(404, f"no job '{job_id[:64]}'", "id")
        jobs.cancel(job)
        return JSONResponse(job.summary(), status_code=200)

    @app.get("/v1/solvers")
    async def solvers() -> Any:
        from fleetplan.solvers import solvers as registered

        return JSONResponse([spec.to_dict() for spec in registered()])

    @app.get("/v1/schema/{kind}")
    async def schema(kind: str, plan: bool = False) -> Any:
        if kind not in KIND_NAMES:
            return _error(404, f"unknown kind '{kind[:64]}' (known: {', '.join(KIND_NAMES)})", "kind")
        import fleetplan

        return JSONResponse(fleetplan.schema(kind, plan=plan))

    @app.get("/healthz")
    async def healthz() -> Any:
        return JSONResponse({"ok": True, "queued": len(jobs.queue), "running": len(jobs.running)})

    @app.get("/metrics")
    async def prometheus() -> Any:
        return PlainTextResponse(metrics.render(jobs), media_type="text/plain; version=0.0.4")

    _document_kinds(app)
    return app


def _bind(function: Any, task: str) -> Any:
    from fastapi import Request

    async def endpoint(request: Request) -> Any:
        return await function(task, request)

    # Annotations are strings in this module: FastAPI must see the class itself to inject it.
    endpoint.__annotations__ = {"request": Request, "return": Any}
    endpoint.__name__ = f"{task}_endpoint"
    endpoint.__doc__ = f"{task.capitalize()}: see the service module's docstring for the body's fields."
    return endpoint


async def _pump(jobs: JobManager) -> None:
    while True:
        jobs.pump()
        await asyncio.sleep(0.01)


def _route_name(path: str) -> str:
    if path.startswith("/v1/jobs/"):
        return "/v1/jobs/{id}"
    if path.startswith("/v1/schema/"):
        return "/v1/schema/{kind}"
    return path if path in {f"/v1/{t}" for t in TASKS} | {"/v1/solvers", "/healthz", "/metrics",
                                                          "/openapi.json", "/docs"} else "other"


async def _guarded(request: Any, call_next: Any, settings: ServiceSettings) -> Any:
    """Bearer token (when configured; /healthz stays open) and the body size limit, before any
    of the body is read or parsed."""
    if settings.token is not None and request.url.path != "/healthz":
        import hmac

        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {settings.token}".encode()):
            return _error(401, "missing or wrong bearer token (Authorization: Bearer TOKEN)", "authorization",
                          {"WWW-Authenticate": "Bearer"})
    length = request.headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            return _error(400, "Content-Length is not a number", "content-length")
        if int(length) > settings.max_body_bytes:
            return _error(413, f"the body has {int(length):,} bytes; this service takes at most "
                               f"{settings.max_body_bytes:,}", "body")
    try:
        return await call_next(request)
    except Exception as error:  # noqa: BLE001 - one JSON error, never a bare 500 page
        return _error(500, f"internal error: {type(error).__name__}: {error}")


async def _json_body(request: Any, settings: ServiceSettings) -> Any:
    """The body as a JSON object, read with the size limit (a body without Content-Length is
    counted as it streams) and parsed by the instance files' own parser."""
    from fleetplan.instances.base import parse_json_text

    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > settings.max_body_bytes:
            return _error(413, f"the body exceeds {settings.max_body_bytes:,} bytes", "body")
        chunks.append(chunk)
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        return _error(400, "the body is not UTF-8 text", "body")
    try:
        data = parse_json_text(text, "body")
    except InstanceError as error:
        from fastapi.responses import JSONResponse

        return JSONResponse(error_body(error), status_code=400)
    if not isinstance(data, dict):
        return _error(400, "the body must be a JSON object", "body")
    return data


def _time_limit(body: dict[str, Any], settings: ServiceSettings) -> Any:
    limit = body.get("time_limit", settings.default_time_limit_s)
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit <= 0:
        return _error(422, f"{str(limit)[:40]} is not allowed: a positive number of seconds", "time_limit")
    if limit > settings.max_time_limit_s:
        return _error(422, f"{limit:g} s is above this service's limit of {settings.max_time_limit_s:g} s",
                      "time_limit")
    body.pop("time_limit", None)
    return float(limit)


def _expected_wait(jobs: JobManager) -> float:
    """Seconds until a queue slot frees, guessed from the running jobs' limits."""
    now = time.time()
    remaining = [max(job.deadline - now, 0.0) for job in jobs.running.values()]
    return min(remaining) if remaining else 1.0


def _version() -> str:
    import fleetplan

    return fleetplan.__version__


# --- OpenAPI: the request bodies described by the files' own models -----------------------------

_FIELDS: dict[str, dict[str, Any]] = {
    "solve": {"solver": {"type": "string"}, "options": {"type": "object"}, "seed": {"type": "integer"},
              "threads": {"type": "integer"}},
    "evaluate": {"plan": {"$ref": "#/components/schemas/AnyPlan"}},
    "size": {"targets": {"type": "array", "items": {"type": "string"}},
             "buy": {"type": "array", "items": {"type": "string"}}, "budget": {"type": "number"},
             "policy": {"type": "string"}},
    "whatif": {"vary": {"type": "array", "items": {"type": "string"}}, "solver": {"type": "string"},
               "options": {"type": "object"}, "metrics": {"type": "array", "items": {"type": "string"}},
               "time_limit_per_point": {"type": "number"}},
}


def _request_schema(task: str) -> dict[str, Any]:
    properties = {"instance": {"$ref": "#/components/schemas/AnyInstance"}, **_FIELDS[task],
                  "time_limit": {"type": "number", "description": "seconds, end to end"},
                  "wait": {"type": "number", "description": "seconds to wait for the answer before a 202"}}
    required = ["instance", "plan"] if task == "evaluate" else ["instance"]
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "properties": properties, "required": required}}}}}


def _document_kinds(app: Any) -> None:
    """Put every kind's instance and plan JSON Schema (from their pydantic models) into the
    OpenAPI document's components."""
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
        app.openapi_schema = document
        return document

    app.openapi = openapi
