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


def class_pairs(arrays: AllocationArrays, count: np.ndarray, prune: bool = True,
                margin: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
    """Pair columns between *classes* of identical jobs (``arrays`` holds one representative per
    class, ``count`` the class sizes): pairs (P, 2) of classes — a class with two or more jobs
    may pair with itself — their type (P,) and each side's share of the column (P, 2).

    A column is the total time all pairs of the two classes spend together on the type; spread
    evenly, each job of class c gets 1/n_c of it (2/n_c when both jobs are of class c, each pair
    holding two of them). The same rule as :func:`candidate_pairs` prunes it; the counts are in
    job pairs, as there."""
    classes = arrays.colocation_class
    table = arrays.colocation_throughput
    count = np.asarray(count, dtype=float)
    eligible = np.flatnonzero(classes >= 0)
    # Every (c, d) with c <= d at once: with distinct jobs each job is its own class, and a
    # Python loop over the n^2 / 2 pairs took a minute at 2,048 jobs, outside any clock check.
    first, second = np.triu_indices(len(eligible))
    c, d = eligible[first], eligible[second]
    keep = ~((c == d) & (count[c] < 2)) & (arrays.scale_factor[c] == arrays.scale_factor[d])
    c, d = c[keep], d[keep]
    jobs = np.where(c == d, count[c] * (count[c] - 1) / 2, count[c] * count[d])
    picked_pair, picked_type = [], []
    possible = kept = 0.0
    for j in range(len(arrays.worker_types)):
        t_c, t_d = table[classes[c], classes[d], j, 0], table[classes[c], classes[d], j, 1]
        alone_c, alone_d = arrays.throughput[c, j], arrays.throughput[d, j]
        valid = ~((t_c <= 0) & (t_d <= 0)) & (alone_c > 0) & (alone_d > 0) & \
            (arrays.num_workers[j] >= arrays.scale_factor[c])
        possible += float(jobs[valid].sum())
        if prune:
            with np.errstate(divide="ignore", invalid="ignore"):
                valid &= ~(t_c / alone_c + t_d / alone_d <= 1.0 + margin)
        kept += float(jobs[valid].sum())
        picked_pair.append(np.flatnonzero(valid))
        picked_type.append(np.full(int(valid.sum()), j))
    pair_index, pair_type = np.concatenate(picked_pair), np.concatenate(picked_type)
    if not len(pair_index):
        return (np.zeros((0, 2), dtype=int), np.zeros(0, dtype=int), np.zeros((0, 2)),
                {"pairs_possible": possible, "pairs_kept": 0.0})
    order = np.lexsort((pair_type, pair_index))  # by class pair, then type: the order of the loops before
    pair_index, pair_type = pair_index[order], pair_type[order]
    pair_classes = np.column_stack([c[pair_index], d[pair_index]]).astype(int)
    share = np.column_stack([1.0 / count[pair_classes[:, 0]], 1.0 / count[pair_classes[:, 1]]])
    return pair_classes, pair_type.astype(int), share, {"pairs_possible": possible, "pairs_kept": kept}


def spread_pair_time(members_c: np.ndarray, members_d: np.ndarray, total: float) -> tuple[np.ndarray, np.ndarray]:
    """Split ``total`` pair time between classes c and d into job pairs so that every job of c
    gets total / n_c and every job of d total / n_d (every job of c gets 2 total / n_c when
    ``members_d`` is ``members_c``), using few pairs: the north-west corner rule between two
    classes (at most n_c + n_d - 1 pairs), a ring inside one class (n pairs).

    >>> jobs, time = spread_pair_time(np.arange(3), np.arange(3), 1.5)
    >>> jobs.tolist(), time.tolist()
    ([[0, 1], [1, 2], [2, 0]], [0.5, 0.5, 0.5])
    """
    if members_c is members_d or np.array_equal(members_c, members_d):
        n = len(members_c)
        each = 2.0 * total / n
        if n == 2:
            return np.array([[members_c[0], members_c[1]]]), np.array([each])
        ring = np.column_stack([members_c, np.roll(members_c, -1)])
        return ring, np.full(n, each / 2.0)
    supply = np.full(len(members_c), total / len(members_c))
    demand = np.full(len(members_d), total / len(members_d))
    pairs, times = [], []
    i = k = 0
    while i < len(supply) and k < len(demand):
        amount = min(supply[i], demand[k])
        if amount > 0:
            pairs.append((members_c[i], members_d[k]))
            times.append(amount)
        supply[i] -= amount
        demand[k] -= amount
        # Advance the side that ran out (both at an exact tie); floats leave crumbs of 1e-17.
        if supply[i] <= 1e-15 * total:
            i += 1
        if k < len(demand) and demand[k] <= 1e-15 * total:
            k += 1
    return np.array(pairs, dtype=int).reshape(-1, 2), np.array(times)
