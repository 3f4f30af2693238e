"""Cell-level machinery for tables, below the kinds' readers and writers: how one CSV/Parquet
file or DataFrame is read cell by cell and written atomically. Users call the entry points of
:mod:`fleetplan.instances.frames` (``fleetplan.from_frames``, ``fleetplan.to_frame``); the
kinds' modules (:mod:`fleetplan.instances.allocation.frames`,
:mod:`fleetplan.instances.placement.frames`) build on what is here:

* :func:`read_table` takes a :class:`pandas.DataFrame` or the path of a ``.csv`` or ``.parquet``
  file and returns a :class:`Table` whose cells are converted one by one (``float``, ``int``,
  ``bool``, ``str``; an empty cell is "not given"), so a bad value is reported as one line naming
  the file, the row and the column — ``jobs.csv: row 3 (line 4), column 'scale_factor': must be
  an integer, got 'two'`` — through :class:`~fleetplan.instances.base.InstanceError`;
* :func:`write_table` writes a frame as CSV or Parquet atomically (a temporary file and a rename);
* :func:`relabel` turns an instance's validation error into one at a table cell.

The entry points that dispatch on the kind (:func:`~fleetplan.instances.frames.plan_to_frame`,
...) are in :mod:`fleetplan.instances.frames`.

pandas and pyarrow load inside the functions that use them (importing fleetplan stays fast).
The column layouts are documented in ``docs/data-in-out.md``.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from fleetplan.errors import excerpt
from fleetplan.instances.base import MAX_INTEGER, InstanceError, read_json_file
from fleetplan.instances.outputs import atomic_write

if TYPE_CHECKING:  # pragma: no cover - typing only
    import pandas as pd


TableSource = "pd.DataFrame | str | os.PathLike[str]"
Format = Literal["csv", "parquet"]
PARQUET_SUFFIXES = (".parquet", ".pq")
CSV_SUFFIXES = (".csv",)


class CellError(ValueError):
    """A cell that cannot be converted; :class:`Table` adds the file, row and column."""


def table_format(path: str | os.PathLike[str], given: str | None = None) -> Format:
    """``csv`` or ``parquet``: ``given`` if set, else from the file's suffix (``.csv``,
    ``.parquet`` or ``.pq``; any other suffix, or none, is refused: a ``.txt`` or ``.xlsx``
    file was read as CSV)."""
    if given is not None:
        if given not in ("csv", "parquet"):
            raise InstanceError("--format", f"unknown table format '{given}' (known: csv, parquet)")
        return given  # type: ignore[return-value]
    suffix = Path(path).suffix.lower()
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix in CSV_SUFFIXES:
        return "csv"
    raise InstanceError("", f"unknown table type '{suffix or '(no suffix)'}' (known: "
                            f"{', '.join(CSV_SUFFIXES + PARQUET_SUFFIXES)})", str(path))


# --- cells --------------------------------------------------------------------------------

def is_missing(value: Any) -> bool:
    """Empty CSV cells, None and NaN (Parquet nulls) mean "not given"."""
    if value is None:
        return True
    if isinstance(value, str):
        return value.strip() == ""
    if isinstance(value, (float, np.floating)):
        return math.isnan(float(value))
    return type(value).__name__ in ("NAType", "NaTType")  # pandas' NA and NaT


def to_float(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)):
        raise CellError(f"must be a number, got {value!r}")
    if isinstance(value, (int, float, np.integer, np.floating)):
        number = float(value)
    else:
        text = str(value).strip()
        try:
            number = float(text)
        except ValueError:
            raise CellError(f"must be a number, got '{text}'") from None
    if not math.isfinite(number):
        raise CellError("must be a finite number (NaN and infinity are not allowed)")
    return number


def to_int(value: Any) -> int:
    return _in_range(_to_int(value))


def _in_range(number: int) -> int:
    # The range instance files hold (fleetplan.instances.base.MAX_INTEGER): an import that
    # wrote 2^63 made a file `solve` then refused.
    if not -MAX_INTEGER <= number <= MAX_INTEGER:
        raise CellError(f"{excerpt(number)} is out of range (fleetplan holds 64-bit integers, |n| < 2^63)")
    return number


def _to_int(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise CellError(f"must be an integer, got {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if math.isfinite(value) and float(value).is_integer():
            return int(value)
        raise CellError(f"must be an integer, got {value!r}")
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if math.isfinite(number) and number.is_integer():
            return int(number)
        raise CellError(f"must be an integer, got '{excerpt(text)}'") from None


_TRUE = {"true", "yes", "1", "y", "t"}
_FALSE = {"false", "no", "0", "n", "f"}


def to_bool(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise CellError(f"must be true or false, got '{value}'")


def to_str(value: Any) -> str:
    if isinstance(value, (float, np.floating, int, np.integer, bool, np.bool_)):
        raise CellError(f"must be text, got {value!r}")
    return str(value).strip()


def to_id_list(value: Any, separator: str = ";") -> list[str]:
    """``'t1;t2'`` (CSV) or a list of ids (Parquet list column) -> ``['t1', 't2']``."""
    if isinstance(value, (list, tuple, np.ndarray)):
        parts = [to_str(item) for item in value]
    else:
        parts = [part.strip() for part in to_str(value).split(separator)]
    if any(not part for part in parts):
        raise CellError(f"empty id in the list '{value}' (ids are separated by '{separator}')")
    return parts


CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "float": to_float, "int": to_int, "bool": to_bool, "str": to_str, "ids": to_id_list,
}


# --- reading ------------------------------------------------------------------------------

@dataclass
class Table:
    """A table read from a frame or a file, with the labels its error messages need."""

    frame: pd.DataFrame
    source: str  # the file name, or the argument name for a DataFrame
    line_offset: int | None  # CSV: line of data row 0 (2 after the header); None for others
    columns: list[str] = field(default_factory=list)
    typed: bool = False  # a Parquet file: its columns' types are the file's, not parsed from text

    def __len__(self) -> int:
        return len(self.frame)

    def where(self, row: int | None = None, column: str | None = None) -> str:
        """``row 3 (line 4), column 'weight'`` for 0-based data row 2."""
        parts = []
        if row is not None:
            text = f"row {row + 1}"
            if self.line_offset is not None:
                text += f" (line {row + self.line_offset})"
            parts.append(text)
        if column is not None:
            parts.append(f"column '{column}'")
        return ", ".join(parts)

    def error(self, reason: str, row: int | None = None, column: str | None = None) -> InstanceError:
        return InstanceError(self.where(row, column), reason, self.source)

    def require(self, names: Iterable[str]) -> None:
        for name in names:
            if name not in self.columns:
                raise self.error(f"required column is missing (columns: {', '.join(self.columns) or 'none'})",
                                 column=name)

    def check_columns(self, known: Sequence[str], prefixes: Sequence[str] = (), hint: str = "") -> None:
        """Every column is a known name or starts with one of ``prefixes``."""
        for name in self.columns:
            if name in known or any(name.startswith(p) and len(name) > len(p) for p in prefixes):
                continue
            allowed = ", ".join([*known, *(f"{p}<name>" for p in prefixes)])
            raise self.error(f"unknown column (known: {allowed}){hint}", column=name)

    def values(self, column: str, kind: str, *, default: Any = None, required: bool = False) -> list[Any]:
        """The converted cells of ``column``; a missing cell is ``default`` (or an error)."""
        convert = CONVERTERS[kind]
        if column not in self.columns:
            if required:
                self.require([column])
            return [default] * len(self)
        raw = self.frame[column].tolist()
        if self.typed and kind in ("int", "float", "bool"):
            # A Parquet file says what a column is: text where numbers or booleans belong is
            # refused, not parsed (a `count` column of strings was read as numbers).
            # CSV cells, and DataFrames made from text, are parsed.
            for row, value in enumerate(raw):
                if isinstance(value, str) and not is_missing(value):
                    raise self.error(f"must be {'a number' if kind != 'bool' else 'true or false'}, got the "
                                     f"text {excerpt(value)} (the column holds strings)", row, column)
        fast = _fast_values(raw, kind, default, required)
        if fast is not None:
            return fast
        out = []
        for row, value in enumerate(raw):
            if is_missing(value):
                if required:
                    raise self.error("a value is required", row, column)
                out.append(default)
                continue
            try:
                out.append(convert(value))
            except CellError as error:
                raise self.error(str(error), row, column) from None
        return out


def _fast_values(raw: list[Any], kind: str, default: Any, required: bool) -> list[Any] | None:
    """The common cases of :meth:`Table.values` without a function call per cell (a million-row
    table converts in about a second, not twenty); None when any cell needs the careful path,
    which then finds the first bad cell and names it."""
    try:
        if kind == "str":
            if not all(type(v) is str or v is None for v in raw):
                return None
            out = [v.strip() if v is not None else "" for v in raw]
            if "" in out:
                if required:
                    return None
                out = [v if v else default for v in out]
            return out
        if kind == "ids":
            if not all(type(v) is str for v in raw):
                return None
            lists = [[part.strip() for part in v.split(";")] for v in raw]
            return None if any("" in parts for parts in lists) else lists
        if kind == "float":
            if all(type(v) is float or type(v) is int for v in raw):  # Parquet, DataFrame
                numbers = raw
            elif all(type(v) is str for v in raw):
                numbers = [float(v) if v.strip() else math.nan for v in raw]
            else:
                return None
            values = np.asarray(numbers, dtype=float)
            missing = np.isnan(values)
            if np.isinf(values).any() or (required and missing.any()):
                return None
            # "nan" written in a CSV cell is not a missing cell: let the careful path refuse it.
            if missing.any() and any(type(v) is str and v.strip() for v, m in zip(raw, missing, strict=True) if m):
                return None
            return [default if m else v for v, m in zip(values.tolist(), missing.tolist(), strict=True)]
        if kind == "int":
            if all(type(v) is int for v in raw):
                numbers = raw
            elif all(type(v) is str for v in raw) and all(v.strip() for v in raw):
                numbers = [int(v) for v in raw]
            else:
                return None
            return numbers if all(-MAX_INTEGER <= v <= MAX_INTEGER for v in numbers) else None
        if kind == "bool":
            if all(type(v) is bool for v in raw):
                return raw
            if all(type(v) is str for v in raw):
                lowered = [v.strip().lower() for v in raw]
                if all(v in _TRUE or v in _FALSE for v in lowered):
                    return [v in _TRUE for v in lowered]
                if not required and all(v in _TRUE or v in _FALSE or not v for v in lowered):
                    return [default if not v else v in _TRUE for v in lowered]
            return None
    except (ValueError, TypeError, OverflowError):
        return None
    return None


def read_table(source: Any, name: str) -> Table:
    """A DataFrame, or a ``.csv`` / ``.parquet`` file (by suffix), as a :class:`Table`.

    CSV cells are read as text and converted per column by the caller, so ``007`` stays an id
    and a float keeps every digit; ``name`` labels a DataFrame in error messages.
    """
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        frame = source.reset_index(drop=True)
        table = Table(frame, name, None)
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        label = str(source)
        if not path.exists():
            raise InstanceError("", "file not found", label)
        if path.is_dir():
            raise InstanceError("", "is a directory, expected a CSV or Parquet file", label)
        if table_format(path) == "parquet":
            try:
                frame = pd.read_parquet(path)
            except Exception as error:  # noqa: BLE001 - pyarrow raises many types for a bad file
                raise InstanceError("", f"cannot read Parquet file: {error}", label) from None
            table = Table(frame.reset_index(drop=True), label, None, typed=True)
        else:
            table = Table(_read_csv(path, label), label, 2)
    else:
        raise InstanceError(name, f"expected a pandas DataFrame or a file path, got {type(source).__name__}")
    table.columns = [str(c) for c in table.frame.columns]
    seen: set[str] = set()
    for column in table.columns:
        if column in seen:
            raise table.error("appears twice in the header", column=column)
        seen.add(column)
    return table


def _read_csv(path: Path, label: str) -> pd.DataFrame:
    import pandas as pd

    try:
        with open(path, encoding="utf-8-sig", newline="") as stream:
            header = next(csv.reader(stream), None)
    except (OSError, UnicodeDecodeError) as error:
        raise InstanceError("", f"cannot read file: {error}", label) from None
    except csv.Error as error:
        raise InstanceError("line 1", f"malformed CSV: {error}", label) from None
    if not header:
        raise InstanceError("", "empty file (expected a header line naming the columns)", label)
    names = [h.strip() for h in header]
    for position, name in enumerate(names):
        if not name:
            raise InstanceError(f"line 1, column {position + 1}", "empty column name in the header", label)
        if names.index(name) != position:
            raise InstanceError(f"line 1, column '{name}'", "appears twice in the header", label)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False,
                            encoding="utf-8-sig", skipinitialspace=True)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as error:
        raise InstanceError("", f"malformed CSV: {error}".splitlines()[0], label) from None
    frame.columns = names
    return frame


# --- settings (a kind's scalar fields beside its tables) ------------------------------------

def _yaml_loader() -> Any:
    """PyYAML's safe loader reading ``2e12`` and ``2.0e12`` as numbers, as YAML 1.2 and JSON do
    (YAML 1.1 wants ``2.0e+12``; a byte count written as 2e12 would otherwise be a string)."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
        list("-+0123456789."))
    return Loader


def read_settings(settings: Any, known: Sequence[str], from_tables: Sequence[str] = ()) -> tuple[dict[str, Any], str]:
    """A kind's scalar settings: ``settings`` a dict, a YAML or JSON file, or None; each key one of
    ``known`` (a key in ``from_tables`` is told it comes from the tables). Returns the settings
    and the label its errors name."""
    if settings is None:
        return {}, "settings"
    if isinstance(settings, (str, os.PathLike)):
        label = str(settings)
        if Path(settings).suffix.lower() in (".yaml", ".yml"):
            import yaml

            try:
                data = yaml.load(Path(settings).read_text(encoding="utf-8"), Loader=_yaml_loader())
            except FileNotFoundError:
                raise InstanceError("", "file not found", label) from None
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
                raise InstanceError("", f"cannot read YAML: {str(error).splitlines()[0]}", label) from None
        else:
            data = read_json_file(settings)
        settings = {} if data is None else data
    else:
        label = "settings"
    if not isinstance(settings, dict):
        raise InstanceError("$", "expected a mapping of setting names to values", label)
    for key in settings:
        if key not in known:
            where = " (it comes from the tables)" if key in from_tables else ""
            raise InstanceError(str(key), f"unknown setting{where} (known: {', '.join(known)})", label)
    return dict(settings), label


# --- writing ------------------------------------------------------------------------------

def write_table(frame: pd.DataFrame, path: str | os.PathLike[str], format: str | None = None) -> Path:
    """Write ``frame`` as CSV or Parquet (``format``, else the suffix of ``path``), atomically.

    ``frame.attrs`` (plan metadata: kind, solver, options) survive in Parquet files.
    """
    target = Path(path)
    kind = table_format(target, format)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise InstanceError("-o", f"directory '{directory}' does not exist")
    if target.is_dir():
        raise InstanceError("-o", f"{target} is a directory")
    def write(temporary: str) -> None:
        if kind == "parquet":
            frame.to_parquet(temporary, index=False)
        else:
            frame.to_csv(temporary, index=False)

    return atomic_write(target, write)


def join_ids(ids: Sequence[str], what: str, separator: str = ";") -> str:
    """``['t1', 't2']`` -> ``'t1;t2'``; refuses ids that would not read back the same."""
    for value in ids:
        if separator in value or value != value.strip():
            raise InstanceError(what, f"id '{value}' cannot be written in a '{separator}'-separated "
                                      "list (it contains the separator or surrounding spaces)")
    return separator.join(ids)


def optional_column(values: Sequence[Any]) -> list[Any]:
    """A column for a frame: None stays None (an empty cell)."""
    return [None if v is None else v for v in values]


def float_column(values: Sequence[float | None]) -> np.ndarray:
    """Floats with NaN where not given (an empty CSV cell, a Parquet null)."""
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


# --- errors from the instance's own validation, relabelled as table cells -----------------

Resolver = Callable[[str], "tuple[Table, int | None, str | None] | None"]


def relabel(error: InstanceError, resolve: Resolver) -> InstanceError:
    """Turn an error at a JSON path (``jobs[3].weight``) into one at a table cell, when
    ``resolve`` knows which table, row and column the path came from. Further errors the
    validation found (``error.more``) come along when they are in the same table."""
    found = resolve(error.path)
    if found is None:
        return error
    table, row, column = found
    more = []
    for path, reason in getattr(error, "more", ()):
        other = resolve(path)
        if other is not None and other[0] is table:
            more.append((table.where(other[1], other[2]), reason))
    first = table.error(error.reason, row, column)
    if not more:
        return first
    try:
        return InstanceError(first.path, first.reason, first.source, more=more)
    except TypeError:  # an InstanceError without `more` (older base): the first error alone
        return first


def split_path(path: str) -> tuple[str, int | None, str]:
    """``jobs[3].throughput.v100`` -> ``('jobs', 3, 'throughput.v100')``; ``tables.home[2]`` ->
    ``('tables', None, 'home[2]')``."""
    head, _, rest = path.partition(".")
    if "[" in head and head.endswith("]"):
        name, _, index = head[:-1].partition("[")
        if index.isdigit():
            return name, int(index), rest
    return head, None, rest
