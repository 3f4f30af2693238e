"""Weighted LAS (Gavel's max-min fairness with priority weights) against the same jobs unweighted.

Jobs from ``fleetplan generate allocation --jobs N --throughput_noise 0.1`` (Gavel's multi-GPU
mix: scale factors 1, 2, 4, 8); a share of them (chosen with seed 1) get one priority weight,
the rest keep weight 1. Each cell is timed as ``fleetplan.solve(instance, "max-min-fairness")``
(arrays, LP or decomposition, refinement, judge), CPU seconds, median of ``--runs`` after one
warm-up solve; ``--check`` also solves each cell with ``decomposition="none"`` (the full LP) and
prints the relative difference of the judged objectives.

    python benchmarks/scripts/weighted_las.py 2048 16384 --runs 3
    python benchmarks/scripts/weighted_las.py 10000 --shares 0.0005 --weights 4 --check

Prints one row per (jobs, share, weight): CPU median, ratio to the unweighted cell, how the
refinement was solved, and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import fleetplan

SHARES = (0.01, 0.10, 0.50)
WEIGHTS = (2.0, 4.0, 8.0)


def weighted(instance, share: float, weight: float):
    """The instance with ``share`` of its jobs (seed 1) at ``weight``."""
    data = instance.model_dump()
    jobs = data["jobs"]
    picked = np.random.default_rng(1).choice(len(jobs), size=int(round(share * len(jobs))), replace=False)
    for m in picked.tolist():
        jobs[m]["weight"] = weight
    return type(instance).model_validate(data)


def how(result) -> str:
    log = " ".join(result.log)
    if "refinement: certified" in log and "tried first" in log:
        return "refinement at the best-score bound"
    if "refinement: certified" in log:
        return "decomposed refinement"
    if "refinement skipped" in log:
        return "no refinement needed"
    if "solving the full LP" in log or "falling back" in log:
        return "full LP"
    return "full LP" if "separable" not in log else "decomposition"


def timed(instance, runs: int, **options) -> tuple[float, object]:
    fleetplan.solve(instance, "max-min-fairness", **options)  # warm-up
    times, result = [], None
    for _ in range(runs):
        started = time.process_time()
        result = fleetplan.solve(instance, "max-min-fairness", **options)
        times.append(time.process_time() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=int, nargs="+")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="compare each objective with the full LP's")
    parser.add_argument("--shares", type=float, nargs="+", default=list(SHARES), help="shares of weighted jobs")
    parser.add_argument("--weights", type=float, nargs="+", default=list(WEIGHTS), help="their weights")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| jobs | weighted share | weight | CPU s (median) | x unweighted | refinement | status |"
          + (" vs full LP |" if args.check else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if args.check else ""))
    for n in args.jobs:
        base = fleetplan.generate("allocation", {"jobs": n, "throughput_noise": 0.1}, seed=0)
        plain, result = timed(base, args.runs)
        print(f"| {n:,} | 0 | 1 | {plain:.3f} | 1.0 | {how(result)} | {result.status} |"
              + (" |" if args.check else ""), flush=True)
        for share in args.shares:
            for weight in args.weights:
                instance = weighted(base, share, weight)
                cpu, result = timed(instance, args.runs)
                row = (f"| {n:,} | {share:.2%} | {weight:g} | {cpu:.3f} | {cpu / plain:.1f} | {how(result)} | "
                       f"{result.status} |")
                if args.check:
                    full = fleetplan.solve(instance, "max-min-fairness", decomposition="none")
                    row += f" {abs(result.objective - full.objective) / abs(full.objective):.1e} |"
                print(row, flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
