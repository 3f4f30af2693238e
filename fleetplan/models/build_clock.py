"""Deadline checks while a model is built (a time limit covers the build).

Builders take any object with ``expired()`` (e.g. :class:`fleetplan.solvers.deadline.Deadline`;
models cannot import solvers) and call :meth:`_Ticker.tick` in their loops; an expired
deadline raises :class:`BuildTimeout`, which the solver turns into status ``time_limit`` with
the best plan known.

>>> ticker = _Ticker(None)
>>> ticker.tick()
>>> ticker.count
1
"""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    """What a model builder needs of a deadline (e.g. ``fleetplan.solvers.deadline.Deadline``)."""

    def expired(self, reserve: float = 0.0) -> bool: ...


class BuildTimeout(Exception):
    """The deadline passed while a model was being built."""


class _Ticker:
    """Checks a deadline every ``every`` calls (the clock itself costs a system call)."""

    __slots__ = ("deadline", "every", "count")

    def __init__(self, deadline: Clock | None, every: int = 256) -> None:
        self.deadline, self.every, self.count = deadline, every, 0

    def tick(self) -> None:
        self.count += 1
        if self.deadline is not None and self.count % self.every == 0 and self.deadline.expired():
            raise BuildTimeout(f"time limit reached while building the model ({self.count} rows)")
