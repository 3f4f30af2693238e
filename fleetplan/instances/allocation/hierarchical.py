"""The judge of Gavel's water-filling policies: hierarchical (§4.3) and single-level (§4.1 + §4.3).

This module defines the policies — independently of any solver — as the instances layer must:

* :func:`hierarchical_job_weights` — how an entity's weight is split among its jobs (§4.3):
  *fairness* entities share it in proportion to the jobs' own weights, *FIFO* entities give all
  of it to their earliest job; jobs already bottlenecked get 0 and their share is redistributed
  among the entity's other jobs. A job without an entity is an entity of its own (its weight,
  fairness).
* the objectives, added to the allocation judge by :func:`with_water_filling_policies`:
  ``hierarchical`` — ``min_m score[m] / w0[m]`` over jobs with a positive initial weight ``w0``
  (the quantity the first water-filling iteration maximizes; later iterations never lower a job);
  ``max_min_fairness_water_filling`` — ``min_m score[m] / weight[m]`` (§4.1 with scale factors).
  ``score[m] = throughput(m, X) / throughput(m, X_equal) * scale_factor[m]``.
* :func:`bottlenecked_jobs` — which jobs cannot rise without another falling (an LP check with
  HiGHS), and from it the metrics ``bottlenecked_fraction`` and
  ``pareto_efficient`` (every job bottlenecked: the allocation is Pareto-efficient, §4.4).

Example
-------
>>> import numpy as np
>>> from fleetplan.instances.allocation import AllocationInstance
>>> instance = AllocationInstance.model_validate({"kind": "allocation",
...     "worker_types": [{"name": "gpu", "count": 4}],
...     "entities": [{"id": "a", "weight": 3}, {"id": "b"}],
...     "jobs": [{"id": f"j{i}", "throughput": {"gpu": 1.0}, "entity": "ab"[i > 0]}
...              for i in range(4)]})
>>> hierarchical_job_weights(instance).round(3).tolist()
[3.0, 0.333, 0.333, 0.333]
>>> bottlenecked_jobs(instance, np.ones((4, 1))).tolist()
[True, True, True, True]
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fleetplan.instances.base import Evaluation, InstanceError
from fleetplan.lazy import lazy_module

highspy = lazy_module("highspy")

HIERARCHICAL = "hierarchical"
WATER_FILLING = "max_min_fairness_water_filling"

# A job "can rise" when some allocation lifts its score by more than this (relative to the
# largest score, at least 1e-6 absolute) while every other job keeps its score.
RISE_TOLERANCE = 1e-6
# Each job's trial rise is capped (score units, relative to the largest score) so that the
# one LP spreads the spare capacity over many jobs instead of pouring it into one.
RISE_CAP = 1e-3
# A witness from the first-order method counts when it satisfies every row and bound within this
# (HiGHS's default primal feasibility tolerance, which the simplex witness meets).
WITNESS_TOLERANCE = 1e-7
# Rounds with at least this many cells try the first-order method first (below it simplex is
# fast anyway).
FIRST_ORDER_CELLS = 20_000
# PDLP's effort before simplex takes over (an iteration count, not a time, so that what is tried
# does not depend on the machine): it answered the isolated allocation of 16,384 distinct jobs
# in 40 iterations, and had not converged after 2,000 on a water-filled plan of 8,192 (all
# bottlenecked, where 2,000 iterations cost 2.4 s against simplex's 4.5 s).
PDLP_ITERATIONS = 400


@dataclass(frozen=True)
class EntityView:
    """Jobs grouped by entity: ``entity_of[m]``, and per entity its weight and policy."""

    entity_of: np.ndarray  # (jobs,) int
    weight: np.ndarray  # (entities,)
    fifo: np.ndarray  # (entities,) bool
    order: np.ndarray  # (jobs,) FIFO rank: by arrival time, then by position in the file
    # (jobs,) each job's own weight, read once: water filling asks for the weights after every
    # cap event (650 calls on 2,048 jobs, half at weight 8), and reading them from the job
    # objects each time was half of those calls' time.
    job_weight: np.ndarray


def entity_view(instance) -> EntityView:
    """Entities of ``instance``; a job without an entity forms its own (its weight, fairness)."""
    index = {entity.id: e for e, entity in enumerate(instance.entities)}
    weight = [entity.weight for entity in instance.entities]
    fifo = [entity.policy == "fifo" for entity in instance.entities]
    entity_of = np.empty(len(instance.jobs), dtype=np.int64)
    for m, job in enumerate(instance.jobs):
        if job.entity is None:
            entity_of[m] = len(weight)
            weight.append(job.weight)
            fifo.append(False)
        else:
            entity_of[m] = index[job.entity]
    arrival = np.array([job.arrival_time for job in instance.jobs], dtype=float)
    order = np.empty(len(arrival), dtype=np.int64)
    order[np.lexsort((np.arange(len(arrival)), arrival))] = np.arange(len(arrival))
    job_weight = np.array([job.weight for job in instance.jobs], dtype=float)
    return EntityView(entity_of, np.asarray(weight, dtype=float), np.asarray(fifo, dtype=bool), order, job_weight)


def hierarchical_job_weights(instance, bottlenecked: np.ndarray | None = None,
                             view: EntityView | None = None) -> np.ndarray:
    """Per-job weights of the hierarchical policy given which jobs are already bottlenecked.

    Fairness entity ``e``: ``w_e * weight[m] / sum(weight of e's unbottlenecked jobs)``;
    FIFO entity: ``w_e`` to its earliest unbottlenecked job, 0 to the rest; bottlenecked: 0.
    """
    view = view or entity_view(instance)
    n_jobs = len(view.entity_of)
    done = np.zeros(n_jobs, dtype=bool) if bottlenecked is None else np.asarray(bottlenecked, dtype=bool)
    live_weight = np.where(done, 0.0, view.job_weight)
    total = np.bincount(view.entity_of, weights=live_weight, minlength=len(view.weight))
    share = np.divide(view.weight[view.entity_of] * live_weight, total[view.entity_of],
                      out=np.zeros(n_jobs), where=total[view.entity_of] > 0)
    fifo_job = view.fifo[view.entity_of]
    if fifo_job.any():
        # The head of each FIFO entity: its live job of smallest rank.
        rank = np.where(done | ~fifo_job, np.iinfo(np.int64).max, view.order)
        head_rank = np.full(len(view.weight), np.iinfo(np.int64).max)
        np.minimum.at(head_rank, view.entity_of, rank)
        is_head = fifo_job & ~done & (rank == head_rank[view.entity_of])
        share = np.where(fifo_job, np.where(is_head, view.weight[view.entity_of], 0.0), share)
    return share


def job_scores(instance, matrix: np.ndarray) -> np.ndarray:
    """score[m] = throughput(m, X) / throughput(m, X_equal) * scale_factor[m] (Gavel §4.1)."""
    arrays = instance.arrays()
    share = arrays.num_workers / arrays.num_workers.sum()
    equal = arrays.throughput @ share
    return (arrays.throughput * matrix).sum(axis=1) / equal * arrays.scale_factor


def hierarchical_objective(instance, matrix: np.ndarray) -> dict[str, float]:
    """min over jobs with a positive initial hierarchical weight of score / weight."""
    weights = hierarchical_job_weights(instance)
    scores = job_scores(instance, matrix)
    positive = weights > 0
    return {"min_hierarchical_weighted_score": float((scores[positive] / weights[positive]).min())}


def water_filling_objective(instance, matrix: np.ndarray) -> dict[str, float]:
    """min over jobs of score / weight (weighted max-min fairness with scale factors, §4.1)."""
    weights = instance.arrays().weight
    return {"min_weighted_normalized_throughput": float((job_scores(instance, matrix) / weights).min())}


def bottlenecked_jobs(instance, matrix: np.ndarray, *, tolerance: float = RISE_TOLERANCE,
                      max_rounds: int = 1000) -> np.ndarray:
    """Which jobs cannot raise their score without another job's score falling.

    Job m is free when the LP ``max score[m]`` subject to ``score >= score(X)`` (every job) and
    Gavel's constraints (§3.1 eqs. 1-3) exceeds ``score(X)[m]`` by more than the tolerance. One
    LP per job is too many: each round solves one LP maximizing the sum of capped rises
    ``d[m]`` of the undecided jobs; a job with ``d[m] > tol`` is free (the solution is the
    witness). The rounds stop when the best sum is below the tolerance, which proves every
    undecided job bottlenecked (any single job's rise would be a better sum).

    Large rounds try HiGHS's first-order method first and keep its answer only where it is
    checked here (a witness within the simplex's feasibility tolerance, or a weak-duality bound;
    :func:`_first_order_round`); otherwise simplex answers the round.

    Worker overuse within the judge's feasibility tolerance is forgiven by scaling the plan
    down to feasibility first, so the LP always has the plan itself as a feasible point.
    Identical jobs (same throughputs, scale factor and score) share variables: averaging a
    solution over their permutations keeps it feasible, so the aggregation is exact; a class's
    rise is counted as the sum over its members.
    """
    arrays = instance.arrays()
    matrix = _feasible_part(arrays, np.clip(np.asarray(matrix, dtype=float), 0.0, 1.0))
    share = arrays.num_workers / arrays.num_workers.sum()
    a = arrays.throughput * (arrays.scale_factor / (arrays.throughput @ share))[:, None]
    runnable = (arrays.throughput > 0) & (arrays.num_workers[None, :] >= arrays.scale_factor[:, None])
    a = np.where(runnable, a, 0.0)
    floor = (a * matrix).sum(axis=1)
    keys = np.column_stack([a, arrays.scale_factor, floor])
    _, first, class_of, count = np.unique(keys, axis=0, return_index=True, return_inverse=True,
                                          return_counts=True)
    class_of = class_of.reshape(-1)
    a_c, sf_c, floor_c, k_c = a[first], arrays.scale_factor[first], floor[first], count.astype(float)
    n_classes, n_types = a_c.shape
    cls, typ = np.nonzero(a_c > 0)
    n_cells = len(cls)
    scale = max(1.0, float(floor_c.max()))
    tol = tolerance * scale
    free = np.zeros(n_classes, dtype=bool)
    undecided = np.ones(n_classes, dtype=bool)
    cell_cols = np.arange(n_cells)
    # Rows: scores (>= floor, written as -score <= -floor), job time (<= 1), workers (<= n_j).
    base_rows = np.concatenate([cls, n_classes + cls, 2 * n_classes + typ])
    base_cols = np.concatenate([cell_cols, cell_cols, cell_cols])
    base_vals = np.concatenate([-a_c[cls, typ], np.ones(n_cells), k_c[cls] * sf_c[cls]])
    rhs = np.concatenate([-floor_c, np.ones(n_classes), arrays.num_workers])
    for _ in range(max_rounds):
        test = np.flatnonzero(undecided)
        if len(test) == 0:
            break
        d_cols = n_cells + np.arange(len(test))
        rows = np.concatenate([base_rows, test])
        cols = np.concatenate([base_cols, d_cols])
        vals = np.concatenate([base_vals, 1.0 / k_c[test]])  # class rise = k * member rise
        upper = np.concatenate([np.ones(n_cells), RISE_CAP * scale * k_c[test]])
        checked = _first_order_round(rows, cols, vals, rhs, upper, n_cells, tol) if n_cells >= FIRST_ORDER_CELLS else None
        if checked is not None:
            rise, best = checked
        else:
            x, best = _max_total_rise(rows, cols, vals, rhs, upper, n_cells)
            rise = x[n_cells:]
        if best <= tol:
            break
        found = test[rise > tol]
        if len(found) == 0:  # the sum exceeds tol only through many sub-tolerance rises
            break
        free[found] = True
        undecided[found] = False
    return ~free[class_of]


def _first_order_round(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, rhs: np.ndarray,
                       upper: np.ndarray, n_cells: int, tol: float) -> tuple[np.ndarray, float] | None:
    """One round of :func:`bottlenecked_jobs` answered by HiGHS's first-order method (PDLP),
    only where its answer is checked here: (the rises ``d``, the best sum) or None.

    PDLP solves the first round at 16,384 distinct jobs several times faster than simplex (the
    times: benchmarks/results/reliability.md, "Time limits"), but its tolerances are looser, so
    nothing is taken on trust:

    * rises count only from a solution that satisfies every row and bound within
      :data:`WITNESS_TOLERANCE` (HiGHS's default primal feasibility tolerance, the one the
      simplex answer is held to) — the witness the simplex round would give;
    * a sum of rises at most ``tol`` counts only when a weak-duality bound proves it: for any
      ``lam >= 0``, ``max c'y s.t. Ay <= b, 0 <= y <= u`` is at most
      ``b'lam + sum(u * max(0, c - A'lam))``, computed here from PDLP's row duals.

    Anything else (no witness rise, an unproven small sum, no answer within
    :data:`PDLP_ITERATIONS`) returns None: simplex decides."""
    n_rows, n_cols = len(rhs), len(upper)
    highs = _highs_model(rows, cols, vals, rhs, upper, n_cells)
    highs.setOptionValue("solver", "pdlp")
    highs.setOptionValue("pdlp_iteration_limit", PDLP_ITERATIONS)
    highs.run()
    solution = highs.getSolution()
    if not solution.value_valid:
        return None
    y = np.asarray(solution.col_value, dtype=float)
    used = np.bincount(rows, weights=vals * y[cols], minlength=n_rows)
    if (used > rhs + WITNESS_TOLERANCE).any() or (y < -WITNESS_TOLERANCE).any() or (y > upper + WITNESS_TOLERANCE).any():
        return None
    rise = y[n_cells:]
    if (rise > tol).any():
        return rise, float(rise.sum())
    if not solution.dual_valid:
        return None
    cost = np.concatenate([np.zeros(n_cells), np.ones(n_cols - n_cells)])
    dual = np.asarray(solution.row_dual, dtype=float)
    for lam in (np.maximum(dual, 0.0), np.maximum(-dual, 0.0)):
        reduced = cost - np.bincount(cols, weights=vals * lam[rows], minlength=n_cols)
        terms = np.concatenate([rhs * lam, upper * np.maximum(reduced, 0.0)])
        # The bound's own rounding is far below 1e-12 of the terms' magnitude.
        if terms.sum() + 1e-12 * np.abs(terms).sum() <= tol:
            return rise, float(terms.sum())
    return None


def _highs_model(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, rhs: np.ndarray,
                 upper: np.ndarray, n_cells: int):
    """A ``highspy.Highs`` holding ``max sum(y[n_cells:])`` s.t. ``A y <= rhs``, ``0 <= y <= upper``."""
    n_rows, n_cols = len(rhs), len(upper)
    order = np.lexsort((rows, cols))  # column-wise, as HiGHS takes it
    model = highspy.HighsLp()
    model.num_col_, model.num_row_ = n_cols, n_rows
    model.col_cost_ = np.concatenate([np.zeros(n_cells), np.ones(n_cols - n_cells)])
    model.col_lower_ = np.zeros(n_cols)
    model.col_upper_ = np.asarray(upper, dtype=float)
    model.row_lower_ = np.full(n_rows, -highspy.kHighsInf)
    model.row_upper_ = np.asarray(rhs, dtype=float)
    model.sense_ = highspy.ObjSense.kMaximize
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = np.searchsorted(cols[order], np.arange(n_cols + 1)).astype(np.int32)
    model.a_matrix_.index_ = rows[order].astype(np.int32)
    model.a_matrix_.value_ = vals[order].astype(float)
    from fleetplan.highs_pool import use_threads

    use_threads(1)
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("threads", 1)
    highs.passModel(model)
    return highs


def _max_total_rise(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, rhs: np.ndarray,
                    upper: np.ndarray, n_cells: int) -> tuple[np.ndarray, float]:
    """``max sum(y[n_cells:])`` s.t. ``A y <= rhs``, ``0 <= y <= upper`` (A given by triplets),
    solved by HiGHS through ``highspy``; returns (y, optimum).

    The same HiGHS LP that ``scipy.optimize.linprog(method="highs")`` solved here before, handed
    over directly: the solvers have already loaded ``highspy``, and importing scipy.optimize
    cost 0.7 s, a fifth of the check at 16,384 distinct jobs (benchmarks/results/reliability.md, "Time limits")."""
    highs = _highs_model(rows, cols, vals, rhs, upper, n_cells)
    highs.run()
    status = highs.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"bottleneck check LP failed: {highs.modelStatusToString(status)}")
    return (np.asarray(highs.getSolution().col_value, dtype=float),
            float(highs.getInfo().objective_function_value))


def _feasible_part(arrays, matrix: np.ndarray) -> np.ndarray:
    """Scale rows and worker types down just enough that the plan satisfies eqs. 2-3 exactly."""
    row_sum = matrix.sum(axis=1, keepdims=True)
    matrix = matrix / np.maximum(row_sum, 1.0)
    used = (matrix * arrays.scale_factor[:, None]).sum(axis=0)
    factor = np.divide(arrays.num_workers, used, out=np.ones_like(used), where=used > arrays.num_workers)
    return matrix * np.minimum(factor, 1.0)[None, :]


def bottleneck_metrics(instance, matrix: np.ndarray) -> dict[str, float]:
    """``bottlenecked_fraction`` of jobs, and ``pareto_efficient`` (1.0 when all are)."""
    stuck = bottlenecked_jobs(instance, matrix)
    return {"bottlenecked_fraction": float(stuck.mean()), "pareto_efficient": float(stuck.all())}


def hierarchical_metrics(instance, matrix: np.ndarray) -> dict[str, float]:
    """Bottleneck metrics plus ``min_entity_share``: min over entities of their jobs' summed
    score divided by the entity weight (how evenly entities are served)."""
    view = entity_view(instance)
    total = np.bincount(view.entity_of, weights=job_scores(instance, matrix), minlength=len(view.weight))
    present = np.bincount(view.entity_of, minlength=len(view.weight)) > 0
    return {**bottleneck_metrics(instance, matrix),
            "min_entity_share": float((total[present] / view.weight[present]).min())}


POLICY_METRICS = {HIERARCHICAL: (hierarchical_objective, hierarchical_metrics),
                  WATER_FILLING: (water_filling_objective, bottleneck_metrics)}


def with_water_filling_policies(base_evaluate: Callable[[Any, Any], Evaluation]) -> Callable[[Any, Any], Evaluation]:
    """Extend the allocation judge ``base_evaluate`` with the two water-filling policies.

    A plan whose ``policy`` is ``hierarchical`` or ``max_min_fairness_water_filling`` is checked
    by ``base_evaluate`` as a max-min fairness plan (violations and the common metrics), then
    given this module's objective and metrics; any other plan goes to ``base_evaluate`` as is.
    """

    @functools.wraps(base_evaluate)
    def evaluate(instance, plan) -> Evaluation:
        if getattr(plan, "policy", None) not in POLICY_METRICS:
            return base_evaluate(instance, plan)
        objective, metrics = POLICY_METRICS[plan.policy]
        if getattr(plan, "pairs", None):
            raise InstanceError("pairs", f"the {plan.policy} policy has no space-sharing rows")
        verdict = base_evaluate(instance, plan.model_copy(update={"policy": "max_min_fairness"}))
        matrix = plan.matrix(instance)
        terms = objective(instance, matrix)
        return verdict.model_copy(update={
            "objective": float(sum(terms.values())), "sense": "max", "terms": terms,
            "metrics": {**verdict.metrics, **metrics(instance, matrix)}})

    return evaluate
