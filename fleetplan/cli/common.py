"""What every ``fleetplan`` sub-command shares: consoles, exit codes, argument parsing helpers,
JSON output, output-path checks and progress displays (imported by :mod:`fleetplan.cli` and the
sub-command modules, which import nothing back from it)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from fleetplan.cli.display.render import make_console
from fleetplan.cli.settling import settle
from fleetplan.errors import clip

# yaml, rich.progress and fleetplan.instances load where used: `fleetplan --help` needs none.

EXIT_OK, EXIT_NO_PLAN, EXIT_USAGE = 0, 1, 2
stdout = make_console()
stderr = make_console(stderr=True)


class CommandError(ValueError):
    """A usage problem found by the command itself (exit code 2)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with usage errors raised (so ``--json`` can report them) instead of printed."""

    def error(self, message: str) -> Any:
        raise CommandError(f"{self.prog}: {message}")


# --- the command's clock: --time-limit counts from its start (loading and writing included) ---

class CommandClock:
    """When the running command started (the console script passes the process's start)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()

    def start(self, started: float | None = None) -> None:
        self.started = time.perf_counter() if started is None else started


command_clock = CommandClock()


def time_left(limit: float | None, reserve: float = 0.0) -> float | None:
    """What is left of the command's --time-limit after what it has spent, less ``reserve``."""
    if limit is None:
        return None
    return max(limit - (time.perf_counter() - command_clock.started) - reserve, 0.01)


# --- helpers -----------------------------------------------------------------------------

def parse_value(text: str, what: str = "") -> Any:
    """``'3'`` -> 3, ``'true'`` -> True, ``'[1, 2]'`` -> [1, 2], ``'1e-9'`` -> 1e-09 (YAML 1.2
    numbers), anything else stays a string.

    Bounded as bench suites are (:mod:`fleetplan.bounded_yaml`: length, nesting depth and size
    once aliases are expanded): a value past a bound is refused naming ``what`` (the option or
    parameter), never expanded."""
    import yaml

    from fleetplan import bounded_yaml

    try:
        return bounded_yaml.load(text, path=what)
    except yaml.YAMLError:
        if len(text) > bounded_yaml.MAX_BYTES:
            raise CommandError(f"{what}: value longer than {bounded_yaml.MAX_BYTES:,} characters") from None
        return text


def parse_assignments(pairs: Sequence[str], what: str) -> dict[str, Any]:
    """``["jobs=8", "multi_gpu=false"]`` -> ``{"jobs": 8, "multi_gpu": False}``."""
    result: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise CommandError(f"{what} '{clip(pair)}': expected NAME=VALUE")
        name, value = pair.split("=", 1)
        name = name.strip().replace("-", "_")
        result[name] = parse_value(value, f"{what} {clip(name)}")
    return result


def parse_flag_params(extra: Sequence[str]) -> dict[str, Any]:
    """Turn leftover ``--name value`` (or ``--name=value``, or a bare ``--flag``) into params."""
    params: dict[str, Any] = {}
    index = 0
    while index < len(extra):
        token = extra[index]
        if not token.startswith("--") or token == "--":
            raise CommandError(f"unexpected argument '{clip(token)}'")
        name = token[2:]
        if "=" in name:
            name, value = name.split("=", 1)
            params[name.replace("-", "_")] = parse_value(value, f"--{clip(name)}")
            index += 1
        elif index + 1 < len(extra) and not extra[index + 1].startswith("--"):
            params[name.replace("-", "_")] = parse_value(extra[index + 1], f"--{clip(name)}")
            index += 2
        else:
            params[name.replace("-", "_")] = True
            index += 1
    return params


def check_outputs(inputs: Sequence[str | None] = (), files: Sequence[tuple[str, str | None]] = (),
                  folders: Sequence[tuple[str, str | None]] = ()) -> None:
    """Fail before any work when an output could not be written safely, is one of the
    command's ``inputs``, names the same file as another output, or lies inside a folder output,
    however each path is spelled (:mod:`fleetplan.instances.outputs` has the rules).

    ``files`` and ``folders`` are the command's outputs as ``(flag, path)`` pairs (path None:
    not asked for). Every command with an output checks them all here, in one call."""
    from fleetplan.instances.outputs import (
        check_distinct_outputs,
        check_output_file,
        check_output_folder,
    )

    inputs = [source for source in inputs if source is not None]
    for flag, path in files:
        if path is not None:
            check_output_file(path, inputs, flag)
    for flag, path in folders:
        if path is not None:
            check_output_folder(path, inputs, flag)
    check_distinct_outputs(files, folders)


def judge(instance: Any, plan: Any, instance_file: str, plan_file: str, flag: str | None = None) -> Any:
    """``fleetplan.evaluate(instance, plan)``; a plan that does not fit the instance (a plan of
    another instance: tables, jobs or servers it lacks) is reported naming the plan's file and
    its option, not only the JSON path inside it."""
    import fleetplan
    from fleetplan.errors import InstanceError

    try:
        return fleetplan.evaluate(instance, plan)
    except InstanceError as error:
        if error.source:
            raise
        where = f"{flag} {plan_file}" if flag else plan_file
        raise InstanceError(error.path, f"{error.reason} (is this plan for {instance_file}?)", where,
                            error.more) from None


def write_json(path: str, data: Any) -> None:
    from fleetplan.instances.outputs import atomic_write_text

    atomic_write_text(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def save_last(obj: Any, path: str) -> None:
    """Write the command's last output (an instance or a plan, by :func:`fleetplan.save`); from
    then on its exit code is 0, whatever signal comes (:func:`~fleetplan.cli.settling.settle`)."""
    import fleetplan

    fleetplan.save(obj, path)
    settle(EXIT_OK)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=1, default=str) + "\n")


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"{text} is not allowed: must be a positive number of seconds")
    return value


def bounded_int(low: int, high: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not allowed: must be in [{low}, {high}]")
        return value

    parse.__name__ = "integer"
    return parse


SEED = bounded_int(0, 2**63 - 1)


def THREADS(text: str) -> int:  # noqa: N802 - an argparse type, named like the others
    # The bound lives with solve(); imported here, not at module level, so --help loads no solver.
    from fleetplan.solvers.base import MAX_THREADS

    return bounded_int(1, MAX_THREADS)(text)


@contextlib.contextmanager
def progress_display(description: str, enabled: bool) -> Iterator[Any]:
    """A transient progress bar on stderr (terminals only); yields a ``progress`` callback."""
    if not enabled or not stderr.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=stderr, transient=True) as bar:
        task = bar.add_task(description, total=1.0)

        def update(fraction: float | None, message: str) -> None:
            bar.update(task, completed=fraction if fraction is not None else None,
                       description=f"{description}: {message}")

        yield update


def working(message: str, enabled: bool = True) -> contextlib.AbstractContextManager[Any]:
    """A transient spinner on stderr while something runs (terminals only; --json stays silent)."""
    if not enabled or not stderr.is_terminal:
        return contextlib.nullcontext()
    return stderr.status(message)




# --- executors: where a sweep's cells run (bench, whatif) -----------------------------------

def add_executor_arguments(parser: argparse.ArgumentParser, what: str = "cells") -> None:
    """``--executor local|dask``, ``--workers``, and the Dask scheduler's address and TLS flags."""
    parser.add_argument("--executor", choices=("local", "dask"), default="local")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help=f"local executor: {what} run at once, each in a process of its own (default 1)")
    parser.add_argument("--address", default=None, metavar="tls://HOST:8786",
                        help="dask executor: the scheduler's address (never read from the Dask "
                             "configuration); tcp:// only on loopback unless --insecure")
    parser.add_argument("--tls-ca-file", default=None, metavar="FILE",
                        help="dask: CA certificate the scheduler's certificate must chain to")
    parser.add_argument("--tls-cert", default=None, metavar="FILE",
                        help="dask: this client's certificate (mutual TLS)")
    parser.add_argument("--tls-key", default=None, metavar="FILE", help="dask: this client's private key")
    parser.add_argument("--insecure", action="store_true",
                        help="dask: allow plain tcp:// to a non-loopback scheduler (anyone who can "
                             "reach or impersonate it can run code in this process)")


def executor_security(args: argparse.Namespace) -> Any:
    """Check the executor flags before anything runs; the Dask TLS settings (unused when local)."""
    from fleetplan.errors import InstanceError
    from fleetplan.runs.executors import DaskSecurity, dask_security

    if args.workers < 1:
        raise InstanceError("--workers", "must be at least 1")
    if args.executor == "dask" and not args.address:
        raise InstanceError("--address", "the dask executor needs --address tls://HOST:8786 (or tcp:// on loopback)")
    tls = DaskSecurity(args.tls_ca_file, args.tls_cert, args.tls_key)
    if args.executor == "local":
        for flag, value in (("--address", args.address), ("--tls-ca-file", args.tls_ca_file),
                            ("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key),
                            ("--insecure", args.insecure)):
            if value:
                raise InstanceError(flag, f"only the dask executor takes {flag} (add --executor dask)")
    else:
        dask_security(args.address, tls, insecure=args.insecure)  # refuse before loading anything
    return tls
