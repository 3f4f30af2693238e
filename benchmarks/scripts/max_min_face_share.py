"""How much of the worst job's time share under max-min fairness is the policy's own choice?

Max-min fairness (Gavel's LAS) returns one allocation of its LP's optimal face (then the
refinement that keeps the level and maximizes the sum of the scores). A target on a metric the
LP does not optimize, such as the worst job's share of time (``min_time_share``), could depend on
which optimum the solver returns. For each purchase this script solves, with HiGHS on the
policy's own LP (:func:`fleetplan.models.allocation.policies.policy_lp`):

* the policy's level;
* the largest worst-job time share of any allocation that keeps that level ("level face");
* the same, also keeping the refinement's sum of scores ("refined face");
* the worst-job time share of the plan ``fleetplan.solve(..., "max-min-fairness")`` returns,
  and (in the JSON line) which job that is and its time on each type.

When the three shares agree, the policy's answer is pinned by the level itself, not by a choice
among optima. Usage (purchases of one type, added to the instance's own workers)::

    python benchmarks/scripts/max_min_face_share.py examples/inventory-300-jobs.json --type l4 448 460 461
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import scipy.sparse as sp

import fleetplan
from fleetplan.models.allocation.policies import PolicySpec, build_space, policy_lp, refinement_lp
from fleetplan.models.linear import INF, LinearProgram
from fleetplan.planning.sizing.allocation import sized_instance
from fleetplan.solvers.highs import new_highs, pass_lp, run


def _optimum(lp: LinearProgram) -> float:
    highs = new_highs(None, 1, 0)
    pass_lp(highs, lp, "simplex")
    return float(run(highs).objective)


def worst_share_on_face(lp: LinearProgram, space, level: float, scores: LinearProgram | None,
                        score_sum: float | None) -> float:
    """The largest worst-job time share over the allocations that keep ``level`` (and, with
    ``scores``, the refinement's ``score_sum``): one more column ``m <= time(j)`` for every job."""
    n_jobs = space.n_jobs
    rows = [sp.hstack([lp.matrix, sp.csr_matrix((lp.matrix.shape[0], 1))]),
            sp.hstack([space.time, sp.csr_matrix((n_jobs, 1)), -sp.csr_matrix(np.ones((n_jobs, 1)))])]
    lower = [lp.row_lower, np.zeros(n_jobs)]
    upper = [lp.row_upper, np.full(n_jobs, INF)]
    if scores is not None:
        rows.append(sp.hstack([sp.csr_matrix(scores.cost.reshape(1, -1)), sp.csr_matrix((1, 1))]))
        lower.append([score_sum - 1e-7 * abs(score_sum)])
        upper.append([INF])
    cost = np.zeros(lp.matrix.shape[1] + 1)
    cost[-1] = 1.0
    col_lower = np.concatenate([lp.col_lower, [0.0]])
    col_lower[space.n_cols] = level - 1e-7 * abs(level)
    face = LinearProgram(cost=cost, matrix=sp.vstack(rows, format="csr"), row_lower=np.concatenate(lower),
                         row_upper=np.concatenate(upper), col_lower=col_lower,
                         col_upper=np.concatenate([lp.col_upper, [INF]]), sense="max", names={})
    return _optimum(face)


def measure(instance, add: np.ndarray) -> dict:
    sized = sized_instance(instance, add)
    arrays = sized.arrays()
    coefficient = arrays.scale_factor / (arrays.weight * arrays.equal_share_throughput)
    space, spec = build_space(arrays), PolicySpec("max_min", coefficient)
    lp = policy_lp(space, spec)
    level = _optimum(lp)
    refined = refinement_lp(lp, space, spec, level)
    score_sum = _optimum(refined)
    policy = fleetplan.solve(sized, "max-min-fairness")
    matrix = np.asarray(policy.plan.matrix(sized))
    worst = int(np.argmin(matrix.sum(axis=1)))
    return {"level": level,
            "policy_worst_job": arrays.job_ids[worst],
            "policy_worst_job_time": {name: round(float(t), 4) for name, t in zip(
                [w.name for w in sized.worker_types], matrix[worst], strict=True) if t > 0},
            "level_face_worst_share": worst_share_on_face(lp, space, level, None, None),
            "refined_face_worst_share": worst_share_on_face(lp, space, level, refined, score_sum),
            "policy_worst_share": policy.evaluation.metrics["min_time_share"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("instance")
    parser.add_argument("--type", required=True, help="the GPU type bought")
    parser.add_argument("counts", nargs="+", type=int, help="units of --type added")
    args = parser.parse_args()
    instance = fleetplan.load_instance(args.instance)
    names = [worker.name for worker in instance.worker_types]
    prices = np.array([worker.cost_per_hour or 0.0 for worker in instance.worker_types])
    print("| added | cost | level | worst share, level face (max) | refined face (max) | the policy's plan |")
    print("|---:|---:|---:|---:|---:|---:|")
    for count in args.counts:
        add = np.zeros(len(names), dtype=int)
        add[names.index(args.type)] = count
        started = time.process_time()
        row = measure(instance, add)
        print(f"| {count} {args.type} | {add @ prices:.1f} | {row['level']:.4f} | {row['level_face_worst_share']:.4f} | "
              f"{row['refined_face_worst_share']:.4f} | {row['policy_worst_share']:.4f} |", flush=True)
        row.update(added=count, cpu_s=round(time.process_time() - started, 2))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
