"""Space sharing: which job pairs get a row in the allocation LP (Gavel §3.1).

Gavel limits combinations to pairs and notes that "in practice we only need to consider
combinations that actually perform well". The rule here makes that explicit: on worker type j,
the pair (a, b) is kept only if sharing beats time-slicing the two jobs on that type::

    T_ab[a] / T[a, j] + T_ab[b] / T[b, j] > 1 + margin

Time-slicing gives the two jobs normalized rates summing to at most 1 (one job at a time), so a
pair that fails the rule can be replaced by time-slicing without lowering any job's throughput
— pruning it never lowers the optimum of a policy that only cares about throughputs (the tests
check the objectives with and without pruning on small instances). The rule depends only on the
two job types and the worker type, so it is applied per class pair and then expanded to jobs.

>>> import numpy as np
>>> from fleetplan.instances.allocation import generate, AllocationParams
>>> arrays = generate(AllocationParams(jobs=12, multi_gpu=False, space_sharing=True), seed=0).arrays()
>>> jobs, types, stats = candidate_pairs(arrays)
>>> stats["pairs_kept"] <= stats["pairs_possible"]
True
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.allocation import AllocationArrays


def candidate_pairs(arrays: AllocationArrays, prune: bool = True,
                    margin: float = 0.0) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """Pair columns (pairs (P, 2) job indices, type (P,)) that may share workers, and counts:
    ``pairs_possible`` (every measured pair and type) and ``pairs_kept`` (after the rule)."""
    classes = arrays.colocation_class
    eligible = np.flatnonzero(classes >= 0)
    table = arrays.colocation_throughput
    if len(eligible) < 2 or table.size == 0:
        return np.zeros((0, 2), dtype=int), np.zeros(0, dtype=int), {"pairs_possible": 0.0, "pairs_kept": 0.0}
    members: dict[int, np.ndarray] = {}
    order = eligible[np.argsort(classes[eligible], kind="stable")]
    for c in np.unique(classes[order]):
        members[int(c)] = order[classes[order] == c]
    pair_jobs: list[np.ndarray] = []
    pair_type: list[np.ndarray] = []
    possible = kept = 0
    present = sorted(members)
    for ci, c in enumerate(present):
        for d in present[ci:]:
            a_jobs, b_jobs = members[c], members[d]
            rep_a, rep_b = a_jobs[0], b_jobs[0]
            scale = arrays.scale_factor[rep_a]
            if scale != arrays.scale_factor[rep_b]:
                continue
            if c == d:
                first, second = np.triu_indices(len(a_jobs), k=1)
                jobs = np.column_stack([a_jobs[first], a_jobs[second]])
            else:
                grid_a, grid_b = np.meshgrid(a_jobs, b_jobs, indexing="ij")
                jobs = np.column_stack([grid_a.ravel(), grid_b.ravel()])
            if not len(jobs):
                continue
            for j in range(len(arrays.worker_types)):
                t_a, t_b = table[c, d, j]
                if t_a <= 0 and t_b <= 0:
                    continue
                alone_a, alone_b = arrays.throughput[rep_a, j], arrays.throughput[rep_b, j]
                if alone_a <= 0 or alone_b <= 0 or arrays.num_workers[j] < scale:
                    continue
                possible += len(jobs)
                if prune and t_a / alone_a + t_b / alone_b <= 1.0 + margin:
                    continue
                kept += len(jobs)
                pair_jobs.append(jobs)
                pair_type.append(np.full(len(jobs), j))
    if not pair_jobs:
        return np.zeros((0, 2), dtype=int), np.zeros(0, dtype=int), {"pairs_possible": float(possible), "pairs_kept": 0.0}
    return (np.concatenate(pair_jobs), np.concatenate(pair_type),
            {"pairs_possible": float(possible), "pairs_kept": float(kept)})
