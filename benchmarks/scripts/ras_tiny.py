"""The RAS heuristics on tiny regions of the property test's class (3
datacenters x 2 fault domains, 8 servers, 3 reservations with mixed guarantees; the generator is
``tests/test_reservation_heuristics.py``'s ``tiny_region``), against the exact MIP.

    .venv/bin/python benchmarks/scripts/ras_tiny.py --seeds 40
    PYTHONPATH=OLD_TREE .venv/bin/python benchmarks/scripts/ras_tiny.py --seeds 40   # another tree's code

One line per region: the MIP's status and objective, each heuristic's status and objective; then
counts: regions with a plan, and on how many of them each heuristic found one (and the optimum).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import fleetplan
from fleetplan.instances import instance_from_data

# tests.test_reservation_heuristics imports the tests' conftest by name, as pytest lets it.
sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[2] / "tests")]
from tests.test_reservation_heuristics import tiny_region  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=40)
    args = parser.parse_args()
    counts = {"regions": 0, "with a plan": 0}
    for seed in range(args.seeds):
        try:
            instance = instance_from_data(tiny_region(seed))
        except fleetplan.InstanceError:
            continue
        counts["regions"] += 1
        exact = fleetplan.solve(instance, "mip-highs", time_limit=30)
        row = {"seed": seed, "mip-highs": [exact.status, exact.objective]}
        has_plan = exact.status in ("optimal", "feasible")
        counts["with a plan"] += has_plan
        for solver in ("hill-climb", "greedy"):
            result = fleetplan.solve(instance, solver, time_limit=30)
            found = result.plan is not None and result.evaluation is not None and result.evaluation.feasible
            row[solver] = [result.status, result.objective if found else None]
            if has_plan:
                counts[f"{solver} found a plan"] = counts.get(f"{solver} found a plan", 0) + found
                optimal = found and result.objective <= exact.objective + 1e-6
                counts[f"{solver} at the optimum"] = counts.get(f"{solver} at the optimum", 0) + optimal
            else:
                counts[f"{solver} statuses without a plan"] = sorted(
                    {*counts.get(f"{solver} statuses without a plan", []), result.status})
        print(json.dumps(row), flush=True)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
