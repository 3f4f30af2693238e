"""The horizon model against a brute force over every schedule on small random horizons: the
optimum is the cheapest schedule that meets every period's targets, and the bound never passes
a feasible schedule. The brute force shares nothing with the model but the exact per-period
check (an LP: does an allocation meeting the targets exist on this fleet) and writes its own
costs (price, discount, opex, salvage)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fleetplan.instances import instance_from_data
from fleetplan.planning.horizon import plan_horizon
from fleetplan.planning.sizing.allocation import allocation_exists
from fleetplan.planning.targets import parse_target

TYPES = ("a", "b")


def random_case(seed: int):
    rng = np.random.default_rng(seed)
    n_types = int(rng.integers(1, 3))
    types = TYPES[:n_types]
    jobs = [{"id": f"j{m}", "throughput": {t: float(rng.choice([0.5, 1.0, 2.0])) for t in types}}
            for m in range(int(rng.integers(1, 3)))]
    base = {"kind": "allocation", "schema_version": 1, "name": "random",
            "worker_types": [{"name": t, "count": int(rng.integers(0, 2))} for t in types], "jobs": jobs}
    if sum(w["count"] for w in base["worker_types"]) == 0:
        base["worker_types"][0]["count"] = 1
    periods = int(rng.integers(2, 4))
    multipliers = [1] + [int(rng.choice([1, 2])) for _ in range(periods - 1)]
    target = str(rng.choice(["min_time_share>=0.5", "min_time_share>=0.9", "min_throughput_vs_fastest>=0.4"]))
    buy = {}
    for t in types:
        lifetime = int(rng.choice([0, 1, 2]))
        buy[t] = {"price": [float(rng.choice([1.0, 2.0, 3.0])) for _ in range(periods)],
                  "lead_time": int(rng.integers(0, 2)) if periods > 2 else 0,
                  "max_order": 2, "min_order": float(rng.choice([0, 0, 2])),
                  "opex_per_hour": float(rng.choice([0.0, 0.25])), "salvage": float(rng.choice([0.0, 0.5]))}
        if lifetime:
            buy[t]["lifetime"] = lifetime
    horizon = {"periods": periods, "hours_per_period": 1.0, "discount_rate": float(rng.choice([0.0, 0.1])),
               "targets": [target], "demand": {"multipliers": multipliers}, "buy": buy}
    if rng.random() < 0.4:
        horizon["budget"] = float(rng.choice([2.0, 3.0]))
    return base, horizon


def brute_force(base: dict, horizon: dict) -> float:
    """The cheapest schedule by enumeration (inf when none meets every period)."""
    types = [w["name"] for w in base["worker_types"]]
    T, hours, rate = horizon["periods"], horizon["hours_per_period"], horizon["discount_rate"]
    buy = horizon["buy"]
    target = parse_target(horizon["targets"][0], "allocation")
    existing = np.array([w["count"] for w in base["worker_types"]], dtype=float)
    arrays_of = []
    for t in range(T):
        jobs = [dict(job, id=f"{job['id']}~{c}") for job in base["jobs"] for c in range(horizon["demand"]["multipliers"][t])]
        arrays_of.append(instance_from_data({**base, "jobs": jobs}).arrays())
    feasible_cache: dict[tuple, bool] = {}

    def serves(t: int, added: tuple) -> bool:
        key = (t, added)
        if key not in feasible_cache:
            feasible_cache[key] = allocation_exists(arrays_of[t], np.array(added, dtype=float), [target])[0]
        return feasible_cache[key]

    def discount(period: int) -> float:  # 1-based
        return (1 + rate) ** -(period - 1)

    choices = []
    for name in types:
        option = buy[name]
        allowed = [0, 1, 2] if option["min_order"] == 0 else [0, 2]
        choices += [[q if t + option["lead_time"] < T else 0 for q in allowed] for t in range(T)]
    best = math.inf
    for flat in itertools.product(*[sorted(set(c)) for c in choices]):
        orders = np.array(flat, dtype=float).reshape(len(types), T)
        cost = 0.0
        ok = True
        in_use = np.zeros((len(types), T))
        for k, name in enumerate(types):
            option = buy[name]
            lead, life = option["lead_time"], option.get("lifetime")
            for tau in range(T):
                q = orders[k, tau]
                if not q:
                    continue
                price = option["price"][tau]
                cost += discount(tau + 1) * price * q
                arrival = tau + lead
                end = T if life is None else min(T, arrival + life)
                in_use[k, arrival:end] += q
                if life is not None:
                    leaves = arrival + 1 + life  # 1-based first period it is gone
                    if leaves <= T + 1:
                        cost -= q * option["salvage"] * price * discount(leaves)
                    else:
                        book = option["salvage"] + (1 - option["salvage"]) * (leaves - T - 1) / life
                        cost -= q * book * price * discount(T + 1)
        for t in range(T):
            spend = sum(buy[name]["price"][t] * orders[k, t] for k, name in enumerate(types))
            if "budget" in horizon and spend > horizon["budget"] + 1e-9:
                ok = False
                break
            cost += discount(t + 1) * hours * sum(buy[name]["opex_per_hour"] * (existing[k] + in_use[k, t])
                                                  for k, name in enumerate(types))
            if not serves(t, tuple(in_use[:, t])):
                ok = False
                break
        if ok:
            best = min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(20))
def test_the_schedule_is_the_brute_force_optimum_and_the_bound_holds(seed):
    base, horizon = random_case(seed)
    # the existing fleet pays the same opex as what is bought
    horizon["existing"] = {name: {"opex_per_hour": option["opex_per_hour"]} for name, option in horizon["buy"].items()}
    expected = brute_force(base, horizon)
    result = plan_horizon(instance_from_data(base), horizon, mip_rel_gap=0.0)
    if math.isinf(expected):
        assert result.status == "infeasible", result.message
        return
    assert result.status == "optimal", result.message
    assert result.cost == pytest.approx(expected, abs=1e-6)
    assert result.bound <= expected + 1e-6
    for row in result.periods:
        assert all(row["checks"].values()), row


def test_two_stage_equals_the_brute_force_over_first_stage_orders():
    base = {"kind": "allocation", "schema_version": 1, "name": "two-stage",
            "worker_types": [{"name": "a", "count": 1}], "jobs": [{"id": "j", "throughput": {"a": 1.0}}]}
    cases = [{"name": "low", "probability": 0.3, "demand": {"multipliers": [1, 2, 2]}},
             {"name": "high", "probability": 0.7, "demand": {"multipliers": [1, 2, 3]}}]
    horizon = {"periods": 3, "targets": ["min_time_share>=1"],
               "buy": {"a": {"price": [1.0, 1.6, 2.0], "lead_time": 0, "max_order": 3}},
               "scenarios": {"decision_period": 1, "cases": cases}}
    result = plan_horizon(instance_from_data(base), horizon, mip_rel_gap=0.0)
    # by enumeration: x now (shared); each scenario then buys its shortfall as late as it may
    best = math.inf
    for x in range(4):
        expected = x
        for case in cases:
            need = [m - 1 for m in case["demand"]["multipliers"]]  # GPUs beyond the existing one
            recourse = math.inf
            for y2, y3 in itertools.product(range(4), range(4)):
                if x >= need[0] and x + y2 >= need[1] and x + y2 + y3 >= need[2]:
                    recourse = min(recourse, 1.6 * y2 + 2.0 * y3)
            expected += case["probability"] * recourse
        best = min(best, expected)
    assert result.cost == pytest.approx(best, abs=1e-9)
    assert result.stochastic["evpi"] >= -1e-9 and result.stochastic["vss"] >= -1e-9
