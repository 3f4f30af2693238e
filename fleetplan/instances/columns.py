"""Checks shared by the column-wise kinds (placement, binpack, reservation): ids unique and
non-empty, references resolved to row numbers, columns of one table of equal length — each
failure an :class:`InstanceError` naming the JSON path of the first offending entry."""

from __future__ import annotations

import numpy as np

from fleetplan.instances.base import InstanceError


def id_index(values: list[str], path: str) -> dict[str, int]:
    """``{id: row}``; an empty or repeated id is an error at ``path[row]``."""
    index: dict[str, int] = {}
    for position, value in enumerate(values):
        if not value:
            raise InstanceError(f"{path}[{position}]", "must be a non-empty string")
        if value in index:
            raise InstanceError(f"{path}[{position}]", f"duplicate id '{value}'")
        index[value] = position
    return index


def lookup_ids(values: list[str], index: dict[str, int], path: str, what: str) -> np.ndarray:
    """The row numbers of ``values`` in ``index``; an unknown id is an error at ``path[i]``."""
    try:
        return np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values))
    except KeyError:
        position = next(i for i, v in enumerate(values) if v not in index)
        raise InstanceError(f"{path}[{position}]", f"unknown {what} '{values[position]}'") from None


def first_true(mask: np.ndarray) -> int:
    """Index of the first True entry (callers check there is one)."""
    return int(np.flatnonzero(mask)[0])


def check_same_length(columns: object, names: tuple[str, ...], count: int, path: str, what: str) -> None:
    """Every column ``names`` of ``columns`` has ``count`` entries (an optional column left out,
    None, is not checked)."""
    for name in names:
        column = getattr(columns, name)
        if column is not None and len(column) != count:
            raise InstanceError(f"{path}.{name}", f"has {len(column)} entries for {count} {what}")
