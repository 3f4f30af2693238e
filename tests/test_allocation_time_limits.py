"""One clock per solve (issue 15, item 4): every LP of an allocation solver draws from what is
left of the time limit — the binary search's probes, finish-time fairness's LP sequence, water
filling's iterations, POP's parts — and a solve stopped by the clock returns the best plan it
has (X_isolated when no LP answered) with status ``time_limit``."""

import time

import numpy as np
import pytest

import fleetplan
from fleetplan.solvers.deadline import Deadline

LIMIT = 0.3
# 4,096 distinct-enough jobs without aggregation: each of these solves takes 3-25 s unlimited.
CASES = [
    ("min-makespan-binary-search", {}),
    ("finish-time-fairness", {}),
    ("finish-time-fairness", {"method": "levels"}),
    ("max-min-fairness", {}),
    ("max-min-fairness", {"partitions": 4}),
    ("finish-time-fairness", {"partitions": 3}),
    ("water-filling", {}),
    ("hierarchical-water-filling", {}),
]


@pytest.fixture(scope="module")
def large_instance():
    return fleetplan.generate("allocation", {"jobs": 4096, "entities": 4}, seed=0)


@pytest.mark.parametrize("solver,options", CASES)
def test_a_tiny_limit_is_honoured_with_a_plan(large_instance, solver, options):
    started = time.perf_counter()
    result = fleetplan.solve(large_instance, solver, time_limit=LIMIT, aggregate=False, **options)
    wall = time.perf_counter() - started
    # Either the clock stopped it, or it finished within the limit (the price decomposition
    # solves some of these 4,096-job LPs in a fraction of a second).
    assert result.status == "time_limit" or result.wall_s <= LIMIT, (result.status, result.wall_s)
    assert result.plan is not None and result.evaluation.violations == []
    # The solver's own run (imports of its back-end included) within the limit + 1 s; the
    # judge's pass comes after it in fleetplan.solve.
    assert result.wall_s <= LIMIT + 1.0, (result.wall_s, result.log[-3:])
    if not solver.endswith("water-filling"):  # water filling's judge runs bottleneck LPs of its own
        assert wall <= LIMIT + 1.0


def test_binary_search_probes_share_one_clock(large_instance):
    # Each probe used to get the whole limit (5 s -> 46 s): a limit a few probes long must stop
    # the search in time and keep the last feasible probe's allocation.
    # (decomposition="none": the full LP per probe; the price decomposition finishes in time.)
    result = fleetplan.solve(large_instance, "min-makespan-binary-search", time_limit=2.5, aggregate=False,
                             decomposition="none")
    assert result.status == "time_limit" and result.plan is not None
    assert result.wall_s <= 2.5 + 1.0
    isolated = large_instance.arrays().isolated_allocation()
    fallback = fleetplan.evaluate(large_instance, result.plan.model_copy(update={"allocation": isolated.tolist()}))
    assert result.objective <= fallback.objective * (1 + 1e-9)  # never worse than X_isolated


def test_isolated_allocation_is_feasible_and_gives_the_isolated_throughput():
    instance = fleetplan.generate("allocation", {"jobs": 50, "unconsolidated_fraction": 0.5}, seed=3)
    arrays = instance.arrays()
    matrix = arrays.isolated_allocation()
    assert np.all(matrix[~arrays.runnable] == 0)
    plan = fleetplan.solve(instance, "max-min-fairness").plan.model_copy(update={"allocation": matrix.tolist()})
    assert fleetplan.evaluate(instance, plan).violations == []
    assert np.allclose((arrays.throughput * matrix).sum(axis=1), arrays.isolated_throughput)


def test_deadline_slices_never_exceed_what_is_left():
    deadline = Deadline(0.5, started=time.perf_counter() - 0.4)
    assert deadline.remaining() <= 0.1 + 1e-9
    assert deadline.expired(reserve=0.2) and not Deadline(None).expired()
