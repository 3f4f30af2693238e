"""One clock per solve: model building, every sub-solve and the judge draw from it.

A solver makes one :class:`Deadline` from its ``time_limit`` when it starts and hands
``deadline.remaining()`` to each back-end call, instead of handing every call the whole limit
(a binary search whose probes each got the full limit ran 46 s under a 5 s limit).

Example
-------
>>> deadline = Deadline(None)
>>> deadline.expired(), deadline.remaining() is None
(False, True)
>>> Deadline(10.0).remaining() <= 10.0
True
"""

from __future__ import annotations

import time

# What a back-end is given at least once the clock has run out, so it can return the plan it
# holds instead of refusing to start; HiGHS and CP-SAT accept such tiny limits.
MINIMUM_SLICE_S = 0.01


class Deadline:
    """Remaining time of one solve; ``time_limit=None`` never expires."""

    __slots__ = ("time_limit", "started", "started_cpu")

    def __init__(self, time_limit: float | None, started: float | None = None) -> None:
        self.time_limit = time_limit
        self.started = time.perf_counter() if started is None else started
        self.started_cpu = time.process_time()

    def cpu_share(self) -> float:
        """The share of one core this process has had since the clock was made (CPU seconds
        over wall seconds, clamped to [0.1, 1]; 1 in the first 0.2 s, too short to tell).

        A reserve measured in CPU seconds (the judge's LP, say) takes ``1 / share`` times as
        long in wall time on a loaded machine: at a load of 20 on 2 cores a process gets about
        a third of a core, and a 3.5 s judge took 10 s."""
        wall = self.elapsed()
        if wall < 0.2:
            return 1.0
        return min(1.0, max(0.1, (time.process_time() - self.started_cpu) / wall))

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def remaining(self, reserve: float = 0.0) -> float | None:
        """Seconds left (never below :data:`MINIMUM_SLICE_S`), keeping ``reserve`` seconds back
        for the work after this call (expanding a plan, judging it); None without a limit."""
        if self.time_limit is None:
            return None
        return max(MINIMUM_SLICE_S, self.time_limit - self.elapsed() - reserve)

    def expired(self, reserve: float = 0.0) -> bool:
        return self.time_limit is not None and self.elapsed() + reserve >= self.time_limit

    def share(self, fraction: float) -> float | None:
        """A slice of the time left: ``fraction`` of :meth:`remaining` (None without a limit)."""
        remaining = self.remaining()
        return None if remaining is None else max(MINIMUM_SLICE_S, remaining * fraction)
