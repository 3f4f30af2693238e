"""The benchmark report's figures (``fleetplan bench report``): a Dolan-Moré performance
profile, time to target and scaling curves per group and objective.

Every figure is titled with its group and objective (ten figures of one report titled alike
said nothing), none is drawn below :data:`MIN_PROFILE_PROBLEMS` problems or for a single
solver (a table says it better), every time axis of a report shares one range
(:func:`time_range`), and a solver keeps one colour and marker across the report.

matplotlib's object API on the Agg canvas: rendering a report never touches pyplot's global
state (or a display).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.instances.outputs import save_figure
from fleetplan.lazy import lazy_attribute
from fleetplan.plotting.style import PALETTE

# matplotlib loads when a report is drawn, not when `fleetplan --help` builds its parser.
FigureCanvasAgg = lazy_attribute("matplotlib.backends.backend_agg", "FigureCanvasAgg")
Figure = lazy_attribute("matplotlib.figure", "Figure")

FIGURE_SIZE = (7.5, 4.0)
DPI = 150
FONT_SIZE = 10
# A performance profile (or time-to-target curve) needs a few problems to say anything; below
# this a table is clearer.
MIN_PROFILE_PROBLEMS = 3
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p")


@dataclass(frozen=True)
class TimeRange:
    """The wall-time axis every time figure of one report uses (seconds, log scale)."""

    low: float
    high: float


Style = dict[str, tuple[Any, str]]


def solver_styles(labels: Sequence[str]) -> Style:
    """One colour and one marker per solver label for the whole report, so a solver looks the
    same in every figure whichever solvers a figure happens to show."""
    ordered = sorted(set(labels))
    # The plotting palette's eight colours with the 12 markers: 24 distinct pairs.
    return {label: (PALETTE[index % len(PALETTE)], MARKERS[index % len(MARKERS)])
            for index, label in enumerate(ordered)}


def _figure() -> tuple[Figure, Any]:
    figure = Figure(figsize=FIGURE_SIZE, layout="constrained")
    axes = figure.add_subplot()
    axes.tick_params(labelsize=FONT_SIZE)
    return figure, axes


def _finish(figure: Figure, axes: Any, title: str, xlabel: str, ylabel: str,
            note: str = "") -> None:
    # Across the figure (the legend sits outside the axes): a long group name is never cut.
    figure.suptitle(title, fontsize=FONT_SIZE + 1)
    axes.set_xlabel(xlabel, fontsize=FONT_SIZE)
    axes.set_ylabel(ylabel, fontsize=FONT_SIZE)
    axes.grid(True, which="major", alpha=0.35)
    axes.grid(True, which="minor", alpha=0.12)
    if axes.get_legend_handles_labels()[0]:
        # Outside the axes, so it never covers a line.
        axes.legend(fontsize=FONT_SIZE - 1, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                    borderaxespad=0.0, frameon=False)
    if note:
        figure.supxlabel(note, fontsize=FONT_SIZE - 1, color="0.3")


def _log_axis(axis: Any, ticks: Sequence[float] | None = None) -> None:
    """Readable labels on a log axis: ``ticks`` (the measured sizes) when given, else round
    values (1, 2, 5 x 10^k, and 1.5, 3 in short ranges) inside the drawn range; the ones that
    would crowd each other are left unlabelled."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    if ticks is None:
        low, high = sorted(axis.get_view_interval())
        shown = _spaced(_round_ticks(max(low, 1e-12), high), min_ratio=1.3, keep_last=False)
        if len(shown) < 3:  # a narrow range: finer round numbers, still apart
            shown = _spaced(_round_ticks(max(low, 1e-12), high, fine=True), min_ratio=1.1, keep_last=False)
        if len(shown) < 3:  # narrower still: evenly spaced round numbers, as on a linear axis
            from matplotlib.ticker import MaxNLocator

            shown = [float(t) for t in MaxNLocator(4, steps=[1, 2, 2.5, 5, 10]).tick_values(low, high)
                     if low <= t <= high]
    else:
        shown = _spaced(sorted(ticks))
    axis.set_major_locator(FixedLocator(shown))
    axis.set_major_formatter(FuncFormatter(lambda value, _: _size_label(value)))
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


def _round_ticks(low: float, high: float, fine: bool = False) -> list[float]:
    """Round numbers in [low, high]: powers of ten over wide ranges, 1-2-5 per decade over
    medium ones, and 1.5, 3, 7 added in short ranges."""
    span = high / low
    mantissas = (1.0,) if span > 1000 else (1.0, 2.0, 5.0) if span > 10 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    if fine:
        mantissas = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
    ticks = [m * 10.0 ** k for k in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
             for m in mantissas]
    inside = [t for t in ticks if low * (1 - 1e-9) <= t <= high * (1 + 1e-9)]
    return inside or [low, high]


def _spaced(ticks: Sequence[float], min_ratio: float = 1.6, keep_last: bool = True) -> list[float]:
    """Ticks to label, skipping any closer than ``min_ratio`` (log spacing) to the last one kept,
    so labels never overlap; with ``keep_last`` the largest (measured size) is always kept."""
    kept: list[float] = []
    for tick in ticks:
        if not kept or tick / kept[-1] >= min_ratio:
            kept.append(tick)
    if keep_last and ticks and kept[-1] != ticks[-1]:
        kept[-1] = ticks[-1]
    return kept


def _size_label(value: float) -> str:
    if float(value).is_integer() and abs(value) < 1e7:
        return f"{int(value):,}"
    return f"{value:.3g}"


def _save(figure: Figure, path: Path) -> None:
    FigureCanvasAgg(figure)
    save_figure(figure, path, dpi=DPI)


def _change_points(values: np.ndarray) -> list[int]:
    """Indices where a step curve changes (markers there, not on every grid point)."""
    if len(values) == 0:
        return []
    return [0, *[int(i) for i in np.flatnonzero(np.diff(values)) + 1]]


def plot_profile(taus: np.ndarray, profile: dict[str, np.ndarray], problems: int, path: Path, target_gap: float,
                 context: str, styles: Style | None = None) -> bool:
    """Dolan-Moré profile (``profile[label]``: rho at each tau) of ``problems`` problems;
    nothing below :data:`MIN_PROFILE_PROBLEMS` problems or for fewer than two solvers that
    reach the target. ``context`` (group and objective) leads the title."""
    labels = sorted(profile)
    if len(labels) < 2 or problems < MIN_PROFILE_PROBLEMS:
        return False
    styles = styles or solver_styles(labels)
    never = [label for label in labels if not np.any(profile[label] > 0)]
    if len(labels) - len(never) < 2:
        return False  # one solver alone at 1.0 compares nothing (the table says who reached it)
    figure, axes = _figure()
    for label in labels:
        if label in never:
            continue  # all at 0: drawn, they would hide each other; named below instead
        colour, marker = styles[label]
        axes.step(taus, profile[label], where="post", label=label, color=colour, marker=marker,
                  markevery=_change_points(profile[label]), markersize=5, linewidth=1.6)
    axes.set_xscale("log")
    axes.set_xlim(1.0, taus[-1])
    _log_axis(axes.xaxis)
    axes.set_ylim(-0.02, 1.02)
    _finish(figure, axes, f"{context}\nperformance profile ({problems} problems, gap <= {target_gap:g})",
            "time ratio to the fastest solver (tau)", "fraction of problems",
            f"never at target: {', '.join(never)}" if never else "")
    _save(figure, path)
    return True


def plot_time_to_target(curves: dict[str, tuple[np.ndarray, np.ndarray]], problems: int, path: Path,
                        target_gap: float, context: str, styles: Style | None = None,
                        span: TimeRange | None = None) -> bool:
    """Fraction of runs at target by wall time, per solver (``curves[label]``: sorted times and
    the fraction reached by each); nothing below :data:`MIN_PROFILE_PROBLEMS` problems or for a
    single solver; the x axis is ``span``, the report's one time range."""
    if problems < MIN_PROFILE_PROBLEMS or len(curves) < 2 or not any(len(times) for times, _ in curves.values()):
        return False
    styles = styles or solver_styles(list(curves))
    figure, axes = _figure()
    never = [label for label, (times, _) in curves.items() if not len(times)]
    # Every curve runs on to the end of the axis, so its final level stays visible.
    end = span.high if span is not None else max(float(times[-1]) for times, _ in curves.values() if len(times)) * 1.5
    for label, (times, fractions) in curves.items():
        if len(times):
            colour, marker = styles[label]
            axes.step(np.concatenate([[times[0]], times, [end]]),
                      np.concatenate([[0.0], fractions, [fractions[-1]]]),
                      where="post", label=label, color=colour, marker=marker, markersize=4,
                      markevery=list(range(1, len(times) + 1)), linewidth=1.6)
    axes.set_xscale("log")
    if span is not None:
        axes.set_xlim(span.low, span.high)
    _log_axis(axes.xaxis)
    axes.set_ylim(-0.02, 1.02)
    _finish(figure, axes, f"{context}\ntime to target (gap <= {target_gap:g})",
            "wall time (s)", "fraction of runs at target",
            "time axis: one range for the whole report"
            + (f"; never at target: {', '.join(never)}" if never else ""))
    _save(figure, path)
    return True


def plot_scaling(curves: Sequence[Any], parameter: str, path: Path, context: str, min_slope_sizes: int,
                 styles: Style | None = None, span: TimeRange | None = None) -> bool:
    """Median time against ``parameter`` on log-log axes, the fitted slope in the legend
    (``curves``: label, sizes, median_s, slope); the y axis is ``span``."""
    if not any(len(curve.sizes) >= 2 for curve in curves):
        return False
    styles = styles or solver_styles([curve.label for curve in curves])
    figure, axes = _figure()
    for curve in curves:
        colour, marker = styles[curve.label]
        slope = f" (slope {curve.slope:.2f})" if curve.slope is not None else ""
        axes.loglog(curve.sizes, curve.median_s, marker=marker, color=colour, markersize=6,
                    linewidth=1.6, label=f"{curve.label}{slope}")
    sizes = sorted({float(size) for curve in curves for size in curve.sizes})
    axes.set_xlim(sizes[0] / 1.3, sizes[-1] * 1.3)
    if span is not None:
        axes.set_ylim(span.low, span.high)
    _log_axis(axes.xaxis, sizes)
    _log_axis(axes.yaxis)
    _finish(figure, axes, f"{context}\nmedian time vs {parameter}", parameter,
            "median wall time (s)",
            f"slopes fitted on log-log axes from {min_slope_sizes} sizes or more; "
            "time axes: one range for the whole report")
    _save(figure, path)
    return True


__all__ = ["DPI", "MIN_PROFILE_PROBLEMS", "Style", "TimeRange", "plot_profile", "plot_scaling", "plot_time_to_target",
           "solver_styles"]
