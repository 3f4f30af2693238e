"""What planning knows of each problem kind, told once: the planning layer's registry.

The problem kinds themselves are registered in :data:`fleetplan.instances.KINDS` (instance, plan,
judge, generator); this table adds what the planner's questions need of each, so ``size``,
``whatif``, ``compare`` and the marginal values look a kind up here instead of branching on its
name. A new kind adds one :class:`PlanningKind` (``tests/test_planning_kinds_registry.py`` fails
until it does).

>>> planning_kind("allocation").decisive[:2]
('min_time_share', 'median_time_share')
>>> planning_kind("allocation").sizer().__name__
'size_allocation'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fleetplan.errors import InstanceError


class Sizer(Protocol):
    """A kind's sizing: ``fleetplan.planning.size`` after the shared checks."""

    def __call__(self, instance: Any, targets: Sequence[Any], purchases: Sequence[Any], *, budget: float | None,
                 policy: str | None, time_limit: float | None, threads: int, seed: int, started: float,
                 **options: Any) -> Any: ...


# A capacity unit a re-solve adds or removes: name, unit, build one more, build one fewer (or,
# where none can be removed, why: "no idle machine").
CapacityUnit = tuple[str, str, Callable[[], Any], Callable[[], Any] | str]


@dataclass(frozen=True)
class PlanningKind:
    """One kind's planning facts.

    ``sizer`` and ``capacity_units`` are ``"module:function"`` names, imported on first use (the
    solver back-ends load only when a question is asked). ``service_metrics`` are tabulated by
    ``whatif`` and measured by the marginal values beside the kind's targetable metrics;
    ``decisive`` lead a comparison; ``frontier`` says whether a policy-free best exists per point;
    ``hold_plan`` whether a marginal value judges the base plan on the changed instance rather
    than re-solving it (a heuristic's re-solve moves for reasons other than the unit)."""

    name: str
    sizer_path: str | None
    capacity_units_path: str | None
    service_metrics: tuple[str, ...]
    decisive: tuple[str, ...]
    frontier: bool = False
    hold_plan: bool = False
    # "module:function" (instance, base SolveResult) -> reasons, read when no capacity moves the
    # objective; and (before, after Evaluation) -> (text, better|worse|same) where the objective's
    # float cannot hold its exact order (binpack's lexicographic score).
    what_binds_path: str | None = None
    objective_difference_path: str | None = None
    # What a --buy MAX counts when the sizing buys whole units ("GPUs"); None: any amount.
    whole_units: str | None = None
    # "module:function" (instance) -> metrics of a point no plan serves (how far from servable).
    unserved_metrics_path: str | None = None
    # "module:function" (instance, solver, time_limit=, seed=, threads=, options=) -> a function
    # solving a capacity-changed copy of the instance warm, from the last re-solve.
    warm_solver_path: str | None = None
    # "module:Class" (instance, HorizonSpec, scenarios): the kind's side of planning over time
    # (fleetplan.planning.horizon); None: no horizon planning for the kind.
    horizon_path: str | None = None

    def sizer(self) -> Sizer:
        if self.sizer_path is None:
            raise InstanceError("kind", f"no sizing for kind '{self.name}' yet (sizing knows: "
                                        f"{', '.join(k for k, e in PLANNING_KINDS.items() if e.sizer_path)})")
        return _load(self.sizer_path)

    def what_binds(self, instance: Any, base: Any) -> list[str]:
        return _load(self.what_binds_path)(instance, base) if self.what_binds_path else []

    def warm_solver(self, instance: Any, solver: str | None, **kwargs: Any) -> Callable[[Any], Any] | None:
        return _load(self.warm_solver_path)(instance, solver, **kwargs) if self.warm_solver_path else None

    def unserved_metrics(self, instance: Any) -> dict[str, float]:
        return _load(self.unserved_metrics_path)(instance) if self.unserved_metrics_path else {}

    def objective_difference(self) -> Callable[[Any, Any], tuple[str, str]] | None:
        return _load(self.objective_difference_path) if self.objective_difference_path else None

    def horizon_periods(self, instance: Any, spec: Any, scenarios: Sequence[Any]) -> Any:
        """The kind's side of planning over time (:mod:`fleetplan.planning.horizon`)."""
        if self.horizon_path is None:
            raise InstanceError("kind", f"no planning over time for kind '{self.name}' (it knows: "
                                        f"{', '.join(k for k, e in PLANNING_KINDS.items() if e.horizon_path)})")
        return _load(self.horizon_path)(instance, spec, scenarios)

    def capacity_units(self, instance: Any) -> Iterator[CapacityUnit]:
        if self.capacity_units_path is None:
            raise InstanceError("kind", f"no marginal values for kind '{self.name}' yet")
        units: Callable[[Any], Iterator[CapacityUnit]] = _load(self.capacity_units_path)
        return units(instance)


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


PLANNING_KINDS: dict[str, PlanningKind] = {
    "allocation": PlanningKind(
        horizon_path="fleetplan.planning.horizon.allocation:AllocationPeriods",
        name="allocation", sizer_path="fleetplan.planning.sizing.allocation:size_allocation",
        capacity_units_path="fleetplan.planning.marginal:allocation_units",
        service_metrics=("median_time_share", "starved_jobs"),
        decisive=("min_time_share", "median_time_share", "starved_jobs", "total_throughput", "makespan_s"),
        frontier=True, what_binds_path="fleetplan.planning.marginal:allocation_binds", whole_units="GPUs",
        warm_solver_path="fleetplan.planning.marginal:allocation_warm_solver"),
    "placement": PlanningKind(
        horizon_path="fleetplan.planning.horizon.placement:PlacementPeriods",
        name="placement", sizer_path="fleetplan.planning.sizing.placement:size_placement",
        capacity_units_path="fleetplan.planning.marginal:placement_units",
        service_metrics=("bytes_moved",),
        decisive=("hp_demand_supply_max", "hp_gpu_hours_unserved", "hp_gpu_hours_split_share", "bytes_moved",
                  "cross_region_bytes", "storage_over_capacity_bytes"),
        hold_plan=True),
    "reservation": PlanningKind(
        name="reservation", sizer_path="fleetplan.planning.sizing.reservation:size_reservation",
        capacity_units_path="fleetplan.planning.marginal:reservation_units",
        service_metrics=("servers_moved",), decisive=("shortfall_rru", "servers_moved"), whole_units="servers",
        unserved_metrics_path="fleetplan.planning.sizing.reservation:least_shortfall"),
    "binpack": PlanningKind(
        name="binpack", sizer_path="fleetplan.planning.sizing.binpack:size_binpack",
        capacity_units_path="fleetplan.planning.marginal:binpack_units",
        service_metrics=("gpus_idle",),
        decisive=("placed_workloads", "unplaced_workloads", "preempted_jobs", "gpus_idle"),
        objective_difference_path="fleetplan.planning.compare:score_order_difference", whole_units="machines"),
    # The GPU-sharing cluster (FGD on Alibaba's trace): nodes of a GPU model bought or removed.
    "gpushare": PlanningKind(
        name="gpushare", sizer_path="fleetplan.planning.sizing.gpushare:size_gpushare",
        capacity_units_path="fleetplan.planning.marginal:gpushare_units",
        service_metrics=("tasks_placed", "gpu_allocated_share", "fragmentation_share"), whole_units="nodes",
        decisive=("tasks_placed", "gpu_allocated_share", "fragmentation_share", "cpu_allocated_share",
                  "memory_allocated_share")),
}


def planning_kind(name: str) -> PlanningKind:
    """The kind's planning facts; an :class:`InstanceError` for a kind planning does not know."""
    if name not in PLANNING_KINDS:
        raise InstanceError("kind", f"no planning for kind '{name}' (planning knows: {', '.join(PLANNING_KINDS)})")
    return PLANNING_KINDS[name]


def service_metrics(kind: str) -> list[str]:
    """The metrics a planner reads for ``kind``: its targets, then its other service metrics."""
    from fleetplan.planning.targets import TARGETABLE

    return [*TARGETABLE.get(kind, {}), *planning_kind(kind).service_metrics]
