"""Gavel's policy interface over fleetplan (:mod:`fleetplan.embed.gavel`): called with Gavel's
positional call shapes and dicts (job ids of any hashable type, Gavel's ``JobIdPair`` of a
single job included), each answer is a valid allocation keyed as given and equals a cold
``fleetplan.solve`` of the same jobs; a sequence of calls with jobs arriving, leaving and
changing answers as fresh policies would."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan
from fleetplan.embed import gavel
from fleetplan.instances import InstanceError

CLUSTER = {"v100": 2, "p100": 1, "k80": 3}


class JobIdPair:
    """Gavel's job id (scheduler/job_id_pair.py's shape): a single job or a pair."""

    def __init__(self, first: int, second: int | None = None):
        self._pair = (first, second)

    def is_pair(self) -> bool:
        return self._pair[1] is not None

    def __hash__(self) -> int:
        return hash(self._pair)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobIdPair) and other._pair == self._pair

    def __str__(self) -> str:
        return str(self._pair[0]) if self._pair[1] is None else str(self._pair)


def _jobs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    keys = [JobIdPair(k) for k in range(n)]
    throughputs = {key: {t: float(v) for t, v in zip(CLUSTER, rng.uniform(0.5, 4.0, 3).round(3), strict=True)}
                   for key in keys}
    scale = {key: int(rng.choice([1, 1, 2])) for key in keys}
    weights = {key: float(rng.choice([1.0, 2.0])) for key in keys}
    elapsed = {key: float(rng.uniform(0, 3600)) for key in keys}
    steps = {key: float(rng.uniform(1e3, 1e5)) for key in keys}
    return throughputs, scale, weights, elapsed, steps


def _cold(solver: str, throughputs, scale, weights=None, elapsed=None, steps=None):
    jobs = []
    for key in throughputs:
        job = {"id": str(key), "throughput": throughputs[key], "scale_factor": scale[key]}
        if weights is not None:
            job["weight"] = weights[key]
        if elapsed is not None:
            job["time_elapsed"] = elapsed[key]
        if steps is not None:
            job["steps_left"] = steps[key]
        jobs.append(job)
    instance = {"kind": "allocation", "worker_types": [{"name": t, "count": c} for t, c in sorted(CLUSTER.items())],
                "jobs": jobs}
    return fleetplan.solve(instance, solver), fleetplan.instances.instance_from_data(instance)


def _judged(instance, shares, cold):
    """The judge's score of the policy's shares, as a plan of the cold solve's policy."""
    by_id = {str(key): row for key, row in shares.items()}
    plan = cold.plan.model_copy(update={"allocation": [[by_id[job][t] for t in cold.plan.worker_types]
                                                       for job in cold.plan.job_ids]})
    return fleetplan.evaluate(instance, plan)


CALLS = {
    gavel.MaxMinFairnessPolicyWithPerf: lambda p, th, sc, w, e, st: p.get_allocation(th, sc, w, CLUSTER),
    gavel.MaxMinFairnessPolicy: lambda p, th, sc, w, e, st: p.get_allocation(th, sc, w, CLUSTER),
    gavel.FinishTimeFairnessPolicyWithPerf: lambda p, th, sc, w, e, st: p.get_allocation(th, sc, w, e, st, CLUSTER),
    gavel.ThroughputSumWithPerf: lambda p, th, sc, w, e, st: p.get_allocation(th, sc, CLUSTER),
    gavel.MinTotalDurationPolicyWithPerf: lambda p, th, sc, w, e, st: p.get_allocation(th, sc, st, CLUSTER),
}


@pytest.mark.parametrize("policy_class", list(CALLS))
def test_gavel_call_shapes_answer_as_a_cold_solve(policy_class):
    throughputs, scale, weights, elapsed, steps = _jobs(12, seed=1)
    policy = policy_class(solver="ECOS")
    shares = CALLS[policy_class](policy, throughputs, scale, weights, elapsed, steps)
    assert set(shares) == set(throughputs)  # Gavel's own keys come back
    types = sorted(CLUSTER)
    for row in shares.values():
        assert set(row) == set(types) and sum(row.values()) <= 1 + 1e-6 and min(row.values()) >= -1e-9
    for t in types:
        assert sum(shares[key][t] * scale[key] for key in shares) <= CLUSTER[t] + 1e-6
    uses = {gavel.MaxMinFairnessPolicyWithPerf: "wt", gavel.MaxMinFairnessPolicy: "wt",
            gavel.FinishTimeFairnessPolicyWithPerf: "wes", gavel.ThroughputSumWithPerf: "",
            gavel.MinTotalDurationPolicyWithPerf: "s"}[policy_class]
    cold, instance = _cold(policy_class.fleetplan_solver, throughputs, scale, weights if "w" in uses else None,
                           elapsed if "e" in uses else None, steps if "s" in uses else None)
    assert _judged(instance, shares, cold).objective == pytest.approx(cold.objective, rel=1e-6, abs=1e-9)


def test_a_sequence_of_rounds_answers_as_fresh_policies():
    throughputs, scale, weights, _, _ = _jobs(30, seed=2)
    keys = list(throughputs)
    policy = gavel.MaxMinFairnessPolicyWithPerf(solver=None)
    live = keys[:10]
    for step in range(6):
        live = live[2:] + keys[10 + 3 * step:13 + 3 * step]  # two leave, three arrive
        if step == 3:
            throughputs[live[0]] = {t: v * 1.5 for t, v in throughputs[live[0]].items()}  # re-measured
        now = {key: throughputs[key] for key in live}
        cluster = dict(CLUSTER, k80=2 if step >= 4 else 3)
        warm = policy.get_allocation(now, scale, weights, cluster)
        fresh = gavel.MaxMinFairnessPolicyWithPerf(solver=None).get_allocation(now, scale, weights, cluster)
        assert set(warm) == set(live)
        for key in live:
            for t in cluster:
                assert warm[key][t] == pytest.approx(fresh[key][t], abs=1e-6)


def test_no_jobs_and_pairs():
    policy = gavel.MaxMinFairnessPolicyWithPerf(solver=None)
    assert policy.get_allocation({}, {}, {}, CLUSTER) is None
    pair = JobIdPair(0, 1)
    with pytest.raises(InstanceError, match="space-sharing pair"):
        policy.get_allocation({pair: {"v100": 1.0}}, {pair: 1}, {pair: 1.0}, CLUSTER)
    assert policy.name == "MaxMinFairness_Perf"
