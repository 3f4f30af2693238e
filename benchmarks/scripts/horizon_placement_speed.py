"""Planning a placement fleet over time, timed as a user pays: one whole `fleetplan horizon` process.

    python benchmarks/scripts/horizon_placement_speed.py [--periods 8] [--scenarios 1] [--regions 20]
        [--gpu-types 4] [--tables 20000] [--jobs 20000] [--folder DIR]

Generates a placement instance (seed 0) and a horizon over it: every region may buy GPU-hours of
every GPU type (H100-like types in a quarter, the others at once) and storage, prices falling
3% a quarter, lifetime 16 quarters with 10% salvage; demand grows 5% a quarter with a growth of
its own (0-10%) in every fourth region; a fifth of the first region's supply of each type it
holds retires after quarter 4; targets: high-priority demand/supply at most 1 per region and
(from quarter 2, when the first H100 orders arrive) 1.2 per (region, type), every byte within
capacity. With ``--scenarios 3``: low, base and high growth
(two-stage, the first quarter's orders shared). Prints one JSON line: CPU and wall seconds of
the process, its status and gap, the model's size and the load average when it ended. Nothing
here is imported by fleetplan.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from planning_speed import run  # noqa: E402

FLEETPLAN = [sys.executable, "-m", "fleetplan"]
PRICES = {"h100": (1250.0, 1), "a100": (625.0, 0), "v100": (300.0, 0), "mi300": (1100.0, 1),
          "l40": (400.0, 0), "t4": (150.0, 0), "p100": (200.0, 0), "k80": (80.0, 0)}


def write_inputs(folder: Path, args: argparse.Namespace) -> tuple[Path, Path]:
    instance = folder / f"placement-{args.regions}x{args.gpu_types}-{args.tables}.json"
    if not instance.exists():
        subprocess.run([*FLEETPLAN, "generate", "placement", "--regions", str(args.regions), "--gpu_types",
                        str(args.gpu_types), "--tables", str(args.tables), "--jobs", str(args.jobs), "--seed", "0",
                        "-o", str(instance)], check=True, capture_output=True)
    data = json.loads(instance.read_text())
    regions = [region["id"] for region in data["regions"]]
    with (folder / "buy.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "price", "price_decline", "lead_time", "lifetime", "salvage", "opex_per_hour"])
        for region in regions:
            for gpu in data["gpu_types"]:
                price, lead = PRICES[gpu]
                writer.writerow([f"{region}/{gpu}", price, 0.03, lead, 16, 0.1, round(price / 80000, 6)])
            writer.writerow([f"{region}/storage", 2e-11, 0.03, 0, 16, 0.1, 0])
    first = data["regions"][0]
    existing = {f"{first['id']}/{gpu}": {"retire": [{"count": round(supply / 5, 3), "after": 4}]}
                for gpu, supply in first["gpu_supply"].items() if supply > 0}
    classes = {region: 0.025 * (r % 5) for r, region in enumerate(regions) if r % 4 == 0}
    horizon: dict = {"periods": args.periods, "discount_rate": 0.02, "buy": "buy.csv", "existing": existing,
                     "targets": ["hp_demand_supply_max<=1", "hp_demand_supply_max_per_type<=1.2",
                                 "storage_over_capacity_bytes<=0"],
                     # H100s take a quarter to arrive: the per-type target holds from quarter 2
                     "targets_by_period": {1: ["hp_demand_supply_max<=1", "storage_over_capacity_bytes<=0"]},
                     "demand": {"growth": 0.05, "classes": classes}}
    if args.scenarios > 1:
        growths = [0.02 + 0.08 * s / (args.scenarios - 1) for s in range(args.scenarios)]
        horizon["scenarios"] = {"mode": "two-stage", "decision_period": 1, "cases": [
            {"name": f"growth-{g:.3f}", "probability": 1 / args.scenarios, "demand": {"growth": g, "classes": classes}}
            for g in growths]}
    path = folder / f"horizon-{args.periods}x{args.scenarios}.json"
    path.write_text(json.dumps(horizon, indent=1))
    return instance, path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--periods", type=int, default=8)
    parser.add_argument("--scenarios", type=int, default=1)
    parser.add_argument("--regions", type=int, default=20)
    parser.add_argument("--gpu-types", type=int, default=4)
    parser.add_argument("--tables", type=int, default=20000)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--folder", default=None)
    args = parser.parse_args()
    folder = Path(args.folder or tempfile.mkdtemp(prefix="horizon-placement-"))
    folder.mkdir(parents=True, exist_ok=True)
    instance, horizon = write_inputs(folder, args)
    argv = [*FLEETPLAN, "horizon", str(instance), str(horizon), "--json", "--no-stochastic"]
    wall, cpu, out = run(argv)
    result = json.loads(out)
    judged = all(all(row["checks"].values()) for row in result["periods"])
    print(json.dumps({"periods": args.periods, "scenarios": args.scenarios, "regions": args.regions,
                      "gpu_types": args.gpu_types, "tables": args.tables, "jobs": args.jobs,
                      "items": len(result["items"]), "status": result["status"], "gap": result["gap"],
                      "cost": result["cost"], "columns": result["stats"].get("columns"),
                      "rows": result["stats"].get("rows"), "solve_s": round(result["stats"].get("solve_s", 0), 3),
                      "every_period_judged_met": judged, "wall_s": round(wall, 2),
                      "cpu_s": round(cpu, 2),
                      "load": os.getloadavg()}))


if __name__ == "__main__":
    main()
