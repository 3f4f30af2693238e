"""Planning over time: hand-solved schedules, scenarios (VSS and EVPI by hand), the horizon
file's errors, and every returned period judged."""

from __future__ import annotations

import math

import pytest

from fleetplan.errors import InstanceError
from fleetplan.instances import instance_from_data
from fleetplan.planning.horizon import load_horizon, plan_horizon
from fleetplan.planning.horizon.allocation import copies


def one_type(count: int, jobs: int = 2, name: str = "g") -> object:
    """``jobs`` one-GPU jobs on ``count`` GPUs of one type: under min_time_share>=1 a period with
    n jobs needs exactly n GPUs."""
    return instance_from_data({
        "kind": "allocation", "schema_version": 1, "name": "hand",
        "worker_types": [{"name": name, "count": count}],
        "jobs": [{"id": f"j{m}", "throughput": {name: 1.0}} for m in range(jobs)]})


def assert_judged(result) -> None:
    assert result.periods
    for row in result.periods:
        assert row["metrics"], row
        assert all(row["checks"].values()), row


def test_growth_with_a_lead_time_orders_one_period_early_by_the_exact_amount():
    # 2, 3, 4 jobs need 2, 3, 4 GPUs; an order takes a period to arrive and prices fall 10% a
    # period, so each GPU is ordered exactly one period before it is needed.
    horizon = {"periods": 3, "targets": ["min_time_share>=1"], "demand": {"multipliers": [1, 1.5, 2]},
               "buy": {"g": {"price": 1.0, "price_decline": 0.1, "lead_time": 1}}}
    result = plan_horizon(one_type(2), horizon)
    assert result.status == "optimal"
    assert result.orders() == {("base", 1, "g"): 1, ("base", 2, "g"): 1}
    assert result.cost == pytest.approx(1.0 + 0.9)
    assert result.bound == pytest.approx(result.cost)
    installed = [row["installed"] for row in result.schedule]
    arriving = [row["arriving"] for row in result.schedule]
    assert installed == [2, 3, 4] and arriving == [0, 1, 1]
    assert_judged(result)


def test_a_budget_forces_an_early_purchase():
    # 2 more GPUs are needed in period 3; with a discount rate the latest purchase is the
    # cheapest, but a budget of one GPU a period forces one of them a period early.
    base = {"periods": 3, "targets": ["min_time_share>=1"], "demand": {"multipliers": [1, 1, 2]},
            "discount_rate": 0.1, "buy": {"g": {"price": 1.0}}}
    free = plan_horizon(one_type(2), base)
    assert free.orders() == {("base", 3, "g"): 2}
    tight = plan_horizon(one_type(2), {**base, "budget": 1.0})
    assert tight.status == "optimal"
    assert tight.orders() == {("base", 2, "g"): 1, ("base", 3, "g"): 1}
    assert tight.cost == pytest.approx(1 / 1.1 + 1 / 1.21, abs=1e-9)
    assert_judged(tight)
    # one more unit of budget in period 3 is worth the discount it lets the schedule keep
    valued = plan_horizon(one_type(2), {**base, "budget": 1.0}, marginal=True)
    assert valued.marginal["budget"][3]["saving"] == pytest.approx(1 / 1.1 - 1 / 1.21, abs=1e-9)
    assert valued.marginal["budget"][2]["saving"] == pytest.approx(0.0, abs=1e-9)  # spent, but more saves nothing
    assert 1 not in valued.marginal["budget"]  # room for another GPU: the budget does not bind


def test_a_retirement_forces_a_replacement():
    horizon = {"periods": 3, "targets": ["min_time_share>=1"], "buy": {"g": {"price": 1.0, "lead_time": 1}},
               "existing": {"g": {"retire": [{"count": 1, "after": 2}]}}}
    result = plan_horizon(one_type(2), horizon)
    assert result.status == "optimal"
    assert result.orders() == {("base", 2, "g"): 1}
    rows = {row["period"]: row for row in result.schedule}
    assert rows[3]["retiring"] == 1 and rows[3]["arriving"] == 1 and rows[3]["installed"] == 2
    assert_judged(result)


def test_lifetime_and_salvage_and_opex_enter_the_cost():
    # One GPU bought in period 1 (price 10, life 2, salvage 0.2), used in periods 1-2, gone in 3;
    # opex 1 per GPU-hour over 1-hour periods; no discount.
    horizon = {"periods": 3, "hours_per_period": 1.0, "targets": ["min_time_share>=1"],
               "demand": {"multipliers": [2, 2, 1]},
               "buy": {"g": {"price": 10.0, "lifetime": 2, "salvage": 0.2, "opex_per_hour": 1.0}}}
    result = plan_horizon(one_type(1, jobs=1), horizon)
    assert result.orders() == {("base", 1, "g"): 1}
    # capex 10 - salvage 2 + opex of the bought GPU 2 periods (2) + the existing GPU's 3 periods (3)
    assert result.cost == pytest.approx(10 - 2 + 2 + 3)
    assert [row["opex"] for row in result.periods] == [2.0, 2.0, 1.0]


def two_scenarios(mode: str = "two-stage") -> dict:
    # Period 2 needs 1 more GPU (low) or 3 (high), equally likely; a GPU costs 1 now and 2.5
    # later. By hand: buying x now costs x + 0.5 * 2.5 * (max(1-x,0) + max(3-x,0)): 5, 3.5,
    # 3.25, 3 for x = 0..3, so RP = 3. Knowing the scenario: 1 or 3, WS = 2, EVPI = 1. The mean
    # scenario (3 jobs) buys 2 now; then high needs one more at 2.5: EEV = 3.25, VSS = 0.25.
    return {"periods": 2, "targets": ["min_time_share>=1"], "buy": {"g": {"price": [1.0, 2.5]}},
            "scenarios": {"mode": mode, "decision_period": 1, "cases": [
                {"name": "low", "probability": 0.5, "demand": {"multipliers": [1, 2]}},
                {"name": "high", "probability": 0.5, "demand": {"multipliers": [1, 4]}}]}}


def test_two_scenarios_by_hand_give_vss_and_evpi():
    result = plan_horizon(one_type(1, jobs=1), two_scenarios())
    assert result.status == "optimal"
    assert result.cost == pytest.approx(3.0, abs=1e-6)
    assert result.orders() == {("low", 1, "g"): 3, ("high", 1, "g"): 3}
    values = result.stochastic
    assert values["wait_and_see"] == pytest.approx(2.0, abs=1e-6)
    assert values["evpi"] == pytest.approx(1.0, abs=1e-6)
    assert values["expected_mean_value"] == pytest.approx(3.25, abs=1e-6)
    assert values["vss"] == pytest.approx(0.25, abs=1e-6)
    assert values["per_scenario"] == pytest.approx({"low": 1.0, "high": 3.0}, abs=1e-6)
    assert_judged(result)


def test_robust_schedule_meets_every_scenario_with_one_schedule():
    result = plan_horizon(one_type(1, jobs=1), two_scenarios("robust"))
    assert result.status == "optimal" and result.mode == "robust"
    assert result.cost == pytest.approx(3.0)
    low = {k[1:]: v for k, v in result.orders().items() if k[0] == "low"}
    high = {k[1:]: v for k, v in result.orders().items() if k[0] == "high"}
    assert low == high
    assert result.stochastic is None
    assert_judged(result)


def test_a_period_no_purchase_can_serve_is_infeasible_with_its_shortfall():
    # 3 jobs on 1 GPU in period 1 and nothing can arrive before period 2
    horizon = {"periods": 2, "targets": ["min_time_share>=0.5"], "buy": {"g": {"price": 1.0, "lead_time": 1}}}
    result = plan_horizon(one_type(1, jobs=3), horizon)
    assert result.status == "infeasible" and not result.success
    assert "quarter 1 cannot be served" in result.message
    assert "min_time_share 0.3333 at best" in result.message


def test_a_budget_too_small_is_named():
    horizon = {"periods": 2, "targets": ["min_time_share>=1"], "demand": {"multipliers": [1, 4]},
               "buy": {"g": {"price": 1.0}}, "budget": 1.0}
    result = plan_horizon(one_type(1, jobs=1), horizon)
    assert result.status == "infeasible"
    assert "budgets cannot pay" in result.message


@pytest.mark.parametrize(("change", "path"), [
    ({"buy": {"g": {"price": 1.0, "lead_time": 3}}}, "buy.g.lead_time"),
    ({"buy": {"h100": {"price": 1.0}}}, "buy.h100"),
    ({"buy": {"g": {"price": [1.0, 2.0]}}}, "buy.g.price"),
    ({"buy": {"g": {"price": 1.0, "min_order": 1.5}}}, "buy.g.min_order"),
    ({"budget": [1.0]}, "budget"),
    ({"existing": {"g": {"retire": [{"count": 5, "after": 1}]}}}, "existing.g.retire"),
    ({"scenarios": {"cases": [{"name": "a", "probability": 0.4}]}}, "scenarios"),
    ({"targets": ["min_time_share>0.5"]}, "targets"),
])
def test_bad_horizons_name_the_field(change, path):
    horizon = {"periods": 3, "targets": ["min_time_share>=1"], "buy": {"g": {"price": 1.0}}, **change}
    with pytest.raises(InstanceError) as caught:
        plan_horizon(one_type(2), horizon)
    assert caught.value.path.startswith(path), str(caught.value)


def test_a_budget_that_cannot_pay_the_existing_opex_is_bad_input():
    horizon = {"periods": 2, "targets": ["min_time_share>=1"], "buy": {"g": {"price": 1.0}},
               "existing": {"g": {"opex_per_hour": 1.0}}, "hours_per_period": 10, "budget": [100, 5],
               "budget_covers": "capex+opex"}
    with pytest.raises(InstanceError, match=r"budget\[1\].*existing fleet's opex"):
        plan_horizon(one_type(2), horizon)


def test_file_errors_give_line_and_column(tmp_path):
    path = tmp_path / "horizon.yaml"
    path.write_text("periods: 2\ntargets: ['min_time_share>=1']\nbuy:\n  g:\n    price: 1\n    lead_time: 5\n")
    with pytest.raises(InstanceError) as caught:
        load_horizon(path)
    assert str(caught.value).startswith(f"{path}:6:16: buy.g.lead_time:")
    path.write_text("periods: [2\n")
    with pytest.raises(InstanceError, match=r"horizon.yaml:2:1: malformed YAML"):
        load_horizon(path)


def test_buy_table_from_csv_names_line_and_column(tmp_path):
    (tmp_path / "buy.csv").write_text("name,price,lead_time\ng,1.0,1\n")
    (tmp_path / "h.yaml").write_text("periods: 2\ntargets: ['min_time_share>=1']\nbuy: buy.csv\n")
    spec = load_horizon(tmp_path / "h.yaml")
    assert spec.buy["g"].lead_time == 1 and spec.buy["g"].price == 1.0
    (tmp_path / "buy.csv").write_text("name,price,lead_time\ng,1.0,soon\n")
    with pytest.raises(InstanceError, match=r"buy.csv:2:3: buy.g.lead_time: 'soon' is not a number"):
        load_horizon(tmp_path / "h.yaml")


def test_new_jobs_join_from_their_period():
    new = [{"id": "late", "throughput": {"g": 1.0}}]
    horizon = {"periods": 3, "targets": ["min_time_share>=1"], "buy": {"g": {"price": 1.0}},
               "demand": {"new_jobs": [{"from_period": 3, "jobs": new}]}}
    result = plan_horizon(one_type(2), horizon)
    assert result.orders() == {("base", 3, "g"): 1}
    assert [row["demand"] for row in result.periods] == [2, 2, 3]


def test_copies_spread_the_remainder_and_keep_the_total():
    for count in range(1, 9):
        for multiplier in (0.0, 0.3, 1.0, 1.15, 2.5):
            spread = copies(count, multiplier)
            assert spread.sum() == math.floor(count * multiplier + 0.5)
            assert spread.max() - spread.min() <= 1


def test_the_command_writes_the_schedule_and_keeps_its_exit_codes(tmp_path, capsys):
    import json

    from fleetplan.cli import main

    instance = tmp_path / "fleet.json"
    instance.write_text(json.dumps(one_type(2).model_dump()))
    good = tmp_path / "h.yaml"
    good.write_text("periods: 3\ntargets: ['min_time_share>=1']\ndemand: {multipliers: [1, 1.5, 2]}\n"
                    "buy: {g: {price: 1, lead_time: 1}}\n")
    out = tmp_path / "schedule.csv"
    assert main(["horizon", str(instance), str(good), "-o", str(out), "--plot", str(tmp_path / "h.png")]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("scenario,period,item,ordered") and len(lines) == 4
    assert (tmp_path / "h.png").stat().st_size > 0
    # a period nothing can serve: exit 1, nothing written
    stuck = tmp_path / "stuck.yaml"
    stuck.write_text("periods: 2\ntargets: ['min_time_share>=1']\ndemand: {multipliers: [2, 2]}\n"
                     "buy: {g: {price: 1, lead_time: 1}}\n")
    gone = tmp_path / "never.json"
    assert main(["horizon", str(instance), str(stuck), "-o", str(gone)]) == 1
    assert not gone.exists()
    # bad input: exit 2, one line naming the file, line, column and field
    bad = tmp_path / "bad.yaml"
    bad.write_text("periods: 2\ntargets: ['min_time_share>=1']\nbuy: {g: {price: 1, lead_time: 2}}\n")
    capsys.readouterr()
    assert main(["horizon", str(instance), str(bad)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"{bad}:3:" in error[0] and "buy.g.lead_time" in error[0]
    assert main(["horizon", str(instance), str(good), "-o", str(tmp_path / "x.txt")]) == 2
    assert main(["horizon", str(instance), str(good), "--gap", "2"]) == 2


def test_every_period_is_also_solved_by_the_policy_that_runs():
    import fleetplan

    # identical one-GPU jobs: max-min fairness gives each its own GPU, as the schedule's allocation does
    horizon = {"periods": 2, "targets": ["min_time_share>=1"], "demand": {"multipliers": [1, 2]},
               "buy": {"g": {"price": 1.0}}}
    result = plan_horizon(one_type(2), horizon)
    assert [row["policy"] for row in result.periods] == ["max-min-fairness"] * 2
    assert all(all(row["policy_checks"].values()) for row in result.periods)
    assert "max-min-fairness's own allocation meets them too" in result.message
    # the bundled year: the model's allocation meets the throughput target, max-min fairness's does not
    year = plan_horizon(fleetplan.load_instance("examples/inventory-30-jobs.json"), "examples/horizon-1-year.yaml",
                        stochastic=False)
    assert year.success and all(all(row["checks"].values()) for row in year.periods)
    missed = [row for row in year.periods if not all(row["policy_checks"].values())]
    assert missed and "but under max-min-fairness, the policy that runs" in year.message
    for row in missed:  # the policy's value is the judge's on the policy's own plan
        assert row["policy_metrics"]["min_throughput_vs_fastest"] < 0.3
    unchecked = plan_horizon(one_type(2), horizon, policy=None)
    assert "policy" not in unchecked.periods[0] and "policy" not in unchecked.message
    other = plan_horizon(one_type(2), horizon, policy="max-throughput")
    assert other.periods[0]["policy"] == "max-throughput"
    with pytest.raises(InstanceError, match="unknown solver 'teleport'") as error:
        plan_horizon(one_type(2), horizon, policy="teleport")
    assert error.value.path == "policy"


def test_demand_stated_per_period_plans_as_the_same_demand_grown(tmp_path):
    import json

    # 2, 3 and 4 one-GPU jobs: stated outright per period, or the base's 2 jobs at multipliers
    # 1, 1.5, 2 — the same demand, so the same schedule.
    grown = {"periods": 3, "targets": ["min_time_share>=1"], "demand": {"multipliers": [1, 1.5, 2]},
             "buy": {"g": {"price": 1.0, "price_decline": 0.1, "lead_time": 1}}}
    jobs = [[{"id": f"j{m}", "throughput": {"g": 1.0}} for m in range(count)] for count in (2, 3, 4)]
    stated = {**grown, "demand": {"jobs_by_period": jobs}}
    a, b = plan_horizon(one_type(2), grown), plan_horizon(one_type(2), stated)
    assert b.status == "optimal" and b.orders() == a.orders() and b.cost == pytest.approx(a.cost)
    assert [row["demand"] for row in b.periods] == [2.0, 3.0, 4.0]
    assert all(all(row["checks"].values()) for row in b.periods)
    assert b.plans[("base", 3)]["instance"].jobs[3].id == "j3"  # the reader's ids, not the pool's
    # the same from instance files named in the horizon file, one per period
    for t, period_jobs in enumerate(jobs):
        (tmp_path / f"q{t + 1}.json").write_text(json.dumps({"kind": "allocation", "worker_types": [
            {"name": "g", "count": 2}], "jobs": period_jobs}))
    (tmp_path / "h.yaml").write_text("periods: 3\ntargets: ['min_time_share>=1']\n"
                                     "demand: {instances: [q1.json, q2.json, q3.json]}\n"
                                     "buy: {g: {price: 1, price_decline: 0.1, lead_time: 1}}\n")
    c = plan_horizon(one_type(2), load_horizon(tmp_path / "h.yaml"))
    assert c.orders() == a.orders()
    # stated per period and grown at once, or the wrong number of periods: named
    with pytest.raises(InstanceError, match="demand.growth"):
        plan_horizon(one_type(2), {**stated, "demand": {"jobs_by_period": jobs, "growth": 0.1}})
    with pytest.raises(InstanceError, match="demand.jobs_by_period"):
        plan_horizon(one_type(2), {**stated, "demand": {"jobs_by_period": jobs[:2]}})
    with pytest.raises(InstanceError, match=r"demand.instances\[1\]"):
        plan_horizon(one_type(2), {**stated, "demand": {"instances": [{"jobs": jobs[0]}, {"kind": "x"},
                                                                      {"jobs": jobs[2]}]}})
