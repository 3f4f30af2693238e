"""Whole-process wall time of `fleetplan solve --time-limit S` for every solver, on instances
large enough to need longer.

    .venv/bin/python benchmarks/scripts/time_limits.py [--limits 2 5 20] [--kinds allocation ...]
        [--solvers NAME ...] [--simulators cluster ...] [--repeats 3] [--long 20] [--jsonl runs.jsonl]
    .venv/bin/python benchmarks/scripts/time_limits.py --table-from runs.jsonl

Each run is a fresh process; besides its wall time the script records its CPU seconds (user +
system, from the child's resource usage) and the 1-minute load average when it started, since
the machine is shared and a loaded machine stretches wall time whatever the solver does. Limits
of ``--long`` seconds or more run only for exact solvers and for solvers that the shorter limits
stopped by the clock (status ``time_limit``: they can use more time). A run is killed after
``10 x limit + 120`` seconds. Prints one row per run as it goes, then a Markdown table with one
column per limit. ``--simulators`` adds `fleetplan simulate NAME SCENARIO --time-limit S` runs
on scenarios that need far longer (kind ``simulate``); ``--repeats N`` runs each cell N times
and the table shows the medians (wall, CPU, load) and the statuses seen.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INSTANCES = {
    "allocation": ["--jobs", "16384", "--throughput_noise", "0.1"],
    "placement": ["--regions", "20", "--tables", "20000", "--jobs", "20000"],
    "binpack": ["--clusters", "20", "--machines", "2500", "--cpu_machines", "64000", "--workloads", "200"],
    "reservation": ["--servers", "100000", "--reservations", "200"],
}


# Scenarios each simulator takes minutes to finish.
SIMULATIONS = {
    "cluster": ["--jobs", "3000", "--rate_per_hour", "30"],
    "parsync": ["--slots", "2000000", "--partitions", "20", "--duration_s", "300"],
    "mast": ["--regions", "24", "--hours", "48"],
}


def run_once(cli: list[str], path: str, solver: str, limit: float, scratch: str, simulate: bool = False) -> dict:
    """One `fleetplan solve` (or `simulate`) in a fresh process: wall, CPU, load average, status."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    if simulate:
        command = [*cli, "simulate", solver, *SIMULATIONS[solver], "--time-limit", str(limit), "--json",
                   "-o", str(Path(scratch) / "result.json")]
    else:
        command = [*cli, "solve", path, "--solver", solver, "--time-limit", str(limit), "--json",
                   "-o", str(Path(scratch) / "plan.json")]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=10 * limit + 120)
        try:
            answer = json.loads(run.stdout)
            status = answer.get("status", "done" if simulate and run.returncode == 0 else f"exit {run.returncode}")
            if simulate and "stopped at --time-limit" in str(answer.get("error", "")):
                status = "stopped"
        except json.JSONDecodeError:
            status = f"exit {run.returncode}"
    except subprocess.TimeoutExpired:
        status = "killed"
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"solver": solver, "limit": limit, "wall": wall, "cpu": cpu, "load": load, "status": status}


def verdict(seconds: float, limit: float) -> str:
    over = seconds - limit
    return f"{over:+.2f} s" + (" **over**" if over > max(0.1 * limit, 1.0) else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", type=float, nargs="+", default=[2.0, 5.0])
    parser.add_argument("--kinds", nargs="+", default=list(INSTANCES))
    parser.add_argument("--solvers", nargs="*", help="only these solver names")
    parser.add_argument("--long", type=float, default=20.0,
                        help="limits from this many seconds up run only exact solvers and those the clock stopped")
    parser.add_argument("--simulators", nargs="*", default=[], help=f"also simulate these ({', '.join(SIMULATIONS)})")
    parser.add_argument("--repeats", type=int, default=1, help="runs per cell (the table shows medians)")
    parser.add_argument("--jsonl", help="also append each run as a JSON line to this file")
    parser.add_argument("--table-from", help="print the table of the runs in this JSON-lines file and exit")
    args = parser.parse_args()
    if args.table_from:
        rows = [json.loads(line) for line in Path(args.table_from).read_text().splitlines() if line.strip()]
        print(table(rows, sorted({row["limit"] for row in rows})))
        return
    cli = [sys.executable, "-m", "fleetplan"]
    limits = sorted(args.limits)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        for kind in args.kinds:
            path = str(Path(scratch) / f"{kind}.json")
            subprocess.run([*cli, "generate", kind, *INSTANCES[kind], "--seed", "0", "-o", path],
                           check=True, capture_output=True)
            listed = subprocess.run([*cli, "solvers", kind, "--json"], check=True, capture_output=True, text=True)
            for spec in json.loads(listed.stdout):
                if args.solvers and spec["name"] not in args.solvers:
                    continue
                stopped = False
                for limit in limits:
                    if limit >= args.long and not (spec["exact"] or stopped):
                        continue
                    for _ in range(args.repeats):
                        row = {"kind": kind, **run_once(cli, path, spec["name"], limit, scratch)}
                        stopped = stopped or row["status"] == "time_limit"
                        _record(rows, row, args.jsonl)
        for name in args.simulators:
            for limit in limits:
                for _ in range(args.repeats):
                    _record(rows, {"kind": "simulate", **run_once(cli, "", name, limit, scratch, simulate=True)},
                            args.jsonl)
    print()
    print(table(rows, limits))


def _record(rows: list[dict], row: dict, jsonl: str | None) -> None:
    rows.append(row)
    print(f"{row['kind']} {row['solver']} {row['limit']:g} s: wall {row['wall']:.2f} s, cpu {row['cpu']:.2f} s, "
          f"load {row['load']:.1f}, {row['status']}", flush=True)
    if jsonl:
        with open(jsonl, "a") as out:
            out.write(json.dumps(row) + "\n")


def table(rows: list[dict], limits: list[float]) -> str:
    """One row per (kind, solver), one column per limit: wall (over), CPU, load, status."""
    header = "| kind | solver | " + " | ".join(f"{limit:g} s: wall (over) / CPU / load / status" for limit in limits)
    lines = [header + " |", "|---|---|" + "---|" * len(limits)]
    keys = list(dict.fromkeys((row["kind"], row["solver"]) for row in rows))
    for kind, solver in keys:
        cells = []
        for limit in limits:
            found = [row for row in rows if (row["kind"], row["solver"], row["limit"]) == (kind, solver, limit)]
            if not found:
                cells.append("—")
                continue
            wall, cpu, load = (statistics.median(row[key] for row in found) for key in ("wall", "cpu", "load"))
            statuses = "/".join(dict.fromkeys(row["status"] for row in found))
            cells.append(f"{wall:.1f} s ({verdict(wall, limit)}) / {cpu:.1f} s / {load:.1f} / {statuses}")
        lines.append(f"| {kind} | {solver} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
