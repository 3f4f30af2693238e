"""`fleetplan simulate parsync` with its flags: --sync-gap, --duration, --tau,
--strategy, --sync, --partitions, --phases, --json, --out; bad input is one line and exit 2."""

from __future__ import annotations

import json

import pytest

from fleetplan.cli import main
from fleetplan.sim.parsync import FIVE_PHASES, Scenario, simulate

# item 6's command line, scaled down (slots and rate / 100, 5 s instead of 300 s)
ITEM6 = ["simulate", "parsync", "--slots", "2000", "--rate", "400", "--schedulers", "4",
         "--sync-gap", "0.5", "--duration", "5", "--strategy", "adaptive", "--tau", "1.5"]


def test_item6_command_line_runs_the_scenario_it_names(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*ITEM6, "--partitions", "8", "--phases", "--json", "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((out / "result.json").read_text())
    assert (out / "parsync.png").stat().st_size > 1000
    assert printed["scheduler"] == saved["scheduler"] == "parsync-adaptive"
    # the same run from Python, with the fields the flags stand for
    scenario = Scenario(slots=2000, rate=400, schedulers=4, sync_gap_s=0.5, duration_s=5, tau_s=1.5,
                        partitions=8, phases=list(FIVE_PHASES))
    expected = simulate(scenario, "parsync-adaptive", 0)
    assert saved["metrics"] == pytest.approx(json.loads(json.dumps(expected.to_dict()))["metrics"], nan_ok=True)
    assert set(saved["groups"]["phase"]) >= {"1", "2", "3", "4", "5"}
    # the five phases' mean load is 71%: about 1,420 of the 2,000 tasks at full load (within a
    # batch of 100 per scheduler)
    assert abs(saved["metrics"]["tasks_submitted"] - 400 * 5 * sum(FIVE_PHASES) / 5) <= 4 * 100


@pytest.mark.parametrize("sync, strategy, scheduler", [
    ("statesync", "random", "statesync-random"),
    ("samesyn", None, "samesyn-latency-first"),
    (None, "quality-first", "parsync-quality-first"),
])
def test_sync_and_strategy_make_the_scheduler(capsys, sync, strategy, scheduler):
    args = ["simulate", "parsync", "--slots", "2000", "--rate", "200", "--schedulers", "2",
            "--partitions", "4", "--duration", "2", "--drain_s", "2", "--json"]
    args += ["--sync", sync] if sync else []
    args += ["--strategy", strategy] if strategy else []
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["scheduler"] == scheduler


@pytest.mark.parametrize("flags, message", [
    (["--slots", "0"], "--slots: Input should be greater than 0"),
    (["--schedulers", "-1"], "--schedulers: Input should be greater than 0"),
    (["--rate", "0"], "--rate: Input should be greater than 0"),
    (["--sync-gap", "0"], "--sync-gap: Input should be greater than or equal to 0.001"),
    (["--tau", "-1"], "--tau: Input should be greater than 0"),
    (["--partitions", "7"], "--partitions: must divide slots (2000) into equal partitions"),
    (["--partitions", "10", "--schedulers", "4"], "--partitions: ParSync needs a multiple of the 4 schedulers"),
    (["--strategy", "fast"], "--strategy: must be one of latency-first|quality-first|adaptive|random"),
    (["--sync", "often"], "--sync: must be one of parsync|samesyn|statesync"),
    (["--sync", "parsync", "--scheduler", "parsync-random"], "--scheduler: give either --scheduler or"),
    (["--tau", "1", "--tau_s", "2"], "--tau_s: given twice (also as --tau)"),
    (["--no_such_field", "1"], "--no_such_field: unknown field"),
    (["--phases", "1.5"], "--phases: Input should be a valid list"),
])
def test_bad_input_is_one_line_naming_the_option(capsys, flags, message):
    assert main(["simulate", "parsync", "--slots", "2000", *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
