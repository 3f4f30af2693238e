"""What the command line shows of each kind beyond the shared tables, one class per kind.

:mod:`fleetplan.cli.display.render` prints what every kind has (the result, the verdict's objective,
terms and metrics); a kind's :class:`KindView` adds what only it has — allocation's fleet cost
and starved jobs, placement's largest moves and regions, binpack's placements and preemptions.
The kind's registration names its view (``ProblemKind.cli_view``); :func:`view_of` finds it, so
no command branches on a kind's name. A kind with nothing of its own uses :class:`KindView`.

>>> type(view_of("placement")).__name__
'PlacementView'
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from fleetplan.cli.display.numbers import PREVIEW_ROWS, fmt, fmt_bytes, fmt_number

if TYPE_CHECKING:  # pragma: no cover - typing only
    from fleetplan.instances.base import Evaluation


def view_of(kind: str) -> KindView:
    """The command line's view of ``kind`` (its registration's ``cli_view``)."""
    from fleetplan.instances import get_kind

    view: type[KindView] = get_kind(kind).load("cli_view")
    return view()


class KindView:
    """The shared behaviour: nothing beyond the shared tables. Subclasses override what their
    kind adds."""

    # ``fleetplan demo``: a line under the kind's table (None: none).
    demo_note: str | None = None

    def result_summary(self, console: Console, result: Any) -> None:
        """Lines under the result's table (``fleetplan solve``; a result with a verdict)."""

    def verdict_notes(self, console: Console, verdicts: list[Evaluation]) -> None:
        """Lines under the verdict's table (the last column is the plan's)."""

    def capacity_at_limit(self, console: Console, evaluation: Evaluation) -> None:
        """What the plan runs against (``fleetplan evaluate``)."""

    def fleet_cost(self, console: Console, instance: Any, evaluation: Evaluation) -> None:
        """What the fleet costs under the plan."""

    def service_warnings(self, console: Console, evaluation: Evaluation) -> None:
        """One line per way the plan fails someone that its objective can hide."""

    def plan(self, console: Console, instance: Any, plan: Any, evaluation: Evaluation | None,
             before: Evaluation | None) -> None:
        """The plan itself, briefly."""

    def demo_row(self, evaluation: Evaluation) -> dict[str, Any]:
        """``fleetplan demo``: cells beyond the registration's ``demo_metrics`` values."""
        return {}


class AllocationView(KindView):
    """Gavel's allocation: the top rows of X, GPU types at capacity, the fleet's cost, starved jobs."""

    def capacity_at_limit(self, console: Console, evaluation: Evaluation) -> None:
        full = [name[len("utilization_"):] for name, value in evaluation.metrics.items()
                if name.startswith("utilization_") and value >= 1 - 1e-6]
        if full:
            console.print(f"at capacity: {', '.join(full)} (every GPU busy under this plan)", markup=False)

    def fleet_cost(self, console: Console, instance: Any, evaluation: Evaluation) -> None:
        """What the whole fleet costs, busy or idle, beside what its busy GPUs cost."""
        if not evaluation.metrics.get("fleet_cost_per_hour"):
            return
        unit = getattr(instance, "currency", None) or "cost units"
        metrics = evaluation.metrics
        console.print(f"fleet cost: {fmt_number(metrics['fleet_cost_per_hour'], 6)} {unit}/h "
                      f"({fmt_number(round(metrics['fleet_cost_per_month']), 6)} {unit}/month, every GPU, busy or "
                      f"idle); busy GPUs under this plan: {fmt_number(metrics.get('cost_per_hour', 0.0), 6)} {unit}/h",
                      markup=False)

    def service_warnings(self, console: Console, evaluation: Evaluation) -> None:
        """Jobs with no GPU time at all (a normalized objective can look fine while they starve)."""
        starved = int(evaluation.metrics.get("starved_jobs", 0))
        jobs = evaluation.breakdown.get("jobs", {}).get("id") if evaluation.breakdown else None
        if starved:
            total = len(jobs) if jobs is not None else "?"
            console.print(f"[yellow]{starved} of {total} jobs get no GPU time under this plan[/]")

    def plan(self, console: Console, instance: Any, plan: Any, evaluation: Evaluation | None,
             before: Evaluation | None) -> None:
        """The top rows of X and each job's effective throughput."""
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


class PlacementView(KindView):
    """Tetris's placement: the largest moves, regions' GPU demand/supply and storage, cells over supply."""

    def verdict_notes(self, console: Console, verdicts: list[Evaluation]) -> None:
        last = verdicts[-1]
        if "moves_listed" in last.metrics and last.metrics["moves_listed"] != last.metrics.get("tables_moved"):
            console.print(f"tables_moved counts tables whose home differs from today's; moves_listed "
                          f"({last.metrics['moves_listed']:.0f}) counts the plan's moves in order, where a table can "
                          "move twice or move back", markup=False, style="dim")

    def capacity_at_limit(self, console: Console, evaluation: Evaluation) -> None:
        """Region and GPU type cells whose high-priority demand exceeds supply."""
        cells = evaluation.breakdown.get("region_gpu_types", {})
        over = sorted(((value, name) for name, value in zip(cells.get("id", []), cells.get("hp_gpu_hours_unserved", []),
                                                             strict=True) if value > 0), reverse=True)
        if over:
            shown = ", ".join(f"{name} by {value:.4g}" for value, name in over[:5])
            console.print(f"high-priority demand above supply (GPU-hours): {shown}"
                          f"{' ...' if len(over) > 5 else ''}", markup=False)

    def plan(self, console: Console, instance: Any, plan: Any, evaluation: Evaluation | None,
             before: Evaluation | None) -> None:
        """The largest moves, then GPU demand/supply and storage per region (before and after
        when ``before``, today's verdict, is given)."""
        moves = sorted(plan.moves, key=lambda move: -move.bytes)[:PREVIEW_ROWS]
        if not moves:
            console.print("no table moved")
        else:
            table = Table(title=f"largest moves ({len(moves)} of {len(plan.moves)})", header_style="bold",
                          caption="gain: the objective's fall when the move is applied after the ones before it")
            for column in ("table", "from", "to", "size", "gain"):
                table.add_column(column, justify="left" if column in ("table", "from", "to") else "right",
                                 overflow="fold")
            for move in moves:
                table.add_row(move.table, move.source, move.target, fmt_bytes(move.bytes), fmt(move.gain, 4))
            console.print(table)
        if evaluation is not None and "regions" in evaluation.breakdown:
            _render_regions(console, evaluation, before)


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


class BinpackView(KindView):
    """RMS's binpack: workloads placed and jobs preempted by priority (the score's float hides them)."""

    demo_note = ("  (binpack plans rank by workloads placed, then preemptions from priority 0 down, then youth; "
                 "`fleetplan metrics binpack` says what the objective's float score is)")

    def result_summary(self, console: Console, result: Any) -> None:
        from fleetplan.instances.binpack.evaluate import preemptions_by_priority

        metrics = result.evaluation.metrics
        placed, waiting = metrics.get("placed_workloads", 0), metrics.get("unplaced_workloads", 0)
        console.print(f"placed {placed:.0f} of {placed + waiting:.0f} workloads; preempted "
                      f"{metrics.get('preempted_jobs', 0):.0f} running jobs (by priority, 0 highest: "
                      f"{preemptions_by_priority(metrics)})", markup=False)

    def demo_row(self, evaluation: Evaluation) -> dict[str, Any]:
        from fleetplan.instances.binpack.evaluate import preemptions_by_priority

        return {"preempted_by_priority": preemptions_by_priority(evaluation.metrics)}


def comparison_changes(row: dict[str, Any], kind: str) -> list[tuple[str, str | None]]:
    """One ``compare`` row's change cells against the first plan, as (text, verdict): the
    terminal and the report print these same texts ("same", "+12.9 pp", binpack's exact order)."""
    from fleetplan.cli.display.numbers import fmt_measure
    from fleetplan.instances.glossary import format_change

    cells = []
    texts = row.get("change_texts") or [None] * len(row["changes"])
    for change, word, exact in zip(row["changes"], row["verdicts"], texts, strict=True):
        if exact is not None and word != "same":  # binpack's exact order; objectives not comparable
            text = exact
        elif change is None:
            text = "-"
        elif word == "same":
            text = "same"
        elif row["metric"] == "objective":
            text = f"{'+' if change > 0 else ''}{fmt_measure('objective', change, scope=kind)}"
        else:
            text = format_change(row["metric"], change, kind)  # fractions in percentage points
        cells.append((text, word))
    return cells


def purchase_rows(result: Any) -> list[tuple[str, str, str]]:
    """A sizing's purchase as (what, units, unit) texts, the terminal's and the report's alike:
    counts with thousands marks, bytes in GB/TB, GPU-hours a day also as GPUs running all day."""
    from fleetplan.cli.display.numbers import fmt_measure

    rows = []
    for name, units in result.additions.items():
        if not units:
            continue
        unit = result.units.get(name, "")
        if unit == "GPU-hours/day":
            rows.append((name, fmt_number(round(units, 3)), f"GPU-hours/day = {units / 24:,.1f} GPUs all day"))
        elif unit == "bytes":
            rows.append((name, fmt_measure("storage_bytes", units), ""))
        else:  # "GPUs" for 24, "GPU" for 1
            plural = unit in ("GPU", "server", "machine") and units != 1
            rows.append((name, fmt_number(units), f"{unit}s" if plural else unit))
    return rows
