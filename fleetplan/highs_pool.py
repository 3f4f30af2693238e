"""HiGHS's one thread pool per process, sized for each run (every layer that runs HiGHS calls
:func:`use_threads` first, the judge's checks included, so it lives below them all).

HiGHS sizes a process-wide thread pool at its first run; a later run asking for another number
of threads ends at once with model status "Not Set" (``threads=1`` then
``threads=2`` in one Python process returned status ``error``). The pool's size is tracked
here and the pool is rebuilt when a run asks for another size, so in-process callers (a
notebook, a service, a scheduler calling every round) get for any sequence of calls what a
fresh process would. Two runs with different counts at the same moment in two threads of one
process still share one pool: the second waits for the lock, not for the first run.
"""

from __future__ import annotations

import threading

_pool_threads: int | None = None
_pool_lock = threading.Lock()


def use_threads(threads: int) -> None:
    """Make HiGHS's process-wide thread pool ``threads`` wide before a run that sets
    ``threads`` to that value (highspy's own Highs objects and Pyomo's alike)."""
    global _pool_threads
    threads = int(threads)
    with _pool_lock:
        if _pool_threads is not None and _pool_threads != threads:
            import highspy

            highspy.Highs.resetGlobalScheduler(True)
        _pool_threads = threads
