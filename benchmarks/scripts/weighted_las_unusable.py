"""Weighted LAS where the jobs' best-score bound is not the level, or the refinement cannot certify it.

400 jobs from ``fleetplan generate allocation --jobs 400 --throughput_noise 0.1`` (seed 3), a
share of them (seed 3) unable to run on v100 or p100, job 0 at a priority weight. Each case is
timed as ``fleetplan.solve(instance, "max-min-fairness", decomposition="prices")``, CPU seconds,
median of ``--runs`` after one warm-up, and says whether the refinement at the bound was tried
first and whether the full LP was solved in the end:

    python benchmarks/scripts/weighted_las_unusable.py --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import fleetplan

# (share of the jobs that run only on k80, job 0's weight): a level just below the bound; the
# bound reached but not certified by the decomposed refinement; the bound out of k80's reach.
CASES = ((0.5, 2.0), (0.5, 4.0), (0.7, 2.0))


def instance_with_unusable_types(jobs: int, seed: int, only_k80: float, weight: float):
    instance = fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1}, seed=seed)
    data = instance.model_dump()
    for m in np.random.default_rng(seed).choice(jobs, size=int(only_k80 * jobs), replace=False).tolist():
        data["jobs"][m]["throughput"].update(v100=0.0, p100=0.0)
    data["jobs"][0]["weight"] = weight
    return type(instance).model_validate(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| only on k80 | job 0's weight | CPU s (median) | bound tried first | full LP |")
    print("|---|---|---|---|---|")
    for only_k80, weight in CASES:
        instance = instance_with_unusable_types(400, 3, only_k80, weight)
        fleetplan.solve(instance, "max-min-fairness", decomposition="prices")  # warm-up
        times, result = [], None
        for _ in range(args.runs):
            started = time.process_time()
            result = fleetplan.solve(instance, "max-min-fairness", decomposition="prices")
            times.append(time.process_time() - started)
        tried = any("tried first" in line for line in result.log)
        full = any("full LP" in line for line in result.log)
        print(f"| {only_k80:.0%} | {weight:g} | {statistics.median(times):.3f} | {'yes' if tried else 'no'} | "
              f"{'yes' if full else 'no'} |", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
