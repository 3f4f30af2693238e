"""``report.md`` and its PNGs, rendered from ``results.csv`` alone (``fleetplan bench report DIR``).

Per group of the suite: a table per solver (problems, failures, runs at the target gap, mean
and worst gap, median time and memory, wins), a Dolan-Moré performance profile, a
time-to-target plot and, when a numeric generator parameter is swept, scaling curves (median
time against size on log-log axes with the fitted slope). Then the medians of every
(instance, seed, solver). How the statistics are defined: :mod:`.profiles`.

Figures are :mod:`fleetplan.plotting.bench`'s: each titled with its group and objective, none
below three problems (a table says it better) or for a single solver, and every time axis of
a report on one scale.

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
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleetplan.benchmarks import profiles
from fleetplan.benchmarks.markdown import fmt_value, markdown_table
from fleetplan.benchmarks.profiles import DEFAULT_TARGET_GAP, Run
from fleetplan.benchmarks.simcells import sim_section, sim_summary
from fleetplan.instances.outputs import atomic_write_text
from fleetplan.plotting.bench import (
    MIN_PROFILE_PROBLEMS,
    Style,
    TimeRange,
    plot_profile,
    plot_scaling,
    plot_time_to_target,
    solver_styles,
)
from fleetplan.runs.cells import SIM_KIND
from fleetplan.runs.results import as_float, finalize, read_results, row_failed

REPORT_FILE = "report.md"
RUN_FILE = "run.json"
# Per-instance tables longer than this are cut (the CSV has everything).
MAX_INSTANCE_LINES = 120
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


def time_range(rows: Sequence[dict[str, Any]]) -> TimeRange | None:
    """From the fastest to the slowest run of the whole report (a margin each side): every time
    axis of a report uses it, so figures compare at a glance."""
    times = [max(value, 1e-6) for row in rows if (value := as_float(row.get("wall_s"))) is not None]
    if not times:
        return None
    return TimeRange(min(times) / 1.5, max(times) * 1.5)


def _section(folder: Path, slug: str, rows: list[dict[str, Any]], runs: list[Run],
             target_gap: float, plots: bool, styles: Style | None = None, context: str = "",
             span: TimeRange | None = None) -> list[str]:
    """Table, plots and per-problem lines of solvers scored by one objective."""
    lines = markdown_table(
        ["solver", "problems", "runs", "failed", "at target", "mean gap", "worst gap", "median s",
         "median MiB", "wins"],
        [[t["solver"], t["problems"], t["runs"], t["failed"], t["at_target"], t["mean_gap"],
          t["worst_gap"], t["median_s"], t["median_mem_mb"], t["wins"]]
         for t in profiles.solver_table(runs, target_gap)])
    lines.append("")
    several = len({run.label for run in runs}) > 1
    problems = len({run.problem for run in runs})
    if several and problems < MIN_PROFILE_PROBLEMS:
        lines += _few_problems_table(runs, target_gap)
    elif plots and several:
        labels, ratios = profiles.profile_ratios(runs, target_gap)
        taus = profiles.profile_taus(ratios)
        if plot_profile(taus, profiles.performance_profile(runs, taus, target_gap), ratios.shape[0],
                        folder / f"{slug}-profile.png", target_gap, context, styles):
            lines += [f"![performance profile]({slug}-profile.png)", ""]
    if plots and several and plot_time_to_target(
            profiles.time_to_target(rows, target_gap), problems, folder / f"{slug}-time-to-target.png",
            target_gap, context, styles, span):
        lines += [f"![time to target]({slug}-time-to-target.png)", ""]
    parameter = profiles.size_parameter(runs)
    if parameter is not None:
        curves = profiles.scaling_curves(runs, parameter)
        if any(len(curve.sizes) >= 2 for curve in curves):
            if plots and plot_scaling(curves, parameter, folder / f"{slug}-scaling.png", context,
                                      profiles.MIN_SLOPE_SIZES, styles, span):
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
    span = time_range([row for row in rows if row["kind"] != SIM_KIND])
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
            context = f"{group}, {objective or 'no plan'}"
            lines += _section(folder, slug, mine_rows, mine, target_gap, plots, styles, context, span)
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
