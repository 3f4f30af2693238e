"""Where a Tetris plan stands against the instance's lower bound, per GPU group (type x
priority): the plan's Expressions 7-8 of the group plus the traffic of its split jobs, less the
group's part of :func:`~fleetplan.models.placement.bound.placement_lower_bound`.

Why: the bound is a sum of per-group minima (and a traffic and a storage term), so the group
whose plan value lies furthest above its minimum is where the plan can gain most — or where the
bound is weakest. The neighbourhood search draws its ``gap`` neighbourhoods from these gaps
(:mod:`fleetplan.solvers.placement.neighbourhood.lns`), and ``benchmarks/scripts/placement_gap.py`` prints
them.

Example
-------
>>> import fleetplan
>>> from fleetplan.models.placement.bound import placement_lower_bound
>>> from fleetplan.solvers.placement.climb.state import TetrisState
>>> instance = fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 30}, seed=0)
>>> state = TetrisState(instance)
>>> gaps = group_gaps(state, placement_lower_bound(instance.arrays()))
>>> all(g.plan >= g.bound - 1e-9 for g in gaps), gaps == sorted(gaps, key=lambda g: -g.gap)
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.placement import ML, PRIORITY_LEVELS
from fleetplan.models.placement.bound import LowerBound
from fleetplan.solvers.placement.climb.state import TetrisState


@dataclass
class GroupGap:
    """One GPU group: its name, slice (``cell``), planned ML jobs, the plan's value (Expressions
    7-8 times ``w2`` plus its split jobs' traffic), the bound's value and the difference."""

    name: str
    cell: int
    jobs: np.ndarray
    plan: float
    bound: float

    @property
    def gap(self) -> float:
        return self.plan - self.bound


def group_gaps(state: TetrisState, bound: LowerBound) -> list[GroupGap]:
    """Every group of ``bound.groups`` with the state's value, largest gap first (then by name).
    Under ``overload_form="combined_high_priority"`` a job belongs to two groups and the bound's
    groups count no split traffic; the plan's values then count none either."""
    a = state.arrays
    combined = a.overload_form == "combined_high_priority"
    ml = a.planned & (a.job_kind == ML)
    gaps = []
    for (gpu_type, priority, parts), value in bound.groups:
        cell = a.gpu_types.index(gpu_type) * PRIORITY_LEVELS + priority
        cost = a.w_gpu * (parts[0] * state.slice_balance[cell] + parts[1] * state.slice_overload[cell])
        jobs = np.flatnonzero(ml & (state.cell == cell))
        split = jobs[state.region[jobs] < 0]
        traffic = 0.0 if combined else float(a.w_traffic * (a.job_weight[split] * state.job_bytes[split]).sum())
        name = f"{gpu_type} priority {priority}" + ("" if parts == (1.0, 1.0) else f" {parts}")
        gaps.append(GroupGap(name, cell, jobs, float(cost + traffic), float(value)))
    gaps.sort(key=lambda g: (-g.gap, g.name))
    return gaps


__all__ = ["GroupGap", "group_gaps"]
