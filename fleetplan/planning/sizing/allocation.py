"""Sizing an allocation instance: the cheapest GPUs to buy per type so that every target holds,
under no policy (an allocation that meets them exists) or under the policy that runs.

The models are :mod:`fleetplan.models.allocation.sizing`'s: where every target's reference is
fixed or linear in the purchase the MIP is exact and its optimum is the answer; where the
isolated share moves with the purchase beyond that, a *restriction* (whose purchases meet the
targets) and a *relaxation* (whose optimum bounds every purchase that does) bracket it, and the
purchase lattice between the relaxation's bound and the restriction's cost is searched cheapest
first (:mod:`.lattice`), each purchase checked exactly by an LP with the references of the
sized cluster. The answer is ``optimal`` only when that bracket closes.

Under a named policy (``policy=``) a purchase passes when the policy's own allocation on the
sized instance meets every target (solved and judged). That outcome is not monotone in capacity,
so no greedy step decides it: the lattice is searched cheapest first from the policy-free
minimum (a proven lower bound: the policy's allocation is one allocation), each purchase first
checked by the LP (an allocation must exist) and then by the policy. When the search stops at
its limit, a search along the ray from the policy-free purchase to every MAX, then trimmed
type by type, gives a purchase that passes, reported ``feasible`` with the lattice's proven bound.
Under max-min fairness (the default policy, up to 2,000 jobs) the lattice is searched by boxes instead
(:mod:`.boxes`): a box of purchases is ruled out, or its cheapest passing purchase bounded, by an
LP over the policy's optimal face (:mod:`.max_min_face`), so the bound rises past purchases no
one checked.

Without a named policy the sized instance is solved by the candidates (:data:`CANDIDATE_POLICIES`)
and judged; the message says when the kind's default policy misses a target there.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.instances.allocation import AllocationArrays, AllocationInstance, AllocationPlan
from fleetplan.models.allocation.sizing import build_sizing_model
from fleetplan.planning.sizing import (
    Purchase,
    SizingResult,
    check_max_points,
    check_targets,
    describe_misses,
    relative_gap,
    seconds_until,
    time_left,
)
from fleetplan.planning.sizing.boxes import search_boxes
from fleetplan.planning.sizing.lattice import LatticeOutcome, search_lattice
from fleetplan.planning.sizing.max_min_face import MaxMinFaceTest
from fleetplan.planning.sizing.mip import solve_sizing_mip
from fleetplan.planning.targets import Target

# Tried in order when no policy is named: the kind's default, then the policies whose optimum
# is a target's own measure (time shares, SLO floors, makespan, total throughput).
CANDIDATE_POLICIES = ("max-min-fairness", "max-min-fairness-agnostic", "min-cost-slo", "min-makespan",
                      "max-throughput", "finish-time-fairness")
DEFAULT_POLICY = CANDIDATE_POLICIES[0]
_NEEDS_STEPS = {"min-cost-slo", "min-makespan", "finish-time-fairness"}


@dataclasses.dataclass
class _Answer:
    """The policy-free answer: a purchase (or None), its allocation, the proven bound."""

    add: np.ndarray | None
    allocation: np.ndarray | None
    bound: float | None
    proven: bool
    timed_out: bool
    points: int = 0


def size_allocation(instance: AllocationInstance, targets: Sequence[Target], purchases: Sequence[Purchase], *,
                    budget: float | None, policy: str | None, time_limit: float | None, threads: int,
                    seed: int, started: float, repair: bool = True, mip_rel_gap: float = 1e-6,
                    max_points: int = 2000) -> SizingResult:
    """:func:`fleetplan.planning.size` for the allocation kind (module docstring).

    ``max_points`` is the most purchases the lattice search checks (policy solves under a
    policy): the limit that ends it the same way at any machine load.
    """
    check_max_points(max_points)
    arrays = instance.arrays()
    price, cap, notes = _purchase_arrays(arrays, purchases)
    _check_target_inputs(arrays, targets)
    if policy is not None:
        from fleetplan.solvers import get_solver

        get_solver("allocation", policy)
    deadline = None if time_limit is None else started + time_limit
    result = SizingResult(status="error", kind="allocation", targets=list(targets))
    answer = _policy_free(arrays, targets, price, cap, budget, result, deadline, threads, seed, mip_rel_gap,
                          max_points)
    if answer.add is None:
        result.bound = answer.bound
        if answer.timed_out or not answer.proven:
            result.status = "time_limit"
            result.message = "the limits ran out before any purchase was found that meets every target"
        else:
            result.status = "infeasible"
            result.message = _infeasible_cause(arrays, targets, price, cap, budget)
        return result
    add, proven = answer.add, answer.proven
    result.bound = answer.bound
    if policy is None:
        sized, chosen, plan, metrics, checks, tried = _verify(instance, add, targets, answer.allocation,
                                                              time_limit, started, threads, seed)
        result.stats["policies_tried"] = float(len(tried))
        if chosen is None:
            notes.append(f"no registered policy's allocation meets every target on the sized instance "
                         f"(tried {', '.join(tried)}); the plan is the sizing's own allocation, which does")
        else:
            notes.append(f"the sized instance meets every target under {chosen} (solved and judged)")
        if chosen != DEFAULT_POLICY and DEFAULT_POLICY in tried:
            notes.append(_default_policy_warning(targets, tried[DEFAULT_POLICY]))
    else:
        result.policy_free = {"additions": _additions(arrays, answer.add, cap), "cost": float(price @ answer.add),
                              "bound": answer.bound, "proven": answer.proven}
        add, proven, sized, plan, metrics, checks = _under_policy(
            instance, arrays, targets, policy, price, cap, budget, answer, result, deadline, time_limit, started,
            threads, seed, max_points, repair, mip_rel_gap)
        chosen = policy if add is not None and all(checks.values()) else None
        if chosen is None:
            result.status = "time_limit" if result.stats.get("stopped_by_clock") else (
                "infeasible" if proven else "time_limit")
            result.message = (f"under {policy} no purchase within the limits meets {', '.join(map(str, targets))}"
                              if proven else f"under {policy} no purchase that meets every target was found within "
                              f"the search's limits (checked {int(result.stats.get('points_checked', 0))} purchases; "
                              f"none cheaper than {result.bound:g} passes)")
            if answer.add is not None:
                result.message += (f"; an allocation meeting every target exists with "
                                   f"{_purchase_text(_additions(arrays, answer.add, cap))} (run without --policy "
                                   "to get it)")
            result.sized_instance = None
            return result
        notes.append(f"the sized instance meets every target under {policy} (solved and judged)")
    result.additions = _additions(arrays, add, cap)
    result.units = dict.fromkeys(result.additions, "GPU")
    result.cost = float(price @ add)
    if result.bound is not None:
        result.bound = min(result.bound, result.cost)
    result.gap = relative_gap(result.cost, result.bound)
    result.sized_instance, result.plan, result.metrics, result.checks = sized, plan, metrics, checks
    result.policy = chosen or "sizing-allocation"
    if proven:
        result.status = "optimal"
        result.gap = 0.0 if result.gap is not None and result.gap <= mip_rel_gap + 1e-9 else result.gap
    else:
        result.status = "time_limit" if answer.timed_out or result.stats.get("stopped_by_clock") \
            else "feasible"
    result.message = "; ".join(notes)
    return result


def _additions(arrays: AllocationArrays, add: np.ndarray, cap: np.ndarray) -> dict[str, float]:
    return {name: int(units) for name, units, limit in zip(arrays.worker_types, add, cap, strict=True) if limit > 0}


def _policy_free(arrays: AllocationArrays, targets: Sequence[Target], price: np.ndarray, cap: np.ndarray,
                 budget: float | None, result: SizingResult, deadline: float | None, threads: int, seed: int,
                 mip_rel_gap: float, max_points: int) -> _Answer:
    """The cheapest purchase under which an allocation meeting every target exists, and a proven
    lower bound on it (module docstring)."""
    restriction = build_sizing_model(arrays, targets, price, cap, budget, role="restriction")
    outcome = solve_sizing_mip(restriction.lp, seconds_until(deadline), threads, seed, mip_rel_gap)
    result.log += outcome["log"]
    result.stats.update(columns=float(restriction.lp.num_cols), rows=float(restriction.lp.num_rows),
                        job_classes=float(len(restriction.representative)), mip_s=outcome["solve_s"])
    timed_out = outcome["status"] == "time_limit"
    add = allocation = None
    if outcome["values"] is not None:
        add, allocation = restriction.additions(outcome["values"]), restriction.allocation(outcome["values"])
    if restriction.exact:
        bound = outcome["bound"] if outcome["values"] is not None or timed_out else math.inf
        proven = add is not None and outcome["status"] == "optimal"
        if add is None and not timed_out:
            return _Answer(None, None, math.inf, True, False)
        return _Answer(add, allocation, bound, proven, timed_out)
    result.log += restriction.notes
    relaxation = build_sizing_model(arrays, targets, price, cap, budget, role="relaxation")
    relaxed = solve_sizing_mip(relaxation.lp, seconds_until(deadline), threads, seed, mip_rel_gap)
    result.log += [line.replace("sizing MIP", "sizing relaxation") for line in relaxed["log"]]
    if relaxed["values"] is None and relaxed["status"] != "time_limit":
        return _Answer(None, None, math.inf, True, False)  # the relaxation admits every passing purchase
    bound = relaxed["bound"] if relaxed["bound"] is not None else 0.0
    timed_out = timed_out or relaxed["status"] == "time_limit"
    if relaxed["values"] is not None:
        candidate = relaxation.additions(relaxed["values"])
        passes, matrix = allocation_exists(arrays, candidate, targets)
        if passes and (add is None or price @ candidate < price @ add - 1e-9):
            add, allocation = candidate, matrix
    if add is not None and price @ add <= bound * (1 + mip_rel_gap) + 1e-9:
        return _Answer(add, allocation, bound, True, timed_out)
    search = search_lattice(price, _lattice_cap(cap), lambda point: allocation_exists(arrays, point, targets),
                            lower_bound=bound, incumbent_cost=None if add is None else float(price @ add),
                            max_cost=budget, max_points=max_points, deadline=deadline)
    _note_search(result, search)
    if search.found is not None:
        return _Answer(search.found, search.payload, search.cost, True, timed_out, search.checked)
    if add is None and search.exhausted:
        return _Answer(None, None, math.inf, True, False, search.checked)
    return _Answer(add, allocation, search.bound, search.proven, timed_out or search.stopped == "time",
                   search.checked)


def allocation_exists(arrays: AllocationArrays, add: np.ndarray, targets: Sequence[Target]) -> tuple[bool, Any]:
    """Whether some allocation meets every target on the cluster with ``add`` more GPUs (an LP with
    the sized cluster's own references: exact), and that allocation as a (jobs, types) matrix."""
    sized = dataclasses.replace(arrays, num_workers=arrays.num_workers + add, fit_workers=None,
                                isolated_override=None)
    none = np.zeros(len(add))
    model = build_sizing_model(sized, targets, np.ones(len(add)), none)
    outcome = solve_sizing_mip(model.lp, None, 1, 0, 1e-6)
    if outcome["values"] is None:
        return False, None
    return True, model.allocation(outcome["values"])


def _lattice_cap(cap: np.ndarray) -> np.ndarray:
    return np.asarray(np.floor(cap), dtype=int)


def _note_search(result: SizingResult, search: LatticeOutcome) -> None:
    result.log += search.log
    result.stats["points_checked"] = result.stats.get("points_checked", 0.0) + float(search.checked)
    if search.stopped:
        result.stats["stopped_by_clock"] = float(search.stopped == "time")


def _under_policy(instance: AllocationInstance, arrays: AllocationArrays, targets: Sequence[Target], policy: str,
                  price: np.ndarray, cap: np.ndarray, budget: float | None, answer: _Answer, result: SizingResult,
                  deadline: float | None, time_limit: float | None, started: float, threads: int, seed: int,
                  max_points: int, repair: bool, mip_rel_gap: float) -> tuple:
    """The cheapest purchase under which ``policy``'s allocation meets every target (module
    docstring): the policy-free answer when it passes and is proven, else the lattice from the
    policy-free bound, else the ray and the trim (not proven)."""
    judged: dict[tuple[int, ...], tuple] = {}

    def judge(add: np.ndarray) -> tuple:
        key = tuple(int(a) for a in add)
        if key not in judged:
            sized = sized_instance(instance, add)
            plan, metrics = _judge_policy(sized, policy, time_left(time_limit, started), threads, seed)
            judged[key] = (sized, plan, metrics, check_targets(targets, metrics))
        return judged[key]

    sized, plan, metrics, checks = judge(answer.add)
    if all(checks.values()) and answer.proven:
        return answer.add, True, sized, plan, metrics, checks

    def policy_passes(add: np.ndarray) -> tuple[bool, Any]:
        outcome = judge(add)
        return bool(outcome[1] is not None and all(outcome[3].values())), outcome

    def passes(add: np.ndarray) -> tuple[bool, Any]:
        if not allocation_exists(arrays, add, targets)[0]:
            return False, None
        return policy_passes(add)

    incumbent = float(price @ answer.add) if all(checks.values()) else None
    if _face_applies(policy, arrays):
        face = MaxMinFaceTest(arrays, targets, price)
        search = search_boxes(price, _lattice_cap(cap), face, policy_passes, lower_bound=answer.bound or 0.0,
                              incumbent=None if incumbent is None else (answer.add, incumbent, judge(answer.add)),
                              max_cost=budget, gap=mip_rel_gap, max_points=max_points, deadline=deadline)
        result.stats["boxes_tested"] = float(face.tests)
        if search.found is not None and incumbent is not None and search.cost >= incumbent:
            search.found = None  # the incumbent itself: reported below as it was
    else:
        search = search_lattice(price, _lattice_cap(cap), passes, lower_bound=answer.bound or 0.0,
                                incumbent_cost=incumbent, max_cost=budget, max_points=max_points, deadline=deadline)
    _note_search(result, search)
    result.stats["policy_solves"] = float(len(judged))
    result.bound = search.bound if not search.exhausted else result.bound
    if search.found is not None:
        sized, plan, metrics, checks = search.payload
        return search.found, search.proven, sized, plan, metrics, checks
    if incumbent is not None:
        return answer.add, search.proven, sized, plan, metrics, checks
    if search.exhausted:
        return None, True, sized, plan, metrics, checks
    if not repair:
        return None, False, sized, plan, metrics, checks
    found = _ray_and_trim(answer.add, cap, price, budget, lambda add: policy_passes(add)[0], deadline, result.log)
    result.stats["policy_solves"] = float(len(judged))
    if found is None:
        return None, False, sized, plan, metrics, checks
    sized, plan, metrics, checks = judge(found)
    return found, False, sized, plan, metrics, checks


# Above this many jobs a box test (several LPs over every job and type) costs more than the
# policy solves it saves: the purchases are checked one by one.
FACE_MAX_JOBS = 2000


def _face_applies(policy: str, arrays: AllocationArrays) -> bool:
    """Whether :class:`MaxMinFaceTest` bounds ``policy``'s allocations here: max-min fairness
    (heterogeneity-aware, weighted) without colocation pairs, whose shared GPUs its rows omit, on
    at most :data:`FACE_MAX_JOBS` jobs."""
    return policy == "max-min-fairness" and len(arrays.job_ids) <= FACE_MAX_JOBS \
        and not bool((np.asarray(arrays.colocation_class) >= 0).any())


def _ray_and_trim(start: np.ndarray, cap: np.ndarray, price: np.ndarray, budget: float | None,
                  passes: Any, deadline: float | None, log: list[str]) -> np.ndarray | None:
    """A purchase that passes, found without the lattice's order (not proven cheapest): along
    each ray from ``start`` — to every MAX at once, and to each type's MAX alone — the least
    step that passes (bisection on the step, which is not monotone under a policy: the passing
    end is kept); the cheapest of those, then each type trimmed by halving steps while the
    purchase still passes."""
    top = np.floor(cap).astype(int)
    start = np.minimum(start.astype(int), top)

    def affordable(add: np.ndarray) -> bool:
        return budget is None or float(price @ add) <= budget * (1 + 1e-9) + 1e-9

    def out_of_time() -> bool:
        return deadline is not None and time.perf_counter() >= deadline

    ends = [top] + [np.where(np.arange(len(top)) == k, top, start) for k in np.flatnonzero(top > start)]
    best = None
    for end in ends if len(ends) > 2 else ends[:1]:
        found = _least_step(start, end, lambda add: affordable(add) and passes(add), out_of_time)
        if found is not None and (best is None or price @ found < price @ best):
            best = found
    if best is None:
        log.append("ray: no purchase along the rays from the policy-free purchase to the MAX passes")
        return None
    rays = len(ends) if len(ends) > 2 else 1
    log.append(f"ray: {float(price @ best):g} passes ({f'the cheapest of {rays} rays' if rays > 1 else 'the one ray'})")
    for k in np.argsort(-price):  # the dearest type first: trimming it saves the most
        step = max(int(best[k]) // 2, 1)
        while step >= 1 and best[k] > 0 and not out_of_time():
            trial = best.copy()
            trial[k] = max(int(best[k]) - step, 0)
            if passes(trial):
                best = trial
            else:
                step //= 2
    log.append(f"trim: {float(price @ best):g} passes (each type lowered while it did)")
    return best


def _least_step(start: np.ndarray, end: np.ndarray, passes: Any, out_of_time: Any) -> np.ndarray | None:
    """The purchase nearest ``start`` on the segment to ``end`` that passes, by bisection."""
    def point(step: float) -> np.ndarray:
        return start + np.ceil(step * (end - start) - 1e-9).astype(int)

    if not passes(point(1.0)):
        return None
    low, high = 0.0, 1.0
    while not out_of_time() and not np.array_equal(point(low), point(high)) and high - low > 1e-4:
        middle = (low + high) / 2
        if passes(point(middle)):
            high = middle
        else:
            low = middle
    return point(high)


def _default_policy_warning(targets: Sequence[Target], metrics: dict[str, float]) -> str:
    if metrics and all(check_targets(targets, metrics).values()):
        return f"{DEFAULT_POLICY} (the default policy) meets every target there too"
    return (f"warning: under {DEFAULT_POLICY} (the default policy) the sized instance misses "
            f"{describe_misses(targets, metrics)}: size with --policy {DEFAULT_POLICY} for a purchase it meets")


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
        # (The values no instance allows are refused where the targets are read: check_target_value.)
        if target.metric == "slo_missed_jobs" and not np.isfinite(arrays.slo_seconds).any():
            raise InstanceError("--target", "slo_missed_jobs: no job of the instance has an SLO (slo_hours)")
        if target.metric == "makespan_s" and np.isnan(arrays.steps_left).any():
            missing = int(np.flatnonzero(np.isnan(arrays.steps_left))[0])
            raise InstanceError(f"jobs[{missing}].steps_left", "is required by a makespan_s target")


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
    from fleetplan.solvers import solve

    try:
        result = solve(instance, policy, time_limit=time_limit, threads=threads, seed=seed)
    except InstanceError:  # the policy does not apply here (min-cost without prices): it meets nothing
        return None, {}
    if not result.success or result.evaluation is None:
        return None, {}
    return result.plan, dict(result.evaluation.metrics)


def _verify(instance: AllocationInstance, add: np.ndarray, targets: Sequence[Target], witness: np.ndarray,
            time_limit: float | None, started: float, threads: int,
            seed: int) -> tuple[Any, str | None, Any, dict[str, float], dict[str, bool], dict[str, dict[str, float]]]:
    """Solve the sized instance with each candidate policy and judge it: the first that meets
    every target, else the sizing's own allocation; and each tried policy's metrics."""
    from fleetplan.instances.allocation.evaluate import evaluate

    sized = sized_instance(instance, add)
    has_steps = not np.isnan(sized.arrays().steps_left).any()
    tried: dict[str, dict[str, float]] = {}
    for name in CANDIDATE_POLICIES:
        if not has_steps and name in _NEEDS_STEPS:
            continue
        plan, metrics = _judge_policy(sized, name, time_left(time_limit, started), threads, seed)
        tried[name] = metrics
        checks = check_targets(targets, metrics)
        if plan is not None and all(checks.values()):
            return sized, name, plan, metrics, checks, tried
    plan = AllocationPlan.from_matrix(sized, witness, solver="size", policy="max_throughput")
    metrics = dict(evaluate(sized, plan).metrics)
    return sized, None, plan, metrics, check_targets(targets, metrics), tried


def _infeasible_cause(arrays: AllocationArrays, targets: Sequence[Target], price: np.ndarray, cap: np.ndarray,
                      budget: float | None) -> str:
    """Why no purchase meets the targets: the budget, a MAX, or a job no buyable type can serve."""
    text = ", ".join(str(t) for t in targets)
    if budget is not None:
        relaxed = build_sizing_model(arrays, targets, price, cap, None, role="relaxation")
        if solve_sizing_mip(relaxed.lp, 30.0, 1, 0, 1e-4)["values"] is not None:
            return f"no purchase within the budget {budget:g} meets {text}: the budget limits it"
    unlimited = np.where(price > 0, np.maximum(cap, 1e6), 0.0)
    relaxed = build_sizing_model(arrays, targets, price, unlimited, None, role="relaxation")
    if solve_sizing_mip(relaxed.lp, 30.0, 1, 0, 1e-4)["values"] is not None:
        limited = [arrays.worker_types[k] for k in np.flatnonzero(price > 0)]
        return f"no purchase within the MAX of {', '.join(limited)} meets {text}: raise a MAX"
    buyable = price > 0
    for target in targets:
        single = build_sizing_model(arrays, [target], price, unlimited, None, role="relaxation")
        if solve_sizing_mip(single.lp, 30.0, 1, 0, 1e-4)["values"] is None:
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
