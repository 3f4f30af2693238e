"""The Tetris hill climb as a planner runs it, objective against time under several
time limits, from the solver's own trace (the "objective against time" line of its log).

    .venv/bin/fleetplan generate placement --regions 20 --tables 100000 --jobs 100000 --seed 2 -o big.json
    .venv/bin/python benchmarks/scripts/placement_anytime.py big.json --limits 5 10 60 \\
        --plot benchmarks/figures/placement-anytime.png

Each limit runs in a fresh process (as ``fleetplan solve --time-limit L`` would); the table gives
each trace point, the plot draws them. Times are seconds since the climb started; loading the
file and judging the plan come on top (the script prints the whole solve's wall and CPU).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

POINT = re.compile(r"([0-9.]+) s ([0-9.eE+-]+) \((\d+) moves\)")
CHILD = """
import json, sys, time
import fleetplan
instance = fleetplan.load_instance(sys.argv[1])
wall, cpu = time.perf_counter(), time.process_time()
result = fleetplan.solve(instance, "hill-climb", time_limit=float(sys.argv[2]))
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
line = next((l for l in result.log if l.startswith("objective against time")), "")
print(json.dumps({"status": result.status, "objective": result.objective, "wall_s": wall, "cpu_s": cpu,
                  "trace": line}))
"""


def run(path: str, limit: float) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, path, str(limit)], capture_output=True, text=True, check=True)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["points"] = [(float(t), float(v), int(m)) for t, v, m in POINT.findall(row.pop("trace"))]
    row["limit"] = limit
    return row


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for row in rows:
        times = [t for t, _, _ in row["points"]]
        values = [v for _, v, _ in row["points"]]
        ax.step(times, values, where="post", marker="o", markersize=3,
                label=f"--time-limit {row['limit']:g}: {row['objective']:.4f} ({row['status']})")
    ax.set_xlabel("seconds since the climb started")
    ax.set_ylabel("objective (lower is better)")
    ax.set_title("Tetris hill climb, 10^5 tables x 20 regions: objective against time")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instance")
    parser.add_argument("--limits", type=float, nargs="+", default=[5.0, 10.0, 60.0])
    parser.add_argument("--plot", default=None, help="write the figure here (PNG)")
    args = parser.parse_args()
    rows = [run(args.instance, limit) for limit in args.limits]
    for row in rows:
        print(f"limit {row['limit']:g} s: {row['status']} {row['objective']:.6g}, solve {row['wall_s']:.2f} s wall "
              f"{row['cpu_s']:.2f} s CPU")
        print("  " + ", ".join(f"{t:.2f} s {v:.6g} ({m})" for t, v, m in row["points"]))
    if args.plot:
        plot(rows, args.plot)
        print(f"figure: {args.plot}")


if __name__ == "__main__":
    main()
