"""``fleetplan demo``: solve every bundled example with the solvers worth comparing on it.

Each kind's registration names the solvers to compare and the metrics that show the difference
(``ProblemKind.demo_solvers``, ``demo_metrics``); a kind without them is solved with its default
solver.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

import fleetplan
from fleetplan.cli.display.views import view_of
from fleetplan.instances import InstanceError, get_kind

DEMO_TIME_LIMIT_S = 10.0


def default_examples() -> Path:
    """The bundled examples: packaged inside fleetplan, or the checkout's ``examples/``."""
    from importlib import resources

    packaged = Path(str(resources.files("fleetplan").joinpath("examples")))
    if packaged.is_dir() and any(packaged.glob("*.json")):
        return packaged
    return Path(__file__).resolve().parent.parent / "examples"


def run_demo(examples: Path, console: Console, json_output: bool = False) -> int:
    """Solve each ``examples/*.json`` and print one comparison table per kind."""
    # Instances only: the examples folder also holds simulator scenarios (no "kind" field).
    files = [path for path in sorted(examples.glob("*.json")) if _is_instance_file(path)]
    if not files:
        raise InstanceError("--examples", f"no example instances (*.json) in '{examples}'")
    rows: dict[str, list[dict]] = {}
    for number, path in enumerate(files, 1):
        if not json_output and console.is_terminal:
            console.print(f"[dim]({number}/{len(files)}) solving {path.name} ...[/]")
        instance = fleetplan.load_instance(path)
        kind = get_kind(instance.kind)
        view = view_of(instance.kind)
        names = kind.demo_solvers or [fleetplan.get_solver(instance.kind).name]
        for name in names:
            result = fleetplan.solve(instance, name, time_limit=DEMO_TIME_LIMIT_S, seed=0)
            evaluation = result.evaluation
            row = {
                "example": path.name, "solver": name, "status": result.status,
                "objective": result.objective, "wall_s": result.wall_s,
                "violations": len(evaluation.violations) if evaluation else None,
                **{m: evaluation.metrics.get(m) for m in kind.demo_metrics if evaluation},
            }
            if evaluation is not None:
                row.update(view.demo_row(evaluation))
            rows.setdefault(instance.kind, []).append(row)
    sizing = _sizing_answer(examples)
    horizon = _horizon_answer(examples)
    if json_output:
        sys.stdout.write(json.dumps({**rows, "sizing": [sizing] if sizing else [],
                                     "horizon": [horizon] if horizon else []}, indent=1, default=float) + "\n")
        return 0
    for kind, kind_rows in rows.items():
        for example in dict.fromkeys(row["example"] for row in kind_rows):
            _print_example(console, kind, example, [row for row in kind_rows if row["example"] == example])
    if sizing is not None:
        bought = ", ".join(f"{units} {name}" for name, units in sizing["additions"].items() if units) or "nothing"
        console.print(f"[bold]sizing {sizing['example']}[/]: for {sizing['target']}, buy {bought} "
                      f"(cost {sizing['cost']:.4g}/h, proven bound {sizing['bound']:.4g}/h; {sizing['status']}). "
                      f"`fleetplan size --help` and docs/planning.md say more.")
    if horizon is not None:
        console.print(f"[bold]horizon {horizon['example']}[/]: {horizon['periods']} quarters, "
                      f"{len(horizon['scenarios'])} demand scenarios: {horizon['status']}, discounted total "
                      f"{horizon['cost']:,.0f} (proven within {100 * (horizon['gap'] or 0):.2g}%); {horizon['orders']}"
                      + (f"; under {horizon['policy']} {horizon['missed_under_policy']} of {len(horizon['scenarios']) * horizon['periods']} "
                         "quarters miss the target (the schedule's allocation meets it, the policy's does not)"
                         if horizon.get("missed_under_policy") else "")
                      + ". `fleetplan horizon --help` and docs/planning.md (section 7) say more.")
    return 0


# The planner's question on the bundled inventory: the cheapest GPUs so that every job holds
# GPUs at least half of the time.
SIZING_EXAMPLE = "inventory-30-jobs.json"
SIZING_TARGET = "min_time_share>=0.5"


# The planner's question over time: a year of quarters on the same inventory
# (examples/horizon-1-year.yaml: growth scenarios, lead times, a retirement, a budget).
HORIZON_EXAMPLE = "horizon-1-year.yaml"


def _horizon_answer(examples: Path) -> dict | None:
    path = examples / HORIZON_EXAMPLE
    if not path.is_file() or not (examples / SIZING_EXAMPLE).is_file():
        return None
    from fleetplan.planning.horizon import load_horizon, plan_horizon

    spec = load_horizon(path)
    result = plan_horizon(fleetplan.load_instance(examples / SIZING_EXAMPLE), spec, time_limit=DEMO_TIME_LIMIT_S,
                          stochastic=False)
    orders = result.orders()
    shown = ", ".join(f"{units:g} {item} in quarter {period} ({scenario})"
                      for (scenario, period, item), units in sorted(orders.items(), key=lambda i: (i[0][1], i[0][0]))[:3])
    return {"example": HORIZON_EXAMPLE, "periods": spec.periods, "scenarios": [s["name"] for s in result.scenarios],
            "status": result.status, "cost": result.cost, "bound": result.bound, "gap": result.gap,
            "orders": f"first orders: {shown}" if shown else "nothing to order",
            "violations": sum(not all(row["checks"].values()) for row in result.periods),
            "policy": next((row["policy"] for row in result.periods if row.get("policy")), None),
            "missed_under_policy": sum(1 for row in result.periods if row.get("policy")
                                       and not all((row.get("policy_checks") or {"": False}).values()))}


def _sizing_answer(examples: Path) -> dict | None:
    path = examples / SIZING_EXAMPLE
    if not path.is_file():
        return None
    from fleetplan.planning import size

    instance = fleetplan.load_instance(path)
    result = size(instance, [SIZING_TARGET], [worker.name for worker in instance.worker_types],
                  time_limit=DEMO_TIME_LIMIT_S)
    # The sized instance's plan, judged: the same row fields as the solvers' (violations too).
    violations = len(fleetplan.evaluate(result.sized_instance, result.plan).violations) if result.plan else None
    return {"example": SIZING_EXAMPLE, "solver": "size", "target": SIZING_TARGET, "status": result.status,
            "additions": result.additions, "cost": result.cost, "bound": result.bound, "policy": result.policy,
            "objective": result.cost, "wall_s": result.wall_s, "violations": violations}


def _is_instance_file(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return True  # let load_instance report it in one line
    return not isinstance(data, dict) or "kind" in data


def _print_example(console: Console, kind: str, example: str, rows: list[dict]) -> None:
    """One table per example: a row per solver, metrics with their units."""
    from rich import box

    from fleetplan.cli.display.render import fmt_measure

    entry = get_kind(kind)
    table = Table(title=f"{kind}: {example}", header_style="bold", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    # An encoded score (an exact order behind it) prints alike to four digits: what it encodes shows instead.
    headings = {"solver": "solver", "status": "status",
                **({} if entry.order_key is not None else {"objective": "objective"}),
                **entry.demo_metrics, "violations": "viol.", "wall_s": "wall"}
    text_columns = ("solver", "status", "violations", "preempted_by_priority")
    for column, heading in headings.items():
        table.add_column(heading, justify="left" if column in ("solver", "status") else "right",
                         no_wrap=column in ("solver", "status"), overflow="fold",
                         min_width=max(len(heading), 8 if column == "wall_s" else 0))
    for row in rows:
        table.add_row(*[_cell(row.get(column)) if column in text_columns
                        else fmt_measure(column, row.get(column), 4, kind) for column in headings])
    console.print(table)
    note = view_of(kind).demo_note
    if note:
        console.print(note, style="dim")


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)
