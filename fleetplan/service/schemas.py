"""The service's request and answer shapes, and the checks a request passes before it is queued.

The request models are strict (an unknown field is an error naming it, a string where a list of
strings belongs is refused, no coercion) and are the OpenAPI document's request bodies. A request
is checked by :func:`check_request` — the envelope, the solver's name and options, the instance
(the instance files' own loader, with its bounds) and, to evaluate, the plan — in an intake
process, so a bad request is answered 4xx at once and a large body never stalls the event loop.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

# Imported here, not in each call: a small request is checked in the event loop's process,
# where an import statement per call (a Python-level lookup for a package) adds up.
from fleetplan.errors import InstanceError, error_object
from fleetplan.instances import get_kind, instance_from_data
from fleetplan.instances.base import MAX_INTEGER, MAX_MAGNITUDE, parse_json_text, validate_model

# The largest ``wait`` a request may ask for (seconds).
MAX_WAIT_S = 3600.0

PositiveSeconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Seed = Annotated[int, Field(ge=0, lt=2**63)]
Threads = Annotated[int, Field(ge=1, le=1024)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class _Request(_Strict):
    instance: dict[str, Any] = Field(description="the instance, in the instance file's layout "
                                                 "(GET /v1/schema/{kind})")
    time_limit: PositiveSeconds | None = Field(None, description="seconds, end to end from the request's arrival "
                                                                 "(default and cap: the service's)")
    wait: Annotated[float, Field(ge=0, le=MAX_WAIT_S, allow_inf_nan=False)] | None = Field(
        None, description="seconds to wait for the answer before a 202 with the job's id (0: at once)")


class SolveRequest(_Request):
    """``POST /v1/solve``: solve an instance."""

    solver: str | None = Field(None, description="a solver of the instance's kind (GET /v1/solvers); "
                                                 "None: the kind's default")
    options: dict[str, Any] = Field(default_factory=dict, description="the solver's options")
    seed: Seed = 0
    threads: Threads = 1


class EvaluateRequest(_Request):
    """``POST /v1/evaluate``: the judge's evaluation of a plan."""

    plan: dict[str, Any] = Field(description="a plan of the instance's kind")


class SizeRequest(_Request):
    """``POST /v1/size``: the cheapest capacity that meets the targets."""

    targets: list[str] = Field(default_factory=list, description='"METRIC>=VALUE" strings')
    buy: list[str] = Field(default_factory=list, description='"NAME[=PRICE[:MAX]]" strings')
    budget: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    policy: str | None = None
    seed: Seed = 0
    threads: Threads = 1


class WhatifRequest(_Request):
    """``POST /v1/whatif``: one solve per grid point."""

    vary: list[str] = Field(default_factory=list, description='"FIELD=START:STOP:STEP" strings')
    solver: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    metrics: list[str] | None = None
    time_limit_per_point: PositiveSeconds | None = None
    seed: Seed = 0


class HorizonRequest(_Request):
    """``POST /v1/horizon``: the cheapest purchase schedule over periods (``fleetplan horizon``)."""

    horizon: dict[str, Any] = Field(description="the horizon, in the horizon file's layout (docs/planning.md, "
                                                "section 7)")
    gap: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = Field(
        0.01, description="stop once the schedule is proven within this fraction of the cheapest")
    stochastic: bool = Field(True, description="with scenarios: also the wait-and-see and mean-value solves (VSS, EVPI)")
    prices: bool = Field(False, description="also re-solve for the prices that bind (budget, lead time)")
    policy: str | None = Field("default", description="allocation: the policy each period is also solved by and "
                                                      "judged ('default': the kind's; None: no check)")
    seed: Seed = 0
    threads: Threads = 1


REQUESTS: dict[str, type[_Request]] = {"solve": SolveRequest, "evaluate": EvaluateRequest, "size": SizeRequest,
                                       "whatif": WhatifRequest, "horizon": HorizonRequest}

Wait = Annotated[float, Field(ge=0, le=MAX_WAIT_S, allow_inf_nan=False)] | None


class SessionCreate(SolveRequest):
    """``POST /v1/sessions``: keep an instance in one worker between rounds (allocation, binpack
    or reservation); ``time_limit`` is then each round's."""


class Change(BaseModel):
    """One change: ``{"op": NAME, ARGUMENT: VALUE, ...}`` calls the in-process session's method
    NAME (allocation: add_jobs, remove_jobs, update_jobs, set_workers; binpack: finish,
    fail_machines, restore_machines, advance; reservation: set_maintenance, set_request, event,
    assign) with those arguments."""

    model_config = ConfigDict(extra="allow", strict=True)
    op: str


class SessionPatch(_Strict):
    """``PATCH /v1/sessions/{id}``: changes applied in order (the first that fails stops the list)."""

    changes: list[Change]
    wait: Wait = None
    time_limit: PositiveSeconds | None = None


class SessionSolve(_Strict):
    """``POST /v1/sessions/{id}/solve``: re-solve warm (binpack: place ``workloads``)."""

    time_limit: PositiveSeconds | None = None
    wait: Wait = None
    workloads: list[dict[str, Any]] | None = Field(None, description="binpack: the workloads to place")
    apply: bool | None = Field(None, description="binpack, reservation: make the plan take effect (default true)")


SESSION_REQUESTS: dict[str, type[BaseModel]] = {"session_create": SessionCreate, "session_patch": SessionPatch,
                                                "session_solve": SessionSolve}


class ErrorBody(BaseModel):
    """Every error the service answers (4xx and 5xx), as the command line's ``--json`` errors."""

    error: str = Field(description="the first line: what is wrong, naming the field")
    errors: list[str] = Field(description="every line")
    exit_code: int = Field(description="the command line's: 2 bad input, 1 no answer")
    path: str | None = Field(None, description="the JSON path of the bad field, when one is known")
    reason: str | None = None
    file: str | None = None


class JobAccepted(BaseModel):
    """A job not finished within ``wait``: poll its URL (``DELETE`` cancels it)."""

    id: str
    state: str
    url: str


class JobState(BaseModel):
    """A job's state; once final, its HTTP code and answer."""

    id: str
    task: str
    state: str = Field(description="queued, running, done, failed or cancelled")
    queued_s: float
    run_s: float | None = None
    pid: int | None = Field(None, description="the worker process's id, while running")
    http: int | None = None
    result: dict[str, Any] | None = Field(None, description="the answer (or error object) once final")


class JobBrief(BaseModel):
    id: str
    task: str
    state: str
    arrived: float = Field(description="seconds since the epoch")
    http: int | None = None
    idempotency_key: str | None = None


class JobList(BaseModel):
    """``GET /v1/jobs``: the jobs kept, newest first."""

    jobs: list[JobBrief]
    total: int = Field(description="jobs kept in that state (the list may be cut at limit)")


class SessionBrief(BaseModel):
    id: str
    kind: str
    solver: str
    state: str = Field(description="creating, ready, lost (its worker ended) or deleted")
    created: float
    idle_s: float
    expires_in_s: float


class SessionList(BaseModel):
    sessions: list[SessionBrief]


class Health(BaseModel):
    ok: bool
    queued: int
    running: int


class Ready(BaseModel):
    ready: bool
    workers: int = Field(description="worker processes alive")
    idle: int = Field(description="of which waiting for a job")
    scratch: bool = Field(description="the scratch folder exists and is writable")
    draining: bool = Field(description="shutting down: new requests are refused")


def check_request(task: str, raw: bytes, max_time_limit_s: float) -> dict[str, Any]:
    """The request's envelope (without the instance and plan) once every check that needs no
    solve has passed; raises :class:`InstanceError` naming the first bad field.

    >>> import json
    >>> body = {"instance": {"kind": "allocation", "worker_types": {"v100": {"count": 1}}, "jobs": []},
    ...         "solvr": "max-min-fairness"}
    >>> check_request("solve", json.dumps(body).encode(), 60.0)
    Traceback (most recent call last):
    ...
    fleetplan.errors.InstanceError: solvr: unknown field
    """
    return check_fields(task, parse_body(raw), max_time_limit_s)


def parse_body(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object, by the instance files' rules: no NaN, bounded nesting, every
    number within their bounds (:func:`fleetplan.instances.base.parse_json_text`, whose error
    names the first bad one).

    >>> parse_body(b'{"seed": 3}')
    {'seed': 3}
    >>> parse_body(b'{"instance": {"jobs": [{"weight": 1e31}]}}')
    Traceback (most recent call last):
    ...
    fleetplan.errors.InstanceError: instance.jobs[0].weight: 1e+31 is out of range (fleetplan holds |x| <= 1e+30, so sums cannot overflow)
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InstanceError("", "the body is not UTF-8 text") from None
    data = _parsed_in_bounds(text) if len(raw) <= HOOKED_PARSE_BYTES else None
    if data is None:  # a large body, or a bad one: the files' parser, which names what is wrong
        data = parse_json_text(text)
    if not isinstance(data, dict):
        raise InstanceError("", "the body must be a JSON object")
    return data


# A body up to this size is parsed with its numbers checked as the parser meets them, which on a
# scheduler's small request is a fifth of the cost of walking the parsed tree afterwards (the
# files' parser); a large body's long numeric columns are checked faster by that walk (in numpy).
HOOKED_PARSE_BYTES = 64 * 1024


class _OutOfBounds(Exception):
    """A number beyond the files' bounds: the files' parser then says which."""


def _integer_in_bounds(text: str) -> int:
    value = int(text)
    if -MAX_INTEGER <= value <= MAX_INTEGER:
        return value
    raise _OutOfBounds


def _float_in_bounds(text: str) -> float:
    value = float(text)
    if -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE:  # False for infinity ("1e999")
        return value
    raise _OutOfBounds


def _no_constant(name: str) -> float:
    raise _OutOfBounds


_DECODER: Any = None


def _parsed_in_bounds(text: str) -> Any:
    """``text`` parsed, or None when it is not JSON or holds a number out of bounds (NaN and
    infinity included): exactly when :func:`~fleetplan.instances.base.parse_json_text` raises."""
    global _DECODER
    if _DECODER is None:  # made once: json.loads with hooks builds a decoder per call
        import json

        _DECODER = json.JSONDecoder(parse_int=_integer_in_bounds, parse_float=_float_in_bounds,
                                    parse_constant=_no_constant)
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError, _OutOfBounds):
        return None


_SOLVERS: dict[tuple[str, str | None], Any] = {}


def _solver(kind: str, name: str | None) -> Any:
    """:func:`fleetplan.solvers.get_solver`, remembered: a kind's default is found by sorting the
    whole registry, a tenth of a small request's checks. Only found solvers are kept (an unknown
    name raises every time), so the dictionary stays as small as the registry."""
    spec = _SOLVERS.get((kind, name))
    if spec is None:
        from fleetplan.solvers import get_solver

        spec = _SOLVERS[(kind, name)] = get_solver(kind, name)
    return spec


def check_fields(task: str, data: dict[str, Any], max_time_limit_s: float, numbers_checked: bool = False
                 ) -> dict[str, Any]:
    """:func:`check_request` past the parsing; ``numbers_checked``: ``data`` is
    :func:`parse_body`'s, whose numbers are known to be within the files' bounds (the instance's
    are not walked again)."""
    if task in ("session_patch", "session_solve"):
        request = validate_model(SESSION_REQUESTS[task], data)
        if request.time_limit is not None and request.time_limit > max_time_limit_s:
            raise InstanceError("time_limit", f"{request.time_limit:g} s is above this service's limit of "
                                              f"{max_time_limit_s:g} s")
        envelope = {"time_limit": request.time_limit, "wait": request.wait}
        if task == "session_patch":
            envelope["ops"] = [change.op for change in request.changes]
        return envelope
    request = validate_model(SESSION_REQUESTS.get(task) or REQUESTS[task], data)
    if request.time_limit is not None and request.time_limit > max_time_limit_s:
        raise InstanceError("time_limit", f"{request.time_limit:g} s is above this service's limit of "
                                          f"{max_time_limit_s:g} s")
    instance = (_instance_of_kind(data["instance"]) if numbers_checked else
                instance_from_data(data["instance"], "instance"))
    if task == "session_create" and get_kind(instance.kind).session is None:
        from fleetplan.embed import session_kinds

        *others, last = session_kinds()
        raise InstanceError("instance.kind", f"sessions exist for {', '.join(others)} and {last}; not for "
                                             f"'{instance.kind}'")
    if task in ("solve", "session_create"):
        _solver(instance.kind, request.solver).check_options(request.options)
    elif task == "whatif":
        _solver(instance.kind, request.solver).check_options(request.options)
    elif task == "size" and request.policy is not None:
        from fleetplan.solvers import get_solver

        try:
            get_solver(instance.kind, request.policy)
        except InstanceError as error:
            raise InstanceError("policy", error.reason) from None
    elif task == "evaluate":
        validate_model(get_kind(instance.kind).plan_type, data["plan"], "plan")
    elif task == "horizon":
        from fleetplan.planning.horizon.spec import parse_horizon

        parse_horizon(data["horizon"], None)  # errors name horizon's field
        if request.policy not in (None, "default"):
            from fleetplan.solvers import get_solver

            try:
                get_solver(instance.kind, request.policy)
            except InstanceError as error:
                raise InstanceError("policy", error.reason) from None
    envelope = request.model_dump(exclude={"instance", "plan"})
    envelope["kind"] = instance.kind
    return envelope


def _instance_of_kind(data: dict[str, Any]) -> Any:
    """:func:`fleetplan.instances.instance_from_data` (the same errors) for an instance whose
    numbers are already checked."""
    if "kind" not in data:
        raise InstanceError("kind", "required field is missing", "instance")
    try:
        spec = get_kind(str(data["kind"]))
    except InstanceError as error:
        raise InstanceError(error.path, error.reason, "instance") from None
    return validate_model(spec.instance_type, data, "instance")


def intake(task: str, raw: bytes, max_time_limit_s: float) -> tuple[int, Any]:
    """:func:`check_request` as the intake process runs it: ``(200, envelope)`` or
    ``(code, error_object)``; never raises."""
    try:
        data = parse_body(raw)
    except InstanceError as error:  # not a JSON object at all: 400
        return 400, error_object(error, 2)
    except MemoryError:
        return 507, error_object(InstanceError("", "not enough memory to read this request on this server"), 2)
    try:
        return 200, check_fields(task, data, max_time_limit_s, numbers_checked=True)
    except InstanceError as error:  # a JSON object with a bad field: 422
        return 422, error_object(error, 2)
    except MemoryError:
        return 507, error_object(InstanceError("", "not enough memory to read this request on this server"), 2)
    except Exception as error:  # noqa: BLE001 - the intake answers, it does not crash
        return 500, error_object(InstanceError("", f"internal error: {type(error).__name__}: {error}"), 1)


def warm_intake(service_pid: int | None = None) -> None:
    """The intake processes' initializer: import what the checks use now, not on a request.
    Signals are the service's to handle (a Ctrl-C reaches the whole process group); the process
    ends with the service, even one killed with SIGKILL."""
    import signal

    from fleetplan.service.tasks import end_with
    from fleetplan.solvers import load_kind

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if service_pid is not None:
        end_with(service_pid)

    load_kind()
