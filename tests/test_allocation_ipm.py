"""The structured interior-point method that prices Gavel's max-min LP: its level
equals the full LP's optimum (HiGHS) on random instances with runnable masks, offsets and free
levels, and the decomposition it starts is certified in few rounds with a small reduced LP."""

import numpy as np
import pytest

from fleetplan.models.linear import INF, LinearProgram
from fleetplan.solvers import highs as highs_runner
from fleetplan.solvers.allocation.interior_point.ipm import linear_prices, max_min_prices
from fleetplan.solvers.allocation.price_decomposition import separable as allocation_separable
from fleetplan.solvers.allocation.price_decomposition import separable_linear


def _lp_level(A, offset, usage, W, free_level, rate=None):
    """The full LP by HiGHS: columns x (n K, only runnable cells) and t."""
    import scipy.sparse as sp

    n, K = A.shape
    job, kind = np.nonzero(A > 0)
    cells, t_col = len(job), len(job)
    rows = np.concatenate([job, n + job, 2 * n + kind, np.arange(n)])
    cols = np.concatenate([np.arange(cells)] * 3 + [np.full(n, t_col)])
    vals = np.concatenate([A[job, kind], np.ones(cells), usage[job], -(np.ones(n) if rate is None else rate)])
    lp = LinearProgram(cost=np.concatenate([np.zeros(cells), [1.0]]),
                       matrix=sp.csr_matrix((vals, (rows, cols)), shape=(2 * n + K, cells + 1)),
                       row_lower=np.concatenate([offset, np.full(n + K, -INF)]),
                       row_upper=np.concatenate([np.full(n, INF), np.ones(n), W]),
                       col_lower=np.concatenate([np.zeros(cells), [-INF if free_level else 0.0]]),
                       col_upper=np.concatenate([np.ones(cells), [INF]]), sense="max")
    highs = highs_runner.new_highs(None, 1, 0)
    highs_runner.pass_lp(highs, lp, "simplex")
    outcome = highs_runner.run(highs)
    assert outcome.status == "optimal"
    return float(outcome.values[t_col])


def _instance(seed, n, K, masked, offsets):
    rng = np.random.default_rng(seed)
    A = rng.uniform(0.2, 3.0, size=(n, K)) * rng.uniform(0.5, 2.0, size=(n, 1))
    if masked:
        A[rng.random((n, K)) < 0.25] = 0.0
        A[np.arange(n), rng.integers(0, K, n)] = rng.uniform(0.2, 3.0, n)  # every job runs somewhere
    usage = rng.choice([1.0, 2.0, 4.0], size=n)
    W = rng.integers(n // 4, n, size=K).astype(float)
    offset = rng.uniform(-0.5, 0.5, n) if offsets else np.zeros(n)
    return A, offset, usage, W


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("masked,offsets", [(False, False), (True, False), (True, True)])
def test_level_equals_the_lp(seed, masked, offsets):
    A, offset, usage, W = _instance(seed, 60 + 40 * seed, 2 + seed % 3, masked, offsets)
    prices = max_min_prices(A, offset, usage, W, free_level=offsets)
    assert prices.status in ("optimal", "approximate")
    # Prices only: the normal equations lose digits near the optimum, so the level is as close as
    # the most accurate iterate (the decomposition certifies the exact optimum from there).
    assert prices.level == pytest.approx(_lp_level(A, offset, usage, W, offsets), rel=1e-4, abs=1e-7)
    assert np.all(prices.lam >= 0)


def test_hand_solved_level_and_prices():
    # Two one-worker types; job 0 scores 2 on type 0, job 1 scores 1 anywhere. t = 1 (job 1's
    # whole time), with job 0 on half of type 0: type 0 has slack, so its price is 0, and type 1
    # is the one whose worker raises t (price > 0).
    prices = max_min_prices(np.array([[2.0, 1.0], [1.0, 1.0]]), np.zeros(2), np.ones(2), np.ones(2),
                            free_level=False)
    # Job 1's score and time rows are parallel (equal throughputs), so the normal equations turn
    # singular near the optimum and the method returns its most accurate iterate.
    assert prices.level == pytest.approx(1.0, abs=1e-5)
    assert prices.lam[0] == pytest.approx(0.0, abs=1e-5)


def test_decomposition_from_interior_point_prices_is_certified_with_a_small_reduced_lp():
    A, offset, usage, W = _instance(11, 3000, 3, masked=True, offsets=False)
    W = W / 8  # scarce workers: the capacity binds, so the prices decide (not one job's own time)
    result = allocation_separable.max_min(A, offset, np.ones(len(A)), usage, W, free_level=False)
    assert result.status == "optimal"
    assert any("interior-point prices" in line and "not_converged" not in line for line in result.log)
    assert result.stats["separable_rounds"] <= 3 and result.stats["separable_free"] < 600
    assert result.level == pytest.approx(_lp_level(A, offset, usage, W, False), rel=1e-7)
    bucketed = allocation_separable.max_min(A, offset, np.ones(len(A)), usage, W, free_level=False, prices="buckets")
    assert bucketed.level == pytest.approx(result.level, rel=1e-7)


@pytest.mark.parametrize("seed", range(4))
def test_rates_and_floors_equal_the_lp(seed):
    # Water filling's level LP: rising jobs lift at their own rates, bottlenecked ones (rate 0)
    # keep a floor the level does not lift.
    A, _, usage, W = _instance(20 + seed, 80 + 30 * seed, 2 + seed % 2, masked=seed % 2 == 1, offsets=False)
    rng = np.random.default_rng(seed)
    rate = rng.uniform(0.5, 2.0, len(A))
    floors = rng.random(len(A)) < 0.3
    rate[floors] = 0.0
    offset = np.where(floors, 0.05 * A.max(axis=1), 0.0)
    prices = max_min_prices(A, offset, usage, W, free_level=False, rate=rate)
    assert prices.status in ("optimal", "approximate")
    assert prices.level == pytest.approx(_lp_level(A, offset, usage, W, False, rate), rel=1e-4, abs=1e-7)


@pytest.mark.parametrize("masked,offsets", [(False, False), (True, True)])
def test_restricted_prices_equal_the_method_on_every_job(masked, offsets, monkeypatch):
    # Above RESTRICT_ABOVE jobs the prices come from a sample, then from the method on the jobs
    # near a tie with the others held at their vertices: the same optimum as on every job.
    from fleetplan.solvers.allocation.interior_point import ipm

    # (smaller thresholds than the defaults, so that HiGHS proves the optimum in a test's time)
    monkeypatch.setattr(ipm, "RESTRICT_ABOVE", 2_000)
    monkeypatch.setattr(ipm, "SAMPLE_MIN", 500)
    A, offset, usage, W = _instance(5, 3_000, 3, masked, offsets)
    W = W / 8  # scarce workers: every type's price is positive
    calls = []
    restricted = ipm._restricted_max_min_prices
    monkeypatch.setattr(ipm, "_restricted_max_min_prices", lambda *a: calls.append(restricted(*a)) or calls[-1])
    prices = max_min_prices(A, offset, usage, W, free_level=offsets)
    assert calls and calls[0] is not None, "the restricted path declined"
    optimum = _lp_level(A, offset, usage, W, offsets)
    assert prices.level == pytest.approx(optimum, rel=1e-5)
    assert np.all(prices.lam > 0)
    monkeypatch.setattr(ipm, "RESTRICT_ABOVE", 10**9)
    everyone = max_min_prices(A, offset, usage, W, free_level=offsets)
    # With offsets and a free level no capacity binds here: both methods' prices are 0 up to
    # their accuracy, i.e. lam . W below NEGLIGIBLE_PRICES of the level.
    negligible = ipm.NEGLIGIBLE_PRICES * abs(optimum) / W.sum()
    assert np.allclose(prices.lam, everyone.lam, rtol=1e-4, atol=negligible)
    monkeypatch.undo()
    result = allocation_separable.max_min(A, offset, np.ones(len(A)), usage, W, free_level=offsets)
    assert result.status == "optimal" and result.level == pytest.approx(optimum, rel=1e-7)


def _linear_lp_value(P, usage, W):
    import scipy.sparse as sp

    n, K = P.shape
    job, kind = np.nonzero(P > 0)
    cells = len(job)
    lp = LinearProgram(cost=P[job, kind],
                       matrix=sp.csr_matrix((np.concatenate([np.ones(cells), usage[job]]),
                                             (np.concatenate([job, n + kind]), np.concatenate([np.arange(cells)] * 2))),
                                            shape=(n + K, cells)),
                       row_lower=np.full(n + K, -INF), row_upper=np.concatenate([np.ones(n), W]),
                       col_lower=np.zeros(cells), col_upper=np.ones(cells), sense="max")
    highs = highs_runner.new_highs(None, 1, 0)
    highs_runner.pass_lp(highs, lp, "simplex")
    outcome = highs_runner.run(highs)
    assert outcome.status == "optimal"
    return float(np.dot(P[job, kind], outcome.values))


@pytest.mark.parametrize("seed", range(4))
def test_linear_prices_give_the_lp_optimum_through_the_decomposition(seed):
    A, _, usage, W = _instance(seed, 1000 + 200 * seed, 3, masked=seed % 2 == 1, offsets=False)
    prices = linear_prices(A, usage, W)
    assert prices.status in ("optimal", "approximate") and np.all(prices.lam >= 0)
    # Weak duality: the Lagrangian bound at these prices is at least the optimum, and close to it.
    reduced = np.where(A > 0, A - prices.lam[None, :] * usage[:, None], 0.0)
    bound = float(np.maximum(reduced.max(axis=1), 0.0).sum() + prices.lam @ W)
    optimum = _linear_lp_value(A, usage, W)
    assert optimum <= bound * (1 + 1e-9) and bound == pytest.approx(optimum, rel=1e-4)
    result = separable_linear.linear(A, np.ones(len(A)), usage, W)
    assert result.status == "optimal" and result.level == pytest.approx(optimum, rel=1e-7)


@pytest.mark.filterwarnings("error")
def test_no_usable_cell_at_all():
    # One type with no workers: every cell is masked, every job idles, t = 0 (found by a fuzz run:
    # the step-length test took the maximum of an all-NaN slice).
    A = np.array([[1.0], [2.0], [0.5]])
    prices = max_min_prices(A, np.zeros(3), np.ones(3), np.array([0.0]), free_level=False)
    assert prices.status in ("optimal", "approximate") and prices.level == pytest.approx(0.0, abs=1e-6)
    assert linear_prices(A, np.ones(3), np.array([0.0])).status in ("optimal", "approximate")


@pytest.mark.parametrize("seed,scarcity,restricted_applies", [(8, 4, True), (8, 8, True)])
def test_restricted_linear_prices_give_the_lp_optimum(seed, scarcity, restricted_applies, monkeypatch):
    # Linear forms above RESTRICT_ABOVE jobs: sample prices, then the method on the jobs whose
    # best type does not win clearly. Where the sample's prices are too far off (scarcity 8: the
    # held jobs alone overfill a type, and the path used to decline and price every job) the
    # held jobs of that type that win by least are released first: either way
    # the Lagrangian bound closes on the LP's optimum and the decomposition reaches it.
    from fleetplan.solvers.allocation.interior_point import ipm

    monkeypatch.setattr(ipm, "RESTRICT_ABOVE", 2_000)
    monkeypatch.setattr(ipm, "SAMPLE_MIN", 500)
    A, _, usage, W = _instance(seed, 3_000, 3, masked=True, offsets=False)
    W = W / scarcity
    calls = []
    restricted = ipm._restricted_linear_prices
    monkeypatch.setattr(ipm, "_restricted_linear_prices", lambda *a: calls.append(restricted(*a)) or calls[-1])
    prices = linear_prices(A, usage, W)
    assert len(calls) == 1 and (calls[0] is not None) == restricted_applies
    reduced = np.where(A > 0, A - prices.lam[None, :] * usage[:, None], 0.0)
    bound = float(np.maximum(reduced.max(axis=1), 0.0).sum() + prices.lam @ W)
    optimum = _linear_lp_value(A, usage, W)
    assert optimum <= bound * (1 + 1e-9) and bound == pytest.approx(optimum, rel=1e-6)
    result = separable_linear.linear(A, np.ones(len(A)), usage, W, prices="ipm")
    assert result.status == "optimal" and result.level == pytest.approx(optimum, rel=1e-7)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_loose_run_refines_late_and_still_prices_the_lp(seed, monkeypatch):
    """At LOOSE_TOLERANCE the method refines only near its tolerance: the level is the full
    LP's to that tolerance, in no more iterations than refining from REFINE_BELOW."""
    from fleetplan.solvers.allocation.interior_point import ipm

    rng = np.random.default_rng(seed)
    A = rng.uniform(0.5, 3.0, (400, 3))
    A[rng.random((400, 3)) < 0.2] = 0.0
    A[A.max(axis=1) == 0, 0] = 1.0
    usage, W = rng.choice([1.0, 2.0], 400), np.full(3, 40.0)
    loose = max_min_prices(A, np.zeros(400), usage, W, free_level=False, tolerance=ipm.LOOSE_TOLERANCE)
    assert ipm._refine_below(ipm.LOOSE_TOLERANCE) < ipm.REFINE_BELOW == ipm._refine_below(ipm.TOLERANCE)
    monkeypatch.setattr(ipm, "_refine_below", lambda tolerance: ipm.REFINE_BELOW)
    early = max_min_prices(A, np.zeros(400), usage, W, free_level=False, tolerance=ipm.LOOSE_TOLERANCE)
    assert loose.status == early.status == "optimal" and loose.iterations <= early.iterations
    assert loose.level == pytest.approx(_lp_level(A, np.zeros(400), usage, W, False), rel=1e-4)


def _uneven_cluster(seed, n):
    """LAS-like rows (a job speed times a type speed) on three types shared by jobs of 1, 2 or
    4 workers: the capacity binds."""
    rng = np.random.default_rng(seed)
    A = rng.uniform(0.5, 3.0, (n, 3)) * rng.uniform(0.5, 2.0, (n, 1))
    return A, rng.choice([1.0, 2.0, 4.0], n), np.full(3, n / 8)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_loose_run_from_the_scaled_start_prices_the_lp_in_fewer_iterations(seed, monkeypatch):
    """A loose run (the separable method's first prices) starts from duals of the optimum's
    order (ipm_systems.START_TIME_DUAL): the same level to its tolerance in fewer iterations
    than from the classic start; a tight run keeps the classic start."""
    from fleetplan.solvers.allocation.interior_point import ipm
    from fleetplan.solvers.allocation.interior_point.ipm_systems import MaxMin

    A, usage, W = _uneven_cluster(seed, 300)
    optimum = _lp_level(A, np.zeros(300), usage, W, False)
    scaled = max_min_prices(A, np.zeros(300), usage, W, free_level=False, tolerance=1e-4)
    starts = []
    original = MaxMin.start
    monkeypatch.setattr(MaxMin, "start", lambda self, *args: starts.append(args) or original(self, *args))
    tight = max_min_prices(A, np.zeros(300), usage, W, free_level=False, tolerance=ipm.TOLERANCE)
    assert starts == [(2.0, None)]  # the classic start
    monkeypatch.setattr(MaxMin, "start", lambda self, *args: original(self, 2.0, None))
    classic = max_min_prices(A, np.zeros(300), usage, W, free_level=False, tolerance=1e-4)
    assert scaled.status == classic.status == tight.status == "optimal"
    assert scaled.iterations < classic.iterations
    assert scaled.level == pytest.approx(optimum, rel=1e-3) and tight.level == pytest.approx(optimum, rel=1e-7)


def test_a_loose_run_that_diverges_from_the_scaled_start_runs_again_from_the_classic_one(monkeypatch):
    from fleetplan.solvers.allocation.interior_point import ipm

    A, usage, W = _uneven_cluster(2, 300)
    real = ipm._iterations
    calls = []

    def first_diverges(system, point, *args):
        calls.append(point.y.copy())
        return ("not_converged", None, 7) if len(calls) == 1 else real(system, point, *args)

    monkeypatch.setattr(ipm, "_iterations", first_diverges)
    prices = max_min_prices(A, np.zeros(300), usage, W, free_level=False, tolerance=1e-4)
    assert len(calls) == 2 and not np.allclose(calls[0], calls[1])
    assert prices.status == "optimal" and prices.iterations > 7
    assert prices.level == pytest.approx(_lp_level(A, np.zeros(300), usage, W, False), rel=1e-3)
