"""Sizing against a brute force: on small random allocation instances, every purchase within the
limits is enumerated and judged, and `size` must agree with it.

For each instance: (a) the reported purchase meets the targets (the sized instance's plan, judged);
(b) when the status is ``optimal`` no cheaper purchase meets them; (c) the bound is at most the
cheapest passing cost; (d) ``infeasible`` only when no purchase passes. Without a policy a
purchase passes when some allocation meets every target; the brute force decides that with its
own LP (scipy's HiGHS, written here from the judge's definitions, not sizing's model) and checks
that LP's allocation with the judge. Under a policy a purchase passes when the policy's own plan,
judged, meets every target.
"""

import itertools

import numpy as np
import pytest

import fleetplan
from fleetplan.errors import InstanceError
from fleetplan.instances.allocation import AllocationPlan
from fleetplan.planning import size
from fleetplan.planning.targets import Target

TYPES = ["h100", "a100", "l4"]
METRICS = ["min_time_share", "min_throughput_vs_fastest", "min_speedup_over_isolated", "total_throughput",
           "makespan_s", "slo_missed_jobs"]


def random_case(seed: int):
    rng = np.random.default_rng(seed)
    n_jobs = int(rng.integers(1, 5))
    counts = [int(c) for c in rng.integers(0, 3, len(TYPES))]
    if sum(counts) == 0:
        counts[-1] = 1
    speed = np.array([8.0, 5.0, 1.5])
    jobs = []
    for i in range(n_jobs):
        throughput = {t: float(round(s * rng.uniform(0.5, 1.5), 3)) for t, s in zip(TYPES, speed, strict=True)}
        if rng.random() < 0.2:
            throughput[TYPES[int(rng.integers(0, 2))]] = 0.0
        job = {"id": f"j{i}", "throughput": throughput, "scale_factor": int(rng.choice([1, 1, 1, 2])),
               "steps_left": float(rng.integers(100, 2000))}
        if rng.random() < 0.4:
            job["slo_hours"] = float(rng.uniform(0.02, 0.2))
        jobs.append(job)
    data = {"kind": "allocation", "schema_version": 1,
            "worker_types": [{"name": t, "count": c} for t, c in zip(TYPES, counts, strict=True)], "jobs": jobs}
    try:
        instance = fleetplan.instances.instance_from_data(data)
    except InstanceError:
        return None
    buyable = [TYPES[k] for k in sorted(rng.choice(3, int(rng.integers(1, 4)), replace=False))]
    prices = {"h100": 4.5, "a100": 2.9, "l4": 0.8}
    buy = [f"{t}={prices[t] * float(rng.uniform(0.8, 1.2)):.3f}:{int(rng.integers(1, 4))}" for t in buyable]
    targets = []
    for metric in rng.choice(METRICS, int(rng.integers(1, 3)), replace=False):
        if metric == "slo_missed_jobs":
            if not any("slo_hours" in j for j in jobs):
                continue
            targets.append("slo_missed_jobs<=0")
        elif metric == "makespan_s":
            targets.append(f"makespan_s<={float(rng.uniform(100, 1500)):.1f}")
        elif metric == "total_throughput":
            targets.append(f"total_throughput>={float(rng.uniform(1, 12)):.2f}")
        elif metric == "min_time_share":
            targets.append(f"min_time_share>={float(rng.uniform(0.1, 1.0)):.2f}")
        else:
            targets.append(f"{metric}>={float(rng.uniform(0.2, 1.2)):.2f}")
    return instance, targets or ["min_time_share>=0.3"], buy


def parse_buy(buy):
    out = {}
    for item in buy:
        name, rest = item.split("=")
        price, cap = rest.split(":")
        out[name] = (float(price), int(cap))
    return out


def sized(instance, add: dict):
    data = instance.model_dump()
    for entry in data["worker_types"]:
        entry["count"] += add.get(entry["name"], 0)
    try:
        return fleetplan.instances.instance_from_data(data)
    except InstanceError:  # a job left with nowhere to run: not a valid cluster
        return None


def allocation_meeting(instance, targets: list[Target]):
    """An allocation meeting every target, by an LP written from the judge's definitions, or None."""
    from scipy.optimize import linprog

    arrays = instance.arrays()
    cells = list(zip(*np.nonzero(arrays.runnable), strict=True))
    if not cells:
        return None
    n_jobs, n = len(arrays.job_ids), len(cells)
    rows, low = [], []  # rows @ x >= low
    upper_rows, upper = [], []  # rows @ x <= upper
    through = np.zeros((n_jobs, n))
    time = np.zeros((n_jobs, n))
    for c, (m, k) in enumerate(cells):
        through[m, c] = arrays.throughput[m, k]
        time[m, c] = 1.0
    for m in range(n_jobs):
        upper_rows.append(time[m])
        upper.append(1.0)
    for k in range(len(arrays.worker_types)):
        row = np.zeros(n)
        for c, (m, kk) in enumerate(cells):
            if kk == k:
                row[c] = arrays.scale_factor[m]
        upper_rows.append(row)
        upper.append(arrays.num_workers[k])
    for target in targets:
        v = target.value
        for m in range(n_jobs):
            floor = None
            if target.metric == "min_time_share":
                rows.append(time[m])
                low.append(v)
            elif target.metric == "min_throughput_vs_fastest":
                floor = v * arrays.fastest_throughput[m]
            elif target.metric == "min_speedup_over_isolated":
                floor = v * arrays.isolated_throughput[m]
            elif target.metric == "makespan_s":
                floor = arrays.steps_left[m] / v
            elif target.metric == "slo_missed_jobs" and np.isfinite(arrays.slo_seconds[m]):
                floor = arrays.steps_left[m] / arrays.slo_seconds[m]
            if floor is not None:
                rows.append(through[m])
                low.append(floor)
        if target.metric == "total_throughput":
            rows.append(through.sum(axis=0))
            low.append(v)
    a_ub = np.array(upper_rows + [-r for r in rows])
    b_ub = np.array(upper + [-(x - 1e-9 * max(1.0, abs(x))) for x in low])
    outcome = linprog(np.zeros(n), A_ub=a_ub, b_ub=b_ub, bounds=(0, 1), method="highs")
    if outcome.status != 0:
        return None
    matrix = np.zeros((n_jobs, len(arrays.worker_types)))
    for c, (m, k) in enumerate(cells):
        matrix[m, k] = outcome.x[c]
    return matrix


def brute_force(instance, targets, buy, policy=None):
    """{purchase tuple: (cost, passes)} over every purchase within the limits."""
    options = parse_buy(buy)
    names = list(options)
    table = {}
    for units in itertools.product(*(range(options[t][1] + 1) for t in names)):
        add = dict(zip(names, units, strict=True))
        cost = sum(options[t][0] * u for t, u in add.items())
        cluster = sized(instance, add)
        passes = False
        if cluster is not None and policy is None:
            matrix = allocation_meeting(cluster, targets)
            if matrix is not None:
                plan = AllocationPlan.from_matrix(cluster, np.clip(matrix, 0, 1), solver="brute", policy="max_throughput")
                metrics = fleetplan.evaluate(cluster, plan).metrics
                assert all(t.holds(metrics) for t in targets), (add, metrics)
                passes = True
        elif cluster is not None:
            result = fleetplan.solve(cluster, policy)
            passes = result.success and all(t.holds(result.evaluation.metrics) for t in targets)
        table[units] = (cost, passes)
    return names, table


def check_against_brute_force(seed, policy=None):
    case = random_case(seed)
    if case is None:
        return None
    instance, target_texts, buy = case
    result = size(instance, target_texts, buy, policy=policy)
    names, table = brute_force(instance, result.targets, buy, policy)
    passing = [cost for cost, ok in table.values() if ok]
    cheapest = min(passing) if passing else None
    where = f"seed {seed}: {target_texts} {buy} -> {result.status} {result.additions} cost {result.cost} " \
            f"bound {result.bound} (cheapest {cheapest})"
    if cheapest is None:
        assert result.status in ("infeasible", "time_limit"), where
        return result.status
    assert result.status != "infeasible", where
    assert result.status in ("optimal", "feasible"), where
    # (a) the purchase meets the targets: the sized instance's plan, judged
    assert all(result.checks.values()), where
    units = tuple(int(result.additions.get(t, 0)) for t in names)
    assert table[units][1], where
    # (c) the bound bounds the cheapest
    assert result.bound is None or result.bound <= cheapest + 1e-6 * max(1, cheapest), where
    # (b) optimal means cheapest
    if result.status == "optimal":
        assert result.cost == pytest.approx(cheapest, rel=1e-6, abs=1e-9), where
    return result.status


@pytest.mark.parametrize("block", range(4))
def test_policy_free_sizing_matches_a_brute_force(block):
    statuses = [check_against_brute_force(seed) for seed in range(block * 15, block * 15 + 15)]
    assert any(s == "optimal" for s in statuses)


@pytest.mark.parametrize("block", range(2))
def test_sizing_under_max_min_fairness_matches_a_brute_force(block):
    statuses = [check_against_brute_force(seed, "max-min-fairness") for seed in range(1000 + block * 10, 1010 + block * 10)]
    assert any(s == "optimal" for s in statuses)


@pytest.mark.slow
@pytest.mark.parametrize("block", range(20))
def test_policy_free_sizing_matches_a_brute_force_many(block):
    for seed in range(100 + block * 20, 120 + block * 20):
        check_against_brute_force(seed)


@pytest.mark.slow
@pytest.mark.parametrize("block", range(10))
def test_sizing_under_max_min_fairness_matches_a_brute_force_many(block):
    for seed in range(2000 + block * 20, 2020 + block * 20):
        check_against_brute_force(seed, "max-min-fairness")
