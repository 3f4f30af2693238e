"""The price decomposition against the full LP, which stays the reference: on
distinct jobs (per-job throughput noise) every form it takes reaches the LP's optimum, its plan
passes the judge, and hand-solved cases come out exactly."""

import numpy as np
import pytest

import fleetplan
from fleetplan.models.allocation.policies import PolicySpec
from fleetplan.solvers.allocation.lp import LpOptions, solve_spec
from fleetplan.solvers.allocation.price_decomposition import separable as allocation_separable
from fleetplan.solvers.allocation.price_decomposition import separable_linear


def _distinct(jobs, seed, **params):
    return fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1, **params}, seed=seed)


def test_generator_noise_makes_every_job_distinct_and_keeps_other_draws():
    plain = fleetplan.generate("allocation", {"jobs": 200}, seed=4)
    noisy = _distinct(200, 4)
    a, b = plain.arrays(), noisy.arrays()
    assert len(np.unique(a.throughput, axis=0)) < 80 and len(np.unique(b.throughput, axis=0)) == 200
    ratio = b.throughput / a.throughput
    assert ratio.min() >= 0.9 and ratio.max() <= 1.1
    assert [job.job_type for job in plain.jobs] == [job.job_type for job in noisy.jobs]
    assert np.array_equal(a.time_elapsed, b.time_elapsed) and np.array_equal(a.scale_factor, b.scale_factor)


def test_hand_solved_max_min():
    # Two jobs, two one-worker types, job 0 twice as fast on type 0. Job 1 scores at most 1 (its
    # time is at most 1, at throughput 1 everywhere), so t <= 1; t = 1 is reached with job 1 on
    # type 1 and job 0 on half of type 0 (2 x 0.5).
    A = np.array([[2.0, 1.0], [1.0, 1.0]])
    result = allocation_separable.max_min(A, np.zeros(2), np.ones(2), np.ones(2), np.ones(2), free_level=False)
    assert result.status == "optimal" and result.level == pytest.approx(1.0)
    scores = (A * result.matrix).sum(axis=1)
    assert scores.min() >= 1 - 1e-9 and result.matrix.sum(axis=0).max() <= 1 + 1e-9
    # The linear form: job 0 to type 0 (2), job 1 to type 1 (1): total 3.
    linear = separable_linear.linear(A, np.ones(2), np.ones(2), np.ones(2))
    assert linear.status == "optimal" and linear.level == pytest.approx(3.0)
    assert linear.matrix == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0]]))


def test_no_capacity_binds_by_hand():
    # Two jobs, two one-worker types, two workers each. Job 0 scores at most 2 (all its time on
    # type 0), job 1 at most 3: t = 2, job 0 on type 0 full time, job 1 on 2/3 of type 1.
    A = np.array([[2.0, 1.0], [1.0, 3.0]])
    level, matrix, score_duals = allocation_separable._no_capacity_binds(
        A, np.zeros(2), np.ones(2), np.array([2.0, 2.0]), False)
    assert level == pytest.approx(2.0)
    assert matrix == pytest.approx(np.array([[1.0, 0.0], [0.0, 2.0 / 3.0]]))
    # The proof: job 0's score row carries the whole weight, every worker is priced 0.
    assert score_duals.tolist() == [1.0, 0.0]
    result = allocation_separable.max_min(A, np.zeros(2), np.ones(2), np.ones(2), np.array([2.0, 2.0]), free_level=False)
    assert result.status == "optimal" and result.level == pytest.approx(2.0)
    assert result.prices.tolist() == [0.0, 0.0] and result.score_duals.tolist() == [1.0, 0.0]
    assert any("no capacity binding" in line for line in result.log)
    # Half a worker of type 0: job 0 no longer fits there at t = 2, so the capacity binds and the
    # decomposition prices it (t = 1.5: job 0 half on each type scores 1.5, job 1 on type 1).
    tight = np.array([0.5, 2.0])
    assert allocation_separable._no_capacity_binds(A, np.zeros(2), np.ones(2), tight, False) is None
    result = allocation_separable.max_min(A, np.zeros(2), np.ones(2), np.ones(2), tight, free_level=False)
    assert result.status == "optimal" and result.level == pytest.approx(1.5)
    assert not any("no capacity binding" in line for line in result.log)


def _lp_and_separable(arrays, spec, refine=False):
    lp = solve_spec(arrays, spec, LpOptions(decomposition="none", refine=refine, aggregate=False))
    separable = solve_spec(arrays, spec, LpOptions(decomposition="prices", refine=refine, aggregate=False))
    assert lp.status == separable.status == "optimal"
    return lp, separable


@pytest.mark.parametrize("seed,jobs,multi_gpu", [(0, 600, True), (1, 1500, True), (2, 800, False)])
def test_max_min_forms_equal_the_lp(seed, jobs, multi_gpu):
    arrays = _distinct(jobs, seed, multi_gpu=multi_gpu).arrays()
    share = arrays.num_workers / arrays.num_workers.sum()
    las = PolicySpec("max_min", arrays.scale_factor / (arrays.weight * (arrays.throughput @ share)))
    makespan = PolicySpec("max_min", 1.0 / arrays.steps_left)
    for spec in (las, makespan):
        lp, separable = _lp_and_separable(arrays, spec)
        assert separable.objective == pytest.approx(lp.objective, rel=1e-7)
        assert any("certified optimal" in line for line in separable.log)
        _check_feasible(arrays, separable.matrix)
        scores = (spec.coefficient[:, None] * arrays.throughput * separable.matrix).sum(axis=1)
        assert scores.min() >= separable.objective * (1 - 1e-7)


@pytest.mark.parametrize("multi_gpu", [True, False])
def test_a_tiny_reduced_lp_without_presolve_certifies_the_same_level(multi_gpu, monkeypatch):
    """Reduced LPs of at most TINY_LP_COLUMNS columns run without HiGHS's presolve: the same
    certified level as with it, with the reduced LP that small."""
    arrays = _distinct(600, 4, multi_gpu=multi_gpu).arrays()
    share = arrays.num_workers / arrays.num_workers.sum()
    A = (arrays.scale_factor / (arrays.weight * (arrays.throughput @ share)))[:, None] * arrays.throughput
    args = (A, np.zeros(600), np.ones(600), arrays.scale_factor, arrays.num_workers)
    columns = []
    solve_lp = allocation_separable._solve_lp
    monkeypatch.setattr(allocation_separable, "_solve_lp", lambda lp, *rest: columns.append(lp.num_cols) or
                        solve_lp(lp, *rest))
    tiny = allocation_separable.max_min(*args, free_level=False)
    assert tiny.status == "optimal" and columns[0] <= allocation_separable.TINY_LP_COLUMNS
    monkeypatch.setattr(allocation_separable, "TINY_LP_COLUMNS", 0)
    presolved = allocation_separable.max_min(*args, free_level=False)
    assert presolved.status == "optimal" and tiny.level == pytest.approx(presolved.level, rel=1e-12)


@pytest.mark.slow
def test_las_at_16384_distinct_jobs_reaches_the_full_lp_to_1e8():
    # With HiGHS's default tolerances (1e-7) on the reduced LP the certified level was 3.9e-7
    # below the full LP's (and below Gavel's own code's) on this instance.
    arrays = _distinct(16384, 0).arrays()
    share = arrays.num_workers / arrays.num_workers.sum()
    las = PolicySpec("max_min", arrays.scale_factor / (arrays.weight * (arrays.throughput @ share)))
    lp, separable = _lp_and_separable(arrays, las)
    assert separable.objective == pytest.approx(lp.objective, rel=1e-8)


def test_max_min_with_offsets_and_a_free_level_equals_the_lp():
    # One Dinkelbach step of finish-time fairness: rows w (R D - t) r(X) - z >= w s, z free.
    arrays = _distinct(700, 5).arrays()
    finish = arrays.time_elapsed + arrays.steps_left / arrays.isolated_throughput
    weight = 1.0 / (finish * arrays.isolated_throughput)
    room = 0.9 * finish - arrays.time_elapsed
    spec = PolicySpec("max_min", weight * room, offset=weight * arrays.steps_left)
    lp, separable = _lp_and_separable(arrays, spec)
    assert separable.objective == pytest.approx(lp.objective, rel=1e-7, abs=1e-9)
    _check_feasible(arrays, separable.matrix)


@pytest.mark.parametrize("seed", [0, 3])
def test_linear_forms_equal_the_lp(seed):
    arrays = _distinct(1200, seed).arrays()
    fastest = arrays.fastest_throughput
    for coefficient in (np.ones(1200), (1200 - arrays.arrival_rank) / fastest):  # max throughput, FIFO
        lp, separable = _lp_and_separable(arrays, PolicySpec("linear", coefficient))
        assert separable.objective == pytest.approx(lp.objective, rel=1e-7)  # the LP: IPM, no crossover
        _check_feasible(arrays, separable.matrix)
        value = float((coefficient[:, None] * arrays.throughput * separable.matrix).sum())
        assert value == pytest.approx(separable.objective, rel=1e-9)


@pytest.mark.parametrize("solver", ["max-min-fairness", "max-throughput", "min-makespan", "fifo",
                                    "finish-time-fairness"])
def test_fleetplan_solve_takes_the_decomposition_on_distinct_jobs_and_passes_the_judge(solver):
    instance = _distinct(1200, 7)
    result = fleetplan.solve(instance, solver)
    assert result.status == "optimal" and result.evaluation.violations == []
    assert any("separable" in line for line in result.log)
    reference = fleetplan.solve(instance, solver, aggregate=False, refine=False) if solver == "max-min-fairness" \
        else None
    if reference is not None:
        assert result.objective == pytest.approx(reference.objective, rel=1e-6)


def _check_feasible(arrays, matrix):
    assert matrix.min() >= 0 and matrix.sum(axis=1).max() <= 1 + 1e-7
    assert np.all(matrix[~arrays.runnable] == 0)
    used = (matrix * arrays.scale_factor[:, None]).sum(axis=0)
    assert np.all(used <= arrays.num_workers * (1 + 1e-7))


def test_decomposition_option_picks_the_method():
    instance = _distinct(300, 2)
    prices = fleetplan.solve(instance, "max-min-fairness", decomposition="prices")
    none = fleetplan.solve(instance, "max-min-fairness", decomposition="none")
    assert any("certified optimal" in line for line in prices.log)
    assert not any("separable" in line for line in none.log)
    assert prices.objective == pytest.approx(none.objective, rel=1e-6)  # the LP's refinement gives up 1e-7
    with pytest.raises(Exception, match="decomposition"):
        fleetplan.solve(instance, "max-throughput", decomposition="sometimes")



def _level_lp_both_ways(classes, levels, rate, prices="ipm"):
    """Water filling's level LP (Gavel §4.3) by HiGHS and by the decomposition with floors."""
    from fleetplan.models.allocation.water_filling import level_lp
    from fleetplan.solvers import highs as highs_runner

    full = highs_runner.solve_lp(level_lp(classes, levels, rate), algorithm="simplex")
    lifted = np.where(rate > 0, rate, 1.0)
    result = allocation_separable.max_min(
        classes.coefficient / lifted[:, None], levels / lifted, classes.count, classes.scale_factor,
        classes.num_workers, free_level=True, floor=rate <= 0, prices=prices, lp_tolerance=1e-10)
    return full, result


def _check_level_solution(classes, levels, rate, result, full):
    assert result.level == pytest.approx(full.objective, rel=1e-7, abs=1e-9)
    x = result.matrix[classes.cell_class, classes.cell_type]
    assert np.all(classes.scores(x) >= levels + rate * result.level - 1e-7)
    assert x.min() >= 0 and np.bincount(classes.cell_class, weights=x).max() <= 1 + 1e-9
    used = np.bincount(classes.cell_type, weights=x * (classes.count * classes.scale_factor)[classes.cell_class])
    assert np.all(used <= classes.num_workers * (1 + 1e-9))
    # The certificate's duals: prices and score multipliers, non-negative, one per row.
    assert result.prices.shape == classes.num_workers.shape and result.prices.min() >= 0
    assert result.score_duals.shape == (classes.num_classes,) and result.score_duals.min() >= 0


@pytest.mark.parametrize("seed", [0, 1])
def test_max_min_with_floors_equals_the_level_lp_on_water_filling_states(seed):
    """Rows ``score >= level + rate t`` for rising jobs and ``score >= level`` (floors, no t) for
    bottlenecked ones, at states hierarchical water filling passes through (distinct jobs, 5
    entities): the first, two cap events' and the last (the capacity binds), against HiGHS."""
    from fleetplan.instances.allocation.hierarchical import entity_view, hierarchical_job_weights
    from fleetplan.solvers.allocation.water_filling import hierarchical_run

    instance = _distinct(1200, seed, entities=5)
    classes, run = hierarchical_run(instance, aggregate=False)
    view = entity_view(instance)
    states = [(np.zeros(classes.num_classes), np.zeros(classes.num_classes, dtype=bool))] + run.history[:-1]
    picked = sorted({0, len(states) // 3, 2 * len(states) // 3, len(states) - 1})
    for index in picked:
        levels, done = states[index]
        rate = np.where(done, 0.0, hierarchical_job_weights(instance, done[classes.class_of_job], view)[classes.first_job])
        full, result = _level_lp_both_ways(classes, levels, rate)
        assert full.status == "optimal" and result.status == "optimal", (index, result.log)
        _check_level_solution(classes, levels, rate, result, full)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("prices", ["ipm", "buckets"])
def test_max_min_with_random_floors_is_the_lp_or_declines(seed, prices):
    """Floors drawn below what a feasible allocation reaches: where the decomposition certifies
    it equals HiGHS; where its prices are too far off it declines (fallback), never wrong."""
    from fleetplan.models.allocation.water_filling import job_classes, level_lp
    from fleetplan.solvers import highs as highs_runner

    arrays = _distinct(500 + 300 * seed, seed, multi_gpu=seed % 2 == 0, entities=3).arrays()
    classes = job_classes(arrays, arrays.weight[:, None], aggregate=False)
    n = classes.num_classes
    rng = np.random.default_rng(seed)
    rate = rng.uniform(0.5, 2.0, n)
    first = highs_runner.solve_lp(level_lp(classes, np.zeros(n), rate))
    reached = classes.scores(classes.feasible_part(first.values[:-1]))
    floor = rng.random(n) < 0.4
    levels = np.where(floor, reached * rng.uniform(0.5, 1.0, n), 0.5 * reached)
    rate = np.where(floor, 0.0, rate)
    full, result = _level_lp_both_ways(classes, levels, rate, prices)
    assert full.status == "optimal" and result.status in ("optimal", "fallback")
    if result.status == "optimal":
        _check_level_solution(classes, levels, rate, result, full)


def test_first_prices_stop_early_and_price_again_at_the_ceiling(monkeypatch):
    """The first prices stop at FIRST_PRICES_TOLERANCE, and the certified level is the one
    prices at the method's own tolerance give; a level near the ceiling (a job's best score)
    is priced again at that tolerance before the ceiling test."""
    from fleetplan.solvers.allocation.interior_point import ipm

    calls = []
    original = ipm.max_min_prices

    def recording(*args, **kwargs):
        calls.append(kwargs["tolerance"])
        return original(*args, **kwargs)

    monkeypatch.setattr(ipm, "max_min_prices", recording)
    rng = np.random.default_rng(3)
    A = rng.uniform(0.5, 3.0, (300, 3))
    usage, W = rng.choice([1.0, 2.0], 300), np.full(3, 20.0)
    loose = allocation_separable.max_min(A, np.zeros(300), np.ones(300), usage, W, free_level=False)
    assert loose.status == "optimal" and calls == [allocation_separable.FIRST_PRICES_TOLERANCE]
    monkeypatch.setattr(allocation_separable, "FIRST_PRICES_TOLERANCE", ipm.TOLERANCE)
    tight = allocation_separable.max_min(A, np.zeros(300), np.ones(300), usage, W, free_level=False)
    assert tight.status == "optimal" and tight.level == pytest.approx(loose.level, rel=1e-12)
    assert loose.stats["ipm_iterations"] < tight.stats["ipm_iterations"]
    monkeypatch.undo()
    monkeypatch.setattr(ipm, "max_min_prices", recording)
    calls.clear()
    # 64 jobs fastest on type 0 (one worker), type 1 holds them all; job 0's best score, 0.1,
    # caps the level, which the workers reach: the ceiling.
    A = np.column_stack([np.full(64, 2.0), np.full(64, 1.9)])
    A[0] = [0.1, 0.095]
    capped = allocation_separable.max_min(A, np.zeros(64), np.ones(64), np.ones(64), np.array([1.0, 64.0]),
                                          free_level=False, capped=True)
    assert capped.status == "capped" and capped.level == pytest.approx(0.1, rel=1e-12)
    assert calls == [allocation_separable.FIRST_PRICES_TOLERANCE, ipm.TOLERANCE]
