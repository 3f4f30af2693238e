"""ParSync simulator: determinism, the §4.1 analytic model, §5.1 staleness and the
qualitative findings of §5.2 and §6, scaled down so the default tests take seconds."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fleetplan import sim
from fleetplan.instances import InstanceError
from fleetplan.sim.parsync import (
    FIVE_PHASES,
    SIMULATOR,
    Scenario,
    conflict_variance,
    conflicts_eq4,
    conflicts_with_more_schedulers,
    expected_conflicts,
    expected_conflicts_per_slot,
    paper_scenario,
    simulate,
)
from fleetplan.sim.parsync.report import grouped_quantiles

# S = R*T as in §4.3 and each scheduler as busy as in the paper (1k tasks/s at 0.5 ms a task is
# the paper's 2k tasks/s at 0.25 ms), on 4 schedulers and 20k slots
SMALL = dict(slots=20_000, schedulers=4, partitions=4, rate=4_000.0, decision_time_ms=0.5,
             duration_s=10.0, drain_s=20.0)


def small(**changes) -> Scenario:
    return Scenario(**{**SMALL, **changes})


# -- the analytic model (§4.1) ----------------------------------------------------------------

def test_eq1_matches_the_binomial_expectation():
    from math import comb

    n, k, s = 7, 30, 200
    p = k / s
    brute = sum(max(x - 1, 0) * comb(n, x) * p**x * (1 - p) ** (n - x) for x in range(n + 1))
    assert expected_conflicts_per_slot(n, k, s) == pytest.approx(brute, rel=1e-12)
    assert expected_conflicts(n, k, s) == pytest.approx(s * brute, rel=1e-12)
    assert expected_conflicts(1, 50, 100) == pytest.approx(0.0, abs=1e-9)   # one scheduler


def test_eq3_eq4_agree_and_more_schedulers_mean_more_conflicts():
    n, k, s = 10, 100, 2_000
    values = [conflicts_with_more_schedulers(a, n, k, s) for a in (1, 2, 4, 8)]
    assert values[0] == pytest.approx(expected_conflicts(n, k, s))
    for a, v in zip((1, 2, 4, 8), values, strict=True):
        assert conflicts_eq4(a, n, k, s) == pytest.approx(v, rel=1e-9)
    assert all(b > a for a, b in zip(values, values[1:], strict=False))   # §4.1: f(A) increases with A
    # adding idle slots reduces conflicts, with diminishing effect
    c = [expected_conflicts(n, k, s) for s in (2_000, 4_000, 6_000)]
    assert c[0] > c[1] > c[2] and c[0] - c[1] > c[1] - c[2]


def test_conflict_variance_matches_monte_carlo():
    rng = np.random.default_rng(0)
    n, k, s = 5, 20, 100
    totals = []
    for _ in range(4000):
        picks = np.concatenate([rng.choice(s, k, replace=False) for _ in range(n)])
        x = np.bincount(picks, minlength=s)
        totals.append(np.maximum(x - 1, 0).sum())
    assert np.mean(totals) == pytest.approx(expected_conflicts(n, k, s), rel=0.02)
    assert np.var(totals) == pytest.approx(conflict_variance(n, k, s), rel=0.1)


@pytest.mark.parametrize(("n", "k", "s_idle"), [(10, 100, 2_000), (10, 100, 10_000), (4, 50, 400)])
def test_simulated_synchronous_round_matches_eq2(n, k, s_idle):
    """One batch of K per scheduler at t = 0, all views equal: first-commit conflicts ~ eq. (2)."""
    scenario = Scenario(slots=s_idle, schedulers=n, partitions=1, batch_size=k, rate=1.0,
                        duration_s=1.0, drain_s=5.0, sync_gap_s=100.0, stagger=False)
    runs = 40
    got = [simulate(scenario, "statesync-random", seed).metrics["first_round_conflicts"]
           for seed in range(runs)]
    expected = expected_conflicts(n, k, s_idle)
    sd_of_mean = math.sqrt(conflict_variance(n, k, s_idle) / runs)
    assert abs(np.mean(got) - expected) < 4 * sd_of_mean + 0.5


# -- the simulator -------------------------------------------------------------------------------

def test_registered_and_runs_through_the_registry():
    assert "parsync" in sim.names()
    assert sim.get_simulator("parsync") is SIMULATOR
    result = sim.run("parsync", {**SMALL, "duration_s": 3.0, "drain_s": 3.0}, "parsync-adaptive", seed=2)
    assert result.metrics["finished"] == 1.0
    assert result.metrics["tasks_committed"] == result.metrics["tasks_submitted"] > 0
    json.dumps(result.to_dict())   # JSON-ready
    lengths = {len(v) for v in result.series.values()}
    assert lengths == {len(result.series["time"])}
    assert result.series["sched_delay_mean"].shape[1] == 4


def test_deterministic_for_a_seed():
    scenario = small(duration_s=5.0, phases=[0.95], task_duration="production")
    a = simulate(scenario, "parsync-quality-first", 7)
    b = simulate(scenario, "parsync-quality-first", 7)
    c = simulate(scenario, "parsync-quality-first", 8)
    assert a.metrics == b.metrics
    for key in a.series:
        np.testing.assert_array_equal(a.series[key], b.series[key])
    assert a.metrics != c.metrics


@pytest.mark.parametrize("scheduler", ["statesync-random", "statesync-quality-first",
                                       "parsync-latency-first", "samesyn-adaptive"])
def test_one_scheduler_never_conflicts(scheduler):
    scenario = Scenario(slots=5_000, schedulers=1, partitions=5, rate=1_100.0, duration_s=10.0,
                        drain_s=10.0, master_partitions=5, master_time_ms=0.01)
    metrics = simulate(scenario, scheduler, 3).metrics
    assert metrics["tasks_committed"] > 10_000
    assert metrics["conflicts"] == 0


@pytest.mark.parametrize("partitions", [4, 8])
def test_staleness_averages_half_g_and_parsync_narrows_its_range(partitions):
    """§5.1: average staleness is G/2 under both schemes; ParSync bounds it in
    [G/2 - G/(2P), G/2 + G/(2P)] instead of StateSync's [0, G]."""
    g = 0.4
    scenario = small(sync_gap_s=g, partitions=partitions, duration_s=4.0, drain_s=0.0)
    state = simulate(scenario, "statesync-latency-first", 1).metrics
    par = simulate(scenario, "parsync-latency-first", 1).metrics
    for m in (state, par):
        assert m["staleness_mean_s"] == pytest.approx(g / 2, rel=0.02)
    assert state["staleness_min_s"] == pytest.approx(0.0, abs=1e-9)
    assert state["staleness_max_s"] == pytest.approx(g, rel=1e-6)
    assert par["staleness_min_s"] == pytest.approx(g / 2 - g / (2 * partitions), rel=1e-6)
    assert par["staleness_max_s"] == pytest.approx(g / 2 + g / (2 * partitions), rel=1e-6)


def test_parsync_fewer_conflicts_and_lower_delay_than_statesync_at_high_load():
    scenario = small(phases=[0.95])
    par = simulate(scenario, "parsync-latency-first", 1).metrics
    state = simulate(scenario, "statesync-latency-first", 1).metrics
    assert par["conflicts"] * 10 < state["conflicts"]
    assert par["delay_mean_s"] * 2 < state["delay_mean_s"]


def test_samesyn_has_more_conflicts_than_diffsyn():
    """§5.2: with optimistic (any-partition) scheduling, schedulers lean on their fresher
    partitions; under SameSyn those are everyone's, so conflicts rise."""
    scenario = small(phases=[0.95])
    diff = simulate(scenario, "parsync-random", 1).metrics
    same = simulate(scenario, "samesyn-random", 1).metrics
    assert same["conflicts"] > 1.3 * diff["conflicts"]


def test_latency_first_lowest_delay_quality_first_highest_quality():
    scenario = small(phases=[0.5])
    lf = simulate(scenario, "parsync-latency-first", 1).metrics
    qf = simulate(scenario, "parsync-quality-first", 1).metrics
    assert lf["delay_mean_s"] < qf["delay_mean_s"]
    assert qf["quality"] > lf["quality"] + 0.05
    assert qf["mean_score"] > lf["mean_score"]


def test_adaptive_bounds_the_delay_by_tau_where_quality_first_runs_away():
    tau = 1.0
    # Quality-first at twice Latency-first's decision time cannot keep up with 95% load here
    scenario = small(phases=[0.95], duration_s=20.0, tau_s=tau, quality_scan_factor=2.0)
    qf = simulate(scenario, "parsync-quality-first", 1).metrics
    ad = simulate(scenario, "parsync-adaptive", 1).metrics
    lf = simulate(scenario, "parsync-latency-first", 1).metrics
    assert qf["delay_p90_s"] > 1.5 * tau
    assert ad["delay_median_s"] < 1.1 * tau
    assert lf["delay_mean_s"] < ad["delay_mean_s"] < qf["delay_mean_s"]
    assert 0 < ad["quality_first_share"] < 1
    assert lf["quality"] <= ad["quality"] <= qf["quality"] + 0.01


def test_slot_quality_alpha_shortens_tasks_on_preferred_slots():
    """§6.4: a task on a preferred slot runs alpha x its duration."""
    base = small(phases=[0.5], duration_s=5.0)
    fast = small(phases=[0.5], duration_s=5.0, alpha=0.5)
    plain = simulate(base, "parsync-quality-first", 1).metrics
    quick = simulate(fast, "parsync-quality-first", 1).metrics
    assert plain["stet_mean_s"] == pytest.approx(100 * 5.0)
    expected = 100 * 5.0 * (1 - 0.5 * quick["quality"])
    assert quick["stet_mean_s"] == pytest.approx(expected, rel=0.01)


def test_five_phase_load_follows_the_profile():
    scenario = small(phases=list(FIVE_PHASES), duration_s=10.0, drain_s=5.0)
    result = simulate(scenario, "parsync-latency-first", 1)
    phases = result.groups["phase"]
    for k, load in enumerate(FIVE_PHASES, start=1):
        assert phases[str(k)]["throughput"] == pytest.approx(load * 4_000, rel=0.06)
    assert paper_scenario().duration_s == 300.0


def test_grouped_quantiles():
    group = np.array([0, 0, 0, 1, 1])
    value = np.array([3.0, 1.0, 2.0, 5.0, 4.0])
    weight = np.array([1, 1, 1, 1, 3])
    out = grouped_quantiles(group, value, weight, 3, (0.5, 0.9))
    assert out[0].tolist() == [2.0, 3.0]
    assert out[1].tolist() == [4.0, 5.0]
    assert np.isnan(out[2]).all()


@pytest.mark.parametrize(("field", "value"), [
    ("slots", 0), ("schedulers", -1), ("rate", 0.0), ("sync_gap_s", 0.0), ("tau_s", 0.0),
    ("partitions", 7),
])
def test_bad_input_names_the_option(field, value):
    with pytest.raises(InstanceError) as error:
        SIMULATOR.run({**SMALL, field: value}, "parsync-latency-first")
    assert error.value.path == field


def test_parsync_needs_a_multiple_of_the_schedulers():
    with pytest.raises(InstanceError, match="multiple") as error:
        simulate(small(partitions=2), "parsync-latency-first", 0)
    assert error.value.path == "partitions"
    simulate(small(partitions=2, duration_s=1.0, drain_s=1.0), "samesyn-latency-first", 0)
    with pytest.raises(InstanceError, match="unknown scheduler"):
        simulate(small(), "parsync-fastest", 0)


@pytest.mark.slow
def test_paper_scale_five_phases():
    """§6.1 at the paper's scale: StateSync's delay runs away, ParSync Latency-first stays low."""
    scenario = paper_scenario()
    lf = simulate(scenario, "parsync-latency-first", 0).metrics
    state = simulate(scenario, "statesync-latency-first", 0).metrics
    assert lf["finished"] == 1.0 and lf["delay_p90_s"] < 0.5
    assert state["delay_mean_s"] > 10 * lf["delay_mean_s"]
    assert state["conflicts"] > 10 * lf["conflicts"]


def test_min_extra_slots_is_the_smallest_that_finishes_in_time():
    from fleetplan.sim.parsync.experiments import finishes_in_time, min_extra_slots

    scenario = Scenario(slots=1_000, schedulers=2, partitions=2, rate=400.0, batch_size=10,
                        decision_time_ms=1.0, duration_s=6.0, sync_gap_s=0.5)
    extra = min_extra_slots(scenario, "parsync-random", 0, resolution=100)
    assert extra is not None and extra > 0
    bigger = scenario.model_copy(update={"slots": scenario.slots + extra})
    smaller = scenario.model_copy(update={"slots": scenario.slots + extra - 100})
    assert finishes_in_time(bigger, "parsync-random", 0)
    assert not finishes_in_time(smaller, "parsync-random", 0)


def test_slot_quality_table_rows():
    from fleetplan.sim.parsync.experiments import slot_quality_table

    rows = slot_quality_table(small(phases=[0.5], duration_s=4.0), [0.9, 0.5])
    assert [(r["alpha"], r["scheduler"]) for r in rows][:3] == [
        (0.9, "parsync-latency-first"), (0.9, "parsync-adaptive"), (0.9, "parsync-quality-first")]
    by = {(r["alpha"], r["scheduler"]): r for r in rows}
    for alpha in (0.9, 0.5):   # Quality-first: more preferred slots, so a smaller STET
        assert by[alpha, "parsync-quality-first"]["stet_s"] < by[alpha, "parsync-latency-first"]["stet_s"]
        assert by[alpha, "parsync-latency-first"]["jsd_s"] < by[alpha, "parsync-quality-first"]["jsd_s"]


def test_plots_write_pngs(tmp_path):
    from fleetplan.plotting.parsync import plot_compare, plot_extra_slots, plot_run

    scenario = small(phases=[0.5, 0.95], duration_s=4.0, drain_s=4.0)
    runs = {name: simulate(scenario, name, 0) for name in ("parsync-latency-first", "statesync-random")}
    paths = [plot_run(runs["parsync-latency-first"], tmp_path / "run.png", phases=2, duration_s=4.0),
             plot_compare(runs, tmp_path / "compare.png", phases=2, tau_s=1.0),
             plot_extra_slots([{"G": 0.5, "scheduler": "a", "extra_slots": 10},
                               {"G": 0.5, "scheduler": "b", "extra_slots": 20}],
                              tmp_path / "extra.png", x="G")]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


@pytest.mark.slow
def test_figure3_samesyn_needs_more_extra_slots_than_diffsyn():
    """§5.2, Figure 3 (scaled to 1/10: 20k slots, 4k tasks/s, batches of 10, N = 10 at full
    capacity): SameSyn needs at least as many extra slots as DiffSyn."""
    from fleetplan.sim.parsync.experiments import min_extra_slots

    base = Scenario(slots=20_000, schedulers=10, partitions=10, rate=4_000.0, batch_size=10,
                    decision_time_ms=2.5, duration_s=20.0)
    diff = min_extra_slots(base, "parsync-random", 0, resolution=500)
    same = min_extra_slots(base, "samesyn-random", 0, resolution=500)
    assert diff is not None and same is not None and same >= diff


def test_figure4_groups_quality_first_surges_adaptive_bounds_group_a(tmp_path):
    """§5.2, Figure 4 (scaled to 1/20): with A at full load in phase 2, Quality-first's group-A
    delay surges while B's stays low; Adaptive holds A near tau and gives it lower quality."""
    from fleetplan.sim.parsync import figure4_scenario

    tau = 0.4
    scenario = figure4_scenario(slots=10_000, rate=2_000.0, batch_size=10, decision_time_ms=5.0,
                                duration_s=12.0, drain_s=10.0, tau_s=tau)
    qf = simulate(scenario, "parsync-quality-first", 0).groups["group"]
    adaptive = simulate(scenario, "parsync-adaptive", 0)
    ad = adaptive.groups["group"]
    assert qf["A/2"]["delay_median_s"] > 5 * qf["B/2"]["delay_median_s"]
    assert qf["A/2"]["delay_median_s"] > tau
    assert ad["A/2"]["delay_median_s"] < 1.5 * tau   # the EMA reacts after the fact (§A.2)
    assert ad["A/2"]["quality"] < ad["B/2"]["quality"]
    from fleetplan.plotting.parsync import plot_groups

    png = plot_groups(adaptive, tmp_path / "fig4.png", schedulers_a=5, phases=3, duration_s=12.0)
    assert png.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(InstanceError, match="one load per phase"):
        figure4_scenario(phases_a=[1.0])


def test_progress_reports_simulated_seconds():
    seen: list[tuple[float, float]] = []
    simulate(small(duration_s=3.0, drain_s=2.0), "parsync-latency-first", 0,
             progress=lambda t, end: seen.append((t, end)))
    times = [t for t, _ in seen]
    assert len(seen) >= 3 and times == sorted(times)
    assert all(end == 5.0 for _, end in seen) and times[-1] >= 3.0
