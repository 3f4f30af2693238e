"""``report.md`` and its PNGs, rendered from ``results.csv`` alone (``fleetplan bench report DIR``).

Per group of the suite: a table per solver (problems, failures, runs at the target gap, mean
and worst gap, median time and memory, wins), a Dolan-Moré performance profile, a
time-to-target plot and, when a numeric generator parameter is swept, scaling curves (median
time against size on log-log axes with the fitted slope). Then the medians of every
(instance, seed, solver). How the statistics are defined: :mod:`.profiles`.

Figures are drawn with matplotlib's object API on the Agg canvas, so rendering a report
never touches pyplot's global state (or a display).

>>> import tempfile
>>> from fleetplan.benchmarks.suite import parse_suite
>>> from fleetplan.benchmarks.sweep import run_sweep
>>> out = tempfile.mkdtemp()
>>> _ = run_sweep(parse_suite("name: t\\ngroups: [{kind: allocation, generator: {jobs: 4}}]"), out, progress=None)
>>> write_report(out).name
'report.md'
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.benchmarks import profiles
from fleetplan.benchmarks.cells import SIM_KIND
from fleetplan.benchmarks.markdown import fmt_value, markdown_table
from fleetplan.benchmarks.profiles import DEFAULT_TARGET_GAP, Run
from fleetplan.benchmarks.results import finalize, read_results, row_failed
from fleetplan.benchmarks.simcells import sim_section, sim_summary
from fleetplan.instances.outputs import atomic_write_text, save_figure
from fleetplan.lazy import lazy_attribute

# matplotlib loads when a report is drawn, not when `fleetplan --help` builds its parser.
FigureCanvasAgg = lazy_attribute("matplotlib.backends.backend_agg", "FigureCanvasAgg")
Figure = lazy_attribute("matplotlib.figure", "Figure")

REPORT_FILE = "report.md"
RUN_FILE = "run.json"
# Per-instance tables longer than this are cut (the CSV has everything).
MAX_INSTANCE_LINES = 120
FIGURE_SIZE = (7.5, 4.0)
DPI = 150
FONT_SIZE = 10
# A performance profile needs a few problems to say anything; below this a table is clearer.
MIN_PROFILE_PROBLEMS = 3
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h", "*", "p")
MEMORY_MEASURES = {
    "rss-increase": "the solve's own peak: resident memory above the child's baseline taken after "
                    "imports and instance generation (VmHWM reset before the solve)",
    "maxrss-increase": "the solve's own peak, from ru_maxrss above the baseline (a lower bound)",
    "rss-increase+imports": "the solve's own peak including the import of its back-end (fresh "
                            "interpreter per cell, as on Dask)",
    "maxrss-increase+imports": "the solve's own peak from ru_maxrss, including its back-end's import",
    "process-peak": "the child process's whole peak, interpreter and imports included (tables "
                    "written before format 3)",
}


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "group"


Style = dict[str, tuple[Any, str]]


def solver_styles(labels: Sequence[str]) -> Style:
    """One colour and one marker per solver label for the whole report, so a solver looks the
    same in every figure whichever solvers a figure happens to show."""
    from matplotlib import colormaps

    ordered = sorted(set(labels))
    palette = colormaps["tab10"]  # strong colours; with the 12 markers, 60 distinct pairs
    return {label: (palette(index % 10), MARKERS[index % len(MARKERS)]) for index, label in enumerate(ordered)}


def _figure() -> tuple[Figure, Any]:
    figure = Figure(figsize=FIGURE_SIZE, layout="constrained")
    axes = figure.add_subplot()
    axes.tick_params(labelsize=FONT_SIZE)
    return figure, axes


def _finish(figure: Figure, axes: Any, title: str, xlabel: str, ylabel: str,
            note: str = "") -> None:
    axes.set_title(title, fontsize=FONT_SIZE + 1)
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


def plot_profile(runs: Sequence[Run], path: Path, target_gap: float, styles: Style | None = None) -> bool:
    labels, ratios = profiles.profile_ratios(runs, target_gap)
    if len(labels) < 2 or ratios.shape[0] < MIN_PROFILE_PROBLEMS:
        return False
    styles = styles or solver_styles(labels)
    taus = profiles.profile_taus(ratios)
    profile = profiles.performance_profile(runs, taus, target_gap)
    figure, axes = _figure()
    never = [label for label in labels if not np.any(profile[label] > 0)]
    if len(labels) - len(never) < 2:
        return False  # one solver alone at 1.0 compares nothing (the table says who reached it)
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
    _finish(figure, axes, f"performance profile ({ratios.shape[0]} problems, gap <= {target_gap:g})",
            "time ratio to the fastest solver (tau)", "fraction of problems",
            f"never at target: {', '.join(never)}" if never else "")
    _save(figure, path)
    return True


def plot_time_to_target(rows: Sequence[dict[str, Any]], path: Path, target_gap: float,
                        styles: Style | None = None) -> bool:
    curves = profiles.time_to_target(rows, target_gap)
    if not any(len(times) for times, _ in curves.values()):
        return False
    styles = styles or solver_styles(list(curves))
    figure, axes = _figure()
    never = [label for label, (times, _) in curves.items() if not len(times)]
    # Every curve runs on to the last time any solver needed, so its final level stays visible.
    end = max(float(times[-1]) for times, _ in curves.values() if len(times)) * 1.5
    for label, (times, fractions) in curves.items():
        if len(times):
            colour, marker = styles[label]
            axes.step(np.concatenate([[times[0]], times, [end]]),
                      np.concatenate([[0.0], fractions, [fractions[-1]]]),
                      where="post", label=label, color=colour, marker=marker, markersize=4,
                      markevery=list(range(1, len(times) + 1)), linewidth=1.6)
    axes.set_xscale("log")
    _log_axis(axes.xaxis)
    axes.set_ylim(-0.02, 1.02)
    _finish(figure, axes, f"time to target (gap <= {target_gap:g})", "wall time (s)",
            "fraction of runs at target", f"never at target: {', '.join(never)}" if never else "")
    _save(figure, path)
    return True


def plot_scaling(curves: Sequence[profiles.ScalingCurve], parameter: str, path: Path,
                 styles: Style | None = None) -> bool:
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
    _log_axis(axes.xaxis, sizes)
    _log_axis(axes.yaxis)
    _finish(figure, axes, f"scaling: median time vs {parameter}", parameter, "median wall time (s)",
            f"slopes fitted on log-log axes from {profiles.MIN_SLOPE_SIZES} sizes or more")
    _save(figure, path)
    return True


def _run_section(folder: Path) -> list[str]:
    path = folder / RUN_FILE
    if not path.exists():
        return []
    try:
        sessions = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return []
    lines = ["## Runs", ""]
    for session in sessions if isinstance(sessions, list) else [sessions]:
        versions = ", ".join(f"{name} {version}" for name, version in session.get("versions", {}).items())
        lines.append(f"- `{session.get('command', '?')}` — executor {session.get('executor', '?')}"
                     f"{' at ' + session['address'] if session.get('address') else ''}, "
                     f"workers {session.get('workers', '?')}; machine {session.get('machine', '?')}; "
                     f"started {session.get('started', '?')}, {session.get('cells_run', '?')} cells run; "
                     f"{_git_text(session)}{versions}")
    return lines + [""]


def _git_text(session: dict[str, Any]) -> str:
    git = session.get("git")
    if not isinstance(git, dict):
        return ""
    return f"git {str(git.get('commit', '?'))[:12]}{' (uncommitted changes)' if git.get('dirty') else ''}; "


def memory_note(rows: Sequence[dict[str, Any]]) -> str:
    """What the memory column of these rows means (a table may mix formats after --resume)."""
    measures = sorted({str(row.get("mem_measure") or "") for row in rows if row.get("peak_mem_mb") not in ("", None)})
    if not measures:
        return ""
    return "Memory (`median MiB`): " + "; ".join(
        f"{MEMORY_MEASURES.get(measure, measure or 'unknown')} (`{measure or '?'}`)" for measure in measures) + "."


def _few_problems_table(runs: Sequence[Run], target_gap: float) -> list[str]:
    """Median seconds per (problem, solver) where a profile would have too few problems."""
    labels = profiles.labels_in_order(runs)
    problems = sorted({run.problem for run in runs})
    cell = {(run.problem, run.label): run for run in runs}

    def entry(problem: tuple[str, str, str, str], label: str) -> str:
        run = cell.get((problem, label))
        if run is None:
            return "-"
        return fmt_value(run.wall_s, 3) if run.reaches(target_gap) else f"missed ({run.status})"

    lines = [f"Too few problems for a performance profile ({len(problems)}); median seconds to "
             f"reach the target (gap <= {target_gap:g}):", ""]
    return lines + markdown_table(["instance", "seed", *labels],
                          [[p[1], p[2], *[entry(p, label) for label in labels]] for p in problems]) + [""]


def _section(folder: Path, slug: str, rows: list[dict[str, Any]], runs: list[Run],
             target_gap: float, plots: bool, styles: Style | None = None) -> list[str]:
    """Table, plots and per-problem lines of solvers scored by one objective."""
    lines = markdown_table(
        ["solver", "problems", "runs", "failed", "at target", "mean gap", "worst gap", "median s",
         "median MiB", "wins"],
        [[t["solver"], t["problems"], t["runs"], t["failed"], t["at_target"], t["mean_gap"],
          t["worst_gap"], t["median_s"], t["median_mem_mb"], t["wins"]]
         for t in profiles.solver_table(runs, target_gap)])
    lines.append("")
    several = len({run.label for run in runs}) > 1
    if several and len({run.problem for run in runs}) < MIN_PROFILE_PROBLEMS:
        lines += _few_problems_table(runs, target_gap)
    elif plots and plot_profile(runs, folder / f"{slug}-profile.png", target_gap, styles):
        lines += [f"![performance profile]({slug}-profile.png)", ""]
    if plots and several and plot_time_to_target(
            rows, folder / f"{slug}-time-to-target.png", target_gap, styles):
        lines += [f"![time to target]({slug}-time-to-target.png)", ""]
    parameter = profiles.size_parameter(runs)
    if parameter is not None:
        curves = profiles.scaling_curves(runs, parameter)
        if any(len(curve.sizes) >= 2 for curve in curves):
            if plots and plot_scaling(curves, parameter, folder / f"{slug}-scaling.png", styles):
                lines += [f"![scaling]({slug}-scaling.png)", ""]
            lines += markdown_table(["solver", f"sizes ({parameter})", "median s at each size",
                             f"fitted slope (>= {profiles.MIN_SLOPE_SIZES} sizes)"],
                            [[c.label, ", ".join(fmt_value(float(s)) for s in c.sizes),
                              ", ".join(fmt_value(float(t), 3) for t in c.median_s), c.slope] for c in curves])
            lines.append("")
    lines += ["Per problem (medians over repeats):", ""]
    shown = runs[:MAX_INSTANCE_LINES]
    lines += markdown_table(["instance", "seed", "solver", "status", "objective", "gap", "median s", "failed/runs"],
                    [[r.instance, r.seed, r.label, r.status, r.objective, r.gap, r.wall_s,
                      f"{r.failed}/{r.repeats}"] for r in shown])
    if len(runs) > len(shown):
        lines.append(f"\n({len(runs) - len(shown)} more lines in results.csv)")
    return lines + [""]


def summarize(folder: str | os.PathLike[str], target_gap: float = DEFAULT_TARGET_GAP) -> dict[str, Any]:
    """The report's tables as data (what ``fleetplan bench --json`` prints): per group, per
    objective, one line per solver; per simulation group, one line per scenario and scheduler."""
    folder = Path(folder)
    rows = finalize(read_results(folder))
    groups = []
    for group in dict.fromkeys(str(row["group"]) for row in rows):
        group_rows = [row for row in rows if row["group"] == group]
        entry: dict[str, Any] = {"group": group, "kind": group_rows[0]["kind"], "runs": len(group_rows),
                                 "failed": sum(row_failed(row) for row in group_rows)}
        if group_rows[0]["kind"] == SIM_KIND:
            entry["scenarios"] = sim_summary(group_rows)
        else:
            runs = profiles.median_runs(group_rows)
            entry["objectives"] = [
                {"objective": objective,
                 "sense": next((run.sense for run in runs if run.objective_name == objective), ""),
                 "solvers": profiles.solver_table([run for run in runs if run.objective_name == objective],
                                                  target_gap)}
                for objective in dict.fromkeys(run.objective_name for run in runs)]
        groups.append(entry)
    return {"folder": str(folder), "results": str(folder / "results.csv"), "rows": len(rows),
            "failed": sum(row_failed(row) for row in rows), "target_gap": target_gap,
            "suites": sorted({str(row["suite"]) for row in rows}), "groups": groups}


def write_report(folder: str | os.PathLike[str], target_gap: float = DEFAULT_TARGET_GAP,
                 plots: bool = True) -> Path:
    """Render ``folder/report.md`` and its PNGs (unless ``plots=False``) from
    ``folder/results.csv``; returns the path."""
    folder = Path(folder)
    rows = finalize(read_results(folder))  # file order is cell order
    suites = sorted({str(row["suite"]) for row in rows})
    lines = [f"# Benchmark report: {', '.join(suites) or '(empty)'}", "",
             f"Rendered by `fleetplan bench report` from `results.csv` ({len(rows)} rows). Times and "
             f"memory are medians over repeats; a run is *at target* when it has no violations and a "
             f"gap <= {target_gap:g} to the best bound any solver proved (or, when none did, to the "
             "best objective found — column `gap_reference` of the CSV). *Wins*: problems where the "
             "solver reached the best objective found and was the fastest of those that did. "
             "*Failed*: runs that ended without a plan (error, time limit or infeasible with no plan).", ""]
    note = memory_note(rows)
    if note:
        lines += [note, ""]
    lines += _run_section(folder)
    styles = solver_styles([str(row["label"]) for row in rows])
    groups = sorted({str(row["group"]) for row in rows}, key=lambda g: min(i for i, r in enumerate(rows) if r["group"] == g))
    for group in groups:
        group_rows = [row for row in rows if row["group"] == group]
        if group_rows[0]["kind"] == SIM_KIND:
            lines += [f"## Group `{group}` (simulation)", "",
                      f"{len({row['instance'] for row in group_rows})} scenarios, {len(group_rows)} runs; "
                      "medians over seeds and repeats of the runs that finished.", ""]
            lines += sim_section(group_rows)
            continue
        runs = profiles.median_runs(group_rows)
        lines += [f"## Group `{group}` ({group_rows[0]['kind']})", ""]
        instances = sorted({(run.instance, run.seed) for run in runs})
        lines += [f"{len(instances)} problems (instance x seed), {len(group_rows)} runs.", ""]
        objectives = list(dict.fromkeys(run.objective_name for run in runs))
        for objective in objectives:
            mine = [run for run in runs if run.objective_name == objective]
            labels = {run.label for run in mine}
            mine_rows = [row for row in group_rows if row["label"] in labels]
            slug = _slug(group if len(objectives) == 1 else f"{group}-{objective}")
            if len(objectives) > 1:
                sense = {"max": "maximize", "min": "minimize"}.get(mine[0].sense, "no result")
                title = f"Objective `{objective}`" if objective else "No plan (every run failed or timed out empty)"
                lines += [f"### {title} ({sense})", ""]
            lines += _section(folder, slug, mine_rows, mine, target_gap, plots, styles)
    errors = [row for row in rows if row_failed(row)]
    if errors:
        lines += ["## Failed runs (no plan)", ""]
        lines += markdown_table(["group", "instance", "seed", "solver", "repeat", "status", "message"],
                        [[r["group"], r["instance"], r["seed"], r["label"], r["repeat"], r["status"], r["message"]]
                         for r in errors[:MAX_INSTANCE_LINES]])
        lines.append("")
    path = folder / REPORT_FILE
    atomic_write_text(path, "\n".join(lines).rstrip() + "\n")
    return path
