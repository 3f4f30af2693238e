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
with the cell, so the child imports only that module. Validation of simulation groups lives in
:mod:`.suite`, running a cell in :mod:`.cells`; this module summarises their rows for the report.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from typing import Any

from fleetplan.benchmarks.markdown import fmt_value, markdown_table
from fleetplan.errors import InstanceError
from fleetplan.runs.results import as_float, row_failed

# Metric columns shown in the report (the CSV has them all).
MAX_METRIC_COLUMNS = 8


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
    summary = sim_summary(rows)
    names = _ordered_metrics({name for line in summary for name in line["metrics"]},
                             _simulator_of(str(rows[0]["instance"])) if rows else "")
    shown = names[:MAX_METRIC_COLUMNS]
    lines = [[line["scenario"], line["scheduler"], line["runs"], line["failed"], fmt_value(line["median_s"]),
              *[line["metrics"].get(name) for name in shown]] for line in summary]
    out = markdown_table(["scenario", "scheduler", "runs", "failed", "median s", *shown], lines)
    if len(names) > len(shown):
        out.append(f"\n({len(names) - len(shown)} more metrics in the `metrics` column of results.csv)")
    return out + [""]


def _simulator_of(instance: str) -> str:
    """The simulator's name from a row's instance name (``mast[hours=8,...]``)."""
    return instance.split("[", 1)[0]


def _ordered_metrics(names: set[str], simulator: str) -> list[str]:
    """The simulator's ``report_metrics`` first (those present), then the rest alphabetically."""
    from fleetplan import sim

    try:
        first = [name for name in sim.get_simulator(simulator).report_metrics if name in names]
    except InstanceError:  # a results table of a simulator this version no longer has
        first = []
    return first + sorted(names - set(first))


def _metrics(row: dict[str, Any]) -> dict[str, Any]:
    try:
        data = json.loads(row.get("metrics") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
