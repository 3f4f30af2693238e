"""Planning on the allocation kind: sizing (hand-solved, minimal, verified by the judge), dual
prices against finite differences, infeasible SLO sets named, service metrics."""

import dataclasses
import itertools

import numpy as np
import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan.errors import InstanceError
from fleetplan.instances.allocation.evaluate import evaluate
from fleetplan.models.allocation.policies import PolicySpec
from fleetplan.planning import size
from fleetplan.planning.sizing.allocation import sized_instance
from fleetplan.solvers.allocation.lp import LpOptions, solve_spec

GAVEL = EXAMPLES / "allocation-gavel-4.1.json"


def small_cluster(counts=(1, 1), jobs=((4.0, 1.0), (3.0, 1.0), (2.0, 1.0)), scale=None, steps=None, slo=None,
                  costs=(0.0, 0.0)):
    types = ["v100", "k80"]
    data = {"kind": "allocation", "schema_version": 1,
            "worker_types": [{"name": t, "count": c, "cost_per_hour": cost} for t, c, cost in zip(types, counts, costs, strict=True)],
            "jobs": []}
    for i, row in enumerate(jobs):
        job = {"id": f"j{i}", "throughput": dict(zip(types, row, strict=True))}
        if scale is not None:
            job["scale_factor"] = scale[i]
        if steps is not None:
            job["steps_left"] = steps[i]
        if slo is not None and slo[i] is not None:
            job["slo_hours"] = slo[i]
        data["jobs"].append(job)
    return fleetplan.instances.instance_from_data(data)


# --- service metrics ----------------------------------------------------------------------

def test_service_metrics_are_absolute_and_listed_per_job():
    instance = fleetplan.load_instance(GAVEL)
    result = fleetplan.solve(instance, "max-min-fairness")
    metrics = result.evaluation.metrics
    jobs = result.evaluation.breakdown["jobs"]
    assert metrics["min_time_share"] == pytest.approx(min(jobs["time_share"]))
    # §4.1's X: job 0 0.45 of the V100 alone (4/s), job 2 0.09 V100 + 0.91 K80
    assert jobs["throughput_vs_fastest"][0] == pytest.approx(0.45, abs=0.01)
    assert metrics["starved_jobs"] == 0 and metrics["jobs_below_isolated"] == 0
    assert jobs["slo_met"] == [None, None, None]


def test_a_normalized_objective_falls_when_the_cluster_grows_but_time_share_rises():
    """The planning issue's observation, as a regression: the objective is relative to the
    equal share of the same cluster; the time share is absolute."""
    before = fleetplan.solve(small_cluster(counts=(4, 2)), "max-min-fairness").evaluation
    after = fleetplan.solve(small_cluster(counts=(10, 2)), "max-min-fairness").evaluation
    assert after.objective < before.objective - 0.1  # 1.2 -> 1.09: six more V100s look worse
    for metric in ("min_time_share", "min_throughput_vs_fastest"):
        assert after.metrics[metric] >= before.metrics[metric] - 1e-9 == 1 - 1e-9


def test_the_fleet_cost_counts_idle_gpus_too():
    """cost_per_hour prices the busy GPUs (an idle fleet 'saves'); the fleet's cost is every GPU."""
    instance = small_cluster(counts=(4, 2), costs=(3.0, 1.0))
    idle = fleetplan.instances.allocation.AllocationPlan.from_matrix(instance, np.zeros((3, 2)))
    metrics = evaluate(instance, idle).metrics
    assert metrics["cost_per_hour"] == 0
    assert metrics["fleet_cost_per_hour"] == 14 and metrics["fleet_cost_per_month"] == 14 * 730


def test_starved_jobs_are_counted():
    instance = small_cluster(counts=(1, 0), jobs=((1.0, 0.0), (1.0, 0.0), (1.0, 0.0)))
    matrix = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    plan = fleetplan.instances.allocation.AllocationPlan.from_matrix(instance, matrix)
    assert evaluate(instance, plan).metrics["starved_jobs"] == 2


# --- sizing: hand-solved ------------------------------------------------------------------

def test_gavel_example_every_job_full_time_needs_one_more_gpu():
    """§4.1: three jobs on one V100 and one K80. A time share of 1 for each needs three GPUs:
    the cheaper K80 (price 1 against 3)."""
    result = size(fleetplan.load_instance(GAVEL), ["min_time_share>=1"], ["v100=3", "k80=1"])
    assert result.status == "optimal"
    assert result.additions == {"v100": 0, "k80": 1}
    assert result.cost == 1.0 and result.bound == pytest.approx(1.0)
    assert result.checks == {"min_time_share>=1": True}
    assert evaluate(result.sized_instance, result.plan).metrics["min_time_share"] >= 1 - 1e-6


def test_a_target_already_met_buys_nothing():
    result = size(fleetplan.load_instance(GAVEL), ["min_time_share>=0.5"], ["v100=3", "k80=1"])
    assert result.status == "optimal" and result.cost == 0 and sum(result.additions.values()) == 0


def test_throughput_target_picks_the_cheaper_speed():
    """Two jobs, each 4/s on a V100 (price 5) or 1/s on a K80 (price 1), none today beyond one
    K80: each must reach 2 steps/s (makespan 100 s of 200 steps). A V100 each costs 10; K80s
    cannot reach 2/s (one job holds at most one K80 at a time): two V100s? No — one V100 shared
    half/half gives each 2/s: cost 5."""
    instance = small_cluster(counts=(0, 1), jobs=((4.0, 1.0), (4.0, 1.0)), steps=(200.0, 200.0))
    result = size(instance, ["makespan_s<=100"], ["v100=5", "k80=1"])
    assert result.status in ("optimal", "feasible")
    assert result.additions["v100"] == 1 and result.cost == 5
    assert result.bound == pytest.approx(5.0)
    assert result.metrics["makespan_s"] <= 100 * (1 + 1e-6)


def test_slo_target_buys_what_the_slos_need():
    instance = small_cluster(counts=(2, 2), jobs=[(4.0, 1.0)] * 4, steps=[3 * 3600.0] * 4, slo=[1.0] * 4,
                             costs=(3.0, 1.0))
    result = size(instance, ["slo_missed_jobs<=0"], ["v100", "k80"])
    # 4 jobs x 3 steps/s; V100 4/s, K80 1/s, time <= 1 each: V100 share 2/3 each -> 8/3 V100s: buy 1
    assert result.status == "optimal" and result.additions == {"v100": 1, "k80": 0}
    assert result.cost == 3.0  # cost_per_hour is the default price
    assert result.policy is not None and result.checks == {"slo_missed_jobs<=0": True}


# --- sizing: minimality on small integral cases ---------------------------------------------

@pytest.mark.parametrize("target", ["min_time_share>=0.7", "total_throughput>=9", "min_throughput_vs_fastest>=0.6"])
def test_removing_any_purchased_unit_breaks_a_target(target):
    instance = small_cluster(counts=(1, 1), jobs=((4.0, 1.0), (3.0, 1.0), (2.0, 1.0), (1.0, 1.0)))
    result = size(instance, [target], ["v100=2", "k80=1"])
    assert result.status in ("optimal", "feasible")
    if result.status == "optimal":
        assert result.bound == pytest.approx(result.cost, abs=1e-6)
    # Brute force over every purchase up to 4 units a type: none cheaper admits an allocation
    # meeting the target (the sizing model's own LP decides each fixed purchase).
    cheaper = []
    for v, k in itertools.product(range(5), range(5)):
        cost = 2 * v + k
        if cost >= result.cost - 1e-9:
            continue
        trial = size(sized_instance(instance, np.array([v, k])), [target], ["v100=2:0", "k80=1:0"])
        if trial.status != "infeasible":
            cheaper.append((v, k))
    assert cheaper == []
    for name, units in result.additions.items():
        if units:
            fewer = np.array([result.additions["v100"], result.additions["k80"]])
            fewer[["v100", "k80"].index(name)] -= 1
            trial = size(sized_instance(instance, fewer), [target], ["v100=2:0", "k80=1:0"])
            assert trial.status == "infeasible"


def test_gang_scheduling_a_job_needs_enough_gpus_of_the_type_it_runs_on():
    """A 4-GPU job fits the V100s only once there are 4 of them: 8 steps/s needs them."""
    instance = small_cluster(counts=(2, 4), jobs=((8.0, 1.0),), scale=(4,))
    result = size(instance, ["total_throughput>=8"], ["v100=1", "k80=1"])
    assert result.status == "optimal"
    assert result.additions["v100"] == 2
    assert result.checks == {"total_throughput>=8": True}


def test_the_fastest_type_is_the_fastest_the_sized_cluster_opens():
    """Today the job fits only the K80s, its fastest type there: full time on them is 1.0 of its
    fastest, so nothing need be bought. (The V100 becomes its reference only once bought: buying
    two V100s would ask 8 steps/s of it.)"""
    instance = small_cluster(counts=(2, 4), jobs=((8.0, 1.0),), scale=(4,))
    result = size(instance, ["min_throughput_vs_fastest>=1"], ["v100=1", "k80=1"])
    assert result.status == "optimal"
    assert result.additions["v100"] == 0 and result.cost == 0
    assert result.checks == {"min_throughput_vs_fastest>=1": True}


def test_a_cheap_slow_type_meets_a_relative_target_the_fast_one_would_raise():
    """The planner's L4 case: four cheap slow GPUs meet min_throughput_vs_fastest>=0.4 (each job's
    fastest is then the slow type); the MIP that took the fast types as the reference bought an
    H100 and an A100 and printed that as a proven minimum."""
    types = {"h100": 0, "a100": 0, "l4": 0, "v100": 1}
    data = {"kind": "allocation", "schema_version": 1,
            "worker_types": [{"name": t, "count": c} for t, c in types.items()],
            "jobs": [{"id": f"j{i}", "throughput": {"h100": 10.0 + i, "a100": 6.0 + i, "l4": 1.0 + 0.1 * i,
                                                    "v100": 0.1}}
                     for i in range(8)]}
    instance = fleetplan.instances.instance_from_data(data)
    result = size(instance, ["min_throughput_vs_fastest>=0.4"], ["h100=4.5", "a100=2.9", "l4=0.8"])
    assert result.status == "optimal"
    assert result.additions == {"h100": 0, "a100": 0, "l4": 4} and result.cost == pytest.approx(3.2)
    assert result.bound <= result.cost + 1e-9
    assert result.checks == {"min_throughput_vs_fastest>=0.4": True}


# --- sizing: infeasible and bad input -------------------------------------------------------

def test_a_job_no_buyable_type_serves_is_named():
    instance = small_cluster(counts=(1, 1), jobs=((4.0, 1.0), (0.0, 1.0)), steps=(100.0, 100.0))
    result = size(instance, ["makespan_s<=10"], ["v100=1"])
    assert result.status == "infeasible" and not result.success
    assert "j1" in result.message


def test_a_budget_too_low_is_named():
    result = size(fleetplan.load_instance(GAVEL), ["min_time_share>=1"], ["v100=3", "k80=2"], budget=1)
    assert result.status == "infeasible" and "budget" in result.message


def test_a_max_too_low_is_named():
    result = size(fleetplan.load_instance(GAVEL), ["min_time_share>=1"], ["v100=3:0", "k80=1:0"])
    assert result.status == "infeasible" and "MAX" in result.message


@pytest.mark.parametrize("targets,buy,message", [
    (["min_time_shares>=1"], ["v100"], "unknown metric"),
    (["min_time_share<=1"], ["v100"], "one side"),
    (["min_time_share>=x"], ["v100"], "not a number"),
    (["min_time_share>=1"], ["h100"], "unknown GPU type"),
    (["min_time_share>=1"], ["v100=-1"], "positive"),
    (["min_time_share>=1"], [], "at least one"),
    (["hp_demand_supply_max<=1"], ["v100"], "unknown metric"),
    (["slo_missed_jobs<=0"], ["v100"], "no job of the instance has an SLO"),
])
def test_bad_sizing_input_is_one_clear_error(targets, buy, message):
    with pytest.raises(InstanceError, match=message):
        size(fleetplan.load_instance(GAVEL), targets, buy)


def test_a_named_policy_that_misses_is_sized_exactly():
    """Under max-min fairness the §4.1 jobs do not all hold GPUs half the time (job 0 gets 0.45
    of the V100): with the policy named, the purchase lattice is searched cheapest first from
    the policy-free minimum, so the answer is the cheapest under which the policy meets it."""
    instance = fleetplan.load_instance(GAVEL)
    free = size(instance, ["min_time_share>=0.5"], ["v100=3", "k80=1"])
    named = size(instance, ["min_time_share>=0.5"], ["v100=3", "k80=1"], policy="max-min-fairness")
    assert free.cost == 0
    assert "warning: under max-min-fairness (the default policy)" in free.message
    assert named.status == "optimal" and named.gap == 0
    assert named.policy == "max-min-fairness" and named.checks == {"min_time_share>=0.5": True}
    cheapest = None
    for v100, k80 in itertools.product(range(4), range(4)):
        cluster = sized_instance(instance, np.array([v100, k80]))
        shares = fleetplan.solve(cluster, "max-min-fairness").evaluation.metrics["min_time_share"]
        if shares >= 0.5 - 1e-6 and (cheapest is None or 3 * v100 + k80 < cheapest):
            cheapest = 3 * v100 + k80
    assert named.cost == cheapest
    verdict = fleetplan.solve(named.sized_instance, "max-min-fairness").evaluation
    assert verdict.metrics["min_time_share"] >= 0.5 - 1e-6


def test_the_search_limit_ends_the_search_without_changing_it():
    """With too few points to reach the answer, the search says so: a purchase found along the
    ray (feasible, not optimal) and the cost of the cheapest purchase not checked as the bound;
    the same call gives the same answer."""
    instance = fleetplan.load_instance(EXAMPLES / "inventory-30-jobs.json")
    # Two types to buy: the uncut search checks 41 points (405 with p100 too, seconds more) and
    # 20 still cannot reach its answer.
    args = (["min_time_share>=0.5"], ["v100", "k80"])
    full = size(instance, *args, policy="max-min-fairness")
    cut = size(instance, *args, policy="max-min-fairness", max_points=20)
    again = size(instance, *args, policy="max-min-fairness", max_points=20)
    assert full.status == "optimal"
    assert cut.status == "feasible" and all(cut.checks.values())
    assert cut.bound <= full.cost + 1e-9 <= cut.cost + 1e-9
    assert (cut.additions, cut.cost, cut.bound) == (again.additions, again.cost, again.bound)
    # Under max-min fairness the limit also counts box tests (two per point): either ends it.
    assert cut.stats["points_checked"] <= 20 and cut.stats["boxes_tested"] <= 40
    assert any(line.startswith("boxes: stopped") for line in cut.log)


# --- what binds ---------------------------------------------------------------------------

def _level(arrays, spec, extra):
    shifted = dataclasses.replace(arrays, num_workers=arrays.num_workers + extra)
    outcome = solve_spec(shifted, spec, LpOptions(aggregate=False, decomposition="none", refine=False, lp_algorithm="simplex"))
    return outcome.objective, outcome


@pytest.mark.parametrize("policy", ["max-min-fairness", "max-throughput"])
def test_capacity_prices_match_finite_differences(policy):
    # Two-GPU jobs on odd counts: every capacity row binds with a job split across it, away
    # from the kinks where the one-sided derivatives differ.
    instance = small_cluster(counts=(3, 5), jobs=((4.0, 1.0), (3.0, 1.5), (2.0, 1.0), (5.0, 0.5), (1.0, 1.0)),
                             scale=(2, 2, 2, 2, 2))
    arrays = instance.arrays()
    result = fleetplan.solve(instance, policy, aggregate=False, decomposition="none")
    prices = result.duals["workers"]
    if policy == "max-min-fairness":
        share = arrays.throughput @ (arrays.num_workers / arrays.num_workers.sum())
        spec = PolicySpec("max_min", arrays.scale_factor / (arrays.weight * share))
    else:
        spec = PolicySpec("linear", np.ones(len(arrays.job_ids)))
    epsilon = 1e-4
    for k, name in enumerate(arrays.worker_types):
        step = np.zeros(2)
        step[k] = epsilon
        up, _ = _level(arrays, spec, step)
        down, _ = _level(arrays, spec, -step)
        assert (up - down) / (2 * epsilon) == pytest.approx(prices[name], abs=1e-6), name
    assert result.duals_source == "lp"


def test_separable_prices_equal_the_full_lps_duals():
    instance = fleetplan.generate("allocation", {"jobs": 1500, "throughput_noise": 0.1}, seed=3)
    separable = fleetplan.solve(instance, "max-min-fairness")
    full = fleetplan.solve(instance, "max-min-fairness", decomposition="none")
    assert any("separable" in line for line in separable.log)
    for name, price in full.duals["workers"].items():
        assert separable.duals["workers"][name] == pytest.approx(price, rel=1e-6, abs=1e-12)


def test_infeasible_slo_sets_name_the_short_type_and_the_jobs():
    instance = small_cluster(counts=(2, 2), jobs=[(4.0, 1.0)] * 4, steps=[3 * 3600.0] * 4, slo=[1.0] * 4,
                             costs=(3.0, 1.0))
    result = fleetplan.solve(instance, "min-cost-slo")
    assert result.status == "infeasible"
    assert "v100 by 0.6667 GPUs" in result.message and "j0, j1, j2, j3" in result.message


def test_slo_floor_prices_of_min_cost_slo():
    instance = small_cluster(counts=(3, 2), jobs=[(4.0, 1.0)] * 4, steps=[3 * 3600.0] * 4, slo=[1.0] * 4,
                             costs=(3.0, 1.0))
    result = fleetplan.solve(instance, "min-cost-slo")
    assert result.status == "optimal" and result.duals_source == "lp"
    assert set(result.duals["slo"]) <= {"j0", "j1", "j2", "j3"}


def test_a_time_limit_ends_the_search_but_never_claims_infeasible():
    """The 300-job fleet under max-min fairness in one second: the clock ends the search, the
    status says so (time_limit, with or without a purchase), and 'infeasible' is kept for what is
    proven (it was printed with no limit given when the greedy repair ran out of time)."""
    instance = fleetplan.load_instance(EXAMPLES / "inventory-300-jobs.json")
    result = size(instance, ["min_time_share>=0.2"], ["h100", "a100", "v100", "l4"], policy="max-min-fairness",
                  time_limit=1.0)
    assert result.status in ("time_limit", "feasible")
    # the policy-free minimum (105 L4 at 0.8) bounds it, once the clock let that MIP finish
    assert result.bound is None or result.bound >= 84 - 1e-6
    if result.sized_instance is not None:
        assert all(result.checks.values()) and result.bound <= result.cost


def test_a_sizing_sweep_tabulates_the_basket_against_a_target_and_a_price(tmp_path, capsys):
    """size --vary: one sizing per value (each proven), the basket per row, a CSV and a picture;
    a field that is not a target, a price or the budget is refused before anything runs."""
    import csv

    from fleetplan.cli.app import main
    from fleetplan.planning.sizing.sweep import size_sweep

    instance = fleetplan.load_instance(EXAMPLES / "inventory-30-jobs.json")
    sweep = size_sweep(instance, ["min_time_share>=0.3"], ["v100", "p100", "k80"], "target.min_time_share=0.5,0.6")
    singles = [size(instance, [f"min_time_share>={v}"], ["v100", "p100", "k80"]) for v in (0.5, 0.6)]
    assert [row["cost"] for row in sweep.rows] == [single.cost for single in singles]
    assert [row["k80"] for row in sweep.rows] == [single.additions["k80"] for single in singles]
    prices = size_sweep(instance, ["min_time_share>=0.6"], ["v100", "p100", "k80"], "price.k80=0.5,3")
    assert prices.rows[0]["k80"] > 0 and prices.rows[1]["k80"] == 0  # dear K80s: another type instead
    table, picture = tmp_path / "sweep.csv", tmp_path / "sweep.png"
    assert main(["size", str(EXAMPLES / "inventory-30-jobs.json"), "--target", "min_time_share>=0.6", "--buy", "k80",
                 "--buy", "p100", "--vary", "price.k80=0.5,3", "-o", str(table), "--plot", str(picture)]) == 0
    assert [row["status"] for row in csv.DictReader(open(table))] == ["optimal", "optimal"]
    assert picture.read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main(["size", str(EXAMPLES / "inventory-30-jobs.json"), "--target", "min_time_share>=0.6", "--buy", "k80",
                 "--vary", "price.h100=1,2"]) == 2
    assert "no --buy h100" in capsys.readouterr().err
    assert main(["size", str(EXAMPLES / "inventory-30-jobs.json"), "--target", "min_time_share>=0.6", "--buy", "k80",
                 "--vary", "jobs.x=1,2"]) == 2
