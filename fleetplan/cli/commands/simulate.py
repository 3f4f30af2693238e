"""The ``fleetplan simulate`` sub-command (wired into :mod:`fleetplan.cli` by :func:`add_arguments`).

::

    fleetplan simulate [--list]              # the simulators and their schedulers
    fleetplan simulate NAME [--scheduler S] [--seed K] [--FIELD VALUE ...] [-o result.json] [--plot fig.png]
    fleetplan simulate NAME ... --out DIR    # DIR/result.json and the simulator's plot(s), all or nothing

Scenario fields are given as extra ``--FIELD VALUE`` flags (or ``--param FIELD=VALUE``), like
generator parameters; ``fleetplan simulate NAME --help`` lists them. On a terminal (and not under
``--json``) a progress bar follows simulated time for simulators that report it
(:attr:`fleetplan.sim.engine.SimulatorSpec.takes_progress`), a spinner otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RESULT_FILE = "result.json"


def add_arguments(subparsers: Any) -> argparse.ArgumentParser:
    simulate = subparsers.add_parser(
        "simulate", help="run a simulator (cluster, parsync, ...) on a scenario",
        description="Run one simulator on a scenario with one scheduler and seed; "
                    "sweeps over load, seed and scheduler run through `fleetplan bench`.",
        add_help=False)
    simulate.add_argument("-h", "--help", action=_SimulatorHelp)
    simulate.add_argument("name", nargs="?", default=None, help="simulator name (omit to list them)")
    simulate.add_argument("--list", action="store_true", dest="list_simulators",
                          help="list the simulators and their schedulers (as with no name)")
    simulate.add_argument("--scheduler", default=None, help="scheduler (default: the simulator's first)")
    simulate.add_argument("--seed", type=_seed, default=0, help="random seed (same seed, same result)")
    simulate.add_argument("--param", action="append", default=[], metavar="FIELD=VALUE",
                          help="a scenario field (repeatable); or give --FIELD VALUE")
    simulate.add_argument("-o", "--output", default=None, help="write the full result (metrics, "
                                                               "groups, series) as JSON")
    simulate.add_argument("--plot", default=None, metavar="FILE.png", help="draw the result")
    simulate.add_argument("--out", default=None, metavar="DIR",
                          help=f"write {RESULT_FILE} and the plot PNG(s) into the new directory DIR "
                               "(made whole at the end: a failure leaves no DIR)")
    simulate.add_argument("--time-limit", type=_seconds, default=None, metavar="S",
                          help="seconds for the whole command; a simulation not finished by then "
                               "gives no result: exit code 1 and nothing written")
    simulate.add_argument("--explain", action="store_true",
                          help="add each metric's meaning, unit and better direction under its row")
    simulate.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    simulate.set_defaults(handler=None, takes_extra=True)
    return simulate


def _seed(text: str) -> int:
    from fleetplan.cli.common import SEED

    return SEED(text)


_seed.__name__ = "integer"


def _seconds(text: str) -> float:
    from fleetplan.cli.common import positive_seconds

    return positive_seconds(text)


_seconds.__name__ = "seconds"
# Kept back from --time-limit for writing the outputs (importing matplotlib for a plot takes a
# second on a quiet machine), at most a quarter of the limit.
WRITE_RESERVE_S = 0.2
PLOT_RESERVE_S = 1.5


class _SimulatorHelp(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help="show this help"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from fleetplan import sim
        from fleetplan.cli.common import stdout
        from fleetplan.cli.display.render import generator_parameters, render_options

        parser.print_help()
        if getattr(namespace, "name", None):
            spec = sim.get_simulator(namespace.name)
            print(f"\n{spec.name}: {spec.description}\nschedulers: {', '.join(spec.schedulers)}")
            for flag, text in spec.flags_help:
                print(f"  {flag:<16} {text}")
            render_options(stdout, generator_parameters(spec.scenario_type), f"scenario fields of {spec.name}")
        parser.exit()


def scenario_inputs(scenario: dict[str, Any]) -> list[str]:
    """The files a scenario reads (any field whose value names an existing file, such as
    ``--file`` or a trace): outputs may not overwrite them."""
    return [value for value in scenario.values()
            if isinstance(value, str) and len(value) < 4096 and os.path.isfile(value)]


def check_outputs(args: argparse.Namespace, inputs: list[str]) -> None:
    """Fail before simulating when an output could not be written safely, would overwrite an
    input, or two outputs name the same file."""
    from fleetplan.cli.common import check_outputs as check_command_outputs
    from fleetplan.instances.outputs import check_figure_path

    check_command_outputs(inputs, files=[("-o", args.output), ("--plot", args.plot)], folders=[("--out", args.out)])
    if args.plot:
        check_figure_path(args.plot)


def _hours_or_seconds(seconds: float, end: float) -> str:
    if end >= 3600:
        return f"{seconds / 3600:.2f} h"
    if end >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


@contextlib.contextmanager
def simulated_time_bar(title: str, enabled: bool, unit_s: float = 1.0) -> Iterator[Any]:
    """A transient bar on stderr following simulated time (terminals only); yields the
    ``progress(now, end)`` callback (times in units of ``unit_s`` seconds), or None when no bar
    is shown."""
    from fleetplan.cli.common import stderr

    if not enabled or not stderr.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[clock]}"),
               TimeElapsedColumn())
    with Progress(*columns, console=stderr, transient=True) as bar:
        task = bar.add_task(title, total=1.0, clock="")
        last = [0.0]

        def progress(now: float, end: float) -> None:
            # Simulators may call this per event; redraw at most 20 times a second.
            tick = time.monotonic()
            if tick - last[0] < 0.05 and now < end:
                return
            last[0] = tick
            now, end = now * unit_s, end * unit_s
            if end > 0 and end != float("inf"):
                bar.update(task, completed=min(max(now / end, 0.0), 1.0),
                           clock=f"{_hours_or_seconds(now, end)} of {_hours_or_seconds(end, end)} simulated")
            else:
                bar.update(task, clock=f"{_hours_or_seconds(now, now)} simulated")

        yield progress


def _list(args: argparse.Namespace, extra: list[str]) -> int:
    from fleetplan import sim
    from fleetplan.cli.common import CommandError, print_json, stdout

    if extra or args.param:
        raise CommandError(f"scenario fields ({' '.join(extra) or ' '.join(args.param)}) need a simulator name")
    for flag, value in (("-o", args.output), ("--plot", args.plot), ("--out", args.out)):
        if value is not None:
            raise CommandError(f"{flag}: needs a simulator name (fleetplan simulate NAME {flag} ...)")
    listing = [{"name": name, "schedulers": list(sim.get_simulator(name).schedulers),
                "description": sim.get_simulator(name).description} for name in sim.names()]
    if args.json:
        print_json(listing)
    else:
        for item in listing:
            stdout.print(f"[bold]{item['name']}[/]: {item['description']}")
            stdout.print(f"  schedulers: {', '.join(item['schedulers'])}", markup=False)
    return 0


def _write_out_dir(spec: Any, result: Any, data: dict[str, Any], path: str) -> list[str]:
    """DIR/result.json and the simulator's figures, made whole at the end."""
    from fleetplan.cli.common import write_json
    from fleetplan.instances.outputs import atomic_write_text, building_folder
    from fleetplan.plotting import simulation_figures

    with building_folder(path) as building:
        write_json(str(building / RESULT_FILE), data)
        names = [RESULT_FILE]
        for name, text in (spec.tables(result) if spec.tables is not None else {}).items():
            atomic_write_text(building / name, text)
            names.append(name)
        names += [os.path.relpath(file, building) for file in simulation_figures(result, str(building))]
    return [str(Path(path) / name) for name in names]


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from fleetplan import sim
    from fleetplan.cli.common import (
        CommandError,
        parse_assignments,
        parse_flag_params,
        print_json,
        stdout,
        working,
        write_json,
    )
    from fleetplan.cli.display.render import explanation, fmt_measure
    from fleetplan.cli.settling import settle
    from fleetplan.instances.glossary import describe

    if args.list_simulators and args.name is not None:
        raise CommandError(f"--list takes no simulator name (got '{args.name}')")
    if args.name is None:
        return _list(args, extra)
    spec = sim.get_simulator(args.name)
    scenario = parse_flag_params(extra)
    scenario.update(parse_assignments(args.param, "--param"))
    scheduler = args.scheduler
    if spec.flags is not None:
        scenario, scheduler = spec.flags(scenario, scheduler)
    check_outputs(args, scenario_inputs(scenario))
    title = f"simulating {spec.name} / {scheduler or spec.schedulers[0]}"
    limit = _simulation_seconds(args)
    try:
        if spec.takes_progress:
            from fleetplan.sim.engine import TIME_UNITS

            with simulated_time_bar(title, not args.json, TIME_UNITS[spec.time_unit]) as bar:
                result = spec.run(scenario, scheduler, args.seed, progress=bar, time_limit=limit)
        else:
            with working(title, not args.json):
                result = spec.run(scenario, scheduler, args.seed, time_limit=limit)
    except sim.SimulationTimeLimit as stop:
        return _out_of_time(args, spec, stop.reached)
    data = result.to_dict()
    written: list[str] = []
    if args.output:
        write_json(args.output, data)
        written.append(args.output)
    if args.plot:
        from fleetplan.plotting import plot_simulation

        plot_simulation(result, args.plot)
        written.append(args.plot)
    if args.out:  # last: a failure before it leaves no DIR
        written += _write_out_dir(spec, result, data, args.out)
    settle(0)  # the outputs are in place: the report that follows cannot change the exit code
    if args.json:
        if args.output or args.out:
            data.pop("series")
        print_json(data)
        return 0
    from rich.table import Table

    stdout.print(f"[bold]{spec.name} / {result.scheduler}[/] (seed {result.seed}): {result.events} events, "
                 f"{fmt_measure('sim_time_s', result.sim_time)} simulated in {fmt_measure('wall_s', result.wall_s)}")
    table = Table(header_style="bold")
    table.add_column("metric", overflow="fold")
    table.add_column("value", justify="right")
    alerts = []
    for name, value in result.metrics.items():
        entry = describe(name, spec.name)
        note = entry.alerts(value) if entry is not None else None
        table.add_row(name, fmt_measure(name, value, scope=spec.name) + (" [yellow]![/]" if note else ""))
        if note:
            alerts.append(f"{name} {fmt_measure(name, value, scope=spec.name)}: {note}")
        if args.explain:
            table.add_row(f"[dim]  {explanation(name, spec.name)}[/]", "")
    stdout.print(table)
    for line in alerts:
        stdout.print(f"[yellow]![/] {line}", highlight=False)
    if result.message:
        stdout.print(result.message, markup=False)
    for path in written:
        stdout.print(f"wrote {path}", markup=False)
    sys.stdout.flush()
    return 0


def _simulation_seconds(args: argparse.Namespace) -> float | None:
    """What is left of ``--time-limit`` for building and simulating, writing kept back."""
    from fleetplan.cli.common import time_left

    if args.time_limit is None:
        return None
    plots = args.plot is not None or args.out is not None
    reserve = min(WRITE_RESERVE_S + (PLOT_RESERVE_S if plots else 0.0), args.time_limit / 4)
    return time_left(args.time_limit, reserve)


def _out_of_time(args: argparse.Namespace, spec: Any, reached: tuple[float, float] | None) -> int:
    """No result: one line saying how far the simulation got, exit code 1, nothing written
    (a partial result's metrics would describe a different, shorter run)."""
    from fleetplan.cli.common import print_json, stderr
    from fleetplan.sim.engine import TIME_UNITS

    how_far = ""
    if reached:
        unit = TIME_UNITS[spec.time_unit]
        now, end = reached[0] * unit, reached[1] * unit
        total = f" of {_hours_or_seconds(end, end)}" if 0 < end < float("inf") else ""
        how_far = f" after {_hours_or_seconds(now, max(end, now))}{total} of simulated time"
    line = (f"simulate {spec.name}: stopped at --time-limit {args.time_limit:g} s{how_far}; no result, "
            "nothing written")
    stderr.print(f"error: {line}", markup=False, soft_wrap=True)
    if args.json:
        print_json({"error": line, "errors": [line], "exit_code": 1})
    return 1


__all__ = ["add_arguments", "check_outputs", "run", "scenario_inputs", "simulated_time_bar"]
