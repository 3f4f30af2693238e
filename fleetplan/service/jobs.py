"""The solve service's jobs: a bounded queue and at most ``workers`` worker processes.

Every request that computes (solve, evaluate, size, whatif) is a job. A job runs in a process of
its own, forked from a server process that has already imported fleetplan and the solver
back-ends (so it starts in milliseconds), and talks to the service only through files in its
scratch folder (:mod:`fleetplan.service.tasks`). So a crash or a runaway solve loses that one
request, and cancelling a job is killing its process. Each job's time limit counts from the
request's arrival: the solver gets what is left of it, and a process still running at the limit
plus a grace is killed.

The manager is driven by the service's event loop (:meth:`JobManager.pump` every few
milliseconds); it is not thread-safe and needs no lock.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import tempfile
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetplan.service.tasks import ANSWER_FILE, REQUEST_FILE, run_job

# Back-ends the worker processes' server imports once (as the bench executor's forkserver does).
PRELOAD = ["fleetplan.service.tasks", "fleetplan.solvers", "fleetplan.instances", "scipy.sparse", "highspy",
           "ortools.sat.python.cp_model", "networkx", "pandas"]
# A job still running this long after its time limit is killed.
KILL_GRACE_S = 5.0
FINAL = ("done", "failed", "cancelled")


@dataclass
class Job:
    """One request's work and what became of it."""

    id: str
    task: str
    request: dict[str, Any]
    arrived: float  # time.time()
    time_limit: float
    state: str = "queued"  # queued | running | done | failed | cancelled
    folder: Path | None = None
    process: Any = None
    started: float | None = None
    finished: float | None = None
    http: int | None = None
    body: dict[str, Any] | None = None
    waiters: list[Any] = field(default_factory=list)

    @property
    def deadline(self) -> float:
        return self.arrived + self.time_limit

    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "task": self.task, "state": self.state,
                                "queued_s": round((self.started or time.time()) - self.arrived, 6)}
        if self.finished is not None and self.started is not None:
            data["run_s"] = round(self.finished - self.started, 6)
        if self.state in FINAL:
            data["http"] = self.http
            data["result"] = self.body
        return data


class QueueFull(Exception):
    """The queue holds as many jobs as allowed: answer 429."""


class JobManager:
    """Queue, processes and the record of finished jobs (kept ``retention_s`` seconds)."""

    def __init__(self, workers: int = 2, queue_size: int = 64, scratch: str | None = None,
                 retention_s: float = 600.0, max_kept: int = 1000):
        self.workers = workers
        self.queue_size = queue_size
        self.retention_s = retention_s
        self.max_kept = max_kept
        self._own_scratch = scratch is None
        self.scratch = Path(scratch or tempfile.mkdtemp(prefix="fleetplan-service-"))
        self.jobs: dict[str, Job] = {}
        self.queue: deque[Job] = deque()
        self.running: dict[str, Job] = {}
        self.counts: Counter[str] = Counter()  # finished jobs by task and outcome
        self._context: Any = None

    # --- the worker processes ---------------------------------------------------------------

    def start(self) -> None:
        """Start the fork server (imports happen once, before the first request)."""
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        self._context = context
        # A first process makes the server import everything now, not during the first request.
        probe = context.Process(target=_noop, daemon=True)
        probe.start()
        probe.join()

    def submit(self, task: str, request: dict[str, Any], time_limit: float) -> Job:
        if len(self.queue) >= self.queue_size:
            raise QueueFull()
        job = Job(id=uuid.uuid4().hex, task=task, request=request, arrived=time.time(), time_limit=time_limit)
        self.jobs[job.id] = job
        self.queue.append(job)
        self.pump()
        return job

    def pump(self) -> None:
        """Reap finished or overdue processes, start queued jobs, forget old ones."""
        now = time.time()
        for job in list(self.running.values()):
            code = job.process.exitcode
            if code is not None:
                self._reap(job, code)
            elif now > job.deadline + KILL_GRACE_S:
                self._kill(job)
                self._finish(job, "failed", 504, {"error": f"the job ran past its time limit of {job.time_limit:g} s "
                                                           "and was stopped", "exit_code": 1})
        while self.queue and len(self.running) < self.workers:
            job = self.queue.popleft()
            if now >= job.deadline:
                self._finish(job, "failed", 504, {"error": "the time limit ran out while the job waited in the "
                                                           "queue", "exit_code": 1})
                continue
            self._launch(job)
        self._forget(now)

    def _launch(self, job: Job) -> None:
        job.folder = Path(tempfile.mkdtemp(prefix=f"job-{job.id[:8]}-", dir=self.scratch))
        (job.folder / REQUEST_FILE).write_text(json.dumps(
            {"task": job.task, "request": job.request, "deadline": job.deadline}), encoding="utf-8")
        job.request = {}  # the folder holds it now; a large instance is not kept twice
        job.process = self._context.Process(target=run_job, args=(str(job.folder),), daemon=True)
        job.process.start()
        job.state, job.started = "running", time.time()
        self.running[job.id] = job

    def _reap(self, job: Job, code: int) -> None:
        try:
            answer = json.loads((job.folder / ANSWER_FILE).read_text(encoding="utf-8"))
            http, body = int(answer["http"]), answer["body"]
        except (OSError, ValueError, KeyError, TypeError):
            http, body = 500, {"error": f"the worker process died without answering (exit code {code})",
                               "exit_code": 1}
        self._finish(job, "done" if http < 500 else "failed", http, body)

    def _kill(self, job: Job) -> None:
        if job.process is not None and job.process.exitcode is None:
            job.process.kill()
            job.process.join(timeout=5)

    def _finish(self, job: Job, state: str, http: int, body: dict[str, Any]) -> None:
        job.state, job.http, job.body, job.finished = state, http, body, time.time()
        self.running.pop(job.id, None)
        self.counts[f"{job.task}:{body.get('status', state) if isinstance(body, dict) else state}"] += 1
        if job.folder is not None:
            shutil.rmtree(job.folder, ignore_errors=True)
        for waiter in job.waiters:
            if not waiter.done():
                waiter.set_result(None)
        job.waiters.clear()

    def cancel(self, job: Job) -> None:
        if job.state in FINAL:
            return
        if job in self.queue:
            self.queue.remove(job)
        self._kill(job)
        self._finish(job, "cancelled", 409, {"error": "cancelled by the client", "exit_code": 1})

    def _forget(self, now: float) -> None:
        finished = [job for job in self.jobs.values() if job.state in FINAL]
        old = [job for job in finished if now - (job.finished or now) > self.retention_s]
        if len(finished) - len(old) > self.max_kept:
            finished.sort(key=lambda job: job.finished or 0.0)
            old += finished[: len(finished) - len(old) - self.max_kept]
        for job in old:
            self.jobs.pop(job.id, None)

    def shutdown(self, grace_s: float) -> None:
        """Cancel what waits, give running jobs ``grace_s`` to finish, kill the rest."""
        for job in list(self.queue):
            self.cancel(job)
        ends = time.monotonic() + grace_s
        while self.running and time.monotonic() < ends:
            self.pump()
            time.sleep(0.02)
        for job in list(self.running.values()):
            self.cancel(job)
        if self._own_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


def _noop() -> None:
    """The fork server's first child: nothing to do but make it import."""
