"""Start-up time of the command line: median of N runs of each command, in fresh processes.

    .venv/bin/python benchmarks/scripts/startup.py [--runs 5] [--source DIR]

Prints the median wall time and the median CPU time (user + system of the child process): on a
shared, loaded machine the CPU time is the steadier figure.

``--source DIR`` measures another checkout of fleetplan (``git worktree add DIR COMMIT``)
with this virtual environment, by putting DIR first on PYTHONPATH — how the "before" column of
benchmarks/RESULTS.md was measured.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system of the child) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode not in (0,):
        raise SystemExit(f"{' '.join(command)} failed: {run.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--source", default=None, help="another checkout to measure")
    args = parser.parse_args()
    env = dict(os.environ)
    # The editable install's import hook would win over PYTHONPATH; a bootstrap drops it and
    # puts the other checkout first, then runs the same code the console script runs.
    source = str(Path(args.source).resolve()) if args.source else ""
    bootstrap = ("import sys\n"
                 + (f"sys.meta_path = [f for f in sys.meta_path if '__editable__' not in "
                    f"(getattr(f, '__module__', '') or '')]\nsys.path.insert(0, {source!r})\n" if source else ""))
    python = sys.executable

    def cli(*words: str) -> list[str]:
        return [python, "-c", bootstrap + f"sys.argv = ['fleetplan', *{list(words)!r}]\n"
                "from fleetplan.cli import main\nsys.exit(main())"]

    with tempfile.TemporaryDirectory() as scratch:
        small = str(Path(scratch) / "jobs256.json")
        subprocess.run(cli("generate", "allocation", "--jobs", "256", "--seed", "1", "-o", small),
                       env=env, check=True, capture_output=True)
        commands = {
            "python -c 'import fleetplan'": [python, "-c", bootstrap + "import fleetplan"],
            "fleetplan --help": cli("--help"),
            "fleetplan solvers": cli("solvers"),
            "fleetplan validate (256 jobs)": cli("validate", small),
        }
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        print("| command | median wall s | median CPU s | runs |")
        print("|---|---:|---:|---:|")
        for name, command in commands.items():
            runs = [timed(command, env) for _ in range(args.runs)]
            wall = statistics.median(run[0] for run in runs)
            cpu = statistics.median(run[1] for run in runs)
            print(f"| `{name}` | {wall:.3f} | {cpu:.3f} | {args.runs} |")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
