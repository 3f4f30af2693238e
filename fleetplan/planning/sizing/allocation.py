"""Sizing an allocation instance: integer GPUs to buy per type, with Gavel's allocation X as
variables of the same model (Gavel §3.1's constraints, capacity made a variable).

The MIP, over job classes (identical jobs share variables, as in the policies' LPs)::

    minimize   sum_k price_k * add_k
    subject to sum_k X[m, k] <= 1                                   (each job's time)
               sum_m scale_factor_m * X[m, k] - add_k <= count_k    (each type's workers)
               the targets, linear in X and add (below)
               X[m, k] <= z[k, s]  and  add_k >= (s - count_k) z[k, s]   for a job of scale
                   factor s on a type that has fewer than s workers today (gang scheduling: the
                   job runs there only once enough are bought; z binary)
               sum_k price_k * add_k <= budget,   0 <= add_k <= MAX_k integer

Targets: ``min_time_share>=v`` bounds every job's time row below by v; ``min_throughput_vs_fastest
>=v`` asks throughput(m, X) >= v * (the job's speed on its fastest type); ``min_speedup_over_isolated
>=v`` asks throughput(m, X) >= v * throughput(m, X_isolated), where X_isolated grows linearly with
the GPUs bought; ``slo_missed_jobs<=0`` puts each SLO job's floor steps/SLO; ``makespan_s<=T``
puts every job's floor steps/T; ``total_throughput>=S`` one row on the sum.

The LP relaxation's optimum bounds the cost from below. Two targets are modelled exactly only
while a job's reference does not depend on what is bought: the fastest type (a type the job fits
only after buying could be its fastest) and the isolated share (X_isolated is normalized when a
job could hold more than all of the GPUs' time). Where it does, the model asks the larger
reference — a purchase it finds still meets the target — and the result is ``feasible``, not
``optimal``.

The sized instance is then solved by a forward policy and judged (never by this model): the
policy named, else the first of the candidates (:data:`CANDIDATE_POLICIES`) whose allocation
meets every target. With a policy named and missed, units are added one at a time (the cheapest
gain first) until it meets them: a purchase above the MIP's, whose cost the bound still brackets.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.instances.allocation import AllocationArrays, AllocationInstance, AllocationPlan
from fleetplan.lazy import lazy_module
from fleetplan.models.allocation.policies import aggregate_jobs, build_space
from fleetplan.models.linear import INF, LinearProgram
from fleetplan.planning.sizing import (
    Purchase,
    SizingResult,
    check_targets,
    describe_misses,
    relative_gap,
    time_left,
)
from fleetplan.planning.targets import Target

sp = lazy_module("scipy.sparse")

# Tried in order when no policy is named: the kind's default, then the policies whose optimum
# is a target's own measure (time shares, SLO floors, makespan, total throughput).
CANDIDATE_POLICIES = ("max-min-fairness", "max-min-fairness-agnostic", "min-cost-slo", "min-makespan",
                      "max-throughput", "finish-time-fairness")
_NEEDS_STEPS = {"min-cost-slo", "min-makespan", "finish-time-fairness"}


@dataclasses.dataclass
class _Model:
    lp: LinearProgram
    representative: np.ndarray
    inverse: np.ndarray
    space: Any
    n_x: int
    exact: bool
    notes: list[str]


def size_allocation(instance: AllocationInstance, targets: Sequence[Target], purchases: Sequence[Purchase], *,
                    budget: float | None, policy: str | None, time_limit: float | None, threads: int,
                    seed: int, started: float, repair: bool = True, mip_rel_gap: float = 1e-6) -> SizingResult:
    """:func:`fleetplan.planning.size` for the allocation kind (module docstring)."""
    arrays = instance.arrays()
    price, cap, notes = _purchase_arrays(arrays, purchases)
    _check_target_inputs(arrays, targets)
    if policy is not None:
        from fleetplan.solvers import get_solver

        get_solver("allocation", policy)
    result = SizingResult(status="error", kind="allocation", targets=list(targets))
    model = build_model(arrays, targets, price, cap, budget)
    outcome = _solve_mip(model.lp, time_left(time_limit, started), threads, seed, mip_rel_gap)
    result.log += outcome["log"]
    result.stats.update(columns=float(model.lp.num_cols), rows=float(model.lp.num_rows),
                        job_classes=float(len(model.representative)), mip_s=outcome["solve_s"])
    if outcome["values"] is None:
        result.status = "time_limit" if outcome["status"] == "time_limit" else "infeasible"
        result.bound = outcome["bound"]
        result.message = (_infeasible_cause(arrays, targets, price, cap, budget)
                          if result.status == "infeasible" else "the time limit ran out before any purchase was found")
        return result
    values = outcome["values"]
    add = np.rint(values[model.n_x: model.n_x + len(price)]).astype(int)
    witness = _witness(instance, model, values)
    result.bound = outcome["bound"]
    notes += model.notes
    proven = outcome["status"] == "optimal" and model.exact
    sized, chosen, plan, metrics, checks, tried = _verify(instance, add, targets, policy, witness,
                                                          time_limit, started, threads, seed)
    if chosen is None and policy is not None and repair:
        add, sized, plan, metrics, checks, repair_log = _repair(instance, add, targets, policy, price, cap,
                                                                budget, time_limit, started, threads, seed)
        result.log += repair_log
        chosen = policy if all(checks.values()) else None
        proven = False
    result.additions = {name: int(units) for name, units in zip(arrays.worker_types, add, strict=True)
                        if cap[arrays.worker_types.index(name)] > 0}
    result.cost = float(price @ add)
    result.gap = relative_gap(result.cost, result.bound)
    result.sized_instance, result.plan, result.metrics, result.checks = sized, plan, metrics, checks
    result.stats["policies_tried"] = float(len(tried))
    if chosen is None and policy is not None:
        result.status = "infeasible"
        result.message = (f"under {policy} the sized instance misses {describe_misses(targets, metrics)} even "
                          f"after adding every unit the limits allow; an allocation meeting every target exists "
                          f"with {_purchase_text(result.additions)} (run without --policy to get it)")
        return result
    result.policy = chosen or "sizing-allocation"
    result.status = "optimal" if proven and chosen is not None and (result.gap or 0) <= mip_rel_gap + 1e-9 \
        else ("time_limit" if outcome["status"] == "time_limit" else "feasible")
    if chosen is None:
        notes.append(f"no registered policy's allocation meets every target on the sized instance "
                     f"(tried {', '.join(tried)}); the plan is the sizing's own allocation, which does")
    else:
        notes.append(f"the sized instance meets every target under {chosen} (solved and judged)")
    result.message = "; ".join(notes)
    return result


# --- the model ---------------------------------------------------------------------------

def _purchase_arrays(arrays: AllocationArrays, purchases: Sequence[Purchase]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per type: the unit price and the most that may be bought (0: not for sale)."""
    types = arrays.worker_types
    price = np.zeros(len(types))
    cap = np.zeros(len(types))
    notes: list[str] = []
    # No target needs more GPUs of a type than every job running there full time holds.
    useful = np.array([arrays.scale_factor[arrays.throughput[:, k] > 0].sum() for k in range(len(types))])
    for item in purchases:
        if item.name not in types:
            raise InstanceError("--buy", f"unknown GPU type '{item.name}' (types: {', '.join(types)})")
        k = types.index(item.name)
        default_price = arrays.cost_per_hour[k] if arrays.cost_per_hour[k] > 0 else 1.0
        if item.price is None and arrays.cost_per_hour[k] <= 0:
            notes.append(f"{item.name} priced at 1 per GPU (no price given and no cost_per_hour)")
        price[k] = default_price if item.price is None else item.price
        cap[k] = max(useful[k] - arrays.num_workers[k], 0.0) if item.maximum is None else math.floor(item.maximum)
    return price, cap, notes


def _check_target_inputs(arrays: AllocationArrays, targets: Sequence[Target]) -> None:
    for target in targets:
        if target.metric == "slo_missed_jobs":
            if target.value != 0:
                raise InstanceError("--target", "only slo_missed_jobs<=0 can be sized for (every SLO met)")
            if not np.isfinite(arrays.slo_seconds).any():
                raise InstanceError("--target", "slo_missed_jobs: no job of the instance has an SLO (slo_hours)")
        if target.metric == "makespan_s":
            if np.isnan(arrays.steps_left).any():
                missing = int(np.flatnonzero(np.isnan(arrays.steps_left))[0])
                raise InstanceError(f"jobs[{missing}].steps_left", "is required by a makespan_s target")
            if target.value <= 0:
                raise InstanceError("--target", "makespan_s must be a positive number of seconds")
        if target.metric in ("min_time_share", "min_throughput_vs_fastest", "min_speedup_over_isolated",
                             "total_throughput") and target.value < 0:
            raise InstanceError("--target", f"{target.metric} must be >= 0")
        if target.metric == "min_time_share" and target.value > 1:
            raise InstanceError("--target", "min_time_share is a fraction of time: at most 1")


def build_model(arrays: AllocationArrays, targets: Sequence[Target], price: np.ndarray, cap: np.ndarray,
                budget: float | None) -> _Model:
    """The sizing MIP of the module docstring as sparse arrays for HiGHS."""
    count = arrays.num_workers
    most = dataclasses.replace(arrays, num_workers=count + cap, fit_workers=None, isolated_override=None)
    representative, inverse, multiplicity = aggregate_jobs(arrays.throughput, arrays.scale_factor,
                                                           arrays.steps_left, arrays.slo_seconds)
    reps = _subset(most, representative)
    space = build_space(reps, multiplicity=multiplicity)
    n_x, n_types = space.n_cols, len(price)
    notes: list[str] = []
    exact = True
    # Gang binaries: (type, scale factor) pairs the job fits only after buying.
    gang = sorted({(int(k), float(s)) for k, s in zip(space.single_type, reps.scale_factor[space.single_job], strict=True)
                   if count[k] < s})
    n_z = len(gang)
    n = n_x + n_types + n_z
    blocks, lower, upper = [], [], []

    def add_rows(matrix: Any, low: np.ndarray, high: np.ndarray) -> None:
        blocks.append(matrix)
        lower.append(low)
        upper.append(high)

    def padded(matrix: Any, add_block: Any = None, z_block: Any = None) -> Any:
        rows = matrix.shape[0]
        return sp.hstack([matrix, add_block if add_block is not None else sp.csr_matrix((rows, n_types)),
                          z_block if z_block is not None else sp.csr_matrix((rows, n_z))], format="csr")

    share_floor = next((t.value for t in targets if t.metric == "min_time_share"), 0.0)
    add_rows(padded(space.time), np.full(space.n_jobs, share_floor), np.ones(space.n_jobs))
    add_rows(padded(space.workers, -sp.identity(n_types, format="csr")), np.full(n_types, -INF), count)
    floor, iso_rows = _throughput_floors(reps, most, count, targets, len(arrays.job_ids))
    if np.any(floor > 0):
        jobs = np.flatnonzero(floor > 0)
        add_rows(padded(space.measured[jobs]), floor[jobs], np.full(len(jobs), INF))
    for target in targets:
        if target.metric == "min_throughput_vs_fastest" and target.value > 0:
            today = np.where(arrays.runnable, arrays.throughput, 0.0).max(axis=1)
            if np.any(_fastest(most)[inverse] > today * (1 + 1e-12)):
                exact = False
                notes.append("a job's fastest type is one it fits only after buying: min_throughput_vs_fastest "
                             "is asked against that type (conservative)")
        if target.metric == "min_speedup_over_isolated" and target.value > 0:
            coefficient, constant, normalized = iso_rows
            block = padded(space.measured, sp.csr_matrix(-target.value * coefficient))
            add_rows(block, target.value * constant, np.full(space.n_jobs, INF))
            if normalized or n_z:
                exact = False
                notes.append("a job's isolated share depends on what is bought beyond the linear range: "
                             "min_speedup_over_isolated is asked against the larger share (conservative)")
        if target.metric == "total_throughput":
            row = sp.csr_matrix((space.measured.T @ space.multiplicity).reshape(1, -1))
            add_rows(padded(row), np.array([target.value]), np.array([INF]))
    if n_z:
        z_of = {key: i for i, key in enumerate(gang)}
        # add_k - (s - count_k) z >= 0
        add_part = sp.csr_matrix((np.ones(n_z), (np.arange(n_z), [k for k, _ in gang])), shape=(n_z, n_types))
        z_part = sp.csr_matrix((-np.array([s - count[k] for k, s in gang]), (np.arange(n_z), np.arange(n_z))),
                               shape=(n_z, n_z))
        add_rows(padded(sp.csr_matrix((n_z, n_x)), add_part, z_part), np.zeros(n_z), np.full(n_z, INF))
        # x_c - upper_c z <= 0 for the gated columns
        column_upper = space.column_upper()
        gated = [(c, z_of[(int(space.single_type[c]), float(reps.scale_factor[space.single_job[c]]))])
                 for c in range(space.n_singles)
                 if count[space.single_type[c]] < reps.scale_factor[space.single_job[c]]]
        columns, zs = np.array([c for c, _ in gated]), np.array([z for _, z in gated])
        rows = np.arange(len(gated))
        x_part = sp.csr_matrix((np.ones(len(gated)), (rows, columns)), shape=(len(gated), n_x))
        z_part = sp.csr_matrix((-column_upper[columns], (rows, zs)), shape=(len(gated), n_z))
        add_rows(padded(x_part, None, z_part), np.full(len(gated), -INF), np.zeros(len(gated)))
    if budget is not None:
        add_rows(padded(sp.csr_matrix((1, n_x)), sp.csr_matrix(price.reshape(1, -1))), np.array([-INF]), np.array([budget]))
    cost = np.concatenate([np.zeros(n_x), price, np.zeros(n_z)])
    col_upper = np.concatenate([space.column_upper(), cap, np.ones(n_z)])
    integrality = np.concatenate([np.zeros(n_x), np.ones(n_types), np.ones(n_z)]).astype(int)
    lp = LinearProgram(cost=cost, matrix=sp.vstack(blocks, format="csr"), row_lower=np.concatenate(lower),
                       row_upper=np.concatenate(upper), col_lower=np.zeros(n), col_upper=col_upper,
                       sense="min", integrality=integrality,
                       names={"x": slice(0, n_x), "add": slice(n_x, n_x + n_types)})
    lp.check()
    return _Model(lp, representative, inverse, space, n_x, exact, notes)


def _subset(arrays: AllocationArrays, jobs: np.ndarray) -> AllocationArrays:
    return AllocationArrays(
        job_ids=[arrays.job_ids[m] for m in jobs], worker_types=arrays.worker_types,
        throughput=arrays.throughput[jobs], scale_factor=arrays.scale_factor[jobs], weight=arrays.weight[jobs],
        num_workers=arrays.num_workers, cost_per_hour=arrays.cost_per_hour, steps_left=arrays.steps_left[jobs],
        time_elapsed=arrays.time_elapsed[jobs], slo_seconds=arrays.slo_seconds[jobs])


def _fastest(arrays: AllocationArrays) -> np.ndarray:
    return np.where(arrays.runnable, arrays.throughput, 0.0).max(axis=1)


def _throughput_floors(reps: AllocationArrays, most: AllocationArrays, count: np.ndarray,
                       targets: Sequence[Target], n_jobs: int) -> tuple[np.ndarray, tuple]:
    """Per class: the largest throughput floor the targets ask (fastest type, SLO, makespan),
    and the isolated share's linear form (coefficients on add, constant, whether normalized)."""
    floor = np.zeros(len(reps.job_ids))
    for target in targets:
        if target.metric == "min_throughput_vs_fastest":
            floor = np.maximum(floor, target.value * _fastest(reps))
        elif target.metric == "slo_missed_jobs":
            with np.errstate(invalid="ignore"):
                need = np.where(np.isfinite(reps.slo_seconds), reps.steps_left / reps.slo_seconds, 0.0)
            floor = np.maximum(floor, need)
        elif target.metric == "makespan_s":
            floor = np.maximum(floor, reps.steps_left / target.value)
    # throughput(m, X_isolated) = sum_k T[m,k] fits[m,k] (count_k + add_k) / (n sf_m), while the
    # fractions sum to at most 1 (past that X_isolated is normalized).
    fits = reps.runnable
    coefficient = reps.throughput * fits / (n_jobs * reps.scale_factor[:, None])
    constant = coefficient @ count
    share = (fits * (count + (most.num_workers - count))[None, :]).sum(axis=1) / (n_jobs * reps.scale_factor)
    return floor, (coefficient, constant, bool(np.any(share > 1 + 1e-12)))


def _solve_mip(lp: LinearProgram, time_limit: float | None, threads: int, seed: int, gap: float) -> dict[str, Any]:
    from fleetplan.solvers import highs as runner

    highs = runner.new_highs(time_limit, threads, seed)
    runner.pass_lp(highs, lp, "simplex")
    highs.setOptionValue("mip_rel_gap", float(gap))
    outcome = runner.run(highs)
    info = highs.getInfo()
    bound = float(info.mip_dual_bound) if math.isfinite(info.mip_dual_bound) else None
    if outcome.status == "optimal" and outcome.objective is not None:
        bound = max(bound if bound is not None else -INF, outcome.objective * (1 - gap) - 1e-9)
        bound = min(bound, outcome.objective)
    return {"status": outcome.status, "values": outcome.values, "objective": outcome.objective,
            "bound": bound, "log": [line.replace("HiGHS:", "sizing MIP (HiGHS):") for line in outcome.log],
            "solve_s": outcome.solve_s}


def _witness(instance: AllocationInstance, model: _Model, values: np.ndarray) -> np.ndarray:
    """The sizing's own allocation as a (jobs, types) matrix, every job given its class's shares."""
    matrix, _ = model.space.split(values[: model.n_x])
    matrix = np.clip(matrix[model.inverse], 0.0, 1.0)
    return matrix


# --- the checks ----------------------------------------------------------------------------

def sized_instance(instance: AllocationInstance, add: np.ndarray) -> AllocationInstance:
    """``instance`` with ``add[k]`` more workers of type k (a new instance, validated)."""
    data = instance.model_dump()
    for entry, extra in zip(data["worker_types"], add, strict=True):
        entry["count"] = int(entry["count"] + extra)
    data["name"] = f"{instance.name}-sized" if instance.name else "sized"
    return AllocationInstance.model_validate(data)


def _judge_policy(instance: AllocationInstance, policy: str, time_limit: float | None, threads: int,
                  seed: int) -> tuple[Any, dict[str, float]]:
    import fleetplan

    result = fleetplan.solve(instance, policy, time_limit=time_limit, threads=threads, seed=seed)
    if not result.success or result.evaluation is None:
        return None, {}
    return result.plan, dict(result.evaluation.metrics)


def _verify(instance: AllocationInstance, add: np.ndarray, targets: Sequence[Target], policy: str | None,
            witness: np.ndarray, time_limit: float | None, started: float, threads: int,
            seed: int) -> tuple[Any, str | None, Any, dict[str, float], dict[str, bool], list[str]]:
    """Solve the sized instance with the policy named (or each candidate) and judge it."""
    from fleetplan.instances.allocation.evaluate import evaluate

    sized = sized_instance(instance, add)
    has_steps = not np.isnan(sized.arrays().steps_left).any()
    candidates = [policy] if policy is not None else [
        name for name in CANDIDATE_POLICIES if has_steps or name not in _NEEDS_STEPS]
    tried = []
    for name in candidates:
        tried.append(name)
        plan, metrics = _judge_policy(sized, name, time_left(time_limit, started), threads, seed)
        checks = check_targets(targets, metrics)
        if plan is not None and all(checks.values()):
            return sized, name, plan, metrics, checks, tried
        if policy is not None:
            return sized, None, plan, metrics, checks, tried
    plan = AllocationPlan.from_matrix(sized, witness, solver="size", policy="max_throughput")
    metrics = dict(evaluate(sized, plan).metrics)
    return sized, None, plan, metrics, check_targets(targets, metrics), tried


def _repair(instance: AllocationInstance, add: np.ndarray, targets: Sequence[Target], policy: str,
            price: np.ndarray, cap: np.ndarray, budget: float | None, time_limit: float | None,
            started: float, threads: int, seed: int) -> tuple:
    """Add one unit at a time — the type whose unit closes the most of the targets' shortfall per
    price — until ``policy``'s allocation meets every target, the limits stop it, or no unit
    helps."""
    add = add.copy()
    log: list[str] = []
    sized = sized_instance(instance, add)
    plan, metrics = _judge_policy(sized, policy, time_left(time_limit, started), threads, seed)
    while True:
        checks = check_targets(targets, metrics)
        if all(checks.values()):
            return add, sized, plan, metrics, checks, log
        if time_limit is not None and time_left(time_limit, started) <= 0.01:
            log.append("repair: the time limit ran out")
            return add, sized, plan, metrics, checks, log
        before = _total_shortfall(targets, metrics)
        best = None
        for k in np.flatnonzero(cap - add >= 1):
            if budget is not None and price @ add + price[k] > budget + 1e-9:
                continue
            trial_add = add.copy()
            trial_add[k] += 1
            trial = sized_instance(instance, trial_add)
            trial_plan, trial_metrics = _judge_policy(trial, policy, time_left(time_limit, started), threads, seed)
            gain = (before - _total_shortfall(targets, trial_metrics)) / price[k]
            if trial_plan is not None and (best is None or gain > best[0]):
                best = (gain, k, trial_add, trial, trial_plan, trial_metrics)
        if best is None or best[0] <= 0:
            log.append("repair: no further unit brings the policy closer to the targets")
            return add, sized, plan, metrics, checks, log
        _, k, add, sized, plan, metrics = best
        log.append(f"repair: +1 {instance.arrays().worker_types[k]} under {policy}")


def _total_shortfall(targets: Sequence[Target], metrics: dict[str, float]) -> float:
    return sum(min(t.shortfall(metrics), 1e12) / max(abs(t.value), 1e-9) for t in targets)


def _infeasible_cause(arrays: AllocationArrays, targets: Sequence[Target], price: np.ndarray, cap: np.ndarray,
                      budget: float | None) -> str:
    """Why no purchase meets the targets: the budget, a MAX, or a job no buyable type can serve."""
    text = ", ".join(str(t) for t in targets)
    if budget is not None:
        relaxed = build_model(arrays, targets, price, cap, None)
        if _solve_mip(relaxed.lp, 30.0, 1, 0, 1e-4)["values"] is not None:
            return f"no purchase within the budget {budget:g} meets {text}: the budget limits it"
    unlimited = np.where(price > 0, np.maximum(cap, 1e6), 0.0)
    relaxed = build_model(arrays, targets, price, unlimited, None)
    if _solve_mip(relaxed.lp, 30.0, 1, 0, 1e-4)["values"] is not None:
        limited = [arrays.worker_types[k] for k in np.flatnonzero(price > 0)]
        return f"no purchase within the MAX of {', '.join(limited)} meets {text}: raise a MAX"
    buyable = price > 0
    for target in targets:
        single = build_model(arrays, [target], price, unlimited, None)
        if _solve_mip(single.lp, 30.0, 1, 0, 1e-4)["values"] is None:
            stuck = _stuck_jobs(arrays, target, buyable)
            who = f" (jobs {', '.join(stuck[:5])}{' ...' if len(stuck) > 5 else ''})" if stuck else ""
            return (f"no purchase of {', '.join(t for t, b in zip(arrays.worker_types, buyable, strict=True) if b)} "
                    f"can meet {target}{who}")
    return f"no purchase meets {text} together (each alone can be met)"


def _stuck_jobs(arrays: AllocationArrays, target: Target, buyable: np.ndarray) -> list[str]:
    """Jobs that even a whole type to themselves cannot bring to ``target``."""
    best = np.where((arrays.throughput > 0) & (buyable[None, :] | arrays.runnable), arrays.throughput, 0.0).max(axis=1)
    if target.metric == "min_throughput_vs_fastest":
        return [] if target.value <= 1 else list(arrays.job_ids)
    if target.metric in ("slo_missed_jobs", "makespan_s"):
        need = arrays.steps_left / (arrays.slo_seconds if target.metric == "slo_missed_jobs" else target.value)
        return [job for job, b, n in zip(arrays.job_ids, best, need, strict=True) if np.isfinite(n) and b < n]
    return []


def _purchase_text(additions: dict[str, float]) -> str:
    bought = [f"{units:g} {name}" for name, units in additions.items() if units]
    return ", ".join(bought) if bought else "nothing bought"
