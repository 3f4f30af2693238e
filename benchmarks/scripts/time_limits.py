"""Whole-process wall time of `fleetplan solve --time-limit S` for every solver, on instances
large enough to need longer (issue 15: within 10% or 1 s of the limit, loading and writing
included).

    .venv/bin/python benchmarks/scripts/time_limits.py [--limits 2 5] [--kinds allocation placement ...]

Prints a Markdown table: kind, solver, limit, wall, over the limit, status.
"""

from __future__ import annotations

import argparse
import json
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limits", type=float, nargs="+", default=[2.0, 5.0])
    parser.add_argument("--kinds", nargs="+", default=list(INSTANCES))
    args = parser.parse_args()
    fleetplan_cli = [sys.executable, "-m", "fleetplan"]
    print("| kind | solver | limit | process wall | over | status |")
    print("|---|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for kind in args.kinds:
            path = str(Path(scratch) / f"{kind}.json")
            subprocess.run([*fleetplan_cli, "generate", kind, *INSTANCES[kind], "--seed", "0", "-o", path],
                           check=True, capture_output=True)
            listed = subprocess.run([*fleetplan_cli, "solvers", kind, "--json"], check=True,
                                    capture_output=True, text=True)
            for solver in [item["name"] for item in json.loads(listed.stdout)]:
                for limit in args.limits:
                    started = time.perf_counter()
                    run = subprocess.run([*fleetplan_cli, "solve", path, "--solver", solver,
                                          "--time-limit", str(limit), "--json",
                                          "-o", str(Path(scratch) / "plan.json")],
                                         capture_output=True, text=True)
                    wall = time.perf_counter() - started
                    try:
                        status = json.loads(run.stdout).get("status", f"exit {run.returncode}")
                    except json.JSONDecodeError:
                        status = f"exit {run.returncode}"
                    over = wall - limit
                    flag = "" if over <= max(0.1 * limit, 1.0) else " **over**"
                    print(f"| {kind} | {solver} | {limit:g} s | {wall:.2f} s | {over:+.2f} s{flag} | {status} |",
                          flush=True)


if __name__ == "__main__":
    main()
