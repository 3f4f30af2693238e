"""Gavel's policy interface over fleetplan's allocation solvers: dicts in, dicts out.

Gavel's scheduler calls ``policy.get_allocation(...)`` every time its set of jobs changes, with
plain dicts keyed by job id and worker type, and reads back ``{job_id: {worker_type: share}}``
(``None`` when there are no jobs). Each class here has the signature of the Gavel policy of the
same name (``scheduler/policies/*.py``), so a Gavel scheduler can use fleetplan's solvers
unchanged — construct it with Gavel's ``solver`` argument (ignored: fleetplan picks its own
back-end) or with a fleetplan option:

=======================================  =======================================================
Gavel policy                             call shape (positional, as Gavel's scheduler calls it)
=======================================  =======================================================
``MaxMinFairnessPolicyWithPerf``         throughputs, scale_factors, priority_weights, cluster_spec
``MaxMinFairnessPolicy``                 the same (heterogeneity-agnostic)
``FinishTimeFairnessPolicyWithPerf``     throughputs, scale_factors, priority_weights,
                                         times_since_start, num_steps_remaining, cluster_spec
``FinishTimeFairnessPolicy``             the same (heterogeneity-agnostic)
``ThroughputSumWithPerf``                throughputs, scale_factors, cluster_spec
``MinTotalDurationPolicyWithPerf``       throughputs, scale_factors, num_steps_remaining, cluster_spec
=======================================  =======================================================

Behind each policy is an :class:`~fleetplan.embed.AllocationSession`: a call sends the session
only what changed since the last call (jobs that arrived, left or whose numbers changed; the
cluster's counts), so the re-solve is warm and checked like any session change. Job ids may be
any hashable (Gavel's ``JobIdPair`` of a single job included) and come back as given; space
sharing pairs (``job_id.is_pair()``) are refused: use fleetplan's ``space_sharing`` option on
an instance instead.

>>> policy = MaxMinFairnessPolicyWithPerf(solver="ECOS")
>>> shares = policy.get_allocation({"a": {"v100": 4.0, "k80": 1.0}, "b": {"v100": 2.0, "k80": 1.5}},
...                                {"a": 1, "b": 1}, {"a": 1.0, "b": 1.0}, {"v100": 1, "k80": 1})
>>> sorted(shares), sorted(shares["a"])
(['a', 'b'], ['k80', 'v100'])
>>> policy.get_allocation({}, {}, {}, {"v100": 1, "k80": 1}) is None
True
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from fleetplan.instances.base import InstanceError


class GavelPolicy:
    """A fleetplan allocation solver behind Gavel's ``get_allocation``; the subclasses give
    Gavel's call shapes. ``solver`` is Gavel's argument (its CVXPY back-end: ignored);
    ``options`` are the fleetplan solver's."""

    fleetplan_solver = "max-min-fairness"
    gavel_name = "MaxMinFairness_Perf"

    def __init__(self, solver: Any = None, **options: Any) -> None:
        from fleetplan.solvers import get_solver

        self._options = get_solver("allocation", self.fleetplan_solver).check_options(options)
        self._session: Any = None
        self._types: tuple[str, ...] = ()
        self._rows: dict[str, tuple[Any, ...]] = {}  # job -> the numbers the session holds for it

    @property
    def name(self) -> str:
        return self.gavel_name

    def _allocate(self, throughputs: Mapping[Hashable, Mapping[str, float]], scale_factors: Mapping[Hashable, int],
                  cluster_spec: Mapping[str, int], priority_weights: Mapping[Hashable, float] | None = None,
                  times_since_start: Mapping[Hashable, float] | None = None,
                  num_steps_remaining: Mapping[Hashable, float] | None = None) -> dict[Hashable, dict[str, float]] | None:
        from fleetplan.embed.allocation import AllocationSession

        if not throughputs:
            return None
        keys = list(throughputs)
        for key in keys:
            if callable(getattr(key, "is_pair", None)) and key.is_pair():
                raise InstanceError("throughputs", f"job {key} is a space-sharing pair: not supported here")
        ids = [str(key) for key in keys]
        if len(set(ids)) != len(ids):
            raise InstanceError("throughputs", "two job ids have the same text; give distinct ids")
        types = tuple(sorted(cluster_spec))  # Gavel's own order
        if self._session is None or types != self._types:
            self._session = AllocationSession({name: int(cluster_spec[name]) for name in types},
                                              solver=self.fleetplan_solver, **self._options)
            self._types, self._rows = types, {}
        elif self._session.workers != {name: int(cluster_spec[name]) for name in types}:
            self._session.set_workers({name: int(cluster_spec[name]) for name in types})
        rows = {}
        for key, job in zip(keys, ids, strict=True):
            rows[job] = (tuple(float(throughputs[key].get(name, 0.0)) for name in types), int(scale_factors[key]),
                         float(priority_weights[key]) if priority_weights is not None else 1.0,
                         float(times_since_start[key]) if times_since_start is not None else 0.0,
                         float(num_steps_remaining[key]) if num_steps_remaining is not None else None)
        gone = [job for job in self._rows if job not in rows]
        arrived = [job for job in ids if job not in self._rows]
        changed = [job for job in ids if job in self._rows and self._rows[job] != rows[job]]
        if gone:
            self._session.remove_jobs(gone)
        for batch, apply in ((changed, self._session.update_jobs), (arrived, self._session.add_jobs)):
            if batch:
                apply(self._columns(batch, rows))
        self._rows = rows
        plan = self._session.solve().plan
        share = dict(zip(plan.job_ids, plan.allocation, strict=True))
        return {key: dict(zip(types, share[job], strict=True)) for key, job in zip(keys, ids, strict=True)}

    @staticmethod
    def _columns(jobs: list[str], rows: dict[str, tuple[Any, ...]]) -> dict[str, Any]:
        columns: dict[str, Any] = {"id": jobs, "throughput": np.array([rows[job][0] for job in jobs]),
                                   "scale_factor": [rows[job][1] for job in jobs],
                                   "weight": [rows[job][2] for job in jobs],
                                   "time_elapsed": [rows[job][3] for job in jobs]}
        steps = [rows[job][4] for job in jobs]
        if any(value is not None for value in steps):
            columns["steps_left"] = [np.nan if value is None else value for value in steps]
        return columns


class MaxMinFairnessPolicyWithPerf(GavelPolicy):
    """Gavel's heterogeneity-aware least attained service (max-min fairness, §4.1)."""

    def get_allocation(self, unflattened_throughputs: Any, scale_factors: Any, unflattened_priority_weights: Any,
                       cluster_spec: Any) -> dict[Hashable, dict[str, float]] | None:
        return self._allocate(unflattened_throughputs, scale_factors, cluster_spec,
                              priority_weights=unflattened_priority_weights)


class MaxMinFairnessPolicy(MaxMinFairnessPolicyWithPerf):
    """Gavel's heterogeneity-agnostic max-min fairness."""

    fleetplan_solver = "max-min-fairness-agnostic"
    gavel_name = "MaxMinFairness"


class FinishTimeFairnessPolicyWithPerf(GavelPolicy):
    """Gavel's finish-time fairness (Themis' metric, §4.2)."""

    fleetplan_solver = "finish-time-fairness"
    gavel_name = "FinishTimeFairness_Perf"

    def get_allocation(self, unflattened_throughputs: Any, scale_factors: Any, unflattened_priority_weights: Any,
                       times_since_start: Any, num_steps_remaining: Any,
                       cluster_spec: Any) -> dict[Hashable, dict[str, float]] | None:
        return self._allocate(unflattened_throughputs, scale_factors, cluster_spec,
                              priority_weights=unflattened_priority_weights, times_since_start=times_since_start,
                              num_steps_remaining=num_steps_remaining)


class FinishTimeFairnessPolicy(FinishTimeFairnessPolicyWithPerf):
    """Gavel's heterogeneity-agnostic finish-time fairness."""

    fleetplan_solver = "finish-time-fairness-agnostic"
    gavel_name = "FinishTimeFairness"


class ThroughputSumWithPerf(GavelPolicy):
    """Gavel's total-throughput maximisation."""

    fleetplan_solver = "max-throughput"
    gavel_name = "ThroughputSumWithPerf"

    def get_allocation(self, unflattened_throughputs: Any, scale_factors: Any,
                       cluster_spec: Any) -> dict[Hashable, dict[str, float]] | None:
        return self._allocate(unflattened_throughputs, scale_factors, cluster_spec)


class MinTotalDurationPolicyWithPerf(GavelPolicy):
    """Gavel's makespan minimisation."""

    fleetplan_solver = "min-makespan"
    gavel_name = "MinTotalDuration_Perf"

    def get_allocation(self, unflattened_throughputs: Any, scale_factors: Any, num_steps_remaining: Any,
                       cluster_spec: Any) -> dict[Hashable, dict[str, float]] | None:
        return self._allocate(unflattened_throughputs, scale_factors, cluster_spec,
                              num_steps_remaining=num_steps_remaining)
