"""Sizing a placement instance: GPU-hours to add per region and GPU type (and storage per
region) so that the §5.6 targets hold with the placement fixed — today's, a given plan, or the
hill climb's re-placement (``replan=True``).

With the placement fixed every job's region is fixed, so the high-priority demand D[r, t]
(GPU-hours per region and type) and the bytes stored per region are constants of the judge's
breakdown, and the targets are linear in what is bought (an LP, solved exactly by HiGHS)::

    minimize   sum price[r, t] a[r, t] + sum price[r] b[r]
    hp_demand_supply_max <= v:          sum_t (S[r, t] + a[r, t]) >= D[r] / v    for every region with D[r] > 0
    hp_gpu_hours_unserved <= u:         u[r, t] >= D[r, t] - S[r, t] - a[r, t],  sum u[r, t] <= u
    storage_over_capacity_bytes <= s:   o[r] >= stored[r] - C[r] - b[r],         sum o[r] <= s

Purchases are named ``REGION/GPU_TYPE`` (GPU-hours) or ``REGION/storage`` (bytes); ``*/h100``
offers every region. The sized instance is checked by judging the fixed plan on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.lazy import lazy_module
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

STORAGE = "storage"


def size_placement(instance: Any, targets: Sequence[Target], purchases: Sequence[Purchase], *, budget: float | None,
                   policy: str | None, time_limit: float | None, threads: int, seed: int, started: float,
                   plan: Any = None, replan: bool = False) -> SizingResult:
    """:func:`fleetplan.planning.size` for the placement kind (module docstring). ``plan``: the
    placement to hold fixed (default today's); ``replan``: re-place with the hill climb first."""
    from fleetplan.instances.placement.evaluate import evaluate
    from fleetplan.solvers import solve

    arrays = instance.arrays()
    regions, types = list(arrays.region_ids), list(arrays.gpu_types)
    gpu_price, gpu_cap, storage_price, storage_cap = _purchase_arrays(regions, types, purchases)
    result = SizingResult(status="error", kind="placement", targets=list(targets))
    if plan is None:
        solver = policy or ("hill-climb" if replan else "keep")
        placed = solve(instance, solver, time_limit=time_left(time_limit, started), seed=seed,
                                 threads=threads)
        if not placed.success:
            result.message = f"the placement to hold fixed ({solver}) ended {placed.status}: {placed.message}"
            return result
        plan = placed.plan
        result.policy = solver
    else:
        result.policy = "given plan"
    before = evaluate(instance, plan)
    demand = np.asarray(before.breakdown["region_gpu_types"]["hp_gpu_demand"]).reshape(len(regions), len(types))
    stored = np.asarray(before.breakdown["regions"]["storage_used_bytes"])
    lp = placement_sizing_lp(arrays, targets, demand, stored, gpu_price, gpu_cap, storage_price, storage_cap, budget)
    from fleetplan.planning.sizing.mip import solve_sizing_mip

    outcome = solve_sizing_mip(lp, time_left(time_limit, started), threads, seed, 1e-9)
    result.log += [line.replace("sizing MIP (HiGHS):", "sizing model (HiGHS):") for line in outcome["log"]]
    if outcome["values"] is None:
        result.status = "time_limit" if outcome["status"] == "time_limit" else "infeasible"
        result.message = (_infeasible_cause(targets, demand, arrays, gpu_cap, storage_cap, budget)
                          if result.status == "infeasible" else "the time limit ran out")
        return result
    n_gpu = len(regions) * len(types)
    gpu_add = np.maximum(outcome["values"][:n_gpu], 0.0).reshape(len(regions), len(types))
    storage_add = np.maximum(outcome["values"][n_gpu: n_gpu + len(regions)], 0.0)
    # The LP's answer is met to its tolerance (1e-7 relative); a purchase is rounded up so the
    # judge, which allows 1e-6, finds every target met.
    gpu_add = np.where(gpu_cap > 0, np.ceil(gpu_add * 1e6) / 1e6, 0.0)
    storage_add = np.where(storage_cap > 0, np.ceil(storage_add), 0.0)
    sized = sized_instance(instance, gpu_add, storage_add)
    after = evaluate(sized, plan)
    result.sized_instance, result.plan = sized, plan
    result.metrics = dict(after.metrics)
    result.checks = check_targets(targets, result.metrics)
    result.additions = {f"{regions[r]}/{types[t]}": float(gpu_add[r, t]) for r, t in zip(*np.nonzero(gpu_cap > 0), strict=True)}
    result.additions.update({f"{regions[r]}/{STORAGE}": float(storage_add[r]) for r in np.flatnonzero(storage_cap > 0)})
    result.units = {name: "bytes" if name.endswith(f"/{STORAGE}") else "GPU-hours/day" for name in result.additions}
    result.cost = float((gpu_price * gpu_add).sum() + (storage_price * storage_add).sum())
    result.bound = float(outcome["bound"])
    result.gap = relative_gap(result.cost, result.bound)
    if not all(result.checks.values()):
        result.status = "error"
        result.message = f"the judge finds {describe_misses(targets, result.metrics)} on the sized instance"
        return result
    result.status = "optimal" if outcome["status"] == "optimal" else "feasible"
    result.message = (f"GPU-hours and storage bought with the placement fixed ({result.policy}); the judge "
                      "finds every target met on the sized instance")
    return result


def _purchase_arrays(regions: list[str], types: list[str], purchases: Sequence[Purchase]):
    gpu_price = np.zeros((len(regions), len(types)))
    gpu_cap = np.zeros((len(regions), len(types)))
    storage_price = np.zeros(len(regions))
    storage_cap = np.zeros(len(regions))
    for item in purchases:
        region, slash, what = item.name.partition("/")
        if not slash:
            raise InstanceError("--buy", f"'{item.name}': name a region and what to buy there: REGION/GPU_TYPE "
                                         f"or REGION/{STORAGE} (*/TYPE for every region)")
        chosen = range(len(regions)) if region == "*" else [_index(regions, region, "region")]
        price = 1.0 if item.price is None else item.price
        cap = math.inf if item.maximum is None else item.maximum
        for r in chosen:
            if what == STORAGE:
                storage_price[r], storage_cap[r] = price, cap
            else:
                t = _index(types, what, "GPU type")
                gpu_price[r, t], gpu_cap[r, t] = price, cap
    return gpu_price, gpu_cap, storage_price, storage_cap


def _index(names: list[str], name: str, what: str) -> int:
    if name not in names:
        raise InstanceError("--buy", f"unknown {what} '{name}' (known: {', '.join(names[:12])}"
                                     f"{' ...' if len(names) > 12 else ''})")
    return names.index(name)


def placement_sizing_lp(arrays: Any, targets: Sequence[Target], demand: np.ndarray, stored: np.ndarray,
                        gpu_price: np.ndarray, gpu_cap: np.ndarray, storage_price: np.ndarray,
                        storage_cap: np.ndarray, budget: float | None) -> LinearProgram:
    n_r, n_t = demand.shape
    n_gpu = n_r * n_t
    supply = arrays.gpu_supply
    # columns: a (regions x types), b (regions), u (regions x types), o (regions)
    n = 2 * n_gpu + 2 * n_r
    a = np.arange(n_gpu).reshape(n_r, n_t)
    b = n_gpu + np.arange(n_r)
    u = n_gpu + n_r + np.arange(n_gpu).reshape(n_r, n_t)
    o = 2 * n_gpu + n_r + np.arange(n_r)
    rows, cols, vals, lower, upper = [], [], [], [], []

    def row(entries: list[tuple[int, float]], low: float, high: float) -> None:
        index = len(lower)
        for col, val in entries:
            rows.append(index)
            cols.append(col)
            vals.append(val)
        lower.append(low)
        upper.append(high)

    opened: list[tuple[int, int, float]] = []  # (region, type, D/v) cells a purchase would open
    for target in targets:
        if target.metric == "hp_demand_supply_max":
            for r in range(n_r):
                need = demand[r].sum() / target.value - supply[r].sum()
                if demand[r].sum() > 0 and need > 0:
                    row([(int(a[r, t]), 1.0) for t in range(n_t)], need, INF)
        elif target.metric == "hp_demand_supply_max_per_type":
            # Each (region, type) with supply on its own: no A100 GPU-hour serves H100 demand.
            for r, t in zip(*np.nonzero(demand > 0), strict=True):
                if supply[r, t] > 0 and demand[r, t] / target.value > supply[r, t]:
                    row([(int(a[r, t]), 1.0)], demand[r, t] / target.value - supply[r, t], INF)
                elif supply[r, t] <= 0 and gpu_cap[r, t] > 0:
                    # The judge counts a type only where it has supply: bought at all, enough.
                    opened.append((int(r), int(t), float(demand[r, t] / target.value)))
        elif target.metric == "hp_gpu_hours_unserved":
            for r in range(n_r):
                for t in range(n_t):
                    # u + a >= D - S
                    row([(int(u[r, t]), 1.0), (int(a[r, t]), 1.0)], demand[r, t] - supply[r, t], INF)
            row([(int(col), 1.0) for col in u.ravel()], -INF, max(target.value, 0.0))
        elif target.metric == "storage_over_capacity_bytes":
            for r in range(n_r):
                row([(int(o[r]), 1.0), (int(b[r]), 1.0)], stored[r] - arrays.storage_capacity[r], INF)
            row([(int(col), 1.0) for col in o], -INF, max(target.value, 0.0))
    z = n + np.arange(len(opened))
    n += len(opened)
    for (r, t, need), column in zip(opened, z, strict=True):
        # a <= M z: no target needs more than all the demand there is
        most = float(min(gpu_cap[r, t], max(need, demand.sum())))
        row([(int(a[r, t]), 1.0), (int(column), -most)], -INF, 0.0)
        row([(int(a[r, t]), 1.0), (int(column), -need)], 0.0, INF)  # a >= (D / v) z
    cost = np.zeros(n)
    cost[a.ravel()] = gpu_price.ravel()
    cost[b] = storage_price
    if budget is not None:
        row([(int(col), float(cost[col])) for col in range(n) if cost[col] > 0], -INF, budget)
    col_upper = np.full(n, INF)
    col_upper[a.ravel()] = gpu_cap.ravel()
    col_upper[b] = storage_cap
    col_upper[z] = 1.0
    integrality = np.zeros(n, dtype=int)
    integrality[z] = 1
    matrix = sp.csr_matrix((vals, (rows, cols)), shape=(len(lower), n))
    lp = LinearProgram(cost=cost, matrix=matrix, row_lower=np.array(lower, dtype=float),
                       row_upper=np.array(upper, dtype=float), col_lower=np.zeros(n), col_upper=col_upper, sense="min",
                       integrality=integrality)
    lp.check()
    return lp


def sized_instance(instance: Any, gpu_add: np.ndarray, storage_add: np.ndarray) -> Any:
    """``instance`` with the GPU-hours and storage added (a new, validated instance)."""
    from fleetplan.instances import instance_from_data

    arrays = instance.arrays()
    data = instance.model_dump()
    index = {name: r for r, name in enumerate(arrays.region_ids)}
    for region in data["regions"]:
        r = index[region["id"]]
        for t, name in enumerate(arrays.gpu_types):
            if gpu_add[r, t] > 0:
                region["gpu_supply"][name] = region["gpu_supply"].get(name, 0.0) + float(gpu_add[r, t])
        region["storage_capacity_bytes"] = float(region["storage_capacity_bytes"] + storage_add[r])
    data["name"] = f"{instance.name}-sized" if instance.name else "sized"
    return instance_from_data(data)


def _infeasible_cause(targets: Sequence[Target], demand: np.ndarray, arrays: Any, gpu_cap: np.ndarray,
                      storage_cap: np.ndarray, budget: float | None) -> str:
    text = ", ".join(str(t) for t in targets)
    if budget is not None:
        return f"no purchase within the budget {budget:g} and the MAXes meets {text}"
    short = [arrays.region_ids[r] for r in range(demand.shape[0]) if demand[r].sum() > 0 and not np.any(gpu_cap[r] > 0)]
    where = f"; regions with high-priority demand and nothing to buy: {', '.join(short[:6])}" if short else ""
    return f"no purchase within the MAXes meets {text}{where}"
