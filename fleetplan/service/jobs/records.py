"""The records the job manager (:mod:`fleetplan.service.jobs`) keeps: a job, a worker process
and a session held in one, the two refusals a submission can meet, and the error body of a job
that fails in the manager rather than in a worker. Split from that module; no behaviour here
beyond formatting a record as the service's JSON.

>>> job = Job(id="a1", task="solve", raw=b"{}", arrived=0.0, time_limit=60.0)
>>> job.deadline, job.brief()["state"]
(60.0, 'queued')
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from fleetplan.errors import InstanceError
from fleetplan.service.tasks import error_body

FINAL = ("done", "failed", "cancelled")


def _error_bytes(message: str, path: str = "", exit_code: int = 1) -> bytes:
    return json.dumps(error_body(InstanceError(path, message), exit_code)).encode()


@dataclass
class Job:
    """One request's work and what became of it."""

    id: str
    task: str
    raw: bytes
    arrived: float  # time.time()
    time_limit: float
    client: str = ""
    state: str = "queued"  # queued | running | done | failed | cancelled
    started: float | None = None
    finished: float | None = None
    http: int | None = None
    body: bytes | None = None  # the answer's JSON, handed on as it came from the worker
    pid: int | None = None  # the worker process running it
    idempotency_key: str | None = None
    digest: str = ""  # of the task and body, to tell a retry from a different request under the same key
    attempts: int = 0  # times started (a restart counts the one it interrupted)
    persisted: Any = None  # a future: the job's row is on disk (with a state folder)
    session: str | None = None  # the session a session job is for
    affinity: Any = None  # the Worker that must run it (the one holding its session)
    waiters: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def deadline(self) -> float:
        return self.arrived + self.time_limit

    def brief(self) -> dict[str, Any]:
        """One row of ``GET /v1/jobs``."""
        return {"id": self.id, "task": self.task, "state": self.state, "arrived": self.arrived,
                "http": self.http if self.state in FINAL else None, "idempotency_key": self.idempotency_key}

    def summary(self) -> bytes:
        """``GET /v1/jobs/{id}``'s JSON (the answer is spliced in as bytes, never re-parsed)."""
        data: dict[str, Any] = {"id": self.id, "task": self.task, "state": self.state,
                                "queued_s": round((self.started or self.finished or time.time()) - self.arrived, 6)}
        if self.state == "running":
            data["pid"] = self.pid
        if self.finished is not None and self.started is not None:
            data["run_s"] = round(self.finished - self.started, 6)
        if self.state not in FINAL or self.body is None:
            return json.dumps(data).encode()
        data["http"] = self.http
        return json.dumps(data).encode()[:-1] + b', "result": ' + self.body + b"}"


class QueueFull(Exception):
    """The queue holds as many jobs as allowed: answer 429."""


class KeyReused(Exception):
    """An ``Idempotency-Key`` sent again with a different request: answer 422."""


@dataclass
class Worker:
    """One worker process and the pipe to it."""

    process: Any
    connection: Any
    started: float
    fd: int = -1  # the pipe's descriptor and the process's id, read once (each is a Python call)
    pid: int | None = None
    ready: bool = False
    job: Job | None = None
    # The next job, sent ahead while ``job`` runs, so the worker starts it the moment it answers
    # instead of waiting for the event loop to read the answer and send it (the round trip, not
    # the solve, set the pace of small solves). Still ``queued``: it starts when promoted.
    ahead: Job | None = None
    jobs_done: int = 0
    kill_timer: asyncio.TimerHandle | None = None
    stopping: bool = False  # killed or retired: takes no more jobs
    pending: deque[Job] = field(default_factory=deque)  # jobs for the sessions it holds
    sessions: set[str] = field(default_factory=set)


@dataclass
class HeldSession:
    """A session kept in a worker process (``/v1/sessions``)."""

    id: str
    kind: str
    solver: str
    worker: Worker
    created: float
    used: float
    state: str = "creating"  # creating | ready | lost

    def brief(self, ttl_s: float) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "solver": self.solver, "state": self.state,
                "created": self.created, "idle_s": round(time.time() - self.used, 3),
                "expires_in_s": round(max(self.used + ttl_s - time.time(), 0.0), 3)}
