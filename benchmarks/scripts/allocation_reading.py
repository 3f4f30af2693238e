"""What reading an allocation costs beside solving it, at 10,000 jobs: a plan's matrix read
with ``np.asarray`` of the nested lists against one ``np.fromiter`` pass (``AllocationPlan``'s
``_raw_matrix``), the whole judge, validating the instance's dict through the file schema, and
the max-min solve of an instance so validated (best of N, CPU seconds).

    .venv/bin/python benchmarks/scripts/allocation_reading.py [--jobs 10000] [--runs 5]

Behind the choices in ``instances/allocation/__init__.py`` (``_raw_matrix``) and
``instances/allocation/columns.py`` (columns validated with numpy, no dict per job).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np


def best_cpu(call, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        call()
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    import fleetplan
    from fleetplan.instances import instance_from_data

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    instance = fleetplan.generate("allocation", {"jobs": args.jobs}, seed=0)
    plan = fleetplan.solve(instance, "max-min-fairness", seed=0).plan
    n, k = len(plan.job_ids), len(plan.worker_types)
    rows = plan.allocation
    nested = best_cpu(lambda: np.asarray(rows, dtype=float).reshape(n, k), args.runs)
    flat = best_cpu(lambda: np.fromiter(itertools.chain.from_iterable(rows), dtype=float,
                                        count=n * k).reshape(n, k), args.runs)
    judge = best_cpu(lambda: fleetplan.evaluate(instance, plan), args.runs)
    print(f"plan matrix at {args.jobs:,} jobs: np.asarray {nested * 1e3:.2f} ms, np.fromiter {flat * 1e3:.2f} ms "
          f"({nested / flat:.1f}x); the whole judge {judge * 1e3:.1f} ms")
    data = instance.model_dump()
    validate = best_cpu(lambda: instance_from_data(data), args.runs)
    fresh = [instance_from_data(data) for _ in range(args.runs)]
    solve = min(best_cpu(lambda one=one: fleetplan.solve(one, "max-min-fairness", seed=0), 1) for one in fresh)
    print(f"{args.jobs:,} jobs: validating the dict {validate:.3f} s of CPU; the max-min solve of a freshly "
          f"validated instance {solve:.3f} s of CPU")


if __name__ == "__main__":
    main()
