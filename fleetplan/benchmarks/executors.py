"""Executors: run cells and hand each row over as soon as it is in.

* :func:`run_local` keeps up to ``workers`` child processes busy on this machine, one cell per
  process (:class:`~fleetplan.benchmarks.cells.CellProcess`), killing any past its limit.
* :func:`run_dask` submits one task per cell to a Dask cluster; each task runs the very same
  child-process function on a worker, so the two executors' tables differ only in timings.

Both call ``on_row(cell, row)`` from the calling thread as rows arrive, and ``on_start(cell)``
when a cell is handed out, which is what the progress display and the CSV writer listen to.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from fleetplan.benchmarks.cells import (
    DEFAULT_GRACE_S,
    Cell,
    CellProcess,
    error_row,
    run_cell_isolated,
)
from fleetplan.instances import InstanceError

OnRow = Callable[[Cell, dict[str, Any]], None]
OnStart = Callable[[Cell], None]
POLL_INTERVAL_S = 0.02


def _nothing(cell: Cell) -> None:
    """Default ``on_start``: nobody is listening."""


def run_local(cells: Sequence[Cell], on_row: OnRow, *, workers: int = 1,
              grace_s: float = DEFAULT_GRACE_S, on_start: OnStart = _nothing) -> None:
    """Run ``cells`` in at most ``workers`` concurrent child processes.

    On KeyboardInterrupt every running child is killed before the exception propagates, so an
    interrupted sweep leaves no stray solver behind; finished rows were already handed over.
    """
    if workers < 1:
        raise InstanceError("workers", "must be at least 1")
    waiting = deque(cells)
    running: list[CellProcess] = []
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                cell = waiting.popleft()
                running.append(CellProcess(cell, grace_s).start())
                on_start(cell)
            still: list[CellProcess] = []
            for process in running:
                row = process.poll()
                if row is None:
                    still.append(process)
                else:
                    on_row(process.cell, row)
            if len(still) == len(running):
                time.sleep(POLL_INTERVAL_S)
            running = still
    finally:
        for process in running:
            process.kill()
            process.poll()


def run_dask(cells: Sequence[Cell], on_row: OnRow, *, address: str | Any,
             grace_s: float = DEFAULT_GRACE_S, on_start: OnStart = _nothing,
             connect_timeout_s: float = 30.0) -> None:
    """Run ``cells`` on the Dask cluster at ``address`` (``tcp://HOST:8786``, or a ``Client``).

    One task per cell (``pure=False``: a repeat is a new measurement, never a cached result);
    rows are handed over in completion order.
    """
    try:
        from dask.distributed import Client, as_completed
    except ImportError:  # pragma: no cover - dask is a declared optional dependency
        raise InstanceError("executor", "the dask executor needs dask[distributed] installed") from None
    own_client = not isinstance(address, Client)
    if own_client:
        try:
            client = Client(address, timeout=connect_timeout_s)
        except (OSError, TimeoutError) as error:
            raise InstanceError("address", f"cannot reach the Dask scheduler at {address}: {error}") from None
    else:
        client = address
    futures = {}
    try:
        for cell in cells:
            future = client.submit(run_cell_isolated, cell, grace_s, pure=False,
                                   key=f"fleetplan-cell-{cell.order}-{time.monotonic_ns()}")
            futures[future] = cell
            on_start(cell)
        for future in as_completed(futures):
            cell = futures[future]
            try:
                row = future.result()
            except Exception as error:  # a lost worker is one failed cell, not a lost sweep
                row = error_row(cell, f"dask task failed: {type(error).__name__}: {error}")
            on_row(cell, row)
    finally:
        for future in futures:
            if not future.done():
                future.cancel()
        if own_client:
            client.close()
