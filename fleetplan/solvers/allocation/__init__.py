"""Solvers of the ``allocation`` kind: Gavel's max-min fairness (LAS), heterogeneity-aware and
agnostic (Gavel §4.1).

Both solve the max-min LP of :mod:`fleetplan.models.allocation.policies` through
:mod:`fleetplan.solvers.allocation.lp`: HiGHS through ``highspy`` directly (default: fast to
build), the Pyomo reference model (``backend="pyomo"``), or OR-Tools GLOP / PDLP
(``backend="ortools-glop"`` / ``"ortools-pdlp"``). Identical jobs share variables
(``aggregate=True``); ``partitions=k`` solves k random parts (POP); ``space_sharing=True`` adds
rows for job pairs (§3.1) from the instance's colocations, pruned by
:func:`fleetplan.models.allocation.pairs.candidate_pairs` unless ``prune_pairs=False``. These
options, shared by every LP-solved policy, are declared once
(:class:`~fleetplan.solvers.allocation.lp.AllocationLpOptions`) and reach a solver as its ``lp``.

*Priorities*: Gavel's LAS maximizes min_m throughput / (w_m throughput(m, X_equal)) *
scale_factor_m, where w_m are the jobs' priority weights (Table 1, "LAS w/ weights") — the
jobs' ``weight`` field. ``priorities=False`` solves plain LAS (every weight 1, Table 1 "LAS"),
judged by the ``max_min_fairness_unweighted`` objective.

A max-min LP fixes only the smallest score; the other jobs' shares are whatever vertex the
solver lands on, which can leave capacity idle. With ``refine=True`` (the default) a second LP
keeps the max-min level and maximizes the sum of the same scores, so spare capacity goes to
jobs that can use it. The refinement gives up a relative 1e-7 of the minimum by design: it
holds ``t >= level * (1 - 1e-7)`` (:func:`fleetplan.models.allocation.policies.refinement_lp`)
so that the first LP's own rounding cannot make the second infeasible; the reported objective
is the refined plan's minimum, within 1e-7 of the first LP's optimum.

*Agnostic baselines*: ``baseline="runnable"`` (default) sees throughput 1 on every type a job
can run on and 0 elsewhere; ``baseline="gavel"`` sees 1 on every type, zeros included, as
Gavel's own baselines (see :func:`fleetplan.solvers.allocation.policies.gavel_agnostic_arrays`).
The cost of ignoring heterogeneity is the ratio of the aware objective to the agnostic plan's,
both judged with measured throughputs; it depends on which baseline is named. The agnostic
LP's many optima are tied; ``ties="spread"`` (default) spreads each job's time over its types in
proportion to their workers (:mod:`fleetplan.solvers.allocation.agnostic`), ``ties="vertex"``
keeps the vertex the LP solver returns. An agnostic plan reports ``feasible``, not ``optimal``:
its LP's optimum is the time-share model's, not the judged objective's.

Beside the policies (:mod:`~fleetplan.solvers.allocation.policies`, their drivers and the LP of
:mod:`~fleetplan.solvers.allocation.lp`), three families have their own sub-packages:
:mod:`~fleetplan.solvers.allocation.price_decomposition` (the exact decomposition of large LPs),
:mod:`~fleetplan.solvers.allocation.interior_point` (the prices it starts from) and
:mod:`~fleetplan.solvers.allocation.water_filling` (Gavel §4.3). The compiled kernels
(``ipm_kernels``, ``vertex_kernels``) stay in this folder, where ``pyproject.toml`` builds them.
"""

from __future__ import annotations

from fleetplan.instances.allocation import AllocationInstance
from fleetplan.solvers.allocation.lp import AllocationLpOptions
from fleetplan.solvers.allocation.policies import (
    BASELINE_MEANING,
    REFINED,
    TIES_MEANING,
    AgnosticBaseline,
    Ties,
    document,
    drive_max_min_fairness,
    solve_policy,
)
from fleetplan.solvers.base import Progress, SolveResult, register


def _max_min(instance: AllocationInstance, aware: bool, priorities: bool, **options) -> SolveResult:
    policy = "max_min_fairness" if priorities else "max_min_fairness_unweighted"
    return solve_policy(instance, drive_max_min_fairness, aware=aware, policy=policy, weighted=priorities, **options)


def _document_agnostic(function):
    document(function, function.__doc__.strip(), {"baseline": BASELINE_MEANING, "ties": TIES_MEANING})
    return function


def _document(function):
    document(function, function.__doc__.strip())
    return function


@register("allocation", "max-min-fairness", exact=True, default=True,
          description="Gavel §4.1 heterogeneity-aware weighted max-min fairness (LAS) with scale "
                      "factors, an LP solved by HiGHS",
          reference="Narayanan et al., Gavel, OSDI 2020, §4.1")
@_document
def max_min_fairness(instance: AllocationInstance, *, time_limit: float | None = None, seed: int = 0,
                     threads: int = 1, progress: Progress, lp: AllocationLpOptions = REFINED,
                     priorities: bool = True) -> SolveResult:
    """Maximize the minimum weighted normalized throughput (Gavel §4.1).

    >>> import fleetplan
    >>> instance = fleetplan.generate("allocation", {"jobs": 8}, seed=0)
    >>> fleetplan.solve(instance, "max-min-fairness").status
    'optimal'
    """
    return _max_min(instance, True, priorities, time_limit=time_limit, seed=seed, threads=threads,
                    progress=progress, lp=lp)


@register("allocation", "max-min-fairness-agnostic", exact=False,
          description="heterogeneity-agnostic LAS baseline: max-min fairness of time shares, "
                      "blind to throughput differences between types",
          reference="Narayanan et al., Gavel, OSDI 2020, §4.1 (the baseline it improves on)")
@_document_agnostic
def max_min_fairness_agnostic(instance: AllocationInstance, *, time_limit: float | None = None,
                              seed: int = 0, threads: int = 1, progress: Progress,
                              lp: AllocationLpOptions = REFINED, priorities: bool = True,
                              baseline: AgnosticBaseline = "runnable", ties: Ties = "spread") -> SolveResult:
    """Max-min fairness over time shares, every accelerator treated alike (the §4.1 baseline).
    Judged by the same heterogeneity-aware objective, it shows what ignoring heterogeneity costs.
    """
    return _max_min(instance, False, priorities, time_limit=time_limit, seed=seed, threads=threads,
                    progress=progress, lp=lp, baseline=baseline, ties=ties)
