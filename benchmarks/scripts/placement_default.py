"""The placement default (the neighbourhood search) against the hill climb alone, on new seeds.

Instances from ``fleetplan generate placement --regions 5 --tables 100 --jobs 100 --seed S``;
each seed is solved by ``hill-climb`` and by the default solver without a time limit (its
stopping rule: ``patience``, or max(10 x the climb's seconds, 1 s) of search) and, with
``--time-limit T``, by the default under that limit. Prints objectives, the default's gain over
the climb, wall seconds and the load average.

    python benchmarks/scripts/placement_default.py 100 101 102 103 104 105 --time-limit 5
"""

from __future__ import annotations

import argparse
import os
import time

import fleetplan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seeds", type=int, nargs="+")
    parser.add_argument("--time-limit", type=float, default=None)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    limited = f" | default, {args.time_limit:g} s limit | below the climb |" if args.time_limit else " |"
    print("| seed | climb | climb s | default (no limit) | below the climb | default s" + limited)
    print("|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.time_limit else ""))
    for seed in args.seeds:
        instance = fleetplan.generate("placement", {"regions": 5, "tables": 100, "jobs": 100}, seed=seed)
        started = time.perf_counter()
        climb = fleetplan.solve(instance, "hill-climb", seed=seed)
        climb_s = time.perf_counter() - started
        started = time.perf_counter()
        default = fleetplan.solve(instance, seed=seed)
        default_s = time.perf_counter() - started
        row = (f"| {seed} | {climb.objective:.5g} | {climb_s:.2f} | {default.objective:.5g} | "
               f"{1 - default.objective / climb.objective:.1%} | {default_s:.2f} |")
        if args.time_limit:
            timed = fleetplan.solve(instance, seed=seed, time_limit=args.time_limit)
            row += f" {timed.objective:.5g} | {1 - timed.objective / climb.objective:.1%} |"
        print(row, flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
