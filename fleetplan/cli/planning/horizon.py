"""``fleetplan horizon``: a purchase schedule over periods (``size`` answers one period)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from fleetplan.cli.settling import settle


def add_arguments(subparsers: Any) -> None:
    """Add ``horizon`` to the command line."""
    from fleetplan.cli.common import SEED, THREADS, add_executor_arguments, positive_seconds

    horizon = subparsers.add_parser(
        "horizon", help="a purchase schedule over periods: growth, lead times, budgets, scenarios",
        description="Plan the fleet over time: what to order in each period so that every period's targets "
                    "hold at the least discounted cost (capex + opex - salvage), with lead times, lifetimes, "
                    "retirements, falling prices, budgets and demand scenarios (two-stage or robust). One exact "
                    "HiGHS MIP over every period and scenario, with its bound; every period's plan is judged.",
        epilog="The horizon file (YAML or JSON; docs/planning.md, 'Planning over time'): periods, targets, "
               "demand (growth, multipliers, classes, new_jobs; or instances, one file a period), buy (price, price_decline, lead_time, min_order, "
               "max_order, lifetime, salvage, opex_per_hour; or a CSV table), existing, budget, scenarios. "
               "Example: fleetplan horizon fleet.json horizon.yaml --plot horizon.png. What if: --vary FIELD=START:STOP:STEP "
               "(a horizon field such as demand.growth, budget, buy.h100.lead_time, buy.*.price_decline, "
               "scenarios.cases.high.demand.growth; instance.FIELD for the base instance's) plans once per point and "
               "writes DIR/whatif.csv, .parquet and .png; the points run on the bench executors (local or Dask).")
    horizon.add_argument("file", metavar="INSTANCE", help="the base instance: today's fleet and jobs")
    horizon.add_argument("horizon", metavar="HORIZON.yaml", help="the horizon file")
    horizon.add_argument("--time-limit", type=positive_seconds, default=None, metavar="S",
                         help="seconds for everything (the best schedule found by then, with its bound); with "
                              "--vary, seconds per point (default 60)")
    horizon.add_argument("--gap", type=_gap, default=0.01, metavar="G",
                         help="stop once the schedule is proven within this fraction of the cheapest (0: until "
                              "proven optimal)")
    horizon.add_argument("--prices", action="store_true",
                         help="also re-solve for the prices that bind: one more unit of budget per binding period, "
                              "one period less lead time per item")
    horizon.add_argument("--no-stochastic", action="store_true",
                         help="with scenarios: skip the wait-and-see and mean-value solves (VSS, EVPI)")
    horizon.add_argument("--policy", default="default", metavar="P",
                         help="allocation: also solve every period by the policy that runs and judge it (default: "
                              "the kind's default, max-min-fairness; 'none' skips); the schedule guarantees that an "
                              "allocation meets the targets, this says whether the policy's own does")
    horizon.add_argument("--threads", type=THREADS, default=1)
    horizon.add_argument("--seed", type=SEED, default=0)
    horizon.add_argument("-o", "--output", default=None, metavar="SCHEDULE.json|.csv",
                         help="write the schedule: the whole result as JSON, or the schedule's rows as CSV; with "
                              "--vary, the sweep's results folder (new)")
    horizon.add_argument("--vary", action="append", default=[], metavar="FIELD=START:STOP:STEP",
                         help="what if: plan once per value (FIELD=a,b,c also; FIELD*=... multiplies); repeat for a "
                              "grid")
    horizon.add_argument("--resume", action="store_true", help="with --vary: finish an interrupted sweep in -o DIR")
    horizon.add_argument("--plot", default=None, metavar="FILE.png",
                         help="draw the fleet against demand, the orders, the cost and the service per period")
    horizon.add_argument("--report", default=None, metavar="FILE.html",
                         help="write a self-contained report (question, inputs, schedule, pictures, the command)")
    horizon.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    add_executor_arguments(horizon, "points (with --vary)")
    horizon.set_defaults(handler=handle_horizon)


def _gap(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text[:30]}' is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{value:g}: a fraction from 0 to 1")
    return value


def handle_horizon(args: argparse.Namespace) -> int:
    """``fleetplan horizon``."""
    import fleetplan
    from fleetplan.cli.common import CommandError, check_outputs, print_json, stdout, working
    from fleetplan.cli.planning.output import check_pictures
    from fleetplan.planning.horizon import load_horizon, plan_horizon

    if args.vary:
        return handle_sweep(args)
    for flag, given in (("--resume", args.resume), ("--executor", args.executor != "local"),
                        ("--workers", args.workers != 1), ("--address", args.address)):
        if given:
            raise CommandError(f"{flag} runs the points of a sweep: add --vary FIELD=START:STOP:STEP")
    check_outputs([args.file, args.horizon], files=[("-o", args.output), ("--plot", args.plot),
                                                     ("--report", args.report)])
    if args.output and not str(args.output).lower().endswith((".json", ".csv")):
        raise CommandError(f"-o {args.output}: the schedule is written as .json (everything) or .csv (its rows)")
    check_pictures(args)
    with working(f"loading {args.file}", not args.json):
        instance = fleetplan.load_instance(args.file)
        spec = load_horizon(args.horizon)
    with working(f"planning {spec.periods} {spec.period_name}s", not args.json), _policy_flag(args.horizon):
        result = plan_horizon(instance, spec, time_limit=args.time_limit, threads=args.threads, seed=args.seed,
                              mip_rel_gap=args.gap, stochastic=not args.no_stochastic, marginal=args.prices,
                              policy=None if args.policy == "none" else args.policy)
    if result.success:
        _write(args, result, spec)
        settle(0)
    if args.json:
        print_json({**result.to_dict(), "output": args.output if result.success else None})
    else:
        render_horizon(stdout, result)
        for what, path in (("the schedule", args.output), ("the picture", args.plot), ("the report", args.report)):
            if result.success and path:
                stdout.print(f"wrote {what} to {path}", markup=False)
        if not result.success:
            stdout.print(f"no schedule ({result.status}): nothing written", markup=False)
    return 0 if result.success else 1


def handle_sweep(args: argparse.Namespace) -> int:
    """``fleetplan horizon --vary ...``: one schedule per point, tabulated and drawn."""
    from fleetplan.cli.common import CommandError, executor_security
    from fleetplan.cli.planning.output import SWEEP_FIELDS, check_sweep_report, finish_sweep
    from fleetplan.planning.horizon.sweep import horizon_whatif

    for flag, given in (("--plot", args.plot), ("--prices", args.prices)):
        if given:
            raise CommandError(f"{flag} draws or prices one schedule; a sweep draws DIR/whatif.png (drop {flag} "
                               "or --vary)")
    if not args.output:
        raise CommandError("-o DIR: a sweep writes its results folder (whatif.csv, .parquet, .png)")
    if args.report:
        check_sweep_report(args, [args.file, args.horizon])
    tls = executor_security(args)
    per_point = 60.0 if args.time_limit is None else args.time_limit
    with _policy_flag(args.horizon):
        result = horizon_whatif(args.file, args.horizon, args.vary, args.output, time_limit=per_point, seed=args.seed,
                                threads=args.threads, mip_rel_gap=args.gap, stochastic=not args.no_stochastic,
                                policy=None if args.policy == "none" else args.policy, executor=args.executor,
                                workers=args.workers, address=args.address, tls=tls, insecure=args.insecure,
                                resume=args.resume, progress=None if args.json else "auto", plot=True)
    return finish_sweep(args, result, SWEEP_FIELDS,
                        question=f"how the cheapest purchase schedule and its cost move with {', '.join(result.varied)}",
                        inputs={"instance": args.file, "horizon": args.horizon, "vary": " ".join(args.vary),
                                "time limit per point (s)": per_point,
                                "results folder": args.output})


@contextlib.contextmanager
def _policy_flag(horizon: str | None = None) -> Iterator[None]:
    """The library names its ``policy`` parameter; the command's error names the flag. A field
    of the horizon found wrong only against the instance (a target's metric, a GPU type to buy)
    names the horizon file, as its other errors do."""
    from fleetplan.cli.common import CommandError
    from fleetplan.errors import InstanceError
    from fleetplan.planning.horizon.spec import HorizonSpec

    try:
        yield
    except InstanceError as error:
        if error.path == "policy":
            raise CommandError(f"--policy: {error.reason}") from None
        field = error.path.split(".")[0].split("[")[0]
        if horizon and error.source is None and field in HorizonSpec.model_fields:
            raise InstanceError(error.path, error.reason, horizon, error.more) from None
        raise


def _write(args: argparse.Namespace, result: Any, spec: Any) -> None:
    import csv
    import io
    import json

    from fleetplan.instances.outputs import atomic_write_text, save_figure
    from fleetplan.plotting.horizon import plot_horizon

    figure = plot_horizon(result) if (args.plot or args.report) else None
    if args.output and str(args.output).lower().endswith(".csv"):
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(result.schedule[0]))
        writer.writeheader()
        writer.writerows(result.schedule)
        atomic_write_text(args.output, buffer.getvalue())
    elif args.output:
        atomic_write_text(args.output, json.dumps(result.to_dict(), indent=1, default=float) + "\n")
    if args.plot:
        save_figure(figure, args.plot)
    if args.report:
        _report(args, result, spec, figure)


def _report(args: argparse.Namespace, result: Any, spec: Any, figure: Any) -> None:
    from fleetplan.cli.planning.report import table_html, write_report

    # Every amount as the terminal's table prints it (_money): 7,527 there is not 7,527.2 here.
    orders = [[row["scenario"], row["period"], row["item"],
               *(_units(row["item"], row[name]) for name in ("ordered", "arriving", "retiring", "installed")),
               _money(row["capex"], "")]
              for row in result.schedule if row["ordered"] or row["arriving"] or row["retiring"]]
    policy = next((row["policy"] for row in result.periods if row.get("policy")), None)
    periods = [[row["scenario"], row["period"], _money(row["capex"], ""), _money(row["opex"], ""),
                _money(row["budget"], ""),
                ", ".join(f"{name} {'met' if ok else 'MISSED'} ({_measured(row, name)})"
                          for name, ok in row["checks"].items()),
                *([", ".join(f"{name} {'met' if ok else 'MISSED'} "
                             f"({_measured({'metrics': row.get('policy_metrics', {})}, name)})"
                             for name, ok in (row.get("policy_checks") or {}).items()) or "no plan"]
                  if policy else [])] for row in result.periods]
    sections = [("The answer", f"<p><b>{result.status}</b>: {result.message}</p><p>discounted total "
                               f"{_money(result.cost, result.currency)}, proven bound {_money(result.bound, result.currency)}, "
                               f"gap {_gap_text(result.gap)}</p>"),
                ("Orders, arrivals and retirements", table_html(
                    ["scenario", spec.period_name, "item", "ordered", "arriving", "retiring", "installed", "capex"],
                    orders) if orders else "<p>nothing to order</p>"),
                ("Each period, judged", table_html(["scenario", spec.period_name, "capex", "opex", "budget",
                                                    "targets", *([f"under {policy}"] if policy else [])],
                                                   periods))]
    if result.stochastic:
        sections.append(("What the scenarios are worth", table_html(["value", "amount"], _stochastic_rows(result))))
    write_report(args.report, f"Purchase schedule for {args.file}",
                 question=f"the cheapest schedule of orders over {spec.periods} {spec.period_name}s under which every "
                          f"{spec.period_name} meets {', '.join(spec.targets)}",
                 inputs={"instance": args.file, "horizon": args.horizon, "may buy": ", ".join(spec.buy),
                         "scenarios": ", ".join(f"{s['name']} ({s['probability']:g})" for s in result.scenarios),
                         "mode": result.mode},
                 sections=sections, figures=[("the schedule", figure)], argv=getattr(args, "argv", None))


def _under_policy(row: dict) -> str:
    """The policy's own allocation against the period's targets: met, or missed with its values."""
    checks = row.get("policy_checks") or {}
    if not checks:
        return "[red]no plan[/red]"
    shown = ", ".join(_measured({"metrics": row.get("policy_metrics", {})}, name) for name in checks)
    return f"[green]met[/green] {shown}" if all(checks.values()) else f"[red]MISSED[/red] {shown}"


def _measured(row: dict, target: str) -> str:
    metric = target.split(">=")[0].split("<=")[0]
    value = row["metrics"].get(metric)
    return "-" if value is None else f"{value:.4g}"


def _units(item: str, value: float | None) -> str:
    """Units of an item as a planner reads them: bytes of storage as GB/TB (5.52 TB, not
    5,521,935,940,332), GPUs and GPU-hours as amounts."""
    from fleetplan.cli.display.numbers import fmt_bytes
    from fleetplan.planning.horizon.placement import is_storage_item

    if value is None or not is_storage_item(item):
        return _money(value, "")
    return fmt_bytes(value) if value else "0"


def _money(value: float | None, currency: str) -> str:
    from fleetplan.plotting.horizon import amount

    return "-" if value is None else f"{amount(value)}{f' {currency}' if currency else ''}"


def _with_range(value: float | None, bounds: list[float] | None, currency: str) -> str:
    """A value from solves stopped within their gaps, with the range they prove when it is wider."""
    text = _money(value, currency)
    if value is None or bounds is None or bounds[1] - bounds[0] <= 1e-9 * max(1.0, abs(value)):
        return text
    return f"{text} (proven between {_money(bounds[0], '')} and {_money(bounds[1], '')})"


def _gap_text(gap: float | None) -> str:
    return "-" if gap is None else ("0%" if gap < 1e-9 else f"{100 * gap:.3g}%")


def _stochastic_rows(result: Any) -> list[list[str]]:
    values = result.stochastic
    rows = [["recourse problem (two-stage plan's expected cost)", _money(values.get("recourse"), result.currency)],
            ["wait-and-see (each scenario known in advance)", _money(values.get("wait_and_see"), result.currency)],
            ["expected cost of the mean scenario's plan", _money(values.get("expected_mean_value"), result.currency)],
            ["EVPI (what a perfect forecast saves)", _with_range(values.get("evpi"), values.get("evpi_range"),
                                                                 result.currency)],
            ["VSS (what planning with scenarios saves over the mean)",
             _with_range(values.get("vss"), values.get("vss_range"), result.currency)]]
    for name, cost in values.get("per_scenario", {}).items():
        rows.append([f"optimum if '{name}' were certain", _money(cost, result.currency)])
    return rows


def render_horizon(console: Any, result: Any) -> None:
    """The schedule's orders, each period's spend and service, and the totals, as tables."""
    from rich.table import Table

    from fleetplan.planning.horizon.placement import is_storage_item

    console.print(f"[bold]{result.status}[/bold]: {result.message}", highlight=False)
    if not result.schedule:
        return
    many = len(result.scenarios) > 1
    storage = any(is_storage_item(item) for item in result.items)
    table = Table(title=f"orders per {result.period_name} (in {result.unit}{'; storage in GB/TB' if storage else ''})")
    if many:
        table.add_column("scenario")
    table.add_column(result.period_name, justify="right")
    for item in result.items:
        table.add_column(f"{item} ordered", justify="right")
        table.add_column(f"{item} installed", justify="right")
    table.add_column("capex", justify="right")
    table.add_column("opex", justify="right")
    table.add_column("targets (judged)")
    policy = next((row["policy"] for row in result.periods if row.get("policy")), None)
    if policy:
        table.add_column(f"under {policy}")
    by_key = {(row["scenario"], row["period"], row["item"]): row for row in result.schedule}
    for row in result.periods:
        cells = [row["scenario"]] if many else []
        cells.append(str(row["period"]))
        for item in result.items:
            entry = by_key[(row["scenario"], row["period"], item)]
            cells += [_units(item, entry["ordered"]) if entry["ordered"] else "-", _units(item, entry["installed"])]
        met = all(row["checks"].values())
        targets = ", ".join(f"{_measured(row, name)}" for name in row["checks"])
        cells += [_money(row["capex"], ""), _money(row["opex"], ""),
                  f"[green]met[/green] {targets}" if met else f"[red]MISSED[/red] {targets}"]
        if policy:
            cells.append(_under_policy(row))
        table.add_row(*cells)
    console.print(table)
    line = f"discounted total {_money(result.cost, result.currency)}, bound {_money(result.bound, result.currency)}, " \
           f"gap {_gap_text(result.gap)}"
    console.print(line, markup=False)
    if result.stochastic:
        summary = Table(title="what the scenarios are worth")
        summary.add_column("value")
        summary.add_column("amount", justify="right")
        for name, amount in _stochastic_rows(result):
            summary.add_row(name, amount)
        console.print(summary)
    if result.marginal:
        prices = Table(title="prices that bind (by re-solving)")
        prices.add_column("change")
        prices.add_column("saving", justify="right")
        for period, entry in result.marginal["budget"].items():
            saving = entry["saving"]
            prices.add_row(f"+{_money(entry['step'], '')} budget in {result.period_name} {period}",
                           "-" if saving is None else f"{_with_range(saving, entry.get('saving_range'), '')} "
                                                      f"({entry['per_unit']:.3g} per unit)")
        for item, entry in result.marginal["lead_time"].items():
            saving = entry["saving"]
            prices.add_row(f"{item} lead time {entry['lead_time']} ({result.period_name}s)",
                           _with_range(saving, entry.get("saving_range"), ""))
        console.print(prices)
