"""The large-neighbourhood search of ``mip-highs`` above LARGE_COLUMNS (issue 27 item 3): never
worse than its start, every plan passes the judge, never below the exact optimum, and the large
path (forced here on a small region by ``large_columns``) returns it with the better of the
datacenter relaxation's and the Lagrangian pass's bounds; the Lagrangian bound is checked
against enumeration on tiny regions and a hand-solved one, inline and on its own core."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan
from fleetplan.instances import evaluate, generate, instance_from_data
from fleetplan.instances.reservation import ReservationPlan
from fleetplan.models.reservation import build, counts_from_assignment, disaggregate, full_solution
from fleetplan.solvers.reservation.neighbourhood import column_reservation, improve


@pytest.fixture(scope="module")
def region():
    return generate("reservation", {"servers": 20000, "reservations": 100, "datacenters": 6}, seed=0)


def _greedy_start(instance, model):
    greedy = fleetplan.solve(instance, "greedy", time_limit=60)
    assert greedy.status == "feasible"
    arrays = instance.arrays()
    counts = counts_from_assignment(model, arrays, greedy.plan.assignment_array(instance))
    return greedy, full_solution(model, counts.astype(float))


def _judged(instance, model, values):
    arrays = instance.arrays()
    x = values[model.lp.names["x"]]
    assert np.allclose(x, np.round(x))
    return evaluate(instance, ReservationPlan.from_arrays(instance, disaggregate(model, arrays, x)))


def test_every_column_belongs_to_a_reservation(region):
    arrays = region.arrays()
    model = build(arrays)
    owner = column_reservation(model, arrays)
    assert owner.min() >= 0 and owner.max() < arrays.num_reservations
    # Each row of a reservation's guarantee holds only that reservation's columns.
    lp = model.lp
    t_rows = lp.matrix[:, lp.names["T"]].tocsr()
    for row in np.flatnonzero(np.diff(t_rows.indptr) > 0)[:200].tolist():
        cols = lp.matrix[row].indices
        assert np.unique(owner[cols]).size == 1


def test_improve_is_never_worse_and_its_plan_passes_the_judge(region):
    model = build(region.arrays())
    greedy, start = _greedy_start(region, model)
    log: list[str] = []
    values = improve(model, region.arrays(), start, None, 0, log, rounds=5).values  # 5 x 20: every reservation once
    verdict = _judged(region, model, values)
    assert verdict.feasible, [v.message for v in verdict.violations[:3]]
    assert verdict.objective == pytest.approx(float(model.lp.cost @ values + model.constant), rel=1e-9)
    # 15,257.5 -> 13,0xx measured; a search that never improves fails here.
    assert verdict.objective < 0.95 * greedy.objective, log


def test_improve_stays_above_the_proven_optimum_on_a_small_region():
    instance = generate("reservation", {"servers": 2000, "reservations": 15, "datacenters": 4}, seed=1)
    model = build(instance.arrays())
    greedy, start = _greedy_start(instance, model)
    values = improve(model, instance.arrays(), start, None, 0, [], size=5, rounds=6).values
    verdict = _judged(instance, model, values)
    assert verdict.feasible
    assert verdict.objective <= greedy.objective + 1e-9
    exact = fleetplan.solve(instance, "mip-highs", time_limit=60, warm_start="none")
    assert exact.status == "optimal"
    assert verdict.objective >= exact.bound - 1e-6


@pytest.fixture(scope="module")
def large_path(region):
    """``mip-highs`` on the region forced down the large path (one thread)."""
    return fleetplan.solve(region, "mip-highs", time_limit=20, large_columns=0)


def test_mip_highs_large_path_returns_the_search_with_a_bound_below_it(region, large_path):
    greedy = fleetplan.solve(region, "greedy", time_limit=60)
    result = large_path
    assert result.status == "feasible"
    assert result.evaluation is not None and result.evaluation.feasible
    assert result.objective < greedy.objective
    assert result.bound is not None and result.bound <= result.objective + 1e-6
    assert any(line.startswith("neighbourhood search:") for line in result.log), result.log


def test_single_ml_reservations_improve_on_the_groups_local_plan(region):
    """After a pass of groups, the pass over ML reservations one at a time (their whole
    sub-MIPs) keeps the plan judged feasible and no worse, and improves some of them."""
    arrays = region.arrays()
    model = build(arrays)
    _, start = _greedy_start(region, model)
    grouped = improve(model, arrays, start, None, 0, [], rounds=5).values  # one pass of groups
    singles = int(arrays.res_ml.sum())
    assert singles > 0
    log: list[str] = []
    values = improve(model, arrays, start, None, 0, log, rounds=5 + singles).values
    verdict = _judged(region, model, values)
    assert verdict.feasible, [v.message for v in verdict.violations[:3]]
    assert float(model.lp.cost @ values) <= float(model.lp.cost @ grouped) + 1e-9
    kept = int(log[-1].split(f"{singles} singles, ")[1].split(" improved")[0])
    assert kept >= 1, log


def _exact_start(instance, model):
    """The exact solver's plan as a feasible start (every column)."""
    result = fleetplan.solve(instance, "mip-highs", time_limit=30)
    assert result.evaluation.feasible
    counts = counts_from_assignment(model, instance.arrays(), result.plan.assignment_array(instance))
    return result, full_solution(model, counts.astype(float))


def _lagrangian(instance, price: float, start_from=_exact_start):
    """The Lagrangian pass's bound (after one pass of groups) from the exact plan."""
    arrays = instance.arrays()
    model = build(arrays)
    result, start = start_from(instance, model)
    groups = -(-arrays.num_reservations // 20)
    searched = improve(model, arrays, start, None, 0, [], rounds=groups + arrays.num_reservations, price=price)
    return result, searched


def test_lagrangian_bound_of_the_hand_solved_region():
    """tiny_data's optimum (21.1, nothing moved) has no two reservations after the same server,
    so each reservation alone does as well as in it: the bound is the optimum itself."""
    from tests.test_reservation_instance import tiny_data

    result, searched = _lagrangian(instance_from_data(tiny_data()), price=0.0)
    assert result.status == "optimal" and result.objective == pytest.approx(21.1)
    assert searched.bound == pytest.approx(21.1)


@pytest.mark.parametrize("seed", range(20))
def test_lagrangian_bound_is_below_the_enumerated_optimum(seed):
    """For any price per move, on tiny regions (some with a binding budget) enumerated whole."""
    from fleetplan.solvers.reservation.enumerate import enumerate_assignments
    from tests.test_reservation_exact import random_tiny

    instance = instance_from_data(random_tiny(seed))
    truth = enumerate_assignments(instance)
    if truth.objective is None:
        pytest.skip("no feasible plan")
    for price in (0.0, 0.7, 5.0):
        _, searched = _lagrangian(instance, price)
        assert searched.bound is not None
        assert searched.bound <= truth.objective + 1e-6, (price, searched.bound, truth.objective)


def test_lagrangian_pass_bounds_the_generated_region_tighter_than_the_relaxation(large_path):
    """On the 20,000-server region the large path's bound is the Lagrangian one (measured:
    12,647.3 against the datacenter relaxation's 11,770.4), below its plan (and below the
    12,809.9 of a 120 s solve of the whole MIP)."""
    result = large_path
    relaxation = next(line for line in result.log if "datacenter relaxation" in line)
    relaxed = float(relaxation.split(" LP ")[1].split(" ")[0])
    lagrangian = next(line for line in result.log if "Lagrangian bound" in line)
    assert result.bound == pytest.approx(float(lagrangian.rsplit(" ", 1)[1]), rel=1e-5)
    assert result.bound > relaxed * 1.05
    assert result.bound <= result.objective


def test_lagrangian_pass_on_its_own_core(region, large_path):
    """With two threads the Lagrangian pass runs in a child process beside the search's own
    passes: every reservation's bound comes back, the plan is judged feasible and better than
    the greedy's, and the bound is well above the datacenter relaxation's, near the inline
    pass's (``large_path``, one thread). Near, not equal: a sub-MIP stopped at its time cap gives
    its dual bound, lower on a loaded machine (0.27 % lower with two other busy processes on
    the two cores, against 0.001 % on a quiet one)."""
    import time

    arrays = region.arrays()
    model = build(arrays)
    greedy, start = _greedy_start(region, model)
    price = float(next(line for line in large_path.log if "moves priced at" in line).split("priced at ")[1].split(")")[0])
    log: list[str] = []
    searched = improve(model, arrays, start, time.perf_counter() + 15, 0, log, price=price, threads=2)
    assert any("Lagrangian pass on its own core: 100 of 100 reservations" in line for line in log), log
    verdict = _judged(region, model, searched.values)
    assert verdict.feasible and verdict.objective < greedy.objective
    assert searched.bound is not None and searched.bound <= verdict.objective
    relaxation = next(line for line in large_path.log if "datacenter relaxation" in line)
    assert searched.bound > float(relaxation.split(" LP ")[1].split(" ")[0]) * 1.05
    assert searched.bound == pytest.approx(large_path.bound, rel=1e-2)
