"""Where a placement plan's gap to the instance's lower bound lies: per GPU group (type x
priority), the plan's Expressions 7-8 plus the traffic of its split jobs against the group's
bound, then the traffic and storage terms against theirs.

    fleetplan generate placement --regions 20 --tables 1000 --jobs 1000 --seed 0 -o p1000.json
    fleetplan solve p1000.json --time-limit 60 --json -o plan.json
    python benchmarks/scripts/placement_gap.py p1000.json plan.json

Under ``overload_form="combined_high_priority"`` a job belongs to two groups and the split
traffic is not part of the groups' bounds; the rows then show Expressions 7-8 alone.
"""

from __future__ import annotations

import json
import sys

import numpy as np

import fleetplan
from fleetplan.instances.placement import ML, PRIORITY_LEVELS, PlacementPlan
from fleetplan.models.placement.bound import placement_lower_bound
from fleetplan.solvers.placement.state import TetrisState


def main(instance_path: str, plan_path: str) -> None:
    instance = fleetplan.load_instance(instance_path)
    a = instance.arrays()
    plan = PlacementPlan.model_validate(json.load(open(plan_path)))
    state = TetrisState(instance, plan.home_array(instance))
    bound = placement_lower_bound(a)
    plan_total = sum(state.objective_terms.values())
    print(f"plan {plan_total:.6g}, bound {bound.value:.6g}, gap {plan_total - bound.value:.6g}")
    combined = a.overload_form == "combined_high_priority"
    split_traffic = 0.0
    rows = []
    for (gpu_type, priority, parts), value in bound.groups:
        g = a.gpu_types.index(gpu_type)
        cell = g * PRIORITY_LEVELS + priority
        cost = a.w_gpu * (parts[0] * state.slice_balance[cell] + parts[1] * state.slice_overload[cell])
        jobs = np.flatnonzero(a.planned & (a.job_kind == ML) & (state.cell == cell) & (state.region < 0))
        traffic = 0.0 if combined else float(a.w_traffic * (a.job_weight[jobs] * state.job_bytes[jobs]).sum())
        split_traffic += traffic
        rows.append((cost + traffic - value, f"{gpu_type} priority {priority}{'' if parts == (1.0, 1.0) else f' {parts}'}",
                     cost + traffic, value))
    for gap, name, cost, value in sorted(rows, reverse=True):
        print(f"  {name}: plan {cost:.4f}, bound {value:.4f}, gap {gap:.4f}")
    print(f"  traffic (less the groups' split jobs): plan {state.objective_terms['traffic'] - split_traffic:.4g}, "
          f"bound {bound.terms['traffic']:.4g}")
    print(f"  storage balance: plan {state.objective_terms['storage_balance']:.4g}, "
          f"bound {bound.terms['storage_balance']:.4g}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
