"""Time of the judges: ``fleetplan.evaluate`` on an allocation of 16,384 jobs and a placement of
10^5 tables, median of N calls (wall and CPU seconds), instance generation excluded.

    .venv/bin/python benchmarks/scripts/evaluate_speed.py [--runs 5]

Used to check that the per-job and per-region breakdowns cost little.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def timed(call, runs: int) -> tuple[float, float]:
    call()  # warm: caches built on first use (the transpose, imports) are not the judge
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    import fleetplan
    from fleetplan.instances.allocation import AllocationPlan
    from fleetplan.instances.placement import PlacementPlan

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    allocation = fleetplan.generate("allocation", {"jobs": 16384}, seed=0)
    # The isolated 1/n allocation: a feasible plan with a non-zero row for every job.
    plan = AllocationPlan.from_matrix(allocation, allocation.arrays().isolated_allocation())
    wall, cpu = timed(lambda: fleetplan.evaluate(allocation, plan), args.runs)
    print(f"allocation 16384 jobs: evaluate wall {wall:.3f} s cpu {cpu:.3f} s")

    placement = fleetplan.generate("placement", {"regions": 20, "tables": 100000, "jobs": 100000}, seed=2)
    arrays = placement.arrays()
    home = arrays.table_home.copy()
    rng = np.random.default_rng(0)
    moved = rng.choice(arrays.num_tables, size=arrays.num_tables // 100, replace=False)
    home[moved] = rng.integers(0, arrays.num_regions, size=moved.size)
    plan = PlacementPlan.from_arrays(placement, home)
    wall, cpu = timed(lambda: fleetplan.evaluate(placement, plan), args.runs)
    print(f"placement 100000 tables: evaluate wall {wall:.3f} s cpu {cpu:.3f} s")


if __name__ == "__main__":
    main()
