"""Relax-and-fix warm start of the reservation MIP (MAST §2):
its plan passes the judge, and ``mip-highs`` started from it still proves the enumerated
optimum on tiny regions."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import enumerated_assignments

import fleetplan
from fleetplan.instances import evaluate, generate, instance_from_data
from fleetplan.instances.reservation import ReservationPlan
from fleetplan.models.reservation import build, disaggregate
from fleetplan.models.reservation.cuts import with_cuts
from fleetplan.solvers.deadline import Deadline
from fleetplan.solvers.reservation.relax_fix import relax_and_fix
from tests.test_reservation_exact import random_tiny


def test_relax_and_fix_gives_a_feasible_plan_no_better_than_the_optimum():
    instance = generate("reservation", {"servers": 2000, "reservations": 15, "datacenters": 4}, seed=1)
    arrays = instance.arrays()
    model = build(arrays)
    log: list[str] = []
    relaxed = relax_and_fix(model, Deadline(60), 1, 0, log, lp=with_cuts(model, arrays))
    values = relaxed.values
    assert values is not None, log
    x = values[model.lp.names["x"]]
    assert np.allclose(x, np.round(x))
    verdict = evaluate(instance, ReservationPlan.from_arrays(instance, disaggregate(model, arrays, x)))
    assert verdict.feasible, [v.message for v in verdict.violations[:3]]
    # The model's objective of the start is the judge's (auxiliaries at their least values).
    assert float(model.lp.cost @ values + model.constant) == pytest.approx(verdict.objective, rel=1e-9)
    exact = fleetplan.solve(instance, "mip-highs", time_limit=60, warm_start="none")
    assert exact.status == "optimal"
    # "optimal" is within HiGHS's mip_rel_gap (1e-4): the plan may beat it, not its bound.
    assert verdict.objective >= exact.bound - 1e-6
    # The relaxations' bound is a bound.
    assert relaxed.bound is not None and relaxed.bound <= verdict.objective + 1e-6
    assert relaxed.bound <= exact.objective + 1e-6


@pytest.mark.parametrize("seed", range(6))
def test_without_datacenter_binaries_the_count_mip_still_runs(seed):
    data = random_tiny(seed)
    for spec in data["reservations"]:
        spec["workload"] = "general"
    instance = instance_from_data(data)
    truth = enumerated_assignments(instance)
    model = build(instance.arrays())
    relaxed = relax_and_fix(model, Deadline(10), 1, 0, [])
    if truth.objective is None:
        assert relaxed.values is None
        return
    assert relaxed.bound <= truth.objective + 1e-6
    if relaxed.values is not None:
        plan = ReservationPlan.from_arrays(instance, disaggregate(model, instance.arrays(),
                                                                  relaxed.values[model.lp.names["x"]]))
        verdict = evaluate(instance, plan)
        assert verdict.feasible and verdict.objective >= truth.objective - 1e-6


@pytest.mark.parametrize("seed", range(6))
def test_mip_highs_from_relax_and_fix_matches_enumeration(seed):
    instance = instance_from_data(random_tiny(seed))
    truth = enumerated_assignments(instance)
    result = fleetplan.solve(instance, "mip-highs", time_limit=30, warm_start="relax-and-fix")
    if truth.objective is None:
        assert result.status == "infeasible" and result.plan is None
        return
    assert result.status == "optimal", result.message
    assert result.evaluation.feasible
    assert result.objective == pytest.approx(truth.objective, abs=1e-6)
