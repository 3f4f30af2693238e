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

if TYPE_CHECKING:  # pragma: no cover - typing only; `fleetplan --help` loads no pydantic model
    from fleetplan.instances.base import Evaluation


def make_console(stderr: bool = False) -> Console:
    """A console that respects ``COLUMNS`` off a terminal (CI logs, pipes: 160 by default)."""
    stream = sys.stderr if stderr else sys.stdout
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 20 else (None if stream.isatty() else 160)
    return Console(stderr=stderr, highlight=False, width=width)


# --- numbers with units --------------------------------------------------------------------

def fmt(value: float | None, digits: int = 6) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}"


def fmt_number(value: float | None, digits: int = 6) -> str:
    """A count or an amount as a planner writes it: 18,000 (not 1.8e+04), 3.2, 568."""
    from fleetplan.instances.glossary import fmt_number as glossary_number

    return "-" if value is None else glossary_number(value, digits)


def fmt_gap(gap: float | None) -> str:
    """A relative gap as a percentage; below 1e-6 it is 0% (solver noise, not a gap)."""
    if gap is None:
        return "-"
    return "0%" if gap < 1e-6 else f"{100 * gap:.3g}%"


def fmt_bytes(value: float) -> str:
    from fleetplan.instances.glossary import fmt_bytes as glossary_bytes

    return glossary_bytes(value)


def fmt_seconds(value: float) -> str:
    from fleetplan.instances.glossary import fmt_duration

    return fmt_duration(value)


def fmt_measure(name: str, value: float | None, digits: int = 6, scope: str | None = None) -> str:
    """A metric in its unit's one format, from the glossary (:func:`fleetplan.instances.glossary.format_value`):
    a fraction always as a percentage, bytes as GB/TB, seconds as a readable duration — never
    chosen by the value (1.0957 and 0.6794 of one metric print alike)."""
    from fleetplan.instances.glossary import format_value

    return format_value(name, value, digits, scope)


# --- verdicts ---------------------------------------------------------------------------

# Each kind's metrics a reader needs first, above the objective (binpack's objective is an
# encoded score: what it encodes leads).
LEAD_METRICS: dict[str, tuple[str, ...]] = {
    "binpack": ("placed_workloads", "unplaced_workloads", "preempted_jobs",
                *(f"preempted_count_p{p}" for p in range(7)), "preempted_youth"),
}


def render_evaluations(console: Console, columns: dict[str, Evaluation], title: str,
                       explain: bool = False) -> None:
    """One or more verdicts side by side (e.g. today's plan and the new one): objective, terms,
    metrics and violation counts, each in its unit's format (:mod:`fleetplan.instances.glossary`);
    with two columns, the change and whether it is better. ``explain`` adds each row's meaning,
    unit and better direction beneath it. Then the alerts (a value past its glossary
    threshold) and the last column's violations, one line each."""
    from fleetplan.instances.glossary import describe

    verdicts = list(columns.values())
    last = verdicts[-1]
    scope = last.kind
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

    lead = [name for name in LEAD_METRICS.get(scope, ()) if name in last.metrics
            and (not name.startswith("preempted_count_p") or any(e.metrics.get(name) for e in verdicts))]
    for name in lead:
        label = f"  of priority {name[-1]}" if name.startswith("preempted_count_p") else name
        row(label, name, [e.metrics.get(name) for e in verdicts], _better(name, scope))
    minimise = last.sense == "min"
    sense = "minimize" if minimise else "maximize"
    if scope == "binpack":
        row(f"objective: RMS score ({sense}; see below)", "objective", [e.objective for e in verdicts],
            "lower", _binpack_change(verdicts) if compare else None)
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
    if scope == "binpack":
        from fleetplan.instances.binpack.evaluate import SCORE_NOTE

        console.print(f"objective: {SCORE_NOTE}", markup=False, style="dim")
    if scope == "placement" and "moves_listed" in last.metrics and \
            last.metrics["moves_listed"] != last.metrics.get("tables_moved"):
        console.print(f"tables_moved counts tables whose home differs from today's; moves_listed "
                      f"({last.metrics['moves_listed']:.0f}) counts the plan's moves in order, where a table can "
                      "move twice or move back", markup=False, style="dim")
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


def _binpack_change(verdicts: list[Evaluation]) -> str:
    """The change of two binpack plans in the exact order (the float score cannot say it)."""
    from fleetplan.instances.binpack.evaluate import key_difference, score_key

    text, word = key_difference(score_key(verdicts[0]), score_key(verdicts[1]))
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
    if result.kind == "binpack" and result.evaluation is not None:
        from fleetplan.instances.binpack.evaluate import preemptions_by_priority

        metrics = result.evaluation.metrics
        placed, waiting = metrics.get("placed_workloads", 0), metrics.get("unplaced_workloads", 0)
        console.print(f"placed {placed:.0f} of {placed + waiting:.0f} workloads; preempted "
                      f"{metrics.get('preempted_jobs', 0):.0f} running jobs (by priority, 0 highest: "
                      f"{preemptions_by_priority(metrics)})", markup=False)
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
    for family, unit in BINDING_UNITS.items():
        prices = duals.get(family)
        if not prices:
            continue
        ordered = sorted(prices.items(), key=lambda item: -abs(item[1]))
        shown = ", ".join(f"{name} {fmt(value, 3)}/{unit}" for name, value in ordered[:12])
        console.print(f"{label}: {shown}{' ...' if len(ordered) > 12 else ''}  (objective gained per {unit} added)",
                      markup=False)
    slo = duals.get("slo") or {}
    if slo:
        top = sorted(slo.items(), key=lambda item: -item[1])[:5]
        console.print("binding SLOs: " + ", ".join(f"{job} {fmt(value, 3)}" for job, value in top)
                      + f"{' ...' if len(slo) > 5 else ''}  (objective gained per step/s of SLO relaxed)",
                      markup=False)


def render_capacity_at_limit(console: Console, evaluation: Evaluation) -> None:
    """What a plan runs against: GPU types with every worker busy (allocation), region and
    GPU type cells whose high-priority demand exceeds supply (placement)."""
    if evaluation.kind == "allocation":
        full = [name[len("utilization_"):] for name, value in evaluation.metrics.items()
                if name.startswith("utilization_") and value >= 1 - 1e-6]
        if full:
            console.print(f"at capacity: {', '.join(full)} (every GPU busy under this plan)", markup=False)
    elif evaluation.kind == "placement":
        cells = evaluation.breakdown.get("region_gpu_types", {})
        over = sorted(((value, name) for name, value in zip(cells.get("id", []), cells.get("hp_gpu_hours_unserved", []),
                                                             strict=True) if value > 0), reverse=True)
        if over:
            shown = ", ".join(f"{name} by {value:.4g}" for value, name in over[:5])
            console.print(f"high-priority demand above supply (GPU-hours): {shown}"
                          f"{' ...' if len(over) > 5 else ''}", markup=False)


def render_fleet_cost(console: Console, instance: Any, evaluation: Evaluation | None) -> None:
    """Allocation: what the whole fleet costs, busy or idle, beside what its busy GPUs cost."""
    if evaluation is None or evaluation.kind != "allocation" or not evaluation.metrics.get("fleet_cost_per_hour"):
        return
    unit = getattr(instance, "currency", None) or "cost units"
    metrics = evaluation.metrics
    console.print(f"fleet cost: {fmt_number(metrics['fleet_cost_per_hour'], 6)} {unit}/h "
                  f"({fmt_number(round(metrics['fleet_cost_per_month']), 6)} {unit}/month, every GPU, busy or idle); "
                  f"busy GPUs under this plan: {fmt_number(metrics.get('cost_per_hour', 0.0), 6)} {unit}/h",
                  markup=False)


def render_service_warnings(console: Console, evaluation: Evaluation | None) -> None:
    """One line when a plan gives some jobs no GPU time at all (a normalized objective can
    look fine while they starve)."""
    if evaluation is None or evaluation.kind != "allocation":
        return
    starved = int(evaluation.metrics.get("starved_jobs", 0))
    jobs = evaluation.breakdown.get("jobs", {}).get("id") if evaluation.breakdown else None
    if starved:
        total = len(jobs) if jobs is not None else "?"
        console.print(f"[yellow]{starved} of {total} jobs get no GPU time under this plan[/]")


# --- plans --------------------------------------------------------------------------------

PREVIEW_ROWS = 10


def render_plan(console: Console, instance: Any, plan: Any, evaluation: Evaluation | None = None,
                before: Evaluation | None = None) -> None:
    """The plan itself, briefly: allocation — the top rows of X and effective throughput;
    placement — the largest moves and GPU demand/supply and storage per region (before and
    after when ``before``, today's verdict, is given). Per-item numbers come from the
    verdicts' breakdowns, not recomputed here."""
    if plan.kind == "allocation":
        _render_allocation(console, plan, evaluation)
    elif plan.kind == "placement":
        _render_placement(console, plan)
        if evaluation is not None and "regions" in evaluation.breakdown:
            _render_regions(console, evaluation, before)


def _render_allocation(console: Console, plan: Any, evaluation: Evaluation | None) -> None:
    shown = min(PREVIEW_ROWS, len(plan.allocation))
    if shown == 0:
        return
    effective = None
    jobs = evaluation.breakdown.get("jobs") if evaluation is not None else None
    if jobs is not None:
        # The breakdown is in the instance's job order; the plan file may list jobs otherwise.
        ids, values = jobs["id"], jobs["effective_throughput"]
        if ids[:shown] == plan.job_ids[:shown]:
            effective = values[:shown]
        else:
            row_of = dict(zip(ids, values, strict=True))
            effective = [row_of.get(job) for job in plan.job_ids[:shown]]
    table = Table(title=f"allocation X: time share per GPU type (first {shown} "
                        f"of {len(plan.allocation)} jobs)", header_style="bold")
    table.add_column("job", overflow="fold")
    for name in plan.worker_types:
        table.add_column(name, justify="right", overflow="fold")
    if effective is not None:
        table.add_column("effective thr.", justify="right")
    for index in range(shown):
        cells = [f"{value:.3f}" for value in plan.allocation[index]]
        if effective is not None:
            cells.append(fmt(effective[index], 4))
        table.add_row(plan.job_ids[index], *cells)
    console.print(table)


def _render_placement(console: Console, plan: Any) -> None:
    moves = sorted(plan.moves, key=lambda move: -move.bytes)[:PREVIEW_ROWS]
    if not moves:
        console.print("no table moved")
        return
    table = Table(title=f"largest moves ({len(moves)} of {len(plan.moves)})", header_style="bold",
                  caption="gain: the objective's fall when the move is applied after the ones before it")
    for column in ("table", "from", "to", "size", "gain"):
        table.add_column(column, justify="left" if column in ("table", "from", "to") else "right",
                         overflow="fold")
    for move in moves:
        table.add_row(move.table, move.source, move.target, fmt_bytes(move.bytes), fmt(move.gain, 4))
    console.print(table)


def _render_regions(console: Console, after: Evaluation, before: Evaluation | None) -> None:
    """GPU demand/supply and storage per region; with ``before``, "before -> after". Regions
    with the highest demand/supply first, at most :data:`PREVIEW_ROWS`."""
    now = after.breakdown["regions"]
    then = before.breakdown.get("regions") if before is not None else None
    if then is not None and then["id"] != now["id"]:
        then = None
    count = len(now["id"])

    def ratio(table: dict[str, list], r: int) -> float:
        supply = table["gpu_supply"][r]
        return table["gpu_demand"][r] / supply if supply > 0 else (math.inf if table["gpu_demand"][r] > 0 else 0.0)

    order = sorted(range(count), key=lambda r: -ratio(now, r))[:PREVIEW_ROWS]
    title = (f"regions: GPU demand/supply and storage ({len(order)} of {count}, highest demand/supply first"
             + ("; before -> after)" if then is not None else ")"))
    table = Table(title=title, header_style="bold")
    table.add_column("region", overflow="fold")
    for heading in ("GPU-h demand", "GPU-h supply", "demand/supply", "stored", "capacity"):
        table.add_column(heading, justify="right", overflow="fold")

    def pair(render: Any, name: str, r: int) -> str:
        value = now[name][r] if name != "ratio" else ratio(now, r)
        if then is None:
            return render(value)
        old = then[name][r] if name != "ratio" else ratio(then, r)
        return render(value) if old == value else f"{render(old)} -> {render(value)}"

    number = lambda value: fmt(value, 4)  # noqa: E731
    for r in order:
        table.add_row(now["id"][r], pair(number, "gpu_demand", r), number(now["gpu_supply"][r]),
                      pair(number, "ratio", r), pair(fmt_bytes, "storage_used_bytes", r),
                      fmt_bytes(now["storage_capacity_bytes"][r]))
    console.print(table)


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
