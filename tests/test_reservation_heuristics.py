"""Heuristics of the reservation kind against the exact optimum (enumeration on tiny regions,
the MIP on small generated ones); every plan through evaluate, the budget never exceeded."""

import numpy as np
import pytest
from conftest import enumerated_assignments

import fleetplan
from fleetplan.instances import evaluate_current, generate, instance_from_data
from fleetplan.solvers.reservation.enumerate import enumerate_assignments
from fleetplan.solvers.reservation.state import RasState, penalty
from tests.test_reservation_exact import random_tiny
from tests.test_reservation_instance import tiny_data

HEURISTICS = ["hill-climb", "greedy"]


def test_keep_is_todays_plan():
    instance = generate("reservation", {"servers": 1000, "reservations": 8}, seed=0)
    result = fleetplan.solve(instance, "keep")
    assert result.objective == pytest.approx(evaluate_current(instance).objective)
    assert result.evaluation.metrics["servers_moved"] == 0


def test_incremental_state_agrees_with_the_judge():
    instance = generate("reservation", {"servers": 3000, "reservations": 20, "datacenters": 4}, seed=1)
    state = RasState(instance.arrays())
    rng = np.random.default_rng(0)
    for _ in range(200):  # random feasible block moves
        g = int(rng.integers(state.groups.type.size))
        candidates = state.candidates[g]
        if not candidates.size:
            continue
        source = int(rng.choice([-1, *candidates.tolist()]))
        target = int(rng.choice([-1, *candidates.tolist()]))
        if source == target:
            continue
        change = state.exact_change(g, source, target, 1)
        if change is None:
            continue
        before = state.objective()
        state.apply_block(g, source, target, 1)
        assert state.objective() - before == pytest.approx(change[0], abs=1e-6)
        assert (state.x.sum(axis=0) + state.free == state.groups.available).all()
        assert (state.free >= 0).all() and (state.x >= 0).all()
    plan_objective = fleetplan.instances.evaluate(
        instance, fleetplan.instances.reservation.ReservationPlan.from_arrays(instance, state.assignment())).objective
    # the state's cost is the judge's objective plus the penalty on guarantee shortfalls
    assert state.objective() == pytest.approx(plan_objective + penalty(state), abs=1e-6)


@pytest.mark.parametrize("seed", [2, 3, 4, 5, 8, 11])
def test_heuristics_against_enumeration(seed):
    instance = instance_from_data(random_tiny(seed))
    truth = enumerated_assignments(instance)
    assert truth.objective is not None
    for solver in HEURISTICS:
        result = fleetplan.solve(instance, solver, time_limit=10)
        # measured: hill-climb within 0.7 % of the optimum (exact on 5 of 6), greedy within 2 %
        assert result.evaluation.feasible and result.status in ("feasible", "time_limit"), result.message
        assert truth.objective - 1e-6 <= result.objective <= 1.03 * truth.objective
        assert result.evaluation.metrics["servers_moved"] <= instance.arrays().budget


def test_hill_climb_on_the_hand_solved_region():
    result = fleetplan.solve(instance_from_data(tiny_data()), "hill-climb")
    assert result.evaluation.feasible and result.objective == pytest.approx(21.1)


# One 4,000-server region by default (a few seconds); the second is the same path on another draw.
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_heuristic_gap_to_the_mip(seed):
    instance = generate("reservation", {"servers": 4000, "reservations": 20, "datacenters": 4}, seed=seed)
    exact = fleetplan.solve(instance, "mip-highs", time_limit=60)
    # optimal in seconds on an idle machine; under load the bound still holds
    assert exact.status in ("optimal", "time_limit") and exact.bound is not None
    climb = fleetplan.solve(instance, "hill-climb", time_limit=30)
    assert climb.evaluation.feasible, climb.message
    assert climb.objective >= exact.bound - 1e-6
    assert climb.objective <= 1.25 * exact.objective  # measured well below; see docs/reservation.md
    assert climb.model_objective == pytest.approx(climb.objective, rel=1e-9)
    assert climb.evaluation.metrics["servers_moved"] <= instance.arrays().budget
    greedy = fleetplan.solve(instance, "greedy", time_limit=30)
    assert greedy.objective >= exact.bound - 1e-6
    assert greedy.evaluation.metrics["servers_moved"] <= instance.arrays().budget


def test_hill_climb_log_explains_every_move():
    import re

    from tests.conftest import EXAMPLES

    instance = fleetplan.instances.load_instance(EXAMPLES / "reservation-small.json")
    result = fleetplan.solve(instance, "hill-climb", start="today")  # the climb from today, move by move
    moves = [line for line in result.log if line.startswith("move ")]
    assert moves and result.evaluation.feasible
    changes = [float(re.search(r"objective ([+-][0-9.e+-]+)", line).group(1)) for line in moves]
    assert all(change < 0 for change in changes)
    # today's plan is feasible here, so every change is a change of the judge's objective
    assert sum(changes) == pytest.approx(result.objective - evaluate_current(instance).objective, abs=1e-4)


def tiny_region(seed: int) -> dict:
    """The property test's class: 3 datacenters x 2 fault domains, 8 servers of three types, 3
    reservations with mixed guarantees (fault domain, datacenter, none; one ML), today's
    assignment, sometimes a server in maintenance and a disruption budget."""
    rng = np.random.default_rng(seed)
    types = ["cpu1", "cpu2", "gpu"]
    count = 8
    server_type = rng.choice(3, size=count, p=[0.4, 0.35, 0.25])
    fds = [f"f{i}" for i in range(1, 7)]
    guarantees = ["fault_domain", "datacenter", "none"]
    return {
        "kind": "reservation", "datacenters": ["d1", "d2", "d3"],
        "fault_domains": {"id": fds, "datacenter": ["d1", "d1", "d2", "d2", "d3", "d3"]},
        "racks": {"id": [f"r{i}" for i in range(1, 7)], "fault_domain": fds},
        "server_types": [{"id": "cpu1", "category": "cpu", "rru": 1.0},
                         {"id": "cpu2", "category": "cpu", "rru": 1.5},
                         {"id": "gpu", "category": "gpu", "rru": 3.0}],
        "servers": {"type": [types[t] for t in server_type.tolist()],
                    "rack": rng.integers(0, 6, size=count).tolist(),
                    "current": rng.choice([None, "a", "b", "c"], size=count).tolist(),
                    "maintenance": (rng.random(count) < 0.08).tolist()},
        "reservations": [
            {"id": "a", "capacity_rru": float(rng.integers(1, 4)), "accepts": ["cpu1", "cpu2"],
             "guarantee": str(rng.choice(guarantees))},
            {"id": "b", "capacity_rru": float(rng.integers(1, 4)),
             "accepts": ["gpu", "cpu2"] if rng.random() < 0.5 else ["cpu2", "cpu1"],
             "workload": "ml", "guarantee": str(rng.choice(["fault_domain", "none"]))},
            {"id": "c", "capacity_rru": float(rng.integers(1, 3)), "accepts": ["cpu1", "gpu"],
             "guarantee": str(rng.choice(guarantees))},
        ],
        "disruption_budget": int(rng.integers(1, 5)) if rng.random() < 0.5 else None,
    }


# The first 12 draws hold both outcomes (seeds 2, 4 and 8 have no plan, the rest an optimum), so
# each branch runs by default; the other 28 draws run with the slow set.
@pytest.mark.parametrize("seed", [*range(12), *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(12, 40))])
def test_heuristics_find_a_plan_on_every_tiny_region_that_has_one(seed):
    """Feasibility first: wherever the exact MIP finds a plan, both
    heuristics find one the judge accepts; where it proves none, they say infeasible and name
    the shortfall (never status error)."""
    try:
        instance = instance_from_data(tiny_region(seed))
    except fleetplan.InstanceError:
        pytest.skip("the validator refuses this draw")
    exact = fleetplan.solve(instance, "mip-highs", time_limit=30)
    for solver in HEURISTICS:
        result = fleetplan.solve(instance, solver, time_limit=30)
        if exact.status in ("optimal", "feasible"):
            assert result.status == "feasible" and result.evaluation.feasible, (solver, result.message)
            assert result.objective >= exact.objective - 1e-6
        else:
            assert exact.status == "infeasible"
            assert result.status == "infeasible" and result.plan is None, (solver, result.status)
            assert "short by" in result.message or "budget" in result.message


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_tiny_regions_against_brute_force(seed):
    """The same class against enumerating all 4^8 assignments (a minute each)."""
    try:
        instance = instance_from_data(tiny_region(seed))
    except fleetplan.InstanceError:
        pytest.skip("the validator refuses this draw")
    truth = enumerate_assignments(instance, limit=70_000)
    for solver in HEURISTICS:
        result = fleetplan.solve(instance, solver, time_limit=30)
        if truth.objective is None:
            assert result.status == "infeasible"
        else:
            assert result.evaluation.feasible and result.objective >= truth.objective - 1e-6
