"""The hill-climb solver's stopping rule (options stop_window, stop_gain): counted in moves,
off below its window, and a stopped climb is the full climb's first moves, judged by evaluate."""

from __future__ import annotations

import pytest

import fleetplan


def _moves(result):
    return [(m.table, m.target) for m in result.plan.moves]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_default_rule_leaves_small_climbs_as_they_were(seed):
    instance = fleetplan.generate("placement", {"regions": 5, "tables": 300, "jobs": 300}, seed=seed)
    default = fleetplan.solve(instance, "hill-climb")
    full = fleetplan.solve(instance, "hill-climb", stop_window=0)
    assert len(default.plan.moves) < 1024  # fewer moves than the default window
    assert _moves(default) == _moves(full) and default.objective == full.objective


def test_a_stopped_climb_is_the_full_climbs_first_moves():
    instance = fleetplan.generate("placement", {"regions": 8, "tables": 2000, "jobs": 2000}, seed=4)
    full = fleetplan.solve(instance, "hill-climb", stop_window=0)
    stopped = fleetplan.solve(instance, "hill-climb", stop_window=8, stop_gain=0.02)
    today = fleetplan.solve(instance, "keep")
    assert "stopped by gain" in stopped.message
    assert 8 <= len(stopped.plan.moves) < len(full.plan.moves)
    assert _moves(stopped) == _moves(full)[:len(stopped.plan.moves)]
    # Judged by evaluate (fleetplan.solve), between the full climb and today's placement.
    assert stopped.evaluation.feasible and stopped.objective == stopped.evaluation.objective
    assert stopped.objective == pytest.approx(stopped.model_objective, rel=1e-9)
    assert full.objective < stopped.objective < today.objective
    # The last 8 moves gained less than 2 % of the climb's gain; the 8 before the last did not.
    gains = [m.gain for m in stopped.plan.moves]
    assert sum(gains[-8:]) < 0.02 * sum(gains)
    assert sum(gains[-9:-1]) >= 0.02 * sum(gains[:-1])


@pytest.mark.parametrize("name", ["stop_window", "stop_gain"])
def test_a_negative_stopping_option_is_refused_by_name(name):
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 20, "jobs": 20}, seed=0)
    with pytest.raises(fleetplan.InstanceError, match=f"options.{name}"):
        fleetplan.solve(instance, "hill-climb", **{name: -1})
