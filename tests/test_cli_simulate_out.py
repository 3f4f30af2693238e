"""`fleetplan simulate`: --list, --out DIR (all or nothing), the progress hook and its bar."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from fleetplan import sim
from fleetplan.cli import main
from fleetplan.sim.engine import SimResult, SimulatorSpec

PARSYNC = ["parsync", "--slots", "2000", "--partitions", "20", "--schedulers", "4", "--rate", "400",
           "--duration_s", "5", "--drain_s", "5"]
CLUSTER = ["cluster", "--scheduler", "fifo", "--jobs", "4"]


def leftovers(directory: Path) -> list[str]:
    """Anything in ``directory`` (temporary siblings included)."""
    return sorted(p.name for p in directory.iterdir())


def test_list_flag_is_the_no_name_listing(capsys):
    assert main(["simulate", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["simulate", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == plain
    by_name = {item["name"]: item for item in listed}
    assert set(by_name) == set(sim.names()) >= {"cluster", "parsync"}
    for name, item in by_name.items():
        assert item["schedulers"] == list(sim.get_simulator(name).schedulers)
    assert main(["simulate", "--list"]) == 0
    text = capsys.readouterr().out
    assert "parsync" in text and "parsync-latency-first" in text and "fifo" in text


@pytest.mark.parametrize("argv", [
    ["simulate", "--list", "parsync"],
    ["simulate", "--list", "--slots", "3"],
    ["simulate", "--out", "somewhere"],
])
def test_list_misuse_is_one_line_exit_2(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
    assert leftovers(tmp_path) == []


def test_out_dir_holds_the_result_and_the_plot(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", *PARSYNC, "--out", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert leftovers(tmp_path) == ["run"]
    assert leftovers(out) == ["parsync.png", "result.json"]
    saved = json.loads((out / "result.json").read_text())
    assert saved["metrics"] == printed["metrics"] and saved["metrics"]["tasks_committed"] == 2000
    assert "series" in saved and "series" not in printed  # the file has it all; stdout the summary
    assert (out / "parsync.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Same seed, same numbers: a second run into another directory agrees.
    assert main(["simulate", *PARSYNC, "--out", str(tmp_path / "again"), "--json"]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "again" / "result.json").read_text())["metrics"] == saved["metrics"]


def test_cluster_out_dir_writes_its_pngs_and_plot_works(tmp_path, capsys):
    # `simulate cluster --out DIR` promised PNGs and wrote none; --plot was refused.
    out = tmp_path / "empty"
    out.mkdir()
    assert main(["simulate", *CLUSTER, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert f"wrote {out / 'result.json'}" in text
    assert leftovers(out) == ["cluster.png", "result.json"]
    assert (out / "cluster.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert leftovers(tmp_path) == ["empty"]
    assert json.loads((out / "result.json").read_text())["scheduler"] == "fifo"
    assert main(["simulate", *CLUSTER, "--plot", str(tmp_path / "one.png")]) == 0
    assert (tmp_path / "one.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("flags", "needle"), [
    (["--slots", "-3"], "slots"),
    (["--no_such_field", "1"], "no_such_field"),
    (["--scheduler", "teleport"], "teleport"),
    (["--seed", "-1"], "seed"),
    (["--seed", "x"], "seed"),
])
def test_bad_values_write_nothing(flags, needle, tmp_path, capsys):
    assert main(["simulate", *PARSYNC, *flags, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]
    assert leftovers(tmp_path) == []


def test_out_dir_refusals(tmp_path, capsys):
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for target in (full, a_file, tmp_path / "missing" / "run"):
        assert main(["simulate", *PARSYNC, "--out", str(target)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--out" in err[0]
    assert leftovers(tmp_path) == ["file", "full"] and leftovers(full) == ["keep.txt"]


def test_a_failing_plot_leaves_no_directory(tmp_path, monkeypatch, capsys):
    from fleetplan.plotting import parsync as parsync_plots

    def broken_plot(result: SimResult, path: str) -> None:
        Path(path).write_bytes(b"half a PNG")
        raise RuntimeError("the plot broke")

    monkeypatch.setattr(parsync_plots, "plot_run", broken_plot)
    assert main(["simulate", *PARSYNC, "--out", str(tmp_path / "run")]) == 1
    assert "the plot broke" in capsys.readouterr().err
    assert leftovers(tmp_path) == []


def test_several_figures_are_all_written_and_listed(tmp_path, monkeypatch, capsys):
    from fleetplan.plotting import cluster as cluster_plots

    def plots(result: SimResult, directory: str) -> list[str]:
        paths = [str(Path(directory) / name) for name in ("a.png", "b.png")]
        for path in paths:
            Path(path).write_bytes(b"png")
        return paths

    monkeypatch.setattr(cluster_plots, "plot_files", plots)
    assert main(["simulate", *CLUSTER, "--out", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    assert leftovers(tmp_path / "run") == ["a.png", "b.png", "result.json"]
    assert f"wrote {tmp_path / 'run' / 'b.png'}" in text


def _spec(simulate) -> SimulatorSpec:
    from fleetplan.sim.parsync import Scenario

    return SimulatorSpec(name="toy", simulate=simulate, scenario_type=Scenario, schedulers=("a",),
                         description="toy")


def test_progress_reaches_only_simulators_that_take_it():
    calls: list[tuple[float, float]] = []

    def old_style(scenario, scheduler, seed):
        return SimResult("toy", scheduler, seed)

    def with_progress(scenario, scheduler, seed, *, progress=None):
        if progress is not None:
            progress(1.0, 2.0)
            progress(2.0, 2.0)
        return SimResult("toy", scheduler, seed)

    old, new = _spec(old_style), _spec(with_progress)
    assert not old.takes_progress and new.takes_progress
    # A simulator that reports nothing still ends with a call at its end (the contract).
    assert old.run(progress=lambda now, end: calls.append((now, end))).scheduler == "a"
    assert calls == [(0.0, 0.0)]
    calls.clear()
    new.run(progress=lambda now, end: calls.append((now, end)))
    assert calls == [(1.0, 2.0), (2.0, 2.0)]
    new.run()  # no callback: still runs
    # Every simulator reports progress now (cluster's is what its time limit checks off the
    # main thread).
    assert all(sim.get_simulator(name).takes_progress for name in sim.names())


def test_parsync_reports_simulated_time_up_to_its_end():
    calls: list[tuple[float, float]] = []
    spec = sim.get_simulator("parsync")
    scenario = {"slots": 2000, "partitions": 20, "schedulers": 4, "rate": 400, "duration_s": 5, "drain_s": 5}
    with_bar = spec.run(scenario, progress=lambda now, end: calls.append((now, end)))
    assert calls and all(0 <= now <= end for now, end in calls)
    assert [now for now, _ in calls] == sorted(now for now, _ in calls)
    assert with_bar.metrics == spec.run(scenario).metrics  # watching changes nothing


@pytest.mark.parametrize("json_mode", [False, True])
def test_bar_only_on_a_terminal_and_not_under_json(json_mode, tmp_path, monkeypatch, capsys):
    import fleetplan.cli.common as common

    screen = io.StringIO()
    monkeypatch.setattr(common, "stderr", Console(file=screen, force_terminal=True, width=120))
    argv = ["simulate", *PARSYNC, "--out", str(tmp_path / "run")] + (["--json"] if json_mode else [])
    assert main(argv) == 0
    drawn = screen.getvalue()
    if json_mode:
        assert drawn == ""
        json.loads(capsys.readouterr().out)  # stdout stays pure JSON
    else:
        assert "simulated" in drawn and "of 10.0 s" in drawn
    # Off a terminal (pytest's captured stderr) there is no bar either.
    monkeypatch.undo()
    assert main(["simulate", *PARSYNC]) == 0
    assert "simulated" not in capsys.readouterr().err


def test_bar_in_hours_for_a_simulator_that_reports_hours(monkeypatch):
    import fleetplan.cli.common as common
    from fleetplan.cli.commands.simulate import simulated_time_bar
    from fleetplan.sim.engine import TIME_UNITS

    screen = io.StringIO()
    monkeypatch.setattr(common, "stderr", Console(file=screen, force_terminal=True, width=120))
    with simulated_time_bar("simulating toy", True, TIME_UNITS["h"]) as progress:
        progress(8.0, 8.0)  # the end is always drawn
    assert "8.00 h of 8.00 h simulated" in screen.getvalue()
    with simulated_time_bar("simulating toy", False) as progress:
        assert progress is None
    with pytest.raises(ValueError, match="time_unit"):
        dataclasses.replace(_spec(lambda scenario, scheduler, seed: None), time_unit="days")
