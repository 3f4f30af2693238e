"""The reservation kind's instance, evaluator and generator (MAST §2, RAS)."""

import copy
import json
import math

import numpy as np
import pytest

from fleetplan.instances import (
    InstanceError,
    evaluate,
    evaluate_current,
    generate,
    instance_from_data,
    load_instance,
)
from fleetplan.instances.reservation import ReservationPlan
from fleetplan.instances.reservation.generate import ReservationParams, apply_event, with_assignment
from tests.conftest import EXAMPLES


def tiny_data() -> dict:
    """Two datacenters of two fault domains, one rack each, two CPU servers per rack; one GPU
    rack. Reservation 'web' holds servers 0, 2, 4 today (one per fault domain of dc1/dc2)."""
    return {
        "kind": "reservation", "datacenters": ["dc1", "dc2"],
        "fault_domains": {"id": ["a", "b", "c", "d"], "datacenter": ["dc1", "dc1", "dc2", "dc2"]},
        "racks": {"id": ["ra", "rb", "rc", "rd"], "fault_domain": ["a", "b", "c", "d"]},
        "server_types": [{"id": "cpu", "category": "cpu", "rru": 1.0},
                         {"id": "gpu", "category": "gpu", "rru": 4.0}],
        "servers": {"type": ["cpu", "cpu", "cpu", "cpu", "cpu", "cpu", "gpu", "gpu"],
                    "rack": [0, 0, 1, 1, 2, 2, 3, 3],
                    "current": ["web", None, "web", None, "web", None, None, None]},
        "reservations": [{"id": "web", "capacity_rru": 2.0, "accepts": ["cpu"]},
                         {"id": "train", "capacity_rru": 4.0, "accepts": ["gpu"], "workload": "ml",
                          "guarantee": "none"}],
        "disruption_budget": 2,
    }


def test_tiny_arrays_and_todays_verdict():
    instance = instance_from_data(tiny_data())
    arrays = instance.arrays()
    assert arrays.server_fd.tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert arrays.server_dc.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert arrays.res_cap.tolist() == [[1.0, 0.0], [0.0, 4.0]]
    verdict = evaluate_current(instance)
    # web: 3 RRU in three fault domains, 2 with any one down; train holds nothing: short by 4.
    assert [v.constraint for v in verdict.violations] == ["guarantee"]
    violation = verdict.violations[0]
    assert violation.where == "train" and violation.amount == pytest.approx(4.0)
    assert "short by 4 RRU" in violation.message
    assert verdict.terms["buffer"] == pytest.approx(1.0)
    assert verdict.terms["spread"] == pytest.approx(0.1)  # largest fault domain of web: 1 RRU


def test_evaluate_guarantee_names_the_failing_domain_and_counts_moves():
    instance = instance_from_data(tiny_data())
    # web packed into fault domain 'a' (servers 0, 1) and 'c' (4): losing 'a' leaves 1 RRU.
    plan = ReservationPlan.from_arrays(instance, np.array([0, 0, -1, -1, 0, -1, 1, -1]))
    verdict = evaluate(instance, plan)
    guarantee = [v for v in verdict.violations if v.constraint == "guarantee"]
    assert [(v.where, v.amount) for v in guarantee] == [("web/a", 1.0)]
    assert verdict.metrics["servers_moved"] == 1  # server 2 left web; free servers taken are no move
    assert verdict.metrics["servers_added"] == 2
    assert verdict.terms["compactness"] == pytest.approx(20.0)  # train in one datacenter
    over = ReservationPlan.from_arrays(instance, np.array([-1, -1, -1, -1, -1, -1, 1, 1]))
    verdict = evaluate(instance, over)
    assert any(v.constraint == "disruption_budget" and v.amount == 1 for v in verdict.violations)


def test_datacenter_guarantee_and_storage_ratio():
    data = tiny_data()
    data["reservations"][0]["guarantee"] = "datacenter"
    instance = instance_from_data(data)
    verdict = evaluate_current(instance)
    web = [v for v in verdict.violations if v.where.startswith("web")]
    # dc1 holds 2 RRU of web: with dc1 down 1 RRU is left of 2.
    assert [(v.where, v.amount) for v in web] == [("web/dc1", 1.0)]
    data = tiny_data()
    data["server_types"].append({"id": "hdd", "category": "storage", "rru": 1.0})
    data["servers"]["type"][7] = "hdd"
    data["reservations"][0].update(accepts=["cpu", "hdd"], storage_ratio=0.5)
    instance = instance_from_data(data)
    # dc1: compute 2, storage 0 -> |0 - 1| = 1; dc2: compute 1 -> 0.5
    assert evaluate_current(instance).metrics["ratio_deviation_rru"] == pytest.approx(1.5)


def _bad(mutate) -> InstanceError:
    data = tiny_data()
    mutate(data)
    with pytest.raises(InstanceError) as info:
        instance_from_data(data)
    return info.value


@pytest.mark.parametrize("mutate,path,reason", [
    (lambda d: d["servers"]["type"].__setitem__(3, "tpu"), "servers.type[3]", "unknown server type"),
    (lambda d: d["racks"]["fault_domain"].__setitem__(1, "z"), "racks.fault_domain[1]", "unknown fault domain"),
    (lambda d: d["fault_domains"]["datacenter"].__setitem__(0, "dc9"), "fault_domains.datacenter[0]", "unknown datacenter"),
    (lambda d: d["reservations"][1].__setitem__("accepts", ["tpu"]), "reservations[1].accepts[0]", "unknown server type"),
    (lambda d: d["reservations"][0].__setitem__("capacity_rru", -1.0), "reservations[0].capacity_rru", "greater than or equal"),
    (lambda d: d["reservations"][0].__setitem__("capacity_rru", math.nan), "reservations[0].capacity_rru", "finite"),
    (lambda d: d["server_types"][0].__setitem__("rru", -2.0), "server_types[0].rru", "greater than"),
    (lambda d: d.__setitem__("disruption_budget", -1), "disruption_budget", "greater than or equal"),
    (lambda d: d["servers"]["current"].__setitem__(0, "nobody"), "servers.current[0]", "unknown reservation"),
    (lambda d: d["servers"]["rack"].__setitem__(2, 9), "servers.rack[2]", "does not exist"),
    (lambda d: d["reservations"][0].__setitem__("rru", {"gpu": 2.0}), "reservations[0].rru.gpu", "not in accepts"),
    (lambda d: d["servers"].__setitem__("maintenance", [False]), "servers.maintenance", "1 entries for 8"),
])
def test_bad_input_names_the_json_path(mutate, path, reason):
    error = _bad(mutate)
    assert error.path == path and reason in error.reason


def test_guarantee_level_the_region_lacks():
    def one_datacenter(d):
        d["datacenters"] = ["dc1"]
        d["fault_domains"]["datacenter"] = ["dc1"] * 4
        d["reservations"][0]["guarantee"] = "datacenter"
    error = _bad(one_datacenter)
    assert error.path == "reservations[0].guarantee" and "two datacenters" in error.reason


def test_nan_in_a_file_is_rejected_with_its_path(tmp_path):
    text = json.dumps(tiny_data()).replace('"capacity_rru": 2.0', '"capacity_rru": NaN')
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InstanceError):
        load_instance(path)


def test_generator_is_deterministic_and_today_mostly_feasible():
    params = {"servers": 3000, "reservations": 20, "datacenters": 4}
    first, second = generate("reservation", params, seed=3), generate("reservation", params, seed=3)
    assert first.model_dump() == second.model_dump()
    arrays = first.arrays()
    assert arrays.num_servers == 3000 and arrays.num_reservations == 20 and arrays.num_dcs == 4
    verdict = evaluate_current(first)
    assert verdict.metrics["servers_moved"] == 0
    assert verdict.metrics["buffer_share"] > 0.05  # today's plan holds buffers RAS can shrink
    assert generate("reservation", params, seed=4).model_dump() != first.model_dump()


def test_events_turn_an_instance_into_the_next():
    base = generate("reservation", {"servers": 2000, "reservations": 10, "datacenters": 4}, seed=0)
    arrays = base.arrays()
    bigger = apply_event(base, "new-datacenter", seed=1)
    assert bigger.arrays().num_dcs == 5 and bigger.arrays().num_servers > arrays.num_servers
    assert (bigger.arrays().server_current[arrays.num_servers:] == -1).all()
    down = apply_event(base, "fault-domain-maintenance", seed=1)
    fd_down = down.arrays().server_fd[down.arrays().server_maintenance]
    assert np.isin(np.bincount(fd_down).argmax(), fd_down)
    assert down.arrays().server_maintenance.sum() > arrays.server_maintenance.sum()
    grown = apply_event(base, "reservation-growth", seed=1)
    assert grown.arrays().res_request.sum() > arrays.res_request.sum()
    refreshed = apply_event(base, "hardware-refresh", seed=1)
    assert refreshed.arrays().num_types == arrays.num_types + 1
    new_type = refreshed.arrays().num_types - 1
    assert (refreshed.arrays().server_current[refreshed.arrays().server_type == new_type] == -1).all()
    chained = generate("reservation", {"servers": 2000, "reservations": 10, "datacenters": 4,
                                       "events": ["new-datacenter", "reservation-growth"]}, seed=0)
    assert chained.arrays().num_dcs == 5
    assert ReservationParams(events=["hardware-refresh"]).events == ["hardware-refresh"]


def test_with_assignment_makes_a_plan_todays():
    base = instance_from_data(tiny_data())
    plan = ReservationPlan.from_arrays(base, np.array([0, -1, 0, -1, 0, -1, 1, -1]))
    moved = with_assignment(base, plan)
    assert moved.arrays().server_current.tolist() == [0, -1, 0, -1, 0, -1, 1, -1]


def test_bundled_example_loads_and_is_judged():
    instance = load_instance(EXAMPLES / "reservation-small.json")
    verdict = evaluate_current(instance)
    assert verdict.kind == "reservation" and verdict.metrics["servers"] == instance.arrays().num_servers


def test_unchanged_dump_round_trips():
    instance = instance_from_data(tiny_data())
    again = instance_from_data(copy.deepcopy(instance.model_dump()))
    assert again.arrays().server_current.tolist() == instance.arrays().server_current.tolist()
