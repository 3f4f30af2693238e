"""Sizing under max-min fairness by boxes of purchases: the search against a brute force, and the
box test's bound against every purchase of the box solved by the policy and judged."""

import itertools

import numpy as np
import pytest

import fleetplan
from fleetplan.errors import InstanceError
from fleetplan.planning.sizing.allocation import sized_instance
from fleetplan.planning.sizing.boxes import search_boxes
from fleetplan.planning.sizing.lattice import purchases_by_cost
from fleetplan.planning.sizing.max_min_face import MaxMinFaceTest
from fleetplan.planning.targets import Target

# --- the search, on hand-made pass functions -------------------------------------------------


def cheapest_by_brute_force(price, cap, passes):
    for add, cost in purchases_by_cost(price, cap):
        if passes(add):
            return add, cost
    return None, None


def exact_box_bound(price, passes):
    """The cheapest passing purchase of the box, by enumeration: the tightest valid bound."""
    def bound(lo, hi):
        costs = [float(np.dot(price, point)) for point in itertools.product(*(range(a, b + 1) for a, b in zip(lo, hi, strict=True)))
                 if passes(np.array(point))]
        return min(costs) if costs else float("inf")
    return bound


@pytest.mark.parametrize("seed", range(12))
def test_the_search_finds_the_cheapest_passing_purchase_whatever_the_box_test(seed):
    rng = np.random.default_rng(seed)
    price = rng.uniform(0.5, 3.0, 3).round(2)
    cap = rng.integers(1, 5, 3)
    table = {point: bool(rng.random() < 0.15) for point in itertools.product(*(range(c + 1) for c in cap))}
    passes = lambda add: table[tuple(int(a) for a in add)]  # noqa: E731 - not monotone in the purchase
    want, want_cost = cheapest_by_brute_force(price, cap, passes)
    for box_bound in (exact_box_bound(price, passes), lambda lo, hi: -float("inf")):
        out = search_boxes(price, cap, box_bound, lambda add: (passes(add), None), max_points=10_000,
                           max_boxes=10_000)
        if want is None:
            assert out.found is None and out.exhausted and out.bound == float("inf")
        else:
            assert out.proven and out.cost == pytest.approx(want_cost) and passes(out.found)
            assert out.bound == pytest.approx(want_cost)


def test_a_search_cut_short_keeps_a_true_bound_and_the_best_purchase_it_saw():
    price, cap = np.array([1.0, 1.7]), np.array([6, 6])
    passes = lambda add: add.sum() >= 7 and add[0] % 3 == 1  # noqa: E731
    _, cheapest = cheapest_by_brute_force(price, cap, passes)
    for points in range(1, 12):
        out = search_boxes(price, cap, lambda lo, hi: -float("inf"), lambda add: (passes(add), None),
                           max_points=points)
        assert out.bound <= cheapest + 1e-9
        if out.found is not None:
            assert passes(out.found) and out.cost >= cheapest - 1e-9
            assert out.proven == (out.cost <= out.bound + 1e-9)


def test_an_incumbent_ends_the_search_within_the_gap_and_a_budget_ends_the_lattice():
    price, cap = np.array([1.0, 1.0]), np.array([10, 10])
    passes = lambda add: add.sum() >= 12  # noqa: E731
    out = search_boxes(price, cap, lambda lo, hi: float(lo.sum()) if hi.sum() >= 12 else float("inf"),
                       lambda add: (passes(add), None), incumbent=(np.array([10, 3]), 13.0, None), gap=0.1)
    assert out.proven and passes(out.found) and out.cost <= 13.0 and out.bound * 1.1 >= out.cost - 1e-9
    broke = search_boxes(price, cap, lambda lo, hi: -float("inf"), lambda add: (passes(add), None), max_cost=11.0)
    assert broke.found is None and broke.exhausted and broke.bound == float("inf")


# --- the box test: never above what a passing purchase of the box costs -----------------------

TYPES = ["h100", "a100", "l4"]
METRICS = [("min_throughput_vs_fastest", ">=", (0.2, 0.9)), ("min_time_share", ">=", (0.2, 0.9)),
           ("total_throughput", ">=", (2.0, 20.0)), ("makespan_s", "<=", (200.0, 2000.0))]


def random_cluster(seed: int):
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(int(rng.integers(1, 5))):
        throughput = {t: float(round(s * rng.uniform(0.5, 1.5), 3)) for t, s in zip(TYPES, (8.0, 5.0, 1.5), strict=True)}
        if rng.random() < 0.2:
            throughput[TYPES[int(rng.integers(0, 2))]] = 0.0
        jobs.append({"id": f"j{i}", "throughput": throughput, "scale_factor": int(rng.choice([1, 1, 2])),
                     "steps_left": float(rng.integers(100, 2000)), "weight": float(rng.choice([1, 1, 2]))})
    counts = [int(c) for c in rng.integers(0, 3, len(TYPES))]
    counts[-1] = max(counts[-1], 1)
    data = {"kind": "allocation", "schema_version": 1, "jobs": jobs,
            "worker_types": [{"name": t, "count": c} for t, c in zip(TYPES, counts, strict=True)]}
    metric, op, (low, high) = METRICS[int(rng.integers(0, len(METRICS)))]
    try:
        instance = fleetplan.instances.instance_from_data(data)
    except InstanceError:  # a job with nowhere to run today
        return None, None
    return instance, Target(metric, op, float(rng.uniform(low, high)))


def policy_passes(instance, add, target):
    try:
        result = fleetplan.solve(sized_instance(instance, np.asarray(add)), "max-min-fairness")
    except InstanceError:
        return False
    return result.success and target.holds(result.evaluation.metrics)


# The first block of twelve clusters by default (its boxes with a passing purchase are the check
# the other blocks repeat on other draws); blocks 1 and 2 run with the slow set.
@pytest.mark.parametrize("block", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_the_box_bound_never_exceeds_a_passing_purchase_of_the_box(block):
    price = np.array([4.5, 2.9, 0.8])
    checked = 0
    for seed in range(block * 12, block * 12 + 12):
        rng = np.random.default_rng(seed + 500)
        instance, target = random_cluster(seed)
        if instance is None:
            continue
        test = MaxMinFaceTest(instance.arrays(), [target], price)
        cap = np.array([2, 2, 3])
        passing = {point: float(price @ point) for point in itertools.product(*(range(c + 1) for c in cap))
                   if policy_passes(instance, point, target)}
        for _ in range(4):
            lo = np.array([int(rng.integers(0, c + 1)) for c in cap])
            hi = np.array([int(rng.integers(a, c + 1)) for a, c in zip(lo, cap, strict=True)])
            inside = [cost for point, cost in passing.items() if all(lo <= point) and all(point <= hi)]
            bound = test(lo, hi)
            if inside:
                checked += 1
                assert bound <= min(inside) + 1e-6, (seed, target, lo, hi, bound, min(inside))
    assert checked > 5
