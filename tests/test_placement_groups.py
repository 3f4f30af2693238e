"""Whole-group splits (fleetplan/solvers/placement/neighbourhood/groups.py): a GPU group whose two jobs must be
split together — one split alone loses — is split by the search, not by the climb; the move
passes the judge, frees quota when the climb spent it, and is never tried where a split job's
demand still counts."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan
from fleetplan.instances.placement import PlacementInstance, PlacementPlan
from fleetplan.solvers.placement.climb.state import TetrisState
from fleetplan.solvers.placement.neighbourhood.groups import active_groups, split_group, split_sweep

GB = 1e9


def two_jobs_one_group(**settings) -> PlacementInstance:
    """Two regions with equal H100 supply; the priority-0 group holds two ML jobs of two tables
    each, one per region: Expression 7 is 0 and Expression 8 is 8 x 1/2 = 4. Splitting one job
    leaves the other alone (shares 0 and 1: 8 x (0.5 + 0.5) = 8, a loss of 4); splitting both
    leaves the group without demand (0, a gain of 4 less 4 GB of traffic at 1e-12 a byte)."""
    data = {
        "kind": "placement", "name": "two-jobs-one-group", "gpu_types": ["h100"], "applications": ["app"],
        "regions": [{"id": f"r{r}", "gpu_supply": {"h100": 100.0}, "storage_capacity_bytes": 100 * GB,
                     "cpu_capacity": {"app": 1000.0}} for r in range(2)],
        "tables": {"id": ["a0", "a1", "b0", "b1", "spare"], "size_bytes": [GB, GB, GB, GB, 2 * GB],
                   "home": ["r0", "r0", "r1", "r1", "r0"]},
        "jobs": {"id": ["a", "b"], "kind": ["ml", "ml"], "tables": [[0, 1], [2, 3]],
                 "gpu_type": ["h100", "h100"], "gpu_hours": [10.0, 10.0], "cpu_hours": [1.0, 1.0],
                 "priority": [0, 0], "application": ["app", "app"], "recurring": [True, True]},
        "weights": {"traffic": 1e-12, "gpu_balance": 1.0, "storage_balance": 0.0,
                    "priority": [8.0, 4.0, 2.0, 1.0, 0.5, 0.25, 0.125]},
        "sigmoid_scale_gpu_hours": 10.0,
    }
    data.update(settings)
    return PlacementInstance.model_validate(data)


def judged(instance: PlacementInstance, home: np.ndarray) -> float:
    verdict = fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, home))
    assert verdict.feasible, verdict.violations
    return verdict.objective


def test_only_the_whole_group_split_gains_and_the_climb_stays_put():
    instance = two_jobs_one_group()
    today = judged(instance, instance.arrays().table_home)
    assert today == pytest.approx(4.0)
    # Each single move loses (it splits one job), so the climb moves nothing.
    for table in range(4):
        home = instance.arrays().table_home.copy()
        home[table] = 1 - home[table]
        assert judged(instance, home) > today + 3.9
    climb = fleetplan.solve(instance, "hill-climb")
    assert climb.objective == pytest.approx(today)
    assert climb.plan.moves == []
    # The same climb with the group split as its last move type.
    split = fleetplan.solve(instance, "hill-climb", group_split_tables=4)
    assert split.evaluation.feasible and split.stats["group_splits"] == 1
    assert split.objective == pytest.approx(4 * GB * 1e-12, abs=1e-12)
    assert sum(move.gain for move in split.plan.moves) == pytest.approx(today - split.objective)


def test_the_search_splits_the_group_and_its_plan_passes_the_judge():
    instance = two_jobs_one_group()
    climb = fleetplan.solve(instance, "hill-climb")
    # Two-table neighbourhoods cannot free both jobs (they share no table), so without the group
    # split and the group moves (which need the bound) the search keeps the climb's plan; with
    # either, the group is split.
    kept = fleetplan.solve(instance, "lns", neighbourhood_tables=2, patience=10, group_split_tables=0, bound=False)
    assert kept.objective == pytest.approx(climb.objective)
    moved = fleetplan.solve(instance, "lns", neighbourhood_tables=2, patience=10, group_split_tables=0)
    assert moved.objective == pytest.approx(4 * GB * 1e-12, abs=1e-12) and moved.stats["group_splits"] == 0
    assert any("group moves (" in line for line in moved.log)
    result = fleetplan.solve(instance, "lns", neighbourhood_tables=2, patience=10, seed=3)
    verdict = fleetplan.evaluate(instance, result.plan)
    assert verdict.feasible and verdict.objective == pytest.approx(result.objective)
    assert result.objective == pytest.approx(4 * GB * 1e-12, abs=1e-12)  # the traffic of the split
    assert result.stats["group_splits"] >= 1
    assert result.objective <= climb.objective - 3.9
    assert any("group split" in line for line in result.log)


def test_a_split_frees_the_quota_by_sending_a_moved_table_home():
    """The quota is spent on a table already moved (the climb spends it to its end): the split
    sends that table home first, and the whole is kept only if the judge agrees."""
    instance = two_jobs_one_group(daily_move_quota_bytes=2 * GB)
    home = instance.arrays().table_home.copy()
    home[4] = 1  # the spare table, 2 GB, moved: no quota left
    state = TetrisState(instance, home)
    groups = active_groups(state)
    assert len(groups) == 1 and sorted(groups[0].jobs.tolist()) == [0, 1]
    before = judged(instance, state.home)
    gain, moves = split_group(state, groups[0].jobs, max_tables=8)
    assert moves and moves[0].item == 4 and moves[0].target == 0
    after = judged(instance, state.home)
    assert after == pytest.approx(before - gain)
    assert after == pytest.approx(2 * GB * 1e-12 * 2, abs=1e-12)
    assert float(instance.arrays().table_size[state.home != state.original].sum()) <= 2 * GB
    # Too few tables allowed: the move is not made, and the state is as it was.
    state = TetrisState(instance, home)
    assert split_group(state, groups[0].jobs, max_tables=2) == (0.0, [])
    assert state.home.tolist() == home.tolist()
    assert judged(instance, state.home) == pytest.approx(before)


def test_no_group_is_split_where_split_jobs_still_count():
    instance = two_jobs_one_group(split_ml_demand="largest_region")
    state = TetrisState(instance)
    assert active_groups(state) == []
    outcome = split_sweep(state, max_tables=8)
    assert outcome.tried == 0 and outcome.moves == []


def test_the_combined_overload_form_splits_the_group_too():
    instance = two_jobs_one_group(overload_form="combined_high_priority")
    state = TetrisState(instance)
    outcome = split_sweep(state, max_tables=8)
    assert outcome.kept == 1
    assert judged(instance, state.home) == pytest.approx(4 * GB * 1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", [3, 4])
def test_the_default_is_never_worse_than_the_climb_with_group_splits(seed):
    instance = fleetplan.generate("placement", {"regions": 5, "tables": 60, "jobs": 60}, seed=seed)
    climb = fleetplan.solve(instance, "hill-climb", seed=seed)
    result = fleetplan.solve(instance, "lns", patience=8, neighbourhood_tables=12, seed=seed)
    assert result.evaluation.feasible
    assert result.objective <= climb.objective + 1e-9
    today = fleetplan.evaluate(instance, PlacementPlan.current(instance)).objective
    assert sum(move.gain for move in result.plan.moves) == pytest.approx(today - result.objective, abs=1e-7)


@pytest.mark.parametrize("solver", ["lns", "hill-climb"])
def test_a_negative_table_limit_is_refused_by_name(solver):
    with pytest.raises(fleetplan.InstanceError, match="group_split_tables"):
        fleetplan.solve(two_jobs_one_group(), solver, group_split_tables=-1)
