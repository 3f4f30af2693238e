"""Problem data: one module per problem kind, and the registry of kinds.

A new kind adds its module and one :class:`ProblemKind` entry to :data:`KINDS`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from fleetplan.errors import OutputError, wrong_input_type
from fleetplan.instances.base import (
    Evaluation,
    InstanceBase,
    InstanceError,
    PlanBase,
    ProblemKind,
    Violation,
    check_numbers,
    parse_json_text,
    read_json_file,
    to_json_text,
    validate_model,
)
from fleetplan.instances.outputs import atomic_write_text

# Each kind's modules load the first time the kind is used, so `import fleetplan` and
# `fleetplan --help` build no pydantic model of any kind (a new kind adds one factory here).


def _allocation() -> ProblemKind:
    from fleetplan.instances import allocation
    from fleetplan.instances.allocation import evaluate as allocation_evaluate

    return ProblemKind(
        name="allocation",
        instance_type=allocation.AllocationInstance,
        plan_type=allocation.AllocationPlan,
        evaluate=allocation_evaluate.evaluate,
        generate=allocation.generate,
        generate_params=allocation.AllocationParams,
        estimate=allocation.estimate,
        description="Gavel: share heterogeneous accelerators among jobs (allocation matrix X)",
        solver_modules=("fleetplan.solvers.allocation", "fleetplan.solvers.allocation.policies",
                        "fleetplan.solvers.allocation.water_filling"),
        plot="fleetplan.plotting.plans:plot_allocation",
        cli_view="fleetplan.cli.display.views:AllocationView",
        frames="fleetplan.instances.allocation.frames",
        folder_tables=(("jobs", "cluster"), ("entities", "colocations")),
        folder_reader="fleetplan.instances.allocation.columnar:from_folder",
        session="fleetplan.embed.allocation:AllocationSession",
        session_operations=("add_jobs", "remove_jobs", "update_jobs", "set_workers", "forget_warm_start"),
        demo_solvers=("max-min-fairness", "max-min-fairness-agnostic"),
        demo_metrics={"min_normalized_throughput": "min norm.", "total_throughput": "total",
                      "mean_speedup_over_isolated": "x iso."},
    )


def _placement() -> ProblemKind:
    from fleetplan.instances import placement
    from fleetplan.instances.placement import evaluate as placement_evaluate
    from fleetplan.instances.placement import generate as placement_generate

    return ProblemKind(
        name="placement",
        instance_type=placement.PlacementInstance,
        plan_type=placement.PlacementPlan,
        evaluate=placement_evaluate.evaluate,
        generate=placement_generate.generate,
        generate_params=placement_generate.PlacementParams,
        estimate=placement_generate.estimate,
        description="Tetris (MAST §3): place tables in regions (home region per table, replicas)",
        current_plan=placement.PlacementPlan.current,
        solver_modules=("fleetplan.solvers.placement", "fleetplan.solvers.placement.exact"),
        plot="fleetplan.plotting.plans:plot_placement",
        cli_view="fleetplan.cli.display.views:PlacementView",
        frames="fleetplan.instances.placement.frames",
        folder_tables=(("regions", "tables", "jobs"), ()),
        folder_reader="fleetplan.instances.placement.columnar:from_folder",
        demo_solvers=("keep", "greedy", "hill-climb", "mip-highs", "cpsat"),
        demo_metrics={"hp_demand_supply_max": "max D/S", "home_training_rate": "at home",
                      "collocation_rate": "colloc.", "bytes_moved": "moved"},
    )


def _binpack() -> ProblemKind:
    from fleetplan.instances import binpack
    from fleetplan.instances.binpack import evaluate as binpack_evaluate
    from fleetplan.instances.binpack import generate as binpack_generate

    return ProblemKind(
        name="binpack",
        instance_type=binpack.BinpackInstance,
        plan_type=binpack.BinpackPlan,
        evaluate=binpack_evaluate.evaluate,
        generate=binpack_generate.generate,
        generate_params=binpack_generate.BinpackParams,
        estimate=binpack_generate.estimate,
        description="RMS (MAST §4.3): place workloads' gang-scheduled jobs on a region's machines, with preemption",
        # The RMS score is one float encoding a lexicographic order it cannot always hold.
        order_key=binpack_evaluate.score_key_from_metrics,
        order_difference=binpack_evaluate.key_difference,
        objective_note=binpack_evaluate.SCORE_NOTE,
        score_name="RMS score",
        lead_metrics=("placed_workloads", "unplaced_workloads", "preempted_jobs",
                      *(f"preempted_count_p{p}" for p in range(binpack.PRIORITY_LEVELS)), "preempted_youth"),
        solver_modules=("fleetplan.solvers.binpack",),
        plot="fleetplan.plotting.binpack:plot_binpack",
        cli_view="fleetplan.cli.display.views:BinpackView",
        frames="fleetplan.instances.binpack.frames",
        machine_counts=True,
        folder_tables=(("machines", "workloads"), ("running", "holdings")),
        session="fleetplan.embed.binpack:BinpackSession",
        session_operations=("finish", "fail_machines", "restore_machines", "advance"),
        demo_solvers=("rms-greedy", "cpsat", "batch-cpsat"),
        # What the encoded score holds (2.8147506e+14 against 2.8147499e+14 to four digits looks equal).
        demo_metrics={"placed_workloads": "placed", "unplaced_workloads": "waiting",
                      "preempted_by_priority": "preempted (priority: jobs)", "preempted_youth": "youth",
                      "machines_used": "machines", "racks_used": "racks"},
    )


def _gpushare() -> ProblemKind:
    from fleetplan.instances import gpushare
    from fleetplan.instances.gpushare import evaluate as gpushare_evaluate
    from fleetplan.instances.gpushare import generate as gpushare_generate

    return ProblemKind(
        name="gpushare",
        instance_type=gpushare.GpushareInstance,
        plan_type=gpushare.GpusharePlan,
        evaluate=gpushare_evaluate.evaluate,
        generate=gpushare_generate.generate,
        generate_params=gpushare_generate.GpushareParams,
        estimate=gpushare_generate.estimate,
        description="FGD (ATC'23): place tasks taking whole GPUs or a share of one on CPU/memory/GPU nodes, "
                    "one at a time, against fragmentation",
        solver_modules=("fleetplan.solvers.gpushare",),
        plot="fleetplan.plotting.gpushare:plot_gpushare",
        cli_view="fleetplan.cli.display.views:KindView",
    )


def _reservation() -> ProblemKind:
    from fleetplan.instances import reservation
    from fleetplan.instances.reservation import evaluate as reservation_evaluate
    from fleetplan.instances.reservation import events as reservation_events
    from fleetplan.instances.reservation import generate as reservation_generate

    return ProblemKind(
        name="reservation",
        instance_type=reservation.ReservationInstance,
        plan_type=reservation.ReservationPlan,
        evaluate=reservation_evaluate.evaluate,
        generate=reservation_generate.generate,
        generate_params=reservation_generate.ReservationParams,
        estimate=reservation_generate.estimate,
        description="RAS (MAST §2): assign servers to reservations that keep capacity when a fault domain fails",
        current_plan=reservation.ReservationPlan.current,
        next_instance=reservation_events.next_instance_from_files,
        solver_modules=("fleetplan.solvers.reservation",),
        plot="fleetplan.plotting.reservation:plot_reservation",
        cli_view="fleetplan.cli.display.views:KindView",
        frames="fleetplan.instances.reservation.frames",
        folder_tables=(("server_types", "fault_domains", "racks", "servers", "reservations"), ()),
        session="fleetplan.embed.reservation:ReservationSession",
        session_operations=("set_maintenance", "set_request", "event", "assign"),
        demo_solvers=("keep", "greedy", "hill-climb", "mip-highs", "cpsat"),
        demo_metrics={"shortfall_rru": "short", "guarantee_ratio_min": "guar.", "servers_moved": "moved",
                      "first_choice_share": "1st pick"},
    )


class _Kinds(Mapping[str, ProblemKind]):
    """The registry of kinds: names known at once, each :class:`ProblemKind` built on first use."""

    def __init__(self, factories: dict[str, Callable[[], ProblemKind]]) -> None:
        self._factories = factories
        self._built: dict[str, ProblemKind] = {}

    def __getitem__(self, name: str) -> ProblemKind:
        if name not in self._built:
            self._built[name] = self._factories[name]()
        return self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)


KINDS: Mapping[str, ProblemKind] = _Kinds(
    {"allocation": _allocation, "placement": _placement, "binpack": _binpack, "gpushare": _gpushare,
     "reservation": _reservation}
)


def get_kind(name: str) -> ProblemKind:
    if name not in KINDS:
        raise InstanceError("kind", f"unknown problem kind '{name}' (known: {', '.join(sorted(KINDS))})")
    return KINDS[name]


def _kind_of(data: Any, source: str | None) -> ProblemKind:
    if not isinstance(data, dict):
        raise InstanceError("$", "expected a JSON object", source)
    if "kind" not in data:
        raise InstanceError("kind", "required field is missing", source)
    try:
        return get_kind(str(data["kind"]))
    except InstanceError as error:
        raise InstanceError(error.path, error.reason, source) from None


def instance_from_data(data: Any, source: str | None = None) -> InstanceBase:
    """Validate parsed JSON (or a dict built in Python) as an instance of the kind it names, by
    the rules a file meets: the same number bounds (64-bit integers, magnitudes up to 1e30) as
    :func:`load_instance`, then the kind's model."""
    spec = _kind_of(data, source)
    check_numbers(data, source)
    return validate_model(spec.instance_type, data, source)


def load_instance(path: str | os.PathLike[str]) -> InstanceBase:
    """Load and validate an instance file; raises :class:`InstanceError` naming the JSON path
    (every error found, up to a cap: ``error.lines()``). A folder is read as an instance's
    tables, as ``fleetplan export`` writes them (:func:`fleetplan.instances.frames.load_folder`;
    a placement's or an allocation's Parquet read column-wise:
    :mod:`fleetplan.instances.placement.columnar`, :mod:`fleetplan.instances.allocation.columnar`).

    >>> instance = load_instance("examples/allocation-gavel-4.1.json")
    >>> instance.kind, len(instance.jobs)
    ('allocation', 3)
    """
    source = str(path)
    if os.path.isdir(path):
        from fleetplan.instances.frames import load_folder

        return load_folder(path)
    data = read_json_file(path)
    spec = _kind_of(data, source)
    if _looks_like(spec.plan_type, spec.instance_type, data):
        raise InstanceError("$", f"this is a {spec.name} plan, not an instance (give the instance "
                                 "file here and the plan where a plan is expected)", source)
    instance = validate_model(spec.instance_type, data, source)
    _require_schema_version(data, source)
    return instance


def load_plan(path: str | os.PathLike[str]) -> PlanBase:
    """Load and validate a plan file (a ``fleetplan solve`` output, or its ``plan`` field).

    >>> import fleetplan, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "plan.json")
    >>> fleetplan.save(fleetplan.solve(load_instance("examples/allocation-gavel-4.1.json")).plan, path)
    >>> load_plan(path).kind
    'allocation'
    """
    source = str(path)
    data = read_json_file(path)
    if isinstance(data, dict) and isinstance(data.get("plan"), dict) and "solver" in data:
        data = data["plan"]  # a `fleetplan solve --json` output: the plan is one of its fields
    spec = _kind_of(data, source)
    if _looks_like(spec.instance_type, spec.plan_type, data):
        raise InstanceError("$", f"this is a {spec.name} instance, not a plan (a plan is what "
                                 "`fleetplan solve -o` writes)", source)
    plan = validate_model(spec.plan_type, data, source)
    _require_schema_version(data, source)
    return plan


def _looks_like(model: type[BaseModel], other: type[BaseModel], data: dict[str, Any]) -> bool:
    """True when ``data`` carries fields only ``model`` has and none only ``other`` has."""
    mine = set(model.model_fields) - set(other.model_fields)
    theirs = set(other.model_fields) - set(model.model_fields)
    keys = set(data)
    return bool(keys & mine) and not keys & theirs


def _require_schema_version(data: dict[str, Any], source: str) -> None:
    # Files say which format they are written in; a file without it may be of a future or an
    # unknown format, so it is refused rather than guessed (constructing a model in Python
    # still gets the default).
    if "schema_version" not in data:
        raise InstanceError("schema_version", "required field is missing (this fleetplan reads "
                                              "version 1 files)", source)


def save(obj: BaseModel | dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Save an instance, plan or evaluation as JSON, atomically (a missing parent folder is
    created; see :mod:`fleetplan.instances.outputs` for devices, FIFOs and symlinks). A plain
    dict is validated first, as the instance or plan of the kind it names.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "sub", "cluster.json")
    >>> save(generate("allocation", {"jobs": 4}, seed=1), path)
    >>> load_instance(path).kind
    'allocation'
    """
    if isinstance(obj, dict):
        spec = _kind_of(obj, "object")
        plan = _looks_like(spec.plan_type, spec.instance_type, obj)
        obj = as_plan(obj, "object") if plan else as_instance(obj, "object")
    parent = Path(path).parent
    if not parent.exists() and not Path(path).is_symlink():
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputError(str(path), f"cannot create the folder '{parent}' ({error.strerror})") from None
    atomic_write_text(path, to_json_text(obj))


def schema(kind: str, plan: bool = False) -> dict[str, Any]:
    """The JSON Schema of a kind's instance files (``plan=True``: of its plan files).

    >>> schema("allocation")["properties"]["kind"]["const"]
    'allocation'
    """
    spec = get_kind(kind)
    return (spec.plan_type if plan else spec.instance_type).model_json_schema()


def as_instance(instance: InstanceBase | dict[str, Any], source: str = "instance") -> InstanceBase:
    """An instance model as it is, or a plain dict in the instance file's layout validated into
    one: what every public function taking an instance accepts (as :func:`fleetplan.solve` does).
    Anything else (a file name, None, a list) raises :class:`~fleetplan.errors.InputTypeError`,
    a ``TypeError`` naming what is accepted; a file is read by :func:`load_instance`."""
    if isinstance(instance, InstanceBase):
        return instance
    if isinstance(instance, dict):
        return instance_from_data(instance, source)
    raise wrong_input_type(instance, source, "an instance (a model from load_instance or generate, or a dict "
                           "in the instance file's layout)", "load_instance")


def as_plan(plan: PlanBase | dict[str, Any], source: str = "plan") -> PlanBase:
    """A plan model as it is, or a plain dict in the plan file's layout (or a ``solve --json``
    output, whose ``plan`` field is the plan) validated into one; anything else raises
    :class:`~fleetplan.errors.InputTypeError` (a ``TypeError``), as :func:`as_instance` does."""
    if isinstance(plan, PlanBase):
        return plan
    if isinstance(plan, dict):
        if isinstance(plan.get("plan"), dict) and "solver" in plan:
            plan = plan["plan"]
        spec = _kind_of(plan, source)
        check_numbers(plan, source)  # the bounds a plan file meets (read_json_file applies them)
        return validate_model(spec.plan_type, plan, source)
    raise wrong_input_type(plan, source, "a plan (a model from solve or load_plan, or a dict in the plan "
                           "file's layout)", "load_plan")


def evaluate_current(instance: InstanceBase | dict[str, Any]) -> Evaluation | None:
    """The judge's verdict on today's plan, for kinds whose instances carry one; else None."""
    instance = as_instance(instance)
    current_plan = get_kind(instance.kind).current_plan
    return None if current_plan is None else evaluate(instance, current_plan(instance))


def evaluate(instance: InstanceBase | dict[str, Any], plan: PlanBase | dict[str, Any]) -> Evaluation:
    """The one judge of a plan: objective and its terms, violations, metrics.

    ``instance`` and ``plan`` are models or plain dicts in their files' layouts (what
    :func:`fleetplan.solve` accepts); a bad dict raises :class:`InstanceError` naming the path.

    >>> import fleetplan
    >>> instance = load_instance("examples/allocation-gavel-4.1.json")
    >>> verdict = evaluate(instance, fleetplan.solve(instance, "max-min-fairness").plan)
    >>> verdict.feasible, round(verdict.metrics["min_time_share"], 2)
    (True, 0.45)
    """
    instance, plan = as_instance(instance), as_plan(plan)
    if plan.kind != instance.kind:
        raise InstanceError("kind", f"a {plan.kind} plan cannot be judged against a {instance.kind} instance")
    return get_kind(instance.kind).evaluate(instance, plan)


def generate(kind: str, params: dict[str, Any] | BaseModel | None = None, seed: int = 0) -> InstanceBase:
    """A seeded, deterministic instance of ``kind``; ``params`` as a dict or the kind's model.

    >>> instance = generate("allocation", {"jobs": 16}, seed=1)
    >>> len(instance.jobs), instance == generate("allocation", {"jobs": 16}, seed=1)
    (16, True)
    """
    spec = get_kind(kind)
    if not isinstance(params, BaseModel):
        params = validate_model(spec.generate_params, params or {}, "parameters")
    if spec.estimate is not None:
        from fleetplan.instances.resources import MAX_GENERATE_S, check_fits

        estimate = spec.estimate(params)

        def rescale(fraction: float) -> Any:  # the same parameters, the sizes scaled down
            return spec.estimate(params.model_copy(update={
                name: int(getattr(params, name) * fraction) for name in estimate.sizes}))

        check_fits(estimate, max_seconds=MAX_GENERATE_S, rescale=rescale)
    return spec.generate(params, seed=seed)


__all__ = [
    "KINDS", "Evaluation", "InstanceBase", "InstanceError", "PlanBase", "ProblemKind", "Violation",
    "as_instance", "as_plan", "evaluate", "evaluate_current", "generate", "get_kind", "instance_from_data", "load_instance", "load_plan",
    "parse_json_text", "save", "schema",
]
