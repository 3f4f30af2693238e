"""The exact placement solvers never report an optimum or a bound that is not proven: claims cross-checked against enumeration and CP-SAT on small instances,
and a false claim (a MIP start certified optimal) caught by the judge."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import enumerated_optimum

import fleetplan
from fleetplan.instances.placement import PlacementPlan
from fleetplan.models.placement.bound import placement_lower_bound
from fleetplan.solvers.placement.exact import PartOutcome, solve_exact

RELATIVE = 1e-6


def small(seed: int):
    return fleetplan.generate("placement", {"regions": 3, "tables": 6 + seed % 2, "jobs": 6 + seed,
                                            "move_quota_share": None if seed % 2 else 0.3}, seed=seed)


# Seeds 0 and 1 by default: one with today's move quota (a budget row), one without; seeds 2-4
# draw the same two shapes again and run with the slow set.
@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(seed, marks=pytest.mark.slow) for seed in (2, 3, 4))])
@pytest.mark.parametrize("warm_start", ["current", "hill-climb"])
def test_optimality_and_bounds_agree_with_enumeration_and_cpsat(seed, warm_start):
    instance = small(seed)
    best = enumerated_optimum(instance)  # enumerated once for both warm starts
    results = {solver: fleetplan.solve(instance, solver, warm_start=warm_start, time_limit=60)
               for solver in ("mip-highs", "cpsat")}
    for solver, result in results.items():
        assert result.evaluation.violations == []
        assert result.objective >= best * (1 - RELATIVE) - 1e-12
        if result.status == "optimal":
            assert result.objective == pytest.approx(best, rel=RELATIVE), solver
        if result.bound is not None:
            assert result.bound <= best * (1 + RELATIVE) + 1e-12, solver
    # Two exact solvers that both claim optimal agree.
    if all(r.status == "optimal" for r in results.values()):
        assert results["mip-highs"].objective == pytest.approx(results["cpsat"].objective, rel=RELATIVE)


def test_a_false_optimal_claim_is_not_reported():
    # A part that certifies today's placement as optimal, bound = its objective: the shape of
    # the issue's HiGHS answer. The judge-backed polish beats it, so neither claim stands.
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 40, "jobs": 40}, seed=1)
    today = instance.arrays().table_home
    today_objective = fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, today)).objective

    def certify_today(data, warm, *, time_limit, threads, seed):
        return PartOutcome(status="optimal", home=today.copy(), model_objective=today_objective,
                           bound=today_objective, exact=True, log=[])

    result = solve_exact(instance, certify_today, name="fake", time_limit=30, seed=0, threads=1,
                         progress=lambda fraction, message: None, warm_start="current", split=False,
                         max_exact_levels=64, grid_levels=16)
    assert result.objective < today_objective
    # The false bound is dropped; what remains is the instance's own lower bound, below the plan.
    assert result.status == "feasible" and "solver_bound" not in result.stats
    assert result.bound == pytest.approx(placement_lower_bound(instance.arrays()).value, rel=1e-12)
    assert result.bound < today_objective * (1 - 1e-3) and result.bound <= result.objective
    assert any("not proven" in line for line in result.log)
    assert fleetplan.evaluate(instance, result.plan).objective == pytest.approx(result.objective)


@pytest.mark.slow
@pytest.mark.parametrize("warm_start", ["current", "hill-climb"])
def test_the_issues_instance_has_no_false_optimum(warm_start):
    # generate placement --regions 5 --tables 100 --jobs 100 --seed 5: the optimum is about
    # 5.8309; mip-highs once certified 15.99992 (today's) or 11.62 (the hill climb's).
    instance = fleetplan.generate("placement", {"regions": 5, "tables": 100, "jobs": 100}, seed=5)
    result = fleetplan.solve(instance, "mip-highs", warm_start=warm_start, time_limit=300)
    assert result.evaluation.violations == []
    assert result.bound is None or result.bound <= 5.8310
    assert result.status != "optimal" or result.objective <= 5.8310
    assert np.isfinite(result.objective)


def test_the_gap_is_also_given_above_the_constant_floor():
    instance = small(3)
    result = fleetplan.solve(instance, "cpsat", time_limit=60)
    floor = result.evaluation.metrics["objective_constant_floor"]
    assert result.stats["objective_constant_floor"] == pytest.approx(floor)
    assert result.stats["gap_above_floor"] == pytest.approx(
        (result.objective - result.bound) / max(result.objective - floor, 1e-12))
    assert result.stats["gap_above_floor"] >= result.gap - 1e-12
