"""Start-up time of the command line: median of N runs of each command, in fresh processes.

    .venv/bin/python benchmarks/scripts/startup.py [--runs 5] [--source DIR]

``--source DIR`` measures another checkout of fleetplan (``git worktree add DIR COMMIT``)
with this virtual environment, by putting DIR first on PYTHONPATH — how the "before" column of
benchmarks/RESULTS.md was measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    run = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if run.returncode not in (0,):
        raise SystemExit(f"{' '.join(command)} failed: {run.stderr.strip()[-300:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--source", default=None, help="another checkout to measure")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.source:
        env["PYTHONPATH"] = str(Path(args.source).resolve())
    python = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        small = str(Path(scratch) / "jobs256.json")
        subprocess.run([python, "-m", "fleetplan.cli", "generate", "allocation", "--jobs", "256",
                        "--seed", "1", "-o", small], env=env, check=True, capture_output=True)
        commands = {
            "python -c 'import fleetplan'": [python, "-c", "import fleetplan"],
            "fleetplan --help": [python, "-m", "fleetplan.cli", "--help"],
            "fleetplan solvers": [python, "-m", "fleetplan.cli", "solvers"],
            "fleetplan validate (256 jobs)": [python, "-m", "fleetplan.cli", "validate", small],
        }
        print("| command | median s | runs |")
        print("|---|---:|---:|")
        for name, command in commands.items():
            times = [timed(command, env) for _ in range(args.runs)]
            print(f"| `{name}` | {statistics.median(times):.3f} | {args.runs} |")


if __name__ == "__main__":
    main()
