"""The neighbourhood search's ``gap`` neighbourhoods (drawn from the GPU group furthest above
its part of the lower bound) and its stopping rule under a time limit (larger neighbourhoods
before it gives up)."""

from __future__ import annotations

import pytest

import fleetplan
from fleetplan.instances.placement import PlacementInstance, PlacementPlan
from fleetplan.models.placement.bound import placement_lower_bound
from fleetplan.solvers.placement.climb.state import TetrisState
from fleetplan.solvers.placement.neighbourhood.gaps import group_gaps
from fleetplan.solvers.placement.neighbourhood.group_moves import beam_group_moves
from fleetplan.solvers.placement.neighbourhood.lns import ESCALATIONS, Search


def two_table_job() -> PlacementInstance:
    """One high-priority ML job reading two tables in region 0, where a quarter of its GPU type
    is; region 1 has the rest. Moving both tables to region 1 balances the group, but moving one
    splits the job, which trains it away from home (the home-training row forbids it): every
    single move is infeasible, so the climb stays put."""
    data = fleetplan.generate("placement", {"regions": 2, "tables": 2, "jobs": 1, "ml_share": 1.0},
                              seed=0).model_dump()
    for region, supply in zip(data["regions"], (1.0, 3.0), strict=True):
        region["gpu_supply"] = {"a100": supply}
        region["storage_capacity_bytes"] = 1e6
        region["cpu_capacity"] = dict.fromkeys(region["cpu_capacity"], 1e6)
    data["tables"].update(size_bytes=[10.0, 10.0], home=["region0", "region0"])
    data["jobs"].update(tables=[[0, 1]], gpu_type=["a100"], gpu_hours=[10.0], priority=[0], recurring=[True])
    data.update(home_training_threshold=0.99, daily_move_quota_bytes=100.0)
    return PlacementInstance.model_validate(data)


def test_a_gap_neighbourhood_moves_a_job_the_climb_cannot():
    instance = two_table_job()
    climb = fleetplan.solve(instance, "hill-climb", replicas=False)
    assert climb.stats["moves"] == 0  # every single move splits the job
    state = TetrisState(instance)
    bound = placement_lower_bound(instance.arrays())
    gaps = group_gaps(state, bound)
    assert gaps[0].name == "a100 priority 0" and gaps[0].gap > 0.1
    search = Search(state, seed=0, max_free=8, max_regions=8, node_limit=100, threads=1, bound=bound)
    tables, regions, name = search.pick("gap")
    assert name.startswith("gap a100 priority 0") and sorted(tables.tolist()) == [0, 1]
    before = sum(state.objective_terms.values())
    gain, moved = search.solve(tables, regions, None)
    assert moved == 2 and state.home.tolist() == [1, 1]
    assert gain == pytest.approx(before - sum(state.objective_terms.values()), rel=1e-12) and gain > 0.1
    # The judge agrees, and the default solver finds it too.
    result = fleetplan.solve(instance, "lns", replicas=False)
    assert result.evaluation.feasible and result.objective < climb.objective - 0.1
    assert result.objective == fleetplan.evaluate(instance, result.plan).objective


def test_under_a_time_limit_fruitless_neighbourhoods_make_them_larger_before_the_search_stops():
    """Patience no longer ends a search that has time left: the neighbourhoods grow ESCALATIONS
    times first; the plan is never worse than the climb's on the same seed."""
    instance = fleetplan.generate("placement", {"regions": 4, "tables": 40, "jobs": 40}, seed=4)
    climb = fleetplan.solve(instance, "hill-climb", seed=3)
    limited = fleetplan.solve(instance, "lns", patience=3, neighbourhood_tables=6, seed=3, time_limit=600)
    assert limited.objective <= climb.objective + 1e-9 and limited.evaluation.feasible
    assert limited.objective == fleetplan.evaluate(instance, limited.plan).objective
    stop = next(line for line in limited.log if line.startswith("search stopped by"))
    assert stop in (f"search stopped by 3 neighbourhoods in a row improved nothing (after {ESCALATIONS} larger sizes)",
                    "search stopped by the plan meeting the lower bound (nothing left to gain)")
    grown = [line for line in limited.log if "in a row improved nothing; neighbourhoods of up to" in line]
    assert len(grown) == ESCALATIONS or "lower bound" in stop
    # Without a limit, patience stops it at the first size (so a seed gives one plan).
    free = fleetplan.solve(instance, "lns", patience=3, neighbourhood_tables=6, seed=3, search_min_s=600)
    assert "search stopped by 3 neighbourhoods in a row improved nothing" in [
        line for line in free.log if line.startswith("search stopped by")]
    assert not any("neighbourhoods of up to" in line for line in free.log)


def test_the_search_stops_when_the_plan_meets_the_bound():
    """A plan at the lower bound is optimal: nothing is left for the time limit to buy."""
    instance = two_table_job()
    data = instance.model_dump()
    data["weights"].update(gpu_balance=0.0, storage_balance=0.0, traffic=0.0)
    flat = PlacementInstance.model_validate(data)
    result = fleetplan.solve(flat, "lns", replicas=False, time_limit=600)
    assert result.objective == 0.0 and result.bound == 0.0
    assert "search stopped by the plan meeting the lower bound (nothing left to gain)" in result.log


def test_a_groups_compound_move_is_found_where_the_climb_stays_put():
    """The two tables of the job move together to the region with most of its GPU type
    (:func:`beam_group_moves`); the state is unchanged when nothing improves."""
    instance = two_table_job()
    state = TetrisState(instance)
    before = sum(state.objective_terms.values())
    gain, moves = beam_group_moves(state, state.counted.nonzero()[0])
    assert sorted((int(m.item), int(m.target)) for m in moves) == [(0, 1), (1, 1)]
    assert gain == pytest.approx(before - sum(state.objective_terms.values()), rel=1e-12) and gain > 0.1
    assert fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, state.home)).feasible
    # From there nothing improves: no move, and the state as it was.
    home = state.home.copy()
    assert beam_group_moves(state, state.counted.nonzero()[0]) == (0.0, [])
    assert state.home.tolist() == home.tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_default_is_never_worse_than_the_climb_alone_on_the_same_seed(seed):
    """Gap neighbourhoods, group moves and all: the default starts from the climb's plan and
    keeps only what the exact objective confirms (the count stops it, not the clock)."""
    instance = fleetplan.generate("placement", {"regions": 5, "tables": 60, "jobs": 60}, seed=seed)
    climb = fleetplan.solve(instance, "hill-climb", seed=seed)
    result = fleetplan.solve(instance, patience=4, neighbourhood_tables=8, seed=seed, search_min_s=600)
    assert result.solver == "lns" and result.evaluation.feasible
    assert result.objective <= climb.objective + 1e-9
    assert result.objective == fleetplan.evaluate(instance, result.plan).objective
