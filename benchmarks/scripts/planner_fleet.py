"""The planner's fleet of docs/planning.md: 300 distinct jobs on H100, A100, V100 and L4 GPUs.

    python benchmarks/scripts/planner_fleet.py [--jobs 300] [--seed 0] -o examples/inventory-300-jobs.json

The jobs are Gavel's measured job types (fleetplan/data/gavel_throughputs.json: V100 throughputs
as measured), each with its own noise so no two jobs are identical. The H100, A100 and L4 columns
are NOT measured: they are the V100 throughput times a per-job factor drawn from stated ranges
(H100 2.2-3.2x, A100 1.4-2.0x, L4 0.35-0.6x of a V100, an assumption for the example, in the
spirit of published training speed-ups), and so are the prices (per GPU-hour, in USD: H100 4.5,
A100 2.9, V100 1.6, L4 0.8). The cluster holds what a mid-size team might: 16 H100, 24 A100,
24 V100, 32 L4. Steps left and time elapsed are drawn so jobs run hours to weeks.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FACTORS = {"h100": (2.2, 3.2), "a100": (1.4, 2.0), "v100": (1.0, 1.0), "l4": (0.35, 0.6)}
PRICES = {"h100": 4.5, "a100": 2.9, "v100": 1.6, "l4": 0.8}
COUNTS = {"h100": 16, "a100": 24, "v100": 24, "l4": 32}


def fleet(jobs: int, seed: int) -> dict:
    table = json.loads((ROOT / "fleetplan" / "data" / "gavel_throughputs.json").read_text())["jobs"]
    rng = np.random.default_rng(seed)
    out = []
    for index in range(jobs):
        kind = table[int(rng.integers(len(table)))]
        v100 = kind["throughput"]["v100"] * float(rng.uniform(0.9, 1.1))
        throughput = {name: round(v100 * float(rng.uniform(*FACTORS[name])), 6) for name in FACTORS}
        scale = int(kind["scale_factor"])
        out.append({"id": f"job{index:03d}", "throughput": throughput, "scale_factor": scale,
                    "job_type": kind["job_type"], "steps_left": float(round(v100 * 3600 * rng.uniform(2, 300))),
                    "time_elapsed": float(round(rng.uniform(0, 5) * 86400))})
    return {"kind": "allocation", "schema_version": 1, "name": f"planner-fleet-{jobs}", "currency": "USD",
            "worker_types": [{"name": name, "count": COUNTS[name], "cost_per_hour": PRICES[name]} for name in FACTORS],
            "jobs": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    Path(args.output).write_text(json.dumps(fleet(args.jobs, args.seed), indent=1) + "\n")


if __name__ == "__main__":
    main()
