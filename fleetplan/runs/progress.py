"""Progress of a sweep of cells: done, running, failed and the time left, as a rich bar on a
terminal and plain lines in a log."""

from __future__ import annotations

import time
from typing import Any, TextIO

from fleetplan.runs.cells import Cell
from fleetplan.runs.results import row_failed


class SweepProgress:
    """Cells done, running and failed, and an estimate of the time left.

    A rich progress bar when ``stream`` is a terminal, plain log lines otherwise (CI logs).
    The estimate divides the cells left by the rate at which cells have finished so far.
    """

    def __init__(self, total: int, already_done: int = 0,
                 stream: TextIO | None = None, live: bool | None = None):
        self.total = total
        self.done = already_done
        self.skipped = already_done
        self.failed = 0
        self.running = 0
        self.stream = stream  # None: silent
        self.started = time.monotonic()
        self._live = stream is not None and (stream.isatty() if live is None else live)
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> SweepProgress:
        if self._live:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(
                TextColumn("[bold]bench"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"), TimeElapsedColumn(),
                console=Console(file=self.stream), transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task("cells", total=self.total, completed=self.done,
                                            status=self._status())
        elif self.skipped:
            self._log(f"resuming: {self.skipped} of {self.total} cells already done")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def eta_s(self) -> float | None:
        finished = self.done - self.skipped
        if finished == 0:
            return None
        # Cells finished per second so far, across all workers, predicts the rest.
        rate = finished / max(time.monotonic() - self.started, 1e-9)
        return (self.total - self.done) / rate

    def _status(self) -> str:
        eta = self.eta_s()
        left = f"{eta:.0f}s" if eta is not None else "?"
        return f"running {self.running}  failed {self.failed}  ETA {left}"

    def _log(self, text: str) -> None:
        if self.stream is not None:
            print(text, file=self.stream, flush=True)

    def _refresh(self) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, status=self._status())

    def start(self, cell: Cell) -> None:
        self.running += 1
        self._refresh()

    def finish(self, cell: Cell, row: dict[str, Any]) -> None:
        self.running = max(0, self.running - 1)
        self.done += 1
        if row_failed(row):
            self.failed += 1
        self._refresh()
        if self._bar is None and self.stream is not None:
            objective = row["objective"] if row["objective"] != "" else "-"
            wall = f"{float(row['wall_s']):.3f}s" if row["wall_s"] != "" else "-"
            note = f"  {row['message']}" if row_failed(row) and row["message"] else ""
            self._log(f"[{self.done}/{self.total}] {cell.label} {cell.instance} seed={cell.seed} "
                      f"repeat={cell.repeat}: {row['status']} objective={objective} wall={wall} "
                      f"({self._status()}){note}")
