"""Tetris's incremental gains against the judge (MAST §3.4): for random moves
on small generated instances, each candidate's gain equals evaluate()'s objective difference,
also after a random walk that empties and refills demand cells; and the 3-table instance on
which the climb once moved one table back and forth forever now converges."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan
from fleetplan.instances.placement import PlacementPlan
from fleetplan.solvers.placement.climb.state import TetrisState

# The reported instance (2 regions, 3 tables, 27 ML jobs).
CYCLING = {"regions": 2, "tables": 3, "jobs": 27, "gpu_types": 2, "applications": 4, "ml_share": 1.0,
           "first_time_share": 0.7, "popularity_skew": 1.2, "load": 1.2, "storage_headroom": 3.0,
           "move_quota_share": 0.05, "dr_policy": "largest_gpu_supply"}


def judged(instance, home) -> float:
    return fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, np.asarray(home))).objective


def walk_and_check(instance, rng, steps: int) -> int:
    """Random walk over feasible moves (good or bad); every candidate's gain is checked."""
    state = TetrisState(instance)
    tables = instance.arrays().num_tables
    checked = 0
    for _ in range(steps):
        table = int(rng.integers(tables))
        gains, _, _ = state._candidates(table)
        before = judged(instance, state.home)
        feasible = np.flatnonzero(np.isfinite(gains))
        for region in feasible.tolist():
            home = state.home.copy()
            home[table] = region
            assert -gains[region] == pytest.approx(judged(instance, home) - before, abs=1e-9, rel=1e-9)
            checked += 1
        if feasible.size:
            move = state.move_to(table, int(rng.choice(feasible)))
            state.apply(move)
            assert sum(state.objective_terms.values()) == pytest.approx(judged(instance, state.home), abs=1e-9)
    return checked


@pytest.mark.parametrize("seed", range(6))
def test_gains_equal_the_judges_difference_along_random_walks(seed):
    rng = np.random.default_rng(seed)
    params = {"regions": int(rng.integers(2, 5)), "tables": int(rng.integers(3, 12)),
              "jobs": int(rng.integers(5, 30)), "ml_share": float(rng.choice([0.5, 1.0])),
              "move_quota_share": None}
    instance = fleetplan.generate("placement", params, seed=seed)
    assert walk_and_check(instance, rng, steps=30) > 0


def test_gains_on_the_cycling_instance():
    instance = fleetplan.generate("placement", CYCLING, seed=8620)
    assert walk_and_check(instance, np.random.default_rng(0), steps=40) > 0


def test_the_cycling_instance_converges():
    instance = fleetplan.generate("placement", CYCLING, seed=8620)
    keep = fleetplan.solve(instance, "keep")
    result = fleetplan.solve(instance, "hill-climb", time_limit=20.0)
    assert result.status == "feasible"  # converged, not stopped by the clock
    assert result.stats["moves"] <= instance.arrays().num_tables
    assert result.objective < keep.objective
    assert result.model_objective == pytest.approx(result.objective, abs=1e-9)
    assert result.evaluation.violations == []


@pytest.mark.parametrize("seed", range(3))
def test_compound_moves_gain_what_the_judge_says(seed):
    # All of one ML job's tables to one region: gain, terms and quota cost add up over the
    # tables, and trying a compound move leaves the state as it was.
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 12, "jobs": 14, "ml_share": 1.0,
                                                "move_quota_share": None}, seed=seed)
    state = TetrisState(instance, compound=True)
    a = instance.arrays()
    assert state.num_items() > a.num_tables
    before = judged(instance, state.home)
    checked = 0
    for item in range(a.num_tables, state.num_items()):
        job = int(state.compound_jobs[item - a.num_tables])
        for region in state._job_targets(job).tolist():
            snapshot = (state.home.copy(), state.demand.copy(), dict(state.objective_terms))
            move = state.move_to(item, region)
            assert np.array_equal(state.home, snapshot[0]) and np.array_equal(state.demand, snapshot[1])
            assert state.objective_terms == snapshot[2]
            if move is None:
                continue
            home = state.home.copy()
            tables = [t for t, _ in move.members]
            home[tables] = region
            assert move.gain == pytest.approx(before - judged(instance, home), abs=1e-9)
            assert move.cost == pytest.approx(float(a.table_size[tables].sum()))
            checked += 1
    assert checked > 0


def test_the_climb_with_compound_moves_is_judged_and_tracked():
    instance = fleetplan.generate("placement", {"regions": 4, "tables": 120, "jobs": 120, "ml_share": 0.8},
                                  seed=3)
    keep = fleetplan.solve(instance, "keep", replicas=False)
    result = fleetplan.solve(instance, "hill-climb", compound_moves=True, replicas=False)
    assert result.evaluation.violations == []
    assert result.objective < keep.objective
    assert result.model_objective == pytest.approx(result.objective, abs=1e-9)
    moves = result.plan.moves
    assert sum(m.gain for m in moves) == pytest.approx(keep.objective - result.objective, rel=1e-9)
    assert result.evaluation.metrics["bytes_moved"] <= instance.daily_move_quota_bytes * (1 + 1e-9)
