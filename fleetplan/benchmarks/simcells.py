"""Simulation cells: sweep a simulator of :mod:`fleetplan.sim` like a solver.

A suite group with ``simulator:`` instead of ``kind:`` sweeps a simulator's scenario
parameters, schedulers, seeds and repeats::

    groups:
      - name: sync
        simulator: parsync
        scenario: {schedulers: [2, 4, 8], load: 0.8}   # lists are swept, as under generator
        schedulers: [latency-first, fifo]                # or `all` (the default)
        seeds: [0, 1]
        time_limit: 600                                  # the child is killed past 1.5x + grace

Each cell runs ``fleetplan.sim.run(simulator, scenario, scheduler, seed)`` in a child process,
exactly as solve cells do (locally or on Dask), and lands in ``results.csv`` as a row with
``kind = simulation``, ``instance = SIMULATOR[params]``, ``solver = label = scheduler``,
``status = done`` (or ``error``), the simulation's wall time and memory, and its scalar
``SimResult.metrics`` as JSON in the ``metrics`` column (``stats`` holds the event count and
simulated time). ``--save-plans`` keeps each run's full ``SimResult.to_dict()`` (groups and
series too) in ``plans/``. The report tabulates the median of every metric per scenario and
scheduler.

The simulator's module is resolved from the registry when the suite is expanded and travels
with the cell, so the child imports only that module.
"""

from __future__ import annotations

import json
import statistics
import traceback
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetplan.benchmarks.results import SIM_STATUS, as_float, row_failed
from fleetplan.instances import InstanceError

if TYPE_CHECKING:  # cells imports this module lazily; no cycle at run time
    from fleetplan.benchmarks.cells import Cell
    from fleetplan.benchmarks.memory import MemoryProbe
    from fleetplan.benchmarks.suite import Group

SIM_KIND = "simulation"
# Metric columns shown in the report (the CSV has them all).
MAX_METRIC_COLUMNS = 8


def check_sim_group(group: Group, at: str) -> None:
    """Validate a simulation group: the simulator, its schedulers, every scenario of the sweep."""
    from fleetplan import sim

    if group.kind is not None:
        raise InstanceError(f"{at}.kind", "a group has either `kind:` (solvers) or `simulator:`, not both")
    for field in ("generator", "solvers"):
        if field in group.model_fields_set:
            raise InstanceError(f"{at}.{field}", "a simulation group sweeps `scenario:` and `schedulers:` instead")
    try:
        spec = sim.get_simulator(str(group.simulator))
    except InstanceError as error:
        raise InstanceError(f"{at}.simulator", error.reason) from None
    if group.schedulers != "all":
        if not group.schedulers:
            raise InstanceError(f"{at}.schedulers", "must list at least one scheduler (or say 'all')")
        for index, name in enumerate(group.schedulers):
            if name not in spec.schedulers:
                raise InstanceError(f"{at}.schedulers[{index}]", f"unknown scheduler '{name}' for simulator "
                                                                 f"'{spec.name}' (known: {', '.join(spec.schedulers)})")
            if group.schedulers.index(name) != index:
                raise InstanceError(f"{at}.schedulers[{index}]", f"duplicate scheduler '{name}'")
    for index, seed in enumerate(group.seeds):
        if seed < 0:
            raise InstanceError(f"{at}.seeds[{index}]", "a seed must be >= 0")
    if any(isinstance(value, list) and not value for value in group.scenario.values()):
        return  # the suite reports the empty list with its path
    for params in group.parameter_sets():
        try:
            spec.scenario(params)
        except InstanceError as error:
            path = error.path.removeprefix("scenario").lstrip(".")
            raise InstanceError(f"{at}.scenario{'.' + path if path else ''}", error.reason) from None


def simulator_module(name: str) -> str:
    """The module that defines simulator ``name`` (from the registry)."""
    from fleetplan import sim

    sim.get_simulator(name)  # unknown names fail here, with the known ones listed
    return sim._MODULES[name]


def run_sim_cell(cell: Cell, probe: MemoryProbe, preload: bool) -> dict[str, Any]:
    """Run one simulation cell in this process and return its row."""
    import importlib

    from fleetplan.benchmarks.cells import _with_memory, base_row, error_row, one_line, plan_file
    from fleetplan.benchmarks.memory import preload_backends

    row = base_row(cell)
    try:
        spec = importlib.import_module(str(cell.sim_module)).SIMULATOR
        scenario = spec.scenario(cell.params)
        if preload:
            preload_backends()
        with probe:
            result = spec.run(scenario, cell.solver, cell.seed)
    except InstanceError as error:
        return _with_memory(error_row(cell, f"invalid input: {error}"), probe)
    except Exception as error:  # a crashing simulator is a result, not the end of the sweep
        where = traceback.extract_tb(error.__traceback__)[-1]
        return _with_memory(error_row(cell, f"{type(error).__name__}: {error} "
                                            f"({Path(where.filename).name}:{where.lineno})"), probe)
    data = result.to_dict()
    row.update(status=SIM_STATUS, wall_s=round(result.wall_s, 6), message=one_line(result.message),
               metrics=json.dumps(data["metrics"], sort_keys=True),
               stats=json.dumps({"events": data["events"], "sim_time": data["sim_time"]}))
    if cell.plan_dir:
        plan_file(cell.plan_dir, cell).write_text(json.dumps(data), encoding="utf-8")
    return _with_memory(row, probe)


def sim_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scenario and scheduler: runs, failures, median wall time and the median of every
    metric over seeds and repeats (of the runs that finished)."""
    buckets: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        buckets[(str(row["instance"]), str(row["label"]))].append(row)
    out = []
    for (instance, label), bucket in buckets.items():
        ok = [row for row in bucket if not row_failed(row)]
        names = sorted({name for row in ok for name in _metrics(row)})
        metrics = {}
        for name in names:
            values = [value for row in ok if (value := as_float(_metrics(row).get(name))) is not None]
            metrics[name] = statistics.median(values) if values else None
        times = [value for row in ok if (value := as_float(row["wall_s"])) is not None]
        out.append({"scenario": instance, "scheduler": label, "runs": len(bucket),
                    "failed": len(bucket) - len(ok),
                    "median_s": statistics.median(times) if times else None, "metrics": metrics})
    return out


def sim_section(rows: list[dict[str, Any]]) -> list[str]:
    """Report lines of one simulation group (the table of :func:`sim_summary`)."""
    from fleetplan.benchmarks.report import _fmt, _table

    summary = sim_summary(rows)
    names = sorted({name for line in summary for name in line["metrics"]})
    shown = names[:MAX_METRIC_COLUMNS]
    lines = [[line["scenario"], line["scheduler"], line["runs"], line["failed"], _fmt(line["median_s"]),
              *[line["metrics"].get(name) for name in shown]] for line in summary]
    out = _table(["scenario", "scheduler", "runs", "failed", "median s", *shown], lines)
    if len(names) > len(shown):
        out.append(f"\n({len(names) - len(shown)} more metrics in the `metrics` column of results.csv)")
    return out + [""]


def _metrics(row: dict[str, Any]) -> dict[str, Any]:
    try:
        data = json.loads(row.get("metrics") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
