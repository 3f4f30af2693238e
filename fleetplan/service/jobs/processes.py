"""The job manager's worker processes (:mod:`fleetplan.service.jobs`): the fork server that
imports the solvers once, starting, watching, replacing, retiring and killing the long-lived
worker processes, and the pipe each one is read from and sent to. Split from that module:
:class:`WorkerProcesses` is the part of :class:`~fleetplan.service.jobs.JobManager` that
handles processes; what a worker's answer or its end means for a job (``_on_answer``,
``_on_exit``) and the queue stay with the manager, which sets every attribute used here.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time

from fleetplan.service.jobs.records import Worker
from fleetplan.service.tasks import SMALL_MESSAGE, read_messages, serve_jobs, unpack, write_message

# What the worker processes' fork server imports once, so a new worker starts in milliseconds.
PRELOAD = ["fleetplan.service.tasks", "fleetplan.solvers", "fleetplan.instances", "scipy.sparse", "highspy",
           "ortools.sat.python.cp_model"]


class WorkerProcesses:
    """Start, watch, replace, retire and kill the worker processes; send to and read from their
    pipes. A base of :class:`~fleetplan.service.jobs.JobManager`, not used alone."""

    async def start(self, timeout_s: float = 120.0) -> None:
        """Start the fork server (the imports happen once, here) and the workers; return once
        every worker has warmed up and said so."""
        self._loop = asyncio.get_running_loop()
        if self.store is not None:
            await self.recover()
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)  # no effect if the fork server already runs
        self._context = context
        self.scratch.mkdir(parents=True, exist_ok=True)
        for _ in range(self.size):
            await self._loop.run_in_executor(None, self._spawn_blocking)
        ends = time.monotonic() + timeout_s
        while not all(worker.ready for worker in self.workers) and time.monotonic() < ends and not self.draining:
            await asyncio.sleep(0.02)

    def _spawn_blocking(self) -> Worker:
        parent, child = self._context.Pipe()
        process = self._context.Process(target=serve_jobs, args=(child, str(self.scratch), os.getpid()), daemon=True,
                                        name="fleetplan-worker")
        process.start()
        child.close()
        worker = Worker(process, parent, time.monotonic(), parent.fileno(), process.pid)
        self._loop.call_soon_threadsafe(self._watch, worker)
        return worker

    def _watch(self, worker: Worker) -> None:
        self.workers.append(worker)
        self._loop.add_reader(worker.fd, self._on_message, worker)
        self._loop.add_reader(worker.process.sentinel, self._on_exit, worker)
        # uvloop's add_reader (a libuv poll handle) makes the descriptor non-blocking; the pipe's
        # Connection sends and reads whole messages and needs it blocking, or a message larger
        # than the socket's buffer fails half-sent or half-read.
        os.set_blocking(worker.fd, True)

    def _replace(self, delay: float = 0.0) -> None:
        if self.closing:
            return
        if delay:
            self._loop.call_later(delay, self._replace)
            return
        self.restarts += 1
        self._loop.run_in_executor(None, self._spawn_blocking)

    def _unwatch(self, worker: Worker) -> None:
        for fd in (worker.fd, worker.process.sentinel):
            try:
                self._loop.remove_reader(fd)
            except (ValueError, OSError):
                pass
        if worker.kill_timer is not None:
            worker.kill_timer.cancel()
        if worker in self.workers:
            self.workers.remove(worker)

    def _on_message(self, worker: Worker) -> None:
        try:
            messages = read_messages(worker.fd)
        except (EOFError, OSError):
            self._on_exit(worker)
            return
        for message in messages:
            if worker.stopping:  # retired by the one before: it sends nothing more
                break
            self._on_answer(worker, *unpack(message))

    def _retire(self, worker: Worker) -> None:
        worker.stopping = True
        self._unwatch(worker)
        worker.connection.close()  # the worker reads end-of-file and exits
        self._loop.run_in_executor(None, worker.process.join, 30)
        self._replace()

    def _kill(self, worker: Worker) -> None:
        """Kill a worker mid-job (cancel, time limit); :meth:`_on_exit` replaces it."""
        worker.job, worker.stopping = None, True
        if worker.process.exitcode is None:
            worker.process.kill()

    @staticmethod
    def _send(worker: Worker, message: bytes) -> None:
        try:
            if len(message) <= SMALL_MESSAGE:
                write_message(worker.fd, message)
            else:
                worker.connection.send_bytes(message)
        except (OSError, ValueError):
            pass  # the worker died: its sentinel reports it
