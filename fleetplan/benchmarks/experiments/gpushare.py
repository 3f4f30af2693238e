"""The FGD paper's experiment grid (Weng, Yang et al., USENIX ATC 2023, §5; the simulator's
``experiments/run_scripts/generate_run_scripts.py``): trace variants x scoring policies x seeds,
each run the inflation experiment of :mod:`fleetplan.sim.gpushare` at 130 %, from the command line.

    .venv/bin/python -m fleetplan.benchmarks.experiments.gpushare --data ../shared/data/alibaba-gpu-v2023 \\
        --traces default --seeds 42 --out runs/gpushare [--resume]

Each run writes ``OUT/TRACE/POLICY/SEED/curve.csv`` and ``run.json`` (its metrics and wall
time); ``--resume`` skips runs whose ``run.json`` exists. At the end, ``OUT/summary.csv`` has
one row per run and ``OUT/curves-TRACE.png`` the policies' mean curves per trace (Figures 7
and 9). The same grid runs on the bench executors (locally or on Dask) as the suite
``fleetplan bench gpushare``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# The paper's 17 trace variants (generate_run_scripts.py's FileList).
TRACES = ("default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare100", "gpushare40", "gpushare60",
          "gpushare80", "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu30",
          "multigpu40", "multigpu50")
SEEDS = tuple(range(42, 52))
NODES_FILE = "openb_node_list_gpu_node.csv"
SUMMARY_COLUMNS = ("trace", "policy", "seed", "wall_s", "tasks_arrived", "tasks_placed", "allocated_gpu_pct",
                   "fragmentation_gpu_pct", "unallocated_gpu_pct", "allocated_gpu_pct_at_100",
                   "fragmentation_gpu_pct_at_100")


def run_grid(data: Path, traces: list[str], policies: list[str], seeds: list[int], inflation: float, out: Path,
             resume: bool = False, log=print) -> list[dict]:
    """Run every (trace, policy, seed) not yet done; the rows of every run, done before or now."""
    from fleetplan import sim
    from fleetplan.instances.outputs import atomic_write_text

    spec = sim.get_simulator("gpushare")
    rows = []
    for trace in traces:
        scenario = {"nodes": str(data / NODES_FILE), "tasks": str(data / f"openb_pod_list_{trace}.csv"),
                    "inflation": inflation}
        for policy in policies:
            for seed in seeds:
                folder = out / trace / policy / str(seed)
                record = folder / "run.json"
                if resume and record.exists():
                    rows.append(json.loads(record.read_text(encoding="utf-8")))
                    continue
                started = time.perf_counter()
                result = spec.run(scenario, policy, seed)
                wall = time.perf_counter() - started
                folder.mkdir(parents=True, exist_ok=True)
                for name, text in spec.tables(result).items():
                    atomic_write_text(folder / name, text)
                row = {"trace": trace, "policy": policy, "seed": seed, "wall_s": round(wall, 3),
                       "load_average": round(os.getloadavg()[0], 2), **result.metrics}
                atomic_write_text(record, json.dumps(row, indent=1) + "\n")
                rows.append(row)
                log(f"{trace} {policy} seed {seed}: {wall:.1f} s, {result.metrics['allocated_gpu_pct']:.2f}% allocated")
    return rows


def write_summary(rows: list[dict], out: Path) -> None:
    from fleetplan.instances.outputs import atomic_write_text

    lines = [",".join(SUMMARY_COLUMNS)]
    for row in rows:
        lines.append(",".join(str(row.get(column, "")) for column in SUMMARY_COLUMNS))
    atomic_write_text(out / "summary.csv", "\n".join(lines) + "\n")


def draw(out: Path, traces: list[str], policies: list[str], seeds: list[int]) -> list[Path]:
    """One picture per trace: the policies' mean curves over the seeds."""
    import csv

    from fleetplan.plotting.gpushare import plot_policies

    written = []
    for trace in traces:
        runs: dict[str, list[dict]] = {}
        for policy in policies:
            for seed in seeds:
                path = out / trace / policy / str(seed) / "curve.csv"
                if path.exists():
                    with path.open(encoding="utf-8") as handle:
                        table = list(csv.DictReader(handle))
                    runs.setdefault(policy, []).append({k: [float(r[k]) for r in table] for k in table[0]})
        if runs:
            target = out / f"curves-{trace}.png"
            plot_policies(runs, target, title=f"{trace} trace, inflated to 130%: mean over {len(seeds)} seed(s)")
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    from fleetplan.sim.gpushare import POLICIES

    parser = argparse.ArgumentParser(prog="python -m fleetplan.benchmarks.experiments.gpushare",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder of the trace's CSV files")
    parser.add_argument("--traces", nargs="+", default=list(TRACES), choices=TRACES, metavar="TRACE",
                        help="trace variants (default: the paper's 17)")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES, metavar="POLICY")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="default: 42..51")
    parser.add_argument("--inflation", type=float, default=1.3)
    parser.add_argument("--out", required=True, help="folder for the runs, summary.csv and the pictures")
    parser.add_argument("--resume", action="store_true", help="skip runs already written")
    args = parser.parse_args(argv)
    data = Path(args.data)
    missing = [name for name in [NODES_FILE, *(f"openb_pod_list_{t}.csv" for t in args.traces)]
               if not (data / name).is_file()]
    if missing:
        print(f"error: --data {data}: no {missing[0]}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = run_grid(data, args.traces, args.policies, args.seeds, args.inflation, out, args.resume)
    write_summary(rows, out)
    for path in draw(out, args.traces, args.policies, args.seeds):
        print(f"wrote {path}")
    print(f"wrote {out / 'summary.csv'} ({len(rows)} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
