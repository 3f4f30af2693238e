"""The Tetris hill climb (MAST §3.4) under each reading of Figure 4 that is a setting of the
instance (issue 14 §4, "fidelity of the placement judge"): ``split_ml_demand`` and
``overload_form``. One JSON line per setting: the climb's own objective, the plan scored by the
default judge, and the readings the settings are about (split ML jobs, the high-priority GPU-hours
in them, §5.6's maximum demand/supply overall and per GPU type).

    .venv/bin/python benchmarks/scripts/placement_objective_options.py --tables 10000 --seed 2 [--no-quota]

The instance is ``fleetplan.generate("placement", {"regions": R, "tables": T, "jobs": T}, seed)``
(the same as ``fleetplan generate placement --regions R --tables T --jobs T --seed S``), with
``move_quota_share: None`` under ``--no-quota``; the climb runs without replicas (they do not
change the homes these readings are computed from). CPU seconds are ``time.process_time``.
"""

from __future__ import annotations

import argparse
import json
import os
import time

SETTINGS = [("ignored", "per_priority"), ("largest_region", "per_priority"),
            ("ignored", "combined_high_priority"), ("largest_region", "combined_high_priority")]
READINGS = ("ml_jobs_split", "hp_gpu_hours_split_share", "hp_demand_supply_max", "hp_demand_supply_max_per_type",
            "hp_demand_supply_max_split_counted", "overload_combined_high_priority", "hp_demand_supply_total_max_type",
            "objective_above_floor")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", type=int, default=20)
    parser.add_argument("--tables", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--no-quota", action="store_true", help="no daily move quota")
    parser.add_argument("--compound", action="store_true", help="the climb's compound moves on")
    args = parser.parse_args()
    import fleetplan
    from fleetplan.instances.placement import PlacementInstance, PlacementPlan

    params = {"regions": args.regions, "tables": args.tables, "jobs": args.tables}
    if args.no_quota:
        params["move_quota_share"] = None
    base = fleetplan.generate("placement", params, seed=args.seed)
    today = fleetplan.evaluate(base, PlacementPlan.current(base))
    print(json.dumps({"setting": "today (V0), default judge", "objective": today.objective,
                      **{k: today.metrics[k] for k in READINGS}}))
    for split, overload in SETTINGS:
        data = base.model_dump()
        data.update(split_ml_demand=split, overload_form=overload)
        instance = PlacementInstance.model_validate(data)
        wall, cpu = time.perf_counter(), time.process_time()
        result = fleetplan.solve(instance, "hill-climb", replicas=False, compound_moves=args.compound)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        metrics = result.evaluation.metrics
        default = fleetplan.evaluate(base, result.plan)
        print(json.dumps({
            "setting": f"split_ml_demand={split}, overload_form={overload}", "objective": result.objective,
            "model_objective": result.model_objective, "default_judge_objective": default.objective,
            **{k: metrics[k] for k in READINGS}, "moves": result.stats.get("moves"),
            "status": result.status, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "load_average": [round(x, 2) for x in os.getloadavg()]}))


if __name__ == "__main__":
    main()
