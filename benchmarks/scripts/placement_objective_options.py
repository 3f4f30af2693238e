"""The Tetris hill climb (MAST §3.4) under each reading of Figure 4 that is a setting of the
instance: ``split_ml_demand`` and
``overload_form``. One JSON line per setting: the climb's own objective, the plan scored by the
default judge, and the readings the settings are about (split ML jobs, the high-priority GPU-hours
in them, §5.6's maximum demand/supply overall and per GPU type).

    .venv/bin/python benchmarks/scripts/placement_objective_options.py --tables 10000 --seed 2 [--no-quota]
    .venv/bin/python benchmarks/scripts/placement_objective_options.py --tiny 20

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
    parser.add_argument("--tiny", type=int, default=0, help="instead: the climb against enumeration on this "
                        "many tiny instances (2 regions, 6 tables, 8 ML jobs, no quota) per setting")
    args = parser.parse_args()
    import fleetplan
    from fleetplan.instances.placement import PlacementInstance, PlacementPlan

    if args.tiny:
        tiny(args.tiny)
        return

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


def tiny(count: int) -> None:
    """Per setting: on how many of ``count`` tiny instances the climb (no replicas) ends at the
    enumerated optimum, and its largest and mean relative excess over it (above the objective's
    constant floor, which no plan escapes)."""
    import fleetplan
    from fleetplan.instances.placement import PlacementInstance, PlacementPlan
    from fleetplan.solvers.placement.exact.enumeration import enumerate_placements

    for split, overload in SETTINGS:
        reached, excess, splits = 0, [], 0
        for seed in range(count):
            data = fleetplan.generate("placement", {"regions": 2, "tables": 6, "jobs": 8, "ml_share": 1.0,
                                                    "move_quota_share": None}, seed=seed).model_dump()
            data.update(split_ml_demand=split, overload_form=overload)
            instance = PlacementInstance.model_validate(data)
            best = enumerate_placements(instance)
            floor = fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, best.home)).metrics[
                "objective_constant_floor"]
            result = fleetplan.solve(instance, "hill-climb", replicas=False)
            gap = (result.objective - best.objective) / max(best.objective - floor, 1e-12)
            reached += gap <= 1e-9
            excess.append(max(gap, 0.0))
            splits += int(fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, best.home)).metrics[
                "ml_jobs_split"] > 0)
        print(json.dumps({"setting": f"split_ml_demand={split}, overload_form={overload}", "instances": count,
                          "climb_at_optimum": reached, "optima_with_a_split_job": splits,
                          "max_excess_above_floor": max(excess), "mean_excess_above_floor": sum(excess) / count}))


if __name__ == "__main__":
    main()
