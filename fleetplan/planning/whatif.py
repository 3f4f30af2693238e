"""What-if sweeps over the planner's own instance: one solve per point of a grid of field values.

``--vary FIELD=START:STOP:STEP`` (or ``FIELD=a,b,c``; ``FIELD*=...`` multiplies the field's
current value by each factor) names a path into the instance file (:mod:`fleetplan.instances.paths`:
``worker_types.h100.count``, ``regions.r1.gpu_supply.h100``, ``jobs.*.steps_left*``,
``reservations.web.capacity_rru``). Every path is checked against the instance before any point
runs. Each point is a cell of the benchmark harness (the instance data and the point's changes),
so the sweep runs on the same executors as ``fleetplan bench`` — local processes or a Dask
cluster — and an interrupted sweep resumes without redoing finished points. With one local
worker (the default) the points run in this process, the file parsed once and each point
validated only where it changes the instance.

The folder holds ``results.csv`` (the harness's rows), ``whatif.csv`` and ``whatif.parquet``
(one row per point: the varied values, status, objective and the chosen metrics) and
``whatif.png`` (one panel per metric against the first varied field).

>>> grid = parse_vary("worker_types.v100.count=1:3:1")
>>> grid.path, grid.values
('worker_types.v100.count', [1, 2, 3])
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import math
import re
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetplan.errors import InstanceError, raise_interruption

# Grids larger than this are refused (a typo in STEP should not start a million solves).
MAX_POINTS = 10_000
WHATIF_GROUP = "whatif"
TABLE_FILE = "whatif.csv"
PARQUET_FILE = "whatif.parquet"
PLOT_FILE = "whatif.png"
INSTANCE_FILE = "instance.json"


@dataclass(frozen=True)
class Vary:
    """One ``--vary``: the field path (``*`` appended when the values are factors) and values."""

    path: str
    values: list[Any]


def _number(text: str, where: str) -> int | float:
    """A value (or a factor) of ``--vary``, within the numbers an instance file may hold
    (:data:`~fleetplan.instances.base.MAX_INTEGER`, :data:`~fleetplan.instances.base.MAX_MAGNITUDE`)."""
    from fleetplan.instances.base import MAX_INTEGER, MAX_MAGNITUDE

    text = text.strip()
    try:
        value: int | float = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            raise InstanceError("--vary", f"{where}: '{text[:30]}' is not a number") from None
    if isinstance(value, int) and abs(value) > MAX_INTEGER:
        raise InstanceError("--vary", f"{where}: {text[:30]} is out of range (instances hold 64-bit integers, "
                                      "|n| < 2^63)")
    if not abs(value) <= MAX_MAGNITUDE:
        raise InstanceError("--vary", f"{where}: {text[:30]} is out of range (values must be finite, |x| <= "
                                      f"{MAX_MAGNITUDE:g})")
    return value


def parse_vary(text: str) -> Vary:
    """``"worker_types.h100.count=0:64:8"`` (START:STOP:STEP, STOP included) or ``"...=a,b,c"``."""
    if not isinstance(text, str) or "=" not in text or len(text) > 2000:
        raise InstanceError("--vary", f"{str(text)[:60]!r}: expected FIELD=START:STOP:STEP or FIELD=a,b,c")
    path, _, spec = text.partition("=")
    path = path.strip()
    if not path:
        raise InstanceError("--vary", f"'{text[:60]}': the field path is missing")
    if ":" in spec:
        pieces = spec.split(":")
        if len(pieces) != 3:
            raise InstanceError("--vary", f"'{text[:60]}': a range is START:STOP:STEP")
        start, stop, step = (_number(piece, text[:60]) for piece in pieces)
        if step <= 0:
            raise InstanceError("--vary", f"'{text[:60]}': STEP must be positive")
        if stop < start:
            raise InstanceError("--vary", f"'{text[:60]}': STOP must not be below START")
        span = (stop - start) / step  # a float: 1e30 / 1e-300 is inf, not an integer
        if not span < MAX_POINTS:
            shown = f"{span + 1:.3g}" if math.isfinite(span) else "more than 10^308"
            raise InstanceError("--vary", f"'{text[:60]}': {shown} values (at most {MAX_POINTS}); raise STEP")
        count = int(math.floor(span + 1e-9)) + 1
        if count > MAX_POINTS:
            raise InstanceError("--vary", f"'{text[:60]}': {count} values (at most {MAX_POINTS}); raise STEP")
        integral = all(isinstance(v, int) for v in (start, stop, step))
        values = [start + i * step if integral else round(start + i * step, 12) for i in range(count)]
    else:
        values = [_number(piece, text[:60]) for piece in spec.split(",") if piece.strip()]
        if not values:
            raise InstanceError("--vary", f"'{text[:60]}': no values")
    return Vary(path, values)


@dataclass
class WhatIfResult:
    """The sweep's table (one dict per point) and where it was written."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    varied: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    failed: int = 0
    files: list[str] = field(default_factory=list)
    solver: str = ""
    # A service metric that worsens as a capacity grows under the solver, one line each.
    warnings: list[str] = field(default_factory=list)
    # The metrics with a policy-free frontier column (``frontier_<metric>``) in ``rows``.
    frontier: list[str] = field(default_factory=list)


# Fields that are capacities: more of them should not make a service metric worse.
CAPACITY_FIELD = re.compile(r"^(worker_types\.[^.]+\.count|clusters\.[^.]+(\.[^.]+)?\.machines|"
                            r"regions\.[^.]+\.(gpu_supply\.[^.]+|storage_capacity_bytes))\*?$")


def points(varies: Sequence[Vary]) -> list[dict[str, Any]]:
    """The grid: every combination of the varied values, first field slowest."""
    total = math.prod(len(vary.values) for vary in varies)
    if total > MAX_POINTS:
        raise InstanceError("--vary", f"the grid has {total} points (at most {MAX_POINTS})")
    return [dict(zip([v.path for v in varies], combo, strict=True))
            for combo in itertools.product(*[v.values for v in varies])]


def check_paths(data: dict[str, Any], varies: Sequence[Vary]) -> None:
    """Every path reaches a number of the instance (else one error naming close names)."""
    from fleetplan.instances.paths import leaves

    seen = set()
    for vary in varies:
        if vary.path in seen:
            raise InstanceError("--vary", f"{vary.path} is varied twice")
        seen.add(vary.path)
        try:
            found = leaves(data, vary.path)
        except InstanceError as error:  # named by its flag, as every other --vary error is
            raise InstanceError("--vary", f"{error.path}: {error.reason}") from None
        for value in found:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InstanceError("--vary", f"{vary.path} names a {type(value).__name__}, not a number")


def check_metrics(metrics: Sequence[str] | None, kind: str) -> None:
    """Every ``--metrics`` name is a metric the kind's judge reports (as ``compare`` refuses
    one no plan has), checked before any point runs."""
    from fleetplan.instances.glossary import describe

    unknown = [name for name in metrics or () if (entry := describe(name, kind)) is None or entry.role != "metric"]
    if unknown:
        raise InstanceError("--metrics", f"no {kind} metric named {', '.join(unknown)} (`fleetplan metrics {kind}` "
                                         "lists them)")


def instance_and_data(instance: Any) -> tuple[Any, dict[str, Any], str | None]:
    """The instance a sweep varies, its data (the file's layout, where paths point) and its path:
    from a JSON file, a folder of tables (as ``fleetplan export`` writes them), an instance or
    its dict."""
    import os

    from fleetplan.instances import as_instance, instance_from_data, load_instance, read_json_file

    if isinstance(instance, (str, os.PathLike)):
        if Path(instance).is_dir():
            loaded = load_instance(instance)
            return loaded, json.loads(loaded.model_dump_json()), str(instance)
        data = read_json_file(instance)
        return instance_from_data(data, str(instance)), data, str(instance)
    instance = as_instance(instance)
    return instance, json.loads(instance.model_dump_json()), None


def point_label(point: dict[str, Any]) -> str:
    return ",".join(f"{path}={value}" for path, value in point.items())


def whatif(instance: Any, varies: Sequence[str | Vary], out: str | Path | None = None, *, solver: str | None = None,
           options: dict[str, Any] | None = None, metrics: Sequence[str] | None = None,
           time_limit: float = 60.0, seed: int = 0, threads: int = 1, executor: str = "local", workers: int = 1,
           address: Any = None, tls: Any = None, insecure: bool = False, resume: bool = False,
           progress: Any = "auto", plot: bool = False, frontier: bool = False) -> WhatIfResult:
    """Solve the instance once per grid point and tabulate the metrics.

    Parameters
    ----------
    instance : the planner's instance file (a path), or an instance or its dict
    out : the results folder (new, or the folder of an interrupted sweep with ``resume=True``);
        None: no files, the table only (``result.rows``)
    varies : ``FIELD=START:STOP:STEP`` strings (or :class:`Vary`)
    solver, options : the solver and its options (the kind's default solver when None)
    metrics : the metrics to tabulate and draw (default: the kind's service metrics)
    time_limit : seconds per point
    executor, workers, address, tls, insecure : as ``fleetplan bench`` (local processes or Dask)
    resume : finish an interrupted sweep in ``out`` without redoing finished points
    plot : also draw ``whatif.png`` in ``out`` (the command line does; the library returns the table)
    frontier : allocation: add each point's policy-free best value of the service metrics
        (:mod:`fleetplan.planning.frontier`), tabulated as ``frontier_<metric>`` and drawn dashed

    >>> import fleetplan
    >>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
    >>> table = whatif(instance, ["worker_types.v100.count=1,2"], progress=None)
    >>> [(row["worker_types.v100.count"], row["status"]) for row in table.rows]
    [(1, 'optimal'), (2, 'optimal')]
    """
    from fleetplan.instances.outputs import atomic_write_text, check_output_folder
    from fleetplan.instances.paths import changed_instance
    from fleetplan.runs.cells import Cell
    from fleetplan.runs.points import run_points
    from fleetplan.runs.results import read_results
    from fleetplan.solvers import get_solver

    if out is None:
        if resume:
            raise InstanceError("--resume", "a sweep without a results folder has nothing to resume")
        with tempfile.TemporaryDirectory(prefix="fleetplan-whatif-") as scratch:
            result = whatif(instance, varies, Path(scratch) / "sweep", solver=solver, options=options,
                            metrics=metrics, time_limit=time_limit, seed=seed, threads=threads, executor=executor,
                            workers=workers, address=address, tls=tls, insecure=insecure, progress=progress,
                            plot=False, frontier=frontier)
        result.files = []
        return result
    instance, data, instance_path = instance_and_data(instance)
    from fleetplan.planning.kinds import planning_kind

    if frontier and not planning_kind(instance.kind).frontier:
        raise InstanceError("--frontier", f"the service frontier is offered for allocation instances, not "
                                          f"{instance.kind}")
    parsed = [v if isinstance(v, Vary) else parse_vary(v) for v in varies]
    if not parsed:
        raise InstanceError("--vary", "give at least one --vary FIELD=START:STOP:STEP")
    check_paths(data, parsed)
    spec = get_solver(instance.kind, solver)
    options = spec.check_options(dict(options or {}))
    check_metrics(metrics, instance.kind)
    grid = points(parsed)
    # The grid's corners are checked as instances before anything runs (an impossible range
    # fails at once); a point inside that is invalid ends as its own failed row.
    for point in {0: grid[0], len(grid) - 1: grid[-1]}.values():
        try:
            changed_instance(instance, data, point)
        except InstanceError as error:
            raise InstanceError(error.path, error.reason, f"the point {point_label(point)}") from None
    folder = Path(out)
    if resume:
        if not (folder / "results.csv").exists():
            raise InstanceError("--resume", f"{folder} holds no interrupted sweep (no results.csv)")
        _check_same_sweep(folder, data, parsed, spec.name, options)
    else:
        check_output_folder(folder, [instance_path] if instance_path is not None else [], flag="-o")
        folder.mkdir(exist_ok=True)
    text = json.dumps(data, separators=(",", ":"))
    cells = [Cell(suite="whatif", group=WHATIF_GROUP, kind=instance.kind, instance=point_label(point),
                  params=point, seed=seed, solver=spec.name, label=spec.name, options=options, repeat=0,
                  time_limit=time_limit, threads=threads, order=index, instance_data=text)
             for index, point in enumerate(grid)]
    atomic_write_text(folder / INSTANCE_FILE, json.dumps(
        {"instance": None if instance_path is None else str(instance_path), "vary": [{"path": v.path, "values": v.values} for v in parsed],
         "solver": spec.name, "options": options, "data": data}, indent=None) + "\n")
    run_points(cells, folder, resume=resume, progress=progress, executor=executor, workers=workers, address=address,
               tls=tls, insecure=insecure,
               in_process=lambda todo, on_row, on_start: _run_in_process(instance, data, todo, on_row, on_start),
               while_waiting=lambda: _import_while_waiting(plot))
    rows = read_results(folder)
    best = _frontier(instance, data, grid, metrics) if frontier else None
    unserved = _unserved(instance, data, grid, rows)
    return tabulate(folder, rows, grid, parsed, metrics, instance.kind, plot=plot, solver=spec.name, frontier=best,
                    unserved=unserved)


def _unserved(instance: Any, data: dict[str, Any], grid: list[dict[str, Any]],
              rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per point no plan serves (infeasible), how far it is from servable, where the kind can say
    (reservation: the least shortfall): a table shows that instead of a blank."""
    from fleetplan.instances.paths import changed_instance
    from fleetplan.planning.kinds import planning_kind

    kind = planning_kind(instance.kind)
    if kind.unserved_metrics_path is None:
        return {}
    infeasible = {row["instance"] for row in rows if row.get("group") == WHATIF_GROUP and row["status"] == "infeasible"}
    out = {}
    for point in grid:
        label = point_label(point)
        if label in infeasible:
            try:
                out[label] = kind.unserved_metrics(changed_instance(instance, data, point))
            except InstanceError:
                continue
    return out


def _frontier(instance: Any, data: dict[str, Any], grid: list[dict[str, Any]],
              metrics: Sequence[str] | None) -> dict[str, dict[str, float | None]]:
    """Per point (by label): the policy-free best value of each frontier metric wanted."""
    from fleetplan.instances.paths import changed_instance
    from fleetplan.planning.frontier import FRONTIER_METRICS, service_frontier

    wanted = [name for name in (metrics or default_metrics("allocation")) if name in FRONTIER_METRICS]
    out: dict[str, dict[str, float | None]] = {}
    for point in grid:
        try:
            cluster = changed_instance(instance, data, point)
        except InstanceError:
            continue
        out[point_label(point)] = {name: service_frontier(cluster, name) for name in wanted}
    return out


def _import_while_waiting(plot: bool) -> threading.Thread:
    """Import what the table and the figure need while the points run on the Dask cluster and
    this process only waits: half a second of imports (pandas, matplotlib) off the sweep's end.
    (Not before local worker processes are started: no thread runs while they are made.)"""
    def load() -> None:
        with contextlib.suppress(Exception):  # the import proper, later, reports any failure
            importlib.import_module("fleetplan.instances.tables")
            importlib.import_module("pandas")
            if plot:
                importlib.import_module("fleetplan.plotting.planning")
                importlib.import_module("matplotlib.figure")
                importlib.import_module("matplotlib.backends.backend_agg")

    thread = threading.Thread(target=load, name="fleetplan-whatif-imports", daemon=True)
    thread.start()
    return thread


def _run_in_process(instance: Any, data: dict[str, Any], cells: Sequence[Any], on_row: Any, on_start: Any) -> None:
    """One worker: the points in this process, one after another, the file parsed once and each
    point validated only where it changes the instance (``--workers N`` or Dask run each point in
    a process of its own, killed if it outlives its limit)."""
    from fleetplan.instances.paths import changed_instance
    from fleetplan.runs.cells import error_row, run_cell

    for cell in cells:
        on_start(cell)
        try:
            point = changed_instance(instance, data, cell.params)
        except InstanceError as error:
            on_row(cell, error_row(cell, f"invalid input: {error}"))
            continue
        on_row(cell, run_cell(cell, preload=False, instance=point))


def _check_same_sweep(folder: Path, data: dict[str, Any], varies: Sequence[Vary], solver: str,
                      options: dict[str, Any]) -> None:
    """``--resume`` finishes the same sweep: the same instance data, fields, solver and options."""
    try:
        saved = json.loads((folder / INSTANCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InstanceError("--resume", f"{folder / INSTANCE_FILE} is missing or unreadable: not a whatif "
                                        "folder") from None
    same = (saved.get("data") == data and saved.get("solver") == solver and saved.get("options") == options
            and [v["path"] for v in saved.get("vary", [])] == [v.path for v in varies])
    if not same:
        raise InstanceError("--resume", f"{folder} holds another sweep (instance, fields, solver or options "
                                        "differ): resume it with its own arguments, or choose another folder")


def default_metrics(kind: str) -> list[str]:
    """The kind's service metrics (:func:`fleetplan.planning.kinds.service_metrics`)."""
    from fleetplan.planning.kinds import service_metrics

    return service_metrics(kind)


def tabulate(folder: Path, rows: list[dict[str, Any]], grid: list[dict[str, Any]], varies: Sequence[Vary],
             metrics: Sequence[str] | None, kind: str, plot: bool = True, solver: str = "",
             frontier: dict[str, dict[str, float | None]] | None = None,
             unserved: dict[str, dict[str, float]] | None = None) -> WhatIfResult:
    """One row per point (in grid order): varied values, status, objective, metrics; written as
    CSV and Parquet, and drawn."""
    import pandas as pd

    from fleetplan.instances.glossary import describe
    from fleetplan.instances.tables import write_table

    by_label = {row["instance"]: row for row in rows if row["group"] == WHATIF_GROUP}
    wanted = list(metrics) if metrics else default_metrics(kind)
    table, failed = [], 0
    for point in grid:
        row = by_label.get(point_label(point))
        record: dict[str, Any] = dict(point)
        if row is None:
            record.update(status="missing")
            failed += 1
            table.append(record)
            continue
        values = json.loads(row.get("metrics") or "{}") or (unserved or {}).get(point_label(point), {})
        record.update(status=row["status"], objective=finite_float(row.get("objective")), wall_s=finite_float(row.get("wall_s")))
        record.update({name: finite_float(values.get(name)) for name in wanted})
        for name, value in ((frontier or {}).get(point_label(point)) or {}).items():
            record[f"frontier_{name}"] = finite_float(value)
        if row["status"] not in ("optimal", "feasible", "time_limit"):
            failed += 1
            record["message"] = row.get("message", "")
        table.append(record)
    if not metrics:  # the defaults a kind's instance does not have (no SLOs, no steps) are dropped
        wanted = [name for name in wanted if any(record.get(name) is not None for record in table)]
        for record in table:
            for name in list(record):
                if name not in wanted and name in default_metrics(kind):
                    del record[name]
    frame = pd.DataFrame(table)
    shown_frontier = [name for name in wanted if any(f"frontier_{name}" in record for record in table)]
    result = WhatIfResult(rows=table, varied=[v.path for v in varies], metrics=wanted, failed=failed, solver=solver,
                          frontier=shown_frontier)
    result.warnings = worsening(table, varies, wanted, kind, solver)
    result.files.append(str(write_table(frame, folder / TABLE_FILE, "csv")))
    try:
        result.files.append(str(write_table(frame, folder / PARQUET_FILE, "parquet")))
    except ImportError as error:  # pragma: no cover - pyarrow is a dependency
        raise_interruption(error)
    if plot:
        from fleetplan.plotting.planning import plot_sweep

        units = {name: (entry.unit if (entry := describe(name)) else "") for name in wanted}
        plot_sweep(table, result.varied, wanted, units, folder / PLOT_FILE,
                   title=f"what if: {', '.join(result.varied)} ({kind}, under {solver or 'the default solver'})",
                   frontier=shown_frontier)
        result.files.append(str(folder / PLOT_FILE))
    return result


def worsening(table: Sequence[dict[str, Any]], varies: Sequence[Vary], metrics: Sequence[str], kind: str,
              solver: str) -> list[str]:
    """A line per (capacity field, service metric) whose value gets worse as the field grows
    (the other fields held), under the solver: a policy doing what it does, not the capacity."""
    from fleetplan.instances.glossary import describe
    from fleetplan.planning.kinds import planning_kind

    frontier_offered = planning_kind(kind).frontier
    lines = []
    for vary in varies:
        if not CAPACITY_FIELD.match(vary.path):
            continue
        others = [v.path for v in varies if v.path != vary.path]
        series: dict[tuple, list[dict[str, Any]]] = {}
        for record in table:
            series.setdefault(tuple(record.get(name) for name in others), []).append(record)
        for metric in metrics:
            entry = describe(metric, kind)
            if entry is None or entry.better not in ("higher", "lower") or entry.relative:
                continue
            steps = worse = 0
            for members in series.values():
                values = [(r[vary.path], r.get(metric)) for r in sorted(members, key=lambda r: r[vary.path])
                          if finite_float(r.get(metric)) is not None]
                for (_, before), (_, after) in zip(values, values[1:], strict=False):
                    steps += 1
                    change = after - before
                    if abs(change) > 1e-6 * max(1.0, abs(before)) and (change < 0) == (entry.better == "higher"):
                        worse += 1
            if worse:
                lines.append(f"{metric} gets worse as {vary.path} grows under {solver or 'the solver'} "
                             f"({worse} of {steps} steps): the policy, not the capacity"
                             + (" (--frontier draws the best any allocation reaches)" if frontier_offered else ""))
    return lines


def finite_float(value: Any) -> float | None:
    """A table cell as a finite float, or None (empty, text, inf, nan)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
