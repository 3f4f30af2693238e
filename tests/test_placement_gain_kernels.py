"""The compiled per-table gains of Tetris's hill climb (``placement/climb/gain_kernels.py``)
§4) against the numpy code they replace (``first_pass.table_gains_numpy``): the same bits on
random states, under every reading of Figure 4 (split ML jobs' demand, combined overload), with
Expression 6's floor and the CPU capacities at today's use so the full checks run; and the
switch ``FLEETPLAN_KERNELS=0``."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan
from fleetplan.instances.placement import PlacementInstance
from fleetplan.solvers.placement.climb import estimates, first_pass
from fleetplan.solvers.placement.climb.first_pass import table_gains_numpy
from fleetplan.solvers.placement.climb.state import TetrisState

gain_kernels = pytest.importorskip("fleetplan.solvers.placement.climb.gain_kernels")
exact_kernels = pytest.importorskip("fleetplan.solvers.placement.climb.exact_kernels")


@pytest.fixture(autouse=True)
def _kernels_at_every_size(monkeypatch):
    # Solves use the numba kernels only from JIT_MIN_SIZE tables; these states are smaller.
    from fleetplan.solvers import kernels

    monkeypatch.setattr(kernels, "JIT_MIN_SIZE", 0)

OPTIONS = [(split, overload) for split in ("ignored", "largest_region")
           for overload in ("per_priority", "combined_high_priority")]


def random_state(seed: int, split: str, overload: str, tight: bool,
                 compound: bool = False) -> tuple[TetrisState, np.random.Generator]:
    rng = np.random.default_rng(seed)
    params = {"regions": int(rng.integers(2, 9)), "tables": int(rng.integers(3, 160)),
              "jobs": int(rng.integers(5, 260)), "ml_share": float(rng.choice([0.3, 0.6, 1.0])),
              "move_quota_share": None}
    data = fleetplan.generate("placement", params, seed=seed).model_dump()
    data["split_ml_demand"], data["overload_form"] = split, overload
    state = TetrisState(PlacementInstance.model_validate(data), compound=compound)
    if tight:  # the home-training floor and the CPU capacities at today's use: full checks
        state.hp_floor = state.hp_at_home - 1e-9
        state.arrays.cpu_capacity[:] = state.cpu  # this test's own instance
    return state, rng


def walk(state: TetrisState, rng: np.random.Generator, steps: int) -> None:
    """Random feasible moves (good or bad), so the state is not today's placement."""
    for _ in range(steps):
        table = int(rng.integers(state.num_tables))
        gains, _, _ = state._candidates(table)
        feasible = np.flatnonzero(np.isfinite(gains))
        if feasible.size:
            state.apply(state.move_to(table, int(rng.choice(feasible))))


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("split", "overload"), OPTIONS)
def test_the_kernel_gives_the_numpy_gains_and_terms_bit_for_bit(seed, split, overload):
    state, rng = random_state(seed, split, overload, tight=bool(seed % 2))
    tables = np.arange(state.num_tables)
    for step in range(4):
        batch = tables if step == 0 else rng.choice(tables, size=int(rng.integers(1, tables.size + 1)))
        gains, terms = gain_kernels.table_gains(state, batch)
        reference, reference_terms = table_gains_numpy(state, batch)
        assert np.array_equal(gains, reference), (step, np.argwhere(gains != reference)[:5])
        assert same_bits(terms + 0.0, reference_terms + 0.0)  # + 0.0: a zero's sign aside
        walk(state, rng, steps=8)


def test_the_full_checks_decide_some_candidates():
    # The tight states above must exercise Expression 6 and the CPU check: some candidate that
    # the storage capacity allows is refused by them.
    refused = 0
    for seed in (1, 3, 5):
        state, _ = random_state(seed, "ignored", "per_priority", tight=True)
        tables = np.arange(state.num_tables)
        gains, _ = gain_kernels.table_gains(state, tables)
        _, allowed = first_pass.storage_terms(state, tables)
        refused += int((allowed & ~np.isfinite(gains)).sum())
    assert refused > 0


def test_a_larger_instance_with_the_default_generator():
    instance = fleetplan.generate("placement", {"regions": 20, "tables": 3000, "jobs": 3000}, seed=1)
    state = TetrisState(instance)
    rng = np.random.default_rng(0)
    walk(state, rng, steps=30)
    tables = np.arange(3000)
    kernel = gain_kernels.table_gains(state, tables)[0]
    assert np.array_equal(kernel, table_gains_numpy(state, tables)[0])
    head = rng.choice(tables, size=33, replace=False)  # an estimate-sized batch
    assert np.array_equal(gain_kernels.table_gains(state, head)[0], table_gains_numpy(state, head)[0])


def test_the_switch_runs_the_numpy_code(monkeypatch):
    state, _ = random_state(2, "ignored", "per_priority", tight=False)
    tables = np.arange(state.num_tables)
    calls = []
    monkeypatch.setattr(gain_kernels, "table_gains", lambda s, t, keep=False: calls.append(1) or table_gains_numpy(s, t))
    first_pass.table_gains(state, tables)
    estimates.cached_gains(state, tables)
    assert len(calls) == 2
    monkeypatch.setenv("FLEETPLAN_KERNELS", "0")
    first_pass.table_gains(state, tables)
    estimates.cached_gains(state, tables)
    assert len(calls) == 2 and state.pair_cache  # the numpy estimates keep their entries


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("split", "overload"), OPTIONS)
def test_the_exact_evaluation_kernel_gives_the_numpy_bits(seed, split, overload):
    # TetrisState._evaluate with its per-job loops compiled (exact_kernels) against
    # _evaluate_numpy: gains, terms and what apply reads, for every table of random states.
    state, rng = random_state(seed + 100, split, overload, tight=bool(seed % 2))
    for _ in range(3):
        for table in range(state.num_tables):
            gains, terms, info = exact_kernels.evaluate(state, table)
            reference, reference_terms, reference_info = state._evaluate_numpy(table)
            assert same_bits(gains, reference), table
            assert same_bits(terms + 0.0, reference_terms + 0.0), table
            assert info.keys() == reference_info.keys()
            for name, value in info.items():
                assert np.array_equal(value, reference_info[name]), (table, name)
        walk(state, rng, steps=10)


@pytest.mark.parametrize("seed", range(6))
def test_kept_pairs_give_the_same_bits_as_the_numpy_code(seed, monkeypatch):
    # The batch estimates keep each table's pairs and traffic in the kernel's slots until a move
    # changes one of its readers' tables (TetrisState._forget). Random moves, compound moves
    # tried (applied and undone) between estimates, and a few slots (so they fill and start
    # over): the kept gains stay those of the numpy code.
    monkeypatch.setattr(gain_kernels, "SLOTS", 7)
    split, overload = OPTIONS[seed % len(OPTIONS)]
    state, rng = random_state(seed + 200, split, overload, tight=bool(seed % 2), compound=True)
    tables = state.num_tables
    kept = 0
    for _ in range(60):
        batch = rng.choice(tables, size=min(5, tables), replace=False)
        if state.kernel_slots is not None:
            kept += int((state.kernel_slots[batch] >= 0).sum())
        gains = estimates.cached_gains(state, batch)
        assert np.array_equal(gains, table_gains_numpy(state, batch)[0])
        if state.num_items() > tables and rng.random() < 0.3:
            state.best_move(int(rng.integers(tables, state.num_items())))
        walk(state, rng, steps=1)
    assert kept > 0


def test_a_small_climb_does_not_start_numba():
    # numba's start-up (seconds) would dwarf a small climb: below JIT_MIN_SIZE the numpy code runs.
    import subprocess
    import sys

    code = ("import sys, fleetplan; i = fleetplan.generate('placement', {'tables': 200, 'jobs': 200}, seed=0); "
            "r = fleetplan.solve(i, 'hill-climb'); print(r.status, 'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "FLEETPLAN_KERNELS": "1"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "False"
