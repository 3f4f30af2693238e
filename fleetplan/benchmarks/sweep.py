"""A sweep: expand a suite into cells, run those not yet done, write the table, finalize gaps.

>>> import tempfile
>>> from fleetplan.benchmarks.suite import parse_suite
>>> suite = parse_suite('''
... name: tiny
... groups:
...   - kind: allocation
...     generator: {jobs: 4}
...     solvers: [{name: max-min-fairness}]
... ''')
>>> out = tempfile.mkdtemp()
>>> rows = run_sweep(suite, out, progress=None)
>>> [(row["label"], row["status"], row["gap"]) for row in rows]
[('max-min-fairness', 'optimal', 0.0)]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Literal, TextIO

from fleetplan.benchmarks import executors
from fleetplan.benchmarks.cells import DEFAULT_GRACE_S, Cell, expand_cells
from fleetplan.benchmarks.results import ResultsWriter, finalize, sort_rows, write_results
from fleetplan.benchmarks.suite import Suite
from fleetplan.instances import InstanceError

Executor = Literal["local", "dask"]


class SweepProgress:
    """Cells done, running and failed, and an estimate of the time left.

    A rich progress bar when ``stream`` is a terminal, plain log lines otherwise (CI logs).
    The estimate is (cells left) x (mean wall time of finished cells) / (cells run at once).
    """

    def __init__(self, total: int, already_done: int = 0, parallel: int = 1,
                 stream: TextIO | None = None, live: bool | None = None):
        self.total = total
        self.done = already_done
        self.skipped = already_done
        self.failed = 0
        self.running = 0
        self.parallel = max(1, parallel)
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self._live = self.stream.isatty() if live is None else live
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
        per_cell = (time.monotonic() - self.started) / finished * min(self.parallel, max(1, self.running))
        return per_cell * (self.total - self.done) / self.parallel

    def _status(self) -> str:
        eta = self.eta_s()
        left = f"{eta:.0f}s" if eta is not None else "?"
        return f"running {self.running}  failed {self.failed}  ETA {left}"

    def _log(self, text: str) -> None:
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
        if row["status"] == "error":
            self.failed += 1
        self._refresh()
        if self._bar is None:
            objective = row["objective"] if row["objective"] != "" else "-"
            wall = f"{float(row['wall_s']):.3f}s" if row["wall_s"] != "" else "-"
            note = f"  {row['message']}" if row["status"] == "error" else ""
            self._log(f"[{self.done}/{self.total}] {cell.label} {cell.instance} seed={cell.seed} "
                      f"repeat={cell.repeat}: {row['status']} objective={objective} wall={wall} "
                      f"(running {self.running}, failed {self.failed}){note}")


def run_sweep(suite: Suite, out: str | os.PathLike[str], *, executor: Executor = "local",
              workers: int = 1, address: Any = None, resume: bool = False,
              repeats: int | None = None, grace_s: float = DEFAULT_GRACE_S,
              save_plans: bool = False, progress: TextIO | None | Literal["auto"] = "auto",
              live: bool | None = None) -> list[dict[str, Any]]:
    """Run ``suite`` into ``out/results.csv`` and return the finalized rows.

    ``resume=True`` keeps the rows already in ``out/results.csv`` and runs only the cells whose
    key (group, instance, seed, label, repeat) is missing. ``progress=None`` is silent.
    """
    if executor not in ("local", "dask"):
        raise InstanceError("executor", f"unknown executor '{executor}' (local or dask)")
    if executor == "dask" and not address:
        raise InstanceError("address", "the dask executor needs --address tcp://HOST:8786")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    plan_dir = None
    if save_plans:
        (folder / "plans").mkdir(exist_ok=True)
        plan_dir = str((folder / "plans").resolve())
    cells = expand_cells(suite, repeats=repeats, plan_dir=plan_dir)
    wanted = {cell.key for cell in cells}
    with ResultsWriter(folder, resume=resume) as writer:
        done = writer.done_keys & wanted
        todo = [cell for cell in cells if cell.key not in done]
        stream = None if progress is None else (sys.stderr if progress == "auto" else progress)
        display = SweepProgress(len(cells), len(done), workers if executor == "local" else 1,
                                stream=stream or open(os.devnull, "w"), live=False if stream is None else live)
        with display:
            def on_row(cell: Cell, row: dict[str, Any]) -> None:
                writer.append(row)
                display.finish(cell, row)

            if executor == "local":
                executors.run_local(todo, on_row, workers=workers, grace_s=grace_s, on_start=display.start)
            else:
                executors.run_dask(todo, on_row, address=address, grace_s=grace_s, on_start=display.start)
        rows = writer.rows
    rows = sort_rows(finalize(rows), cells)
    write_results(folder, rows)
    return rows
