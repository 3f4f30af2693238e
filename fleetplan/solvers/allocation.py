"""Solvers of the ``allocation`` kind: Gavel's max-min fairness, heterogeneity-aware and agnostic.

Both solve the LP of :mod:`fleetplan.models.allocation` with HiGHS, through ``highspy`` directly
(default: fast to build) or through the Pyomo reference model (``backend="pyomo"``).

A max-min LP fixes only the smallest score; the other jobs' shares are whatever vertex the
solver lands on, which can leave capacity idle. With ``refine=True`` (the default) a second LP
keeps the max-min level and maximizes the sum of the same scores, so spare capacity goes to
jobs that can use it. The objective (the minimum) is unchanged by the refinement.
"""

from __future__ import annotations

import time
from typing import Literal

import numpy as np
import pyomo.environ as pyo

from fleetplan.instances import InstanceError
from fleetplan.instances.allocation import AllocationInstance, AllocationPlan
from fleetplan.models.allocation import (
    fairness_coefficients,
    max_min_fairness_lp,
    max_min_fairness_pyomo,
)
from fleetplan.solvers import highs as highs_runner
from fleetplan.solvers.base import Progress, SolveResult, register

Backend = Literal["highspy", "pyomo"]
# The refinement may give up this much of the max-min level (relative) so that the second
# LP stays feasible despite the first one's rounding.
REFINE_SLACK = 1e-7


def _status(outcome_status: str) -> str:
    return {"unbounded": "error"}.get(outcome_status, outcome_status)


def _solve_highspy(instance: AllocationInstance, aware: bool, refine: bool, time_limit: float | None,
                   threads: int, seed: int, algorithm: highs_runner.LpAlgorithm,
                   progress: Progress) -> tuple[highs_runner.LpOutcome, np.ndarray | None]:
    arrays = instance.arrays()
    started = time.perf_counter()
    lp, cells = max_min_fairness_lp(arrays, heterogeneity_aware=aware)
    highs = highs_runner.new_highs(time_limit, threads, seed)
    highs_runner.pass_lp(highs, lp, algorithm)
    build_s = time.perf_counter() - started
    progress(0.1, f"solving max-min LP ({lp.num_cols} columns, {lp.num_rows} rows)")
    outcome = highs_runner.run(highs)
    outcome.build_s = build_s
    if outcome.status == "optimal" and refine:
        level = outcome.objective
        t_column = lp.names["t"].start
        coefficient = fairness_coefficients(arrays, aware)[cells.job, cells.worker_type]
        costs = np.concatenate([coefficient, [0.0]])
        highs.changeColsCost(lp.num_cols, np.arange(lp.num_cols, dtype=np.int32), costs)
        floor = level - REFINE_SLACK * max(1.0, abs(level))
        highs.changeColBounds(t_column, floor, highs_runner.INF)
        progress(0.6, "refining: spare capacity to jobs above the max-min level")
        refined = highs_runner.run(highs)
        outcome.log += refined.log
        outcome.solve_s += refined.solve_s
        if refined.status == "optimal":
            outcome.values = refined.values
        else:
            outcome.log.append(f"refinement ended {refined.status}; keeping the max-min solution")
    if outcome.values is None:
        return outcome, None
    matrix = cells.to_matrix(outcome.values[lp.names["x"]], arrays.throughput.shape)
    return outcome, matrix


def _solve_pyomo(instance: AllocationInstance, aware: bool, refine: bool, time_limit: float | None,
                 threads: int, seed: int, algorithm: highs_runner.LpAlgorithm,
                 progress: Progress) -> tuple[highs_runner.LpOutcome, np.ndarray | None]:
    arrays = instance.arrays()
    progress(0.05, "building the Pyomo model")
    started = time.perf_counter()
    model, cells = max_min_fairness_pyomo(arrays, heterogeneity_aware=aware)
    build_s = time.perf_counter() - started
    progress(0.3, "solving the Pyomo model with HiGHS")
    outcome = highs_runner.solve_pyomo(model, time_limit=time_limit, threads=threads, seed=seed,
                                       algorithm=algorithm)
    outcome.build_s = build_s
    if outcome.status == "optimal" and refine:
        level = outcome.objective
        coefficient = fairness_coefficients(arrays, aware)
        model.t.setlb(level - REFINE_SLACK * max(1.0, abs(level)))
        model.fairness.deactivate()
        model.total = pyo.Objective(
            expr=sum(coefficient[m, j] * model.x[c]
                     for c, (m, j) in enumerate(zip(cells.job.tolist(), cells.worker_type.tolist(), strict=True))),
            sense=pyo.maximize,
        )
        refined = highs_runner.solve_pyomo(model, time_limit=time_limit, threads=threads, seed=seed,
                                           algorithm=algorithm)
        outcome.log += refined.log
        outcome.solve_s += refined.solve_s
        if refined.status != "optimal":
            outcome.log.append(f"refinement ended {refined.status}")
    if outcome.objective is None:
        return outcome, None
    values = np.array([pyo.value(model.x[c]) or 0.0 for c in range(len(cells.job))])
    return outcome, cells.to_matrix(values, arrays.throughput.shape)


def _max_min(instance: AllocationInstance, aware: bool, *, time_limit: float | None, seed: int,
             threads: int, progress: Progress, backend: Backend, lp_algorithm: highs_runner.LpAlgorithm,
             refine: bool) -> SolveResult:
    if backend not in ("highspy", "pyomo"):
        raise InstanceError("options.backend", f"unknown backend '{backend}' (highspy or pyomo)")
    run = _solve_highspy if backend == "highspy" else _solve_pyomo
    outcome, matrix = run(instance, aware, refine, time_limit, threads, seed, lp_algorithm, progress)
    progress(1.0, f"max-min LP: {outcome.status}")
    status = _status(outcome.status)
    if matrix is None:
        return SolveResult(status=status if status != "optimal" else "error", log=outcome.log,
                           message=f"HiGHS ended {outcome.status} with no solution")
    matrix = np.clip(matrix, 0.0, 1.0)
    plan = AllocationPlan.from_matrix(instance, matrix, policy="max_min_fairness")
    # The agnostic model optimizes time shares, not the judge's throughput score: its LP value
    # is not a bound on the heterogeneity-aware objective.
    return SolveResult(status=status, plan=plan, objective=outcome.objective if aware else None,
                       bound=outcome.objective if aware and status == "optimal" else None,
                       log=outcome.log, message=f"max-min fairness LP {outcome.status}",
                       stats={"build_s": outcome.build_s, "solve_s": outcome.solve_s})


@register("allocation", "max-min-fairness", exact=True, default=True,
          description="Gavel §4.1 heterogeneity-aware weighted max-min fairness (LAS) with scale "
                      "factors, an LP solved by HiGHS",
          reference="Narayanan et al., Gavel, OSDI 2020, §4.1")
def max_min_fairness(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                     threads: int = 1, progress: Progress, backend: Backend = "highspy",
                     lp_algorithm: highs_runner.LpAlgorithm = "auto", refine: bool = True) -> SolveResult:
    """Maximize the minimum weighted normalized throughput (Gavel §4.1).

    >>> import fleetplan
    >>> instance = fleetplan.generate("allocation", {"jobs": 8}, seed=0)
    >>> fleetplan.solve(instance, "max-min-fairness").status
    'optimal'
    """
    return _max_min(instance, True, time_limit=time_limit, seed=seed, threads=threads, progress=progress,
                    backend=backend, lp_algorithm=lp_algorithm, refine=refine)


@register("allocation", "max-min-fairness-agnostic", exact=False,
          description="heterogeneity-agnostic LAS baseline: max-min fairness of time shares, "
                      "blind to throughput differences between types",
          reference="Narayanan et al., Gavel, OSDI 2020, §4.1 (the baseline it improves on)")
def max_min_fairness_agnostic(instance: AllocationInstance, *, time_limit: float | None = None,
                              seed: int = 0, threads: int = 1, progress: Progress,
                              backend: Backend = "highspy",
                              lp_algorithm: highs_runner.LpAlgorithm = "auto",
                              refine: bool = True) -> SolveResult:
    """Max-min fairness over time shares, every accelerator treated alike (the §4.1 baseline).

    Judged by the same heterogeneity-aware objective, it shows what ignoring
    heterogeneity costs.
    """
    return _max_min(instance, False, time_limit=time_limit, seed=seed, threads=threads, progress=progress,
                    backend=backend, lp_algorithm=lp_algorithm, refine=refine)
