"""The solve service's jobs: a fair, bounded queue and a pool of warm worker processes.

Every request that computes (solve, evaluate, size, whatif) is a job. ``workers`` long-lived
processes (:func:`fleetplan.service.tasks.serve_jobs`), forked from a server that imported the
solvers once, take jobs one at a time through a pipe each; a small solve's round trip is the
solve plus a few milliseconds. A worker that dies (a crash, the OOM killer, a ``DELETE`` that
kills it mid-job) loses only its own job, answered 500 (or 409 for a cancel), and is replaced;
a worker is also replaced after ``max_jobs_per_worker`` jobs, so a slow leak cannot grow for
ever. A job's time limit counts from the request's arrival: the solver gets what is left of it,
a job still waiting at its deadline fails 504 without running, and a worker still busy
``KILL_GRACE_S`` past it is killed (504).

The queue is fair between clients: the next job is taken from the client that has waited
longest for a turn, so one client's burst does not starve another's single request.

With a state folder the jobs are also rows of a SQLite database (:mod:`fleetplan.service.store`),
written by one writer thread in the order the loop asks: a job is on disk before its client hears
of it, and its answer before the client gets it; a restart loads them back (:meth:`JobManager.recover`).

The manager's records (:class:`Job`, :class:`Worker`, ...) are in :mod:`.records`, and its
handling of the worker processes (:class:`~.processes.WorkerProcesses`) in :mod:`.processes`.

The manager runs on the service's event loop (pipe and process readiness through
``loop.add_reader``, no polling); it is not thread-safe and needs no lock.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
import uuid
from collections import Counter, OrderedDict, deque
from pathlib import Path
from typing import Any

from fleetplan.service.jobs.processes import WorkerProcesses
from fleetplan.service.jobs.records import (
    FINAL,
    HeldSession,
    Job,
    KeyReused,
    QueueFull,
    Worker,
    _error_bytes,
)
from fleetplan.service.tasks import pack_job

# A job still running this long after its time limit is killed.
KILL_GRACE_S = 5.0
# Bodies above this are handed to a worker from a thread, not from the event loop.
LARGE_BODY = 1 << 20


class JobManager(WorkerProcesses):
    """Queue, worker processes and the record of finished jobs (kept ``retention_s`` seconds)."""

    def __init__(self, workers: int = 2, queue_size: int = 64, scratch: str | None = None,
                 retention_s: float = 600.0, max_kept: int = 1000, max_jobs_per_worker: int = 10_000,
                 state: str | None = None, session_ttl_s: float = 600.0):
        self.size = workers
        self.queue_size = queue_size
        self.retention_s = retention_s
        self.max_kept = max_kept
        self.max_jobs_per_worker = max_jobs_per_worker
        if state is not None and scratch is None:
            scratch = str(Path(state) / "scratch")
        self._own_scratch = scratch is None
        self.scratch = Path(scratch or tempfile.mkdtemp(prefix="fleetplan-service-"))
        self.store: Any = None
        self._writer: Any = None
        if state is not None:
            from concurrent.futures import ThreadPoolExecutor

            from fleetplan.service.store import JobStore

            self.store = JobStore(Path(state) / "jobs.sqlite3")
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="fleetplan-jobs-db")
        self._keys: dict[str, Job] = {}
        self.sessions: dict[str, HeldSession] = {}
        self.session_ttl_s = session_ttl_s
        self.jobs: dict[str, Job] = {}
        self._finished: deque[Job] = deque()  # the finished jobs kept, in the order they finished
        self._queues: OrderedDict[str, deque[Job]] = OrderedDict()  # per client, in turn order
        self.queued = 0
        self.running: dict[str, Job] = {}
        self.workers: list[Worker] = []
        self.counts: Counter[str] = Counter()  # finished jobs by task and outcome
        self.restarts = 0
        self.closing = False
        self.draining = False
        self._context: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._failed_starts = 0

    # --- a worker's answers and its end -----------------------------------------------------

    def _on_answer(self, worker: Worker, header: dict[str, Any], body: memoryview) -> None:
        if header.get("ready"):
            worker.ready = True
            self._failed_starts = 0
            self._dispatch()
            return
        job, worker.job = worker.job, None
        if worker.kill_timer is not None:
            worker.kill_timer.cancel()
            worker.kill_timer = None
        worker.jobs_done += 1
        if worker.ahead is not None:  # the worker is already on it
            ahead, worker.ahead = worker.ahead, None
            self.queued -= 1
            self._start(worker, ahead)
        if job is not None and job.state == "running":
            code = int(header["http"])
            self._finish(job, "done" if code < 500 else "failed", code, bytes(body))
        if worker.jobs_done >= self.max_jobs_per_worker and not worker.sessions:  # sessions live there
            self._retire(worker)
        self._dispatch()

    def _on_exit(self, worker: Worker) -> None:
        """The worker's process ended: its job (if any) fails, and a new worker takes its place."""
        self._unwatch(worker)
        worker.process.join(timeout=1)
        worker.connection.close()
        job = worker.job
        if job is not None and job.state == "running":
            self._finish(job, "failed", 500, _error_bytes(
                f"the worker process died while answering (exit code {worker.process.exitcode})"))
        self._requeue_ahead(worker)
        lost = "the worker process holding the session ended; create the session again"
        for session_id in worker.sessions:
            if session_id in self.sessions:
                self.sessions[session_id].state = "lost"
        while worker.pending:
            self.queued -= 1
            self._finish(worker.pending.popleft(), "failed", 410, _error_bytes(lost, "id"))
        # A worker that dies before it is ready (a broken installation) is not restarted in a
        # tight loop: back off up to 30 s.
        if not worker.ready:
            self._failed_starts += 1
        self._replace(min(30.0, 0.5 * 2 ** self._failed_starts) if self._failed_starts else 0.0)

    # --- jobs -------------------------------------------------------------------------------

    def submit(self, task: str, raw: bytes, time_limit: float, client: str = "",
               idempotency_key: str | None = None, session: str | None = None, worker: Worker | None = None) -> Job:
        """Queue a job; with an ``idempotency_key`` already known, the job it names (raises
        :class:`KeyReused` if that job's request differs)."""
        import hashlib

        # The request's digest tells a retry under the same key from another request: no key, no use.
        digest = "" if idempotency_key is None else hashlib.sha256(task.encode() + b"\0" + raw).hexdigest()
        if idempotency_key is not None and idempotency_key in self._keys:
            known = self._keys[idempotency_key]
            if known.digest != digest:
                raise KeyReused()
            return known
        if self._waiting() >= self.queue_size and not self._idle():
            raise QueueFull()
        job = Job(id=os.urandom(16).hex(), task=task, raw=raw, arrived=time.time(), time_limit=time_limit,
                  client=client, idempotency_key=idempotency_key, digest=digest, session=session, affinity=worker)
        self.jobs[job.id] = job
        if idempotency_key is not None:
            self._keys[idempotency_key] = job
        if self.store is not None:
            job.persisted = self._write(self.store.insert, {
                "id": job.id, "task": task, "arrived": job.arrived, "time_limit": time_limit, "client": client,
                "idempotency_key": idempotency_key, "digest": digest}, raw)
        if worker is not None:
            worker.pending.append(job)
        else:
            if client not in self._queues:
                # A client with nothing waiting goes first: the others have had their turn
                # (their next job may already wait at a worker).
                self._queues[client] = deque()
                self._queues.move_to_end(client, last=False)
            self._queues[client].append(job)
        self.queued += 1
        self._dispatch()
        return job

    # --- sessions (kept in one worker each) ----------------------------------------------------

    def open_session(self, kind: str, solver: str | None) -> HeldSession | None:
        """Register a new session on the worker holding fewest (None: no worker is up)."""
        alive = [worker for worker in self.workers if worker.ready and not worker.stopping]
        if not alive:
            return None
        worker = min(alive, key=lambda candidate: (len(candidate.sessions), len(candidate.pending)))
        now = time.time()
        held = HeldSession(uuid.uuid4().hex, kind, solver or "", worker, now, now)
        self.sessions[held.id] = held
        worker.sessions.add(held.id)
        return held

    def close_session(self, held: HeldSession) -> None:
        """Forget a session; its worker drops it (a job of its own) if it is still up."""
        self.sessions.pop(held.id, None)
        held.worker.sessions.discard(held.id)
        if held.state == "ready" and held.worker in self.workers and not held.worker.stopping:
            self.submit("session_delete", b"{}", 30.0, "", session=held.id, worker=held.worker)

    def _idle(self) -> list[Worker]:
        return [worker for worker in self.workers if worker.ready and not worker.stopping and worker.job is None]

    def _next(self, worker: Worker | None = None) -> Job | None:
        """The worker's own session jobs first, then the first job of the client whose turn it is
        (round robin over clients)."""
        if worker is not None and worker.pending:
            self.queued -= 1
            return worker.pending.popleft()
        while self._queues:
            client, jobs = next(iter(self._queues.items()))
            job = jobs.popleft()
            self.queued -= 1
            if jobs:
                self._queues.move_to_end(client)
            else:
                del self._queues[client]
            return job
        return None

    def _can_take_ahead(self, worker: Worker) -> bool:
        """A busy worker that may be sent its next job: not one holding sessions (their jobs keep
        their order at the worker) and not one about to be retired (its pipe closes then)."""
        return (worker.ready and not worker.stopping and worker.job is not None and worker.ahead is None
                and worker.job.session is None and not worker.pending and not worker.sessions
                and worker.jobs_done + 2 < self.max_jobs_per_worker)

    def _waiting(self) -> int:
        """Jobs that count against the queue's size: ``queued`` less those cancelled while sent
        ahead to a worker, which leave the count only once that worker is seen to finish or exit
        (a client that cancelled and asked again at once was answered 429)."""
        return self.queued - sum(1 for worker in self.workers
                                 if worker.ahead is not None and worker.ahead.state in FINAL)

    def _requeue_ahead(self, worker: Worker) -> None:
        """A job sent ahead to a worker that will not run it goes back to the front of its queue."""
        job, worker.ahead = worker.ahead, None
        if job is None:
            return
        if job.state in FINAL:  # cancelled while it waited there: it leaves the count
            self.queued -= 1
            return
        queue = self._queues.setdefault(job.client, deque())  # still counted in `queued`
        queue.appendleft(job)
        self._queues.move_to_end(job.client, last=False)

    def _dispatch(self) -> None:
        if self.closing or not self.queued:  # nothing waits (the usual case as a job finishes, below full load)
            return
        now = time.time()
        for worker in [*self._idle(), *(w for w in self.workers if self._can_take_ahead(w))]:
            job = self._next(worker)
            while job is not None and job.deadline <= now:
                self._finish(job, "failed", 504, _error_bytes(
                    f"the time limit ({job.time_limit:g} s) ran out while the job waited in the queue", "time_limit"))
                job = self._next(worker)
            if job is None:
                continue  # another idle worker may hold jobs of its own sessions
            self._launch(worker, job)

    def _launch(self, worker: Worker, job: Job) -> None:
        """Send ``job`` to ``worker``: it starts now if the worker is free, else it waits there as
        the worker's next job (``ahead``; small requests only, so one a worker will not run can go
        back to the queue whole)."""
        message = pack_job(job.task, job.deadline, job.id, job.session, job.raw)
        if worker.job is not None:
            if len(message) > LARGE_BODY:  # not worth holding twice: it waits in the queue instead
                self._queues.setdefault(job.client, deque()).appendleft(job)
                self._queues.move_to_end(job.client, last=False)
                self.queued += 1
                return
            worker.ahead = job
            self.queued += 1  # still waiting, at the worker: it counts against the queue's size
            self._send(worker, message)
            return
        if len(message) > LARGE_BODY:
            self._loop.run_in_executor(None, self._send, worker, message)
        else:
            self._send(worker, message)
        self._start(worker, job)

    def _start(self, worker: Worker, job: Job) -> None:
        """The worker runs ``job`` from now: its state, the store, the kill timer."""
        worker.job = job
        now = time.time()
        if job.state not in FINAL and job.deadline <= now:
            self._finish(job, "failed", 504, _error_bytes(
                f"the time limit ({job.time_limit:g} s) ran out while the job waited in the queue", "time_limit"))
        if job.state in FINAL:
            # Cancelled (or out of time) while it waited at the worker, which runs it anyway: its
            # answer is dropped, and the worker is stopped only if it outlives the grace.
            worker.kill_timer = self._loop.call_later(KILL_GRACE_S + max(job.deadline - now, 0.0),
                                                      self._overtime, worker, job)
            return
        job.state, job.started, job.pid = "running", now, worker.pid
        job.attempts += 1
        job.raw = b""  # the worker holds it now; a large instance is not kept twice
        if self.store is not None:
            self._write(self.store.started, job.id, job.started)
        self.running[job.id] = job
        delay = job.deadline + KILL_GRACE_S - time.time()
        worker.kill_timer = self._loop.call_later(max(delay, 0.0), self._overtime, worker, job)


    def _overtime(self, worker: Worker, job: Job) -> None:
        if worker.job is job:
            if job.state not in FINAL:
                self._finish(job, "failed", 504, _error_bytes(
                    f"the job ran {KILL_GRACE_S:g} s past its time limit ({job.time_limit:g} s) and was stopped",
                    "time_limit"))
            self._kill(worker)

    def _finish(self, job: Job, state: str, http: int, body: bytes) -> None:
        job.state, job.http, job.body, job.finished = state, http, body, time.time()
        job.raw = b""
        self._finished.append(job)
        self.running.pop(job.id, None)
        self.counts[f"{job.task}:{state}:{http}"] += 1
        held = self.sessions.get(job.session) if job.session else None
        if held is not None and job.task == "session_create":
            if http == 200:
                held.state = "ready"
            else:
                self.sessions.pop(held.id, None)
                held.worker.sessions.discard(held.id)
        if self.store is None:
            self._answered(job)
        else:  # the client hears of the answer once it is on disk
            written = self._write(self.store.finish, job.id, state, http, body, job.finished)
            written.add_done_callback(lambda _: self._answered(job))

    @staticmethod
    def _answered(job: Job) -> None:
        for waiter in job.waiters:
            if not waiter.done():
                waiter.set_result(None)
        job.waiters.clear()

    def _write(self, call: Any, *args: Any) -> asyncio.Future[Any]:
        """Run a store call on the writer thread (in the order asked)."""
        return self._loop.run_in_executor(self._writer, call, *args)

    async def recover(self) -> None:
        """Load the state folder's jobs: finished ones as they were, the rest queued again —
        or failed with the reason when their time limit ran out meanwhile, or when they were
        running at two stops in a row."""
        now = time.time()
        for row in await self._write(self.store.rows):
            job = Job(id=row["id"], task=row["task"], raw=row["request"] or b"", arrived=row["arrived"],
                      time_limit=row["time_limit"], client=row["client"], idempotency_key=row["idempotency_key"],
                      digest=row["digest"] or "", attempts=row["attempts"], state=row["state"],
                      started=row["started"], finished=row["finished"], http=row["http"], body=row["body"])
            self.jobs[job.id] = job
            if job.idempotency_key is not None:
                self._keys[job.idempotency_key] = job
            if job.state in FINAL:
                continue
            interrupted = job.state == "running"
            job.state = "queued"
            if job.task.startswith("session_"):
                self._finish(job, "failed", 410, _error_bytes(
                    "the service restarted: sessions live in worker processes and do not survive it", "id"))
            elif job.deadline <= now:
                self._finish(job, "failed", 504, _error_bytes(
                    f"the service stopped{' while the job ran' if interrupted else ''} and the job's time limit "
                    f"({job.time_limit:g} s) ran out before it restarted", "time_limit"))
            elif interrupted and job.attempts >= 2:
                self._finish(job, "failed", 500, _error_bytes(
                    f"the service stopped while this job ran, {job.attempts} times; it is not run again"))
            else:
                if interrupted:
                    self._write(self.store.requeued, job.id)
                self._queues.setdefault(job.client, deque()).append(job)
                self.queued += 1
        self._finished = deque(sorted((job for job in self.jobs.values() if job.state in FINAL),
                                      key=lambda job: job.finished or 0.0))

    def cancel(self, job: Job, http: int = 409, message: str = "cancelled by the client") -> None:
        """Cancel a job: drop it from the queue, or kill the worker running it."""
        if job.state in FINAL:
            return
        if job.state == "queued" and job.affinity is not None and job in job.affinity.pending:
            job.affinity.pending.remove(job)
            self.queued -= 1
        elif job.state == "queued":
            jobs = self._queues.get(job.client)
            if jobs is not None and job in jobs:
                jobs.remove(job)
                self.queued -= 1
                if not jobs:
                    del self._queues[job.client]
        for worker in self.workers:
            if worker.job is job:
                self._kill(worker)
        self._finish(job, "cancelled", http, _error_bytes(message))

    def forget_old(self) -> None:
        """Drop finished jobs past their retention (or beyond ``max_kept``, oldest first)."""
        now = time.time()
        old = []
        finished = self._finished  # oldest first: only the jobs dropped now are looked at
        while finished and (len(finished) > self.max_kept or now - (finished[0].finished or now) > self.retention_s):
            old.append(finished.popleft())
        for job in old:
            self.jobs.pop(job.id, None)
            if job.idempotency_key is not None and self._keys.get(job.idempotency_key) is job:
                del self._keys[job.idempotency_key]
        if old and self.store is not None:
            self._write(self.store.forget, [job.id for job in old])
        for held in [held for held in self.sessions.values()
                     if held.state != "creating" and now - held.used > self.session_ttl_s]:
            self.close_session(held)
        # Jobs whose deadline passed while every worker was busy are answered now, not when a
        # worker frees up.
        for client in list(self._queues):
            for job in [job for job in self._queues[client] if job.deadline <= now]:
                self.cancel(job, 504, f"the time limit ({job.time_limit:g} s) ran out while the job waited "
                                      "in the queue")

    def scratch_ok(self) -> bool:
        """The scratch folder exists (made again if it was removed) and takes a file."""
        try:
            self.scratch.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.scratch, prefix="ready-"):
                return True
        except OSError:
            return False

    async def drain(self, grace_s: float) -> None:
        """Shutting down: answer queued jobs 503 at once, give running ones ``grace_s`` to
        finish, then cancel them (503)."""
        self.draining = True
        message = "the service is shutting down; the job was not run"
        for worker in self.workers:
            for job in [*worker.pending, *([worker.ahead] if worker.ahead is not None else [])]:
                self.cancel(job, 503, message)
        for client in list(self._queues):
            for job in list(self._queues.get(client, ())):
                self.cancel(job, 503, message)
        ends = time.monotonic() + grace_s
        while self.running and time.monotonic() < ends:
            await asyncio.sleep(0.02)
        for job in list(self.running.values()):
            self.cancel(job, 503, f"the service is shutting down; the job did not finish within the grace "
                                  f"period ({grace_s:g} s) and was stopped")

    def close(self) -> None:
        """Stop every worker (they are idle after :meth:`drain`) and remove the scratch folder."""
        self.closing = True
        for worker in list(self.workers):
            self._unwatch(worker)
            if worker.process.exitcode is None:
                worker.process.kill()
            worker.process.join(timeout=5)
            worker.connection.close()
        if self._writer is not None:
            self._writer.shutdown(wait=True)  # every answer on disk before the store closes
            self.store.close()
        if self._own_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)



__all__ = ["FINAL", "HeldSession", "Job", "JobManager", "KeyReused", "QueueFull", "Worker"]
