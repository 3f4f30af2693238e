"""What the screen says agrees with the numbers: an exact placement solver's plan
lists its moves, an imported placement instance keeps its objective's terms comparable and has
a name, a job below its isolated share is flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fleetplan
from fleetplan.cli import main

ROOT = Path(__file__).resolve().parent.parent
PLACEMENT = ROOT / "examples" / "placement-small.json"
TABLES = ROOT / "examples" / "tables" / "placement"


@pytest.mark.parametrize("solver", ["mip-highs", "cpsat"])
def test_an_exact_placement_plan_carries_its_moves(solver, capsys):
    instance = fleetplan.load_instance(PLACEMENT)
    result = fleetplan.solve(instance, solver, time_limit=30)
    metrics = result.evaluation.metrics
    assert metrics["tables_moved"] > 0
    assert metrics["moves_listed"] == metrics["tables_moved"]  # one move per table moved
    today = fleetplan.instances.evaluate_current(instance).objective
    # The replayed gains add up to the plan's fall, as the hill climb's do.
    assert sum(move.gain for move in result.plan.moves) == pytest.approx(today - result.objective, rel=1e-9)
    moved_bytes = sum(move.bytes for move in result.plan.moves)
    assert moved_bytes == pytest.approx(metrics["bytes_moved"])
    from fleetplan.cli.display.render import make_console, render_plan

    console = make_console()
    render_plan(console, instance, result.plan, result.evaluation)
    out = capsys.readouterr().out
    assert "no table moved" not in out and f"of {int(metrics['tables_moved'])})" in out


def test_import_placement_normalises_traffic_and_names_the_instance(tmp_path, capsys):
    output = tmp_path / "fleet.json"
    settings = tmp_path / "settings.yaml"
    settings.write_text("home_training_threshold: 0.5\n")  # no name, no weights
    assert main(["import", "placement", "--tables", str(TABLES / "tables.csv"), "--jobs", str(TABLES / "jobs.csv"),
                 "--regions", str(TABLES / "regions.csv"), "--settings", str(settings), "-o", str(output)]) == 0
    assert "traffic weight w1" in capsys.readouterr().out
    instance = fleetplan.load_instance(output)
    assert instance.name == "fleet"
    arrays = instance.arrays()
    read = sum(float(arrays.table_size[t]) for rows in instance.jobs.tables for t in rows)
    assert instance.weights.traffic == pytest.approx(1.0 / read)
    # Reading every table across regions would cost 1: the terms stay comparable.
    verdict = fleetplan.instances.evaluate_current(instance)
    assert verdict.terms["traffic"] <= 1.0
    # A settings file's own weight is kept.
    explicit = fleetplan.from_frames("placement", tables=TABLES / "tables.csv", jobs=TABLES / "jobs.csv",
                                     regions=TABLES / "regions.csv", settings=TABLES / "settings.yaml")
    assert explicit.weights.traffic == 1e-12 and explicit.name == "three-regions"


def test_a_job_below_its_isolated_share_is_flagged(tmp_path, capsys):
    instance = fleetplan.load_instance(ROOT / "examples" / "allocation-64-jobs.json")
    result = fleetplan.solve(instance, "max-throughput")
    assert result.evaluation.metrics["min_speedup_over_isolated"] < 1
    plan = tmp_path / "plan.json"
    fleetplan.save(result.plan, plan)
    main(["evaluate", str(ROOT / "examples" / "allocation-64-jobs.json"), str(plan), "--explain"])
    out = capsys.readouterr().out
    assert "min_speedup_over_isolated" in out and "less than its isolated 1/n share" in out
    assert "smallest effective throughput of a job as a multiple" in out  # --explain's meaning row


def test_json_of_an_evaluation_is_unchanged_by_formats(tmp_path, capsys):
    # Formats are for the screen: --json keeps every digit.
    assert main(["solve", str(PLACEMENT), "--solver", "greedy", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data["evaluation"]["metrics"]["collocation_rate"], float)
