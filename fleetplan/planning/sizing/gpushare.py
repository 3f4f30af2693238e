"""Sizing a gpushare cluster: which nodes to add so that every task of the instance places
(``tasks_pending<=0``) — the planner's question on Alibaba's trace: the peak concurrent tasks
(``python -m fleetplan.benchmarks.experiments.gpushare --peak-out``) on today's nodes plus the
cheapest purchase.

``--buy MODEL=PRICE[:MAX]`` offers nodes like the cluster's most common node of that GPU model
(its CPU, memory and GPU count), PRICE per node (default: its GPU count, one unit per GPU).

1. A lower bound on the cost: the pooled relaxation of :mod:`fleetplan.models.gpushare` with
   every task required and the bought nodes of each offer as one more pooled type, an integer
   program (HiGHS)::

       minimize   sum_p price_p n_p
       subject to sum_k x[s, k] = count_s                    (every task of shape s somewhere)
                  sum_s demand_s x[s, k] <= capacity_k        (today's node types, pooled)
                  sum_s demand_s x[s, p] <= capacity_p n_p    (bought nodes of offer p)

   Pooling ignores how a node's capacity splits into nodes and GPUs, so no cheaper purchase can
   work; a dearer one may be needed. One more row sees the nodes one by one: today's nodes hold at
   most ``H`` GPU milli of the tasks whichever way they are placed (the node-pattern bound of
   ``offline-patterns``, each node's CPU, memory and GPUs respected), so the bought nodes' GPUs
   hold at least the rest::

       sum_p 1000 gpus_p n_p >= (GPU milli asked) - H

2. The purchase is checked by placing the tasks on the sized cluster with ``policy``
   (``offline-greedy`` by default: the tasks are known); while some stay pending, nodes of the
   offer that accepts the most pending GPU milli (the cheapest per GPU on a tie) are added —
   enough for half of that demand, at least one — and the tasks placed again.

3. When the purchase costs more than the pooled bound, the program is solved again with the
   node-by-node row (its ``H`` computed in the time left: on the whole trace it takes minutes),
   and the better of the two bounds is reported.

The result is ``optimal`` when the checked purchase costs the bound, else ``feasible`` with the
gap. ``infeasible`` only when proven: the program has no solution, or with every offer at its MAX
the nodes still cannot hold the GPU milli asked, node by node; a policy that leaves tasks pending
with every offer at its MAX otherwise ends ``time_limit`` with the bound.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.instances.gpushare import MILLI
from fleetplan.planning.sizing import Purchase, SizingResult, check_targets, relative_gap, time_left
from fleetplan.planning.targets import Target

# Offers add at most this many nodes each unless --buy says otherwise.
DEFAULT_MAXIMUM = 10_000


def node_templates(instance: Any, purchases: Sequence[Purchase]) -> list[tuple[str, int, int, int, float, float]]:
    """Per offer: (model, cpu, memory, gpus, price, maximum) of the model's most common node."""
    a = instance.arrays()
    models = np.asarray(a.models)[a.node_model]
    offers = []
    for purchase in purchases:
        rows = np.flatnonzero(models == purchase.name)
        if rows.size == 0:
            known = ", ".join(sorted(m for m in set(models.tolist()) if m))
            raise InstanceError("--buy", f"no node of GPU model '{purchase.name}' to copy (models: {known})")
        shapes = Counter(zip(a.node_cpu[rows].tolist(), a.node_memory[rows].tolist(), a.node_gpus[rows].tolist(),
                             strict=True))
        cpu, memory, gpus = shapes.most_common(1)[0][0]
        price = float(gpus) if purchase.price is None else purchase.price
        maximum = DEFAULT_MAXIMUM if purchase.maximum is None else purchase.maximum
        offers.append((purchase.name, int(cpu), int(memory), int(gpus), price, float(maximum)))
    return offers


def with_nodes(instance: Any, offers: list, counts: Sequence[int]) -> Any:
    """``instance`` with ``counts[p]`` new nodes of offer ``p`` (ids ``bought-MODEL-00000``)."""
    from fleetplan.instances import instance_from_data

    data = instance.model_dump()
    nodes = data["nodes"]
    for (model, cpu, memory, gpus, _, _), count in zip(offers, counts, strict=True):
        for number in range(int(count)):
            nodes["id"].append(f"bought-{model}-{number:05d}")
            nodes["cpu_milli"].append(cpu)
            nodes["memory_mib"].append(memory)
            nodes["gpus"].append(gpus)
            nodes["model"].append(model)
    data["name"] = f"{instance.name}-sized" if instance.name else "sized"
    return instance_from_data(data)


def _bound_model(instance: Any, offers: list, budget: float | None,
                 shortfall_milli: float = 0.0):  # -> (LinearProgram, n columns)
    import scipy.sparse as sp

    from fleetplan.instances.gpushare import MILLI
    from fleetplan.models.linear import INF, LinearProgram

    a = instance.arrays()
    node_keys = np.column_stack([a.node_cpu, a.node_memory, a.node_gpus, a.node_model])
    types, type_count = np.unique(node_keys, axis=0, return_counts=True)
    model_index = {m: i for i, m in enumerate(a.models)}
    offer_types = np.array([[cpu, memory, gpus, model_index[model]] for model, cpu, memory, gpus, _, _ in offers])
    all_types = np.vstack([types, offer_types])
    K, P = len(types), len(offers)
    spec_ids = {s: i for i, s in enumerate(sorted(set(a.task_spec)))}
    spec = np.fromiter((spec_ids[s] for s in a.task_spec), dtype=np.int64, count=a.num_tasks)
    keys = np.column_stack([a.task_cpu, a.task_memory, a.task_num_gpu, a.task_gpu_milli, spec])
    shapes, first, count = np.unique(keys, axis=0, return_index=True, return_counts=True)
    access = a.task_access[first][:, all_types[:, 3]]
    fits = ((shapes[:, 0][:, None] <= all_types[:, 0][None, :]) & (shapes[:, 1][:, None] <= all_types[:, 1][None, :])
            & (shapes[:, 2][:, None] <= all_types[:, 2][None, :]) & ((shapes[:, 2] == 0)[:, None] | access))
    nowhere = np.flatnonzero(~fits.any(axis=1))
    if nowhere.size:
        s = int(nowhere[0])
        raise InstanceError("--buy", f"a task of {shapes[s, 0]} milli-cores, {shapes[s, 1]} MiB and {shapes[s, 2]} x "
                                     f"{shapes[s, 3]} GPU milli fits no node today and none offered")
    shape_of, type_of = np.nonzero(fits)
    n_x = len(shape_of)
    n = n_x + P
    rows, cols, vals, lower, upper = [], [], [], [], []
    rows.append(shape_of), cols.append(np.arange(n_x)), vals.append(np.ones(n_x))
    lower += count.astype(float).tolist()
    upper += count.astype(float).tolist()
    row = len(shapes)
    demand = (shapes[shape_of, 0], shapes[shape_of, 1], shapes[shape_of, 2] * shapes[shape_of, 3])
    capacity = (all_types[:, 0], all_types[:, 1], all_types[:, 2] * MILLI)
    for use, cap in zip(demand, capacity, strict=True):
        rows.append(row + type_of), cols.append(np.arange(n_x)), vals.append(use.astype(float))
        bought = np.arange(P)
        rows.append(row + K + bought), cols.append(n_x + bought), vals.append(-cap[K:].astype(float))
        lower += [-INF] * (K + P)
        upper += (cap[:K] * type_count).astype(float).tolist() + [0.0] * P
        row += K + P
    prices = np.array([offer[4] for offer in offers], dtype=float)
    if shortfall_milli > 0:  # the GPU milli today's nodes cannot hold, node by node, on the bought GPUs
        rows.append(np.full(P, row)), cols.append(n_x + np.arange(P))
        vals.append(np.array([offer[3] * MILLI for offer in offers], dtype=float))
        lower.append(float(shortfall_milli)), upper.append(INF)
        row += 1
    if budget is not None:
        rows.append(np.full(P, row)), cols.append(n_x + np.arange(P)), vals.append(prices)
        lower.append(-INF), upper.append(float(budget))
        row += 1
    matrix = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(row, n))
    cost = np.concatenate([np.zeros(n_x), prices])
    col_upper = np.concatenate([count[shape_of].astype(float), [offer[5] for offer in offers]])
    lp = LinearProgram(cost=cost, matrix=matrix, row_lower=np.array(lower), row_upper=np.array(upper),
                       col_lower=np.zeros(n), col_upper=col_upper, sense="min", integrality=np.ones(n, dtype=np.int64))
    return lp, n_x


def _shortfall(instance: Any, time_limit: float | None, started: float, seed: int,
               share: float = 0.5) -> tuple[float, float]:
    """(GPU milli asked less what the instance's nodes can hold at most, that most): the
    node-pattern bound of :func:`fleetplan.solvers.gpushare.offline.patterns.placeable_milli`, which sees
    each node's own CPU, memory and GPUs where the pooled model sums them; given ``share`` of the
    time left."""
    from fleetplan.solvers.gpushare.offline.patterns import placeable_milli

    left = time_left(time_limit, started)
    asked = float(instance.arrays().task_gpu_milli_total.sum())
    held = placeable_milli(instance, time_limit=None if left is None else share * left, seed=seed).bound_milli
    # the bound is a count of milli: a fraction above it is rounding in the master's duals
    return asked - math.floor(held + 1e-6), float(math.floor(held + 1e-6))


def _node_by_node_bound(result: SizingResult, instance: Any, offers: list, budget: float | None,
                        time_limit: float | None, started: float, threads: int, seed: int) -> float:
    """The bound again with the row that sees today's nodes one by one (module docstring), in the
    time left after the purchase was found; 0 when it cannot say more."""
    from fleetplan.planning.sizing.mip import solve_sizing_mip

    left = time_left(time_limit, started)
    if left is not None and left <= 0.01:
        return 0.0
    shortfall, held = _shortfall(instance, time_limit, started, seed, share=1.0)
    result.log.append(f"today's nodes hold at most {held:,.0f} of the {held + shortfall:,.0f} GPU milli asked "
                      f"(node patterns): the bought GPUs must hold at least {max(shortfall, 0.0):,.0f}")
    if shortfall <= 0:
        return 0.0
    lp, _ = _bound_model(instance, offers, budget, shortfall)
    outcome = solve_sizing_mip(lp, time_left(time_limit, started), threads, seed, 1e-4)
    result.log += outcome["log"]
    return float(outcome["bound"]) if outcome["bound"] is not None else 0.0


def _no_purchase(result: SizingResult, instance: Any, offers: list, sized: Any, plan: Any,
                 pending: int, policy: str, bound: float, budget: float | None, time_limit: float | None,
                 started: float, seed: int) -> SizingResult:
    """The growth stopped with tasks pending. ``infeasible`` only when proven: every offer at its
    MAX cannot hold the GPU milli asked, node by node (a larger cluster holds whatever a smaller
    one does, so no purchase within the limits can); otherwise ``time_limit`` with the bound —
    the policy's placement missed, which does not prove that no purchase works."""
    result.bound = bound
    stuck = f"under {policy} {pending} tasks stay pending and no offer within its limits takes them"
    if budget is None and all(math.isfinite(offer[5]) for offer in offers):
        everything = with_nodes(instance, offers, [int(offer[5]) for offer in offers])
        shortfall, held = _shortfall(everything, time_limit, started, seed)
        if shortfall > 0:
            result.status = "infeasible"
            result.sized_instance, result.plan = sized, plan  # what stays pending, for the picture
            result.message = (f"{stuck}; proven: with every offer at its MAX the nodes hold at most {held:,.0f} of the "
                              f"{held + shortfall:,.0f} GPU milli asked, node by node")
            return result
    result.status = "time_limit"
    result.message = (f"{stuck}; not proven impossible (no purchase cheaper than {bound:g} can work): another placement "
                      f"or purchase may place every task")
    return result


def size_gpushare(instance: Any, targets: Sequence[Target], purchases: Sequence[Purchase], *, budget: float | None,
                  policy: str | None, time_limit: float | None, threads: int, seed: int, started: float) -> SizingResult:
    """:func:`fleetplan.planning.size` for the gpushare kind (module docstring)."""
    from fleetplan.planning.sizing.mip import solve_sizing_mip
    from fleetplan.solvers import solve

    for target in targets:
        if target.metric != "tasks_pending":  # (its value: targets.check_target_value)
            raise InstanceError("--target", "only tasks_pending<=0 can be sized for")
    offers = node_templates(instance, purchases)
    policy = policy or "offline-greedy"
    result = SizingResult(status="error", kind="gpushare", targets=list(targets), policy=policy)
    lp, n_x = _bound_model(instance, offers, budget)
    # HiGHS's own relative gap (1e-4), as this sizer always ran it.
    outcome = solve_sizing_mip(lp, time_left(time_limit, started), threads, seed, 1e-4)
    result.log += outcome["log"]
    if outcome["status"] == "infeasible":
        result.status = "infeasible"
        result.message = "no purchase within the offers' limits and the budget places every task"
        return result
    if outcome["values"] is None:
        result.status = "time_limit"
        result.message = "the bound found no purchase in time"
        return result
    bound = outcome["bound"] if outcome["bound"] is not None else 0.0  # no dual bound yet: costs are >= 0
    counts = [int(round(v)) for v in outcome["values"][n_x:]]
    prices = [offer[4] for offer in offers]
    rounds = 0
    while True:
        sized = with_nodes(instance, offers, counts)
        solved = solve(sized, policy, seed=seed, time_limit=time_left(time_limit, started))
        pending = solved.evaluation.metrics["tasks_pending"] if solved.evaluation else math.inf
        if pending == 0 or (time_limit is not None and time_left(time_limit, started) <= 0.01):
            break
        # One more node of the offer that accepts the most pending GPU milli (cheapest per GPU on a tie).
        a = sized.arrays()
        placed = np.zeros(a.num_tasks, dtype=bool)
        index = {t: j for j, t in enumerate(a.task_ids)}
        placed[[index[t] for t in solved.plan.assignments.task]] = True
        waiting = ~placed
        model_index = {m: i for i, m in enumerate(a.models)}
        best, best_key = None, None
        for p, (model, cpu, memory, gpus, price, maximum) in enumerate(offers):
            if counts[p] >= maximum or (budget is not None and sum(c * q for c, q in zip(counts, prices, strict=True))
                                        + price > budget):
                continue
            fits = (waiting & (a.task_cpu <= cpu) & (a.task_memory <= memory) & (a.task_num_gpu <= gpus)
                    & ((a.task_num_gpu == 0) | a.task_access[:, model_index[model]]))
            key = (float(a.task_gpu_milli_total[fits].sum() + fits.sum()), -price / max(gpus, 1))
            if best_key is None or key > best_key:
                best, best_key = p, key
        if best is None or best_key[0] == 0:
            return _no_purchase(result, instance, offers, sized, solved.plan, int(pending), policy, bound,
                                budget, time_limit, started, seed)
        # Half the pending GPU demand this offer takes, in its nodes (at least one): the deficit
        # halves each round instead of shrinking by one node.
        gpus_per_node = max(offers[best][3], 1)
        step = max(1, int(best_key[0] // (2 * gpus_per_node * MILLI)))
        room = offers[best][5] - counts[best]
        if budget is not None:
            spent = sum(c * q for c, q in zip(counts, prices, strict=True))
            room = min(room, (budget - spent) // offers[best][4])
        counts[best] += int(max(1, min(step, room)))
        rounds += 1
    cost = float(sum(c * q for c, q in zip(counts, prices, strict=True)))
    result.additions = {offer[0]: float(c) for offer, c in zip(offers, counts, strict=True)}
    result.sized_instance, result.plan = sized, solved.plan
    result.metrics = dict(solved.evaluation.metrics) if solved.evaluation else {}
    result.checks = check_targets(targets, result.metrics)
    met = all(result.checks.values())
    if met and cost > bound:
        bound = max(bound, _node_by_node_bound(result, instance, offers, budget, time_limit, started, threads, seed))
    result.cost, result.bound = cost, min(bound, cost)
    result.gap = relative_gap(cost, result.bound)
    result.status = ("optimal" if result.gap == 0 else "feasible") if met else "time_limit"
    result.stats = {"nodes_added_after_the_bound": float(rounds)}
    if met and not sum(counts):  # "proves no purchase under 0" says nothing: say why nothing is bought
        result.message = f"nothing to buy: {policy} places every task on today's nodes"
    else:
        result.message = (f"{sum(counts)} {'node' if sum(counts) == 1 else 'nodes'} bought for {cost:g}; the bound "
                          f"(pooled, and node by node on today's nodes) proves no purchase under "
                          f"{result.bound:g} places every task" + ("" if met else "; some tasks still pending"))
    return result


__all__ = ["size_gpushare", "with_nodes"]
