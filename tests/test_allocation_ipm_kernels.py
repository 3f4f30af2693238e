"""The interior-point method's compiled iterations (fleetplan/solvers/allocation/ipm_kernels.py)
against its numpy iterations, the reference: the same levels and prices to rounding, about the
same iteration counts, and the switch, the deadline and the singular fallback route as
documented. (tests/test_allocation_ipm.py checks the compiled path against HiGHS.)"""

import numpy as np
import pytest

from fleetplan.solvers import kernels
from fleetplan.solvers.allocation import ipm_kernels
from fleetplan.solvers.allocation.interior_point import ipm
from fleetplan.solvers.deadline import Deadline


def _instance(seed, n, K, masked, offsets):
    rng = np.random.default_rng(seed)
    A = rng.uniform(0.2, 3.0, size=(n, K)) * rng.uniform(0.5, 2.0, size=(n, 1))
    if masked:
        A[rng.random((n, K)) < 0.25] = 0.0
        A[np.arange(n), rng.integers(0, K, n)] = rng.uniform(0.2, 3.0, n)
    usage = rng.choice([1.0, 2.0, 4.0], size=n)
    W = rng.integers(n // 40, n // 10, size=K).astype(float)  # scarce: every price positive
    offset = rng.uniform(-0.5, 0.5, n) if offsets else np.zeros(n)
    return A, offset, usage, W


def _both(monkeypatch, compute):
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "0")
    reference = compute()
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "1")
    return reference, compute()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("masked,offsets,rates", [(False, False, False), (True, False, True), (True, True, False)])
def test_max_min_compiled_equals_numpy(seed, masked, offsets, rates, monkeypatch):
    A, offset, usage, W = _instance(seed, 150 + 50 * seed, 2 + seed % 3, masked, offsets)
    rate = np.random.default_rng(seed).uniform(0.5, 2.0, len(A)) if rates else None
    reference, compiled = _both(monkeypatch, lambda: ipm.max_min_prices(A, offset, usage, W, free_level=offsets,
                                                                         rate=rate))
    # (With offsets and a free level no capacity may bind: prices 0, reached only approximately.)
    assert reference.status == compiled.status
    assert compiled.status == "optimal" or (offsets and compiled.status == "approximate")
    assert compiled.level == pytest.approx(reference.level, rel=1e-7, abs=1e-9)
    negligible = ipm.NEGLIGIBLE_PRICES * abs(reference.level) / W.sum()
    assert np.allclose(compiled.lam, reference.lam, rtol=1e-5, atol=negligible)
    assert abs(compiled.iterations - reference.iterations) <= 2


@pytest.mark.parametrize("seed", range(3))
def test_linear_compiled_equals_numpy(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    A, _, usage, W = _instance(seed, 200, 3, masked=seed > 0, offsets=False)
    P = A * rng.uniform(0.5, 2.0, size=(len(A), 1))
    reference, compiled = _both(monkeypatch, lambda: ipm.linear_prices(P, usage, W))
    assert reference.status == compiled.status == "optimal"
    assert np.allclose(compiled.lam, reference.lam, rtol=1e-5, atol=1e-9 * P.max())
    assert abs(compiled.iterations - reference.iterations) <= 2


def test_held_jobs_compiled_equals_numpy(monkeypatch):
    # The restricted rounds hold jobs outside the system (capacity rows with a level term and
    # reduced right-hand sides, Mehrotra's start): both iterations give the same prices.
    monkeypatch.setattr(ipm, "RESTRICT_ABOVE", 2_000)
    monkeypatch.setattr(ipm, "SAMPLE_MIN", 500)
    A, offset, usage, W = _instance(5, 3_000, 3, masked=True, offsets=False)
    reference, compiled = _both(monkeypatch, lambda: ipm.max_min_prices(A, offset, usage, W, free_level=False))
    assert compiled.status == reference.status == "optimal"
    assert compiled.level == pytest.approx(reference.level, rel=1e-7)
    assert np.allclose(compiled.lam, reference.lam, rtol=1e-5)


def test_the_switch_routes_to_the_numpy_iterations(monkeypatch):
    A, offset, usage, W = _instance(0, 100, 2, masked=False, offsets=False)
    calls = []
    iterate = ipm_kernels.iterate
    monkeypatch.setattr(ipm_kernels, "iterate", lambda *a: calls.append(1) or iterate(*a))
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "0")
    assert ipm.max_min_prices(A, offset, usage, W, free_level=False).status == "optimal"
    assert not calls
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "1")
    assert ipm.max_min_prices(A, offset, usage, W, free_level=False).status == "optimal"
    assert calls


def test_an_expired_deadline_stops_the_compiled_iterations(monkeypatch):
    A, offset, usage, W = _instance(1, 100, 3, masked=False, offsets=False)
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "1")
    prices = ipm.max_min_prices(A, offset, usage, W, free_level=False, deadline=Deadline(0.0))
    assert prices.status == "time_limit" and prices.lam is None


def test_chunks_between_deadline_checks_give_the_same_answer(monkeypatch):
    # One iteration per kernel call (the deadline checked between each) against one call.
    A, offset, usage, W = _instance(2, 300, 3, masked=True, offsets=False)
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "1")
    whole = ipm.max_min_prices(A, offset, usage, W, free_level=False)
    monkeypatch.setattr(ipm, "KERNEL_CHUNK_CELLS", 1)
    chunked = ipm.max_min_prices(A, offset, usage, W, free_level=False)
    assert chunked.iterations == whole.iterations
    assert chunked.level == whole.level and np.array_equal(chunked.lam, whole.lam)


def test_a_singular_schur_complement_falls_back_to_numpy(monkeypatch):
    A, offset, usage, W = _instance(3, 120, 2, masked=False, offsets=False)
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "0")
    reference = ipm.max_min_prices(A, offset, usage, W, free_level=False)
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "1")
    monkeypatch.setattr(ipm_kernels, "iterate", lambda *a: (ipm_kernels.SINGULAR, 1))
    fallback = ipm.max_min_prices(A, offset, usage, W, free_level=False)
    assert fallback.level == reference.level and fallback.iterations == reference.iterations


def test_invert_matches_numpy_and_reports_singular():
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(5, 5)) + 5 * np.eye(5)
    inverse = np.empty((5, 5))
    assert ipm_kernels.invert_small(matrix, inverse)
    assert np.allclose(inverse, np.linalg.inv(matrix))
    assert not ipm_kernels.invert_small(np.ones((3, 3)), np.empty((3, 3)))


def test_kernels_off_or_not_built_load_nothing(monkeypatch):
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "0")
    assert kernels.load("fleetplan.solvers.allocation.ipm_kernels") is None
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "1")
    assert kernels.load("fleetplan.solvers.allocation.ipm_kernels") is ipm_kernels
    assert kernels.load("fleetplan.solvers.allocation.no_such_kernels") is None


def test_kept_work_arrays_carry_nothing_between_calls(monkeypatch):
    # The work arrays are kept for the next call of the same size: a problem solved after
    # another of its size gives, to the bit, what it gives first in line or with fresh arrays.
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "1")
    first = _instance(6, 400, 3, masked=True, offsets=False)
    other = _instance(7, 400, 3, masked=False, offsets=True)
    monkeypatch.setattr(ipm_kernels, "WORK_ARRAYS_KEPT", 0)  # fresh arrays every call
    fresh = ipm.max_min_prices(*first, free_level=False)
    monkeypatch.setattr(ipm_kernels, "WORK_ARRAYS_KEPT", 65_536)
    ipm.max_min_prices(*first, free_level=False)
    assert ipm_kernels._kept_work_arrays is not None
    ipm.max_min_prices(*other, free_level=True)
    again = ipm.max_min_prices(*first, free_level=False)
    assert again.level == fresh.level and np.array_equal(again.lam, fresh.lam)
    assert again.iterations == fresh.iterations
    # The linear form leaves some max-min arrays unused: it runs on kept arrays all the same.
    P = first[0] * 1.5
    fresh_linear = ipm.linear_prices(P, first[2], first[3])
    ipm.max_min_prices(*first, free_level=False)
    assert np.array_equal(ipm.linear_prices(P, first[2], first[3]).lam, fresh_linear.lam)
