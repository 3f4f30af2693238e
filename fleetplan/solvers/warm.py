"""Warm starts between re-solves of a changing problem: what one solve leaves for the next.

A scheduler re-solves almost the same problem every round (Gavel §5: a round every few
minutes, a few jobs arriving or finishing). The answer of the last round is a good start for
this one, but only as a *hint*: every solver still proves its own answer (the price
decomposition's certificate, the LP solver's optimality), so a stale or wrong hint costs time,
never correctness.

Hints travel in a :class:`WarmStart` that the caller owns and hands to :func:`hints`, which
makes it the current one for the solves inside the ``with`` block (a context variable: each
thread, and each asyncio task, sees its own). Solvers that can use a hint ask for it with
:func:`take` and leave the next round's with :func:`give`; all other solvers are unaffected.
Keys name the LP a hint belongs to and its place in the solve (the k-th LP of a form: a
finite-time-fairness solve runs several), so that a solve of another policy or another size
finds no hint rather than a wrong one::

    warm = WarmStart()
    with hints(warm):
        first = fleetplan.solve(instance, "max-min-fairness")   # cold; leaves its prices
    with hints(warm):
        second = fleetplan.solve(changed, "max-min-fairness")   # starts from those prices

:class:`fleetplan.embed.AllocationSession` does this for its caller.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WarmStart:
    """Hints from the last solve (``previous``) and those the running solve leaves (``current``).

    ``offered`` counts the hints handed to solvers in the last solve, ``left`` those it left.
    """

    previous: dict[Hashable, Any] = field(default_factory=dict)
    current: dict[Hashable, Any] = field(default_factory=dict)
    ordinals: dict[Hashable, int] = field(default_factory=dict)
    offered: int = 0
    left: int = 0

    def begin(self) -> None:
        """Start a solve: the hints the last one left become the ones offered."""
        if self.current:
            self.previous = self.current
        self.current = {}
        self.ordinals = {}
        self.offered = 0
        self.left = 0

    def forget(self) -> None:
        """Drop every hint (the next solve starts cold)."""
        self.previous, self.current, self.ordinals = {}, {}, {}

    def slot(self, family: Hashable) -> Hashable:
        """The key of the next LP of ``family`` in this solve: ``(family, k)`` for its k-th."""
        k = self.ordinals.get(family, 0)
        self.ordinals[family] = k + 1
        return (family, k)


_CURRENT: ContextVar[WarmStart | None] = ContextVar("fleetplan_warm_start", default=None)


@contextlib.contextmanager
def hints(warm: WarmStart | None) -> Iterator[WarmStart | None]:
    """Make ``warm`` the current hints for the solves in the block (None: no hints)."""
    if warm is not None:
        warm.begin()
    token = _CURRENT.set(warm)
    try:
        yield warm
    finally:
        _CURRENT.reset(token)


def slot(family: Hashable) -> Hashable | None:
    """The key of the next LP of ``family`` when hints are on, else None."""
    warm = _CURRENT.get()
    return None if warm is None else warm.slot(family)


def take(key: Hashable | None) -> Any | None:
    """The hint the last solve left under ``key`` (None when there is none or hints are off)."""
    warm = _CURRENT.get()
    if warm is None or key is None:
        return None
    hint = warm.previous.get(key)
    if hint is not None:
        warm.offered += 1
    return hint


def give(key: Hashable | None, hint: Any) -> None:
    """Leave ``hint`` under ``key`` for the next solve (nothing when hints are off)."""
    warm = _CURRENT.get()
    if warm is not None and key is not None and hint is not None:
        warm.current[key] = hint
        warm.left += 1
