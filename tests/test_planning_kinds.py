"""Sizing reservation regions and binpack regions on hand-solved cases, checked by the forward
solver and the judge."""

import pytest

import fleetplan
from fleetplan.errors import InstanceError
from fleetplan.instances import instance_from_data
from fleetplan.planning import size


def reservation_region(servers_per_fd=2, request=4.0, guarantee="fault_domain"):
    """One datacenter, two fault domains, racks of two cpu servers (1 RRU each), one reservation."""
    racks = {"id": ["f0-r0", "f1-r0"], "fault_domain": ["dc0-f0", "dc0-f1"]}
    servers = {"type": ["cpu"] * (2 * servers_per_fd), "rack": [0] * servers_per_fd + [1] * servers_per_fd,
               "current": [None] * (2 * servers_per_fd), "maintenance": [False] * (2 * servers_per_fd), "id": None}
    return instance_from_data({
        "kind": "reservation", "schema_version": 1, "name": "tiny", "datacenters": ["dc0"],
        "fault_domains": {"id": ["dc0-f0", "dc0-f1"], "datacenter": ["dc0", "dc0"]}, "racks": racks,
        "server_types": [{"id": "cpu", "category": "cpu", "rru": 1.0}, {"id": "big", "category": "cpu", "rru": 4.0}],
        "servers": servers,
        "reservations": [{"id": "web", "capacity_rru": request, "accepts": ["cpu", "big"], "rru": {},
                          "workload": "general", "guarantee": guarantee, "storage_ratio": None}],
        "weights": {"moves": 1.0, "buffer": 1.0, "spread": 0.1, "compactness": 20.0, "preference": 0.05,
                    "ratio": 0.5},
        "disruption_budget": None})


def test_reservation_fault_domain_guarantee_needs_the_request_in_each_domain():
    """4 RRU surviving the loss of either fault domain: 4 in each, 8 in all; 4 held: buy 4 cpu
    servers — two racks of two, one per fault domain (price 1 each: cost 4)."""
    result = size(reservation_region(), ["shortfall_rru<=0"], ["dc0/cpu=1"])
    assert result.status == "optimal"
    assert result.additions == {"dc0/cpu": 4} and result.cost == 4 and result.bound == pytest.approx(4)
    verdict = fleetplan.solve(result.sized_instance, "mip-highs").evaluation
    assert verdict.metrics["shortfall_rru"] == 0 and verdict.feasible


def test_reservation_buys_the_cheaper_rru():
    """A 4-RRU server at price 3 beats four 1-RRU servers at price 1 each — but racks hold two
    servers: two racks of 'big' (one per fault domain, 8 RRU each) cost 12, two racks of cpu
    cost 4: cpu wins."""
    result = size(reservation_region(), ["shortfall_rru<=0"], ["dc0/cpu=1", "dc0/big=3"])
    assert result.additions == {"dc0/cpu": 4, "dc0/big": 0} and result.cost == 4


def test_reservation_a_max_too_low_is_infeasible():
    result = size(reservation_region(), ["shortfall_rru<=0"], ["dc0/cpu=1:2"])
    assert result.status == "infeasible" and not result.success


@pytest.mark.parametrize("buy,message", [("dc9/cpu", "unknown datacenter"), ("gpu", "unknown server type")])
def test_reservation_bad_purchases(buy, message):
    with pytest.raises(InstanceError, match=message):
        size(reservation_region(), ["shortfall_rru<=0"], [buy])


def binpack_region(prices_differ=True):
    """Two clusters of two fully used 8-GPU machines; one workload of 3 tasks x 8 GPUs (priority
    0, so nothing is preemptible below it... the running jobs are priority 0 too)."""
    machines = {"id": ["a0", "a1", "b0", "b1"], "cluster": ["ca", "ca", "cb", "cb"], "rack": [0, 0, 1, 1],
                "hardware": ["h100"] * 4, "gpus": [8] * 4, "cpus": [100] * 4, "memory_gb": [1000.0] * 4}
    running = {"id": ["r0"], "workload": ["rw0"], "tenant": ["t"], "priority": [0], "start_hours": [-1.0],
               "holdings": {"job": [0, 0, 0, 0], "machine": [0, 1, 2, 3], "gpus": [8] * 4, "cpus": [10] * 4,
                            "memory_gb": [10.0] * 4}}
    return instance_from_data({
        "kind": "binpack", "schema_version": 1, "name": "tiny", "clusters": ["ca", "cb"],
        "hardware_types": ["h100"], "now_hours": 0.0, "machines": machines, "running": running,
        "workloads": [{"id": "w0", "tenant": "t", "priority": 0, "jobs": [
            {"id": "j0", "tasks": 3, "hardware": "h100", "gpus_per_task": 8, "cpus_per_task": 10,
             "memory_gb_per_task": 10.0}]}]})


def test_binpack_buys_the_machines_a_workload_needs_in_the_cheaper_cluster():
    instance = binpack_region()
    before = fleetplan.solve(instance, "batch-cpsat").evaluation
    assert before.metrics["unplaced_workloads"] == 1
    result = size(instance, ["unplaced_workloads<=0", "preempted_jobs<=0"], ["ca=5", "cb=2"])
    assert result.status == "optimal"
    assert result.additions == {"ca": 0, "cb": 3} and result.cost == 6 and result.bound == pytest.approx(6)
    assert result.metrics["unplaced_workloads"] == 0 and result.metrics["preempted_jobs"] == 0


def test_binpack_a_job_stays_in_one_cluster():
    """Two machines at most per cluster: 3 tasks cannot split across clusters."""
    result = size(binpack_region(), ["unplaced_workloads<=0"], ["ca=1:2", "cb=1:2"])
    assert result.status == "infeasible"


def test_binpack_targets_other_than_zero_are_refused():
    with pytest.raises(InstanceError, match="only unplaced_workloads<=0"):
        size(binpack_region(), ["unplaced_workloads<=1"], ["ca"])


def test_reservation_binding_estimates_name_the_servers_that_help(capsys):
    from fleetplan.cli.app import main
    from fleetplan.planning.marginal import marginal_values

    values = marginal_values(reservation_region(request=2.0), "mip-highs")
    assert {v.capacity for v in values.values} == {"dc0/cpu", "dc0/big"}
    assert all(v.unit == "rack of 2" and v.more is not None for v in values.values)
    assert main(["solve", "examples/reservation-small.json", "--binding"]) == 0
    assert "one unit more / one fewer of each capacity" in capsys.readouterr().out
    assert main(["solve", "examples/binpack-small.json", "--binding"]) == 0
    out = capsys.readouterr().out
    assert "preempted_jobs" in out and "machine" in out


def test_reservation_one_rack_fewer_is_measured_and_a_missing_side_says_why(capsys):
    """4 cpu servers (a rack of 2 per fault domain) hold a 2-RRU fault-domain guarantee: 2 in
    each domain are needed, so one rack fewer leaves a domain short — infeasible, said so; 'big'
    has no server to remove — said so, not a bare dash."""
    from rich.console import Console

    from fleetplan.cli.planning.output import render_marginal
    from fleetplan.planning.marginal import marginal_values

    values = marginal_values(reservation_region(request=2.0), "mip-highs")
    by_name = {v.capacity: v for v in values.values}
    assert by_name["dc0/cpu"].fewer is None and by_name["dc0/cpu"].missing == {"fewer": "infeasible"}
    assert by_name["dc0/big"].missing == {"fewer": "fewer than 2 here"}
    # Without the guarantee, 2 RRU fit on the rack that is left: one rack fewer is measured.
    roomy = {v.capacity: v for v in marginal_values(reservation_region(request=2.0, guarantee="none"),
                                                     "mip-highs").values}
    assert roomy["dc0/cpu"].fewer is not None and roomy["dc0/cpu"].missing == {}
    assert roomy["dc0/cpu"].fewer["shortfall_rru"] == 0
    console = Console(width=200, record=True)
    render_marginal(console, values)
    text = console.export_text()
    assert "/ infeasible" in text and "/ fewer than 2 here" in text


def test_gpushare_marginal_values_add_and_remove_one_node_of_each_model():
    from fleetplan.planning.marginal import gpushare_units, marginal_values

    instance = fleetplan.load_instance("examples/gpushare-small.json")
    nodes = len(instance.nodes.id)
    units = {name: (unit, more, fewer) for name, unit, more, fewer in gpushare_units(instance)}
    assert set(units) == {model for model in instance.nodes.model if model}
    for name, (unit, more, fewer) in units.items():
        added, removed = more(), fewer()
        assert len(added.nodes.id) == nodes + 1 and added.nodes.model[-1] == name
        assert len(removed.nodes.id) == nodes - 1
        assert f"node of {added.nodes.gpus[-1]} GPU" == unit
    values = marginal_values(instance, "best-fit", metrics=["tasks_pending", "gpu_allocated_share"])
    for value in values.values:
        # every task places today: one node more cannot leave one pending, and its GPUs dilute the share
        assert value.more["tasks_pending"] == 0 and value.more["gpu_allocated_share"] < 0
        assert value.fewer is not None and value.fewer["tasks_pending"] >= 0
