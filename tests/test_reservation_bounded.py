"""run_bounded (fleetplan.solvers.reservation.bounded): a HiGHS MIP in a child process returns
by its deadline with the child's last solution and bound, and gives the in-process answer when
it finishes in time."""

from __future__ import annotations

import time

import pytest

from fleetplan.instances import generate
from fleetplan.models.reservation import build
from fleetplan.models.reservation.cuts import with_cuts
from fleetplan.solvers.reservation.bounded import GRACE_S, _in_process, run_bounded


def _highs(instance, presolve: str = "off"):
    from fleetplan.solvers import highs as runner

    arrays = instance.arrays()
    model = build(arrays)
    highs = runner.new_highs(600, 1, 0)
    runner.pass_lp(highs, with_cuts(model, arrays), "simplex")
    highs.setOptionValue("solver", "choose")
    highs.setOptionValue("presolve", presolve)
    highs.changeObjectiveOffset(float(model.constant))
    return highs


def test_killed_at_the_deadline_with_a_bound():
    # 10^4 servers: HiGHS needs far more than 2 s, and no interrupt callback stops it.
    instance = generate("reservation", {"servers": 10000, "reservations": 100, "datacenters": 6}, seed=0)
    highs = _highs(instance)
    started = time.perf_counter()
    result = run_bounded(highs, started + 2.0)
    took = time.perf_counter() - started
    assert result.status in ("Killed at the deadline", "Time limit reached")
    assert took <= 2.0 + GRACE_S + 1.0
    if result.values is not None:
        assert result.bound <= result.objective + 1e-6


def test_same_answer_as_in_process():
    instance = generate("reservation", {"servers": 300, "reservations": 4, "datacenters": 2}, seed=2)
    child = run_bounded(_highs(instance), time.perf_counter() + 120)
    here = _in_process(_highs(instance))
    assert child.status == here.status == "Optimal"
    assert child.objective == pytest.approx(here.objective, abs=1e-6)
    assert child.bound == pytest.approx(here.bound, abs=1e-6)
