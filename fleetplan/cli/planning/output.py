"""What the planner's commands (:mod:`fleetplan.cli.planning.commands`, :mod:`fleetplan.cli.planning.horizon`)
print and write once the work is done: the tables on the terminal (a sizing, marginal values,
a comparison of plans, a sweep), the pictures and HTML reports of ``size`` and ``compare``, the
check of picture paths before any work, and a sweep's summary and report. Split from
:mod:`fleetplan.cli.planning.commands`, which parses the commands and runs them; the heavy libraries
(rich, matplotlib, the glossary) load inside each function, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
from typing import Any

from fleetplan.cli.settling import settle


def check_pictures(args: argparse.Namespace) -> None:
    """--plot names a picture format, --report an HTML file: refused before any work."""
    from fleetplan.cli.common import CommandError
    from fleetplan.instances.outputs import check_figure_path

    if getattr(args, "plot", None):
        check_figure_path(args.plot, "--plot")
    if getattr(args, "report", None) and not str(args.report).lower().endswith((".html", ".htm")):
        raise CommandError(f"--report {args.report}: a report is an HTML file (FILE.html)")



def _size_pictures(args: argparse.Namespace, instance: Any, result: Any) -> None:
    """``size --plot`` and ``--report``: the instance as it is under the same policy beside the
    sized one."""
    import fleetplan
    from fleetplan.cli.display.render import fmt_measure
    from fleetplan.cli.display.views import purchase_rows
    from fleetplan.cli.planning.report import table_html, write_report
    from fleetplan.instances.glossary import describe
    from fleetplan.instances.outputs import save_figure
    from fleetplan.plotting.planning import plot_sizing

    before = None
    known = {spec.name for spec in fleetplan.list_solvers(instance.kind)}
    if result.policy in known:
        today = fleetplan.solve(instance, result.policy, time_limit=args.time_limit, seed=args.seed)
        before = dict(today.evaluation.metrics) if today.evaluation is not None else None
    units = {t.metric: (entry.unit if (entry := describe(t.metric, instance.kind)) else "") for t in result.targets}
    figure = plot_sizing(result, before, units)
    if args.plot:
        save_figure(figure, args.plot)
    if args.report:
        rows = [list(row) for row in purchase_rows(result)]  # as the terminal prints them
        notes = [part.strip() for part in result.message.split(";") if part.strip().startswith("warning")]
        checks = [[str(t), "-" if before is None else fmt_measure(t.metric, before.get(t.metric), scope=instance.kind),
                   fmt_measure(t.metric, result.metrics.get(t.metric), scope=instance.kind),
                   "yes" if result.checks.get(str(t)) else "NO"] for t in result.targets]
        gap = "-" if result.gap is None else ("0%" if result.gap < 1e-6 else f"{100 * result.gap:.3g}%")
        answer = (f"<p><b>{result.status}</b>: {result.message}</p>"
                  + (table_html(["buy", "units", "unit"], rows) if rows else "<p>nothing to buy</p>")
                  + f"<p>cost {result.cost:,.6g}, proven bound {result.bound if result.bound is None else f'{result.bound:,.6g}'}"
                  f", gap {gap}</p>")
        if result.policy_free and result.policy_free.get("cost") is not None:
            answer += f"<p>policy-free minimum: cost {result.policy_free['cost']:,.6g}</p>"
        write_report(args.report, f"Sizing {instance.name or args.file}",
                     question=f"the cheapest purchase of {', '.join(args.buy)} under which "
                              f"{result.policy or 'the policy'} meets {', '.join(map(str, result.targets))}",
                     inputs={"instance": args.file, "kind": instance.kind, "targets": ", ".join(args.target),
                             "may buy": ", ".join(args.buy), "budget": "no limit" if args.budget is None else args.budget,
                             "policy": result.policy},
                     sections=[("The answer", answer),
                               ("Each target, today and sized (judged)",
                                table_html(["target", "today", "sized", "met"], checks))],
                     figures=[("the sizing", figure)], notes=notes,
                     argv=getattr(args, "argv", None))



def render_sizing(console: Any, result: Any) -> None:
    """The purchase, its cost, the bound and gap, the policy-free answer where a policy's
    differs, and each target's check."""
    from rich.table import Table

    from fleetplan.cli.display.render import fmt_gap, fmt_measure, fmt_number
    from fleetplan.cli.display.views import purchase_rows

    console.print(f"[bold]{result.status}[/]: {result.message}" if result.message else f"[bold]{result.status}[/]")
    bought = {name: units for name, units in result.additions.items() if units}
    if bought:
        table = Table(title="purchase", header_style="bold")
        table.add_column("buy")
        table.add_column("units", justify="right")
        table.add_column("unit")
        for row in purchase_rows(result):
            table.add_row(*row)
        console.print(table)
    elif result.success:
        console.print("nothing to buy: the instance meets the targets as it is", markup=False)
    points = int(result.stats.get("points_checked", 0))
    console.print(f"cost {fmt_number(result.cost)}   bound {fmt_number(result.bound)}   gap {fmt_gap(result.gap)}"
                  f"{f'   purchases checked {points:,}' if points else ''}   ({result.wall_s:.2f} s)", markup=False)
    free = result.policy_free
    if free and free.get("cost") is not None and (result.cost is None or abs(free["cost"] - result.cost) > 1e-9):
        bought_free = ", ".join(f"{fmt_number(units)} {name}" for name, units in free["additions"].items() if units)
        console.print(f"policy-free minimum: {bought_free or 'nothing to buy'}, cost {fmt_number(free['cost'])} "
                      f"(some allocation meets every target there; {result.policy or 'the policy'} must meet them "
                      "itself)", markup=False)
    if result.checks:
        table = Table(title=f"targets on the sized instance under {result.policy or '-'} (judged)", header_style="bold")
        for column in ("target", "measured", "met"):
            table.add_column(column, justify="right" if column != "target" else "left")
        for target in result.targets:
            table.add_row(str(target), fmt_measure(target.metric, result.metrics.get(target.metric)),
                          "yes" if result.checks.get(str(target)) else "NO")
        console.print(table)
    for line in result.log[-5:]:
        console.print(line, style="dim", markup=False)


def render_marginal(console: Any, values: Any) -> None:
    """One row per capacity: what one unit more and one fewer change, in the objective's and each
    metric's own units and signs; the LP's dual beside it, labelled where it is only a local
    derivative; what binds when nothing moves the objective."""
    from rich.table import Table

    from fleetplan.cli.display.render import fmt_number
    from fleetplan.instances.glossary import format_change

    if not values.values:
        console.print(f"what binds: {values.message or 'no capacity to measure'}", markup=False)
        return
    shown = ["objective", *[name for name in values.metrics if any(
        abs((v.more or {}).get(name, 0.0)) > 1e-12 or abs((v.fewer or {}).get(name, 0.0)) > 1e-12
        for v in values.values)]]
    how = "the plan held, judged on the changed instance" if values.held_plan else f"re-solved by {values.solver}"
    table = Table(title=f"one unit more / one fewer of each capacity ({how}; objective to "
                        f"{'maximise' if values.sense == 'max' else 'minimise'})", header_style="bold")
    table.add_column("capacity")
    table.add_column("unit")
    for name in shown:
        table.add_column(name, justify="right", overflow="fold")
    duals = any(v.dual is not None for v in values.values)
    if duals:
        table.add_column("LP dual / unit", justify="right", overflow="fold")

    def cell(change: dict | None, name: str, text: str | None = None, missing: str | None = None) -> str:
        if change is None:  # the objective's column says why there is no change (infeasible, ...)
            return missing if name == "objective" and missing else "-"
        if name not in change:
            return "-"
        if name == "objective" and text:  # the kind's exact reading (binpack's encoded score)
            return text
        value = change[name]
        reference = values.objective if name == "objective" else values.metrics.get(name)  # its own scale
        if abs(value) < 1e-9 * max(1.0, abs(reference or 0.0)):
            return "0"
        if name == "objective":
            return f"{'+' if value > 0 else '-'}{fmt_number(abs(value), 4)}"
        return format_change(name, value, values.kind)

    for v in values.values:
        cells = [f"{cell(v.more, name, v.objective_text.get('more'), v.missing.get('more'))} / "
                 f"{cell(v.fewer, name, v.objective_text.get('fewer'), v.missing.get('fewer'))}" for name in shown]
        if duals:
            cells.append("-" if v.dual is None else (fmt_number(v.dual, 4) + (" (local)" if v.dual_note else "")))
        table.add_row(v.capacity, v.unit, *cells)
    console.print(table)
    notes = sorted({v.dual_note for v in values.values if v.dual_note})
    for note in notes:
        console.print(f"LP dual (local): {note}", markup=False)
    for reason in values.binds:
        console.print(f"what binds: {reason}", markup=False)



def _compare_report(args: argparse.Namespace, table: Any) -> None:
    from fleetplan.cli.display.render import fmt_measure
    from fleetplan.cli.display.views import comparison_changes
    from fleetplan.cli.planning.report import table_html, write_report
    from fleetplan.plotting.planning import plot_comparison

    rows = []
    for row in table.rows:  # the terminal's change texts (views.comparison_changes), and the verdict
        cells = [fmt_measure(row["metric"], value, scope=table.kind) for value in row["values"]]
        cells += [f"{text} {word}" if word in ("better", "worse") else text
                  for text, word in comparison_changes(row, table.kind)]
        rows.append([row["metric"], row["unit"], *cells])
    header = ["metric", "unit", *table.columns, *[f"change ({label})" for label in table.columns[1:]]]
    write_report(args.report, table.title(),
                 question=f"which of {', '.join(table.columns)} serves better, metric by metric",
                 inputs={"plans": ", ".join(args.plans), "instances": ", ".join(args.instance)},
                 sections=[("The plans side by side (judged)", table_html(header, rows))],
                 figures=[("the comparison", plot_comparison(table))], argv=getattr(args, "argv", None))


def _labels(paths: list[str]) -> list[str]:
    """Each plan's column heading: its file name, made unique."""
    from pathlib import Path

    labels: list[str] = []
    for path in paths:
        label = Path(path).stem or path
        while label in labels:
            label = f"{label}'"
        labels.append(label)
    return labels


def render_comparison(console: Any, table: Any) -> None:
    from rich.table import Table

    from fleetplan.cli.display.render import fmt_measure
    from fleetplan.cli.display.views import comparison_changes

    view = Table(title=table.title(), header_style="bold")
    view.add_column("metric", overflow="fold")
    view.add_column("unit")
    for label in table.columns:
        view.add_column(label, justify="right", overflow="fold")
    for label in table.columns[1:]:
        view.add_column(f"change ({label})", justify="right")
    for row in table.rows:
        cells = [fmt_measure(row["metric"], value, scope=table.kind) for value in row["values"]]
        for text, word in comparison_changes(row, table.kind):
            if word in ("better", "worse"):
                text = f"{text} [{'green' if word == 'better' else 'red'}]{word}[/]"
            cells.append(text)
        view.add_row(row["metric"], row["unit"], *cells)
    console.print(view)



# What a sweep's --json prints of its result (whatif adds its solver, warnings and frontier).
SWEEP_FIELDS = ("rows", "varied", "metrics", "failed", "files")


def check_sweep_report(args: argparse.Namespace, inputs: list[str]) -> None:
    """A sweep's ``--report`` checked before anything runs: not an input, not inside ``-o DIR``."""
    from fleetplan.cli.common import check_outputs
    from fleetplan.instances.outputs import check_distinct_outputs

    check_outputs(inputs, files=[("--report", args.report)])
    check_distinct_outputs([("--report", args.report)], [("-o", args.output)])


def finish_sweep(args: argparse.Namespace, result: Any, fields: tuple[str, ...], **report: Any) -> int:
    """A finished sweep's report (``report``: :func:`whatif_report`'s question and inputs), exit
    code, and its table on stdout (``fields`` of the result with ``--json``); 1 when no point
    has a plan."""
    from fleetplan.cli.common import print_json, stdout

    code = 0 if result.failed < len(result.rows) else 1
    if args.report:
        whatif_report(args, result, **report)
        result.files.append(args.report)
    settle(code)  # the sweep's files are in place
    if args.json:  # JSON has no infinity (a horizon's VSS can be one): null there
        from fleetplan.instances.base import json_safe

        print_json(json_safe({name: getattr(result, name) for name in fields}))
    else:
        render_sweep(stdout, result)
        for path in result.files:
            stdout.print(f"wrote {path}", markup=False)
    return code


def whatif_report(args: argparse.Namespace, result: Any, question: str | None = None,
                   inputs: dict[str, Any] | None = None) -> None:
    """The sweep's report; ``question`` and ``inputs`` for a sweep of another question than a
    solver's metrics (a horizon's schedules)."""
    from pathlib import Path

    from fleetplan.cli.display.render import fmt_measure, fmt_number
    from fleetplan.cli.planning.report import table_html, write_report

    columns = [*result.metrics]
    for name in result.frontier:
        columns.insert(columns.index(name) + 1, f"frontier_{name}")
    rows = [[*(fmt_number(row.get(name)) for name in result.varied), row.get("status"),  # 100,000 not 100000.0
             *(fmt_measure(name.removeprefix("frontier_"), row.get(name), 4) for name in columns)] for row in result.rows]
    picture = Path(args.output) / "whatif.png"
    figures = [("the sweep", picture)] if picture.exists() else []
    write_report(args.report, f"What if: {', '.join(result.varied)}",
                 question=question or f"how the service metrics move with {', '.join(result.varied)} under "
                                      f"{result.solver}",
                 inputs=inputs or {"instance": args.file, "vary": " ".join(args.vary), "solver": result.solver,
                                   "time limit per point (s)": args.time_limit, "results folder": args.output},
                 sections=[("The sweep", table_html([*result.varied, "status", *columns], rows))],
                 figures=figures, notes=result.warnings, argv=getattr(args, "argv", None))


def render_sweep(console: Any, result: Any) -> None:
    from rich.table import Table

    from fleetplan.cli.display.render import fmt_measure, fmt_number

    table = Table(title=f"what if: {', '.join(result.varied)} (under {result.solver or 'the default solver'})",
                  header_style="bold")
    columns = [*result.metrics]
    for name in result.frontier:
        columns.insert(columns.index(name) + 1, f"frontier_{name}")
    for name in [*result.varied, "status", *columns]:
        table.add_column(name, justify="right", overflow="fold")
    for row in result.rows:
        table.add_row(*[fmt_number(row.get(name)) for name in result.varied], str(row.get("status")),
                      *[fmt_measure(name.removeprefix("frontier_"), row.get(name), 4) for name in columns])
    console.print(table)
    for line in result.warnings:
        console.print(f"[yellow]warning:[/] {line}")
    if result.failed:
        console.print(f"{result.failed} point(s) without a plan (see results.csv)", markup=False)
