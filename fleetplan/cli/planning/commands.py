"""The planner's commands (wired into :mod:`fleetplan.cli.app` by :func:`add_arguments`)::

    fleetplan size INSTANCE --target METRIC>=VALUE [--target ...] --buy NAME[=PRICE[:MAX]] [--buy ...]
                   [--budget B] [--policy SOLVER] [--time-limit S] [-o SIZED.json] [--plan PLAN.json]
    fleetplan whatif INSTANCE --vary FIELD=START:STOP:STEP [--vary ...] [--solver S] [--option ...]
                   [--metrics m1,m2] -o DIR [--resume] [--executor local|dask ...]
    fleetplan compare PLAN [PLAN ...] [--instance INSTANCE ...] [-o FILE.png|.csv]

The work is :mod:`fleetplan.planning`'s; this module parses, checks outputs before any work,
prints and writes (the printing and writing by :mod:`fleetplan.cli.planning.output`). Exit
codes as everywhere: 0 an answer, 1 none (infeasible targets), 2 bad input.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from fleetplan.cli.common import EXIT_OK
from fleetplan.cli.planning.output import (
    SWEEP_FIELDS,
    _compare_report,
    _labels,
    _size_pictures,
    check_pictures,
    check_sweep_report,
    finish_sweep,
    render_comparison,
    render_sizing,
)
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
    from fleetplan.cli.display.render import fmt_gap, fmt_number
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
        from fleetplan.cli.planning.report import table_html, write_report

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

