"""``offline-patterns``: with every arrival known, a plan and an upper bound that respects each
node's own CPU, memory and GPUs, at the trace's scale (the node-pattern model of
:mod:`fleetplan.models.gpushare.patterns`; HiGHS).

* **Bound** — column generation on the master program's linear relaxation: each round solves
  it over the patterns found so far, and for every node class the pricing program finds the
  pattern of the highest reduced value under the shapes' dual prices ``pi``. Whatever ``pi >=
  0``, ``sum_s pi_s arrived_s + sum_k nodes_k max(0, best_k(pi))`` bounds every plan (a
  Lagrangian value of the program: ``best_k`` is the pricing program's proven bound), so the
  bound reported is the least of these, valid even when the rounds stop at the time limit.
* **Plan** — the master program in integers over the patterns found (HiGHS, started from the
  patterns of two greedy plans, so never below them), each chosen pattern packed GPU by GPU on
  a node of its class; the GPU tasks left over are placed largest first by FGD with BestFit
  ties, then the CPU tasks in arrival order where CPU and memory remain. The plan goes through
  the kind's judge like every other.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 6, "tasks": 80}, seed=1)
>>> result = fleetplan.solve(instance, "offline-patterns")
>>> result.evaluation.feasible, result.bound >= result.objective >= fleetplan.solve(instance, "fgd").objective
(True, True)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fleetplan.instances.gpushare import GpushareInstance, GpusharePlan
from fleetplan.instances.gpushare.fragmentation import instance_mix
from fleetplan.models.gpushare.patterns import (
    PatternClasses,
    master_program,
    pack_pattern,
    packing_pricing_program,
    pattern_classes,
    pricing_program,
    read_packing,
)
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.gpushare.engine import ClusterState, place_in_order, task_shapes
from fleetplan.solvers.gpushare.online.fgd import FGD

# A pattern enters the master when its reduced value exceeds this (GPU milli).
ENTER = 1e-6
# Share of the time limit the bound's rounds may take; the plan's integer program has the rest.
BOUND_SHARE = 0.6


@dataclass
class PatternBound:
    """What the rounds found: ``bound_milli`` (no plan allocates more), ``relaxation_milli``
    (the last master relaxation), the patterns (``pattern_class`` (P,), ``counts`` (S, P)),
    rounds, and whether the rounds converged (no pattern left to add: the bound is then the
    relaxation's optimum)."""

    bound_milli: float
    relaxation_milli: float
    pattern_class: np.ndarray
    counts: np.ndarray
    rounds: int
    converged: bool
    wall_s: float
    log: list[str] = field(default_factory=list)
    packings: dict[int, list] = field(default_factory=dict)


def _solve(lp, time_limit: float | None):
    from fleetplan.solvers.highs import new_highs, pass_lp, run

    highs = new_highs(time_limit, 1, 0)
    pass_lp(highs, lp, "simplex")
    outcome = run(highs)
    return highs, outcome


def plan_patterns(classes: PatternClasses, task_node: np.ndarray, task_shape: np.ndarray,
                  node_class: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct patterns of a plan's nodes (its GPU tasks per shape on each node), as
    (pattern_class, counts), and how many nodes hold each."""
    S, N = len(classes.shape_count), len(node_class)
    per_node = np.zeros((N, S), dtype=np.int64)
    placed = (task_node >= 0) & (task_shape >= 0)
    np.add.at(per_node, (task_node[placed], task_shape[placed]), 1)
    keys = np.column_stack([node_class, per_node])
    distinct, uses = np.unique(keys, axis=0, return_counts=True)
    used = distinct[:, 1:].sum(axis=1) > 0
    return distinct[used, 0], distinct[used, 1:].T.copy(), uses[used]


def pattern_bound(classes: PatternClasses, start_class: np.ndarray, start_counts: np.ndarray, *,
                  deadline: Deadline, progress: Progress | None = None, pricing: str = "packed",
                  pricing_limit: float = 10.0) -> PatternBound:
    """Column generation from the patterns given (module docstring, "Bound"). ``pricing``:
    "packed" prices patterns GPU by GPU (:func:`packing_pricing_program`, each within
    ``pricing_limit`` seconds, its proven bound counting when cut short), "relaxed" with the
    cardinality cuts only (:func:`pricing_program`: faster, a looser bound)."""
    from fleetplan.solvers.highs import new_highs, pass_lp, run

    started = time.perf_counter()
    c = classes
    S, K = len(c.shape_count), len(c.node_count)
    # every shape alone on every class it fits: the master has a column for each row from the start
    single_s, single_k = np.nonzero(c.fits)
    singles = np.zeros((S, single_s.size), dtype=np.int64)
    singles[single_s, np.arange(single_s.size)] = 1
    pattern_class = np.concatenate([start_class, single_k]).astype(np.int64)
    counts = np.hstack([start_counts, singles]) if S else np.zeros((0, pattern_class.size), dtype=np.int64)
    # The trivial bounds: every GPU task placed, or every GPU of a class some task fits full.
    usable = c.fits.any(axis=0) if S else np.zeros(K, dtype=bool)
    best = min(float(c.value @ c.shape_count), 1000.0 * float((c.node_count * c.node_gpus)[usable].sum()))
    relaxation, rounds, converged, log = 0.0, 0, False, []
    packings: dict[int, list] = {}
    while True:
        rounds += 1
        _, master = _solve(master_program(c, pattern_class, counts), deadline.remaining())
        if master.row_duals is None or master.objective is None:
            log.append(f"round {rounds}: the master gave no duals ({master.status}); stopping")
            break
        relaxation = master.objective
        pi = np.maximum(master.row_duals[:S], 0.0)
        mu = np.maximum(master.row_duals[S:], 0.0)
        profit = c.value - pi
        lagrangian = float(pi @ c.shape_count)
        new_class, new_counts = [], []
        for k in range(K):
            if pricing == "packed":
                lp, col_shape, col_gpu, is_u = packing_pricing_program(c, k, profit)
                shapes = col_shape[col_shape >= 0]
            else:
                lp, shapes = pricing_program(c, k, profit)
            if shapes.size == 0:
                continue
            remaining = deadline.remaining()
            highs = new_highs(pricing_limit if remaining is None else min(pricing_limit, max(remaining, 0.01)), 1, 0)
            pass_lp(highs, lp, "simplex")
            outcome = run(highs)
            dual = float(highs.getInfo().mip_dual_bound)
            if not math.isfinite(dual):  # no proven bound on the pricing: the LP's columns at their bounds
                dual = float(np.maximum(lp.cost, 0) @ lp.col_upper)
            if outcome.objective is not None:
                dual = max(dual, outcome.objective)
            lagrangian += float(c.node_count[k]) * max(0.0, dual)
            if outcome.values is not None and outcome.objective is not None and outcome.objective > mu[k] + ENTER:
                if pricing == "packed":
                    column, packed = read_packing(c, k, outcome.values, col_shape, col_gpu, is_u)
                    packings[len(pattern_class) + len(new_class)] = packed
                else:
                    column = np.zeros(S, dtype=np.int64)
                    column[shapes] = np.rint(outcome.values).astype(np.int64)
                new_class.append(k), new_counts.append(column)
        best = min(best, lagrangian)
        log.append(f"round {rounds}: relaxation {relaxation:.0f}, Lagrangian bound {lagrangian:.0f}, "
                   f"{len(new_class)} new patterns")
        if progress is not None:
            progress(min(0.9, rounds / 200), f"bound round {rounds}: {best:.0f} milli")
        if not new_class:
            converged = True
            best = min(best, relaxation)  # no improving pattern: the relaxation's optimum is proven
            break
        pattern_class = np.concatenate([pattern_class, new_class])
        counts = np.hstack([counts, np.column_stack(new_counts)])
        if deadline.expired():
            log.append(f"round {rounds}: time limit")
            break
    return PatternBound(bound_milli=max(best, relaxation), relaxation_milli=relaxation, pattern_class=pattern_class,
                        counts=counts, rounds=rounds, converged=converged, wall_s=time.perf_counter() - started,
                        log=log, packings=packings)


def _trim(packed: list[tuple[int, list[int]]], count: np.ndarray) -> list[tuple[int, list[int]]]:
    """The first ``count[s]`` tasks of each shape of a packing (fewer tasks still fit)."""
    kept, seen = [], np.zeros_like(count)
    for s, gpus in packed:
        if seen[s] < count[s]:
            kept.append((s, gpus))
            seen[s] += 1
    return kept


def dive(classes: PatternClasses, pattern_class: np.ndarray, counts: np.ndarray, deadline: Deadline,
         packings: dict[int, list] | None = None) -> tuple[list[tuple[int, np.ndarray, list, int]], list[str]]:
    """Round the master's relaxation to whole nodes: solve it over what is left (tasks per shape,
    nodes per class), commit ``floor(lambda)`` copies of every pattern at 1 or more (together they
    stay within what is left), or one copy of the largest when none is, trimmed to the tasks
    left; repeat. Patterns not packable GPU by GPU are dropped. The committed (class, counts,
    packing, copies) and a log line."""
    c = classes
    S = len(c.shape_count)
    shape_left = c.shape_count.astype(np.int64).copy()
    nodes_left = c.node_count.astype(np.int64).copy()
    banned = np.zeros(len(pattern_class), dtype=bool)
    packings = packings or {}
    committed: list[tuple[int, np.ndarray, list, int]] = []
    solves = 0

    def commit(p: int, count: np.ndarray, copies: int) -> bool:
        k = int(pattern_class[p])
        used = count > 0
        # the relaxation's values carry the solver's tolerance: never past what is left
        copies = min(copies, int(nodes_left[k]), int((shape_left[used] // count[used]).min(initial=copies)))
        if copies <= 0 or not used.any():
            return False
        packed = pack_pattern(c, k, count)
        if packed is None and p in packings:
            packed = _trim(packings[p], count)
        if packed is None:
            return False
        committed.append((k, count, packed, copies))
        shape_left[:] -= copies * count
        nodes_left[k] -= copies
        return True

    while nodes_left.sum() > 0 and shape_left.sum() > 0 and not deadline.expired():
        lp = master_program(c, pattern_class, counts)
        lp.row_upper = np.concatenate([shape_left, nodes_left]).astype(float)
        lp.col_upper = np.where(banned, 0, nodes_left[pattern_class]).astype(float)
        _, outcome = _solve(lp, deadline.remaining())
        solves += 1
        if outcome.values is None or (outcome.objective or 0.0) < 0.5:
            break
        lam = outcome.values
        whole = np.flatnonzero(lam >= 1 - 1e-6)
        progressed = False
        for p in whole.tolist():
            copies = int(np.floor(lam[p] + 1e-6))
            progressed |= commit(p, counts[:, p].copy(), copies)
        if not progressed:
            p = int(np.argmax(np.where(banned, -1.0, lam)))
            count = np.minimum(counts[:, p], shape_left)
            if not commit(p, count, 1):
                banned[p] = True
    placed = sum(copies * float(c.value @ count) for _, count, _, copies in committed)
    return committed, [f"rounding: {solves} relaxations, {sum(x[3] for x in committed)} nodes, "
                       f"{placed:.0f} GPU milli; {int(banned.sum())} patterns not packable GPU by GPU" if S else
                       "rounding: no GPU task"]


def _greedy(instance: GpushareInstance, order: np.ndarray | None, seed: int):
    state = ClusterState(instance.arrays(), instance_mix(instance))
    return place_in_order(state, FGD(ties="best-fit"), seed=seed, order=order)


def _greedy_starts(instance: GpushareInstance, classes: PatternClasses, seed: int):
    """Two greedy plans — FGD (BestFit ties) in arrival order and largest GPU demand first — and
    their patterns: (plans, pattern classes, pattern counts, each plan's GPU milli)."""
    a = instance.arrays()
    task_shape = np.full(a.num_tasks, -1, dtype=np.int64)
    for s, rows in enumerate(classes.task_rows):
        task_shape[rows] = s
    node_class = np.empty(a.num_nodes, dtype=np.int64)
    for k, rows in enumerate(classes.node_rows):
        node_class[rows] = k
    greedy = [_greedy(instance, None, seed),
              _greedy(instance, np.argsort(-a.task_gpu_milli_total, kind="stable"), seed)]
    starts = [plan_patterns(classes, g.task_node, task_shape, node_class) for g in greedy]
    return (greedy, np.concatenate([s[0] for s in starts]), np.hstack([s[1] for s in starts]),
            [float(classes.value @ s[1] @ s[2]) for s in starts])


def placeable_milli(instance: GpushareInstance, *, time_limit: float | None = None, seed: int = 0) -> PatternBound:
    """An upper bound on the GPU milli any placement of ``instance``'s tasks on its nodes
    allocates, each node's CPU, memory and GPUs respected (the column generation of
    :func:`pattern_bound` from two greedy plans' patterns; valid when cut short by
    ``time_limit``: its ``bound_milli``).

    >>> import fleetplan
    >>> instance = fleetplan.generate("gpushare", {"nodes": 3, "tasks": 30}, seed=2)
    >>> found = placeable_milli(instance)
    >>> found.bound_milli >= fleetplan.solve(instance, "offline-patterns").objective
    True
    """
    classes = pattern_classes(instance)
    _, start_class, start_counts, _ = _greedy_starts(instance, classes, seed)
    return pattern_bound(classes, start_class, start_counts, deadline=Deadline(time_limit))


@register("gpushare", "offline-patterns", exact=False,
          description="every arrival known: node patterns by column generation (HiGHS) give an upper bound that "
                      "respects each node's CPU, memory and GPUs, and their integer choice a plan",
          reference="fleetplan; configuration LP (Gilmore and Gomory 1961) for the question of Weng, Yang et al., "
                    "USENIX ATC 2023, asked offline")
def offline_patterns(instance: GpushareInstance, *, time_limit: float | None = None, seed: int = 0, threads: int = 1,
                     progress: Progress, pricing: Literal["packed", "relaxed"] = "packed") -> SolveResult:
    """A plan and a per-node upper bound with every arrival known (module docstring).

    Parameters
    ----------
    pricing : str
        how a node's patterns are priced: packed (GPU by GPU, exact) or relaxed (CPU, memory,
        GPU milli and cardinality cuts only: faster, a looser bound)
    """
    deadline = Deadline(time_limit)
    a = instance.arrays()
    classes = pattern_classes(instance)
    greedy, start_class, start_counts, start_value = _greedy_starts(instance, classes, seed)
    bound_deadline = Deadline(None if time_limit is None else BOUND_SHARE * time_limit)
    found = pattern_bound(classes, start_class, start_counts, deadline=bound_deadline, progress=progress,
                          pricing=pricing)
    progress(0.9, "plan: rounding the master's relaxation")
    committed, dive_log = dive(classes, found.pattern_class, found.counts, deadline, found.packings)
    # realise: each committed pattern on a node of its class, its tasks from the shapes' queues
    state = ClusterState(a, instance_mix(instance))
    task_node = np.full(a.num_tasks, -1, dtype=np.int64)
    task_gpus: list[list[int]] = [[] for _ in range(a.num_tasks)]
    queue = [list(rows.tolist()) for rows in classes.task_rows]
    free_nodes = [list(rows.tolist()) for rows in classes.node_rows]
    shape_of, shapes = task_shapes(a)
    for k, _, packed, copies in committed:
        for _ in range(copies):
            node = free_nodes[k].pop(0)
            for s, gpus in packed:
                j = queue[s].pop(0)
                state.bind(node, gpus, shapes[shape_of[j]])
                task_node[j], task_gpus[j] = node, gpus
    dived = float(state.allocated_milli)
    # the GPU tasks left, largest first, then the CPU tasks in arrival order
    left_gpu = np.array([j for q in queue for j in q], dtype=np.int64)
    left_gpu = left_gpu[np.argsort(-a.task_gpu_milli_total[left_gpu], kind="stable")]
    cpu_tasks = np.flatnonzero(a.task_num_gpu == 0)
    rest = place_in_order(state, FGD(ties="best-fit"), seed=seed, order=np.concatenate([left_gpu, cpu_tasks]))
    for j in np.flatnonzero(rest.task_node >= 0).tolist():
        task_node[j], task_gpus[j] = rest.task_node[j], rest.task_gpus[j]
    objective = float(state.allocated_milli)
    better = int(np.argmax(start_value))
    greedy_milli = max(start_value)
    if greedy_milli > objective:  # the rounding lost to a greedy plan: keep that one
        task_node, task_gpus, objective = greedy[better].task_node, greedy[better].task_gpus, greedy_milli
    plan = GpusharePlan.from_arrays(instance, task_node, task_gpus)
    bound = found.bound_milli
    proven = objective >= math.floor(bound + 1e-6)
    message = (f"offline-patterns: {objective:.0f} GPU milli placed; no plan places more than {bound:.0f} "
               f"(node patterns, {found.rounds} rounds, {found.counts.shape[1]} patterns"
               f"{', converged' if found.converged else ', stopped at the time limit'})")
    stats = {"pattern_rounds": float(found.rounds), "patterns": float(found.counts.shape[1]),
             "bound_s": found.wall_s, "relaxation_milli": found.relaxation_milli,
             "greedy_milli": greedy_milli, "rounded_milli": dived}
    return SolveResult(status="optimal" if proven else ("time_limit" if deadline.expired() else "feasible"),
                       plan=plan, bound=bound, model_objective=objective, message=message,
                       log=[*found.log, *dive_log, message], stats=stats)


__all__ = ["PatternBound", "offline_patterns", "pattern_bound", "placeable_milli", "plan_patterns"]
