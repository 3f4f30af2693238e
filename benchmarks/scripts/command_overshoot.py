"""How far whole commands run past ``--time-limit``, and how much of that is time outside the
solver's (or sizer's, or simulator's) own clock: the process's start-up, imports, loading.

    .venv/bin/python benchmarks/scripts/command_overshoot.py --folder DIR [--limit 2] [--repeats 3]
        [--source DIR ...] [--jsonl runs.jsonl]

``--folder`` holds the instances (made by ``--make``: placement 20 regions x 20,000 tables,
reservation 10^5 servers x 200 reservations, allocation 16,384 distinct jobs). Each run is a
fresh ``python -m fleetplan ... --time-limit L --json`` process; the script records its wall
time from spawn to exit, its CPU seconds (user + system), the 1-minute load average when it
started, the command's own seconds (a solve's ``wall_s``, a sizing's ``wall_s``), and for
``solve`` its ``phases.start_s`` (the time before the command's code ran, as the command saw
it). ``--source DIR`` runs another checkout with this virtual environment (DIR first on
PYTHONPATH; several give the before and after columns), the runs of each case interleaved.
Prints one line per run and a table of medians.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

MAKE = {
    "placement.json": ["placement", "--regions", "20", "--tables", "20000", "--jobs", "20000"],
    "reservation.json": ["reservation", "--servers", "100000", "--reservations", "200"],
    "allocation.json": ["allocation", "--jobs", "16384", "--throughput_noise", "0.1"],
}

# (label, arguments after `python -m fleetplan`, with {folder} and {out}); each needs longer
# than the limit, so the limit is what ends it.
CASES = [
    ("solve placement hill-climb", ["solve", "{folder}/placement.json", "--solver", "hill-climb", "-o", "{out}.json"]),
    ("solve reservation mip-highs", ["solve", "{folder}/reservation.json", "--solver", "mip-highs", "-o", "{out}.json"]),
    ("solve allocation max-min-fairness", ["solve", "{folder}/allocation.json", "--solver", "max-min-fairness",
                                           "-o", "{out}.json"]),
    ("size reservation", ["size", "{folder}/reservation.json", "--target", "shortfall_rru<=0", "--buy", "cpu-gen3",
                          "--buy", "gpu-h100", "--buy", "hdd-gen2", "-o", "{out}.json"]),
    ("simulate cluster", ["simulate", "cluster", "--jobs", "3000", "--rate_per_hour", "30", "-o", "{out}.json"]),
]


def run_once(source: str, arguments: list[str], limit: float) -> dict:
    env = {**os.environ, "PYTHONPATH": source}
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "fleetplan", *arguments, "--time-limit", str(limit), "--json"],
                         env=env, capture_output=True, text=True, timeout=10 * limit + 120)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        answer = json.loads(run.stdout)
    except json.JSONDecodeError:
        answer = {}
    own = answer.get("wall_s")
    return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "load": load, "code": run.returncode, "status": answer.get("status", f"exit {run.returncode}"),
            "own": own, "start": (answer.get("phases") or {}).get("start_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", required=True)
    parser.add_argument("--make", action="store_true", help="generate the instances into --folder first")
    parser.add_argument("--limit", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--source", nargs="+", default=[str(Path(__file__).resolve().parents[2])])
    parser.add_argument("--cases", nargs="*", help="only the cases whose label starts with one of these")
    parser.add_argument("--jsonl")
    args = parser.parse_args()
    folder = Path(args.folder)
    if args.make:
        folder.mkdir(parents=True, exist_ok=True)
        for name, generate in MAKE.items():
            subprocess.run([sys.executable, "-m", "fleetplan", "generate", *generate, "-o", str(folder / name)],
                           env={**os.environ, "PYTHONPATH": args.source[-1]}, check=True, capture_output=True)
    cases = [case for case in CASES if not args.cases or any(case[0].startswith(c) for c in args.cases)]
    rows: list[dict] = []
    for label, template in cases:
        for _ in range(args.repeats):
            for source in args.source:
                out = folder / f"out-{os.getpid()}"
                arguments = [part.format(folder=folder, out=out) for part in template]
                row = {"case": label, "source": source, "limit": args.limit, **run_once(source, arguments, args.limit)}
                rows.append(row)
                print(json.dumps(row), flush=True)
                if args.jsonl:
                    with open(args.jsonl, "a") as jsonl:
                        jsonl.write(json.dumps(row) + "\n")
    print("\n| case | source | wall (over) | CPU | command's own | outside it | start-up | load | statuses |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, _ in cases:
        for source in args.source:
            runs = [r for r in rows if r["case"] == label and r["source"] == source]
            if not runs:
                continue

            def median(key: str, runs: list[dict] = runs) -> float | None:
                values = [r[key] for r in runs if r[key] is not None]
                return statistics.median(values) if values else None

            wall, own, start = median("wall"), median("own"), median("start")
            outside = statistics.median([r["wall"] - r["own"] for r in runs if r["own"] is not None]) \
                if own is not None else None
            print(f"| {label} | {Path(source).name} | {wall:.2f} s ({wall - args.limit:+.2f} s) | {median('cpu'):.2f} s | "
                  + (f"{own:.2f} s" if own is not None else "-") + " | "
                  + (f"{outside:.2f} s" if outside is not None else "-") + " | "
                  + (f"{start:.2f} s" if start is not None else "-") + f" | {median('load'):.1f} | "
                  + "/".join(sorted({r["status"] for r in runs})) + " |")


if __name__ == "__main__":
    main()
