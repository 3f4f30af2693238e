"""What a worker process of the solve service runs: a loop over jobs, JSON in and JSON out.

A worker is a long-lived process that imported fleetplan and every kind's solvers once, at its
start; it then answers job after job, so a small solve costs the solve, not the imports. It talks
to the service through one pipe (:func:`pack` / :func:`unpack`): the service sends a header (the
task, its deadline) and the request body's bytes as the client sent them; the worker answers a
header (the HTTP code) and the answer's JSON bytes. No pickled objects cross the boundary, and
the service never parses an answer (it hands the bytes on).

The request was checked before it was queued (:func:`fleetplan.service.schemas.check_request`);
the worker validates it again while building the instance (the loader is the only way to one), so
bad input here is still answered 422 with the command line's ``--json`` error object; anything
unexpected is a 500, and the worker carries on with the next job.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from fleetplan.errors import InstanceError, error_object
from fleetplan.instances.base import json_safe

_LENGTH = struct.Struct(">I")


def pack(header: dict[str, Any], body: bytes = b"") -> bytes:
    """One pipe message: the header's length, the header (JSON), the body."""
    head = json.dumps(header).encode()
    return _LENGTH.pack(len(head)) + head + body


def pack_job(task: str, deadline: float, job_id: str, session: str | None, body: bytes) -> bytes:
    """:func:`pack` of a job's header, written out: the service's own names and ids (no quoting
    to do), a finite deadline; ``json.dumps`` builds an encoder on every call.

    >>> pack_job("solve", 1.5, "ab12", None, b"{}") == pack({"task": "solve", "deadline": 1.5, "id": "ab12",
    ...                                                    "session": None}, b"{}")
    True
    """
    held = "null" if session is None else f'"{session}"'
    head = f'{{"task": "{task}", "deadline": {deadline!r}, "id": "{job_id}", "session": {held}}}'.encode()
    return _LENGTH.pack(len(head)) + head + body


# The header is compact JSON that pack wrote: the decoder's scanner reads it in one call
# (json.loads adds three Python-level calls, an encoding guess and a whitespace match).
_SCAN_HEADER = json.JSONDecoder().scan_once


def unpack(message: bytes | memoryview) -> tuple[dict[str, Any], memoryview]:
    """:func:`pack`'s header and body.

    >>> header, body = unpack(pack({"http": 200, "id": "ab12"}, b"{}"))
    >>> header, bytes(body)
    ({'http': 200, 'id': 'ab12'}, b'{}')
    """
    (length,) = _LENGTH.unpack_from(message)
    view = memoryview(message)
    header, _ = _SCAN_HEADER(str(view[_LENGTH.size:_LENGTH.size + length], "utf-8"), 0)
    return header, view[_LENGTH.size + length:]


# The worker's end of the pipe is a multiprocessing Connection; the service's end reads and
# writes its framing itself: a signed 4-byte big-endian length (-1: an 8-byte one follows), then
# the message. Connection.recv_bytes reads a message in two reads and as many Python calls, and
# under load the service's process spent more on the pipe's plumbing than on the job's own
# bookkeeping: here one read takes every message waiting, and a small message is one write.
_FRAME = struct.Struct("!i")
_LONG_FRAME = struct.Struct("!Q")
READ_CHUNK = 64 * 1024
SMALL_MESSAGE = 16 * 1024  # and above, Connection.send_bytes (no copy of a large message)


def write_message(fd: int, message: bytes) -> None:
    """Send one small message on a blocking pipe, framed as ``Connection.send_bytes`` does."""
    frame = _FRAME.pack(len(message)) + message
    sent = os.write(fd, frame)
    while sent < len(frame):  # a blocking socket writes it all; a signal can cut it short
        sent += os.write(fd, frame[sent:])


def read_messages(fd: int) -> list[memoryview]:
    """Every whole message waiting on a blocking pipe that is ready to read (at least one). A
    message begun is read to its end, as ``Connection.recv_bytes`` does: the worker sends each
    whole. Raises :class:`EOFError` when the pipe is closed.

    >>> import multiprocessing
    >>> ours, theirs = multiprocessing.Pipe()
    >>> theirs.send_bytes(b"one"); theirs.send_bytes(b"two")
    >>> [bytes(message) for message in read_messages(ours.fileno())]
    [b'one', b'two']
    >>> write_message(ours.fileno(), b"three"); theirs.recv_bytes()
    b'three'
    """
    data = os.read(fd, READ_CHUNK)
    if not data:
        raise EOFError
    messages = []
    while data:
        data = _at_least(fd, data, _FRAME.size)
        (size,) = _FRAME.unpack_from(data)
        start = _FRAME.size
        if size == -1:
            start += _LONG_FRAME.size
            data = _at_least(fd, data, start)
            (size,) = _LONG_FRAME.unpack_from(data, _FRAME.size)
        end = start + size
        data = _at_least(fd, data, end)
        messages.append(memoryview(data)[start:end])
        data = data[end:]
    return messages


def _at_least(fd: int, data: bytes, size: int) -> bytes:
    """``data`` and what follows it on the pipe, read until it holds ``size`` bytes."""
    if len(data) >= size:
        return data
    parts, have = [data], len(data)
    while have < size:
        chunk = os.read(fd, size - have)
        if not chunk:
            raise EOFError
        parts.append(chunk)
        have += len(chunk)
    return b"".join(parts)


def error_body(error: Exception, code: int = 2) -> dict[str, Any]:
    """The command line's ``--json`` error object (:func:`fleetplan.errors.error_object`)."""
    return error_object(error, code)


def _time_left(deadline: float | None) -> float | None:
    """The solver's share of the request's end-to-end limit (what is left of it now)."""
    if deadline is None:
        return None
    return max(deadline - time.time(), 0.05)


def _instance(request: dict[str, Any]) -> Any:
    from fleetplan.instances import instance_from_data

    if "instance" not in request:
        raise InstanceError("instance", "required field is missing")
    return instance_from_data(request["instance"], "instance")


def solve(request: dict[str, Any], deadline: float | None, scratch: Path) -> dict[str, Any]:
    import fleetplan

    result = fleetplan.solve(_instance(request), request.get("solver"), time_limit=_time_left(deadline),
                             seed=request.get("seed", 0), threads=request.get("threads", 1),
                             **(request.get("options") or {}))
    return result.to_dict()


def evaluate(request: dict[str, Any], deadline: float | None, scratch: Path) -> dict[str, Any]:
    import fleetplan
    from fleetplan.instances import get_kind, validate_model

    instance = _instance(request)
    if "plan" not in request:
        raise InstanceError("plan", "required field is missing")
    plan = validate_model(get_kind(instance.kind).plan_type, request["plan"], "plan")
    return fleetplan.evaluate(instance, plan).model_dump()


def size(request: dict[str, Any], deadline: float | None, scratch: Path) -> dict[str, Any]:
    from fleetplan.planning import size as size_instance

    instance = _instance(request)
    result = size_instance(instance, request.get("targets") or [], request.get("buy") or [],
                           budget=request.get("budget"), policy=request.get("policy"),
                           time_limit=_time_left(deadline), seed=request.get("seed", 0),
                           threads=request.get("threads", 1))
    body = result.to_dict()
    body["sized_instance"] = result.sized_instance.model_dump() if result.success else None
    body["plan"] = result.plan.model_dump() if result.success and result.plan is not None else None
    return body


def whatif(request: dict[str, Any], deadline: float | None, scratch: Path) -> dict[str, Any]:
    from fleetplan.planning.whatif import whatif as sweep

    instance = _instance(request)  # one error naming the field before anything is written
    # The scratch folder is made again if someone removed it: a sweep keeps its results table
    # there (a solve needs no files).
    scratch.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="whatif-", dir=scratch))
    try:
        per_point = request.get("time_limit_per_point") or 60.0
        result = sweep(instance, request.get("vary") or [], folder / "sweep", solver=request.get("solver"),
                       options=request.get("options") or {}, metrics=request.get("metrics"), time_limit=per_point,
                       seed=request.get("seed", 0), progress=None, plot=False)
        return {"rows": result.rows, "varied": result.varied, "metrics": result.metrics, "failed": result.failed}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def horizon(request: dict[str, Any], deadline: float | None, scratch: Path) -> dict[str, Any]:
    from fleetplan.planning.horizon import plan_horizon

    instance = _instance(request)
    if "horizon" not in request:
        raise InstanceError("horizon", "required field is missing")
    result = plan_horizon(instance, request["horizon"], time_limit=_time_left(deadline),
                          mip_rel_gap=request.get("gap", 0.01), stochastic=request.get("stochastic", True),
                          marginal=request.get("prices", False), policy=request.get("policy", "default"),
                          seed=request.get("seed", 0), threads=request.get("threads", 1))
    return result.to_dict()


TASKS = {"solve": solve, "evaluate": evaluate, "size": size, "whatif": whatif, "horizon": horizon}


def _session_task(task: str, request: dict[str, Any], deadline: float | None, session: str) -> dict[str, Any]:
    from fleetplan.service import sessions

    if task == "session_create":
        return sessions.create(request, session)
    if task == "session_patch":
        return sessions.patch(request, session)
    if task == "session_solve":
        return sessions.solve(request, session, _time_left(deadline))
    return sessions.delete(session)


def answer(task: str, raw: bytes | memoryview, deadline: float | None, scratch: Path,
           session: str | None = None) -> tuple[int, bytes]:
    """One job's HTTP code and answer body (JSON bytes); never raises."""
    from fleetplan.instances.base import parse_json_text

    try:
        request = parse_json_text(bytes(raw).decode("utf-8") or "{}", "body")
        if not isinstance(request, dict):
            raise InstanceError("", "the body must be a JSON object")
        if task.startswith("session_"):
            answered = _session_task(task, request, deadline, session or "")
        else:
            answered = TASKS[task](request, deadline, scratch)
        code, body = 200, json_safe(answered)
    except InstanceError as error:
        code, body = 422, error_body(error)
    except MemoryError:
        code, body = 507, error_body(InstanceError("", "not enough memory for this request on this server"))
    except Exception as error:  # noqa: BLE001 - the worker answers, it does not crash
        where = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
        place = f" ({Path(where.filename).name}:{where.lineno})" if where else ""
        code, body = 500, {"error": f"internal error: {type(error).__name__}: {error}{place}",
                           "errors": [f"internal error: {type(error).__name__}: {error}"], "exit_code": 1}
    return code, json.dumps(body, allow_nan=False).encode()


def warm_up() -> None:
    """Import every kind's solvers and the judge now, not during a client's request."""
    import fleetplan
    from fleetplan.solvers import load_kind

    load_kind()
    import fleetplan.embed.allocation  # noqa: F401 - sessions over HTTP
    import fleetplan.service.sessions  # noqa: F401
    # The first solve of a kind loads what imports do not (compiled kernels, HiGHS's first model).
    fleetplan.solve(fleetplan.generate("allocation", {"jobs": 2}, seed=0))


def end_with(service_pid: int, every_s: float = 1.0) -> None:
    """End this process soon after the service's (a daemon thread): a service killed with
    SIGKILL cannot stop its workers, and a worker in a long solve would not notice the closed
    pipe until the solve ended."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(every_s)
            try:
                os.kill(service_pid, 0)
            except ProcessLookupError:
                os._exit(0)
            except PermissionError:
                pass

    threading.Thread(target=watch, name="fleetplan-end-with-service", daemon=True).start()


def serve_jobs(connection: Any, scratch: str, service_pid: int | None = None) -> None:
    """A worker process's life: warm up, say so, then answer jobs until the pipe closes.

    The worker ignores SIGINT and SIGTERM: a Ctrl-C in the terminal reaches the whole process
    group, and the service, not the signal, decides whether a running job finishes (within the
    grace period) or is killed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if service_pid is not None:
        end_with(service_pid)
    warm_up()
    connection.send_bytes(pack({"ready": True, "pid": os.getpid()}))
    folder = Path(scratch)
    while True:
        try:
            message = connection.recv_bytes()
        except (EOFError, OSError):
            break
        header, raw = unpack(message)
        code, body = answer(header["task"], raw, header.get("deadline"), folder, header.get("session"))
        connection.send_bytes(pack({"http": code, "id": header.get("id")}, body))
    os._exit(0)  # no interpreter teardown: nothing is left to write
