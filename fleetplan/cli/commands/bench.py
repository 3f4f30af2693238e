"""The ``fleetplan bench`` sub-command (wired into :mod:`fleetplan.cli` by :func:`add_arguments`).

::

    fleetplan bench SUITE [-o DIR] [--executor local|dask] [--workers N] [--address tls://HOST:8786]
                          [--tls-ca-file F] [--tls-cert F] [--tls-key F] [--insecure]
                          [--resume] [--repeats N] [--grace S] [--save-plans] [--no-report] [--no-plots]
                          [--json]
    fleetplan bench report DIR [--no-plots] [--json]
    fleetplan bench headline [--spec FILE] [--rows ID ...] [--runs N] [--max-minutes M] [--dry-run] [--write]

SUITE is a YAML file or the name of a bundled suite (``quick``, ``standard``, ``paper``).
Errors in the suite or the arguments raise :class:`InstanceError` (one line, exit code 2; with
``--json`` the CLI also prints them as a JSON object on stdout). ``--json`` prints the result
summary (:func:`~fleetplan.benchmarks.report.summarize`) on stdout; exit code 1 when a cell
ended without a plan.

``bench headline`` re-runs the rows of ``benchmarks/RESULTS.md``'s headline table that a spec
(``benchmarks/headline.yaml``, :mod:`fleetplan.benchmarks.headline`) gives a command for, and
prints each row's old and new figure, the change, and a flag when the change is beyond the row's
noise band; ``--write`` puts the new figures, the date, the commit and the load into the table.
It prints the planned total (the rows' expected ``minutes``) before it starts; ``--max-minutes M``
skips the rows expected to take longer than M minutes; ``manual`` rows are listed, never run.
Exit code 1 when a row's command failed or printed no figure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from fleetplan.errors import InstanceError

# The harness (numpy, pydantic, the kinds) loads when `bench` runs: building the parser for
# `fleetplan --help` reads only these two (tests/test_startup.py keeps them equal to the
# harness's own: cells.DEFAULT_GRACE_S and suite.bundled_suites()).
DEFAULT_GRACE_S = 10.0
HEADLINE_SPEC = "benchmarks/headline.yaml"


def bundled_suites() -> list[str]:
    from importlib import resources

    folder = resources.files("fleetplan.benchmarks").joinpath("suites")
    return sorted(entry.name[:-5] for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def add_arguments(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``bench`` sub-command to an ``argparse`` sub-parser collection."""
    bench = subparsers.add_parser(
        "bench", help="run a benchmark suite (or `bench report DIR` to render stored results)",
        description="Run every solver of a suite on its generated instances and tabulate the "
                    "results; `fleetplan bench report DIR` renders the report again from DIR/results.csv.",
    )
    bench.add_argument("suite", metavar="SUITE",
                       help=f"a suite YAML file or a bundled name ({', '.join(bundled_suites())}); "
                            "or the word `report` or `headline`")
    bench.add_argument("directory", nargs="?", default=None, metavar="DIR",
                       help="with `report`: the results folder to render")
    bench.add_argument("-o", "--output", default=None, metavar="DIR",
                       help="results folder (default: bench-results/SUITE_NAME)")
    from fleetplan.cli.common import add_executor_arguments

    add_executor_arguments(bench, "cells (one solver run each)")
    bench.add_argument("--resume", action="store_true",
                       help="keep DIR/results.csv and run only the cells missing from it")
    bench.add_argument("--repeats", type=int, default=None, metavar="N",
                       help="runs per cell, overriding the suite")
    bench.add_argument("--grace", type=float, default=DEFAULT_GRACE_S, metavar="S",
                       help="seconds past time_limit x 1.5 before a run is killed "
                            f"(default {DEFAULT_GRACE_S:g})")
    bench.add_argument("--save-plans", action="store_true", help="keep every plan in DIR/plans/")
    bench.add_argument("--no-report", action="store_true", help="write results.csv only")
    bench.add_argument("--no-plots", action="store_true", help="report.md without PNG figures")
    bench.add_argument("--json", action="store_true",
                       help="the result summary (and errors) as JSON on stdout")
    headline = bench.add_argument_group("bench headline", "re-run the headline rows of benchmarks/RESULTS.md")
    headline.add_argument("--spec", default=None, metavar="FILE",
                          help=f"the rows and their commands (default {HEADLINE_SPEC})")
    headline.add_argument("--rows", nargs="+", default=None, metavar="ID", help="only these rows of the spec")
    headline.add_argument("--runs", type=int, default=None, metavar="N", help="runs per row, overriding the spec")
    headline.add_argument("--max-minutes", default=None, metavar="M",
                          help="skip the rows expected to take longer than M minutes (the spec's `minutes`)")
    headline.add_argument("--dry-run", action="store_true",
                          help="print the rows, their minutes, commands and old figures; run nothing")
    headline.add_argument("--write", action="store_true",
                          help="put the new figures, the date, the commit and the load into the results file")
    bench.set_defaults(handler=handle)
    return bench


def handle(args: argparse.Namespace) -> int:
    """Run the ``bench`` command; returns the exit code (1 when some cell failed)."""
    from fleetplan.benchmarks.suite import load_suite, output_folder, suite_path
    from fleetplan.benchmarks.sweep import run_sweep
    from fleetplan.cli.common import executor_security
    from fleetplan.runs.results import RESULTS_FILE, row_failed

    if args.suite == "headline":
        return handle_headline(args)
    given = [flag for flag, value in (("--spec", args.spec), ("--rows", args.rows), ("--runs", args.runs),
                                      ("--max-minutes", args.max_minutes), ("--dry-run", args.dry_run),
                                      ("--write", args.write)) if value]
    if given:
        raise InstanceError(given[0], "only with `fleetplan bench headline`")
    if args.suite == "report":
        if not args.directory:
            raise InstanceError("DIR", "`fleetplan bench report DIR` needs the results folder")
        folder = Path(args.directory)
        report = _report(folder, plots=not args.no_plots)
        if args.json:
            _print_summary(folder, report, exit_code=0)
        return 0
    if args.directory is not None:
        raise InstanceError("DIR", f"unexpected argument '{args.directory}' (use -o DIR for the results folder)")
    if args.repeats is not None and args.repeats < 1:
        raise InstanceError("--repeats", "must be at least 1")
    if not math.isfinite(args.grace) or args.grace < 0:
        raise InstanceError("--grace", "must be a finite number of seconds >= 0")
    tls = executor_security(args)
    suite = load_suite(args.suite)
    # The suite's name is only a folder name inside bench-results/, never a path.
    out = Path(args.output) if args.output else output_folder(suite.name)
    _check_results_folder(out, suite_path(args.suite))
    if not args.resume and (out / RESULTS_FILE).exists():
        raise InstanceError("-o", f"{out / RESULTS_FILE} exists: pass --resume to finish it, "
                                  "or choose another folder")
    rows = run_sweep(suite, out, executor=args.executor, workers=args.workers, address=args.address,
                     tls=tls, insecure=args.insecure, resume=args.resume, repeats=args.repeats, grace_s=args.grace,
                     save_plans=args.save_plans, command="fleetplan " + " ".join(sys.argv[1:]))
    failed = sum(row_failed(row) for row in rows)
    print(f"{len(rows)} cells, {failed} failed: {out / RESULTS_FILE}", file=sys.stderr)
    report = None if args.no_report else _report(out, plots=not args.no_plots)
    code = 1 if failed else 0
    if args.json:
        _print_summary(out, report, exit_code=code, suite=suite.name)
    return code


# What a sweep writes inside its folder (an input of the command may not be one of them).
FOLDER_FILES = ("results.csv", "run.json", "report.md", "plots", "plans")


def _check_results_folder(out: Path, suite_file: Path) -> None:
    """Refuse, before any cell runs, a results folder that cannot be made or written, or whose
    files would overwrite the suite file."""
    from fleetplan.instances.outputs import check_output_folder

    if out.exists() or out.is_symlink():
        check_output_folder(out, [suite_file], flag="-o", existing=FOLDER_FILES)
        return
    ancestor = out.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InstanceError("-o", f"{out}: '{ancestor}' is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InstanceError("-o", f"{out}: cannot create it: '{ancestor}' is not writable")


def _report(folder: Path, plots: bool = True) -> Path:
    from fleetplan.benchmarks.report import write_report

    path = write_report(folder, plots=plots)
    print(f"report: {path}", file=sys.stderr)
    return path


def _print_summary(folder: Path, report: Path | None, exit_code: int, suite: str | None = None) -> None:
    """``--json``: the report's tables as one JSON object on stdout."""
    from fleetplan.benchmarks.report import summarize

    summary = summarize(folder)
    summary.update(report=str(report) if report else None, exit_code=exit_code)
    if suite is not None:
        summary["suite"] = suite
    from fleetplan.instances.base import json_safe

    sys.stdout.write(json.dumps(json_safe(summary), indent=1, allow_nan=False) + "\n")


def _max_minutes(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        minutes = float(value)
    except ValueError:
        minutes = float("nan")
    if not 0 < minutes < float("inf"):
        raise InstanceError("--max-minutes", f"expected a finite number of minutes > 0, got {value!r}")
    return minutes


def handle_headline(args: argparse.Namespace) -> int:
    """``fleetplan bench headline``: re-run the spec's rows, print old and new figures."""
    from fleetplan.benchmarks.headline import (
        HeadlineSpec,
        expand,
        old_figure,
        replace_numbers,
        rewrite,
        run_rows,
    )
    from fleetplan.cli.display.render import make_console

    if args.directory is not None:
        raise InstanceError("DIR", f"unexpected argument '{args.directory}'")
    suite_only = [flag for flag, value in (("-o", args.output), ("--resume", args.resume),
                                           ("--repeats", args.repeats is not None),
                                           ("--executor", args.executor != "local"), ("--address", args.address),
                                           ("--save-plans", args.save_plans), ("--no-report", args.no_report),
                                           ("--no-plots", args.no_plots)) if value]
    if suite_only:
        raise InstanceError(suite_only[0], "not a flag of `fleetplan bench headline` (runs per row: --runs)")
    if args.runs is not None and args.runs < 1:
        raise InstanceError("--runs", "must be at least 1")
    if args.dry_run and args.write:
        raise InstanceError("--write", "a dry run measures nothing to write")
    max_minutes = _max_minutes(args.max_minutes)
    spec = HeadlineSpec.load(args.spec or HEADLINE_SPEC)
    rows = spec.select(args.rows)
    try:
        text = spec.results.read_text()
    except OSError as error:
        raise InstanceError("results", f"cannot read {spec.results}: {error.strerror or error}",
                            source=spec.source) from None
    lines = text.split("\n")
    olds = {row.id: old_figure(lines, row) for row in rows}  # every row found before anything runs
    if args.write and not os.access(spec.results, os.W_OK):
        raise InstanceError("--write", f"{spec.results} is not writable")
    manual = [row for row in rows if row.manual]
    too_long = [row for row in rows if not row.manual and max_minutes is not None
                and row.planned_minutes(args.runs) > max_minutes]
    planned = [row for row in rows if not row.manual and row not in too_long]
    total = sum(row.planned_minutes(args.runs) for row in planned)
    plan = f"planned: {len(planned)} rows, about {total:.1f} min"
    if too_long:
        plan += (f"; skipped, over --max-minutes {max_minutes:g}: "
                 + ", ".join(f"{row.id} ({row.planned_minutes(args.runs):g} min)" for row in too_long))
    if manual:
        plan += f"; manual, never run: {', '.join(row.id for row in manual)}"

    from rich.table import Table

    console = make_console()
    if args.dry_run:
        table = Table(title=f"{spec.source}: {len(rows)} rows (dry run)", header_style="bold", title_justify="left")
        for name in ("row", "old figure", "numbers", "runs", "noise", "minutes", "command"):
            table.add_column(name)
        for row in rows:
            cell, numbers = olds[row.id]
            if row.manual:
                table.add_row(row.id, cell, "-", "-", "-", "-", f"manual: {row.manual}")
                continue
            try:
                command = " ".join(expand(row.command, "{tmp}"))
            except InstanceError as error:  # the run would fail this row only
                command = f"{row.command} ({error.reason})"
            minutes = f"{row.planned_minutes(args.runs):g}" + (" (skipped)" if row in too_long else "")
            table.add_row(row.id, cell, " / ".join(f"{n:g}" for n in numbers), str(args.runs or row.runs),
                          f"±{row.noise_pct:g}%", minutes, command)
        if args.json:
            sys.stdout.write(json.dumps({"rows": [
                {"id": row.id, "old": olds[row.id][1], "command": row.command or None, "manual": row.manual,
                 "runs": None if row.manual else args.runs or row.runs, "noise_pct": row.noise_pct,
                 "minutes": row.planned_minutes(args.runs), "skipped": row in too_long} for row in rows],
                "planned_minutes": total, "exit_code": 0}) + "\n")
        else:
            console.print(table)
            console.print(plan, markup=False, highlight=False)
        return 0
    print(plan, file=sys.stderr)
    outcomes = run_rows(spec, planned, runs=args.runs, progress=lambda message: print(message, file=sys.stderr))
    code = 1 if any(outcome.new is None for outcome in outcomes) else 0
    if args.json:
        sys.stdout.write(json.dumps({"rows": [
            {"id": o.row.id, "old": o.old, "new": o.new, "runs": o.runs, "change_pct": [c if math.isfinite(c) else None for c in o.changes] if o.new else None,
             "noise_pct": o.row.noise_pct, "flagged": o.flagged, "error": o.error, "load": o.load}
            for o in outcomes], "planned_minutes": total, "skipped": [row.id for row in too_long],
            "manual": [row.id for row in manual], "exit_code": code}, allow_nan=False, default=str) + "\n")
    table = Table(title=f"{spec.source}: {len(rows)} rows", header_style="bold", title_justify="left")
    for name in ("row", "old figure", "new figure", "change", "", "load"):
        table.add_column(name)
    for outcome in outcomes:
        load = f"{min(outcome.load):.1f}-{max(outcome.load):.1f}"
        if outcome.new is None:
            table.add_row(outcome.row.id, outcome.old_cell, "-", "-", f"failed: {outcome.error}", load)
            continue
        change = " / ".join(f"{c:+.1f}%" for c in outcome.changes)
        flag = f"beyond ±{outcome.row.noise_pct:g}%" if outcome.flagged else ""
        table.add_row(outcome.row.id, outcome.old_cell, replace_numbers(outcome.old_cell, outcome.row, outcome.new),
                      change, flag, load)
    if not args.json:
        console.print(table)
    if args.write:
        import datetime

        from fleetplan.benchmarks.headline import git_commit
        from fleetplan.instances.outputs import atomic_write_text

        today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        atomic_write_text(spec.results, rewrite(spec.results.read_text(), outcomes, today, git_commit(spec.workdir)))
        print(f"written: {spec.results}", file=sys.stderr)
    return code
