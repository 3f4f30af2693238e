"""The command line of ParSync's experiments (Figure 3, Figure 5, Table 1; ATC'21 §5.2, §6)."""

from __future__ import annotations

import json

import pytest

from fleetplan.benchmarks.experiments.parsync import main
from fleetplan.sim.parsync import paper_scenario
from fleetplan.sim.parsync.experiments import figure3_scenario, figure5_scenario


def test_paper_scale_scenarios_are_the_papers():
    f3 = figure3_scenario("paper")
    # §4.3's default setting: 200k slots, 40k tasks/s of 5 s tasks (exactly the capacity), N = 10
    assert (f3.slots, f3.rate, f3.schedulers, f3.batch_size, f3.sync_gap_s) == (200_000, 40_000, 10, 100, 0.5)
    assert f3.slots == f3.rate * f3.task_duration_s and f3.duration_s == 90
    assert figure5_scenario("paper", tau_s=2.0) == paper_scenario(tau_s=2.0)
    tenth = figure5_scenario("tenth")
    assert tenth.slots * 10 == paper_scenario().slots and tenth.rate * 10 == paper_scenario().rate


def test_plot5_draws_json_lines(tmp_path):
    rows = tmp_path / "fig5.jsonl"
    with rows.open("w") as f:
        for name, delay in (("parsync-latency-first", 0.025), ("parsync-adaptive", 1.5)):
            f.write(json.dumps({"experiment": "figure5", "scheduler": name, "tau_s": 2.0,
                                "series": {"time": [1, 2, 3], "delay_mean": [delay, None, delay],
                                           "quality": [0.5, 0.6, 0.7]}}) + "\n")
    png = tmp_path / "fig5.png"
    assert main(["plot5", "--inputs", str(rows), "--plot", str(png)]) == 0
    assert png.stat().st_size > 1000


@pytest.mark.slow
def test_figure3_at_a_tenth_of_the_scale(tmp_path, capsys):
    out = tmp_path / "fig3.jsonl"
    main(["figure3", "--scale", "tenth", "--schedulers", "parsync-random", "--resolution", "4000",
          "--out", str(out)])
    row = json.loads(out.read_text().splitlines()[0])
    assert row["extra_slots"] is not None and row["extra_slots"] % 4000 == 0
    # the answer finishes in time, one step fewer does not
    probes = dict((x, ok) for x, ok in row["probes"])
    assert probes[row["extra_slots"]] and (row["extra_slots"] == 0 or not probes[row["extra_slots"] - 4000])


@pytest.mark.parametrize("start", [None, 0, 3, 17, 40, 100, 130])
def test_extra_slots_search_finds_the_threshold_from_any_start(monkeypatch, start):
    # a monotone stand-in for the simulation: finishes in time from `need` extra slots on
    from fleetplan.sim.parsync import experiments

    base = figure3_scenario("tenth")
    for need in (0, 500, 8_500, 9_000, 20_000, 20_500):
        calls: list[int] = []

        def fake(sc, scheduler, seed=0, slack=1.1, need=need, calls=calls):
            calls.append(sc.slots - base.slots)
            return sc.slots - base.slots >= need

        monkeypatch.setattr(experiments, "finishes_in_time", fake)
        got = experiments.min_extra_slots(base, "parsync-random", resolution=500,
                                          start=None if start is None else start * 500)
        assert got == (need if need <= base.slots else None)
        assert len(calls) == len(set(calls))   # no probe twice


@pytest.mark.parametrize("seeds", [[0], [0, 1]])
def test_plot3_draws_one_bar_per_scheme_and_seed(tmp_path, seeds):
    rows = tmp_path / "fig3.jsonl"
    with rows.open("w") as f:
        for seed in seeds:
            for name, extra in (("parsync-random", 70_000), ("samesyn-random", 74_000)):
                f.write(json.dumps({"experiment": "figure3", "scheduler": name, "seed": seed,
                                    "extra_slots": extra + 2_000 * seed}) + "\n")
    png = tmp_path / "fig3.png"
    assert main(["plot3", "--inputs", str(rows), "--plot", str(png)]) == 0
    assert png.stat().st_size > 1000
