"""Planning over time, timed as a user pays: a whole `fleetplan horizon` process.

    python benchmarks/scripts/horizon_speed.py JOBS [--periods 8] [--scenarios 3] [--gap 0.01]
                                                    [--repeats 1] [--stochastic] [--folder DIR]
                                                    [--policy P|none]

The instance is the planner's fleet of docs/planning.md (benchmarks/scripts/planner_fleet.py) with
JOBS distinct jobs on H100, A100, V100 and L4; the horizon is examples/horizon-2-years.yaml's
(prices, lead times 2/1/0, lifetimes, opex, the V100s retiring after period 4, its budget scaled by JOBS / 300) over
PERIODS periods, with SCENARIOS growth scenarios of equal probability spread from 5% to 25% a
period (one scenario: 12%), the first period's orders shared. Prints one JSON line per run: wall
and CPU seconds of the process, the status, cost, bound and gap, the model's size and the load.

Nothing here is imported by fleetplan.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from planner_fleet import fleet  # noqa: E402
from planning_speed import run  # noqa: E402


def horizon(jobs: int, periods: int, scenarios: int) -> dict:
    base = yaml.safe_load((ROOT / "examples" / "horizon-2-years.yaml").read_text())
    base["periods"] = periods
    base["budget"] = base["budget"] * jobs / 300  # the example's budget is the 300-job fleet's
    base["existing"]["v100"]["retire"] = [{"count": 24, "after": min(4, periods)}]
    if scenarios == 1:
        base.pop("scenarios")
        base["demand"] = {"growth": 0.12}
    else:
        rates = [0.05 + 0.2 * i / (scenarios - 1) for i in range(scenarios)]
        base["scenarios"]["cases"] = [{"name": f"g{round(100 * r)}", "probability": 1 / scenarios,
                                       "demand": {"growth": r}} for r in rates]
        base["scenarios"]["cases"][-1]["probability"] = 1 - (scenarios - 1) / scenarios
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jobs", type=int)
    parser.add_argument("--periods", type=int, default=8)
    parser.add_argument("--scenarios", type=int, default=3)
    parser.add_argument("--gap", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--stochastic", action="store_true", help="also VSS and EVPI (more solves)")
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument("--folder", default=None)
    parser.add_argument("--policy", default=None, help="passed on: the policy every period is checked under "
                                                       "('none': no check; default: the command's)")
    args = parser.parse_args()
    folder = Path(args.folder or tempfile.mkdtemp(prefix="horizon-speed-"))
    folder.mkdir(parents=True, exist_ok=True)
    instance = folder / f"fleet-{args.jobs}.json"
    if not instance.exists():
        instance.write_text(json.dumps(fleet(args.jobs, 0)))
    spec = folder / f"horizon-{args.periods}x{args.scenarios}.yaml"
    spec.write_text(yaml.safe_dump(horizon(args.jobs, args.periods, args.scenarios)))
    argv = [sys.executable, "-m", "fleetplan", "horizon", str(instance), str(spec), "--json", "--gap", str(args.gap)]
    if not args.stochastic:
        argv.append("--no-stochastic")
    if args.time_limit:
        argv += ["--time-limit", str(args.time_limit)]
    if args.policy:
        argv += ["--policy", args.policy]
    for _ in range(args.repeats):
        load_before = os.getloadavg()[0]
        wall, cpu, out = run(argv)
        result = json.loads(out)
        print(json.dumps({"jobs": args.jobs, "periods": args.periods, "scenarios": args.scenarios, "gap_asked": args.gap,
                          "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "status": result["status"],
                          "cost": result["cost"], "bound": result["bound"], "gap": result["gap"],
                          "solve_s": round(result["stats"].get("solve_s", 0), 2),
                          "columns": result["stats"].get("columns"), "rows": result["stats"].get("rows"),
                          "load": [round(load_before, 2), round(os.getloadavg()[0], 2)]}), flush=True)


if __name__ == "__main__":
    main()
