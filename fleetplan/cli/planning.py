"""The planner's commands (wired into :mod:`fleetplan.cli.app` by :func:`add_arguments`)::

    fleetplan size INSTANCE --target METRIC>=VALUE [--target ...] --buy NAME[=PRICE[:MAX]] [--buy ...]
                   [--budget B] [--policy SOLVER] [--time-limit S] [-o SIZED.json] [--plan PLAN.json]
    fleetplan whatif INSTANCE --vary FIELD=START:STOP:STEP [--vary ...] [--solver S] [--option ...]
                   [--metrics m1,m2] -o DIR [--resume] [--executor local|dask ...]
    fleetplan compare PLAN [PLAN ...] [--instance INSTANCE ...] [-o FILE.png|.csv]

The work is :mod:`fleetplan.planning`'s; this module parses, checks outputs before any work,
prints and writes. Exit codes as everywhere: 0 an answer, 1 none (infeasible targets), 2 bad input.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from fleetplan.cli.common import EXIT_OK
from fleetplan.cli.settling import settle


def add_arguments(subparsers: Any) -> None:
    """Add ``size``, ``whatif`` and ``compare`` to the command line."""
    from fleetplan.cli.common import SEED, THREADS, add_executor_arguments, positive_seconds

    size = subparsers.add_parser(
        "size", help="the cheapest capacity to add so that service targets hold",
        description="Find the cheapest purchase (GPUs per type, GPU-hours per region and type, servers per "
                    "datacenter and type, machines per cluster) so that every --target holds; write the "
                    "sized instance. Solved exactly (a HiGHS MIP; the bound is its relaxation's) and checked "
                    "by solving the sized instance with a forward policy and judging it.",
        epilog="Targets per kind: `fleetplan size --targets KIND`. Example: fleetplan size cluster.json "
               "--target min_time_share>=0.5 --buy h100=3.5 --buy a100=2.1:16 -o sized.json")
    size.add_argument("file", nargs="?", metavar="INSTANCE", help="the instance to size")
    size.add_argument("--target", action="append", default=[], metavar="METRIC>=VALUE",
                      help="a service target (repeatable)")
    size.add_argument("--buy", action="append", default=[], metavar="NAME[=PRICE[:MAX]]",
                      help="what may be bought, its unit price and the most units (repeatable)")
    size.add_argument("--budget", type=_non_negative, default=None, metavar="B",
                      help="the most the purchase may cost")
    size.add_argument("--policy", default=None, metavar="SOLVER",
                      help="the forward solver that must meet the targets on the sized instance "
                           "(default: the first of the kind's policies that does)")
    size.add_argument("--time-limit", type=positive_seconds, default=None, metavar="S",
                      help="seconds for the sizing, checks included")
    size.add_argument("--vary", default=None, metavar="FIELD=START:STOP:STEP",
                      help="size once per value of target.METRIC, price.NAME or budget (or FIELD=a,b,c): a table "
                           "of the basket, -o FILE.csv writes it and --plot draws it")
    size.add_argument("--max-points", type=_max_points, default=None, metavar="N",
                      help="the most purchases the search checks one by one where no model is exact (a policy's "
                           "own allocation, a moving reference), and under max-min fairness twice as many box "
                           "tests: ends the search the same way at any machine load "
                           "(default: 2,000 for allocation, 200 for reservation and binpack)")
    size.add_argument("--threads", type=THREADS, default=1)
    size.add_argument("--seed", type=SEED, default=0)
    size.add_argument("--targets", dest="list_targets", default=None, metavar="KIND",
                      help="list the metrics a KIND can be sized for, and exit")
    size.add_argument("--with-plan", default=None, metavar="PLAN.json",
                      help="placement: the plan to hold fixed while sizing (default: today's placement)")
    size.add_argument("--replan", action="store_true",
                      help="placement: re-place with the hill climb first, then size for that placement")
    size.add_argument("-o", "--output", default=None, metavar="SIZED.json", help="write the sized instance")
    size.add_argument("--plan", default=None, metavar="PLAN.json",
                      help="write the sized instance's plan (the policy's, judged)")
    size.add_argument("--plot", default=None, metavar="FILE.png",
                      help="draw the purchase, each target today and sized, and the cost against its bound")
    size.add_argument("--report", default=None, metavar="FILE.html",
                      help="write a self-contained report (question, inputs, answer, pictures, the command)")
    size.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    size.set_defaults(handler=handle_size)

    whatif = subparsers.add_parser(
        "whatif", help="sweep fields of your own instance and tabulate the metrics",
        description="Solve your instance once per point of a grid of field values (--vary FIELD=START:STOP:STEP, "
                    "or FIELD=a,b,c; FIELD*=... multiplies the field's current value) and write DIR/whatif.csv, "
                    "DIR/whatif.parquet and DIR/whatif.png (one panel per metric). Runs on the bench executors; "
                    "--resume finishes an interrupted sweep.",
        epilog="Fields are paths into the instance file: worker_types.h100.count, regions.r1.gpu_supply.h100, "
               "jobs.*.steps_left* (every job's steps scaled), reservations.web.capacity_rru.")
    whatif.add_argument("file", metavar="INSTANCE")
    whatif.add_argument("--vary", action="append", default=[], metavar="FIELD=START:STOP:STEP",
                        help="a field and its values (repeatable: the grid is every combination)")
    whatif.add_argument("--solver", default=None, help="the solver (default: the kind's default)")
    whatif.add_argument("--option", action="append", default=[], metavar="NAME=VALUE", help="a solver option")
    whatif.add_argument("--metrics", default=None, metavar="m1,m2",
                        help="the metrics to tabulate and draw (default: the kind's service metrics)")
    whatif.add_argument("--time-limit", type=positive_seconds, default=60.0, metavar="S", help="seconds per point")
    whatif.add_argument("--seed", type=SEED, default=0)
    whatif.add_argument("--threads", type=THREADS, default=1)
    whatif.add_argument("-o", "--output", required=True, metavar="DIR", help="the results folder (new)")
    whatif.add_argument("--resume", action="store_true", help="finish an interrupted sweep in DIR")
    whatif.add_argument("--report", default=None, metavar="FILE.html",
                        help="write a self-contained report (the sweep, the table, the pictures, the command)")
    whatif.add_argument("--frontier", action="store_true",
                        help="allocation: add each point's best value of the service metrics under any allocation "
                             "(no policy), tabulated as frontier_METRIC and drawn dashed beside the solver's curve")
    add_executor_arguments(whatif, "points")
    whatif.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    whatif.set_defaults(handler=handle_whatif)

    compare = subparsers.add_parser(
        "compare", help="put plans side by side, metric by metric",
        description="Judge each plan against its instance and show them side by side: one row per metric "
                    "(service metrics first), one column per plan, the change against the first plan and "
                    "whether it is better, with units. -o writes the table (.csv) or a picture (.png/.svg/.pdf).")
    compare.add_argument("plans", nargs="+", metavar="PLAN", help="plan files (the first is the reference)")
    compare.add_argument("--instance", action="append", default=[], metavar="INSTANCE",
                         help="the instance of the plans (once), or of each plan in order (once per plan)")
    compare.add_argument("--metrics", default=None, metavar="m1,m2",
                         help="the metrics to show (default: all, service metrics first)")
    compare.add_argument("-o", "--output", default=None, metavar="FILE.csv|FILE.png",
                         help="write the table as CSV, or draw it")
    compare.add_argument("--report", default=None, metavar="FILE.html",
                         help="write a self-contained report (the plans, the table, the picture, the command)")
    compare.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    compare.set_defaults(handler=handle_compare)


def _workers(text: str) -> int:
    from fleetplan.cli.common import bounded_int

    return bounded_int(1, 256)(text)


def _max_points(text: str) -> int:
    from fleetplan.cli.common import bounded_int

    return bounded_int(0, 10_000_000)(text)


def _non_negative(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text[:40]}' is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text[:40]} is not allowed: must be a finite number >= 0")
    return value


def _sizing_options(kind: str) -> set[str]:
    """The options ``kind``'s sizer takes beyond the shared ones (its keyword parameters)."""
    import inspect

    from fleetplan.planning.kinds import planning_kind

    return {name for name, parameter in inspect.signature(planning_kind(kind).sizer()).parameters.items()
            if parameter.kind is inspect.Parameter.KEYWORD_ONLY}


def handle_size(args: argparse.Namespace) -> int:
    """``fleetplan size``."""
    import fleetplan
    from fleetplan.cli.common import (
        CommandError,
        check_outputs,
        command_clock,
        judge,
        print_json,
        stdout,
        working,
    )
    from fleetplan.planning import size

    if args.list_targets is not None:
        return _list_targets(args)
    if args.file is None:
        raise CommandError("size: give the INSTANCE to size (or --targets KIND to list the metrics)")
    check_outputs([args.file, args.with_plan], files=[("-o", args.output), ("--plan", args.plan),
                                                      ("--plot", args.plot), ("--report", args.report)])
    check_pictures(args)
    with working(f"loading {args.file}", not args.json):
        loading = time.perf_counter()
        instance = fleetplan.load_instance(args.file)
        load_s = time.perf_counter() - loading
    options: dict[str, Any] = {}
    # The kind's sizer declares the options it takes (its signature); the others are refused here.
    takes = _sizing_options(instance.kind)
    if args.max_points is not None:
        if "max_points" not in takes:
            raise CommandError(f"--max-points: {instance.kind} sizing searches no lattice of purchases "
                               "(nothing to bound)")
        options["max_points"] = args.max_points
    if args.with_plan or args.replan:
        if not {"plan", "replan"} <= takes:
            raise CommandError("--with-plan and --replan size a placement instance (this is "
                               f"{instance.kind})")
        if args.with_plan and args.replan:
            raise CommandError("--with-plan holds a plan fixed; --replan makes a new one: give one of them")
        if args.with_plan:
            options["plan"] = fleetplan.load_plan(args.with_plan)
            if options["plan"].kind != instance.kind:
                raise CommandError(f"--with-plan {args.with_plan}: holds a plan of kind '{options['plan'].kind}', "
                                   f"not a {instance.kind} plan for {args.file}")
            judge(instance, options["plan"], args.file, args.with_plan, "--with-plan")  # before the sizing
        options["replan"] = args.replan
    if args.vary is not None:
        return _size_sweep(args, instance, options)
    # --time-limit counts from the command's start (the process's: start-up and loading
    # included), less a reserve for writing what it finds, as `solve` does.
    reserve = min(load_s, (args.time_limit or 0) / 4)
    with working(f"sizing {instance.kind} '{instance.name}'", not args.json):
        result = size(instance, args.target, args.buy, budget=args.budget, policy=args.policy,
                      time_limit=args.time_limit, threads=args.threads, seed=args.seed,
                      started=command_clock.started - reserve, **options)
    if result.success:
        if args.plot or args.report:
            _size_pictures(args, instance, result)
        if args.output:
            fleetplan.save(result.sized_instance, args.output)
        if args.plan and result.plan is not None:
            fleetplan.save(result.plan, args.plan)
        settle(EXIT_OK)
    if args.json:
        print_json({**result.to_dict(), "output": args.output if result.success else None})
    else:
        render_sizing(stdout, result)
        if result.success and args.output:
            stdout.print(f"wrote the sized instance to {args.output}", markup=False)
        if result.success and args.plan and result.plan is not None:
            stdout.print(f"wrote its plan to {args.plan}", markup=False)
        for flag, path in (("the picture", args.plot), ("the report", args.report)):
            if result.success and path:
                stdout.print(f"wrote {flag} to {path}", markup=False)
        if not result.success:
            stdout.print(f"no sizing ({result.status}): nothing written", markup=False)
    return 0 if result.success else 1


def _size_sweep(args: argparse.Namespace, instance: Any, options: dict[str, Any]) -> int:
    """``size --vary``: one sizing per value, tabulated (and written, drawn, reported)."""
    from rich.table import Table

    from fleetplan.cli.common import CommandError, print_json, stdout, working
    from fleetplan.cli.render import fmt_gap, fmt_number
    from fleetplan.planning.sizing.sweep import size_sweep

    if args.plan:
        raise CommandError("--plan: a sizing sweep has one plan per value; size one value to write its plan")
    if args.output and not str(args.output).lower().endswith(".csv"):
        raise CommandError(f"-o {args.output}: a sizing sweep writes its table as CSV (FILE.csv)")
    with working(f"sizing {instance.kind} '{instance.name}' over {args.vary}", not args.json):
        sweep = size_sweep(instance, args.target, args.buy, args.vary, budget=args.budget, policy=args.policy,
                           time_limit=args.time_limit, threads=args.threads, seed=args.seed, **options)
    figure = None
    if args.plot or args.report:
        from fleetplan.plotting.planning import plot_size_sweep

        figure = plot_size_sweep(sweep, title=f"{instance.name or args.file}: the cheapest basket against "
                                              f"{sweep.field} (under {args.policy or 'no policy'})")
    if args.output:
        import pandas as pd

        from fleetplan.instances.tables import write_table

        write_table(pd.DataFrame(sweep.rows), args.output, "csv")
    if args.plot:
        from fleetplan.instances.outputs import save_figure

        save_figure(figure, args.plot)
    if args.report:
        from fleetplan.cli.report import table_html, write_report

        header = [sweep.field, "status", "cost", "bound", "gap", *sweep.items]
        rows = [[row[sweep.field], row["status"], fmt_number(row["cost"]), fmt_number(row["bound"]),
                 fmt_gap(row["gap"]), *(fmt_number(row[item]) for item in sweep.items)] for row in sweep.rows]
        write_report(args.report, f"Sizing {instance.name or args.file} against {sweep.field}",
                     question=f"the cheapest purchase of {', '.join(args.buy)} meeting {', '.join(args.target)}, "
                              f"as {sweep.field} moves", inputs={"instance": args.file, "vary": args.vary,
                                                                 "policy": args.policy or "none"},
                     sections=[("The baskets", table_html(header, rows))], figures=[("the sweep", figure)],
                     argv=getattr(args, "argv", None))
    solved = any(row["cost"] is not None for row in sweep.rows)
    settle(EXIT_OK if solved else 1)
    if args.json:
        print_json({"field": sweep.field, "items": sweep.items, "rows": sweep.rows})
        return 0 if solved else 1
    table = Table(title=f"sizing against {sweep.field} (under {args.policy or 'no policy'})", header_style="bold")
    for column in (sweep.field, "status", "cost", "bound", "gap", *sweep.items):
        table.add_column(column, justify="right")
    for row in sweep.rows:
        table.add_row(fmt_number(row[sweep.field]), row["status"], fmt_number(row["cost"]), fmt_number(row["bound"]),
                      fmt_gap(row["gap"]), *(fmt_number(row[item]) for item in sweep.items))
    stdout.print(table)
    for flag, path in (("the table", args.output), ("the picture", args.plot), ("the report", args.report)):
        if path:
            stdout.print(f"wrote {flag} to {path}", markup=False)
    return 0 if solved else 1


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
    from fleetplan.cli.render import fmt_measure
    from fleetplan.cli.report import table_html, write_report
    from fleetplan.cli.views import purchase_rows
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


def _list_targets(args: argparse.Namespace) -> int:
    from fleetplan.cli.common import CommandError, print_json, stdout
    from fleetplan.planning.targets import TARGETABLE

    if args.list_targets not in TARGETABLE:
        raise CommandError(f"--targets: unknown kind '{args.list_targets}' (known: {', '.join(TARGETABLE)})")
    rows = [{"metric": name, "direction": op, "meaning": meaning}
            for name, (op, meaning) in TARGETABLE[args.list_targets].items()]
    if args.json:
        print_json(rows)
        return 0
    from rich.table import Table

    table = Table(title=f"sizing targets of {args.list_targets}", header_style="bold")
    for column in ("target", "meaning"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(f"{row['metric']}{row['direction']}VALUE", row["meaning"])
    stdout.print(table)
    return 0


def render_sizing(console: Any, result: Any) -> None:
    """The purchase, its cost, the bound and gap, the policy-free answer where a policy's
    differs, and each target's check."""
    from rich.table import Table

    from fleetplan.cli.render import fmt_gap, fmt_measure, fmt_number
    from fleetplan.cli.views import purchase_rows

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

    from fleetplan.cli.render import fmt_number
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

    def cell(change: dict | None, name: str, text: str | None = None) -> str:
        if change is None or name not in change:
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
        cells = [f"{cell(v.more, name, v.objective_text.get('more'))} / "
                 f"{cell(v.fewer, name, v.objective_text.get('fewer'))}" for name in shown]
        if duals:
            cells.append("-" if v.dual is None else (fmt_number(v.dual, 4) + (" (local)" if v.dual_note else "")))
        table.add_row(v.capacity, v.unit, *cells)
    console.print(table)
    notes = sorted({v.dual_note for v in values.values if v.dual_note})
    for note in notes:
        console.print(f"LP dual (local): {note}", markup=False)
    for reason in values.binds:
        console.print(f"what binds: {reason}", markup=False)


def handle_compare(args: argparse.Namespace) -> int:
    """``fleetplan compare``."""
    import fleetplan
    from fleetplan.cli.common import CommandError, check_outputs, print_json, stdout
    from fleetplan.instances.outputs import check_figure_path
    from fleetplan.planning.compare import compare

    if len(args.instance) not in (1, len(args.plans)):
        raise CommandError(f"--instance: give one instance for every plan, or one per plan "
                           f"({len(args.plans)} plans, {len(args.instance)} instances)")
    inputs = [*args.plans, *args.instance]
    check_outputs(inputs, files=[("-o", args.output), ("--report", args.report)])
    check_pictures(args)
    suffix = (args.output or "").lower().rsplit(".", 1)[-1] if args.output else None
    if suffix is not None and suffix != "csv":
        check_figure_path(args.output, "-o")
    instances = [fleetplan.load_instance(path) for path in args.instance]
    labels = _labels(args.plans)
    plans = {}
    for index, (label, path) in enumerate(zip(labels, args.plans, strict=True)):
        plans[label] = (instances[0] if len(instances) == 1 else instances[index], fleetplan.load_plan(path))
    metrics = None
    if args.metrics:
        metrics = [name.strip() for name in args.metrics.split(",") if name.strip()]
    table = compare(plans, metrics)
    if args.metrics:
        unknown = [row["metric"] for row in table.rows if all(v is None for v in row["values"])]
        if unknown:
            raise CommandError(f"--metrics: no plan has {', '.join(unknown)}")
    if args.output and suffix == "csv":
        import pandas as pd

        from fleetplan.instances.tables import write_table

        write_table(pd.DataFrame(table.to_records()), args.output, "csv")
    elif args.output:
        from fleetplan.plotting.planning import plot_comparison

        plot_comparison(table, args.output)
    if args.report:
        _compare_report(args, table)
    settle(EXIT_OK)
    if args.json:
        print_json({"kind": table.kind, "columns": table.columns, "solvers": table.solvers, "rows": table.rows,
                    "output": args.output})
        return 0
    render_comparison(stdout, table)
    if args.output:
        stdout.print(f"wrote {args.output}", markup=False)
    return 0


def _compare_report(args: argparse.Namespace, table: Any) -> None:
    from fleetplan.cli.render import fmt_measure
    from fleetplan.cli.report import table_html, write_report
    from fleetplan.cli.views import comparison_changes
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

    from fleetplan.cli.render import fmt_measure
    from fleetplan.cli.views import comparison_changes

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


def handle_whatif(args: argparse.Namespace) -> int:
    """``fleetplan whatif``."""
    from fleetplan.cli.common import executor_security, parse_assignments
    from fleetplan.planning.whatif import whatif

    options = parse_assignments(args.option, "--option")
    metrics = [name.strip() for name in args.metrics.split(",") if name.strip()] if args.metrics else None
    if args.report:
        check_sweep_report(args, [args.file])
        check_pictures(args)
    tls = executor_security(args)
    result = whatif(args.file, args.vary, args.output, solver=args.solver, options=options, metrics=metrics,
                    time_limit=args.time_limit, seed=args.seed, threads=args.threads, executor=args.executor,
                    workers=args.workers, address=args.address, tls=tls, insecure=args.insecure,
                    resume=args.resume, progress=None if args.json else "auto", frontier=args.frontier, plot=True)
    return finish_sweep(args, result, SWEEP_FIELDS + ("solver", "warnings", "frontier"))


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

    from fleetplan.cli.render import fmt_measure, fmt_number
    from fleetplan.cli.report import table_html, write_report

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

    from fleetplan.cli.render import fmt_measure, fmt_number

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
