"""Solving one allocation policy LP: aggregation, backends, refinement, expansion.

:func:`solve_spec` takes the arrays of an instance (or of a POP part) and a
:class:`~fleetplan.models.allocation.policies.PolicySpec` and returns the allocation:

1. *aggregate* (when allowed): jobs identical in every number the LP reads share one set of
   variables — the LP of a convex symmetric policy has a symmetric optimum (averaging an optimum
   over permutations of identical jobs keeps it optimal), so solving the class LP and giving
   every member its class's row reaches the full model's optimum (tests check it);
2. build the space (single cells, and pair columns with space sharing) and the LP;
3. solve it with the chosen backend — HiGHS through highspy (default), the Pyomo reference
   model through HiGHS, or OR-Tools GLOP / PDLP;
4. for ``max_min`` forms, *refine*: a second LP keeps the max-min level and maximizes the sum of
   the same scores, so capacity the minimum does not need is not left idle (after the price
   decomposition, the refinement is decomposed too: :mod:`fleetplan.solvers.allocation.price_decomposition.separable_refine`;
   where the jobs' best-score bound is within the workers' reach, as priority weights make it,
   the refinement at that bound is tried before the max-min LP, and its plan proves the level);
5. expand classes back to jobs and Charnes-Cooper's y / s back to X.
"""

from __future__ import annotations

import time
import typing
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

import numpy as np

from fleetplan.instances.allocation import AllocationArrays
from fleetplan.instances.allocation.rows import row_max as _row_max
from fleetplan.lazy import lazy_module
from fleetplan.models.allocation.pairs import candidate_pairs, class_pairs, spread_pair_time
from fleetplan.models.allocation.policies import (
    PolicySpec,
    aggregate_jobs,
    build_space,
    model_throughput,
    policy_lp,
    policy_pyomo,
    refinement_lp,
)
from fleetplan.solvers import highs as highs_runner
from fleetplan.solvers import warm
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.options import option_group
from fleetplan.solvers.ortools_lp import run_lp

pyo = lazy_module("pyomo.environ")

Backend = Literal["highspy", "pyomo", "ortools-glop", "ortools-pdlp"]
Decomposition = Literal["auto", "prices", "none"]
# Below this many LP jobs the full LP is as fast as the decomposition's own LPs.
SEPARABLE_MIN_JOBS = 1_000
# The max-min level is first tried at the jobs' best-score bound when holding every job there
# needs at most this share of the workers (_refine_at_ceiling).
CEILING_FIRST_SHARE = 0.9
BACKENDS: tuple[str, ...] = typing.get_args(Backend)


@option_group
@dataclass(frozen=True)
class AllocationLpOptions:
    """The options every LP-solved allocation policy takes, declared once: each field is an
    option of those solvers (``fleetplan solvers max-min-fairness``; meanings and bounds in
    :data:`fleetplan.solvers.options.GLOSSARY`), and a solver receives them as one instance.

    ``decomposition``: none (the full LP); prices (the price decomposition with a certificate,
    :mod:`fleetplan.solvers.allocation.price_decomposition.separable`, falling back to the LP where it does not
    apply); auto (prices from :data:`SEPARABLE_MIN_JOBS` jobs, after merging identical ones, up).
    ``partitions`` is read before any LP (POP splits the instance, then each part is solved).
    """

    backend: Backend = "highspy"
    lp_algorithm: highs_runner.LpAlgorithm = "auto"
    partitions: int = 1
    space_sharing: bool = False
    prune_pairs: bool = True
    aggregate: bool = True
    decomposition: Decomposition = "auto"
    refine: bool = True


@dataclass(frozen=True)
class LpOptions(AllocationLpOptions):
    """How one LP (of an instance or a POP part) is solved: the user's options and the run's
    clock, threads, seed and model."""

    # One clock for the whole solve: every LP gets what is left of it (less ``reserve``, the
    # time kept for expanding the plan and judging it), never the whole limit again.
    deadline: Deadline = field(default_factory=lambda: Deadline(None))
    reserve: float = 0.0
    threads: int = 1
    seed: int = 0
    heterogeneity_aware: bool = True

    @classmethod
    def of(cls, options: AllocationLpOptions, **run: Any) -> LpOptions:
        """The user's ``options`` with the run's ``deadline``, ``threads``, ... (``run``)."""
        return cls(**{f.name: getattr(options, f.name) for f in fields(AllocationLpOptions)}, **run)


@dataclass
class SpecOutcome:
    """An LP's answer as an allocation of the arrays' jobs (and pair rows)."""

    status: str
    matrix: np.ndarray | None = None
    pair_jobs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=int))
    pair_matrix: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    objective: float | None = None  # the LP's own optimum (t for max_min before refinement)
    log: list[str] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    # Dual prices of the (first, unrefined) LP in its objective's units, max sense: per worker
    # of each type (capacity rows) and per job with a throughput floor (per unit of throughput,
    # 0 elsewhere). None where the method gives none (Pyomo, OR-Tools, Charnes-Cooper forms).
    capacity_prices: np.ndarray | None = None
    floor_prices: np.ndarray | None = None


def load_backend(backend: str) -> None:
    """Import the back-end's libraries now, so the time they take (0.3-0.5 s on a busy machine)
    is spent before the first LP's time slice is computed, not on top of it."""
    import scipy.sparse  # noqa: F401

    if backend in ("highspy", "pyomo"):
        import highspy  # noqa: F401
    if backend == "pyomo":
        import pyomo.environ  # noqa: F401
    elif backend.startswith("ortools"):
        import ortools.linear_solver.python.model_builder_helper  # noqa: F401


def _run(space, spec: PolicySpec, options: LpOptions, level: float | None = None, lp=None):
    """Solve the spec's LP (or its refinement at ``level``); returns (outcome, values, lp). The
    solver gets what is left of the clock after the build (millions of pair columns take
    seconds to build)."""
    if options.backend == "pyomo":
        started = time.perf_counter()
        model = policy_pyomo(space, spec, level=level)
        build_s = time.perf_counter() - started
        remaining = options.deadline.remaining(options.reserve)
        outcome = highs_runner.solve_pyomo(model, time_limit=remaining, threads=options.threads,
                                           seed=options.seed, algorithm=options.lp_algorithm)
        outcome.build_s = build_s
        if outcome.objective is None:
            return outcome, None, None
        values = np.array([pyo.value(model.x[c], exception=False) or 0.0 for c in range(space.n_cols)])
        extra = [pyo.value(model.t)] if spec.form == "max_min" else [pyo.value(model.s)] if spec.form == "charnes_cooper" else []
        return outcome, np.concatenate([values, extra]), None
    started = time.perf_counter()
    if level is None:
        lp = policy_lp(space, spec)
    else:
        lp = refinement_lp(lp, space, spec, level)
    build_s = time.perf_counter() - started
    if options.deadline.expired(options.reserve):
        # HiGHS does not look at its clock during presolve: handed a model of millions of pair
        # columns with no time left, it ran for 20 s more.
        return highs_runner.LpOutcome(status="time_limit", values=None, objective=None,
                                      log=["time limit reached while the LP was built"], build_s=build_s), None, lp
    remaining = options.deadline.remaining(options.reserve)
    outcome = run_lp(lp, options.backend, algorithm=options.lp_algorithm, time_limit=remaining,
                     threads=options.threads, seed=options.seed)
    outcome.build_s += build_s
    return outcome, outcome.values, lp


def _spread_class_pairs(space, pair_values: np.ndarray, inverse: np.ndarray):
    """Class-pair columns -> job-pair columns (a new space-like view with job pairs)."""
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(space.n_jobs + 1))
    members = [order[bounds[c]:bounds[c + 1]] for c in range(space.n_jobs)]
    jobs, types, values = [], [], []
    for k in np.flatnonzero(pair_values > 1e-12):
        c, d = space.pair_jobs[k]
        pairs, times = spread_pair_time(members[c], members[d], float(pair_values[k]))
        jobs.append(pairs)
        types.append(np.full(len(pairs), space.pair_type[k]))
        values.append(times)
    space.pair_jobs = np.concatenate(jobs) if jobs else np.zeros((0, 2), dtype=int)
    space.pair_type = np.concatenate(types) if types else np.zeros(0, dtype=int)
    return np.concatenate(values) if values else np.zeros(0)


def _expand_pairs(space, pair_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pair columns (one per pair and type) as rows per pair: (pairs, 2) jobs, (pairs, types)."""
    used = pair_values > 1e-12
    if not used.any():
        return np.zeros((0, 2), dtype=int), np.zeros((0, space.n_types))
    jobs, inverse = np.unique(space.pair_jobs[used], axis=0, return_inverse=True)
    matrix = np.zeros((len(jobs), space.n_types))
    np.add.at(matrix, (inverse.reshape(-1), space.pair_type[used]), pair_values[used])
    return jobs, matrix


def solve_spec(arrays: AllocationArrays, spec: PolicySpec, options: LpOptions) -> SpecOutcome:
    """Solve ``spec`` over ``arrays`` (see the module docstring)."""
    n_jobs = len(arrays.job_ids)
    inverse = None
    work_arrays, work_spec, multiplicity = arrays, spec, None
    pair_jobs = pair_type = pair_share = None
    pair_stats: dict[str, float] = {}
    if options.aggregate:
        throughput = model_throughput(arrays, options.heterogeneity_aware)
        floor = np.zeros(n_jobs) if spec.floor is None else spec.floor
        representative, inverse, count = aggregate_jobs(
            throughput, arrays.runnable, arrays.scale_factor, spec.coefficient, floor, arrays.colocation_class,
            np.zeros(n_jobs) if spec.offset is None else spec.offset)
        if len(representative) == n_jobs and not options.space_sharing and \
                bool(np.all(representative == np.arange(n_jobs))):
            # Every job its own class (distinct jobs): the classes' arrays are the jobs' own, so
            # they are not copied (2 ms of a 20 ms scheduling round at 10,000 jobs), nor is the
            # answer gathered back through the identity (0.02 ms at 2,048).
            work_arrays, work_spec, inverse = arrays, spec, None
        else:
            work_arrays = arrays.subset(representative)
            # subset() keeps the part's workers; the classes share the whole cluster.
            work_arrays = replace(work_arrays, num_workers=arrays.num_workers)
            work_spec = replace(spec, coefficient=spec.coefficient[representative],
                                floor=None if spec.floor is None else spec.floor[representative],
                                offset=None if spec.offset is None else spec.offset[representative])
        multiplicity = count
        if options.space_sharing:
            pair_jobs, pair_type, pair_share, pair_stats = class_pairs(work_arrays, count, prune=options.prune_pairs)
    elif options.space_sharing:
        pair_jobs, pair_type, pair_stats = candidate_pairs(arrays, prune=options.prune_pairs)
    has_pairs = pair_jobs is not None and len(pair_jobs) > 0
    scale = 1.0
    if spec.form == "max_min":
        # Keep the level t near 1: coefficients like 1 / steps (1e-6) would put the optimum
        # within the LP solvers' absolute tolerances (1e-7).
        reach = work_spec.coefficient * (work_arrays.fastest_throughput if options.heterogeneity_aware else
                                         _row_max(_runnable_model_throughput(work_arrays, False)))
        positive = reach[reach > 0]
        # The middle value by partition (np.median imports numpy.ma on first use: 0.1 s).
        scale = 1.0 / float(np.partition(positive, len(positive) // 2)[len(positive) // 2]) if len(positive) else 1.0
        work_spec = replace(work_spec, coefficient=work_spec.coefficient * scale,
                            offset=None if work_spec.offset is None else work_spec.offset * scale)
    if options.deadline.expired(options.reserve):
        return SpecOutcome(status="time_limit", log=["time limit reached before the LP was built"])
    pre_log: list[str] = []
    if _separable_applies(work_arrays, work_spec, options, has_pairs):
        # A scheduler's previous round left its prices (fleetplan.solvers.warm): in the policy's
        # own units, so rescaled by this round's ``scale``.
        key = warm.slot(("allocation-separable", spec.form, options.heterogeneity_aware))
        hint = warm.take(key)
        start = None if hint is None else (hint[0] * scale, hint[1] * scale) if spec.form == "max_min" else hint[1]
        # Max-min: the vertices and free jobs the last answer was certified with (the third part
        # of the hint), tried before any prices are computed (separable_structure.resolve_structure).
        structure = hint[2] if hint is not None and len(hint) > 2 and spec.form == "max_min" else None
        ceiling_log: list[str] = []
        result = None
        # The max-min form's scores A = coefficient x throughput, made once: the ceiling's try,
        # the decomposition and its refinement each made the same table.
        scores = _max_min_scores(work_arrays, work_spec, options) if spec.form == "max_min" else None
        # A hint without prices is a previous round's level at the ceiling (or no capacity bound).
        if spec.form == "max_min" and options.refine and (start is None or not np.any(start[1])):
            tried = _refine_at_ceiling(work_arrays, work_spec, multiplicity, options, scores)
            if tried is not None:
                ceiling, refined, proven = tried
                if refined.status == "optimal":
                    warm.give(key, (ceiling / scale, np.zeros(len(work_arrays.worker_types))))
                    return _refined_outcome(refined, ceiling / scale, inverse, len(work_arrays.job_ids), {}, None,
                                            refined.log)
                if refined.status == "time_limit":
                    return SpecOutcome(status="time_limit", log=refined.log, stats=refined.stats)
                if proven:
                    # The max-min method would find that same plan and run this same refinement.
                    from fleetplan.solvers.allocation.price_decomposition.separable import (
                        SeparableResult,
                    )

                    result = SeparableResult("fallback", log=refined.log)
                else:
                    ceiling_log = refined.log + ["refinement at the best-score bound: no certified plan there, so "
                                                 "the max-min LP decides the level"]
        if result is None:
            # The reduced LP's basis only starts a next round's: read back where hints are on.
            result = _solve_separable(work_arrays, work_spec, multiplicity, options, start, structure, scores,
                                      keep_basis=key is not None)
        # Hints on (key given: a scheduler's rounds): the answer starts the next round's solve.
        # Off (a single solve), no hint is made only to be dropped.
        if key is not None:
            if result.status == "optimal" and result.prices is not None:
                # The interior-point prices the answer was picked at (centred) where there are some.
                level, prices = result.anchor if result.anchor is not None else (result.level, result.prices)
                # The structure's optional third part: the last reduced LP's basis (its next start).
                structure = () if result.structure is None else (
                    result.structure + (() if result.reduced_basis is None else (result.reduced_basis,)),)
                warm.give(key, ((level or 0.0) / scale, np.asarray(prices, dtype=float) / scale) + structure)
            elif result.status == "capped":
                # A job's own best score set the level and no capacity has a price: that is the
                # hint (the next round starts from it; its certificate decides, as for any hint).
                warm.give(key, (result.level / scale, np.zeros(len(work_arrays.worker_types))))
        pre_log = ceiling_log + result.log
        if spec.form == "max_min" and (result.status == "capped" or (
                result.status == "optimal" and options.refine and not result.all_bottlenecked)):
            # The refinement by price decomposition (separable_refine): weighted max-min
            # fairness, where a few heavily weighted jobs set the level and every other job has
            # room, without the full LP. At a ceiling (``capped``) it also proves the level.
            refined = _refine_separable(work_arrays, work_spec, multiplicity, options, result.level,
                                        result.matrix if result.status == "optimal" else None, scores=scores)
            pre_log = pre_log + refined.log
            if refined.status == "optimal":
                prices = None
                if result.status == "optimal" and result.prices is not None:
                    prices = np.asarray(result.prices, dtype=float) / scale
                return _refined_outcome(refined, result.level / scale, inverse, len(work_arrays.job_ids),
                                        result.stats, prices, pre_log)
            if refined.status == "time_limit" and result.status == "optimal":
                # As after the full LP: the max-min plan is an optimum, only not refined.
                matrix = np.minimum(result.matrix, 1.0)
                return SpecOutcome(status="optimal", matrix=matrix if inverse is None else matrix[inverse],
                                   objective=result.level / scale, stats=result.stats,
                                   log=pre_log + ["time limit reached: the max-min plan is kept unrefined"])
            if refined.status == "time_limit":
                return SpecOutcome(status="time_limit", log=pre_log, stats=result.stats)
            result.status = "fallback" if result.status == "capped" else result.status
        if result.status == "optimal" and not (spec.form == "max_min" and options.refine
                                               and not result.all_bottlenecked):
            if spec.form == "max_min" and options.refine:
                pre_log.append("refinement skipped: every job's score row has a positive dual, so every "
                               "optimum gives each job exactly the level (nothing to refine)")
            matrix = np.minimum(result.matrix, 1.0)
            if inverse is not None:
                matrix = matrix[inverse]
            stats = {"lp_jobs": float(len(work_arrays.job_ids)), **result.stats}
            stats.update(build_s=0.0, solve_s=result.stats.get("separable_s", 0.0))
            objective = result.level / scale if spec.form == "max_min" else result.level
            prices = None if result.prices is None else np.asarray(result.prices, dtype=float) / scale
            return SpecOutcome(status="optimal", matrix=matrix, objective=objective, log=pre_log, stats=stats,
                               capacity_prices=prices)
        if result.status == "time_limit":
            return SpecOutcome(status="time_limit", log=pre_log, stats=result.stats)
        pre_log.append("separable method: falling back to the full LP" if result.status != "optimal" else
                       "separable method: optimal, but a refinement may change the plan: solving the full LP")
    started = time.perf_counter()
    space = build_space(work_arrays, options.heterogeneity_aware, pair_jobs if has_pairs else None,
                        pair_type if has_pairs else None, multiplicity=multiplicity,
                        pair_share=pair_share if has_pairs else None)
    stats = {"lp_columns": float(space.n_cols), "lp_jobs": float(space.n_jobs),
             "space_s": time.perf_counter() - started, **pair_stats}
    outcome, values, lp = _run(space, work_spec, options)
    capacity_prices, floor_prices = _lp_prices(outcome, space, work_spec, scale, inverse, multiplicity)
    log = pre_log + list(outcome.log)
    build_s, solve_s = outcome.build_s + stats["space_s"], outcome.solve_s
    level = outcome.objective
    if level is not None and spec.form == "max_min":
        level_unscaled = level / scale
    else:
        level_unscaled = level
    if options.refine and spec.form == "max_min" and outcome.status == "optimal" \
            and options.deadline.expired(options.reserve):
        log.append("time limit reached: the refinement LP is skipped")
    elif spec.form == "max_min" and options.refine and outcome.status == "optimal":
        refined, refined_values, _ = _run(space, work_spec, options, level=level, lp=lp)
        if refined.status not in ("optimal", "time_limit") and options.backend == "highspy" \
                and options.lp_algorithm != "ipm":
            # Simplex sometimes ends "unknown" on this degenerate second LP; IPM does not.
            log += refined.log
            build_s += refined.build_s
            solve_s += refined.solve_s
            refined, refined_values, _ = _run(space, work_spec, replace(options, lp_algorithm="ipm"), level=level, lp=lp)
        log += refined.log
        build_s += refined.build_s
        solve_s += refined.solve_s
        if refined.status == "optimal" and refined_values is not None:
            values = refined_values
        else:
            log.append(f"refinement ended {refined.status}; keeping the max-min solution")
    stats.update(build_s=build_s, solve_s=solve_s)
    if values is None:
        return SpecOutcome(status=outcome.status if outcome.status != "optimal" else "error", log=log, stats=stats)
    columns = values[: space.n_cols]
    if spec.form == "charnes_cooper":
        scale = values[space.n_cols]
        if not scale > 0:
            return SpecOutcome(status="error", log=log + ["Charnes-Cooper scale s is 0"], stats=stats)
        columns = columns / scale
    matrix, pair_values = space.split(np.clip(columns, 0.0, None))
    matrix = np.minimum(matrix, 1.0)
    if inverse is not None:
        matrix = matrix[inverse]
        if has_pairs:
            pair_values = _spread_class_pairs(space, pair_values, inverse)
    pair_jobs, pair_matrix = _expand_pairs(space, pair_values) if has_pairs else (
        np.zeros((0, 2), dtype=int), np.zeros((0, space.n_types)))
    return SpecOutcome(status=outcome.status, matrix=matrix, pair_jobs=pair_jobs, pair_matrix=pair_matrix,
                       objective=level_unscaled, log=log, stats=stats, capacity_prices=capacity_prices,
                       floor_prices=floor_prices)


def _lp_prices(outcome: Any, space: Any, spec: PolicySpec, scale: float, inverse: np.ndarray | None,
               multiplicity: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The first LP's duals of its capacity rows and floor rows, per worker and per job, in the
    policy objective's units (a max-min level was scaled by ``scale``). A class of identical
    jobs has one floor row whose dual is the sum of its members'; each member gets its share."""
    duals = getattr(outcome, "row_duals", None)
    if duals is None or outcome.status != "optimal" or outcome.values is None:
        return None, None
    n_jobs, n_types = space.n_jobs, space.n_types
    first = 2 * n_jobs if spec.form == "max_min" else n_jobs
    floors_first = first + n_types
    if spec.form == "charnes_cooper":
        # y = s X: a unit more of a row's right-hand side in X-space is s units in y-space.
        scale = 1.0 / max(float(outcome.values[space.n_cols]), 1e-300)
        floors_first += 1  # the cost row sits between the capacity and the floor rows
    capacity = np.maximum(duals[first: first + n_types], 0.0) / scale
    floor = None
    if spec.floor is not None and np.any(spec.floor > 0):
        jobs = np.flatnonzero(spec.floor > 0)
        per_class = np.zeros(n_jobs)
        # A >= row's dual is <= 0 in the max sense: its magnitude is what the floor costs.
        per_class[jobs] = np.maximum(-duals[floors_first: floors_first + len(jobs)], 0.0) / scale
        if multiplicity is not None:
            per_class = per_class / np.asarray(multiplicity, dtype=float)
        floor = per_class if inverse is None else per_class[inverse]
    return capacity, floor


def _separable_applies(arrays: AllocationArrays, spec: PolicySpec, options: LpOptions, has_pairs: bool) -> bool:
    """The decomposition takes max-min and linear forms without pairs or floors, on HiGHS."""
    if options.decomposition == "none" or has_pairs or spec.form not in ("max_min", "linear") \
            or options.backend != "highspy":
        return False
    if spec.floor is not None and np.any(spec.floor > 0):
        return False
    return options.decomposition == "prices" or len(arrays.job_ids) >= SEPARABLE_MIN_JOBS


def _runnable_model_throughput(arrays: AllocationArrays, heterogeneity_aware: bool) -> np.ndarray:
    """The LP's throughputs where each job fits, 0 elsewhere: the arrays' own cached reading when
    heterogeneity-aware (the scaling, the decomposition and a refinement read it in one solve,
    and a session keeps it between solves that change no type a job fits)."""
    if heterogeneity_aware:
        return arrays.runnable_throughput
    return np.where(arrays.runnable, model_throughput(arrays, False), 0.0)


def _max_min_scores(arrays: AllocationArrays, spec: PolicySpec, options: LpOptions) -> np.ndarray:
    """A max-min spec's score table: coefficient[m] x the LP's throughput where job m fits."""
    return spec.coefficient[:, None] * _runnable_model_throughput(arrays, options.heterogeneity_aware)


def _solve_separable(arrays: AllocationArrays, spec: PolicySpec, multiplicity, options: LpOptions, start=None,
                     structure=None, scores: np.ndarray | None = None, keep_basis: bool = True):
    """The price decomposition of ``spec`` (``scores``: its max-min score table where the caller
    has it, else made here; ``keep_basis``: see :func:`~.price_decomposition.separable.max_min`)."""
    from fleetplan.solvers.allocation.price_decomposition import separable as allocation_separable

    mult = np.ones(len(arrays.job_ids)) if multiplicity is None else np.asarray(multiplicity, dtype=float)
    deadline = Deadline(options.deadline.remaining(options.reserve), started=None)
    if spec.form == "max_min":
        offset = np.zeros(len(mult)) if spec.offset is None else np.asarray(spec.offset, dtype=float)
        A = _max_min_scores(arrays, spec, options) if scores is None else scores
        tried: list[str] = []
        if structure is not None:  # the last answer's vertices and free jobs, before any prices
            from fleetplan.solvers.allocation.price_decomposition.separable_structure import (
                resolve_structure,
            )

            resolved = resolve_structure(A, offset, mult, arrays.scale_factor, arrays.num_workers, structure,
                                         free_level=spec.offset is not None, deadline=deadline,
                                         threads=options.threads, seed=options.seed)
            if resolved.status != "fallback":
                resolved.anchor = start  # the centred prices stay the next start, should the structure fail
                return resolved
            tried = resolved.log
        result = allocation_separable.max_min(
            A, offset, mult, arrays.scale_factor, arrays.num_workers, free_level=spec.offset is not None,
            deadline=deadline, threads=options.threads, seed=options.seed, start=start, capped=True,
            keep_basis=keep_basis)
        result.log = tried + result.log
        return result
    from fleetplan.solvers.allocation.price_decomposition import separable_linear

    throughput = _runnable_model_throughput(arrays, options.heterogeneity_aware)
    return separable_linear.linear(
        (spec.coefficient * mult)[:, None] * throughput, mult, arrays.scale_factor, arrays.num_workers,
        deadline=deadline, threads=options.threads, seed=options.seed, start=start)


def _refined_outcome(refined, level: float, inverse, lp_jobs: int, first_stats: dict[str, float], prices,
                     log: list[str]) -> SpecOutcome:
    """The outcome of a decomposed refinement's plan (``level``: the max-min level it keeps)."""
    matrix = np.minimum(refined.matrix, 1.0)
    if inverse is not None:
        matrix = matrix[inverse]
    stats = {"lp_jobs": float(lp_jobs), **first_stats, **refined.stats}
    stats.update(build_s=0.0, solve_s=first_stats.get("separable_s", 0.0) + refined.stats.get("refine_s", 0.0))
    return SpecOutcome(status="optimal", matrix=matrix, objective=level, log=log, stats=stats, capacity_prices=prices)


def _refine_at_ceiling(arrays: AllocationArrays, spec: PolicySpec, multiplicity, options: LpOptions,
                       scores: np.ndarray | None = None):
    """(ceiling, the refinement at it, whether the ceiling is known reachable) when the max-min
    level is likely the *ceiling* — the lowest of the jobs' best scores (a job's best type with
    all its time), which no plan can beat — else None. A refinement plan that reaches the
    ceiling proves it the max-min optimum, so the max-min LP and its interior-point prices are
    skipped (weighted LAS, 16,384 distinct jobs, half at weight 8: 0.24 s before, 0.09 s after;
    benchmarks/results/allocation.md, "Weighted max-min fairness, part 2"). Priority weights put it
    there: a heavily weighted job's share counts 1/weight, so its best score is low. Tried only
    where every job at the ceiling, each on its type of fewest workers per unit of score, needs
    at most CEILING_FIRST_SHARE of the workers, and of each set of types for the jobs that run
    only there (necessary conditions, with room to spare); where capacity sets the level
    (unweighted LAS on Gavel's mix needs more workers than there are) nothing is spent. Where every job fits
    on its fastest type the ceiling is reachable and that plan starts the refinement; otherwise
    the try is a guess and stops at its first infeasible reduced LP (a level just below the
    ceiling). ``scores``: the spec's score table where the caller has it."""
    A = _max_min_scores(arrays, spec, options) if scores is None else scores
    offset = np.zeros(len(A)) if spec.offset is None else np.asarray(spec.offset, dtype=float)
    best = _row_max(A)
    if len(A) == 0 or np.any(best <= 0):
        return None
    ceiling = float((best - offset).min())
    if ceiling < 0 and spec.offset is None:
        return None
    mult = np.ones(len(A)) if multiplicity is None else np.asarray(multiplicity, dtype=float)
    demand = mult * arrays.scale_factor * np.maximum(ceiling + offset, 0.0) / best
    workers = float(demand.sum())
    if workers > CEILING_FIRST_SHARE * float(arrays.num_workers.sum()) or \
            not _sets_of_types_fit(A > 0, demand, arrays.num_workers):
        return None
    from fleetplan.solvers.allocation.price_decomposition.separable import _no_capacity_binds

    # Where every job fits on its fastest type at the ceiling, that plan proves the level
    # reachable: the refinement starts from it (as after the max-min method) and is no guess.
    fits = _no_capacity_binds(A, offset, mult * arrays.scale_factor, arrays.num_workers, spec.offset is not None,
                              best=best)
    if fits is None and spec.offset is None and np.ptp(arrays.weight) == 0:
        # A guess without priority weights mostly fails (the level is set by capacity below the
        # ceiling) and a failed try cost a cold unweighted solve at 16,384 jobs more than it
        # takes (0.19 s against 0.08): only weights make the guess worth its price.
        return None
    refined = _refine_separable(arrays, spec, multiplicity, options, ceiling, None if fits is None else fits[1],
                                guess=fits is None, scores=A)
    refined.log = [f"separable: the jobs' best scores cap the level at {ceiling:.9g}, and the workers could hold "
                   f"every job there ({workers:.4g} of {float(arrays.num_workers.sum()):.4g}): the refinement at "
                   "that level is tried first (its plan proves the level)"] + refined.log
    return ceiling, refined, fits is not None


def _sets_of_types_fit(runnable: np.ndarray, demand: np.ndarray, W: np.ndarray) -> bool:
    """Whether each set of worker types has CEILING_FIRST_SHARE of its workers for the
    ``demand`` of the jobs that run on no other type (a necessary condition, with room, for
    every job to get its demand; checked for up to 8 types, 255 sets)."""
    K = runnable.shape[1]
    if K > 8:
        return True
    codes = runnable.astype(np.int64) @ (1 << np.arange(K))
    per_code = np.bincount(codes, weights=demand, minlength=1 << K)
    sets = np.arange(1 << K)
    inside = (sets[None, :] & ~sets[:, None]) == 0  # [S, c]: the types of c are among S's
    members = ((sets[:, None] >> np.arange(K)) & 1).astype(float)
    return bool(np.all(inside @ per_code <= CEILING_FIRST_SHARE * (members @ W) + 1e-12))


def _refine_separable(arrays: AllocationArrays, spec: PolicySpec, multiplicity, options: LpOptions, level: float,
                      start: np.ndarray | None = None, guess: bool = False, scores: np.ndarray | None = None):
    """The max-min refinement LP at ``level`` (in the spec's scaled units) by price decomposition
    (``scores``: the spec's score table where the caller has it)."""
    from fleetplan.solvers.allocation.price_decomposition.separable_refine import refine

    A = _max_min_scores(arrays, spec, options) if scores is None else scores
    mult = np.ones(len(arrays.job_ids)) if multiplicity is None else np.asarray(multiplicity, dtype=float)
    offset = np.zeros(len(mult)) if spec.offset is None else np.asarray(spec.offset, dtype=float)
    deadline = Deadline(options.deadline.remaining(options.reserve), started=None)
    return refine(A, offset, mult, arrays.scale_factor, arrays.num_workers,
                  level=level, deadline=deadline, threads=options.threads, seed=options.seed, start=start, guess=guess)


def effective_model_throughput(arrays: AllocationArrays, outcome: SpecOutcome, heterogeneity_aware: bool = True) -> np.ndarray:
    """throughput(m, X) of an outcome in the model's units (measured, or time shares when agnostic)."""
    throughput = (model_throughput(arrays, heterogeneity_aware) * outcome.matrix).sum(axis=1)
    if len(outcome.pair_jobs):
        shared = arrays.pair_throughput(outcome.pair_jobs[:, 0], outcome.pair_jobs[:, 1])
        if not heterogeneity_aware:
            alone = arrays.throughput[outcome.pair_jobs]  # (pairs, 2, types)
            shared = np.where(shared > 0, shared / np.maximum(np.moveaxis(alone, 1, 2), 1e-300), 0.0)
        earned = (shared * outcome.pair_matrix[:, :, None]).sum(axis=1)
        np.add.at(throughput, outcome.pair_jobs[:, 0], earned[:, 0])
        np.add.at(throughput, outcome.pair_jobs[:, 1], earned[:, 1])
    return throughput
