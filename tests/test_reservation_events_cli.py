"""``fleetplan generate reservation --from FILE --event EVENT [--plan PLAN] -o NEXT.json``: the
next RAS instance after an event (MAST §2 "Dynamic clusters")."""

from __future__ import annotations

import json

import numpy as np
import pytest

import fleetplan
from fleetplan.cli import main
from fleetplan.instances.reservation.generate import ReservationParams, apply_event


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    folder = tmp_path_factory.mktemp("events")
    source = folder / "region.json"
    assert main(["generate", "reservation", "--servers", "400", "--reservations", "6", "--datacenters", "3",
                 "--seed", "3", "-o", str(source)]) == 0
    instance = fleetplan.load_instance(source)
    plan = fleetplan.solve(instance, "greedy", time_limit=30).plan
    assert plan is not None
    plan_file = folder / "plan.json"
    fleetplan.save(plan, plan_file)
    return instance, str(source), plan, str(plan_file)


def _generate(tmp_path, *args: str) -> tuple[int, object]:
    out = tmp_path / "next.json"
    code = main(["generate", "reservation", *args, "-o", str(out)])
    return code, (fleetplan.load_instance(out) if out.exists() else None)


@pytest.mark.parametrize(("event", "long_name"), [
    ("new-datacenter", "new-datacenter"), ("maintenance", "fault-domain-maintenance"),
    ("growth", "reservation-growth"), ("hardware-refresh", "hardware-refresh"),
    ("reservation-growth", "reservation-growth")])
def test_each_event_writes_the_instance_apply_event_gives(tmp_path, region, event, long_name):
    instance, source, _, _ = region
    code, after = _generate(tmp_path, "--from", source, "--event", event, "--seed", "5")
    assert code == 0
    expected = apply_event(instance, long_name, seed=5)
    assert after.model_dump() == expected.model_dump()
    assert after.model_dump() != instance.model_dump()


def test_event_parameters_reach_the_event(tmp_path, region):
    instance, source, _, _ = region
    code, after = _generate(tmp_path, "--from", source, "--event", "growth", "--growth-factor", "2",
                            "--growth-share", "0.5")
    assert code == 0
    before = np.array([r.capacity_rru for r in instance.reservations])
    grown = np.array([r.capacity_rru for r in after.reservations])
    assert after.model_dump() == apply_event(instance, "reservation-growth", seed=0, params=ReservationParams(
        growth_factor=2, growth_share=0.5)).model_dump()  # half of the 6 reservations, some asking 0 RRU
    assert np.count_nonzero(grown != before) >= 1
    assert np.allclose(grown[grown != before], 2 * before[grown != before])
    code, bigger = _generate(tmp_path, "--from", source, "--event", "new-datacenter", "--new-datacenter-size", "2")
    assert code == 0
    assert len(bigger.servers.type) - len(instance.servers.type) == 2 * 400 // 3


def test_today_is_the_plan_when_given_else_the_previous_today(tmp_path, region):
    instance, source, plan, plan_file = region
    assert plan.assignment != instance.servers.current  # the greedy moved something
    code, with_plan = _generate(tmp_path, "--from", source, "--event", "growth", "--plan", plan_file)
    assert code == 0
    assert with_plan.servers.current == plan.assignment
    code, without = _generate(tmp_path, "--from", source, "--event", "growth")
    assert code == 0
    assert without.servers.current == instance.servers.current
    # A new datacenter's servers join free, after the plan's.
    code, grown = _generate(tmp_path, "--from", source, "--event", "new-datacenter", "--plan", plan_file)
    assert code == 0
    current = grown.servers.current
    assert current[:len(plan.assignment)] == plan.assignment
    assert all(c is None for c in current[len(plan.assignment):])


@pytest.mark.parametrize(("args", "message"), [
    (["--from", "{source}", "--event", "earthquake"], "--event: unknown event 'earthquake'"),
    (["--from", "{folder}/missing.json", "--event", "growth"], "missing.json: file not found"),
    (["--event", "growth"], "--from:"),
    (["--from", "{source}"], "--event: required with --from"),
    (["--from", "{source}", "--event", "growth", "--growth-factor", "-1"], "growth_factor"),
    (["--from", "{source}", "--event", "growth", "--growth-factor", "many"], "growth_factor"),
    (["--from", "{source}", "--event", "maintenance", "--growth-factor", "2"],
     "--growth-factor: not a parameter of the 'maintenance' event"),
    (["--from", "{source}", "--event", "growth", "--servers", "10"], "--servers: not a parameter"),
    (["--from", "{source}", "--event", "growth", "--plan", "{folder}/other-plan.json"], "not a plan of"),
    (["--from", "{folder}/plan.json", "--event", "growth"], "plan, not an instance"),
])
def test_bad_event_input_is_one_line_exit_2_nothing_written(tmp_path, region, capsys, args, message):
    instance, source, plan, plan_file = region
    folder = str(tmp_path)
    (tmp_path / "plan.json").write_text(open(plan_file).read())
    other = fleetplan.solve(fleetplan.generate("reservation", {"servers": 50, "reservations": 2,
                                                               "datacenters": 2}), "keep").plan
    fleetplan.save(other, tmp_path / "other-plan.json")
    capsys.readouterr()
    out = tmp_path / "next.json"
    argv = ["generate", "reservation", *[a.format(source=source, folder=folder) for a in args], "-o", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_events_are_for_reservation_instances_only(tmp_path, region, capsys):
    _, source, _, _ = region
    out = tmp_path / "next.json"
    assert main(["generate", "binpack", "--from", source, "--event", "growth", "-o", str(out)]) == 2
    assert "reservation instances only" in capsys.readouterr().err
    assert not out.exists()


def test_json_output_names_the_event(tmp_path, region, capsys):
    _, source, _, _ = region
    out = tmp_path / "next.json"
    assert main(["generate", "reservation", "--from", source, "--event", "maintenance", "--json",
                 "-o", str(out)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["params"]["event"] == "maintenance" and out.exists()


@pytest.mark.parametrize("kind", ["reservation", "binpack"])
def test_every_generator_parameter_has_a_meaning(kind):
    from fleetplan.cli.display.render import generator_parameters
    from fleetplan.instances import get_kind

    rows = generator_parameters(get_kind(kind).generate_params)
    assert rows and [row["name"] for row in rows if len(row["meaning"]) < 10] == []
