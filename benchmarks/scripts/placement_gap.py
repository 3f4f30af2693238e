"""Where a placement plan's gap to the instance's lower bound lies: per GPU group (type x
priority), the plan's Expressions 7-8 plus the traffic of its split jobs against the group's
bound (:func:`fleetplan.solvers.placement.neighbourhood.gaps.group_gaps`), then the traffic and storage
terms against theirs and the move quota's price.

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
from fleetplan.instances.placement import ML, PlacementPlan
from fleetplan.models.placement.bound import placement_lower_bound
from fleetplan.solvers.placement.climb.state import TetrisState
from fleetplan.solvers.placement.neighbourhood.gaps import group_gaps


def main(instance_path: str, plan_path: str) -> None:
    instance = fleetplan.load_instance(instance_path)
    a = instance.arrays()
    plan = PlacementPlan.model_validate(json.load(open(plan_path)))
    state = TetrisState(instance, plan.home_array(instance))
    bound = placement_lower_bound(a)
    plan_total = sum(state.objective_terms.values())
    print(f"plan {plan_total:.6g}, bound {bound.value:.6g}, gap {plan_total - bound.value:.6g}")
    gaps = group_gaps(state, bound)
    for group in gaps:
        print(f"  {group.name}: plan {group.plan:.4f}, bound {group.bound:.4f}, gap {group.gap:.4f}")
    # The groups' values hold their split jobs' traffic (none under the combined overload form).
    split_traffic = 0.0
    if a.overload_form != "combined_high_priority":
        split = np.flatnonzero(a.planned & (a.job_kind == ML) & (state.region < 0))
        split = split[np.isin(state.cell[split], [group.cell for group in gaps])]
        split_traffic = float(a.w_traffic * (a.job_weight[split] * state.job_bytes[split]).sum())
    traffic = state.objective_terms["traffic"] - split_traffic
    storage = state.objective_terms["storage_balance"]
    print(f"  traffic (less the groups' split jobs) and storage balance: plan {traffic:.4g} + {storage:.4g}, "
          f"bound {bound.terms['traffic']:.4g} + {bound.terms['storage_balance']:.4g} "
          f"+ {bound.terms['quota']:.4g} (the move quota's price)")


if __name__ == "__main__":
    main(*sys.argv[1:3])
