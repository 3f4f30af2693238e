"""What the column-wise folder readers (:mod:`fleetplan.instances.placement.columnar`,
:mod:`fleetplan.instances.allocation.columnar`) share: reading one Parquet table whose columns are
known, and the signal that the fast path cannot decide a table (the row reader then reads it and
names any error by file, row and column)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleetplan.lazy import lazy_module

pa = lazy_module("pyarrow")
pq = lazy_module("pyarrow.parquet")


class Undecided(Exception):
    """The fast path cannot decide: ``from_frames`` reads the folder and names any error."""


def read_known(path: str | Path, known: set[str]) -> Any:
    """A Parquet table whose columns are all in ``known``, each named once, in one chunk per
    column; :class:`Undecided` otherwise (or when pyarrow cannot read it)."""
    try:
        # One file, read as it is (``read_table`` goes through pyarrow's dataset layer, which
        # imports pandas: a third of a second of a command's start).
        table = pq.ParquetFile(path).read()
    except Exception:  # noqa: BLE001 - pyarrow raises many types; from_frames names the problem
        raise Undecided from None
    names = table.column_names
    if len(set(names)) != len(names) or not set(names) <= known:
        raise Undecided
    return table.combine_chunks()


def one_chunk(column: Any) -> Any:
    """A column as one Arrow array."""
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
