"""Whole `fleetplan solve` processes on generated instances, as a user runs them, with one JSON
summary line: the headline's placement rows and the 10^6-job allocation row (benchmarks/RESULTS.md).

    python benchmarks/scripts/solve_command.py placement 1000 10000 100000 --time-limit 60 --folder DIR
    python benchmarks/scripts/solve_command.py placement 1000000 --solver hill-climb --parquet --runs 2 --folder DIR
    python benchmarks/scripts/solve_command.py allocation 1000000 --solver max-min-fairness --parquet --runs 3 --plain --folder DIR

For each size N: ``fleetplan generate placement --regions 20 --tables N --jobs N --seed 0 -o
DIR/pN.json`` (allocation: ``--jobs N --throughput_noise 0.1 --seed 0``, the distinct jobs of the
``gavel-distinct`` suite), kept in DIR: a rerun with the same folder reuses it; with ``--parquet``
then ``fleetplan export DIR/pN.json --format parquet -o DIR/pN`` (the command reads the folder);
then RUNS times ``fleetplan solve INPUT [--solver S] [--time-limit L] --json -o DIR/plan.json``,
each a fresh process, its wall seconds, its CPU (user + system of the child, from its resource
usage) and the 1-minute load before and after. With ``--plain`` the timed runs leave out
``--json`` (at 10^6 jobs its per-job evaluation is 150 MB on stdout, 5-6 s of the command: the
headline's allocation row times the command without it); the status and objective then come from
one more run with ``--json``, not timed. Prints one JSON line per run, then the summary:
per size the gap in percent ((plan - bound) / plan, as the result reports it; the median of the
runs), the lowest and highest wall, CPU and ``stats.first_move_s`` (the climb's first move
after its start), and the objectives.
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

FLEETPLAN = [sys.executable, "-m", "fleetplan"]


def run(argv: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one child process, and its stdout (it must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0,):
        sys.exit(f"solve_command.py: {' '.join(argv[2:])}: exit code {done.returncode}: "
                 f"{(done.stderr.strip() or 'no output').splitlines()[-1]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


GENERATE = {"placement": ["--regions", "20", "--tables", "{n}", "--jobs", "{n}"],
            "allocation": ["--jobs", "{n}", "--throughput_noise", "0.1"]}


def instance(folder: Path, kind: str, size: int, parquet: bool) -> Path:
    path = folder / f"{kind[0]}{size}.json"
    if not path.exists():
        run([*FLEETPLAN, "generate", kind, *(word.replace("{n}", str(size)) for word in GENERATE[kind]),
             "--seed", "0", "-o", str(path)])
    if not parquet:
        return path
    exported = folder / f"{kind[0]}{size}"
    if not exported.exists():
        run([*FLEETPLAN, "export", str(path), "--format", "parquet", "-o", str(exported)])
    return exported


def spread(values: list[float]) -> list[float]:
    return [min(values), max(values)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=sorted(GENERATE))
    parser.add_argument("sizes", type=int, nargs="+", metavar="N", help="tables (placement) or jobs (allocation)")
    parser.add_argument("--folder", required=True, type=Path, help="the instances and the plan go here")
    parser.add_argument("--solver", default=None, help="default: the kind's default")
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--parquet", action="store_true", help="solve the exported Parquet folder")
    parser.add_argument("--plain", action="store_true",
                        help="time the command without --json; read the answer from one more, untimed run")
    args = parser.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    summary = {}
    for size in args.sizes:
        path = instance(args.folder, args.kind, size, args.parquet)
        argv = [*FLEETPLAN, "solve", str(path), "-o", str(args.folder / "plan.json")]
        argv += ["--solver", args.solver] if args.solver else []
        argv += ["--time-limit", str(args.time_limit)] if args.time_limit is not None else []
        answer = json.loads(run([*argv, "--json"])[2]) if args.plain else None
        runs = []
        for _ in range(args.runs):
            load = os.getloadavg()[0]
            wall, cpu, out = run(argv if args.plain else [*argv, "--json"])
            result = answer if args.plain else json.loads(out)
            row = {"size": size, "status": result["status"], "objective": result["objective"],
                   "bound": result["bound"], "gap_pct": None if result["gap"] is None else 100 * result["gap"],
                   "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                   "first_move_s": result["stats"].get("first_move_s"), "moves": result["stats"].get("moves"),
                   "load": [round(load, 2), round(os.getloadavg()[0], 2)]}
            print(json.dumps(row), flush=True)
            runs.append(row)
        gaps = [row["gap_pct"] for row in runs if row["gap_pct"] is not None]
        moves = [row["first_move_s"] for row in runs if row["first_move_s"] is not None]
        summary[str(size)] = {"gap_pct": statistics.median(gaps) if gaps else None,
                                "wall_s": spread([row["wall_s"] for row in runs]),
                                "cpu_s": spread([row["cpu_s"] for row in runs]),
                                "wall_min": min(row["wall_s"] for row in runs),
                                "cpu_min": min(row["cpu_s"] for row in runs),
                                "cpu_max": max(row["cpu_s"] for row in runs),
                                "wall_max": max(row["wall_s"] for row in runs),
                                "first_move_min": min(moves) if moves else None,
                                "first_move_max": max(moves) if moves else None,
                                "objectives": [row["objective"] for row in runs]}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
