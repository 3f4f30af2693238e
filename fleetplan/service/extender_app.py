"""``fleetplan serve --extender``: the Kubernetes scheduler extender over HTTP (Starlette on
uvicorn); the computation is :mod:`fleetplan.service.extender`.

Routes (JSON in and out)::

    POST /extender/filter        ExtenderArgs -> ExtenderFilterResult
    POST /extender/prioritize    ExtenderArgs -> HostPriorityList
    POST /extender/nodes         a NodeList -> the node cache (for nodeCacheCapable)
    GET  /extender/nodes         the cache's size and the nodes it could not read
    GET  /healthz, /readyz       liveness and readiness (no token)
    GET  /metrics                Prometheus text

**The token.** kube-scheduler's extender client sends no ``Authorization`` header (its
configuration has TLS settings only), so besides the header the token may be the path segment
after ``/extender/``: ``urlPrefix: http://127.0.0.1:8888/extender/TOKEN`` makes the scheduler
call ``/extender/TOKEN/filter``. The token is compared in constant time and removed from the
path before routing, so it is neither routed on nor counted in ``/metrics``.

**Errors.** ``filter`` answers a bad request 200 with ``Error`` set (kube-scheduler reads it and
reports it on the pod; it reads no body of a non-200 answer); ``prioritize``, whose answer has
no error field, answers 400 with the service's error object; both name the field. 401, 413 and
415 as the solve service. A request is parsed, answered and its answer written in one worker
thread, one at a time, so the event loop stays free for ``/healthz``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fleetplan.errors import InstanceError, error_object
from fleetplan.service.extender import Extender, read_args
from fleetplan.service.metrics import Metrics

VERBS = ("filter", "prioritize", "nodes")
OPEN_PATHS = frozenset({"/healthz", "/readyz"})


class ExtenderService:
    """The extender's state: settings, the :class:`Extender`, its worker thread, metrics."""

    def __init__(self, extender: Extender, token: str | None, max_body_bytes: int):
        self.extender, self.token, self.max_body_bytes = extender, token, max_body_bytes
        self.metrics = Metrics()
        self.draining = False
        # One thread: requests are answered one after the other (the node cache stays whole),
        # and the event loop only moves bytes.
        self.thread = ThreadPoolExecutor(1, thread_name_prefix="extender")

    def begin_drain(self) -> None:
        """SIGTERM: refuse new requests (503); an extender holds no job to wait for."""
        self.draining = True

    def answer(self, verb: str, body: bytes) -> tuple[int, bytes]:
        """The HTTP code and body of one verb (run in the worker thread).

        The cyclic garbage collector waits while a request is answered: a request of 1,000 node
        objects makes some 10^5 dicts and lists, which set off collections that walk every
        object of the process — a third of the answer's time at the 99th percentile. What a
        request makes holds no cycles; reference counting frees it."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._answer(verb, body)
        finally:
            if collecting:
                gc.enable()

    def _answer(self, verb: str, body: bytes) -> tuple[int, bytes]:
        if verb == "filter":  # errors in the answer's Error (the scheduler reads no body of a non-200)
            return 200, self.extender.filter_json(body)
        try:
            if verb == "prioritize":
                return 200, self.extender.prioritize_json(body)
            args, _ = read_args(body)
            return 200, _dumps(self.extender.remember(args))
        except InstanceError as error:
            return 400, _dumps(error_object(error))


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _error(code: int, message: str, path: str = "", headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import Response

    return Response(_dumps(error_object(InstanceError(path, message))), status_code=code,
                    media_type="application/json", headers=headers)


def create_extender_app(extender: Extender, token: str | None = None,
                        max_body_bytes: int = 64 * 1024 * 1024) -> Any:
    """The ASGI application; ``app.service`` is its :class:`ExtenderService`."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    service = ExtenderService(extender, token, max_body_bytes)

    async def verb_endpoint(request: Request) -> Any:
        verb = request.path_params["verb"]
        if verb not in VERBS:
            return _error(404, f"no extender verb '{verb[:40]}' (filter, prioritize, nodes; bind is not offered: "
                               "the scheduler binds)", "verb")
        if request.method == "GET":
            if verb != "nodes":
                return _error(405, f"{verb} takes POST", "method")
            cache = service.extender.cache
            return JSONResponse({"nodes": len(cache), "failed": {name: error for name, (_, error) in cache.items()
                                                                 if error}})
        started = time.perf_counter()
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > service.max_body_bytes:
                return _error(413, f"the body exceeds {service.max_body_bytes:,} bytes", "body")
        read = time.perf_counter()
        loop = asyncio.get_running_loop()
        code, body = await loop.run_in_executor(service.thread, service.answer, verb, bytes(raw))
        # Where the time went, for whoever watches the scheduler's latency (W3C Server-Timing).
        timing = f"read;dur={1e3 * (read - started):.1f}, answer;dur={1e3 * (time.perf_counter() - read):.1f}"
        return Response(body, status_code=code, media_type="application/json", headers={"Server-Timing": timing})

    async def healthz(request: Request) -> Any:
        return JSONResponse({"ok": True})

    async def readyz(request: Request) -> Any:
        ready = not service.draining
        return JSONResponse({"ready": ready, "draining": service.draining, "policy": extender.policy_name,
                             "cached_nodes": len(extender.cache)}, status_code=200 if ready else 503)

    async def prometheus(request: Request) -> Any:
        return PlainTextResponse(service.metrics.render(None), media_type="text/plain; version=0.0.4")

    async def not_found(request: Request, error: Exception) -> Any:
        return _error(404, f"{request.method} {request.url.path[:100]}: no such route (the extender serves "
                           "/extender/filter, /extender/prioritize, /extender/nodes)", "")

    async def wrong_method(request: Request, error: Exception) -> Any:
        return _error(405, f"{request.method} {request.url.path[:100]}: method not allowed", "method")

    @contextlib.asynccontextmanager
    async def lifespan(app: Any):  # noqa: ANN202 - the ASGI lifespan protocol
        # What is loaded by now lives as long as the process: out of the collector's sight.
        gc.freeze()
        try:
            yield
        finally:
            service.thread.shutdown(wait=False)

    app = Starlette(routes=[Route("/extender/{verb}", verb_endpoint, methods=["POST", "GET"]),
                            Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", prometheus)],
                    exception_handlers={404: not_found, 405: wrong_method}, lifespan=lifespan)
    guard = ExtenderGuard(app, service)
    guard.service = service
    return guard


class ExtenderGuard:
    """Pure ASGI middleware before routing: the token (header, or the path segment after
    ``/extender/``, then removed from the path), draining (503), JSON-only bodies (415), the
    declared body size (413), and the metrics."""

    def __init__(self, app: Any, service: ExtenderService):
        self.app, self.service = app, service

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def sending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        refusal, scope = self.check(scope)
        await (refusal or self.app)(scope, receive, sending)
        path = scope["path"]
        route = path if path in ("/healthz", "/readyz", "/metrics") or (
            path.startswith("/extender/") and path.count("/") == 2 and path[10:] in VERBS) else "other"
        self.service.metrics.observe(scope["method"], route, status[0], time.perf_counter() - started)

    def check(self, scope: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        service, path = self.service, scope["path"]
        if path in OPEN_PATHS:
            return None, scope
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        parts = path.split("/")
        in_path = None
        if len(parts) == 4 and parts[1] == "extender":  # /extender/TOKEN/VERB
            in_path = parts[2]
            scope = {**scope, "path": f"/extender/{parts[3]}", "raw_path": f"/extender/{parts[3]}".encode()}
        if service.token is not None:
            expected = service.token.encode()
            given_header = headers.get("authorization", "").encode()
            ok = hmac.compare_digest(given_header, b"Bearer " + expected) or (
                in_path is not None and hmac.compare_digest(in_path.encode(), expected))
            if not ok:
                return _error(401, "missing or wrong token (send Authorization: Bearer TOKEN, or put the token in "
                                   "the scheduler's urlPrefix: .../extender/TOKEN)", "authorization",
                              {"WWW-Authenticate": "Bearer"}), scope
        elif in_path is not None:
            return _error(404, "this extender serves no token: its routes are /extender/VERB", "path"), scope
        if service.draining:
            return _error(503, "the extender is shutting down", "", {"Connection": "close"}), scope
        if scope["method"] in ("POST", "PUT", "PATCH"):
            media = headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json":
                return _error(415, f"the body must be application/json (got '{media[:60] or 'no Content-Type'}')",
                              "content-type"), scope
            length = headers.get("content-length")
            if length is not None and not length.isdigit():
                return _error(400, "Content-Length is not a number", "content-length"), scope
            if length is not None and int(length) > service.max_body_bytes:
                return _error(413, f"the body has {int(length):,} bytes; this extender takes at most "
                                   f"{service.max_body_bytes:,}", "body"), scope
        return None, scope


__all__ = ["ExtenderService", "create_extender_app"]
