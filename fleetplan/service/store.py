"""The service's jobs on disk: one SQLite database (the standard library's, WAL mode).

With ``fleetplan serve --state DIR`` every accepted job is a row of ``DIR/jobs.sqlite3`` before
the client hears of it, and its answer is written there before the client is given it. So a
restart — a crash, SIGKILL, a new version — loses nothing that was accepted: finished answers are
kept until their retention runs out, and the jobs that were queued or running are queued again
(or failed, with the reason, if their time limit ran out meanwhile or they were running at two
crashes in a row: a job that kills the service is not run a third time). An ``Idempotency-Key``
is stored with its job, so a retried submission returns the same job, across restarts too.

All calls come from one thread (the manager's writer), so one connection serves them; WAL with
``synchronous=NORMAL`` keeps a commit cheap (no fsync per job) and durable across a crash of the
process (not of the machine's power).

>>> import tempfile, pathlib
>>> store = JobStore(pathlib.Path(tempfile.mkdtemp()) / "jobs.sqlite3")
>>> store.insert({"id": "j1", "task": "solve", "arrived": 0.0, "time_limit": 60.0, "client": "",
...               "idempotency_key": "k", "digest": "d"}, b"{}")
>>> store.finish("j1", "done", 200, b'{"status": "optimal"}', 1.0)
>>> [row["state"] for row in store.rows()]
['done']
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

COLUMNS = ("id", "task", "state", "arrived", "time_limit", "client", "idempotency_key", "digest", "attempts",
           "started", "finished", "http", "body", "request")


class JobStore:
    """Jobs as rows; see the module docstring."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("""CREATE TABLE IF NOT EXISTS jobs (
            id TEXT PRIMARY KEY, task TEXT NOT NULL, state TEXT NOT NULL, arrived REAL NOT NULL,
            time_limit REAL NOT NULL, client TEXT NOT NULL DEFAULT '', idempotency_key TEXT UNIQUE,
            digest TEXT, attempts INTEGER NOT NULL DEFAULT 0, started REAL, finished REAL, http INTEGER,
            body BLOB, request BLOB)""")

    def insert(self, job: dict[str, Any], request: bytes) -> None:
        self._db.execute("INSERT INTO jobs (id, task, state, arrived, time_limit, client, idempotency_key, digest, "
                         "request) VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?)",
                         (job["id"], job["task"], job["arrived"], job["time_limit"], job["client"],
                          job["idempotency_key"], job["digest"], request))

    def started(self, job_id: str, when: float) -> None:
        self._db.execute("UPDATE jobs SET state = 'running', started = ?, attempts = attempts + 1 WHERE id = ?",
                         (when, job_id))

    def finish(self, job_id: str, state: str, http: int, body: bytes, when: float) -> None:
        """The answer is kept; the request is not (it is never run again)."""
        self._db.execute("UPDATE jobs SET state = ?, http = ?, body = ?, finished = ?, request = NULL WHERE id = ?",
                         (state, http, body, when, job_id))

    def requeued(self, job_id: str) -> None:
        self._db.execute("UPDATE jobs SET state = 'queued', started = NULL WHERE id = ?", (job_id,))

    def rows(self) -> list[sqlite3.Row]:
        """Every job, oldest first (what a restarted service loads)."""
        return self._db.execute(f"SELECT {', '.join(COLUMNS)} FROM jobs ORDER BY arrived").fetchall()

    def forget(self, job_ids: list[str]) -> None:
        self._db.executemany("DELETE FROM jobs WHERE id = ?", [(job_id,) for job_id in job_ids])

    def close(self) -> None:
        self._db.close()
