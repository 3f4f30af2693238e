"""Sessions over HTTP, the worker's side: :mod:`fleetplan.embed` sessions kept in a worker process.

A scheduler that re-solves nearly the same problem every round sends the change, not the cluster:
``POST /v1/sessions`` makes a session in one worker (it stays there: every later request for it
goes to that worker), ``PATCH /v1/sessions/{id}`` applies a list of changes — each one call of
the in-process session's methods (:data:`OPERATIONS`), checked by it as in process — and
``POST /v1/sessions/{id}/solve`` re-solves warm. The service's side (which worker holds which
session, idle expiry) is :mod:`fleetplan.service.jobs`'s.
"""

from __future__ import annotations

import inspect
from typing import Any

from fleetplan.errors import InstanceError

# The changes a PATCH may send, per kind: {"op": NAME, ARG: VALUE, ...} calls session.NAME(**ARGS).
OPERATIONS: dict[str, tuple[str, ...]] = {
    "allocation": ("add_jobs", "remove_jobs", "update_jobs", "set_workers", "forget_warm_start"),
    "binpack": ("finish", "fail_machines", "restore_machines", "advance"),
    "reservation": ("set_maintenance", "set_request", "event", "assign"),
}
KINDS = tuple(OPERATIONS)

# The sessions this worker holds, by id.
HELD: dict[str, Any] = {}


def summary(session_id: str, session: Any) -> dict[str, Any]:
    """What a session holds now, in a few numbers."""
    kind = {"AllocationSession": "allocation", "BinpackSession": "binpack",
            "ReservationSession": "reservation"}[type(session).__name__]
    data: dict[str, Any] = {"id": session_id, "kind": kind, "solver": session._spec.name}
    if kind == "allocation":
        data.update(jobs=len(session), workers=session.workers, rounds=session.rounds)
    elif kind == "binpack":
        data.update(running=len(session.running_ids), machines=len(session.machine_ids), calls=session.calls)
    else:
        data.update(reservations=len(session.reservation_ids), solves=session.solves)
    return data


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
    kind = summary(session_id, session)["kind"]
    for k, change in enumerate(request.get("changes") or []):
        where = f"changes[{k}]"
        op = change.get("op")
        if op not in OPERATIONS[kind]:
            raise InstanceError(f"{where}.op", f"'{str(op)[:40]}' is not a change of a {kind} session "
                                               f"(known: {', '.join(OPERATIONS[kind])})")
        method = getattr(session, op)
        arguments = {name: value for name, value in change.items() if name != "op"}
        if op == "assign" and "plan" in arguments:
            from fleetplan.instances import get_kind, validate_model

            arguments["plan"] = validate_model(get_kind("reservation").plan_type, arguments["plan"], "plan")
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
    session = _held(session_id)
    kind = summary(session_id, session)["kind"]
    if kind == "binpack":
        if "workloads" not in request:
            raise InstanceError("workloads", "required to place with a binpack session")
        result = session.place(request["workloads"], apply=request.get("apply", True), time_limit=time_limit)
    elif kind == "reservation":
        result = session.solve(apply=request.get("apply", True), time_limit=time_limit)
    else:
        result = session.solve(time_limit=time_limit)
    return result.to_dict()


def delete(session_id: str) -> dict[str, Any]:
    HELD.pop(session_id, None)
    return {"id": session_id, "state": "deleted"}
