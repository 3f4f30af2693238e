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
from typing import Any


def add_arguments(subparsers: Any) -> None:
    """Add ``size``, ``whatif`` and ``compare`` to the command line."""
    from fleetplan.cli.common import SEED, THREADS, positive_seconds

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
    size.add_argument("--threads", type=THREADS, default=1)
    size.add_argument("--seed", type=SEED, default=0)
    size.add_argument("--targets", dest="list_targets", default=None, metavar="KIND",
                      help="list the metrics a KIND can be sized for, and exit")
    size.add_argument("-o", "--output", default=None, metavar="SIZED.json", help="write the sized instance")
    size.add_argument("--plan", default=None, metavar="PLAN.json",
                      help="write the sized instance's plan (the policy's, judged)")
    size.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    size.set_defaults(handler=handle_size)


def _non_negative(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text[:40]}' is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text[:40]} is not allowed: must be a finite number >= 0")
    return value


def handle_size(args: argparse.Namespace) -> int:
    """``fleetplan size``."""
    import fleetplan
    from fleetplan.cli.common import CommandError, check_output_path, print_json, stdout, working
    from fleetplan.planning import size

    if args.list_targets is not None:
        return _list_targets(args)
    if args.file is None:
        raise CommandError("size: give the INSTANCE to size (or --targets KIND to list the metrics)")
    check_output_path(args.output, inputs=[args.file])
    check_output_path(args.plan, inputs=[args.file], flag="--plan")
    if args.output and args.plan and args.output == args.plan:
        raise CommandError("-o and --plan name the same file")
    with working(f"loading {args.file}", not args.json):
        instance = fleetplan.load_instance(args.file)
    with working(f"sizing {instance.kind} '{instance.name}'", not args.json):
        result = size(instance, args.target, args.buy, budget=args.budget, policy=args.policy,
                      time_limit=args.time_limit, threads=args.threads, seed=args.seed)
    if result.success:
        if args.output:
            fleetplan.save(result.sized_instance, args.output)
        if args.plan and result.plan is not None:
            fleetplan.save(result.plan, args.plan)
    if args.json:
        print_json({**result.to_dict(), "output": args.output if result.success else None})
    else:
        render_sizing(stdout, result)
        if result.success and args.output:
            stdout.print(f"wrote the sized instance to {args.output}", markup=False)
        if result.success and args.plan and result.plan is not None:
            stdout.print(f"wrote its plan to {args.plan}", markup=False)
        if not result.success:
            stdout.print(f"no sizing ({result.status}): nothing written", markup=False)
    return 0 if result.success else 1


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
    """The purchase, its cost, the bound and gap, and each target's check."""
    from rich.table import Table

    from fleetplan.cli.render import fmt, fmt_measure

    console.print(f"[bold]{result.status}[/]: {result.message}" if result.message else f"[bold]{result.status}[/]")
    if result.additions:
        table = Table(title="purchase", header_style="bold")
        table.add_column("buy")
        table.add_column("units", justify="right")
        for name, units in result.additions.items():
            table.add_row(name, fmt(units))
        console.print(table)
    console.print(f"cost {fmt(result.cost)}   bound {fmt(result.bound)}   gap "
                  f"{'-' if result.gap is None else f'{100 * result.gap:.3g}%'}   ({result.wall_s:.2f} s)", markup=False)
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
