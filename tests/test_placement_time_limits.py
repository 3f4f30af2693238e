"""Placement solvers honour --time-limit for their whole run, model building included: one Deadline; a build that cannot finish returns the best plan known."""

from __future__ import annotations

import time

import pytest

import fleetplan
from fleetplan.models.placement import BuildTimeout, prepare
from fleetplan.models.placement.mip import placement_mip
from fleetplan.solvers.deadline import Deadline


@pytest.fixture(scope="module")
def large():
    # Load the back-ends first: a cold import (up to 6 s on a loaded machine) is not the build.
    import highspy  # noqa: F401
    import pyomo.environ  # noqa: F401
    from ortools.sat.python import cp_model  # noqa: F401
    from pyomo.contrib.appsi.solvers import Highs  # noqa: F401

    return fleetplan.generate("placement", {"regions": 5, "tables": 500, "jobs": 500}, seed=1)


@pytest.mark.parametrize("solver", ["mip-highs", "cpsat", "hill-climb", "greedy"])
def test_two_seconds_on_500_tables(large, solver):
    started = time.process_time()
    result = fleetplan.solve(large, solver, time_limit=2.0)
    used = time.process_time() - started
    # Within 10% or 1 s of the limit, the judge included (it took 54 s for the exact solvers).
    # CPU time, not wall time: the test machine is shared, and a loaded machine stretches wall
    # time several-fold whatever the solver does (the solver itself watches the wall clock).
    assert used <= 2.0 + max(0.2, 1.0), (solver, used, result.log)
    assert result.plan is not None and result.evaluation.violations == []
    assert result.status in ("time_limit", "feasible", "optimal")
    keep = fleetplan.solve(large, "keep")
    assert result.objective <= keep.objective + 1e-9


def test_an_expired_deadline_stops_the_build(large):
    data = prepare(large.arrays())
    with pytest.raises(BuildTimeout):
        placement_mip(data, Deadline(0.0))
    with pytest.raises(BuildTimeout):
        prepare(large.arrays(), deadline=Deadline(0.0))


class _ReadingClock:
    """A clock on which every reading is ``step`` seconds after the last: the solver's clocks
    (its Deadline's, the engine's, the solver module's) advance with the work done, not with
    the machine's speed or load, so where a limit stops the climb is the same on any machine."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now

    def process_time(self) -> float:
        return self.now


def _on_a_reading_clock(monkeypatch) -> None:
    import fleetplan.solvers.deadline as deadline_module
    import fleetplan.solvers.hill_climb as engine
    import fleetplan.solvers.placement as placement

    clock = _ReadingClock(0.01)
    for module in (deadline_module, engine, placement):
        monkeypatch.setattr(module, "time", clock)


def test_the_hill_climb_improves_before_its_first_pass_ends(monkeypatch):
    # Anytime: with a limit shorter than the climb, moves are applied as they are
    # found, and the log reports the objective against time. The limit, 0.6 of the whole
    # climb's seconds + 0.3, was set from a wall-clock run, which a change of load between the
    # two runs could leave no time to climb; on the reading clock it stops the climb part-way
    # every time (61 of the 94 moves).
    instance = fleetplan.generate("placement", {"regions": 10, "tables": 4000, "jobs": 4000}, seed=2)
    _on_a_reading_clock(monkeypatch)
    full = fleetplan.solve(instance, "hill-climb", replicas=False, time_limit=600)
    _on_a_reading_clock(monkeypatch)
    rushed = fleetplan.solve(instance, "hill-climb", replicas=False, time_limit=0.6 * full.stats["climb_s"] + 0.3)
    keep = fleetplan.solve(instance, "keep")
    assert full.status == "feasible" and rushed.status == "time_limit"
    assert 0 < rushed.stats["moves"] < full.stats["moves"] and rushed.objective < keep.objective
    assert rushed.evaluation.violations == []
    assert any(line.startswith("objective against time:") for line in rushed.log)
