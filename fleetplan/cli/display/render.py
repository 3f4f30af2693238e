"""What the ``fleetplan`` command prints: verdicts, results, plans and option tables.

Tables fit the terminal (100 columns is the design width): long names wrap instead of being
cut to the same prefix, numbers carry their units (bytes as GB/TB/PB, seconds as min/h/d),
and before/after tables show the change and whether it is an improvement.
"""

from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

# The numbers' formats live in .numbers (the per-kind views use them too); the names stay
# importable from here, where the commands have always found them.
from fleetplan.cli.display.numbers import (  # noqa: F401
    PREVIEW_ROWS,
    fmt,
    fmt_bytes,
    fmt_gap,
    fmt_measure,
    fmt_number,
    fmt_seconds,
)

if TYPE_CHECKING:  # pragma: no cover - typing only; `fleetplan --help` loads no pydantic model
    from fleetplan.instances.base import Evaluation


def make_console(stderr: bool = False) -> Console:
    """A console that respects ``COLUMNS`` off a terminal (CI logs, pipes: 160 by default)."""
    stream = sys.stderr if stderr else sys.stdout
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 20 else (None if stream.isatty() else 160)
    return Console(stderr=stderr, highlight=False, width=width)


# --- verdicts ---------------------------------------------------------------------------

def render_evaluations(console: Console, columns: dict[str, Evaluation], title: str,
                       explain: bool = False) -> None:
    """One or more verdicts side by side (e.g. today's plan and the new one): objective, terms,
    metrics and violation counts, each in its unit's format (:mod:`fleetplan.instances.glossary`);
    with two columns, the change and whether it is better. ``explain`` adds each row's meaning,
    unit and better direction beneath it. Then the alerts (a value past its glossary
    threshold) and the last column's violations, one line each."""
    from fleetplan.cli.display.views import view_of
    from fleetplan.instances import get_kind
    from fleetplan.instances.glossary import describe

    verdicts = list(columns.values())
    last = verdicts[-1]
    scope = last.kind
    kind = get_kind(scope)
    compare = len(verdicts) == 2
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("measure", overflow="fold")
    for heading in columns:
        table.add_column(heading, justify="right")
    if compare:
        table.add_column("change", justify="right")
    alerts: list[str] = []

    def row(label: str, name: str, values: list[float | None], better: str | None,
            change: str | None = None) -> None:
        entry = describe(name, scope)
        cells = [fmt_measure(name, value, 8, scope) for value in values]
        note = entry.alerts(values[-1]) if entry is not None else None
        if note:
            cells[-1] += " [yellow]![/]"
            alerts.append(f"{name} {fmt_measure(name, values[-1], 6, scope)}: {note}")
        if compare:
            cells.append(change if change is not None else _change(name, values[0], values[1], better, scope))
        table.add_row(label, *cells)
        if explain:
            table.add_row(f"[dim]  {explanation(name, scope)}[/]", *[""] * (len(cells)))

    lead = [name for name in kind.lead_metrics if name in last.metrics
            and (not name.startswith("preempted_count_p") or any(e.metrics.get(name) for e in verdicts))]
    for name in lead:
        label = f"  of priority {name[-1]}" if name.startswith("preempted_count_p") else name
        row(label, name, [e.metrics.get(name) for e in verdicts], _better(name, scope))
    minimise = last.sense == "min"
    sense = "minimize" if minimise else "maximize"
    if kind.order_key is not None:  # an encoded score: the change in the exact order, the note says what it encodes
        row(f"objective: {kind.score_name} ({sense}; see below)", "objective", [e.objective for e in verdicts],
            "lower", _order_change(kind, verdicts) if compare else None)
    else:
        row(f"objective ({sense})", "objective", [e.objective for e in verdicts], "lower" if minimise else "higher")
    for name in last.terms:
        row(f"  term {name}", name, [e.terms.get(name) for e in verdicts], "lower" if minimise else "higher")
    for name in last.metrics:
        if name not in lead and not name.startswith("preempted_count_p"):
            row(name, name, [e.metrics.get(name) for e in verdicts], _better(name, scope))
    counts: list[float | None] = [float(len(e.violations)) for e in verdicts]
    row("violations", "violations", counts, "lower")
    console.print(table)
    if kind.objective_note:
        console.print(f"objective: {kind.objective_note}", markup=False, style="dim")
    view_of(scope).verdict_notes(console, verdicts)
    for line in alerts:
        console.print(f"[yellow]![/] {line}", highlight=False)
    for violation in last.violations[:20]:
        console.print(f"  violation {violation.constraint} at {violation.where}: "
                      f"{violation.amount:.6g} {violation.message}", markup=False)


def explanation(name: str, scope: str | None = None) -> str:
    """``meaning (unit; higher is better)`` of a metric, for ``--explain``."""
    from fleetplan.instances.glossary import describe

    entry = describe(name, scope)
    if entry is None:
        return "(no glossary entry)"
    parts = [entry.unit] + ([f"{entry.better} is better"] if entry.better else [])
    parts += ["relative to this instance"] if entry.relative else []
    return f"{entry.meaning} ({'; '.join(parts)})"


def _better(name: str, scope: str | None) -> str | None:
    from fleetplan.instances.glossary import better_direction

    return better_direction(name, scope)


def _order_change(kind: Any, verdicts: list[Evaluation]) -> str:
    """The change of two plans in the kind's exact order (the float score cannot say it)."""
    key = kind.order_key
    text, word = kind.order_difference(key(verdicts[0].metrics), key(verdicts[1].metrics))
    if word == "same":
        return "same"
    return f"{text} [green]better[/]" if word == "better" else f"{text} [red]worse[/]"


def _change(name: str, before: float | None, after: float | None, better: str | None,
            scope: str | None = None) -> str:
    if before is None or after is None or not (math.isfinite(before) and math.isfinite(after)):
        return "-"
    delta = after - before
    if abs(delta) <= 1e-12 * max(1.0, abs(before)):
        return "same"
    text = fmt_measure(name, delta, 4, scope)
    text = text if text.startswith("-") else "+" + text
    if better is None:
        return text
    improved = (delta < 0) == (better == "lower")
    return f"{text} [green]better[/]" if improved else f"{text} [red]worse[/]"


def render_result(console: Console, result: Any) -> None:
    table = Table(title=f"{result.kind} / {result.solver}", show_header=True, header_style="bold")
    for column in ("status", "objective", "bound", "gap", "wall"):
        table.add_column(column, justify="right")
    table.add_row(result.status, fmt(result.objective, 8), fmt(result.bound, 8),
                  fmt(result.gap, 3), fmt_seconds(result.wall_s))
    console.print(table)
    if result.evaluation is not None:  # what the kind adds is read from the plan's verdict
        from fleetplan.cli.display.views import view_of

        view_of(result.evaluation.kind).result_summary(console, result)
    if result.message:
        console.print(result.message, markup=False)
    render_binding(console, result)
    render_service_warnings(console, result.evaluation)


# What one unit of each capacity family is, on screen.
BINDING_UNITS = {"workers": "GPU", "servers": "server"}


def render_binding(console: Console, result: Any) -> None:
    """``binding: v100 0.031/GPU, k80 0``: what one more unit of each capacity (and one step/s
    less of each SLO) gains in the objective; LP duals, or labelled re-solve estimates."""
    from fleetplan.planning.marginal import MOVING_REFERENCE

    duals = getattr(result, "duals", None) or {}
    label = "binding" if result.duals_source == "lp" else "binding (estimated by re-solving)"
    moving = MOVING_REFERENCE.get(str(getattr(result, "solver", "")).split("/")[-1])
    if moving and result.duals_source == "lp":
        # A normalised policy's LP price holds its reference fixed; one GPU more moves it.
        label = "binding (LP prices at fixed references, local derivatives; --binding measures a unit)"
    # The prices are in the objective's better direction: a minimized objective falls by them.
    sense = getattr(getattr(result, "evaluation", None), "sense", "max")
    moved = "lowered" if sense == "min" else "gained"
    for family, unit in BINDING_UNITS.items():
        prices = duals.get(family)
        if not prices:
            continue
        ordered = sorted(prices.items(), key=lambda item: -abs(item[1]))
        shown = ", ".join(f"{name} {fmt(value, 3)}/{unit}" for name, value in ordered[:12])
        console.print(f"{label}: {shown}{' ...' if len(ordered) > 12 else ''}  (objective {moved} per {unit} added)",
                      markup=False)
    slo = duals.get("slo") or {}
    if slo:
        top = sorted(slo.items(), key=lambda item: -item[1])[:5]
        console.print("binding SLOs: " + ", ".join(f"{job} {fmt(value, 3)}" for job, value in top)
                      + f"{' ...' if len(slo) > 5 else ''}  (objective {moved} per step/s of SLO relaxed)",
                      markup=False)


def render_capacity_at_limit(console: Console, evaluation: Evaluation) -> None:
    """What a plan runs against: GPU types with every worker busy (allocation), region and
    GPU type cells whose high-priority demand exceeds supply (placement); the kind's view says."""
    from fleetplan.cli.display.views import view_of

    view_of(evaluation.kind).capacity_at_limit(console, evaluation)


def render_fleet_cost(console: Console, instance: Any, evaluation: Evaluation | None) -> None:
    """What the whole fleet costs, busy or idle, beside what its busy GPUs cost (allocation)."""
    if evaluation is None:
        return
    from fleetplan.cli.display.views import view_of

    view_of(evaluation.kind).fleet_cost(console, instance, evaluation)


def render_service_warnings(console: Console, evaluation: Evaluation | None) -> None:
    """One line when a plan fails someone its objective can hide (allocation: jobs with no GPU
    time at all, which a normalized objective can look fine with)."""
    if evaluation is None:
        return
    from fleetplan.cli.display.views import view_of

    view_of(evaluation.kind).service_warnings(console, evaluation)


# --- plans --------------------------------------------------------------------------------


def render_plan(console: Console, instance: Any, plan: Any, evaluation: Evaluation | None = None,
                before: Evaluation | None = None) -> None:
    """The plan itself, briefly: allocation — the top rows of X and effective throughput;
    placement — the largest moves and GPU demand/supply and storage per region (before and
    after when ``before``, today's verdict, is given). Per-item numbers come from the
    verdicts' breakdowns, not recomputed here. The kind's view (:mod:`fleetplan.cli.display.views`) draws it."""
    from fleetplan.cli.display.views import view_of

    view_of(plan.kind).plan(console, instance, plan, evaluation, before)


# --- options and parameters ---------------------------------------------------------------

def render_solver(console: Console, entry: dict[str, Any]) -> None:
    """One solver (its :mod:`fleetplan.cli.catalog` entry): what it does, where it comes
    from, and every option."""
    console.print(f"[bold]{entry['kind']} / {entry['name']}[/]" + (" (default)" if entry["default"] else "")
                  + (" — exact" if entry["exact"] else " — heuristic"))
    console.print(entry["description"], markup=False)
    if entry["reference"]:
        console.print(f"reference: {entry['reference']}", markup=False)
    render_options(console, entry["options"], f"options (--option NAME=VALUE) of {entry['name']}")


def render_options(console: Console, rows: list[dict[str, Any]], title: str) -> None:
    if not rows:
        console.print("no options")
        return
    table = Table(title=title, header_style="bold")
    table.add_column("name", no_wrap=True)
    table.add_column("type", overflow="fold")
    table.add_column("default", overflow="fold")
    table.add_column("meaning", overflow="fold", ratio=1)
    for row in rows:
        table.add_row(row["name"], row["type"], repr(row["default"]), row["meaning"] or "-")
    console.print(table)


def generator_parameters(model: Any) -> list[dict[str, Any]]:
    """``[{name, type, default, meaning}]`` of a kind's generator-parameter model."""
    from fleetplan.solvers.options import describe_type

    rows = []
    for name, field in model.model_fields.items():
        default = field.get_default(call_default_factory=True)
        type_text = describe_type(field.annotation)
        bounds = []
        for item in field.metadata:
            for attribute, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
                value = getattr(item, attribute, None)
                if value is not None:
                    bounds.append(f"{symbol} {value}")
        rows.append({"name": name, "type": " ".join([type_text, *bounds]), "default": default,
                     "meaning": field.description or ""})
    return rows
