"""The solve service's event loop: the job manager on uvloop (uvicorn's fast loop, which the
service extra installs), and the requests checked in the loop's own process."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import EXAMPLES

GAVEL = json.loads((EXAMPLES / "allocation-gavel-4.1.json").read_text())


def _solve_on(loop_factory, raws: list[bytes]) -> list[tuple[int, dict]]:
    """Each raw solve request's (HTTP code, answer) from a one-worker job manager on the loop."""
    from fleetplan.service.jobs import JobManager

    async def run() -> list[tuple[int, dict]]:
        manager = JobManager(workers=1, queue_size=8)
        await manager.start()
        try:
            jobs = [manager.submit("solve", raw, 20.0, "test") for raw in raws]
            for job in jobs:
                answered = asyncio.get_running_loop().create_future()
                job.waiters.append(answered)
                if job.state not in ("done", "failed", "cancelled"):
                    await asyncio.wait_for(answered, 60)
            return [(job.http, json.loads(job.body)) for job in jobs]
        finally:
            manager.close()

    loop = loop_factory()
    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


def test_large_requests_reach_a_worker_whole_on_uvloop():
    uvloop = pytest.importorskip("uvloop")
    small = json.dumps({"instance": GAVEL, "seed": 7}).encode()
    # Padded past the pipe's buffer: sent from the loop (512 KiB) and from a thread (3 MiB, above
    # the manager's LARGE_BODY). On a non-blocking pipe either arrived cut and the job hung.
    raws = [small + b" " * (512 << 10), small + b" " * (3 << 20), small]
    answers = _solve_on(uvloop.new_event_loop, raws)
    assert [code for code, _ in answers] == [200, 200, 200]
    assert all(answer["plan"]["options"]["seed"] == 7 for _, answer in answers)


class _CountingPool:
    """Stands for the intake processes: runs the check in this thread and counts the calls."""

    def __init__(self) -> None:
        self.calls = 0

    def submit(self, function, *args):
        from concurrent.futures import Future

        self.calls += 1
        future: Future = Future()
        future.set_result(function(*args))
        return future


@pytest.mark.parametrize("task,body,inline,expected", [
    ("solve", {"instance": GAVEL, "seed": 3}, True, 200),
    ("solve", {"instance": GAVEL, "solvr": "max-min-fairness"}, True, 422),
    ("solve", {"instance": GAVEL, "solvr": "max-min-fairness", "pad": "x" * 3000}, False, 422),
    ("whatif", {"instance": GAVEL, "vary": []}, False, 200),  # its checks can take long: never in the loop
])
def test_small_requests_are_checked_in_the_loops_process_with_the_same_answer(task, body, inline, expected):
    from fleetplan.service.app import Service, ServiceSettings
    from fleetplan.service.schemas import intake

    service = Service(ServiceSettings())
    service.intake = pool = _CountingPool()
    raw = json.dumps(body).encode()
    code, answer = asyncio.run(service.check(task, raw))
    assert pool.calls == (0 if inline else 1)
    assert (code, answer) == intake(task, raw, service.settings.max_time_limit_s)
    assert code == expected


def test_a_job_cancelled_while_sent_ahead_leaves_the_queue_at_once():
    """A job sent ahead to a busy worker stays counted in ``queued`` until that worker is seen
    to finish or exit; cancelled there, it no longer counts against the queue's size (a cancel
    followed at once by a new request was answered 429)."""
    from fleetplan.service.jobs import Job, JobManager, QueueFull, Worker

    manager = JobManager(workers=1, queue_size=1)
    try:
        running = Job(id="r", task="solve", raw=b"{}", arrived=0.0, time_limit=10.0, state="running")
        ahead = Job(id="a", task="solve", raw=b"{}", arrived=0.0, time_limit=10.0)
        manager.workers.append(Worker(process=None, connection=None, started=0.0, ready=True, job=running,
                                      ahead=ahead))
        manager.queued = 1
        with pytest.raises(QueueFull):
            manager.submit("solve", b"{}", 10.0, "client")
        ahead.state = "cancelled"
        assert manager.submit("solve", b"{}", 10.0, "client").state == "queued"  # not QueueFull
    finally:
        manager.workers.clear()  # a stand-in, no process behind it to stop
        manager.close()
