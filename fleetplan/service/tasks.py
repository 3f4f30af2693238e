"""What a worker process of the solve service runs: one request's work, JSON in and JSON out.

A job's folder holds ``request.json`` (the endpoint's name and the request body as parsed by the
service); the child writes ``answer.json`` atomically — ``{"http": CODE, "body": {...}}`` — and
nothing else crosses the process boundary (no pickled objects). Bad input is answered 422 with
the same JSON error object as the command line's ``--json``; anything unexpected is a 500.
"""

from __future__ import annotations

import json
import os
import traceback
from pathlib import Path
from typing import Any

from fleetplan.errors import InstanceError, error_object
from fleetplan.instances.base import json_safe

REQUEST_FILE = "request.json"
ANSWER_FILE = "answer.json"


def error_body(error: Exception, code: int = 2) -> dict[str, Any]:
    """The command line's ``--json`` error object (:func:`fleetplan.errors.error_object`)."""
    return error_object(error, code)


def _time_limit(request: dict[str, Any], deadline: float | None) -> float | None:
    """The solver's share of the request's end-to-end limit (what is left of it now)."""
    import time

    if deadline is None:
        return None
    return max(deadline - time.time(), 0.05)


def _instance(request: dict[str, Any]) -> Any:
    from fleetplan.instances import instance_from_data

    if "instance" not in request:
        raise InstanceError("instance", "required field is missing")
    return instance_from_data(request["instance"], "instance")


def _options(request: dict[str, Any]) -> dict[str, Any]:
    options = request.get("options") or {}
    if not isinstance(options, dict):
        raise InstanceError("options", "must be an object of solver options")
    return options


def solve(request: dict[str, Any], deadline: float | None) -> dict[str, Any]:
    import fleetplan

    instance = _instance(request)
    result = fleetplan.solve(instance, request.get("solver"), time_limit=_time_limit(request, deadline),
                             seed=request.get("seed", 0), threads=request.get("threads", 1), **_options(request))
    return result.to_dict()


def evaluate(request: dict[str, Any], deadline: float | None) -> dict[str, Any]:
    import fleetplan
    from fleetplan.instances import get_kind, validate_model

    instance = _instance(request)
    if "plan" not in request:
        raise InstanceError("plan", "required field is missing")
    plan = validate_model(get_kind(instance.kind).plan_type, request["plan"], "plan")
    return fleetplan.evaluate(instance, plan).model_dump()


def size(request: dict[str, Any], deadline: float | None) -> dict[str, Any]:
    from fleetplan.planning import size as size_instance

    instance = _instance(request)
    result = size_instance(instance, request.get("targets") or [], request.get("buy") or [],
                           budget=request.get("budget"), policy=request.get("policy"),
                           time_limit=_time_limit(request, deadline), seed=request.get("seed", 0),
                           threads=request.get("threads", 1))
    body = result.to_dict()
    body["sized_instance"] = result.sized_instance.model_dump() if result.success else None
    body["plan"] = result.plan.model_dump() if result.success and result.plan is not None else None
    return body


def whatif(request: dict[str, Any], deadline: float | None, folder: Path) -> dict[str, Any]:
    from fleetplan.instances.outputs import atomic_write_text
    from fleetplan.planning.whatif import whatif as sweep

    _instance(request)  # one error naming the field before anything is written
    path = folder / "instance.json"
    atomic_write_text(path, json.dumps(request["instance"]))
    per_point = request.get("time_limit_per_point") or 60.0
    result = sweep(path, request.get("vary") or [], folder / "sweep", solver=request.get("solver"),
                   options=_options(request), metrics=request.get("metrics"), time_limit=per_point,
                   seed=request.get("seed", 0), progress=None, plot=False)
    return {"rows": result.rows, "varied": result.varied, "metrics": result.metrics, "failed": result.failed}


TASKS = {"solve": solve, "evaluate": evaluate, "size": size, "whatif": whatif}


def run_job(folder: str) -> None:
    """The child's entry point: read the request, answer it, write the answer (exit 0 either way;
    a crash before the answer is written is the parent's to report)."""
    from fleetplan.instances.outputs import atomic_write_text

    path = Path(folder)
    code, body = 500, {"error": "the worker did not answer"}
    try:
        envelope = json.loads((path / REQUEST_FILE).read_text(encoding="utf-8"))
        task, request, deadline = envelope["task"], envelope["request"], envelope.get("deadline")
        if not isinstance(request, dict):
            raise InstanceError("$", "the request body must be a JSON object")
        answer = TASKS[task](request, deadline, path) if task == "whatif" else TASKS[task](request, deadline)
        code, body = 200, json_safe(answer)
    except InstanceError as error:
        code, body = 422, error_body(error)
    except MemoryError:
        code, body = 507, error_body(InstanceError("", "not enough memory for this request on this server"), 2)
    except Exception as error:  # noqa: BLE001 - the service answers, it does not crash
        where = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
        place = f" ({Path(where.filename).name}:{where.lineno})" if where else ""
        code, body = 500, {"error": f"internal error: {type(error).__name__}: {error}{place}", "exit_code": 1}
    atomic_write_text(path / ANSWER_FILE, json.dumps({"http": code, "body": body}, allow_nan=False))
    os._exit(0)  # no interpreter teardown in a forked worker: the answer is on disk
