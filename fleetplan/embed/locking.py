"""One lock per session: calls from several threads are serialised, never interleaved.

A session changes its state by reading it, building the new state and swapping it in; two
threads doing that at once would each build from the same old state and one change would be
lost (a shared session once lost 1,036 of 4,000 jobs added from two threads). Every public
method that reads or changes a session's problem therefore holds the session's re-entrant lock:
calls from several threads run one after the other, in the order they take the lock, and a
long ``solve`` makes a change from another thread wait for it. For parallel solves, give each
thread its own session.

>>> import threading
>>> class Counter:
...     def __init__(self):
...         self._lock, self.value = threading.RLock(), 0
...     @serialised
...     def add(self):
...         value = self.value
...         self.value = value + 1
>>> counter = Counter()
>>> threads = [threading.Thread(target=lambda: [counter.add() for _ in range(1000)]) for _ in range(4)]
>>> _ = [t.start() for t in threads] + [t.join() for t in threads]
>>> counter.value
4000
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

Method = TypeVar("Method", bound=Callable[..., Any])


def serialised(method: Method) -> Method:
    """Run ``method`` holding ``self._lock`` (a :class:`threading.RLock` the session makes)."""

    @functools.wraps(method)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return locked  # type: ignore[return-value]
