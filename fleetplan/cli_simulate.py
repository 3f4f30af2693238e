"""The ``fleetplan simulate`` sub-command (wired into :mod:`fleetplan.cli` by :func:`add_arguments`).

::

    fleetplan simulate                       # the simulators, their schedulers and scenario fields
    fleetplan simulate NAME [--scheduler S] [--seed K] [--NAME VALUE ...] [-o result.json] [--plot fig.png]

Scenario fields are given as extra ``--FIELD VALUE`` flags (or ``--param FIELD=VALUE``), like
generator parameters; ``fleetplan simulate NAME --help`` lists them.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_arguments(subparsers: Any) -> argparse.ArgumentParser:
    simulate = subparsers.add_parser(
        "simulate", help="run a simulator (cluster, parsync, ...) on a scenario",
        description="Run one simulator on a scenario with one scheduler and seed; "
                    "sweeps over load, seed and scheduler run through `fleetplan bench`.",
        add_help=False)
    simulate.add_argument("-h", "--help", action=_SimulatorHelp)
    simulate.add_argument("name", nargs="?", default=None, help="simulator name (omit to list them)")
    simulate.add_argument("--scheduler", default=None, help="scheduler (default: the simulator's first)")
    simulate.add_argument("--seed", type=int, default=0, help="random seed (same seed, same result)")
    simulate.add_argument("--param", action="append", default=[], metavar="FIELD=VALUE",
                          help="a scenario field (repeatable); or give --FIELD VALUE")
    simulate.add_argument("-o", "--output", default=None, help="write the full result (metrics, "
                                                               "groups, series) as JSON")
    simulate.add_argument("--plot", default=None, metavar="FILE.png", help="draw the result")
    simulate.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    simulate.set_defaults(handler=None, takes_extra=True)
    return simulate


class _SimulatorHelp(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help="show this help"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from fleetplan import sim
        from fleetplan.cli_common import stdout
        from fleetplan.cli_render import generator_parameters, render_options

        parser.print_help()
        if getattr(namespace, "name", None):
            spec = sim.get_simulator(namespace.name)
            print(f"\n{spec.name}: {spec.description}\nschedulers: {', '.join(spec.schedulers)}")
            render_options(stdout, generator_parameters(spec.scenario_type), f"scenario fields of {spec.name}")
        parser.exit()


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from fleetplan import sim
    from fleetplan.cli_common import (
        CommandError,
        check_output_path,
        parse_assignments,
        parse_flag_params,
        print_json,
        stdout,
        working,
        write_json,
    )
    from fleetplan.cli_render import fmt_measure

    if args.name is None:
        listing = [{"name": name, "schedulers": list(sim.get_simulator(name).schedulers),
                    "description": sim.get_simulator(name).description} for name in sim.names()]
        if args.json:
            print_json(listing)
        else:
            for item in listing:
                stdout.print(f"[bold]{item['name']}[/]: {item['description']}")
                stdout.print(f"  schedulers: {', '.join(item['schedulers'])}", markup=False)
        return 0
    spec = sim.get_simulator(args.name)
    scenario = parse_flag_params(extra)
    scenario.update(parse_assignments(args.param, "--param"))
    check_output_path(args.output)
    check_output_path(args.plot)
    if args.plot and spec.plot is None:
        raise CommandError(f"--plot: simulator '{spec.name}' draws no plot")
    with working(f"simulating {spec.name}", not args.json):
        result = spec.run(scenario, args.scheduler, args.seed)
    data = result.to_dict()
    if args.output:
        write_json(args.output, data)
    if args.plot:
        spec.plot(result, args.plot)
    if args.json:
        if args.output:
            data.pop("series")
        print_json(data)
        return 0
    from rich.table import Table

    stdout.print(f"[bold]{spec.name} / {result.scheduler}[/] (seed {result.seed}): {result.events} events, "
                 f"{fmt_measure('sim_time_s', result.sim_time)} simulated in {fmt_measure('wall_s', result.wall_s)}")
    table = Table(header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in result.metrics.items():
        table.add_row(name, fmt_measure(name, value))
    stdout.print(table)
    if result.message:
        stdout.print(result.message, markup=False)
    for path in (args.output, args.plot):
        if path:
            stdout.print(f"wrote {path}", markup=False)
    sys.stdout.flush()
    return 0


__all__ = ["add_arguments", "run"]
