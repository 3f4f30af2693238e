"""What one more (and one fewer) unit of each capacity is worth, measured by re-solving.

For each capacity a planner can buy — a GPU of a type (allocation), one GPU-day of a type in a
region (placement: 24 GPU-hours a day), a rack of a server type in a datacenter (reservation), a
machine in a cluster (binpack) — the instance is solved again with one unit more and one unit
fewer, by the same solver with the same seed, and judged. The result is the change of the
objective *and of the planner's service metrics*, in their own units and signs: "makespan_s
-16,810 s per GPU more", never a "gain" whose sign the reader has to guess.

An LP policy's dual price of a capacity row is a derivative at the optimum. It is shown beside
the re-solve only where it lies between the re-solve's two one-unit slopes (a derivative of a
concave or convex value function must), and is otherwise labelled with the reason it differs:
a degenerate LP has many duals, and a policy normalised by a reference that moves with the
cluster (max-min fairness against the equal share) changes its own yardstick with the purchase,
which no dual of the LP at fixed references can see.

When no unit changes the objective, :attr:`MarginalValues.binds` names what holds it instead:
jobs already at 100% of the time, SLO rows, GPU types no job can use.

>>> import fleetplan
>>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
>>> values = marginal_values(instance, "max-min-fairness", metrics=["min_time_share"])
>>> [value.capacity for value in values.values]
['v100', 'k80']
>>> values.values[0].more["min_time_share"] > 0   # one more V100: the slowest job gets more time
True
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fleetplan.planning.kinds import CapacityUnit
from fleetplan.runs import shared

# One placement unit: a GPU for a day (gpu_supply is GPU-hours per day).
GPU_DAY_HOURS = 24.0
# A base solve shorter than this: the re-solves run in this process (a fork costs some
# milliseconds, and a re-solve warm from the base a fraction of the base's time).
PARALLEL_FROM_S = 0.02
# Policies whose LP objective is normalised by a reference that depends on the cluster.
MOVING_REFERENCE = {"max-min-fairness": "the equal share it is normalised by grows with the cluster",
                    "max-min-fairness-unweighted": "the equal share it is normalised by grows with the cluster",
                    "finish-time-fairness": "the isolated share it is normalised by grows with the cluster"}


@dataclass
class Marginal:
    """One capacity's measured value: the change of the objective and of each metric with one
    unit more (``more``) and one unit fewer (``fewer``; None where the unit cannot be removed),
    ``"objective"`` among them. ``dual`` is the LP's price per unit (objective units, its
    direction: the objective's change per unit more) where one exists; ``dual_note`` why it is
    shown as a local derivative only (empty where it agrees with the re-solve)."""

    capacity: str
    unit: str
    more: dict[str, float] | None
    fewer: dict[str, float] | None
    dual: float | None = None
    dual_note: str = ""
    # Where the objective is an encoding whose differences mean nothing as numbers (binpack's
    # RMS score packs an order into one float): the kind's exact reading of the change, per
    # "more" and "fewer" ("1 more workload placed"), shown instead of the number.
    objective_text: dict[str, str] = field(default_factory=dict)
    # Why a side has no change, per "more" and "fewer": "infeasible" (no plan meets the
    # constraints with that capacity), "none to remove", "no plan (time_limit)", the error.
    missing: dict[str, str] = field(default_factory=dict)


@dataclass
class MarginalValues:
    """Per capacity, what one unit more and fewer changes (see the module docstring)."""

    kind: str
    solver: str
    sense: str
    objective: float | None
    metrics: dict[str, float]
    values: list[Marginal] = field(default_factory=list)
    binds: list[str] = field(default_factory=list)
    status: str = "optimal"
    message: str = ""
    held_plan: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "solver": self.solver, "sense": self.sense, "objective": self.objective,
                "metrics": self.metrics, "binds": self.binds, "status": self.status, "message": self.message,
                "held_plan": self.held_plan,
                "values": [vars(value) for value in self.values]}


def marginal_values(instance: Any, solver: str | None = None, *, metrics: Sequence[str] | None = None,
                    time_limit: float | None = None, seed: int = 0, threads: int = 1, hold_plan: bool | None = None,
                    workers: int | None = None, **options: Any) -> MarginalValues:
    """Re-solve ``instance`` with one unit more and one fewer of each capacity (module docstring).

    ``metrics``: the service metrics to report (default: the kind's, as ``whatif`` tabulates).
    ``hold_plan``: judge the base plan on the changed instance instead of re-solving it (default
    for placement, whose climb would otherwise move tables for reasons that have nothing to do
    with one GPU-day: the value is then that of the supply under today's placement).
    ``workers``: processes sharing the re-solves (forked once the base is solved, so each starts
    warm from it; 1: all in this process). None: :func:`default_workers` — the cores other work
    leaves free, or 1 when the base solve took under :data:`PARALLEL_FROM_S` (a fork would cost
    more than it saves) or processes cannot be forked here. Every re-solve starts from the
    base's warm start, never from another unit's, so the numbers are the same for any
    ``workers``.

    >>> import fleetplan
    >>> values = marginal_values(fleetplan.load_instance("examples/allocation-gavel-4.1.json"), "max-throughput")
    >>> [(value.capacity, value.more["objective"] > 0) for value in values.values]
    [('v100', True), ('k80', True)]
    """
    from fleetplan.errors import InstanceError
    from fleetplan.instances import as_instance, evaluate
    from fleetplan.planning.kinds import planning_kind, service_metrics
    from fleetplan.solvers import solve as solve_instance

    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise InstanceError("workers", f"must be a whole number of processes >= 1, got {workers!r}")
    instance = as_instance(instance)
    kind = planning_kind(instance.kind)
    wanted = list(metrics) if metrics else service_metrics(instance.kind)

    warm = kind.warm_solver(instance, solver, time_limit=time_limit, seed=seed, threads=threads, options=options)

    def solve(trial: Any) -> Any:
        if warm is not None:  # the kind keeps the problem between re-solves (a scheduler's session)
            return warm(trial)
        return solve_instance(trial, solver, time_limit=time_limit, seed=seed, threads=threads, **options)

    started = time.perf_counter()
    base = solve(instance)
    base_seconds = time.perf_counter() - started
    if not base.success or base.evaluation is None:
        return MarginalValues(instance.kind, base.solver, "", None, {}, status=base.status,
                              message=f"the instance itself has no plan ({base.status}): {base.message}")
    reported = [name for name in wanted if name in base.evaluation.metrics]
    result = MarginalValues(instance.kind, base.solver, base.evaluation.sense, base.objective,
                            {name: base.evaluation.metrics[name] for name in reported})
    duals = (base.duals.get("workers") or {}) if base.duals_source == "lp" else {}
    hold = kind.hold_plan if hold_plan is None else hold_plan
    result.held_plan = hold

    exact_order = kind.objective_difference()

    def change(build: Callable[[], Any]) -> tuple[dict[str, float] | None, str | None]:
        """The changes, and the kind's reading of the objective's; or None and why there is none."""
        try:
            trial = build()
            if trial is None:
                return None, "none to remove"
            if isinstance(trial, WorkerCounts) and (hold or warm is None):
                trial = trial.instance()
            if hold:
                evaluation = evaluate(trial, base.plan)
            else:
                outcome = solve(trial)
                if not outcome.success or outcome.evaluation is None or outcome.objective is None:
                    return None, ("infeasible" if outcome.status == "infeasible" else f"no plan ({outcome.status})")
                evaluation = outcome.evaluation
        except InstanceError as error:  # e.g. one GPU fewer leaves a job nowhere to run
            return None, f"not valid ({error.path})"
        out = {"objective": evaluation.objective - base.evaluation.objective}
        for name in reported:
            value = evaluation.metrics.get(name)
            if value is not None and math.isfinite(value):
                out[name] = value - result.metrics[name]
        return out, (exact_order(base.evaluation, evaluation)[0] if exact_order is not None else None)

    units = list(kind.capacity_units(instance))
    builds = [build for _, _, more, fewer in units for build in (more, fewer) if callable(build)]
    if workers is None:
        workers = default_workers(len(builds), base_seconds)
    changes = iter(shared.run_shared(change, builds, workers))
    for name, unit, _more, fewer in units:
        (up, up_text), (down, down_text) = (next(changes), next(changes) if callable(fewer) else (None, fewer))
        value = Marginal(name, unit, up, down)
        for side, change_of, text in (("more", up, up_text), ("fewer", down, down_text)):
            if text:  # beside a change, the objective's reading; without one, why there is none
                (value.objective_text if change_of is not None else value.missing)[side] = text
        if name in duals:
            value.dual, value.dual_note = _judge_dual(duals[name], value, result.sense, base.solver)
        result.values.append(value)
    if result.values and all(_flat(value.more) for value in result.values):
        result.binds = _what_binds(instance, base)
    return result


def default_workers(tasks: int, base_seconds: float, *, cores: int | None = None,
                    load: float | None = None) -> int:
    """The processes :func:`marginal_values` uses when not told: one per core this process may
    run on that others leave free (at most one per re-solve), or 1 where forking would not pay
    or cannot be done. ``cores`` and ``load`` (the 1-minute load average, this process counted
    in it) default to the machine's, and a core counts as free only if no other work is on it:
    on 2 cores, a second process gained nothing beside one other busy process (16,384 jobs:
    4.8x one cold solve against 4.4x in one process at load 1.1-1.4; 2.9x against 4.1x when
    quiet). The answers are the same for any count; only the time differs."""
    if tasks < 2 or base_seconds < PARALLEL_FROM_S or not shared.can_fork():
        return 1
    return shared.free_workers(tasks, cores=cores, load=load)


def _flat(change: dict[str, float] | None) -> bool:
    return change is None or abs(change.get("objective", 0.0)) <= 1e-9 * max(1.0, abs(change.get("objective", 0.0)))


def _judge_dual(gain: float, value: Marginal, sense: str, solver: str) -> tuple[float, str]:
    """The LP's dual turned to the objective's own direction, and why it is only a local
    derivative where it lies outside the re-solve's two one-unit slopes."""
    per_unit = gain if sense == "max" else -gain  # duals are stored as objective gained per unit
    slopes = [value.more["objective"]] if value.more else []
    if value.fewer:
        slopes.append(-value.fewer["objective"])
    if not slopes:
        return per_unit, "no re-solve to compare with"
    low, high = min(slopes), max(slopes)
    slack = 1e-6 * max(1.0, abs(low), abs(high)) + 0.02 * abs(high - low)
    if low - slack <= per_unit <= high + slack:
        return per_unit, ""
    reason = MOVING_REFERENCE.get(solver.split("/")[-1])
    if reason:
        return per_unit, f"a local derivative at fixed references: {reason}"
    return per_unit, "a local derivative: the LP is degenerate there (one of its many duals)"


def _what_binds(instance: Any, base: Any) -> list[str]:
    """What holds the objective when no capacity moves it: the kind's own reading, if it has one."""
    from fleetplan.planning.kinds import planning_kind

    reasons = planning_kind(instance.kind).what_binds(instance, base)
    return reasons or ["no capacity binds: the objective is held by the jobs (or tables, or requests) themselves"]


def allocation_warm_solver(instance: Any, solver: str | None, *, time_limit: float | None, seed: int, threads: int,
                           options: dict[str, Any]) -> Callable[[Any], Any]:
    """Allocation: the re-solves as rounds of one session (:class:`fleetplan.embed.AllocationSession`):
    a unit is the worker counts (:func:`allocation_units`), the session's jobs stay; the base
    instance is the first round, and every later round starts warm from the base's prices (not
    from the round before: the answers then do not depend on the order the units run in)."""
    from fleetplan.embed.allocation import AllocationSession
    from fleetplan.instances.allocation.evaluate import metrics_only

    session = AllocationSession.from_instance(instance, solver=solver, time_limit=time_limit, seed=seed,
                                              threads=threads, **options)
    base_hints: dict[Any, Any] | None = None

    def solve(trial: Any) -> Any:
        nonlocal base_hints
        counts = trial.counts if isinstance(trial, WorkerCounts) else {w.name: w.count for w in trial.worker_types}
        session.set_workers(counts)
        if base_hints is not None:
            session.start_from(base_hints)
        # Only the numbers of each plan are read (what binds judges the base again for its
        # per-job table, in the rare call where no unit moves the objective).
        with metrics_only():
            result = session.solve()
        if base_hints is None:
            base_hints = session.warm_start()
        return result

    return solve


def allocation_binds(instance: Any, base: Any) -> list[str]:
    """Allocation: jobs already at full time, types no job can use, SLO rows that bind."""
    jobs = base.evaluation.breakdown.get("jobs")
    if jobs is None and base.plan is not None:  # judged for its numbers only (marginal_values)
        from fleetplan.instances import evaluate

        jobs = evaluate(instance, base.plan).breakdown.get("jobs")
    jobs = jobs or {}
    reasons: list[str] = []
    shares = np.asarray(jobs.get("time_share", []), dtype=float)
    full = [job for job, share in zip(jobs.get("id", []), shares, strict=True) if share >= 1 - 1e-6]
    if full:
        shown = ", ".join(full[:5]) + (" ..." if len(full) > 5 else "")
        reasons.append(f"{len(full)} job(s) already run 100% of the time ({shown}): more GPUs cannot speed them")
    arrays = instance.arrays()
    unused = [name for k, name in enumerate(arrays.worker_types) if not (arrays.throughput[:, k] > 0).any()]
    if unused:
        reasons.append(f"no job can use {', '.join(unused)}")
    slo = (base.duals or {}).get("slo") or {}
    if slo:
        reasons.append(f"SLO rows bind: {', '.join(sorted(slo, key=lambda j: -slo[j])[:5])}")
    return reasons


# --- the units per kind ------------------------------------------------------------------------

@dataclass
class WorkerCounts:
    """A unit's cluster as its worker counts: what the warm solver sets (no instance rebuilt per
    unit); :meth:`instance` builds the validated instance where one is needed (a held plan, a
    cold re-solve)."""

    base: Any
    counts: dict[str, int]

    def instance(self) -> Any:
        from fleetplan.planning.sizing.allocation import sized_instance

        extra = [self.counts[worker.name] - worker.count for worker in self.base.worker_types]
        return sized_instance(self.base, np.array(extra, dtype=int))


def allocation_units(instance: Any) -> Iterator[CapacityUnit]:
    """A GPU of each type more and fewer, as :class:`WorkerCounts`."""
    counts = {worker.name: worker.count for worker in instance.worker_types}
    for worker in instance.worker_types:
        yield (worker.name, "GPU", lambda name=worker.name: WorkerCounts(instance, {**counts, name: counts[name] + 1}),
               (lambda name=worker.name: WorkerCounts(instance, {**counts, name: counts[name] - 1}))
               if worker.count >= 1 else "none to remove")


def placement_units(instance: Any) -> Iterator[CapacityUnit]:
    from fleetplan.instances import instance_from_data

    def shifted(region: str, gpu_type: str, hours: float) -> Any:
        data = instance.model_dump()
        for entry in data["regions"]:
            if entry["id"] == region:
                entry["gpu_supply"][gpu_type] = max(entry["gpu_supply"].get(gpu_type, 0.0) + hours, 0.0)
        return instance_from_data(data)

    for region in instance.regions:
        for gpu_type, supply in region.gpu_supply.items():
            yield (f"{region.id}/{gpu_type}", "GPU-day", lambda r=region.id, t=gpu_type: shifted(r, t, GPU_DAY_HOURS),
                   (lambda r=region.id, t=gpu_type: shifted(r, t, -GPU_DAY_HOURS)) if supply >= GPU_DAY_HOURS
                   else "less than a GPU-day here")


def reservation_units(instance: Any) -> Iterator[CapacityUnit]:
    from fleetplan.instances import instance_from_data
    from fleetplan.planning.sizing.reservation import servers_per_rack, sized_instance

    arrays = instance.arrays()
    rack = servers_per_rack(instance)
    for d, datacenter in enumerate(arrays.dc_ids):
        fds = np.flatnonzero(arrays.fd_dc == d)
        if not fds.size:
            continue
        for t, kind in enumerate(arrays.type_ids):
            if arrays.accepts[:, t].any():
                present = np.flatnonzero((arrays.server_dc == d) & (arrays.server_type == t))
                chosen = _servers_to_remove(arrays, present, rack)
                yield (f"{datacenter}/{kind}", f"rack of {rack}",
                       lambda t=t, f=fds[0]: sized_instance(instance, np.array([t]), np.array([f]), np.array([1]), rack),
                       (lambda chosen=chosen: instance_from_data(_drop_rows(instance.model_dump(), "servers", chosen)))
                       if len(present) >= rack else f"fewer than {rack} here")


def _servers_to_remove(arrays: Any, present: np.ndarray, count: int) -> np.ndarray:
    """``count`` of the servers ``present`` for one rack fewer: the free ones first (no
    reservation, not in maintenance), then the others, the last listed first among equals: the
    unit taken is the one today's assignment misses least."""
    assigned = arrays.server_current[present] >= 0  # -1: no reservation today
    order = np.lexsort((-present, arrays.server_maintenance[present].astype(int), assigned.astype(int)))
    return np.sort(present[order[:count]])


def _drop_rows(data: dict[str, Any], table: str, rows: Any) -> dict[str, Any]:
    """``data`` (an instance's dump) with ``rows`` gone from every column of its columnar
    ``table`` (servers, machines, nodes): one fewer unit of a kind whose units are table rows."""
    gone = {int(row) for row in rows}
    columns = data[table]
    for name, column in columns.items():
        if isinstance(column, list):
            columns[name] = [value for index, value in enumerate(column) if index not in gone]
    return data


def binpack_units(instance: Any) -> Iterator[CapacityUnit]:
    from fleetplan.instances import instance_from_data
    from fleetplan.planning.sizing.binpack import machine_templates, sized_instance

    arrays = instance.arrays()
    needed = {instance.hardware_index(job.hardware) for workload in instance.workloads for job in workload.jobs}
    templates = machine_templates(arrays, needed)

    def without(machine: int) -> Any:
        data = _drop_rows(instance.model_dump(), "machines", [machine])
        holdings = data["running"]["holdings"]
        holdings["machine"] = [m - (m > machine) for m in holdings["machine"]]
        return instance_from_data(data)

    for c, cluster in enumerate(arrays.cluster_ids):
        for h, capacity in sorted(templates.get(c, {}).items()):
            idle = np.flatnonzero((arrays.machine_cluster == c) & (arrays.machine_hardware == h)
                                  & (arrays.used.sum(axis=1) == 0))
            name = cluster if len(templates.get(c, {})) == 1 else f"{cluster}/{arrays.hardware_ids[h]}"
            yield (name, "machine",
                   lambda c=c, h=h, capacity=capacity: sized_instance(instance, np.array([c]), np.array([h]),
                                                                      capacity.reshape(1, 3)),
                   (lambda m=int(idle[-1]): without(m)) if idle.size else "no idle machine")


def gpushare_units(instance: Any) -> Iterator[CapacityUnit]:
    """A node of each GPU model more (like the model's most common node, as sizing buys it) and
    fewer (the last such node of the list)."""
    from fleetplan.instances import instance_from_data
    from fleetplan.planning.sizing import Purchase
    from fleetplan.planning.sizing.gpushare import node_templates, with_nodes

    nodes = instance.nodes

    for model in sorted({name for name in nodes.model if name}):
        offer = node_templates(instance, [Purchase(model)])[0]
        _, cpu, memory, gpus, _, _ = offer
        alike = [row for row, shape in enumerate(zip(nodes.model, nodes.cpu_milli, nodes.memory_mib, nodes.gpus,
                                                     strict=True)) if shape == (model, cpu, memory, gpus)]
        yield (model, f"node of {gpus} GPU", lambda offer=offer: with_nodes(instance, [offer], [1]),
               (lambda row=alike[-1]: instance_from_data(_drop_rows(instance.model_dump(), "nodes", [row])))
               if alike else "none to remove")

