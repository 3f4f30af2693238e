"""Evaluations carry per-item breakdowns: allocation per job and worker type,
placement per region, per (region, GPU type) and per job. Checked against hand-solved cases and
against the aggregates the judges report."""

import json

import numpy as np
import pytest

import fleetplan
from fleetplan.cli import main
from fleetplan.instances.allocation import AllocationInstance, AllocationPlan
from fleetplan.instances.placement import PlacementInstance, PlacementPlan, ReplicaColumns


def two_region_instance() -> PlacementInstance:
    """One ML job reading two tables (4 and 2 bytes), both homed in 'west' (no GPUs there)."""
    return PlacementInstance.model_validate({
        "kind": "placement", "gpu_types": ["h100"], "applications": ["ads"],
        "regions": [
            {"id": "east", "gpu_supply": {"h100": 100.0}, "storage_capacity_bytes": 10.0,
             "cpu_capacity": {"ads": 50.0}},
            {"id": "west", "gpu_supply": {}, "storage_capacity_bytes": 10.0, "cpu_capacity": {"ads": 50.0}}],
        "tables": {"id": ["clicks", "users"], "size_bytes": [4.0, 2.0], "home": ["west", "west"]},
        "jobs": {"id": ["train"], "kind": ["ml"], "tables": [[0, 1]], "gpu_type": ["h100"],
                 "gpu_hours": [64.0], "cpu_hours": [1.0], "priority": [0],
                 "application": ["ads"], "recurring": [True]}})


def test_placement_breakdown_by_hand():
    instance = two_region_instance()
    today = fleetplan.evaluate(instance, PlacementPlan.current(instance)).breakdown
    assert today["regions"] == {
        "id": ["east", "west"], "gpu_supply": [100.0, 0.0], "gpu_demand": [0.0, 64.0],
        "hp_gpu_demand": [0.0, 64.0], "tables": [0, 2], "home_bytes": [0.0, 6.0],
        "replica_bytes": [0.0, 0.0], "storage_used_bytes": [0.0, 6.0],
        "storage_capacity_bytes": [10.0, 10.0]}
    assert today["jobs"] == {"id": ["train"], "region": ["west"], "cross_region_bytes": [0.0]}
    assert today["region_gpu_types"]["id"] == ["east/h100", "west/h100"]
    assert today["region_gpu_types"]["gpu_demand"] == [0.0, 64.0]
    # Moving 'clicks' east splits the ML job: no region, no demand, both tables read across.
    split = PlacementPlan.from_arrays(instance, np.array([0, 1]))
    after = fleetplan.evaluate(instance, split).breakdown
    assert after["jobs"]["region"] == [None]
    assert after["jobs"]["cross_region_bytes"] == [6.0]
    assert after["regions"]["gpu_demand"] == [0.0, 0.0]
    assert after["regions"]["home_bytes"] == [4.0, 2.0]
    # Both east, with a replica of 'users' in the west: replicas count as stored bytes.
    replicas = ReplicaColumns(table=[1], region=["west"], bytes=[2.0], reason=["dr"])
    plan = PlacementPlan.from_arrays(instance, np.array([0, 0]), replicas=replicas)
    regions = fleetplan.evaluate(instance, plan).breakdown["regions"]
    assert regions["gpu_demand"] == [64.0, 0.0]
    assert regions["replica_bytes"] == [0.0, 2.0]
    assert regions["storage_used_bytes"] == [6.0, 2.0]


def test_placement_breakdown_agrees_with_the_aggregates():
    instance = fleetplan.generate("placement", {"regions": 5, "tables": 300, "jobs": 300}, seed=4)
    result = fleetplan.solve(instance, "hill-climb", time_limit=20, seed=0)
    verdict = result.evaluation
    regions, jobs = verdict.breakdown["regions"], verdict.breakdown["jobs"]
    arrays = instance.arrays()
    assert regions["id"] == arrays.region_ids and jobs["id"] == arrays.job_ids
    assert sum(regions["home_bytes"]) == pytest.approx(verdict.metrics["home_bytes"])
    assert sum(regions["replica_bytes"]) == pytest.approx(verdict.metrics["replica_bytes"])
    supply = np.array(regions["gpu_supply"])
    ratio = np.array(regions["hp_gpu_demand"])[supply > 0] / supply[supply > 0]
    assert ratio.max() == pytest.approx(verdict.metrics["hp_demand_supply_max"])
    used = np.array(regions["storage_used_bytes"]) / np.array(regions["storage_capacity_bytes"])
    assert used.max() == pytest.approx(verdict.metrics["storage_utilization_max"])
    planned = arrays.job_recurring
    assert np.array(jobs["cross_region_bytes"])[planned].sum() == pytest.approx(verdict.metrics["cross_region_bytes"])
    split = np.array([region is None for region in jobs["region"]]) & (arrays.job_kind == 0) & planned
    assert split.sum() == verdict.metrics["ml_jobs_split"]
    # Per (region, type) demand sums to the per-region demand.
    per_type = np.array(verdict.breakdown["region_gpu_types"]["gpu_demand"]).reshape(5, -1)
    assert per_type.sum(axis=1) == pytest.approx(regions["gpu_demand"])
    json.loads(verdict.model_dump_json())


def test_allocation_breakdown_by_hand():
    instance = AllocationInstance.model_validate({
        "kind": "allocation",
        "worker_types": [{"name": "v100", "count": 1}, {"name": "k80", "count": 1}],
        "jobs": [{"id": "a", "throughput": {"v100": 4.0, "k80": 1.0}},
                 {"id": "b", "throughput": {"v100": 2.0, "k80": 2.0}, "scale_factor": 1}]})
    plan = AllocationPlan.from_matrix(instance, np.array([[1.0, 0.0], [0.0, 0.5]]))
    verdict = fleetplan.evaluate(instance, plan)
    jobs = verdict.breakdown["jobs"]
    assert jobs["id"] == ["a", "b"]
    assert jobs["effective_throughput"] == [4.0, 1.0]
    # X_equal gives each job half of each type: a 2.5, b 2.0.
    assert jobs["normalized_throughput"] == pytest.approx([4.0 / 2.5, 1.0 / 2.0])
    assert jobs["time_share"] == [1.0, 0.5]
    assert verdict.breakdown["worker_types"] == {
        "id": ["v100", "k80"], "workers": [1.0, 1.0], "busy_workers": [1.0, 0.5], "utilization": [1.0, 0.5]}
    assert verdict.table("jobs").loc["b", "effective_throughput"] == 1.0


def test_allocation_breakdown_agrees_with_the_aggregates():
    instance = fleetplan.generate("allocation", {"jobs": 40}, seed=3)
    for solver in ("max-min-fairness", "water-filling"):
        verdict = fleetplan.solve(instance, solver, time_limit=30).evaluation
        jobs = verdict.breakdown["jobs"]
        assert jobs["id"] == instance.arrays().job_ids
        assert sum(jobs["effective_throughput"]) == pytest.approx(verdict.metrics["total_throughput"])
        assert min(jobs["normalized_throughput"]) == pytest.approx(verdict.metrics["min_normalized_throughput"])
        assert max(jobs["time_share"]) <= 1 + 1e-6
        for name, value in zip(verdict.breakdown["worker_types"]["id"],
                               verdict.breakdown["worker_types"]["utilization"], strict=True):
            assert value == verdict.metrics[f"utilization_{name}"]


def test_evaluate_json_includes_the_breakdown(tmp_path, capsys):
    instance, plan = tmp_path / "p.json", tmp_path / "plan.json"
    fleetplan.save(fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 30}, seed=1), instance)
    assert main(["solve", str(instance), "--solver", "greedy", "-o", str(plan), "--json"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(instance), str(plan), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["breakdown"]["regions"]["id"] == ["region0", "region1", "region2"]
    assert len(data["breakdown"]["jobs"]["id"]) == 30
    # The terminal shows the per-region table from the breakdown.
    assert main(["evaluate", str(instance), str(plan)]) == 0
    assert "GPU demand/supply and storage" in capsys.readouterr().out


def test_unknown_breakdown_table_names_the_known_ones():
    instance = fleetplan.generate("allocation", {"jobs": 4}, seed=1)
    verdict = fleetplan.solve(instance).evaluation
    with pytest.raises(KeyError, match="jobs, worker_types"):
        verdict.table("regions")


# --- one id scheme per placement plan -------------------------------------

def test_placement_plan_names_tables_by_id_and_reads_any_order():
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 40, "jobs": 40, "storage_headroom": 20.0},
                                  seed=2)
    result = fleetplan.solve(instance, "hill-climb", time_limit=20)
    data = json.loads(result.plan.model_dump_json())
    assert data["schema_version"] == 2
    assert data["home"]["table"] == instance.tables.id
    assert data["replicas"]["table"] and set(data["replicas"]["table"]) <= set(instance.tables.id)
    assert {move["table"] for move in data["moves"]} <= set(instance.tables.id)
    # Homes listed in another order are read by id.
    order = list(range(len(instance.tables.id)))[::-1]
    shuffled = dict(data, home={"table": [data["home"]["table"][i] for i in order],
                                "region": [data["home"]["region"][i] for i in order]})
    again = fleetplan.evaluate(instance, PlacementPlan.model_validate(shuffled, strict=True))
    assert again.objective == result.objective
    assert again.metrics == result.evaluation.metrics


@pytest.mark.parametrize("edit,path,reason", [
    (lambda home: home["table"].__setitem__(1, "nope"), "home.table[1]", "unknown table 'nope'"),
    (lambda home: home["table"].__setitem__(1, home["table"][0]), "home.table[1]", "listed twice"),
    (lambda home: (home["table"].pop(), home["region"].pop()), "home.table", "no home for 1 table"),
    (lambda home: home["region"].pop(), "home.region", "entries for"),
    (lambda home: home["region"].__setitem__(2, "mars"), "home.region[2]", "unknown region 'mars'"),
])
def test_bad_home_columns_name_the_path(edit, path, reason):
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 6, "jobs": 6}, seed=1)
    data = PlacementPlan.current(instance).model_dump()
    data["home"]["table"].reverse()  # not the instance's order: the lookup path
    edit(data["home"])
    with pytest.raises(fleetplan.InstanceError) as caught:
        fleetplan.evaluate(instance, PlacementPlan.model_validate(data))
    assert caught.value.path == path and reason in caught.value.reason


def test_schema_1_plans_still_load_and_judge_the_same(tmp_path):
    """A plan written before schema 2 (positional homes, replica tables by row number) loads from
    a file and is judged like the same plan in schema 2; with_ids migrates it."""
    instance_file = tmp_path / "p.json"
    instance = fleetplan.generate("placement", {"regions": 3, "tables": 40, "jobs": 40, "storage_headroom": 20.0},
                                  seed=2)
    fleetplan.save(instance, instance_file)
    plan = fleetplan.solve(instance, "hill-climb", time_limit=20).plan
    row_of = {name: i for i, name in enumerate(instance.tables.id)}
    old = json.loads(plan.model_dump_json())
    old["schema_version"] = 1
    old["home"] = old["home"]["region"]
    old["replicas"]["table"] = [row_of[name] for name in old["replicas"]["table"]]
    old_file = tmp_path / "old-plan.json"
    old_file.write_text(json.dumps(old))
    loaded = fleetplan.load_plan(old_file)
    assert loaded.schema_version == 1
    assert fleetplan.evaluate(instance, loaded).model_dump() == fleetplan.evaluate(instance, plan).model_dump()
    migrated = loaded.with_ids(instance)
    assert migrated.schema_version == 2
    assert migrated.home.model_dump() == plan.home.model_dump()
    assert migrated.replicas.model_dump() == plan.replicas.model_dump()
    assert main(["evaluate", str(instance_file), str(old_file), "--json"]) == 0


@pytest.mark.slow  # about 10 s: run by `make test-slow`
def test_reservation_and_binpack_breakdowns_agree_with_the_aggregates():
    instance = fleetplan.generate("reservation", {}, seed=1)
    verdict = fleetplan.solve(instance).evaluation
    table = verdict.breakdown["reservations"]
    assert table["id"] == list(instance.arrays().res_ids)
    for column in ("requested_rru", "capacity_rru", "guaranteed_rru", "shortfall_rru"):
        assert sum(table[column]) == pytest.approx(verdict.metrics[column])
    binpack = fleetplan.generate("binpack", {"clusters": 2, "machines": 16}, seed=0)
    verdict = fleetplan.solve(binpack).evaluation
    workloads = verdict.breakdown["workloads"]
    assert workloads["id"] == [w.id for w in binpack.workloads]
    assert workloads["placed"].count(False) == verdict.metrics["unplaced_workloads"]
    assert sum(workloads["preempted_jobs"]) == verdict.metrics["preempted_jobs"]
    preemption_terms = sum(value for name, value in verdict.terms.items() if name != "unplaced")
    assert sum(workloads["preemption_cost"]) == pytest.approx(preemption_terms)


def test_export_writes_a_breakdown_table(tmp_path, capsys):
    instance, plan, out = tmp_path / "p.json", tmp_path / "plan.json", tmp_path / "regions.csv"
    fleetplan.save(fleetplan.generate("placement", {"regions": 3, "tables": 30, "jobs": 30}, seed=1), instance)
    assert main(["solve", str(instance), "--solver", "greedy", "-o", str(plan), "--json"]) == 0
    capsys.readouterr()
    assert main(["export", str(plan), "--instance", str(instance), "--breakdown", "regions", "-o", str(out)]) == 0
    import pandas as pd

    frame = pd.read_csv(out)
    verdict = fleetplan.evaluate(fleetplan.load_instance(instance), fleetplan.load_plan(plan))
    assert frame["id"].tolist() == verdict.breakdown["regions"]["id"]
    assert frame["storage_used_bytes"].tolist() == pytest.approx(verdict.breakdown["regions"]["storage_used_bytes"])
    capsys.readouterr()
    assert main(["export", str(plan), "--instance", str(instance), "--breakdown", "nope", "-o", str(out)]) == 2
    assert "unknown table 'nope' (a placement plan has: regions, region_gpu_types, jobs)" in capsys.readouterr().err
