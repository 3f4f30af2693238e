"""Sessions over HTTP, the worker's side: :mod:`fleetplan.embed` sessions kept in a worker process.

A scheduler that re-solves nearly the same problem every round sends the change, not the cluster:
``POST /v1/sessions`` makes a session in one worker (it stays there: every later request for it
goes to that worker), ``PATCH /v1/sessions/{id}`` applies a list of changes — each one call of
the in-process session's methods (:func:`operations`), checked by it as in process — and
``POST /v1/sessions/{id}/solve`` re-solves warm. The service's side (which worker holds which
session, idle expiry) is :mod:`fleetplan.service.jobs`'s.
"""

from __future__ import annotations

import inspect
from typing import Any

from fleetplan.errors import InstanceError

# The sessions this worker holds, by id.
HELD: dict[str, Any] = {}


def operations(kind: str) -> tuple[str, ...]:
    """The changes a PATCH may send to a session of ``kind``, as its registration names them
    (``ProblemKind.session_operations``): ``{"op": NAME, ARG: VALUE, ...}`` calls
    ``session.NAME(**ARGS)``."""
    from fleetplan.instances import get_kind

    return get_kind(kind).session_operations


def summary(session_id: str, session: Any) -> dict[str, Any]:
    """What a session holds now, in a few numbers."""
    return {"id": session_id, "kind": session.kind, "solver": session._spec.name, **session.summary()}


def create(request: dict[str, Any], session_id: str) -> dict[str, Any]:
    from fleetplan.embed import session as make_session

    session = make_session(request["instance"], request.get("solver"), time_limit=request.get("time_limit"),
                           seed=request.get("seed", 0), threads=request.get("threads", 1),
                           **(request.get("options") or {}))
    HELD[session_id] = session
    return summary(session_id, session)


def _held(session_id: str) -> Any:
    if session_id not in HELD:
        raise InstanceError("id", f"no session '{session_id[:64]}' in this worker")
    return HELD[session_id]


def patch(request: dict[str, Any], session_id: str) -> dict[str, Any]:
    """Apply the changes in order; the first that fails stops the list (the ones before it stay
    applied, the failing one changed nothing) and is named in the error: ``changes[2].jobs...``."""
    session = _held(session_id)
    kind = session.kind
    known = operations(kind)
    for k, change in enumerate(request.get("changes") or []):
        where = f"changes[{k}]"
        op = change.get("op")
        if op not in known:
            raise InstanceError(f"{where}.op", f"'{str(op)[:40]}' is not a change of a {kind} session "
                                               f"(known: {', '.join(known)})")
        method = getattr(session, op)
        arguments = {name: value for name, value in change.items() if name != "op"}
        if op == "assign" and "plan" in arguments:  # a plan arrives as JSON: the kind's plan model reads it
            from fleetplan.instances import get_kind, validate_model

            arguments["plan"] = validate_model(get_kind(kind).plan_type, arguments["plan"], "plan")
        if op == "event" and "params" in arguments:
            params = arguments.pop("params")
            if not isinstance(params, dict):
                raise InstanceError(f"{where}.params", "must be an object")
            arguments.update(params)
        signature = inspect.signature(method)
        try:
            signature.bind(**arguments)
        except TypeError as error:
            raise InstanceError(where, f"{op}: {error} (its arguments: {', '.join(signature.parameters)})") from None
        try:
            method(**arguments)
        except InstanceError as error:
            raise InstanceError(f"{where}.{error.path}" if error.path else where, error.reason) from None
    return summary(session_id, session)


def solve(request: dict[str, Any], session_id: str, time_limit: float | None) -> dict[str, Any]:
    """Re-solve with the session's ``solve`` (binpack's places ``workloads``), its parameters
    read from the request by name (a missing one without a default is refused, naming it)."""
    session = _held(session_id)
    method = session.solve
    arguments: dict[str, Any] = {}
    for parameter in inspect.signature(method).parameters.values():
        if parameter.name in ("time_limit", "progress"):
            continue
        if parameter.name in request:
            arguments[parameter.name] = request[parameter.name]
        elif parameter.default is inspect.Parameter.empty:
            raise InstanceError(parameter.name, f"required to solve with a {session.kind} session")
    return method(**arguments, time_limit=time_limit).to_dict()


def delete(session_id: str) -> dict[str, Any]:
    HELD.pop(session_id, None)
    return {"id": session_id, "state": "deleted"}
