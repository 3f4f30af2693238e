"""Work shared over forked processes that inherit this one's memory.

A warm solver, its built model and the instance are in memory: a forked child starts with all
of it and sends back only its answers, where a fresh interpreter would import and build again.
:func:`run_shared` deals tasks to this process and ``workers - 1`` children;
:func:`free_workers` says how many processes the machine leaves room for.

>>> run_shared(lambda task: task * task, [1, 2, 3], 1)
[1, 4, 9]
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any


def free_workers(tasks: int, *, cores: int | None = None, load: float | None = None) -> int:
    """One process per core this process may run on that others leave free, at most one per
    task. ``cores`` and ``load`` (the 1-minute load average, this process counted in it)
    default to the machine's; a core counts as free only if no other work is on it.

    >>> free_workers(8, cores=2, load=0.0), free_workers(8, cores=2, load=2.0), free_workers(1, cores=4, load=0.0)
    (2, 1, 1)
    """
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    free = cores - max(load - 1.0, 0.0)
    return max(1, min(cores, tasks, math.floor(free + 1e-9)))


def can_fork() -> bool:
    # A forked child inherits only the forking thread: with other Python threads alive (a
    # service's request threads, a Dask client) a lock one of them held would stay held.
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def run_shared(work: Callable[[Any], Any], tasks: Sequence[Any], workers: int) -> list[Any]:
    """``[work(task) for task in tasks]``, the tasks dealt round-robin to ``workers`` processes:
    this one and ``workers - 1`` forked children, which inherit everything in memory (the warm
    solver, the units' builders) and send back only their results. Any child still running
    when this returns or raises (an error, Ctrl-C) is killed."""
    workers = min(workers, len(tasks))
    if workers <= 1 or not can_fork():
        return [work(task) for task in tasks]
    context = multiprocessing.get_context("fork")
    children = []
    try:
        for k in range(1, workers):
            receive, send = context.Pipe(duplex=False)
            child = context.Process(target=_run_share, args=(work, tasks[k::workers], send), daemon=True)
            child.start()
            send.close()
            children.append((k, child, receive))
        results: list[Any] = [None] * len(tasks)
        results[::workers] = [work(task) for task in tasks[::workers]]
        for k, child, receive in children:
            try:
                ok, payload = receive.recv()
            except EOFError:
                raise RuntimeError(f"a re-solve process ended without an answer (exit code {child.exitcode})") from None
            if not ok:
                raise payload
            results[k::workers] = payload
        return results
    finally:
        for _, child, receive in children:
            if child.is_alive():
                child.kill()
            child.join()
            receive.close()


def _run_share(work: Callable[[Any], Any], tasks: Sequence[Any], send: Any) -> None:
    """A forked child's share of :func:`run_shared`: its results, or the error that stopped it."""
    # Ctrl-C reaches the whole process group: the parent stops and kills this child (which
    # would otherwise print a traceback of its own); SIGTERM ends it quietly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        answer: tuple[bool, Any] = (True, [work(task) for task in tasks])
    except Exception as error:  # handed to the parent, which raises it
        answer = (False, error)
    try:
        send.send(answer)
    except Exception as error:  # an error that cannot be pickled: its text
        send.send((False, RuntimeError(f"{type(error).__name__}: {error}")))
    send.close()


