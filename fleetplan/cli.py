"""The ``fleetplan`` command: a thin layer over the public API.

Errors in what the user gave (files, fields, options) print one line and exit with code 2;
nothing half-written is left behind (outputs go through a temporary file and a rename).
Set ``FLEETPLAN_DEBUG=1`` to see the traceback of an unexpected error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

import fleetplan
from fleetplan.instances import InstanceError, evaluate_current, get_kind, load_plan
from fleetplan.instances.base import Evaluation, atomic_write_text
from fleetplan.solvers import SolveResult

EXIT_USAGE = 2
# Off a terminal (CI logs, pipes) rich would wrap tables at 80 columns; logs are wider.
stdout = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
stderr = Console(stderr=True, highlight=False)


class CommandError(Exception):
    """A usage problem found by the command itself (exit code 2)."""


# --- helpers -----------------------------------------------------------------------------

def parse_value(text: str) -> Any:
    """``'3'`` -> 3, ``'true'`` -> True, ``'[1, 2]'`` -> [1, 2], anything else stays a string."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_assignments(pairs: Sequence[str], what: str) -> dict[str, Any]:
    """``["jobs=8", "multi_gpu=false"]`` -> ``{"jobs": 8, "multi_gpu": False}``."""
    result: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise CommandError(f"{what} '{pair}': expected NAME=VALUE")
        name, value = pair.split("=", 1)
        result[name.strip().replace("-", "_")] = parse_value(value)
    return result


def parse_flag_params(extra: Sequence[str]) -> dict[str, Any]:
    """Turn leftover ``--name value`` (or ``--name=value``, or a bare ``--flag``) into params."""
    params: dict[str, Any] = {}
    index = 0
    while index < len(extra):
        token = extra[index]
        if not token.startswith("--") or token == "--":
            raise CommandError(f"unexpected argument '{token}'")
        name = token[2:]
        if "=" in name:
            name, value = name.split("=", 1)
            params[name.replace("-", "_")] = parse_value(value)
            index += 1
        elif index + 1 < len(extra) and not extra[index + 1].startswith("--"):
            params[name.replace("-", "_")] = parse_value(extra[index + 1])
            index += 2
        else:
            params[name.replace("-", "_")] = True
            index += 1
    return params


def check_output_path(path: str | None) -> None:
    """Fail before any work when the output file could not be written."""
    if path is None:
        return
    parent = Path(path).parent
    if not parent.exists():
        raise CommandError(f"-o {path}: directory '{parent}' does not exist")
    if Path(path).is_dir():
        raise CommandError(f"-o {path}: is a directory")


def write_json(path: str, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=1, default=str) + "\n")


def fmt(value: float | None, digits: int = 6) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}"


@contextlib.contextmanager
def progress_display(description: str, enabled: bool) -> Iterator[Any]:
    """A transient progress bar on stderr (terminals only); yields a ``progress`` callback."""
    if not enabled or not stderr.is_terminal:
        yield None
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=stderr, transient=True) as bar:
        task = bar.add_task(description, total=1.0)

        def update(fraction: float | None, message: str) -> None:
            bar.update(task, completed=fraction if fraction is not None else None,
                       description=f"{description}: {message}")

        yield update


def working(message: str, enabled: bool = True) -> contextlib.AbstractContextManager[Any]:
    """A spinner on stderr while something runs (terminals only; --json runs stay silent)."""
    if not enabled or not stderr.is_terminal:
        return contextlib.nullcontext()
    return stderr.status(message)


# --- rendering ---------------------------------------------------------------------------

def render_evaluations(columns: dict[str, Evaluation], title: str) -> None:
    """One or more verdicts side by side (e.g. today's plan and the new one): objective, terms,
    metrics and violation counts; then the last column's violations, one line each."""
    verdicts = list(columns.values())
    last = verdicts[-1]
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("measure")
    for heading in columns:
        table.add_column(heading, justify="right")

    def row(label: str, values: list[float | None], digits: int = 6) -> None:
        table.add_row(label, *[fmt(value, digits) for value in values])

    row("objective" + (" (maximize)" if last.sense == "max" else " (minimize)"),
        [e.objective for e in verdicts], 8)
    for name in last.terms:
        row(f"  term {name}", [e.terms.get(name) for e in verdicts], 8)
    for name in last.metrics:
        row(name, [e.metrics.get(name) for e in verdicts])
    table.add_row("violations", *[str(len(e.violations)) for e in verdicts])
    stdout.print(table)
    for violation in last.violations[:20]:
        stdout.print(f"  violation {violation.constraint} at {violation.where}: "
                     f"{violation.amount:.6g} {violation.message}")


def render_result(result: SolveResult) -> None:
    table = Table(title=f"{result.kind} / {result.solver}", show_header=True, header_style="bold")
    for column in ("status", "objective", "bound", "gap", "wall s"):
        table.add_column(column, justify="right")
    table.add_row(result.status, fmt(result.objective, 8), fmt(result.bound, 8),
                  fmt(result.gap, 3), f"{result.wall_s:.3f}")
    stdout.print(table)
    if result.message:
        stdout.print(result.message)


# --- commands ----------------------------------------------------------------------------

def cmd_generate(args: argparse.Namespace, extra: Sequence[str]) -> int:
    params = parse_flag_params(extra)
    params.update(parse_assignments(args.param, "--param"))
    check_output_path(args.output)
    with working(f"generating a {args.kind} instance", not args.json):
        instance = fleetplan.generate(args.kind, params, seed=args.seed)
        fleetplan.save(instance, args.output)
    if args.json:
        print_json({"output": args.output, "kind": args.kind, "params": params, "seed": args.seed})
    else:
        stdout.print(f"wrote {args.kind} instance '{instance.name}' to {args.output}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    with working(f"validating {args.file}", not args.json):
        instance = fleetplan.load_instance(args.file)
    summary = {"file": args.file, "kind": instance.kind, "name": instance.name, "valid": True}
    if args.json:
        print_json(summary)
    else:
        stdout.print(f"{args.file}: valid {instance.kind} instance '{instance.name}'")
    return 0


def cmd_solve(args: argparse.Namespace) -> int:
    with working(f"loading {args.file}", not args.json):
        instance = fleetplan.load_instance(args.file)
    options = parse_assignments(args.option, "--option")
    check_output_path(args.output)
    with progress_display(f"solving with {args.solver or 'default solver'}", not args.json) as update:
        result = fleetplan.solve(instance, args.solver, time_limit=args.time_limit, seed=args.seed,
                                 threads=args.threads, progress=update, **options)
    if args.output and result.plan is not None:
        fleetplan.save(result.plan, args.output)
    with working("judging today's plan", not args.json):
        current = evaluate_current(instance)
    if args.json:
        data = result.to_dict()
        if args.output:
            data.pop("plan")
        if current is not None:
            data["current_evaluation"] = current.model_dump()
        print_json(data)
    else:
        render_result(result)
        if result.evaluation is not None and current is not None:
            render_evaluations({"today": current, "new plan": result.evaluation},
                               "today's plan and the new plan")
        elif result.evaluation is not None:
            render_evaluations({"value": result.evaluation}, "evaluation of the plan")
        if args.output and result.plan is not None:
            stdout.print(f"wrote plan to {args.output}")
        for line in result.log[-10:]:
            if line != result.message:
                stdout.print(line, style="dim", markup=False)
    return 0 if result.status in ("optimal", "feasible", "time_limit") else 1


def cmd_evaluate(args: argparse.Namespace) -> int:
    with working(f"judging {args.plan}", not args.json):
        instance = fleetplan.load_instance(args.file)
        plan = load_plan(args.plan)
        evaluation = fleetplan.evaluate(instance, plan)
    if args.json:
        print_json(evaluation.model_dump())
    else:
        render_evaluations({"value": evaluation}, f"{args.plan} on {args.file}")
        stdout.print("no violations" if evaluation.feasible else f"{len(evaluation.violations)} violations")
    return 0 if evaluation.feasible else 1


def cmd_solvers(args: argparse.Namespace) -> int:
    if args.kind is not None:
        get_kind(args.kind)
    specs = fleetplan.solvers(args.kind)
    if args.json:
        print_json([{"kind": s.kind, "name": s.name, "exact": s.exact, "default": s.default,
                     "description": s.description, "reference": s.reference,
                     "options": {k: repr(v) for k, v in s.options.items()}} for s in specs])
        return 0
    table = Table(show_header=True, header_style="bold")
    for column in ("kind", "solver", "exact", "options", "description"):
        table.add_column(column)
    for spec in specs:
        options = ", ".join(f"{k}={v!r}" for k, v in spec.options.items())
        table.add_row(spec.kind, spec.name + (" (default)" if spec.default else ""),
                      "yes" if spec.exact else "no", options, spec.description)
    stdout.print(table)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    print_json(fleetplan.schema(args.kind))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from fleetplan.demo import run_demo

    with working("solving the bundled examples", not args.json):
        return run_demo(Path(args.examples), stdout, json_output=args.json)


# --- parser ------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fleetplan", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"fleetplan {fleetplan.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--json", action="store_true", help="machine-readable output on stdout")
        return sub

    generate = add("generate", "generate a seeded instance (extra --NAME VALUE flags are generator parameters)")
    generate.add_argument("kind", help="problem kind: " + ", ".join(sorted(fleetplan.KINDS)))
    generate.add_argument("-o", "--output", required=True, help="instance file to write")
    generate.add_argument("--seed", type=int, default=0)
    generate.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                          help="a generator parameter (repeatable)")

    validate = add("validate", "check an instance file")
    validate.add_argument("file")

    solve = add("solve", "solve an instance file")
    solve.add_argument("file")
    solve.add_argument("--solver", default=None, help="solver name (see `fleetplan solvers`)")
    solve.add_argument("--time-limit", type=float, default=None, metavar="S")
    solve.add_argument("--seed", type=int, default=0)
    solve.add_argument("--threads", type=int, default=1)
    solve.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                       help="a solver option (repeatable)")
    solve.add_argument("-o", "--output", default=None, help="plan file to write")

    evaluate = add("evaluate", "judge a plan against its instance")
    evaluate.add_argument("file")
    evaluate.add_argument("plan")

    solvers = add("solvers", "list the registered solvers")
    solvers.add_argument("kind", nargs="?", default=None)

    schema = add("schema", "print the JSON Schema of a kind's instance files")
    schema.add_argument("kind")

    demo = add("demo", "solve the bundled examples and compare solvers")
    demo.add_argument("--examples", default="examples", help="folder of example instances")

    try:
        from fleetplan.benchmarks.command import add_arguments as add_bench
    except ImportError:  # the benchmark harness is optional at import time
        add_bench = None
    if add_bench is not None:
        add_bench(commands)
    return parser


HANDLERS = {
    "validate": cmd_validate, "solve": cmd_solve, "evaluate": cmd_evaluate,
    "solvers": cmd_solvers, "schema": cmd_schema, "demo": cmd_demo,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    try:
        if args.command == "generate":
            return cmd_generate(args, extra)
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if hasattr(args, "handler"):
            return int(args.handler(args) or 0)
        return HANDLERS[args.command](args)
    except (InstanceError, CommandError) as error:
        stderr.print(f"error: {error}", markup=False, soft_wrap=True)
        return EXIT_USAGE
    except KeyboardInterrupt:
        stderr.print("interrupted", markup=False)
        return 130
    except Exception as error:  # noqa: BLE001 - the one place that turns bugs into one line
        if os.environ.get("FLEETPLAN_DEBUG"):
            raise
        stderr.print(f"internal error: {type(error).__name__}: {error} (set FLEETPLAN_DEBUG=1 for the traceback)",
                     markup=False, soft_wrap=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
