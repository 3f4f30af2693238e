"""The defaults give the best answer the time allows: placement's default is the neighbourhood
search, which starts from the climb's plan and is never worse than it; without a time limit its
extra time is bounded by a multiple of the climb's (with a floor), and the log names the rule
that stopped it. Budgets here are counts (``patience``), so the plans do not depend on the clock."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import fleetplan
from fleetplan.solvers.placement.neighbourhood.lns import search_budget_s

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

# A floor far above what these instances need: the count (patience) is what stops the search.
COUNTED = {"patience": 4, "neighbourhood_tables": 10, "search_min_s": 600.0}


def test_the_placement_default_is_the_neighbourhood_search_and_says_why():
    spec = fleetplan.get_solver("placement")
    assert spec.name == "lns" and spec.default
    assert "never worse than the climb" in spec.description and "10 x the climb's time" in spec.description
    assert not fleetplan.get_solver("placement", "hill-climb").default


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_default_is_never_worse_than_the_climb_on_the_same_seed(seed):
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 30}, seed=seed + 1)
    climb = fleetplan.solve(instance, "hill-climb", seed=seed)
    default = fleetplan.solve(instance, seed=seed, **COUNTED)
    assert default.solver == "lns" and default.evaluation.feasible
    assert default.objective <= climb.objective + 1e-9
    assert any("search stopped by 4 neighbourhoods in a row improved nothing" in line for line in default.log)
    again = fleetplan.solve(instance, seed=seed, **COUNTED)
    assert again.plan.home_array(instance).tolist() == default.plan.home_array(instance).tolist()


def test_the_default_beats_the_climb_where_single_moves_stall():
    # The climb stops where no single move it may make gains; neighbourhoods move several tables
    # together and gain on this instance.
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 30}, seed=0)
    climb = fleetplan.solve(instance, "hill-climb")
    default = fleetplan.solve(instance, **COUNTED)
    assert default.objective < climb.objective * (1 - 1e-3)


def test_without_a_limit_the_search_budget_is_a_multiple_of_the_climb_with_a_floor():
    assert search_budget_s(0.01, 10.0, 1.0) == 1.0
    assert search_budget_s(30.0, 10.0, 1.0) == 300.0
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 30}, seed=0)
    # No budget at all: the search stops at once and the plan is the climb's.
    stopped = fleetplan.solve(instance, search_ratio=0.0, search_min_s=0.0)
    climb = fleetplan.solve(instance, "hill-climb")
    assert stopped.status == "feasible" and stopped.objective == pytest.approx(climb.objective, abs=1e-12)
    assert any("search stopped by the search budget without a time limit" in line for line in stopped.log)


def test_the_search_options_are_checked():
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 10, "jobs": 10}, seed=0)
    with pytest.raises(fleetplan.InstanceError, match="search_ratio"):
        fleetplan.solve(instance, search_ratio=-1.0)


def test_the_reservation_default_returns_its_start_when_cp_sat_ends_on_a_worse_plan(monkeypatch):
    # CP-SAT takes the start as a hint only; if it ended on a worse plan of its own, the default
    # returns the better of the two. Simulated: CP-SAT's answer made far worse.
    import fleetplan.models.reservation.cpsat as cpsat_model

    read = cpsat_model.read_values

    from fleetplan.models.reservation import build

    instance = fleetplan.load_instance(EXAMPLES / "reservation-small.json")
    cost = build(instance.arrays()).lp.cost
    costly = int(np.argmax(cost))
    assert cost[costly] > 0

    def worse(cp, solver):
        values = np.array(read(cp, solver), dtype=float)
        values[costly] += 1e6
        return values

    spec = fleetplan.get_solver("reservation")
    assert spec.name == "cpsat" and "keeping the better" in spec.description
    monkeypatch.setattr(cpsat_model, "read_values", worse)
    result = fleetplan.solve(instance, time_limit=20)
    assert result.success and result.evaluation.feasible
    assert any("CP-SAT:" in line and "the warm start is feasible" in line for line in result.log)
    assert result.status != "optimal"
