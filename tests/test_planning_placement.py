"""Sizing a placement instance (GPU-hours and storage with the placement fixed) and re-solve
estimates of what binds, checked by hand and by the judge."""

import numpy as np
import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan.cli.app import main
from fleetplan.errors import InstanceError
from fleetplan.instances.placement.evaluate import evaluate
from fleetplan.planning import size
from fleetplan.planning.marginal import marginal_values

PLACEMENT = EXAMPLES / "placement-small.json"


def test_demand_supply_target_buys_the_cheapest_gpu_hours_in_the_overloaded_region():
    """region0 holds all 330.724 high-priority GPU-hours on 125.751 of supply (ratio 2.63): a
    ratio of 1 needs 204.973 GPU-hours more there, of whichever type is cheaper (the §5.6 ratio
    counts every type's supply)."""
    instance = fleetplan.load_instance(PLACEMENT)
    result = size(instance, ["hp_demand_supply_max<=1"], ["*/h100=2", "*/a100=1"])
    bought = {name: units for name, units in result.additions.items() if units}
    assert result.status == "optimal"
    assert bought == {"region0/a100": pytest.approx(204.973, abs=1e-5)}
    assert result.cost == pytest.approx(204.973, abs=1e-5) and result.bound == pytest.approx(204.973, rel=1e-8)
    plan = fleetplan.solve(instance, "keep").plan
    assert evaluate(result.sized_instance, plan).metrics["hp_demand_supply_max"] <= 1 + 1e-6


def test_a_per_type_target_buys_the_type_that_is_short():
    """The §5.6 ratio pools the types, so cheap A100 GPU-hours 'serve' H100 demand and the H100
    demand stays unserved; the per-type target buys what is short."""
    instance = fleetplan.load_instance(PLACEMENT)
    plan = fleetplan.solve(instance, "keep").plan
    pooled = size(instance, ["hp_demand_supply_max<=0.5"], ["*/h100=2", "*/a100=1"])
    per_type = size(instance, ["hp_demand_supply_max_per_type<=0.5"], ["*/h100=2", "*/a100=1"])
    assert {n for n, u in pooled.additions.items() if u} == {"region0/a100"}
    assert evaluate(pooled.sized_instance, plan).metrics["hp_gpu_hours_unserved"] > 0
    assert per_type.status == "optimal"
    assert {n for n, u in per_type.additions.items() if u} == {"region0/h100"}
    after = evaluate(per_type.sized_instance, plan).metrics
    assert after["hp_demand_supply_max_per_type"] <= 0.5 + 1e-6 and after["hp_gpu_hours_unserved"] == 0
    assert per_type.units["region0/h100"] == "GPU-hours/day"


@pytest.mark.parametrize("seed", range(8))
def test_placement_sizing_is_met_and_minimal_on_random_regions(seed):
    """Random regions, random targets: the judge finds every target met on the sized instance,
    the bound is the cost (an exact model), and taking 1% off any bought cell breaks a target."""
    import numpy as np

    from fleetplan.planning.sizing.placement import sized_instance

    rng = np.random.default_rng(seed)
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 30, "gpu_types": 2}, seed=seed)
    plan = fleetplan.solve(instance, "keep").plan
    types = instance.arrays().gpu_types
    metric = ["hp_demand_supply_max", "hp_demand_supply_max_per_type", "hp_gpu_hours_unserved"][seed % 3]
    before = evaluate(instance, plan).metrics[metric]
    value = max(before * float(rng.uniform(0.3, 0.8)), 1e-3) if before > 0 else 0.5
    buy = [f"*/{t}={float(rng.uniform(1, 3)):.2f}" for t in types]
    result = size(instance, [f"{metric}<={value:.6g}"], buy)
    if result.status == "infeasible":
        return
    assert result.status == "optimal" and all(result.checks.values())
    assert result.bound <= result.cost + 1e-6 and result.gap <= 1e-5  # the purchase is rounded up to 1e-6
    arrays = instance.arrays()
    regions = list(arrays.region_ids)
    for name, units in result.additions.items():
        if units <= 1e-3:
            continue
        region, gpu_type = name.split("/")
        less = np.zeros((len(regions), len(types)))
        for other, amount in result.additions.items():
            r, t = other.split("/")
            less[regions.index(r), list(types).index(t)] = amount
        less[regions.index(region), list(types).index(gpu_type)] *= 0.99
        trial = evaluate(sized_instance(instance, less, np.zeros(len(regions))), plan).metrics
        assert trial[metric] > value * (1 + 1e-7), (name, trial[metric], value)


def test_unserved_target_buys_the_demanded_type():
    instance = fleetplan.load_instance(PLACEMENT)
    result = size(instance, ["hp_gpu_hours_unserved<=0"], ["*/h100=2", "*/a100=1"])
    bought = {name: units for name, units in result.additions.items() if units}
    assert bought == {"region0/h100": pytest.approx(204.973, abs=1e-5)}
    assert result.checks == {"hp_gpu_hours_unserved<=0": True}


def test_a_region_with_nothing_to_buy_makes_it_infeasible():
    instance = fleetplan.load_instance(PLACEMENT)
    result = size(instance, ["hp_demand_supply_max<=1"], ["region1/h100"])
    assert result.status == "infeasible" and "region0" in result.message


@pytest.mark.parametrize("buy,message", [("h100", "REGION/GPU_TYPE"), ("nowhere/h100", "unknown region"),
                                         ("region0/v100", "unknown GPU type")])
def test_bad_placement_purchases(buy, message):
    with pytest.raises(InstanceError, match=message):
        size(fleetplan.load_instance(PLACEMENT), ["hp_demand_supply_max<=1"], [buy])


def test_size_command_writes_a_sized_instance_the_judge_accepts(tmp_path, capsys):
    sized = tmp_path / "sized.json"
    assert main(["size", str(PLACEMENT), "--target", "hp_demand_supply_max<=1.5", "--buy", "*/h100", "-o",
                 str(sized)]) == 0
    instance = fleetplan.load_instance(sized)
    plan = fleetplan.solve(instance, "keep").plan
    assert evaluate(instance, plan).metrics["hp_demand_supply_max"] <= 1.5 + 1e-6
    assert "optimal" in capsys.readouterr().out


def test_size_infeasible_is_exit_1_and_writes_nothing(tmp_path):
    sized = tmp_path / "sized.json"
    assert main(["size", str(PLACEMENT), "--target", "hp_demand_supply_max<=1", "--buy", "region1/h100",
                 "-o", str(sized)]) == 1
    assert not sized.exists()


def test_re_solve_estimates_agree_with_lp_duals_where_the_lp_is_smooth():
    """Two-GPU jobs on odd counts (no kink at the integer counts): one GPU more and one fewer
    move the objective by the LP's own price, which is then shown as it is."""
    data = {"kind": "allocation", "schema_version": 1,
            "worker_types": [{"name": "v100", "count": 3}, {"name": "k80", "count": 5}],
            "jobs": [{"id": f"j{i}", "throughput": {"v100": v, "k80": k}, "scale_factor": 2}
                     for i, (v, k) in enumerate([(4.0, 1.0), (3.0, 1.5), (2.0, 1.0), (5.0, 0.5), (1.0, 1.0)])]}
    instance = fleetplan.instances.instance_from_data(data)
    lp = fleetplan.solve(instance, "max-throughput")
    values = marginal_values(instance, "max-throughput")
    assert lp.duals_source == "lp"
    for value in values.values:
        price = lp.duals["workers"][value.capacity]
        assert value.more["objective"] == pytest.approx(price, rel=1e-6)
        assert -value.fewer["objective"] == pytest.approx(price, rel=1e-6)
        assert value.dual == pytest.approx(price) and value.dual_note == ""


def test_a_normalised_policy_s_dual_is_labelled_a_local_derivative():
    """Max-min fairness against the equal share: one more GPU also moves the yardstick, so the
    LP's price at fixed references is not what a re-solve measures, and it is labelled so."""
    values = marginal_values(fleetplan.load_instance(EXAMPLES / "inventory-30-jobs.json"), "max-min-fairness")
    assert {v.capacity for v in values.values} == {"v100", "p100", "k80"}
    for value in values.values:
        assert value.dual is not None
        slopes = sorted([value.more["objective"], -value.fewer["objective"]])
        if not slopes[0] - 1e-6 <= value.dual <= slopes[1] + 1e-6:
            assert "equal share" in value.dual_note


def test_when_no_capacity_moves_the_objective_what_binds_is_named():
    """Min makespan on the 30-job inventory: two jobs already run all the time, so no GPU
    shortens the makespan; the prices are 0 and the jobs are named."""
    values = marginal_values(fleetplan.load_instance(EXAMPLES / "inventory-30-jobs.json"), "min-makespan")
    assert all(abs(v.more["objective"]) < 1e-6 for v in values.values)
    assert any("100% of the time" in reason and "job1" in reason for reason in values.binds)


def test_evaluate_says_what_binds(tmp_path, capsys):
    allocation = str(EXAMPLES / "allocation-64-jobs.json")
    plan = tmp_path / "plan.json"
    assert main(["solve", allocation, "-o", str(plan)]) == 0
    capsys.readouterr()
    assert main(["evaluate", allocation, str(plan), "--binding"]) == 0
    out = capsys.readouterr().out
    assert "at capacity: v100, p100, k80" in out and "one unit more / one fewer" in out
    assert main(["evaluate", allocation, str(plan), "--binding", "--json"]) == 0
    data = __import__("json").loads(capsys.readouterr().out)
    assert {v["capacity"] for v in data["marginal_values"]["values"]} == {"v100", "p100", "k80"}
    today = tmp_path / "today.json"
    fleetplan.save(fleetplan.solve(fleetplan.load_instance(PLACEMENT), "keep").plan, today)
    assert main(["evaluate", str(PLACEMENT), str(today)]) == 0
    assert "region0/h100 by 205" in capsys.readouterr().out


def test_allocation_marginal_values_can_hold_the_plan_too():
    """The allocation re-solves run warm on worker counts; holding the plan judges the base plan on
    each changed cluster instead, and still answers every unit."""
    instance = fleetplan.load_instance(EXAMPLES / "inventory-30-jobs.json")
    held = marginal_values(instance, "max-min-fairness", hold_plan=True)
    assert held.held_plan and all(v.more is not None and v.fewer is not None for v in held.values)
    plan = fleetplan.solve(instance, "max-min-fairness").plan
    from fleetplan.planning.sizing.allocation import sized_instance

    one_more = sized_instance(instance, np.array([1, 0, 0]))
    expected = fleetplan.evaluate(one_more, plan).objective - fleetplan.evaluate(instance, plan).objective
    assert held.values[0].more["objective"] == pytest.approx(expected)
