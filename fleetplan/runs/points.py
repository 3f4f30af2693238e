"""The points of a sweep over one instance, run into a results folder: what ``whatif`` and the
horizon's what-if share.

Every point is a cell carrying the same instance data; the cells not yet in the folder's results
table run — in this process one after another (``in_process``, which may parse the data once),
in local worker processes, or on a Dask cluster in chains of points (the data sent once per
chain) — and each row is appended as it comes, so a stopped sweep resumes where it stopped.

>>> chain_sizes = [len(chain) for chain in chains(list(range(120)), workers=2)]
>>> chain_sizes
[50, 50, 20]
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# On Dask, points go out in chains, one per worker (at most this many points each, so an
# interrupted sweep loses little), each solved in one worker process with the instance parsed
# once (a process per point costs an interpreter start each).
CHAIN_POINTS = 50

OnRow = Callable[[Any, dict[str, Any]], None]
OnStart = Callable[[Any], None]


def chains(cells: Sequence[Any], workers: int) -> list[list[Any]]:
    """The points in about one chain per Dask worker, no chain longer than :data:`CHAIN_POINTS`."""
    size = min(CHAIN_POINTS, max(1, math.ceil(len(cells) / max(workers, 1))))
    return [list(cells[start:start + size]) for start in range(0, len(cells), size)]


def one_by_one(cells: Sequence[Any], on_row: OnRow, on_start: OnStart) -> None:
    """The cells in this process, one after another (each cell reads its own data)."""
    from fleetplan.runs.cells import run_cell

    for cell in cells:
        on_start(cell)
        on_row(cell, run_cell(cell, preload=False))


def run_points(cells: Sequence[Any], folder: Path, *, resume: bool, progress: Any, executor: str, workers: int,
               address: Any, tls: Any, insecure: bool,
               in_process: Callable[[Sequence[Any], OnRow, OnStart], None] = one_by_one,
               while_waiting: Callable[[], Any] | None = None) -> None:
    """Run the cells not yet in ``folder``'s results table and append their rows.

    ``executor``/``workers``: ``"local"`` with one worker runs ``in_process``; more workers run
    each cell in a child process killed past its limit; ``"dask"`` sends chains of cells to the
    cluster at ``address`` (a client object is used as it is). ``progress``: ``"auto"``
    (standard error), a stream, or None. ``while_waiting``: started once the cells are on the
    Dask cluster and this process only waits; a thread it returns is joined at the end."""
    from fleetplan.runs import executors
    from fleetplan.runs.progress import SweepProgress
    from fleetplan.runs.results import ResultsWriter

    waited = None
    with ResultsWriter(folder, resume=resume) as writer:
        todo = [cell for cell in cells if cell.key not in writer.done_keys]
        stream = sys.stderr if progress == "auto" else progress
        display = SweepProgress(len(cells), len(cells) - len(todo), stream=stream)
        with display:
            def on_row(cell: Any, row: dict[str, Any]) -> None:
                writer.append(row)
                display.finish(cell, row)

            if executor == "local" and workers == 1:
                in_process(todo, on_row, display.start)
            elif executor == "local":
                executors.run_local(todo, on_row, workers=workers, on_start=display.start)
            else:
                client = executors.connect_dask(address, tls, insecure=insecure) if isinstance(address, str) else address
                try:
                    batches = chains(todo, len(client.scheduler_info().get("workers", {})))
                    waited = while_waiting() if while_waiting is not None else None
                    executors.run_dask_chains(batches, on_row, client=client, on_start=display.start)
                finally:
                    if isinstance(address, str):
                        client.close()
    if waited is not None:
        waited.join()
