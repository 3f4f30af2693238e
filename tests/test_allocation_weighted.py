"""Weighted max-min fairness without the full LP: the refinement (keep the level, maximize the sum
of scores) by price decomposition, and a level set by a job's own best score, against the full
LP on random weighted instances; every plan through the judge."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan
from fleetplan.models.allocation.policies import PolicySpec
from fleetplan.solvers.allocation.lp import LpOptions, solve_spec
from fleetplan.solvers.allocation.price_decomposition import separable
from fleetplan.solvers.allocation.price_decomposition.separable_refine import refine


def _weighted(jobs: int, seed: int, share: float, weights: tuple[float, ...]):
    instance = fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1}, seed=seed)
    data = instance.model_dump()
    rng = np.random.default_rng(seed + 100)
    for i, m in enumerate(rng.choice(jobs, size=max(1, int(share * jobs)), replace=False).tolist()):
        data["jobs"][m]["weight"] = weights[i % len(weights)]
    return type(instance).model_validate(data)


def _las(arrays):
    share = arrays.num_workers / arrays.num_workers.sum()
    return PolicySpec("max_min", arrays.scale_factor / (arrays.weight * (arrays.throughput @ share)))


def _scores(arrays, spec, matrix):
    return (spec.coefficient[:, None] * arrays.throughput * matrix).sum(axis=1)


def test_refinement_by_hand():
    # Two jobs, two one-worker types, level 0.5: the sum of scores is largest with job 0 alone on
    # type 0 (2) and job 1 alone on type 1 (1), both above the level.
    A = np.array([[2.0, 1.0], [1.0, 1.0]])
    result = refine(A, np.zeros(2), np.ones(2), np.ones(2), np.ones(2), level=0.5)
    assert result.status == "optimal" and result.level == pytest.approx(3.0)
    assert result.matrix == pytest.approx(np.eye(2))
    # At level 1.5 job 1 cannot get there (its best score is 1): the method says so.
    assert refine(A, np.zeros(2), np.ones(2), np.ones(2), np.ones(2), level=1.5).status == "fallback"


@pytest.mark.parametrize("seed,share,weights", [
    (0, 0.01, (4.0,)), (1, 0.1, (2.0, 4.0, 8.0)), (2, 0.5, (2.0,)), (3, 0.5, (8.0,)), (4, 0.1, (2.0,)),
])
def test_weighted_las_equals_the_full_lp_and_its_refinement(seed, share, weights):
    arrays = _weighted(400, seed, share, weights).arrays()
    split = _decomposed_equals_full_lp(arrays)
    # Decomposed throughout: the refinement certified, or not needed (every job a bottleneck).
    assert any("refinement: certified optimal" in line or "refinement skipped" in line for line in split.log)


def test_a_level_set_by_one_job_is_found_without_the_full_lp():
    # One job at weight 8 cannot score above its ceiling (its best type, all its time, over 8):
    # that sets the level, no capacity price is positive, and every job ties at the prices. The
    # decomposition says so (status capped) and the refinement proves the level.
    arrays = _weighted(1200, 5, 0.001, (8.0,)).arrays()
    spec = _las(arrays)
    A = spec.coefficient[:, None] * np.where(arrays.runnable, arrays.throughput, 0.0)
    first = separable.max_min(A, np.zeros(len(A)), np.ones(len(A)), arrays.scale_factor, arrays.num_workers,
                              free_level=False, capped=True)
    ceiling = float(A.max(axis=1).min())
    assert first.status in ("capped", "optimal") and first.level == pytest.approx(ceiling, rel=1e-9)
    full = solve_spec(arrays, spec, LpOptions(decomposition="none", aggregate=False))
    split = solve_spec(arrays, spec, LpOptions(decomposition="prices", aggregate=False))
    assert split.objective == pytest.approx(full.objective, rel=1e-7)
    assert any("refinement: certified optimal" in line for line in split.log)


def test_fleetplan_solve_on_weighted_jobs_is_judged_and_equals_the_reference():
    instance = _weighted(1100, 6, 0.1, (2.0, 4.0, 8.0))
    result = fleetplan.solve(instance, "max-min-fairness")
    reference = fleetplan.solve(instance, "max-min-fairness", decomposition="none")
    assert result.status == reference.status == "optimal" and result.evaluation.violations == []
    assert result.objective == pytest.approx(reference.objective, rel=2e-7)
    assert any("refinement: certified optimal" in line for line in result.log)


def test_identical_jobs_merged_into_classes_refine_to_the_same_optimum():
    # Without throughput noise jobs repeat: the classes carry multiplicities into the refinement.
    instance = fleetplan.generate("allocation", {"jobs": 300}, seed=8)
    data = instance.model_dump()
    for m in range(0, 300, 7):
        data["jobs"][m]["weight"] = 4.0
    instance = type(instance).model_validate(data)
    result = fleetplan.solve(instance, "max-min-fairness", decomposition="prices")
    reference = fleetplan.solve(instance, "max-min-fairness", decomposition="none")
    assert result.status == reference.status == "optimal" and result.evaluation.violations == []
    assert result.objective == pytest.approx(reference.objective, rel=2e-7)
    assert not any("full LP" in line for line in result.log), result.log


def test_a_refinement_stopped_by_the_clock_keeps_the_max_min_plan(monkeypatch):
    import fleetplan.solvers.allocation.price_decomposition.separable_refine as refinement
    from fleetplan.solvers.allocation import lp

    arrays = _weighted(1200, 9, 0.5, (2.0,)).arrays()
    spec = _las(arrays)
    monkeypatch.setattr(refinement, "refine", lambda *args, **kwargs: separable.SeparableResult(
        "time_limit", log=["time limit in the refinement"]))
    # Without the try at the best-score bound, the max-min decomposition certifies this level.
    monkeypatch.setattr(lp, "CEILING_FIRST_SHARE", 0.0)
    outcome = solve_spec(arrays, spec, LpOptions(decomposition="prices", aggregate=False))
    full = solve_spec(arrays, spec, LpOptions(decomposition="none", aggregate=False, refine=False))
    # The max-min decomposition certified its plan, so that plan stands.
    assert not any("ceiling" in line for line in outcome.log)
    assert outcome.status == "optimal" and outcome.objective == pytest.approx(full.objective, rel=1e-7)
    assert "the max-min plan is kept unrefined" in outcome.log[-1]


def _with_unusable_types(jobs: int, seed: int, only_k80: float, weight: float):
    """Gavel's mix with ``only_k80`` of the jobs unable to run on v100 or p100, job 0 at ``weight``."""
    instance = fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1}, seed=seed)
    data = instance.model_dump()
    for m in np.random.default_rng(seed).choice(jobs, size=int(only_k80 * jobs), replace=False).tolist():
        data["jobs"][m]["throughput"].update(v100=0.0, p100=0.0)
    data["jobs"][0]["weight"] = weight
    return type(instance).model_validate(data)


def test_a_level_at_the_best_score_bound_is_proven_without_the_max_min_lp():
    # Half the jobs at weight 8: their best scores cap the level, and the workers could hold
    # every job there, so the refinement at that bound is tried first and its plan proves it.
    instance = _weighted(1100, 11, 0.5, (8.0,))
    result = fleetplan.solve(instance, "max-min-fairness", decomposition="prices")
    reference = fleetplan.solve(instance, "max-min-fairness", decomposition="none")
    assert result.status == reference.status == "optimal" and result.evaluation.violations == []
    assert result.objective == pytest.approx(reference.objective, rel=2e-7)
    assert any("tried first" in line for line in result.log)
    assert any("refinement: certified optimal" in line for line in result.log)
    assert not any("interior-point" in line for line in result.log), result.log


@pytest.mark.parametrize("only_k80,weight,how", [
    # The bound passes the workers' check but the optimum is a level just below it: the try
    # stops at its first infeasible reduced LP and the max-min method decides.
    (0.5, 2.0, "guess"),
    # Every job fits on its fastest type at the bound, so it is the level; the refinement
    # (started from that plan) does not certify here, and the full LP is solved once for it.
    (0.5, 4.0, "proven"),
    # The jobs that run only on k80 need more of them than there are at the bound: not tried.
    (0.7, 2.0, "not tried"),
])
def test_a_bound_the_refinement_cannot_certify_leaves_the_answer_to_the_lp(only_k80, weight, how):
    instance = _with_unusable_types(400, 3, only_k80, weight)
    result = fleetplan.solve(instance, "max-min-fairness", decomposition="prices")
    reference = fleetplan.solve(instance, "max-min-fairness", decomposition="none")
    assert result.status == reference.status == "optimal" and result.evaluation.violations == []
    assert result.objective == pytest.approx(reference.objective, rel=2e-7)
    assert any("tried first" in line for line in result.log) is (how != "not tried")
    assert any("no certified plan there" in line for line in result.log) is (how == "guess")
    if how == "proven":
        assert sum("buckets for the first prices" in line for line in result.log) == 1, result.log


def test_a_try_at_the_bound_stopped_by_the_clock_says_so(monkeypatch):
    import fleetplan.solvers.allocation.price_decomposition.separable_refine as refinement

    arrays = _weighted(1100, 11, 0.5, (8.0,)).arrays()
    monkeypatch.setattr(refinement, "refine", lambda *args, **kwargs: separable.SeparableResult(
        "time_limit", log=["time limit in the refinement"]))
    outcome = solve_spec(arrays, _las(arrays), LpOptions(decomposition="prices", aggregate=False))
    assert outcome.status == "time_limit" and outcome.matrix is None
    assert any("tried first" in line for line in outcome.log)


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_random_weighted_instances_with_ties_and_unusable_types_equal_the_full_lp(seed):
    # Repeated jobs (exact ties between jobs, kept apart: aggregate=False), Gavel's scale
    # factors 1-8, some types a job cannot use, and 1/2/4/8 priority weights on a random share.
    rng = np.random.default_rng(seed)
    instance = fleetplan.generate("allocation", {"jobs": 360}, seed=seed)
    data = instance.model_dump()
    for m in rng.choice(360, size=60, replace=False).tolist():
        data["jobs"][m]["throughput"][["v100", "p100", "k80"][int(rng.integers(3))]] = 0.0
    for m in rng.choice(360, size=int(rng.choice([4, 36, 180])), replace=False).tolist():
        data["jobs"][m]["weight"] = float(rng.choice([2.0, 4.0, 8.0]))
    arrays = type(instance).model_validate(data).arrays()
    _decomposed_equals_full_lp(arrays)


def test_picks_find_each_jobs_best_vertex_and_its_lead():
    # The in-place pass over the vertex rows against argmax and a sort of each job's values.
    from fleetplan.solvers.allocation.price_decomposition import separable_refine as refinement

    rng = np.random.default_rng(5)
    A = np.where(rng.random((500, 3)) < 0.2, 0.0, rng.random((500, 3)) + 0.1)
    A[A.max(axis=1) == 0, 0] = 1.0
    A[:50] = A[50:100]  # repeated jobs
    need = rng.random(500) * A.max(axis=1)
    mult, usage, lam = np.ones(500), rng.choice([1.0, 2.0, 4.0, 8.0], size=500), rng.random(3)
    choice, best, lead = refinement._picks(A, need, mult, usage, lam)
    values = refinement.vertex_values(A, need, np.where(A > 0, A - lam * usage[:, None], -np.inf))
    ordered = np.sort(values, axis=1)
    assert np.array_equal(choice, np.argmax(values, axis=1)) and np.array_equal(best, ordered[:, -1])
    expected = np.where(np.isfinite(ordered[:, -2]), (ordered[:, -1] - ordered[:, -2]) / A.max(axis=1), np.inf)
    assert np.allclose(lead, expected, rtol=0, atol=1e-15)


def test_buckets_tried_on_a_sample_first_are_the_same_buckets(monkeypatch):
    rng = np.random.default_rng(2)
    columns = np.log(rng.random((6000, 4)) + 0.01)
    columns[rng.random(6000) < 0.1, 1] = -np.inf
    sampled = separable.bucket_of(columns, 100)
    monkeypatch.setattr(separable, "BUCKET_SAMPLE", 10**9)
    everyone = separable.bucket_of(columns, 100)
    assert np.array_equal(sampled[0], everyone[0]) and np.array_equal(sampled[1], everyone[1])
    assert len(sampled[0]) <= 100


def test_a_schedulers_next_round_at_the_bound_tries_it_first_again():
    from fleetplan.solvers import warm

    instance = _weighted(1100, 12, 0.1, (4.0,))
    data = instance.model_dump()
    data["jobs"] = data["jobs"][5:]  # a few jobs finished
    following = type(instance).model_validate(data)
    state = warm.WarmStart()
    with warm.hints(state):
        first = fleetplan.solve(instance, "max-min-fairness")
    with warm.hints(state):
        second = fleetplan.solve(following, "max-min-fairness")
    # The first round's hint has no prices (its level was the ceiling): the next round tries
    # the ceiling before the max-min LP too, and still equals a cold solve.
    assert any("tried first" in line for line in first.log) and any("tried first" in line for line in second.log)
    assert state.offered == 1
    cold = fleetplan.solve(following, "max-min-fairness", decomposition="none")
    assert second.evaluation.violations == [] and second.objective == pytest.approx(cold.objective, rel=2e-7)


def _decomposed_equals_full_lp(arrays):
    """The decomposed solve against the full LP: no fall-back to the full LP, the same optimum (the
    level, which both keep to the refinement's relative 1e-7, and the refinement's sum of scores:
    where the refinement is skipped the full LP's may be larger by what that slack frees), and a
    feasible plan (time shares, runnable types, workers). Returns the decomposed outcome."""
    spec = _las(arrays)
    full = solve_spec(arrays, spec, LpOptions(decomposition="none", aggregate=False))
    split = solve_spec(arrays, spec, LpOptions(decomposition="prices", aggregate=False))
    assert full.status == split.status == "optimal"
    assert not any("full LP" in line for line in split.log), split.log
    full_scores, split_scores = _scores(arrays, spec, full.matrix), _scores(arrays, spec, split.matrix)
    assert split_scores.min() == pytest.approx(full_scores.min(), rel=2e-7)
    assert split_scores.sum() == pytest.approx(full_scores.sum(), rel=1e-6)
    assert split.matrix.min() >= 0 and split.matrix.sum(axis=1).max() <= 1 + 1e-7
    assert np.all(split.matrix[~arrays.runnable] == 0)
    used = (split.matrix * arrays.scale_factor[:, None]).sum(axis=0)
    assert np.all(used <= arrays.num_workers * (1 + 1e-7) + 1e-9)
    return split
