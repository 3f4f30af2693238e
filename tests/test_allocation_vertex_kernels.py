"""Each job's closed-form vertices compiled (fleetplan/solvers/allocation/vertex_kernels.pyx)
against the numpy code (fleetplan/solvers/allocation/price_decomposition/vertices.py with FLEETPLAN_KERNELS=0):
the same bits, on random jobs with unusable types, offsets of both signs, floors, prices of 0
and ties."""

import numpy as np
import pytest

from fleetplan.solvers import kernels
from fleetplan.solvers.allocation.price_decomposition import vertices


def _jobs(seed, n=400, K=4):
    rng = np.random.default_rng(seed)
    A = rng.uniform(0.2, 3.0, size=(n, K))
    A[rng.random((n, K)) < 0.3] = 0.0
    A[:20] = A[20:40]  # some jobs twice, some types tied within a job
    if K > 1:
        A[40:60, 1] = A[40:60, 0]
    offset = np.where(rng.random(n) < 0.5, rng.uniform(-1.0, 1.0, n), 0.0)
    usage = rng.choice([1.0, 2.0, 4.0], size=n)
    lam = rng.uniform(0.0, 0.01, K)
    lam[rng.integers(0, K)] = 0.0
    floor = rng.random(n) < 0.2
    return A, offset, usage, lam, floor


def _both(monkeypatch, compute):
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "0")
    reference = compute()
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "1")
    assert kernels.load(vertices.COMPILED) is not None, "the vertex kernels were not built"
    return reference, compute()


def _same(reference, compiled):
    for expected, got in zip(reference, compiled, strict=True):
        assert got.dtype.kind == expected.dtype.kind
        assert np.array_equal(np.asarray(got), np.asarray(expected), equal_nan=True)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("level", [0.0, 0.4, 1.3])
@pytest.mark.parametrize("with_floor", [False, True])
def test_best_vertices_and_closeness_are_the_same_bits(seed, level, with_floor, monkeypatch):
    A, offset, usage, lam, floor = _jobs(seed)
    floor = floor if with_floor else None
    W = np.full(A.shape[1], 50.0)
    _same(*_both(monkeypatch, lambda: vertices.best_vertices(A, offset, level, lam, usage, floor)))
    _same(*_both(monkeypatch, lambda: vertices.closeness(A, offset, level, lam, usage, W, floor)))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("with_floor", [False, True])
def test_vertex_affine_is_the_same_bits(seed, with_floor, monkeypatch):
    A, offset, usage, lam, floor = _jobs(seed)
    monkeypatch.setenv(kernels.ENVIRONMENT_SWITCH, "0")
    choice = vertices.best_vertices(A, offset, 0.7, lam + 1e-3, usage)[0]
    assert {-2, -1}.issubset(set(choice.tolist())) or (choice >= A.shape[1]).any()
    floor = floor if with_floor else None
    _same(*_both(monkeypatch, lambda: vertices.vertex_affine(A, offset, choice, floor)))


def test_one_type_has_no_runner_up(monkeypatch):
    A, offset, usage, lam, _ = _jobs(0, K=1)
    reference, compiled = _both(monkeypatch, lambda: vertices.best_vertices(A, offset, 0.5, lam, usage))
    _same(reference, compiled)
    assert np.isinf(compiled[2]).all()
