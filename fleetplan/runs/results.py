"""The results table: ``OUT/results.csv``, one row per cell, appended as cells finish.

Rows are appended one ``write`` at a time and flushed to disk, so an interrupted sweep loses
at most the cells that were running; a torn last line (a crash mid-write) is dropped when the
file is read back, and ``--resume`` runs exactly the cells whose key is missing.

Gaps need every solver's result for an instance, so they are filled in at the end
(:func:`finalize`). Plans are compared only with plans of the same instance (kind, parameters,
seed) scored by the same objective (``objective_name``: solvers of different policies of one
kind are judged by different objectives). Among those, ``best_bound`` is the best bound any
solver proved — for a maximization the *lowest* upper bound, for a minimization the highest
lower bound — and ``gap = (best_bound - objective) / |objective|`` for a maximization
(``(objective - best_bound) / |objective|`` for a minimization), which is >= 0 whenever the
bounds are right. When no solver proved a bound, the best objective any feasible plan reached
stands in, and ``gap_reference`` says ``best_objective`` instead of ``bound``. The finalized
table is rewritten atomically, sorted in cell order.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fleetplan.instances import InstanceError
from fleetplan.instances.outputs import atomic_write_text
from fleetplan.runs.cells import COLUMNS, FORMAT_VERSION, SIM_STATUS, Cell, cell_key

RESULTS_FILE = "results.csv"
SOLVED = ("optimal", "feasible", "time_limit")
# What each format version added (its columns get these values when an older table is read).
# Version 1 is the first 22 columns of COLUMNS; tables before version 3 carry no version column.
_ADDED: dict[int, dict[str, str]] = {
    2: {"stats": ""},
    # Before version 3, peak_mem_mb was the child process's whole peak (interpreter included).
    3: {"mem_baseline_mb": "", "mem_measure": "process-peak", "metrics": ""},
}
V1_COLUMNS = COLUMNS[:22]
# An objective may beat the best bound by this much (relative) before we call the bound wrong:
# LP solutions are feasible only to ~1e-7.
BOUND_TOLERANCE = 1e-6


def row_key(row: dict[str, Any]) -> tuple[str, str, str, str, str]:
    return cell_key(row["group"], row["instance"], row["seed"], row["label"], row["repeat"])


def _csv_line(row: dict[str, Any]) -> str:
    buffer = io.StringIO()
    csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n").writerow(
        {column: row.get(column, "") for column in COLUMNS})
    return buffer.getvalue()


def header_line() -> str:
    return ",".join(COLUMNS) + "\n"


class ResultsWriter:
    """Appends rows to ``results.csv`` as they arrive, durably (flush + fsync per row)."""

    def __init__(self, folder: str | os.PathLike[str], *, resume: bool = False):
        self.path = Path(folder) / RESULTS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict[str, Any]] = read_results(self.path) if resume and self.path.exists() else []
        # Rewrite what we keep, so a torn last line from a crash does not stay in the file.
        atomic_write_text(self.path, header_line() + "".join(_csv_line(row) for row in self.rows))
        self._stream = open(self.path, "a", encoding="utf-8", newline="")

    @property
    def done_keys(self) -> set[tuple[str, str, str, str, str]]:
        return {row_key(row) for row in self.rows}

    def append(self, row: dict[str, Any]) -> None:
        try:
            self._stream.write(_csv_line(row))
            self._stream.flush()
            os.fsync(self._stream.fileno())
        except OSError as error:  # a full disk, `ulimit -f`: say which file, keep what is there
            from fleetplan.instances.outputs import failed_write

            with contextlib.suppress(OSError):  # the row still buffered cannot be written either
                self._stream.close()
            raise failed_write(self.path, error, f"the {len(self.rows)} rows before are kept (--resume "
                                                 "finishes the sweep)") from None
        self.rows.append(row)

    def close(self) -> None:
        if not self._stream.closed:
            self._stream.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def table_version(fieldnames: Iterable[str], first_row: dict[str, Any] | None, source: str) -> int:
    """The format version of a table, from its version column or (older tables) its columns."""
    names = set(fieldnames)
    if "format_version" in names:
        text = (first_row or {}).get("format_version") or str(FORMAT_VERSION)
        try:
            version = int(text)
        except ValueError:
            raise InstanceError("format_version", f"not a version number: {text!r}", source) from None
        if version > FORMAT_VERSION:
            raise InstanceError("format_version", f"table written in format {version} by a newer fleetplan; "
                                                  f"this one reads formats 1 to {FORMAT_VERSION}", source)
        return version
    missing = [column for column in V1_COLUMNS if column not in names]
    if missing:
        raise InstanceError(missing[0], "column missing: this is not a fleetplan results table", source)
    return 2 if "stats" in names else 1


def migrate_row(row: dict[str, Any], version: int) -> dict[str, Any]:
    """A row of a table in format ``version`` as a row of the current format."""
    out = dict(row)
    for step in range(version + 1, FORMAT_VERSION + 1):
        for column, value in _ADDED.get(step, {}).items():
            out.setdefault(column, value)
    out["format_version"] = str(FORMAT_VERSION)
    return {column: out.get(column, "") if out.get(column) is not None else "" for column in COLUMNS}


def read_results(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a results table of any format version (older ones are migrated to the current
    columns), dropping a torn last line; raise InstanceError if it is not one."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InstanceError("", "no results table here (run `fleetplan bench SUITE -o DIR` first)", str(path)) from None
    except (OSError, UnicodeDecodeError) as error:
        raise InstanceError("", f"cannot read the results table: {error}", str(path)) from None
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    reader = csv.DictReader(io.StringIO(text))
    raw = []
    try:
        fieldnames = list(reader.fieldnames or [])
        for line, row in enumerate(reader, start=2):
            if None in row or any(value is None for value in row.values()):
                raise InstanceError(f"line {line}", "wrong number of fields", str(path))
            raw.append(row)
    except csv.Error as error:  # a field over csv's 131,072-character limit, a stray quote
        raise InstanceError(f"line {reader.line_num + 1}", f"not a results table row ({error})", str(path)) from None
    version = table_version(fieldnames, raw[0] if raw else None, str(path))
    return [migrate_row(row, version) for row in raw]


def row_failed(row: dict[str, Any]) -> bool:
    """A run that ended without a plan (or a simulation that did not finish) is a failure,
    whatever its status says: ``time_limit`` with no objective, ``infeasible``, ``error``."""
    status = str(row.get("status", ""))
    if status == "error":
        return True
    if status == SIM_STATUS:
        return False
    return status not in SOLVED or as_float(row.get("objective")) is None


def as_float(value: Any) -> float | None:
    """A table value as a float, or None when empty or not finite."""
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def comparable_id(row: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """Rows whose objectives can be compared: same generated instance (kind, instance, seed),
    scored by the same objective in the same sense."""
    return (str(row["kind"]), str(row["instance"]), str(row["seed"]), str(row["objective_name"]),
            str(row["sense"]))


def finalize(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fill ``best_bound``, ``gap`` and ``gap_reference`` for every row (returns new rows)."""
    rows = [dict(row) for row in rows]
    by_objective: dict[tuple[str, str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        row["best_bound"] = row["gap"] = row["gap_reference"] = ""
        if row["sense"] in ("min", "max"):
            by_objective[comparable_id(row)].append(row)
    for group in by_objective.values():
        sense = group[0]["sense"]
        solved = [row for row in group if row["status"] in SOLVED and as_float(row["objective"]) is not None]
        ordered = exact_order(str(group[0]["kind"]))
        if ordered is not None and _rank_exactly(ordered, solved):
            continue
        bounds = [as_float(row["bound"]) for row in solved if as_float(row["bound"]) is not None]
        feasible = [as_float(row["objective"]) for row in solved if str(row["violations"]) in ("0", "0.0")]
        if bounds:
            # For a maximization every proven bound is an upper bound: the tightest is the lowest.
            reference = min(bounds) if sense == "max" else max(bounds)
            label = "bound"
        elif feasible:
            reference = max(feasible) if sense == "max" else min(feasible)
            label = "best_objective"
        else:
            continue
        for row in solved:
            objective = as_float(row["objective"])
            assert objective is not None
            signed = (reference - objective) if sense == "max" else (objective - reference)
            gap = signed / max(abs(objective), 1e-9)
            if gap < 0:
                if label == "bound" and gap < -BOUND_TOLERANCE:
                    row["message"] = _append(row["message"], f"objective beats the best bound by {-gap:.3g} (relative)")
                gap = 0.0
            row["best_bound"] = reference
            row["gap"] = gap
            row["gap_reference"] = label
    return rows


def exact_order(kind: str) -> Any:
    """The registration of ``kind`` when its float objective encodes a lexicographic order it
    cannot always hold (binpack's RMS score loses the youth tie-break from ~31 waiting
    workloads), so its plans are ranked by the exact key (``ProblemKind.order_key``) computed
    from the row's metrics; None for any other kind (and for a simulator's rows)."""
    from fleetplan.instances import KINDS

    return KINDS[kind] if kind in KINDS and KINDS[kind].order_key is not None else None


def _rank_exactly(kind: Any, solved: list[dict[str, Any]]) -> bool:
    """Rows of an exactly ordered kind: gap 0 for the plans equal to the best in the exact order
    (``gap_reference`` ``exact_order``), no gap for the others (a lexicographic order has no
    relative distance; the message names the first component where they fall behind). False
    when a row lacks the metrics (tables written before they were recorded)."""
    import json

    keys = []
    for row in solved:
        try:
            keys.append(kind.order_key(json.loads(row.get("metrics") or "{}")))
        except (KeyError, TypeError, ValueError):
            return False
    feasible = [key for key, row in zip(keys, solved, strict=True) if str(row["violations"]) in ("0", "0.0")]
    if not feasible:
        return True
    best = min(feasible)
    best_objective = min(as_float(row["objective"]) for key, row in zip(keys, solved, strict=True) if key == best)
    for key, row in zip(keys, solved, strict=True):
        row["best_bound"] = best_objective
        row["gap_reference"] = "exact_order"
        if key == best:
            row["gap"] = 0.0
        else:
            row["message"] = _append(row["message"], "behind the best plan in the exact order: "
                                     + kind.order_difference(best, key)[0])
    return True


def _append(message: str, note: str) -> str:
    return f"{message}; {note}" if message else note


def sort_rows(rows: Iterable[dict[str, Any]], cells: list[Cell] | None = None) -> list[dict[str, Any]]:
    """Rows in cell order when the cells are known, else by their identifying columns."""
    rows = list(rows)
    if cells is not None:
        order = {cell.key: cell.order for cell in cells}
        return sorted(rows, key=lambda row: (order.get(row_key(row), len(order)), row_key(row)))
    return sorted(rows, key=lambda row: (row["group"], row["instance"], _int(row["seed"]), row["label"], _int(row["repeat"])))


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def write_results(folder: str | os.PathLike[str], rows: Iterable[dict[str, Any]]) -> Path:
    """Write a complete table atomically."""
    path = Path(folder) / RESULTS_FILE
    atomic_write_text(path, header_line() + "".join(_csv_line(row) for row in rows))
    return path
