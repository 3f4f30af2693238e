"""A plan that breaks a guarantee can be written, flagged: reservation ``keep`` when today's
assignment leaves a reservation short ends ``infeasible`` with its plan, ``solve -o`` writes it
with exit code 1, and it can be judged and compared; no plan still means nothing written."""

import json

import pytest
from conftest import EXAMPLES

import fleetplan
from fleetplan.cli.app import main

RESERVATION = EXAMPLES / "reservation-small.json"


def _asking(tmp_path, rru):
    """reservation-small with res0001 asking ``rru``: today it holds 66 with a fault domain down."""
    data = json.loads(RESERVATION.read_text())
    data["reservations"][1]["capacity_rru"] = rru
    path = tmp_path / f"asking-{rru}.json"
    path.write_text(json.dumps(data))
    return path


def test_keep_ends_infeasible_with_today_s_plan_and_says_what_is_broken(tmp_path):
    instance = fleetplan.load_instance(_asking(tmp_path, 80.0))
    result = fleetplan.solve(instance, "keep")
    assert result.status == "infeasible" and not result.success
    assert result.plan.assignment == fleetplan.solve(fleetplan.load_instance(RESERVATION), "keep").plan.assignment
    assert "res0001" in result.message and "short by 14 RRU" in result.message
    assert [v.constraint for v in result.evaluation.violations] == ["guarantee"]
    assert fleetplan.solve(fleetplan.load_instance(RESERVATION), "keep").status == "feasible"


def test_solve_writes_the_flagged_plan_with_exit_code_1(tmp_path, capsys):
    instance = _asking(tmp_path, 80.0)
    today = tmp_path / "today.json"
    assert main(["solve", str(instance), "--solver", "keep", "-o", str(today)]) == 1
    assert "no valid plan (infeasible): wrote the plan to" in capsys.readouterr().out
    assert fleetplan.load_plan(today).kind == "reservation"
    assert main(["evaluate", str(instance), str(today)]) == 1
    capsys.readouterr()
    again = tmp_path / "again.json"
    assert main(["solve", str(instance), "--solver", "keep", "-o", str(again), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "infeasible" and "plan" not in data
    assert len(data["flagged"]) == 1 and "short by 14 RRU" in data["flagged"][0]
    # and today's plan is compared with one that keeps the guarantee
    new = tmp_path / "new.json"
    assert main(["solve", str(instance), "-o", str(new)]) == 0
    capsys.readouterr()
    assert main(["compare", str(today), str(new), "--instance", str(instance), "--json",
                 "--metrics", "shortfall_rru,servers_moved"]) == 0
    assert "shortfall_rru" in capsys.readouterr().out


@pytest.mark.parametrize("solver", [None, "greedy"])
def test_no_plan_still_writes_nothing(tmp_path, capsys, solver):
    """Asking 400 RRU: no assignment keeps the guarantee, and the solvers return no plan."""
    out = tmp_path / "plan.json"
    argv = ["solve", str(_asking(tmp_path, 400.0)), "-o", str(out)] + (["--solver", solver] if solver else [])
    assert main(argv) == 1
    assert "nothing written" in capsys.readouterr().out and not out.exists()
