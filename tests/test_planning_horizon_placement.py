"""Planning over time for the placement kind: hand-solved schedules (GPU-hours ordered a period
early, storage, a retirement), every returned period judged on its own instance, the horizon's
cost against one-period sizing of each period, and the bad inputs named."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.errors import InstanceError
from fleetplan.instances import generate, instance_from_data
from fleetplan.instances.placement import PlacementPlan
from fleetplan.instances.placement.evaluate import evaluate
from fleetplan.planning import size
from fleetplan.planning.horizon import plan_horizon


def regions(*tables: tuple[str, float, float, float], gpu_hours: float = 100.0) -> object:
    """Regions ``(id, h100 supply, storage capacity, bytes of its one table)``; one high-priority
    ML job of ``gpu_hours`` on the first region's table."""
    return instance_from_data({
        "kind": "placement", "schema_version": 1, "name": "hand", "gpu_types": ["h100"], "applications": ["app"],
        "dr_policy": {"kind": "none"},
        "regions": [{"id": name, "gpu_supply": {"h100": supply} if supply else {}, "storage_capacity_bytes": capacity,
                     "cpu_capacity": {"app": 1000.0}} for name, supply, capacity, _ in tables],
        "tables": {"id": [f"t{i}" for i in range(len(tables))], "size_bytes": [size for *_, size in tables],
                   "home": [name for name, *_ in tables]},
        "jobs": {"id": ["train"], "kind": ["ml"], "tables": [[0]], "gpu_type": ["h100"], "gpu_hours": [gpu_hours],
                 "cpu_hours": [1.0], "priority": [0], "application": ["app"], "recurring": [True]}})


def assert_judged(result) -> None:
    """Every period's plan judged by the placement judge on that period's instance (its supply the
    installed fleet the schedule reports) meets every target."""
    assert result.periods
    for row in result.periods:
        assert row["metrics"] and all(row["checks"].values()), row
        judged = result.plans[(row["scenario"], row["period"])]
        again = evaluate(judged["instance"], PlacementPlan.current(judged["instance"])).metrics
        assert again == judged["metrics"]
        supply = judged["instance"].arrays().gpu_supply.sum(axis=0)
        assert supply.tolist() == pytest.approx(list(row["fleet"].values()), abs=1e-9)
        for entry in result.schedule:
            if entry["scenario"] == row["scenario"] and entry["period"] == row["period"]:
                region, _, what = entry["item"].partition("/")
                arrays = judged["instance"].arrays()
                r = arrays.region_ids.index(region)
                held = (arrays.storage_capacity[r] if what == "storage"
                        else arrays.gpu_supply[r, arrays.gpu_types.index(what)])
                # purchases rounded up to 1e-6 GPU-hours and whole bytes before judging
                assert entry["installed"] * (1 - 1e-12) - 1e-9 <= held <= entry["installed"] * (1 + 1e-12) + 1.0


def test_growth_with_a_lead_time_orders_the_exact_gpu_hours_one_period_early():
    # 100, 150, 200 GPU-hours of demand on 100 of supply under demand/supply <= 1; an order takes
    # a period and prices fall 10% a period: 50 ordered in period 1, 50 in period 2.
    horizon = {"periods": 3, "targets": ["hp_demand_supply_max<=1"], "demand": {"multipliers": [1, 1.5, 2]},
               "buy": {"east/h100": {"price": 1.0, "price_decline": 0.1, "lead_time": 1}}}
    result = plan_horizon(regions(("east", 100.0, 100.0, 50.0)), horizon)
    assert result.status == "optimal", result.message
    assert result.orders() == pytest.approx({("base", 1, "east/h100"): 50.0, ("base", 2, "east/h100"): 50.0})
    assert result.cost == pytest.approx(50.0 + 45.0)
    assert [row["installed"] for row in result.schedule] == pytest.approx([100.0, 150.0, 200.0])
    assert [row["demand"] for row in result.periods] == pytest.approx([100.0, 150.0, 200.0])
    assert [row["metrics"]["hp_demand_supply_max"] for row in result.periods] == pytest.approx([1.0, 1.0, 1.0])
    assert result.unit == "GPU-hours/day"
    assert_judged(result)


@pytest.mark.parametrize("unit", [1.0, 1e13])
def test_storage_grows_per_region_and_is_bought_where_it_grows(unit):
    # east's bytes triple in period 2 (a class of its own), west's stay: 150 units on 100 of
    # capacity in east, so 50 units of east/storage in period 2 (at half the price) and nothing
    # in the west. At 10^13 bytes a unit the model counts bytes in columns of 10^12 and asks for
    # 10^-6 of one more (10^6 bytes) than is stored.
    horizon = {"periods": 2, "targets": ["storage_over_capacity_bytes<=0"],
               "demand": {"classes": {"east": [1, 3]}},
               "buy": {"east/storage": {"price": 2.0 / unit, "price_decline": 0.5}, "west/storage": {"price": 1.0}}}
    instance = regions(("east", 100.0, 100.0 * unit, 50.0 * unit), ("west", 0.0, 100.0 * unit, 80.0 * unit))
    result = plan_horizon(instance, horizon)
    assert result.status == "optimal", result.message
    margin = 1e-6 * (1e12 if unit > 1 else 1.0)  # the schedule shows orders within 1e-6 of a whole number whole
    assert result.orders() == pytest.approx({("base", 2, "east/storage"): 50.0 * unit + margin}, rel=1e-12, abs=2e-6)
    assert result.cost == pytest.approx(50.0 + margin / unit, rel=1e-12)
    stored = [result.plans[("base", t)]["metrics"]["home_bytes"] for t in (1, 2)]
    assert stored == pytest.approx([130.0 * unit, 230.0 * unit])
    assert_judged(result)


@pytest.mark.parametrize("unit", [1.0, 1e13])
def test_a_budget_and_a_minimum_order_shape_the_storage_schedule(unit):
    # 50, 150, 250 units stored on 100 of capacity: 50 more by period 2, 150 by period 3. Prices
    # 1.1, 1, 0.5 a unit, a budget of 40 a period and orders of 0 or at least 35 units: period 3
    # can pay for 80 at most, so 70 must come earlier, and 35 + 35 is the cheapest split
    # (75 + 0.6 x1 + 0.5 x2 with x1, x2 >= 35): 38.5 + 35 + 40 = 113.5. The same at 10^13 bytes a
    # unit, where the model's columns count 10^12 bytes: budgets and minimum orders scale with them.
    horizon = {"periods": 3, "targets": ["storage_over_capacity_bytes<=0"], "budget": 40.0,
               "demand": {"multipliers": [1, 3, 5]},
               "buy": {"east/storage": {"price": [1.1 / unit, 1.0 / unit, 0.5 / unit], "min_order": 35 * unit}}}
    result = plan_horizon(regions(("east", 100.0, 100.0 * unit, 50.0 * unit)), horizon)
    assert result.status == "optimal", result.message
    orders = {period: units / unit for (_, period, _), units in result.orders().items()}
    assert orders == pytest.approx({1: 35.0, 2: 35.0, 3: 80.0}, rel=1e-6)
    assert result.cost == pytest.approx(113.5, rel=1e-6)
    assert_judged(result)


def test_a_retirement_forces_a_replacement():
    # 40 of east's 100 GPU-hours retire after period 2; the replacement takes a period to arrive,
    # and with a discount rate it is ordered as late as it can be: in period 2.
    horizon = {"periods": 3, "targets": ["hp_demand_supply_max<=1"], "discount_rate": 0.1,
               "buy": {"east/h100": {"price": 1.0, "lead_time": 1}},
               "existing": {"east/h100": {"retire": [{"count": 40, "after": 2}]}}}
    result = plan_horizon(regions(("east", 100.0, 100.0, 50.0)), horizon)
    assert result.status == "optimal", result.message
    assert result.orders() == pytest.approx({("base", 2, "east/h100"): 40.0})
    assert result.cost == pytest.approx(40.0 / 1.1)
    rows = {row["period"]: row for row in result.schedule}
    assert rows[3]["retiring"] == pytest.approx(40.0) and rows[3]["arriving"] == pytest.approx(40.0)
    assert rows[3]["installed"] == pytest.approx(100.0)
    assert_judged(result)


def test_unserved_gpu_hours_and_opex_enter_the_cost():
    # 150 GPU-hours on 100 with at most 20 unserved: 30 bought, whose opex (0.5 per unit-hour,
    # 2-hour periods) and the existing supply's (0.1) are paid every period.
    horizon = {"periods": 2, "hours_per_period": 2.0, "targets": ["hp_gpu_hours_unserved<=20"],
               "buy": {"east/h100": {"price": 3.0, "opex_per_hour": 0.5}},
               "existing": {"east/h100": {"opex_per_hour": 0.1}}}
    result = plan_horizon(regions(("east", 100.0, 100.0, 50.0), gpu_hours=150.0), horizon)
    assert result.orders() == pytest.approx({("base", 1, "east/h100"): 30.0})
    assert result.cost == pytest.approx(30 * 3.0 + 2 * (30 * 0.5 * 2) + 2 * (100 * 0.1 * 2))
    assert [row["metrics"]["hp_gpu_hours_unserved"] for row in result.periods] == pytest.approx([20.0, 20.0])
    assert_judged(result)


def test_a_period_that_cannot_be_served_names_its_region():
    horizon = {"periods": 2, "targets": ["hp_demand_supply_max<=1"], "demand": {"multipliers": [2, 2]},
               "buy": {"east/h100": {"price": 1.0, "lead_time": 1}}}
    result = plan_horizon(regions(("east", 100.0, 100.0, 50.0)), horizon)
    assert result.status == "infeasible" and not result.success
    assert "quarter 1 cannot be served" in result.message
    assert "east short of 100 GPU-hours/day" in result.message


def test_two_scenarios_share_the_first_order_and_every_period_is_judged():
    horizon = {"periods": 2, "targets": ["hp_demand_supply_max<=1"],
               "buy": {"east/h100": {"price": [1.0, 2.5]}},
               "scenarios": {"cases": [{"name": "low", "probability": 0.5, "demand": {"multipliers": [1, 1.2]}},
                                       {"name": "high", "probability": 0.5, "demand": {"multipliers": [1, 2]}}]}}
    result = plan_horizon(regions(("east", 100.0, 100.0, 50.0)), horizon)
    assert result.status == "optimal", result.message
    # x bought now: x + 0.5 * 2.5 * (max(20 - x, 0) + max(100 - x, 0)) is least at x = 100
    assert result.cost == pytest.approx(100.0)
    assert result.stochastic["wait_and_see"] == pytest.approx(0.5 * 20 + 0.5 * 100)
    assert result.stochastic["evpi"] == pytest.approx(100.0 - 60.0)
    assert_judged(result)


def random_case(seed: int) -> tuple[object, list[str], dict]:
    instance = generate("placement", {"regions": 3, "tables": 40, "jobs": 60, "gpu_types": 2}, seed=seed)
    arrays = instance.arrays()
    rng = np.random.default_rng(seed)
    targets = [f"hp_demand_supply_max<={rng.uniform(0.6, 1.2):.3f}",
               f"hp_gpu_hours_unserved<={rng.uniform(0, 50):.2f}", "storage_over_capacity_bytes<=0"]
    if seed % 2:
        targets.append(f"hp_demand_supply_max_per_type<={rng.uniform(0.8, 1.5):.3f}")
    prices = {f"{r}/{g}": [round(float(p), 3) for p in rng.uniform(1, 5, 3)]
              for r in arrays.region_ids for g in arrays.gpu_types}
    prices.update({f"{r}/storage": [round(float(p), 3) * 1e-9 for p in rng.uniform(1, 5, 3)]
                   for r in arrays.region_ids})
    return instance, targets, prices


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_unlinked_periods_cost_the_sum_of_one_period_sizings(seed):
    # Lifetime 1, no lead time, no budget, no discount: each period is its own sizing problem,
    # so the horizon's cost is the sum of `size` on each period's instance at that period's prices.
    instance, targets, prices = random_case(seed)
    multipliers = [1.0, 1.4, 2.0]
    horizon = {"periods": 3, "targets": targets, "demand": {"multipliers": multipliers},
               "buy": {name: {"price": price, "lifetime": 1} for name, price in prices.items()}}
    result = plan_horizon(instance, horizon, mip_rel_gap=0.0)  # exact, to compare with the exact sizings
    assert result.status == "optimal", result.message
    assert_judged(result)
    total = 0.0
    for t, multiplier in enumerate(multipliers):
        data = instance.model_dump()  # the period's demand, built here apart from the horizon's code
        data["jobs"]["gpu_hours"] = [h * multiplier for h in data["jobs"]["gpu_hours"]]
        data["tables"]["size_bytes"] = [b * multiplier for b in data["tables"]["size_bytes"]]
        sized = size(instance_from_data(data), targets, [f"{name}={price[t]!r}" for name, price in prices.items()])
        assert sized.status == "optimal", sized.message
        total += sized.cost
    # size rounds its purchases up to 1e-6 GPU-hours and whole bytes, the horizon prices the LP's
    assert result.cost == pytest.approx(total, rel=1e-5)
    assert result.bound <= result.cost


@pytest.mark.parametrize(("change", "path"), [
    ({"buy": {"*/h100": {"price": 1.0}}}, "buy.*/h100"),
    ({"buy": {"north/h100": {"price": 1.0}}}, "buy.north/h100"),
    ({"buy": {"east/a100": {"price": 1.0}}}, "buy.east/a100"),
    ({"buy": {"east": {"price": 1.0}}}, "buy.east"),
    ({"existing": {"east/h100": {"retire": [{"count": 500, "after": 1}]}}}, "existing.east/h100.retire"),
    ({"demand": {"classes": {"north": 0.1}}}, "demand.classes.north"),
    ({"demand": {"new_jobs": [{"from_period": 2, "jobs": [{"id": "x"}]}]}}, "demand.new_jobs"),
    ({"targets": ["min_time_share>=1"]}, "targets"),
    ({"targets": ["hp_demand_supply_max<=0"]}, "targets"),
    ({"targets_by_period": {2: ["hp_gpu_hours_unserved>=1"]}}, "targets_by_period.2"),
])
def test_bad_placement_horizons_name_the_field(change, path):
    horizon = {"periods": 3, "targets": ["hp_demand_supply_max<=1"], "buy": {"east/h100": {"price": 1.0}}, **change}
    with pytest.raises(InstanceError) as caught:
        plan_horizon(regions(("east", 100.0, 100.0, 50.0)), horizon)
    assert caught.value.path.startswith(path), str(caught.value)


def test_the_models_demand_is_the_judges_breakdown_of_each_periods_instance():
    # The model scales the base breakdown per region; the judge measures the period's instance
    # (each job's GPU-hours and each table's bytes scaled by its region's multiplier): the same.
    from fleetplan.planning.horizon import parse_horizon
    from fleetplan.planning.horizon.placement import PlacementPeriods

    instance = generate("placement", {"regions": 4, "tables": 60, "jobs": 80, "gpu_types": 2}, seed=3)
    spec = parse_horizon({"periods": 3, "targets": ["hp_demand_supply_max<=1"], "demand": {
        "growth": 0.2, "classes": {"region0": [1, 0.5, 3], "region2": 0.1}}, "buy": {"region0/storage": {"price": 1}}})
    kind = PlacementPeriods(instance, spec, spec.scenario_list())
    for t in range(3):
        period = kind.period_instance(t, 0, kind.existing_cells(t))
        breakdown = evaluate(period, PlacementPlan.current(period)).breakdown
        demand, stored = kind.needs(t, 0)
        assert demand.ravel().tolist() == pytest.approx(breakdown["region_gpu_types"]["hp_gpu_demand"], rel=1e-12)
        assert stored.tolist() == pytest.approx(breakdown["regions"]["storage_used_bytes"], rel=1e-12)
    assert kind.needs(2, 0)[1][0] == pytest.approx(3 * kind.needs(0, 0)[1][0]) and kind.needs(0, 0)[1][0] > 0
    assert kind.needs(2, 0)[0][2].sum() == pytest.approx(1.21 * kind.needs(0, 0)[0][2].sum())
    assert kind.needs(0, 0)[0][2].sum() > 0 and (kind.job_region < 0).any()  # split jobs exist and count nowhere


def test_the_example_horizon_plans_on_the_command_line(tmp_path, capsys):
    import json

    from conftest import EXAMPLES

    from fleetplan.cli import main

    out = tmp_path / "schedule.csv"
    code = main(["horizon", str(EXAMPLES / "placement-small.json"), str(EXAMPLES / "horizon-placement.yaml"),
                 "--json", "-o", str(out)])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["status"] == "optimal", result["message"]
    assert all(all(row["checks"].values()) for row in result["periods"])
    assert out.read_text().startswith("scenario,period,item,ordered")
    bad = tmp_path / "bad.yaml"
    bad.write_text("periods: 2\ntargets: ['hp_demand_supply_max<=1']\nbuy:\n  region9/h100: {price: 1}\n")
    assert main(["horizon", str(EXAMPLES / "placement-small.json"), str(bad)]) == 2
    assert "buy.region9/h100: unknown region 'region9'" in capsys.readouterr().err


def test_jobs_stated_per_period_are_for_the_allocation_kind():
    import fleetplan

    horizon = {"periods": 2, "targets": ["hp_demand_supply_max<=10"],
               "demand": {"jobs_by_period": [[], []]}, "buy": {"region0/h100": {"price": 1.0}}}
    with pytest.raises(InstanceError, match="demand.jobs_by_period"):
        plan_horizon(fleetplan.load_instance("examples/placement-small.json"), horizon)
