"""POP-style partitioning of very large allocation problems (Narayanan et al., "Solving Large-
Scale Granular Resource Allocation Problems Efficiently with POP", SOSP 2021).

Split the jobs into ``k`` random parts of (almost) equal size, give each part ``1/k`` of every
worker type, solve the policy on each part independently, and stack the answers. Every part's
plan fits its share of the cluster, so the combined plan is feasible for the whole; it is not
optimal in general — the quality lost against the unpartitioned optimum is what
``benchmarks/RESULTS.md`` measures. Random parts of a large instance look alike (the same
mix of job types), which is why the loss is small when each part is still large.

>>> import numpy as np
>>> parts = random_parts(10, 3, seed=0)
>>> sorted(np.concatenate(parts).tolist()) == list(range(10)), [len(p) for p in parts]
(True, [4, 3, 3])
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fleetplan.instances import InstanceError
from fleetplan.instances.allocation import AllocationArrays
from fleetplan.solvers.allocation.lp import SpecOutcome

# Which part status wins when parts disagree: the combined plan is only as good as its worst part.
_WORST_FIRST = ("error", "infeasible", "time_limit", "feasible", "optimal")


def random_parts(n_jobs: int, k: int, seed: int) -> list[np.ndarray]:
    """``k`` random disjoint parts of ``range(n_jobs)`` covering it, sizes differing by at most 1."""
    order = np.random.default_rng(seed).permutation(n_jobs)
    return [np.sort(part) for part in np.array_split(order, k)]


def solve_partitioned(arrays: AllocationArrays, k: int, seed: int,
                      solve_part: Callable[[AllocationArrays], SpecOutcome]) -> tuple[SpecOutcome, list[np.ndarray]]:
    """Solve ``k`` random parts with ``solve_part`` and combine them into one outcome for ``arrays``.

    Returns the combined outcome (status: the worst of the parts; ``objective`` None, since no
    part's LP value bounds the whole) and the parts.
    """
    n_jobs = len(arrays.job_ids)
    # k >= 1 is the option's declared bound (fleetplan.solvers.options.GLOSSARY); how many
    # parts these jobs allow is the instance's to say.
    if k > n_jobs:
        raise InstanceError("options.partitions", f"cannot split {n_jobs} jobs into {k} non-empty parts")
    parts = random_parts(n_jobs, k, seed)
    matrix = np.zeros(arrays.throughput.shape)
    pair_jobs, pair_matrix, log = [], [], []
    statuses = []
    stats: dict[str, float] = {"partitions": float(k), "build_s": 0.0, "solve_s": 0.0}
    for index, part in enumerate(parts):
        outcome = solve_part(arrays.subset(part, 1.0 / k))
        statuses.append(outcome.status)
        log += [f"part {index} ({len(part)} jobs): {line}" for line in outcome.log]
        stats["build_s"] += outcome.stats.get("build_s", 0.0)
        stats["solve_s"] += outcome.stats.get("solve_s", 0.0)
        if outcome.matrix is None:
            return SpecOutcome(status=outcome.status, log=log, stats=stats), parts
        matrix[part] = outcome.matrix
        if len(outcome.pair_jobs):
            pair_jobs.append(part[outcome.pair_jobs])
            pair_matrix.append(outcome.pair_matrix)
    status = min(statuses, key=_WORST_FIRST.index)
    combined = SpecOutcome(
        status=status, matrix=matrix,
        pair_jobs=np.concatenate(pair_jobs) if pair_jobs else np.zeros((0, 2), dtype=int),
        pair_matrix=np.concatenate(pair_matrix) if pair_matrix else np.zeros((0, matrix.shape[1])),
        log=log, stats=stats)
    return combined, parts
