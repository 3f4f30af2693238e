"""The ``fleetplan`` command: a thin layer over the public API.

Exit codes: 0 a plan (or a report) was written, 1 the run found no plan (or ``evaluate`` found
violations, or ``solve`` wrote a plan flagged as breaking a constraint), 2 bad input — a file, a flag or an option value — reported in one line naming the
file, JSON path or option (every error found, one per line, when a file has several);
``--json`` adds the same as a JSON object on stdout. Nothing half-written is left behind
(outputs go through a temporary file and a rename). ``--time-limit S`` bounds the whole
command, loading and writing included. Set ``FLEETPLAN_DEBUG=1`` to see the traceback of an
unexpected error.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fleetplan
from fleetplan.cli.common import (
    EXIT_NO_PLAN,
    EXIT_OK,
    EXIT_USAGE,
    SEED,
    THREADS,
    ArgumentParser,
    CommandError,
    check_outputs,
    command_clock,
    judge,
    parse_assignments,
    parse_flag_params,
    positive_seconds,
    print_json,
    progress_display,
    save_last,
    stderr,
    stdout,
    working,
)
from fleetplan.cli.display.render import (
    generator_parameters,
    render_capacity_at_limit,
    render_evaluations,
    render_fleet_cost,
    render_options,
    render_plan,
    render_result,
    render_solver,
)
from fleetplan.cli.settling import settle

# Only the error type at start-up: fleetplan.instances (numpy, pydantic) loads with the first
# command that reads or builds a file, so `fleetplan --help` answers at once.
from fleetplan.errors import KIND_NAMES, InstanceError, error_object, raise_interruption

# --- commands ----------------------------------------------------------------------------

def cmd_generate(args: argparse.Namespace, extra: Sequence[str]) -> int:
    params = parse_flag_params(extra)
    params.update(parse_assignments(args.param, "--param"))
    # `--from FILE --event EVENT [--plan PLAN]`: the next reservation instance after an event.
    event = any(flag in params for flag in ("from", "event", "plan"))
    check_outputs([str(params[f]) for f in ("from", "plan") if event and f in params], files=[("-o", args.output)])
    with working(f"generating a {args.kind} instance", not args.json):
        try:
            if event:
                instance = _next_instance(args.kind)(params, seed=args.seed)
            else:
                instance = fleetplan.generate(args.kind, params, seed=args.seed)
        except MemoryError:
            raise CommandError(f"generate {args.kind}: this machine has not enough memory for an "
                               f"instance of this size ({params}); try a smaller one") from None
        save_last(instance, args.output)
    if args.json:
        print_json({"output": args.output, "kind": args.kind, "params": params, "seed": args.seed})
    else:
        stdout.print(f"wrote {args.kind} instance '{instance.name}' to {args.output}", markup=False)
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    with working(f"validating {args.file}", not args.json):
        instance = fleetplan.load_instance(args.file)
    summary = {"file": args.file, "kind": instance.kind, "name": instance.name, "valid": True}
    if args.json:
        print_json(summary)
    else:
        stdout.print(f"{args.file}: valid {instance.kind} instance '{instance.name}'", markup=False)
    return EXIT_OK


def cmd_solve(args: argparse.Namespace) -> int:
    # Where the command's wall time goes (--json's "phases"): start-up before main() (the
    # interpreter and imports), loading, the solver registry, judging today's plan, the solve
    # (its own judge included), writing.
    phases = {"start_s": time.perf_counter() - command_clock.started}
    clock = [time.perf_counter()]

    def phase(name: str) -> None:
        now = time.perf_counter()
        phases[name] = phases.get(name, 0.0) + now - clock[0]
        clock[0] = now

    options = parse_assignments(args.option, "--option")
    check_outputs([args.file], files=[("-o", args.output)])
    with working(f"loading {args.file}", not args.json):
        loading = time.perf_counter()
        instance = fleetplan.load_instance(args.file)
        load_s = time.perf_counter() - loading
    phase("load_s")
    spec = fleetplan.get_solver(instance.kind, args.solver)
    options = spec.check_options(options)
    phase("solvers_s")
    with working("judging today's plan", not args.json):
        current = fleetplan.instances.evaluate_current(instance)
    phase("judge_today_s")
    # Writing the plan and judging it cost about what loading did; keep that back from the solver.
    reserve = min(load_s, (args.time_limit or 0) / 4)
    with progress_display(f"solving with {spec.name}", not args.json) as update:
        # The limit counts from the command's start, less the reserve; the plan records the
        # limit as given (not what was left after loading: plans then differ run to run).
        result = fleetplan.solve(instance, spec.name, time_limit=args.time_limit, started=command_clock.started - reserve,
                                 seed=args.seed, threads=args.threads, progress=update, **options)
    phase("solve_s")
    marginal = None
    if args.binding and result.success:
        from fleetplan.planning.marginal import marginal_values

        # A line, not a spinner: the spinner's drawing thread would keep the re-solves from
        # being shared over forked processes (a fork is only safe with one thread running).
        if not args.json and stderr.is_terminal:
            stderr.print("measuring what one unit more and fewer of each capacity changes (re-solving)",
                         style="dim", markup=False)
        marginal = marginal_values(instance, spec.name, time_limit=args.time_limit, seed=args.seed,
                                   threads=args.threads, **options)
    # Exit code and files agree: a plan file is written exactly when the exit code says "a plan".
    # The report comes first and the write last, so a signal before the write leaves no plan and
    # one after it (settle) lets the command end with the plan's code.
    written = bool(args.output) and result.success
    # A plan the solver says breaks a constraint (reservation `keep` when today's assignment
    # leaves a guarantee short) is still written, flagged, so today can be compared; the exit
    # code stays 1: no valid plan.
    flagged = bool(args.output) and is_flagged(result)
    if args.json:
        if written:
            save_last(result.plan, args.output)
        elif flagged:
            save_flagged(result.plan, args.output)
        phase("write_s")
        data = result.to_dict()
        data["phases"] = {name: round(seconds, 4) for name, seconds in phases.items()}
        if flagged:
            data["flagged"] = [violation.message for violation in result.evaluation.violations]
        if written or flagged:
            data.pop("plan")
        if current is not None:
            data["current_evaluation"] = current.model_dump()
        if marginal is not None:
            data["marginal_values"] = marginal.to_dict()
        print_json(data)
    else:
        render_result(stdout, result)
        render_fleet_cost(stdout, instance, result.evaluation)
        if result.plan is not None:
            render_plan(stdout, instance, result.plan, result.evaluation, current)
        if result.evaluation is not None and current is not None:
            render_evaluations(stdout, {"today": current, "new plan": result.evaluation},
                               "today's plan and the new plan", explain=args.explain)
        elif result.evaluation is not None:
            render_evaluations(stdout, {"value": result.evaluation}, "evaluation of the plan", explain=args.explain)
        for line in result.log[-10:]:
            if line != result.message:
                stdout.print(line, style="dim", markup=False)
        if marginal is not None:
            from fleetplan.cli.planning.output import render_marginal

            render_marginal(stdout, marginal)
        if written:
            save_last(result.plan, args.output)
            stdout.print(f"wrote plan to {args.output}", markup=False)
        elif flagged:
            save_flagged(result.plan, args.output)
            count = len(result.evaluation.violations)
            stdout.print(f"no valid plan ({result.status}): wrote the plan to {args.output} flagged: it breaks "
                         f"{count} constraint{'s' if count > 1 else ''} (`fleetplan evaluate` lists them)",
                         markup=False)
        elif not result.success:
            stdout.print(f"no plan ({result.status}): nothing written", markup=False)
    return EXIT_OK if result.success else EXIT_NO_PLAN


def is_flagged(result: Any) -> bool:
    """A plan in hand that the solver calls infeasible and the judge finds breaking constraints:
    written with -o all the same (flagged), exit code 1."""
    return (result.status == "infeasible" and result.plan is not None and result.evaluation is not None
            and bool(result.evaluation.violations))


def save_flagged(plan: Any, path: str) -> None:
    """Write a flagged plan; from then on the exit code is 1 (no valid plan), whatever signal comes."""
    fleetplan.save(plan, path)
    settle(EXIT_NO_PLAN)


def cmd_evaluate(args: argparse.Namespace) -> int:
    with working(f"judging {args.plan}", not args.json):
        instance = fleetplan.load_instance(args.file)
        plan = fleetplan.load_plan(args.plan)
        evaluation = judge(instance, plan, args.file, args.plan)
    optimum = _policy_optimum(instance, plan, args) if args.binding else None
    if args.json:
        data = evaluation.model_dump()
        if optimum is not None:
            data["marginal_values"] = optimum.to_dict()
        print_json(data)
    else:
        render_plan(stdout, instance, plan, evaluation)
        render_evaluations(stdout, {"value": evaluation}, f"{args.plan} on {args.file}", explain=args.explain)
        render_capacity_at_limit(stdout, evaluation)
        render_fleet_cost(stdout, instance, evaluation)
        if optimum is not None:
            from fleetplan.cli.planning.output import render_marginal

            stdout.print(f"at the {optimum.solver} optimum of this instance:", markup=False)
            render_marginal(stdout, optimum)
        stdout.print("no violations" if evaluation.feasible else f"{len(evaluation.violations)} violations")
    return EXIT_OK if evaluation.feasible else EXIT_NO_PLAN


def _next_instance(kind: str) -> Any:
    """The kind's next instance after an event (its registration's ``next_instance``)."""
    from fleetplan.instances import KINDS, get_kind

    after_event = get_kind(kind).next_instance
    if after_event is None:
        having = " and ".join(name for name in KINDS if KINDS[name].next_instance)
        raise InstanceError("--from", f"events apply to {having} instances only, not to '{kind}'")
    return after_event


def _policy_optimum(instance: Any, plan: Any, args: argparse.Namespace) -> Any:
    """``evaluate --binding``: what binds belongs to an optimum, not to any plan, so the plan's
    policy is solved on the instance and one unit more and fewer of each capacity measured."""
    from fleetplan.planning.marginal import marginal_values

    if getattr(plan, "policy", None) is None:
        raise CommandError("--binding: evaluate measures it for allocation plans (their policy names the solver); "
                           "for other kinds use `fleetplan solve --binding`")
    name = plan.policy.replace("_", "-")
    known = {entry.name for entry in fleetplan.list_solvers(instance.kind)}
    if name not in known:
        raise CommandError(f"--binding: no solver named after the plan's policy '{plan.policy}'")
    if not args.json and stderr.is_terminal:  # a line, not a spinner (see cmd_solve)
        stderr.print(f"solving {name} with one GPU more and fewer of each type", style="dim", markup=False)
    return marginal_values(instance, name)


def cmd_solvers(args: argparse.Namespace) -> int:
    """``fleetplan solvers [KIND | SOLVER | KIND/SOLVER]``: the list, or one solver's options.

    Read from the solver catalog (:mod:`fleetplan.cli.catalog`), so no solver is imported;
    ``--markdown`` documents the live registry."""
    from fleetplan.cli import catalog as solver_catalog

    target = args.kind
    if target is not None and target not in KIND_NAMES:
        entry = _find_solver(target)
        if args.json:
            print_json(entry)
        else:
            render_solver(stdout, entry)
        return EXIT_OK
    if args.markdown:
        from fleetplan.solvers.options import markdown_table

        specs = fleetplan.list_solvers(target)
        sys.stdout.write(OPTIONS_DOC_HEADER + markdown_table(
            [(spec.kind, spec.name, option) for spec in specs for option in spec.option_specs.values()]))
        return EXIT_OK
    entries = solver_catalog.entries(target)
    if args.json:
        print_json(entries)
        return EXIT_OK
    from rich.table import Table

    table = Table(show_header=True, header_style="bold", caption="`fleetplan solvers NAME` shows a "
                  "solver's options with their types and meanings")
    for column in ("kind", "solver", "exact", "description"):
        table.add_column(column, overflow="fold", no_wrap=column in ("kind", "solver"))
    for entry in entries:
        table.add_row(entry["kind"], entry["name"] + (" (default)" if entry["default"] else ""),
                      "yes" if entry["exact"] else "no", entry["description"])
    stdout.print(table)
    return EXIT_OK


OPTIONS_DOC_HEADER = """# Solver options

Every option of every registered solver: its type, default and meaning. Generated by
`fleetplan solvers --markdown > docs/solver-options.md` from the solvers themselves (their
signatures and docstrings); a test keeps this file equal to that output. Set an option with
`fleetplan solve FILE --solver NAME --option NAME=VALUE`, or `fleetplan.solve(..., NAME=VALUE)`.

"""


def _find_solver(name: str) -> dict[str, Any]:
    """The catalog entry of solver ``name`` (or ``KIND/NAME``)."""
    from fleetplan.cli import catalog as solver_catalog

    kind, _, solver = name.rpartition("/")
    matches = [entry for entry in solver_catalog.entries(kind or None) if entry["name"] == solver]
    if not matches:
        kinds = ", ".join(sorted(KIND_NAMES))
        raise CommandError(f"'{name}' is neither a problem kind ({kinds}) nor a registered solver")
    if len(matches) > 1:
        raise CommandError(f"solver '{solver}' exists for several kinds; name one: "
                           + ", ".join(f"{entry['kind']}/{entry['name']}" for entry in matches))
    return matches[0]


def cmd_metrics(args: argparse.Namespace) -> int:
    """``fleetplan metrics [KIND|SIMULATOR]``: what each metric means, its unit and direction."""
    from fleetplan.instances import glossary

    if args.markdown:
        sys.stdout.write(glossary.markdown())
        return EXIT_OK
    scopes = glossary.SCOPES if args.scope is None else (args.scope,)
    if args.scope is not None and args.scope not in glossary.SCOPES:
        raise CommandError(f"'{args.scope}' is neither a problem kind nor a simulator "
                           f"(known: {', '.join(glossary.SCOPES)})")
    rows = [{"scope": scope, "name": entry.name, "role": entry.role, "unit": entry.unit, "better": entry.better,
             "relative": entry.relative, "meaning": entry.meaning}
            for scope in scopes for entry in glossary.entries(scope)]
    if args.json:
        print_json(rows)
        return EXIT_OK
    from rich.table import Table

    for scope in scopes:
        table = Table(title=f"{scope}: what its numbers mean", header_style="bold", title_justify="left")
        for column in ("name", "unit", "better", "meaning"):
            table.add_column(column, overflow="fold", no_wrap=column == "name", ratio=1 if column == "meaning" else None)
        role = None
        for row in (row for row in rows if row["scope"] == scope):
            if row["role"] != role:
                role = row["role"]
                table.add_row(f"[bold]{glossary.ROLES[role]}[/]", "", "", "")
            table.add_row(row["name"], row["unit"], row["better"] or "-",
                          row["meaning"] + (" (relative to the instance)" if row["relative"] else ""))
        stdout.print(table)
    return EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    print_json(fleetplan.schema(args.kind, plan=args.plan))
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from fleetplan.cli.commands.demo import default_examples, run_demo

    examples = Path(args.examples) if args.examples else default_examples()
    return run_demo(examples, stdout, json_output=args.json)


# --- parser ------------------------------------------------------------------------------

class _DetailedHelp(argparse.Action):
    """``-h``: the command's help, then what the arguments given before it name — a solver's
    options (``solve FILE --solver NAME --help``) or a kind's generator parameters
    (``generate KIND --help``)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = "show this help and exit") -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.print_help()
        kind = getattr(namespace, "kind", None)
        try:
            if parser.prog.endswith(" generate") and kind:
                print()
                render_options(stdout, generator_parameters(fleetplan.instances.get_kind(kind).generate_params),
                               f"generator parameters of {kind} (--NAME VALUE)")
            elif parser.prog.endswith(" solve") and getattr(namespace, "solver", None):
                # The file's kind is not read for --help; a name several kinds use shows each.
                from fleetplan.cli import catalog as solver_catalog

                matches = [entry for entry in solver_catalog.entries() if entry["name"] == namespace.solver]
                for entry in matches or [_find_solver(namespace.solver)]:
                    print()
                    render_solver(stdout, entry)
        except (InstanceError, CommandError) as error:
            stderr.print(f"error: {error}", markup=False)
            parser.exit(EXIT_USAGE)
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="fleetplan", description="Plan GPU fleets for ML training: "
                            "generate, validate, solve and judge instances; benchmark solvers.")
    parser.add_argument("--version", action="version", version=f"fleetplan {fleetplan.__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    kinds = ", ".join(sorted(KIND_NAMES))

    def add(name: str, help_text: str, epilog: str | None = None) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text, epilog=epilog,
                                  add_help=False, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
        sub.add_argument("-h", "--help", action=_DetailedHelp)
        sub.add_argument("--json", action="store_true",
                         help="machine-readable output (and errors) as JSON on stdout")
        return sub

    generate = add("generate", "generate a seeded instance (extra --NAME VALUE flags are generator "
                               "parameters)", epilog="`fleetplan generate KIND --help` lists KIND's parameters; `fleetplan generate "
                    "reservation --from FILE --event new-datacenter|maintenance|growth|hardware-refresh "
                    "[--plan PLAN.json] -o NEXT.json` writes the instance after an event")
    generate.add_argument("kind", help=f"problem kind: {kinds}")
    generate.add_argument("-o", "--output", required=True, help="instance file to write")
    generate.add_argument("--seed", type=SEED, default=0, help="random seed (same seed, same instance)")
    generate.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                          help="a generator parameter (repeatable)")

    validate = add("validate", "check an instance file (every error, one line each)")
    validate.add_argument("file")

    solve = add("solve", "solve an instance file",
                epilog="`fleetplan solve FILE --solver NAME --help` lists the solver's options")
    solve.add_argument("file")
    solve.add_argument("--solver", default=None, help="solver name (`fleetplan solvers KIND`); "
                                                      "default: the kind's default solver")
    solve.add_argument("--time-limit", type=positive_seconds, default=None, metavar="S",
                       help="seconds for the whole command, loading and writing included; "
                            "the best plan found by then is returned")
    solve.add_argument("--seed", type=SEED, default=0, help="random seed (same seed, same plan)")
    solve.add_argument("--threads", type=THREADS, default=1,
                       help="solver threads (at most the machine's cores are used)")
    solve.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                       help="a solver option (repeatable)")
    solve.add_argument("-o", "--output", default=None, help="plan file to write")
    solve.add_argument("--explain", action="store_true",
                       help="add each metric's meaning, unit and better direction under its row")
    solve.add_argument("--binding", action="store_true",
                       help="where the solver gives no LP duals, estimate what binds by re-solving with one "
                            "unit more of each capacity (allocation: a GPU; reservation: a rack of servers)")

    evaluate = add("evaluate", "judge a plan against its instance")
    evaluate.add_argument("file", help="the instance")
    evaluate.add_argument("plan", help="the plan (a `fleetplan solve -o` output)")
    evaluate.add_argument("--explain", action="store_true",
                          help="add each metric's meaning, unit and better direction under its row")
    evaluate.add_argument("--binding", action="store_true",
                          help="allocation: also solve the plan's policy and show its dual prices "
                               "(what one more GPU of each type gains)")

    solvers = add("solvers", "list the registered solvers, or one solver's options")
    solvers.add_argument("kind", nargs="?", default=None, metavar="KIND|SOLVER",
                         help=f"a kind ({kinds}) to list its solvers, or a solver name to show its options")
    solvers.add_argument("--markdown", action="store_true",
                         help="every option of every solver as a Markdown table (docs/solver-options.md)")

    metrics = add("metrics", "what each metric means: its unit and which direction is better",
                  epilog="docs/metrics.md is this list for every kind and simulator")
    metrics.add_argument("scope", nargs="?", default=None, metavar="KIND|SIMULATOR",
                         help=f"a kind ({kinds}) or a simulator (cluster, mast, parsync); default: all")
    metrics.add_argument("--markdown", action="store_true", help="every entry as Markdown (docs/metrics.md)")

    schema = add("schema", "print the JSON Schema of a kind's instance (or plan) files")
    schema.add_argument("kind", help=f"problem kind: {kinds}")
    schema.add_argument("--plan", action="store_true", help="the plan files' schema instead")

    demo = add("demo", "solve the bundled examples and compare solvers")
    demo.add_argument("--examples", default=None, help="folder of example instances (default: the bundled ones)")

    # Each command family adds its own commands; a module that cannot be imported is a bug and
    # fails here, loudly, rather than a command quietly missing from --help.
    for module in ("fleetplan.cli.commands.bench", "fleetplan.cli.commands.tables",
                   "fleetplan.cli.commands.simulate", "fleetplan.cli.planning.commands",
                   "fleetplan.cli.planning.horizon", "fleetplan.cli.commands.serve"):
        importlib.import_module(module).add_arguments(commands)
    return parser


HANDLERS = {
    "validate": cmd_validate, "solve": cmd_solve, "evaluate": cmd_evaluate,
    "solvers": cmd_solvers, "schema": cmd_schema, "demo": cmd_demo, "metrics": cmd_metrics,
}


def report_error(error: Exception, json_mode: bool, code: int = EXIT_USAGE) -> int:
    """One line per error on stderr; with ``--json`` the same as a JSON object on stdout."""
    payload = error_object(error, code)
    for line in payload["errors"]:
        stderr.print(f"error: {line}", markup=False, soft_wrap=True)
    if json_mode:
        print_json(payload)
    return code


def main(argv: Sequence[str] | None = None, started: float | None = None) -> int:
    """Run the command line; ``started`` (a ``time.perf_counter()`` reading) is when the
    command began for ``--time-limit`` (the console script passes the process's start)."""
    command_clock.start(started)
    argv = list(sys.argv[1:] if argv is None else argv)
    json_mode = "--json" in argv
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        args.argv = argv  # as typed: a report says how to reproduce it
        if args.command == "generate":
            return cmd_generate(args, extra)
        if args.command == "simulate":
            from fleetplan.cli.commands.simulate import run as run_simulation

            return run_simulation(args, list(extra))
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if hasattr(args, "handler"):
            return int(args.handler(args) or 0)
        return HANDLERS[args.command](args)
    except (InstanceError, CommandError) as error:
        return report_error(error, json_mode)
    except KeyboardInterrupt:
        stderr.print("fleetplan: interrupted", markup=False)
        return 130
    except MemoryError:
        return report_error(CommandError("not enough memory for this input on this machine"), json_mode)
    except OSError as error:
        # A file that could not be read or written (a full disk, `ulimit -f`, a folder made
        # read-only while the command ran): the file and the system's reason, one line.
        where = f"{error.filename}: " if error.filename else ""
        return report_error(CommandError(f"{where}{error.strerror or error}"), json_mode)
    except Exception as error:  # noqa: BLE001 - the one place that turns bugs into one line
        raise_interruption(error)
        if os.environ.get("FLEETPLAN_DEBUG"):
            raise
        return report_error(CommandError(f"internal error: {type(error).__name__}: {error} "
                                         "(set FLEETPLAN_DEBUG=1 for the traceback)"), json_mode, EXIT_NO_PLAN)


if __name__ == "__main__":
    sys.exit(main())
