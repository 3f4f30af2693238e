"""The one style of fleetplan's pictures: matplotlib's object API on the Agg canvas (no pyplot,
so no global figure state and no display), constrained layout, one palette, light grids under
the data, units on every axis, a title that says what was drawn, saved through
:func:`fleetplan.instances.outputs.save_figure` (atomic, PNG/SVG/PDF by suffix) at one DPI.

matplotlib loads inside :func:`new_figure`, the first call of every drawing function.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from fleetplan.instances.outputs import save_figure

DPI = 120
# Paul Tol's "bright" qualitative palette (colour-blind safe), then greys.
PALETTE = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377", "#bbbbbb", "#000000")
# Markers and dashes that keep coinciding curves apart (cycled with the palette).
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DASHES = ("-", "--", "-.", ":")
# Priority levels 0 (highest) .. 6: dark red to pale blue.
PRIORITY_COLOURS = ("#67001f", "#b2182b", "#d6604d", "#f4a582", "#92c5de", "#4393c3", "#2166ac")
GRID_ALPHA = 0.3
TITLE_SIZE = 11
PANEL_TITLE_SIZE = 10
LEGEND_SIZE = 8


def new_figure(width: float, height: float, rows: int = 1, columns: int = 1, **subplots: Any) -> tuple[Any, Any]:
    """A constrained-layout figure and its axes (one axis, or an array of them)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.subplots(rows, columns, **subplots)


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def line_style(index: int) -> dict[str, Any]:
    """Colour, marker and dash of the ``index``-th curve: two curves that coincide still show."""
    return {"color": colour(index), "marker": MARKERS[index % len(MARKERS)],
            "linestyle": DASHES[(index // len(PALETTE)) % len(DASHES)]}


def grid(axis: Any, which: str = "both") -> None:
    axis.grid(axis=which, alpha=GRID_ALPHA)
    axis.set_axisbelow(True)


def title(figure: Any, text: str) -> None:
    figure.suptitle(text, fontsize=TITLE_SIZE)


def byte_unit(largest: float) -> tuple[float, str]:
    """The scale and name of the byte unit that suits ``largest``."""
    for scale, unit in ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB")):
        if largest >= scale:
            return scale, unit
    return 1.0, "bytes"


def save(figure: Any, path: str | os.PathLike[str] | None) -> Path | None:
    """Write ``figure`` to ``path`` (nothing when None); returns the path."""
    if path is None:
        return None
    return save_figure(figure, path, dpi=DPI)


__all__ = ["DPI", "PALETTE", "PRIORITY_COLOURS", "byte_unit", "colour", "grid", "line_style", "new_figure", "save",
           "title"]
