"""Time ``fleetplan.solve`` on distinct Gavel jobs with the compiled kernels and with the numpy
code they replace (``FLEETPLAN_KERNELS=0``), alternating in one process, on the instance the
``gavel-distinct`` suite generates (``throughput_noise`` 0.1, seed 0).

    python benchmarks/scripts/allocation_kernels.py JOBS [--repeats R] [SOLVER ...]

Prints, per solver and setting, the status, the objective, the median CPU and wall seconds of R
solves after one untimed warm-up solve (none when R is 1), and the interior-point iterations.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import fleetplan
from fleetplan.solvers.kernels import ENVIRONMENT_SWITCH


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=int)
    parser.add_argument("solvers", nargs="*", default=["max-min-fairness", "max-throughput"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_intermixed_args()
    instance = fleetplan.generate("allocation", {"jobs": args.jobs, "throughput_noise": 0.1}, seed=0)
    instance.arrays()
    fleetplan.solve(fleetplan.generate("allocation", {"jobs": 8}, seed=0), "max-min-fairness")  # imports
    for solver in args.solvers:
        for setting in ("0", "1", "0", "1") if args.repeats > 1 else ("1", "0"):
            os.environ[ENVIRONMENT_SWITCH] = setting
            if args.repeats > 1:
                fleetplan.solve(instance, solver)
            cpu, wall = [], []
            for _ in range(args.repeats):
                started_cpu, started_wall = time.process_time(), time.perf_counter()
                result = fleetplan.solve(instance, solver)
                cpu.append(time.process_time() - started_cpu)
                wall.append(time.perf_counter() - started_wall)
            print(f"{args.jobs} {solver} kernels={setting} {result.status} objective={result.objective!r} "
                  f"cpu={statistics.median(cpu):.4f} wall={statistics.median(wall):.4f} "
                  f"ipm_iterations={result.stats.get('ipm_iterations')} "
                  f"reduced_lp_jobs={result.stats.get('separable_free')}", flush=True)


if __name__ == "__main__":
    main()
