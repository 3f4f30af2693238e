"""What-if sweeps over a horizon: one purchase schedule per point of a grid of horizon fields.

A planner asks "what if demand grows 20% instead of 12%", "what is a quarter less lead time on
H100s worth", "how much does the budget cap cost us", "what if prices fall faster". Each
``--vary FIELD=START:STOP:STEP`` (or ``FIELD=a,b,c``; ``FIELD*=...`` multiplies) names a path into
the horizon file as :func:`~fleetplan.planning.horizon.spec.parse_horizon` reads it
(:mod:`fleetplan.instances.paths`): ``demand.growth``, ``budget``, ``discount_rate``,
``buy.h100.lead_time``, ``buy.*.price_decline``, ``scenarios.cases.high.demand.growth``,
``existing.v100.retire.0.after``. A path that starts with ``instance.`` names a field of the base
instance instead (``instance.worker_types.v100.count``). Every path is checked before any point
runs, and the grid's corners are checked as horizons.

Each point is a cell of the run layer (:mod:`fleetplan.runs`) whose runner is
:func:`run_point`, so the sweep runs where ``fleetplan whatif`` and ``fleetplan bench`` run —
in this process, local worker processes (each killed past its limit), or a Dask cluster — and an
interrupted sweep resumes without redoing finished points. The table has one row per point: the
varied values, the status, the discounted total (``cost``), its bound and gap, and what a planner
compares — capex and opex as spent over the horizon (not discounted), the units of each item
ordered in all (``units_ITEM``) and in the first period (``first_ITEM``, the decision that cannot
wait), both expected over the scenarios, VSS and EVPI where there are scenarios, and (allocation)
``missed_under_policy``: the periods, expected over the scenarios, in which the policy that runs
misses a target the schedule's allocation meets.

"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleetplan.errors import InstanceError

GROUP = "horizon"
RUNNER = "fleetplan.planning.horizon.sweep:run_point"
INSTANCE_PREFIX = "instance."
SWEEP_FILE = "horizon-sweep.json"
# The last instance and horizon a process parsed (and the instance validated), by their text: the
# points of one sweep that run in one process (in this one, or a chain on a Dask worker) parse
# and validate them once.
_parsed: dict[str, Any] = {}


def horizon_whatif(instance: Any, horizon: Any, varies: Sequence[Any], out: str | Path | None = None, *,
                   time_limit: float = 60.0, seed: int = 0, threads: int = 1, mip_rel_gap: float | None = None,
                   stochastic: bool = True, policy: str | None = "default", executor: str = "local",
                   workers: int = 1, address: Any = None,
                   tls: Any = None, insecure: bool = False, resume: bool = False, progress: Any = "auto",
                   plot: bool = False) -> Any:
    """Plan the horizon once per grid point and tabulate the schedules.

    Parameters
    ----------
    instance : the base instance (an instance, its dict, or its file's path)
    horizon : the horizon (a :class:`~fleetplan.planning.horizon.spec.HorizonSpec`, its dict, or
        its file's path)
    varies : ``FIELD=START:STOP:STEP`` strings (or :class:`fleetplan.planning.whatif.Vary`),
        paths into the horizon, or into the instance after ``instance.``
    out : the results folder (new, or an interrupted sweep's with ``resume=True``); None: no
        files, the table only
    time_limit, seed, threads, mip_rel_gap, stochastic, policy : as
        :func:`~fleetplan.planning.horizon.plan_horizon`, per point
    executor, workers, address, tls, insecure, resume, progress, plot : as :func:`fleetplan.planning.whatif.whatif`

    Returns a :class:`fleetplan.planning.whatif.WhatIfResult` (``rows``: one dict per point).

    >>> import fleetplan
    >>> table = fleetplan.horizon_whatif(
    ...     fleetplan.load_instance("examples/allocation-gavel-4.1.json"),
    ...     {"periods": 2, "targets": ["min_time_share>=0.6"], "demand": {"multipliers": [1, 2]},
    ...      "buy": {"k80": {"price": 1.0, "price_decline": 0.1}}},
    ...     ["buy.k80.lead_time=0,1"], progress=None)
    >>> [(row["buy.k80.lead_time"], row["status"], row["units_k80"]) for row in table.rows]
    [(0, 'optimal', 2.0), (1, 'optimal', 2.0)]
    """
    from fleetplan.planning.horizon.schedule import DEFAULT_GAP
    from fleetplan.planning.whatif import Vary, parse_vary, points

    if out is None:
        if resume:
            raise InstanceError("--resume", "a sweep without a results folder has nothing to resume")
        with tempfile.TemporaryDirectory(prefix="fleetplan-horizon-") as scratch:
            result = horizon_whatif(instance, horizon, varies, Path(scratch) / "sweep", time_limit=time_limit,
                                    seed=seed, threads=threads, mip_rel_gap=mip_rel_gap, stochastic=stochastic,
                                    policy=policy, executor=executor, workers=workers, address=address, tls=tls,
                                    insecure=insecure, progress=progress, plot=False)
        result.files = []
        return result
    from fleetplan.planning.whatif import instance_and_data

    base, instance_data, instance_path = instance_and_data(instance)  # bad input names the file, at once
    horizon_data = _horizon_data(horizon)
    parsed = [v if isinstance(v, Vary) else parse_vary(v) for v in varies]
    if not parsed:
        raise InstanceError("--vary", "give at least one --vary FIELD=START:STOP:STEP")
    _check_paths(instance_data, horizon_data, parsed)
    gap = DEFAULT_GAP if mip_rel_gap is None else mip_rel_gap
    if isinstance(gap, bool) or not isinstance(gap, (int, float)) or not 0 <= gap < 1:
        raise InstanceError("mip_rel_gap", f"{gap!r}: a fraction from 0 to 1")
    grid = points(parsed)
    for point in {0: grid[0], len(grid) - 1: grid[-1]}.values():
        # An impossible range fails before anything runs; so does a horizon that does not fit the
        # instance (a target's metric, a GPU type to buy): each point would fail alike.
        _check_point(*_point_problem(base, instance_data, horizon_data, point), point)
    if policy is not None and not isinstance(policy, str):
        raise InstanceError("policy", f"expected a solver name, got {type(policy).__name__}")
    if policy not in (None, "default"):  # a misspelt policy fails here, not once per point
        from fleetplan.solvers import get_solver

        try:
            get_solver(instance_data.get("kind", ""), policy)
        except InstanceError as error:
            raise InstanceError("policy", error.reason) from None
    options = {"mip_rel_gap": gap, "stochastic": bool(stochastic), "policy": policy}
    data = {"instance": instance_data, "horizon": horizon_data}
    return _sweep(data, instance_path, grid, parsed, Path(out), options, time_limit=time_limit, seed=seed,
                  threads=threads, executor=executor, workers=workers, address=address, tls=tls, insecure=insecure,
                  resume=resume, progress=progress, plot=plot)


def _horizon_data(horizon: Any) -> dict[str, Any]:
    """The horizon as the dict its fields are varied in: the validated spec written out, so a
    default the file left out (``buy.l4.price_decline``) is there to vary, and a CSV of options
    is read once."""
    from fleetplan.planning.horizon.spec import as_spec

    return as_spec(horizon).model_dump(mode="json", exclude_none=True)


def _split(point: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A point's changes to the instance (``instance.`` paths, prefix dropped) and to the horizon."""
    on_instance = {path.removeprefix(INSTANCE_PREFIX): value for path, value in point.items()
                   if path.startswith(INSTANCE_PREFIX)}
    on_horizon = {path: value for path, value in point.items() if not path.startswith(INSTANCE_PREFIX)}
    return on_instance, on_horizon


def _check_paths(instance_data: dict[str, Any], horizon_data: dict[str, Any], varies: Sequence[Any]) -> None:
    from fleetplan.instances.paths import leaves

    seen = set()
    for vary in varies:
        if vary.path in seen:
            raise InstanceError("--vary", f"{vary.path} is varied twice")
        seen.add(vary.path)
        on_instance = vary.path.startswith(INSTANCE_PREFIX)
        path = vary.path.removeprefix(INSTANCE_PREFIX)
        try:
            found = leaves(instance_data if on_instance else horizon_data, path)
        except InstanceError as error:
            where = "the instance" if on_instance else "the horizon"
            hint = "" if on_instance else " (a field of the base instance is instance.FIELD)"
            if not on_instance and path.split(".")[0] == "budget":
                hint = " (the horizon sets no budget: give one in the file to vary it)"
            raise InstanceError("--vary", f"{vary.path}: not a field of {where}: {error.reason}{hint}") from None
        for value in found:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InstanceError("--vary", f"{vary.path} names a {type(value).__name__}, not a number")


def _point_problem(base: Any, instance_data: dict[str, Any], horizon_data: dict[str, Any],
                   point: dict[str, Any]) -> tuple[Any, Any]:
    """The point's instance (``base``, validated from ``instance_data``, changed where the point
    says) and horizon, validated (a bad point names itself)."""
    from fleetplan.instances.paths import apply_changes, changed_instance
    from fleetplan.planning.horizon.spec import parse_horizon
    from fleetplan.planning.whatif import point_label

    on_instance, on_horizon = _split(point)
    try:
        instance = changed_instance(base, instance_data, on_instance) if on_instance else base
        spec = parse_horizon(apply_changes(horizon_data, on_horizon), "horizon")
    except InstanceError as error:
        raise InstanceError(error.path, error.reason, f"the point {point_label(point)}") from None
    return instance, spec


def _check_point(instance: Any, spec: Any, point: dict[str, Any]) -> None:
    """What :func:`~fleetplan.planning.horizon.plan_horizon` checks of the instance and the
    horizon together before it solves (the kind, the targets, what may be bought, the budgets)."""
    from fleetplan.planning.horizon import check_horizon_kind
    from fleetplan.planning.horizon.schedule import check_budgets, periods_for
    from fleetplan.planning.whatif import point_label

    check_horizon_kind(instance)
    try:
        check_budgets(spec, periods_for(instance, spec, spec.scenario_list()))
    except InstanceError as error:
        raise InstanceError(error.path, error.reason, f"the point {point_label(point)}") from None


def run_point(cell: Any) -> dict[str, Any]:
    """A sweep point's answer (the run layer's runner for horizon cells): the schedule planned
    for the point's instance and horizon, summarised as a results row."""
    from fleetplan.planning.horizon import plan_horizon

    text = cell.instance_data or "{}"
    if _parsed.get("text") != text:
        from fleetplan.instances import instance_from_data

        _parsed.clear()
        data = json.loads(text)
        _parsed.update(text=text, data=data, base=instance_from_data(data["instance"], "instance"))
    data = _parsed["data"]
    instance, spec = _point_problem(_parsed["base"], data["instance"], data["horizon"], cell.params)
    result = plan_horizon(instance, spec, time_limit=cell.time_limit, threads=cell.threads, seed=cell.seed,
                          mip_rel_gap=cell.options.get("mip_rel_gap", 0.01),
                          stochastic=bool(cell.options.get("stochastic", True)),
                          policy=cell.options.get("policy", "default"))
    return {"status": result.status, "objective": result.cost, "bound": result.bound, "message": result.message,
            "sense": "min", "objective_name": "discounted_cost", "metrics": summary(result),
            "stats": dict(result.stats)}


def summary(result: Any) -> dict[str, float]:
    """What a sweep's table shows of one schedule: the discounted total, its bound and gap,
    capex and opex over the horizon, the units of each item ordered in all and in the first
    period (expected over the scenarios), VSS and EVPI."""
    if not result.schedule:
        return {}
    weight = {row["name"]: row["probability"] for row in result.scenarios}
    values: dict[str, float] = {"cost": result.cost, "bound": result.bound, "gap": result.gap}
    values["capex"] = sum(weight[row["scenario"]] * row["capex"] for row in result.periods)
    values["opex"] = sum(weight[row["scenario"]] * row["opex"] for row in result.periods)
    for item in result.items:
        rows = [row for row in result.schedule if row["item"] == item]
        values[f"units_{item}"] = sum(weight[row["scenario"]] * row["ordered"] for row in rows)
        values[f"first_{item}"] = sum(weight[row["scenario"]] * row["ordered"] for row in rows if row["period"] == 1)
    checked = [row for row in result.periods if row.get("policy_checks") is not None]
    if checked:  # periods (over scenarios, expected) where the policy that runs misses a target
        values["missed_under_policy"] = round(sum(weight[row["scenario"]] for row in checked
                                                  if not row["policy_checks"] or not all(row["policy_checks"].values())), 12)
    for name in ("vss", "evpi"):
        if result.stochastic and result.stochastic.get(name) is not None:
            values[name] = result.stochastic[name]
    # VSS is infinite where the mean scenario's shared orders leave some scenario unservable:
    # the table says so rather than leaving the cell empty.
    return {name: value for name, value in values.items()
            if value is not None and (math.isfinite(value) or (name == "vss" and value > 0))}


def _sweep(data: dict[str, Any], instance_path: str | None, grid: list[dict[str, Any]], varies: Sequence[Any],
           folder: Path, options: dict[str, Any], *, time_limit: float, seed: int, threads: int, executor: str,
           workers: int, address: Any, tls: Any, insecure: bool, resume: bool, progress: Any, plot: bool) -> Any:
    """Run the grid's cells and tabulate them (the run layer's executors, the whatif folder's files)."""
    from fleetplan.instances.outputs import atomic_write_text, check_output_folder
    from fleetplan.planning.whatif import point_label
    from fleetplan.runs.cells import Cell
    from fleetplan.runs.points import run_points
    from fleetplan.runs.results import read_results

    if resume:
        if not (folder / "results.csv").exists():
            raise InstanceError("--resume", f"{folder} holds no interrupted sweep (no results.csv)")
        _check_same_sweep(folder, data, varies, options)
    else:
        check_output_folder(folder, [instance_path] if instance_path else [], flag="-o")
        folder.mkdir(exist_ok=True)
    kind = data["instance"].get("kind", "allocation")
    text = json.dumps(data, separators=(",", ":"))
    cells = [Cell(suite="horizon-whatif", group=GROUP, kind=kind, instance=point_label(point), params=point,
                  seed=seed, solver="horizon", label="horizon", options=options, repeat=0, time_limit=time_limit,
                  threads=threads, order=index, instance_data=text, runner=RUNNER)
             for index, point in enumerate(grid)]
    atomic_write_text(folder / SWEEP_FILE, json.dumps(
        {"instance": instance_path, "vary": [{"path": v.path, "values": v.values} for v in varies],
         "options": options, "data": data}) + "\n")
    run_points(cells, folder, resume=resume, progress=progress, executor=executor, workers=workers, address=address,
               tls=tls, insecure=insecure)
    return tabulate(folder, read_results(folder), grid, varies, data["horizon"].get("currency", ""), plot=plot)


def _check_same_sweep(folder: Path, data: dict[str, Any], varies: Sequence[Any], options: dict[str, Any]) -> None:
    try:
        saved = json.loads((folder / SWEEP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InstanceError("--resume", f"{folder / SWEEP_FILE} is missing or unreadable: not a horizon "
                                        "sweep's folder") from None
    same = (saved.get("data") == data and saved.get("options") == options
            and [v["path"] for v in saved.get("vary", [])] == [v.path for v in varies])
    if not same:
        raise InstanceError("--resume", f"{folder} holds another sweep (instance, horizon, fields or options "
                                        "differ): resume it with its own arguments, or choose another folder")


def tabulate(folder: Path, rows: list[dict[str, Any]], grid: list[dict[str, Any]], varies: Sequence[Any],
             currency: str, plot: bool = True) -> Any:
    """One row per point (in grid order), written as CSV and Parquet, and drawn: one panel per
    money column and per item's units against the first varied field."""
    import pandas as pd

    from fleetplan.instances.tables import write_table
    from fleetplan.planning.whatif import (
        PARQUET_FILE,
        PLOT_FILE,
        TABLE_FILE,
        WhatIfResult,
        finite_float,
        point_label,
    )

    by_label = {row["instance"]: row for row in rows if row["group"] == GROUP}
    table, failed, names = [], 0, []
    for point in grid:
        record: dict[str, Any] = dict(point)
        row = by_label.get(point_label(point))
        if row is None:
            record["status"] = "missing"
            failed += 1
            table.append(record)
            continue
        values = json.loads(row.get("metrics") or "{}")
        record.update(status=row["status"], wall_s=finite_float(row.get("wall_s")), **values)
        names += [name for name in values if name not in names]
        if row["status"] not in ("optimal", "feasible", "time_limit"):
            failed += 1
            record["message"] = row.get("message", "")
        table.append(record)
    names.sort(key=_column_order)
    result = WhatIfResult(rows=table, varied=[v.path for v in varies], metrics=names, failed=failed,
                          solver="the horizon model")  # the title's "under ...": no policy solves a schedule
    frame = pd.DataFrame(table)
    result.files.append(str(write_table(frame, folder / TABLE_FILE, "csv")))
    result.files.append(str(write_table(frame, folder / PARQUET_FILE, "parquet")))
    # A column that is zero at every point (nothing ordered in the first period, say) says so in
    # the table; a flat panel would only crowd the picture.
    drawn = [name for name in names if name not in ("bound", "gap")
             and any(finite_float(row.get(name)) not in (None, 0.0) for row in table)]
    if plot and drawn and any(row.get("status") in ("optimal", "feasible", "time_limit") for row in table):
        from fleetplan.plotting.planning import plot_sweep

        units = {name: (currency or "money") if not name.startswith(("units_", "first_")) else "units"
                 for name in drawn}
        plot_sweep(table, result.varied, drawn, units, folder / PLOT_FILE,
                   title=f"what if: {', '.join(result.varied)} (purchase schedule over the horizon)")
        result.files.append(str(folder / PLOT_FILE))
    return result


def _column_order(name: str) -> tuple[int, str]:
    first = ("cost", "bound", "gap", "capex", "opex")
    if name in first:
        return first.index(name), ""
    for rank, prefix in enumerate(("units_", "first_", "vss", "evpi", "missed_"), start=len(first)):
        if name.startswith(prefix):
            return rank, name
    return 99, name
