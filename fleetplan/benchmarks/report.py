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
from fleetplan.benchmarks.profiles import DEFAULT_TARGET_GAP, Run
from fleetplan.benchmarks.results import finalize, read_results
from fleetplan.instances.base import atomic_write_text
from fleetplan.lazy import lazy_attribute

# matplotlib loads when a report is drawn, not when `fleetplan --help` builds its parser.
FigureCanvasAgg = lazy_attribute("matplotlib.backends.backend_agg", "FigureCanvasAgg")
Figure = lazy_attribute("matplotlib.figure", "Figure")

REPORT_FILE = "report.md"
RUN_FILE = "run.json"
# Per-instance tables longer than this are cut (the CSV has everything).
MAX_INSTANCE_LINES = 120
FIGURE_SIZE = (5.0, 3.4)
DPI = 90


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:.{digits}g}"
    return str(value)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "group"


def _table(header: Sequence[str], lines: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_fmt(cell) for cell in line) + " |" for line in lines]
    return out


def _save(figure: Figure, path: Path) -> None:
    FigureCanvasAgg(figure)
    temporary = path.with_name(f".{path.name}.tmp.png")
    figure.savefig(temporary, dpi=DPI)
    os.replace(temporary, path)


def plot_profile(runs: Sequence[Run], path: Path, target_gap: float) -> bool:
    labels, ratios = profiles.profile_ratios(runs, target_gap)
    if len(labels) < 2 or ratios.shape[0] == 0:
        return False
    taus = profiles.profile_taus(ratios)
    profile = profiles.performance_profile(runs, taus, target_gap)
    figure = Figure(figsize=FIGURE_SIZE, layout="constrained")
    axes = figure.add_subplot()
    for label in labels:
        axes.step(taus, profile[label], where="post", label=label)
    axes.set_xscale("log")
    axes.set_ylim(-0.02, 1.02)
    axes.set_xlabel("time ratio to the fastest solver (tau)")
    axes.set_ylabel("fraction of problems")
    axes.set_title(f"performance profile (gap <= {target_gap:g}, {ratios.shape[0]} problems)", fontsize=9)
    axes.legend(fontsize=7, loc="lower right")
    axes.grid(True, which="both", alpha=0.3)
    _save(figure, path)
    return True


def plot_time_to_target(rows: Sequence[dict[str, Any]], path: Path, target_gap: float) -> bool:
    curves = profiles.time_to_target(rows, target_gap)
    if not any(len(times) for times, _ in curves.values()):
        return False
    figure = Figure(figsize=FIGURE_SIZE, layout="constrained")
    axes = figure.add_subplot()
    for label, (times, fractions) in curves.items():
        if len(times):
            axes.step(np.concatenate([[times[0]], times]), np.concatenate([[0.0], fractions]),
                      where="post", label=label)
    axes.set_xscale("log")
    axes.set_ylim(-0.02, 1.02)
    axes.set_xlabel("wall time (s)")
    axes.set_ylabel("fraction of runs at target")
    axes.set_title(f"time to target (gap <= {target_gap:g})", fontsize=9)
    axes.legend(fontsize=7, loc="lower right")
    axes.grid(True, which="both", alpha=0.3)
    _save(figure, path)
    return True


def plot_scaling(curves: Sequence[profiles.ScalingCurve], parameter: str, path: Path) -> bool:
    if not any(len(curve.sizes) >= 2 for curve in curves):
        return False
    figure = Figure(figsize=FIGURE_SIZE, layout="constrained")
    axes = figure.add_subplot()
    for curve in curves:
        slope = f" (slope {curve.slope:.2f})" if curve.slope is not None else ""
        axes.loglog(curve.sizes, curve.median_s, marker="o", label=f"{curve.label}{slope}")
    axes.set_xlabel(parameter)
    axes.set_ylabel("median wall time (s)")
    axes.set_title(f"scaling: time vs {parameter}", fontsize=9)
    axes.legend(fontsize=7, loc="upper left")
    axes.grid(True, which="both", alpha=0.3)
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
                     f"{versions}")
    return lines + [""]


def _section(folder: Path, slug: str, rows: list[dict[str, Any]], runs: list[Run],
             target_gap: float, plots: bool) -> list[str]:
    """Table, plots and per-problem lines of solvers scored by one objective."""
    lines = _table(
        ["solver", "problems", "runs", "failed", "at target", "mean gap", "worst gap", "median s",
         "median MiB", "wins"],
        [[t["solver"], t["problems"], t["runs"], t["failed"], t["at_target"], t["mean_gap"],
          t["worst_gap"], t["median_s"], t["median_mem_mb"], t["wins"]]
         for t in profiles.solver_table(runs, target_gap)])
    lines.append("")
    if plots and plot_profile(runs, folder / f"{slug}-profile.png", target_gap):
        lines += [f"![performance profile]({slug}-profile.png)", ""]
    if plots and len({run.label for run in runs}) > 1 and plot_time_to_target(
            rows, folder / f"{slug}-time-to-target.png", target_gap):
        lines += [f"![time to target]({slug}-time-to-target.png)", ""]
    parameter = profiles.size_parameter(runs)
    if parameter is not None:
        curves = profiles.scaling_curves(runs, parameter)
        if any(len(curve.sizes) >= 2 for curve in curves):
            if plots and plot_scaling(curves, parameter, folder / f"{slug}-scaling.png"):
                lines += [f"![scaling]({slug}-scaling.png)", ""]
            lines += _table(["solver", f"sizes ({parameter})", "median s at each size", "fitted slope"],
                            [[c.label, ", ".join(_fmt(float(s)) for s in c.sizes),
                              ", ".join(_fmt(float(t), 3) for t in c.median_s), c.slope] for c in curves])
            lines.append("")
    lines += ["Per problem (medians over repeats):", ""]
    shown = runs[:MAX_INSTANCE_LINES]
    lines += _table(["instance", "seed", "solver", "status", "objective", "gap", "median s", "failed/runs"],
                    [[r.instance, r.seed, r.label, r.status, r.objective, r.gap, r.wall_s,
                      f"{r.failed}/{r.repeats}"] for r in shown])
    if len(runs) > len(shown):
        lines.append(f"\n({len(runs) - len(shown)} more lines in results.csv)")
    return lines + [""]


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
             "solver reached the best objective found and was the fastest of those that did.", ""]
    lines += _run_section(folder)
    groups = sorted({str(row["group"]) for row in rows}, key=lambda g: min(i for i, r in enumerate(rows) if r["group"] == g))
    for group in groups:
        group_rows = [row for row in rows if row["group"] == group]
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
            lines += _section(folder, slug, mine_rows, mine, target_gap, plots)
    errors = [row for row in rows if row["status"] == "error"]
    if errors:
        lines += ["## Failed runs", ""]
        lines += _table(["group", "instance", "seed", "solver", "repeat", "message"],
                        [[r["group"], r["instance"], r["seed"], r["label"], r["repeat"], r["message"]]
                         for r in errors[:MAX_INSTANCE_LINES]])
        lines.append("")
    path = folder / REPORT_FILE
    atomic_write_text(path, "\n".join(lines).rstrip() + "\n")
    return path
