"""One group of a bundled `fleetplan bench` suite, run alone, its CPU seconds as one JSON line.

    python benchmarks/scripts/suite_group.py gavel-distinct million --out DIR
    python benchmarks/scripts/suite_group.py gavel-distinct quarter-million --labels max-throughput --out DIR

Writes ``DIR/suite.yaml`` (the bundled suite with only GROUP, and with ``--labels`` only those
solvers of it), runs ``fleetplan bench DIR/suite.yaml -o DIR/out --no-report`` (a fresh process
per cell, as always) and prints one JSON line: ``cpu_s.LABEL.JOBS``, the median over the repeats
of each cell's ``stats.cpu_s`` (``fleetplan.solve`` from the instance object to the judged plan),
``wall_s.LABEL.JOBS`` likewise, and the statuses seen. JOBS is the instance's ``jobs`` parameter
(its name when it has none). Exit status 1 when a cell ended other than ``--status`` (default
``optimal``; several may be given): a figure quoted as certified must be. ``fleetplan bench headline`` reads the
headline's suite rows from this line (benchmarks/headline.yaml).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SUITES = ROOT / "fleetplan" / "benchmarks" / "suites"


def one_group(suite: dict, group: str, labels: list[str] | None) -> dict:
    """The suite with only ``group`` (and only the solvers labelled ``labels``)."""
    found = [entry for entry in suite["groups"] if entry.get("name") == group]
    if not found:
        names = ", ".join(str(entry.get("name")) for entry in suite["groups"])
        sys.exit(f"suite_group.py: no group {group!r} in {suite['name']} (groups: {names})")
    entry = dict(found[0])
    if labels:
        if not isinstance(entry["solvers"], list):
            sys.exit(f"suite_group.py: --labels: group {group!r} names no solvers one by one ({entry['solvers']!r})")
        solvers = [solver for solver in entry["solvers"] if solver.get("label", solver["name"]) in labels]
        if len(solvers) != len(set(labels)):
            sys.exit(f"suite_group.py: --labels {' '.join(labels)}: not every label is in group {group!r}")
        entry["solvers"] = solvers
    return {**suite, "groups": [entry]}


def figures(rows: list[dict[str, str]]) -> dict:
    """Medians of the cells' CPU and wall seconds by label and jobs, and the statuses."""
    cpu: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    wall: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    statuses: dict[str, int] = defaultdict(int)
    for row in rows:
        params = json.loads(row["params"] or "{}")
        size = str(params.get("jobs", row["instance"]))
        stats = json.loads(row["stats"] or "{}")
        if "cpu_s" in stats:
            cpu[row["label"]][size].append(float(stats["cpu_s"]))
        wall[row["label"]][size].append(float(row["wall_s"] or "nan"))
        statuses[row["status"]] += 1
    median = {name: {label: {size: statistics.median(values) for size, values in by_size.items()}
                     for label, by_size in table.items()} for name, table in (("cpu_s", cpu), ("wall_s", wall))}
    return {**median, "statuses": dict(statuses), "cells": len(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite", help="a bundled suite's name (fleetplan/benchmarks/suites/NAME.yaml)")
    parser.add_argument("group", help="the group's name")
    parser.add_argument("--labels", nargs="+", default=None, help="only these solvers of the group")
    parser.add_argument("--out", required=True, type=Path, help="a folder for the suite copy and its results")
    parser.add_argument("--status", nargs="+", default=["optimal"], help="the statuses a cell may end with")
    args = parser.parse_args()
    path = SUITES / f"{args.suite}.yaml"
    if not path.exists():
        sys.exit(f"suite_group.py: no bundled suite {args.suite!r} ({path})")
    suite = one_group(yaml.safe_load(path.read_text()), args.group, args.labels)
    args.out.mkdir(parents=True, exist_ok=True)
    copy = args.out / "suite.yaml"
    copy.write_text(yaml.safe_dump(suite, sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "fleetplan", "bench", str(copy), "-o", str(args.out / "out"),
                           "--no-report"], cwd=ROOT, stdout=sys.stderr)
    with (args.out / "out" / "results.csv").open(newline="") as handle:
        result = figures(list(csv.DictReader(handle)))
    print(json.dumps(result))
    if done.returncode != 0 or not set(result["statuses"]) <= set(args.status):
        sys.exit(f"suite_group.py: the cells ended {result['statuses']} (exit code {done.returncode}), "
                 f"not all {' or '.join(args.status)}")


if __name__ == "__main__":
    main()
