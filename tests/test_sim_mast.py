"""MAST fast-path simulator: a hand-worked case under both schedulers,
determinism, GPU-hour conservation, §5.1's trace quantiles and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from fleetplan import sim
from fleetplan.instances import InstanceError
from fleetplan.sim.mast import SIMULATOR, run_mast
from fleetplan.sim.mast.scenario import MastScenario
from fleetplan.sim.mast.trace import DURATION_KNOTS, draw_duration, draw_gpus

EXAMPLES = Path(__file__).resolve().parents[1] / "fleetplan" / "examples"

# Two regions of one dynamic cluster with two 8-GPU machines each; three tenants far within
# quota. Scans every 7.5 minutes (0.125 h, exact in binary: the k-th scan is at k/8 h).
HAND = {
    "hours": 4.0, "scan_minutes": 7.5, "checkpoint_minutes": 30.0, "restart_minutes": 0.0,
    "slo_minutes": 30.0, "series_minutes": 60.0,
    "fleet": [{"name": "r0", "clusters": [{"name": "c0", "machines": {"h100": 2}}]},
              {"name": "r1", "clusters": [{"name": "c0", "machines": {"h100": 2}}]}],
    "tenant_list": [{"name": "hi", "priority": 0, "gpu_quota": 1000, "cpu_quota": 100000},
                    {"name": "mid", "priority": 1, "gpu_quota": 1000, "cpu_quota": 100000},
                    {"name": "lo", "priority": 3, "gpu_quota": 1000, "cpu_quota": 100000}],
    "workloads": [
        {"id": "A", "arrival_hours": 0.0, "gpus": 8, "duration_hours": 2.0, "tenant": "hi", "hardware": "h100",
         "data_regions": ["r0"]},
        {"id": "B", "arrival_hours": 0.0, "gpus": 16, "duration_hours": 2.0, "tenant": "lo", "hardware": "h100",
         "data_regions": ["r1"]},
        {"id": "C", "arrival_hours": 0.0625, "gpus": 16, "duration_hours": 1.0, "tenant": "mid",
         "hardware": "h100", "data_regions": ["r0", "r1"]},
    ],
}


def events(state) -> list[tuple[str, float, float]]:
    ids = state.trace.ids
    return [(ids[w], q, s) for w, q, s in zip(state.ev_w, state.ev_queued, state.ev_start, strict=True)]


def test_hand_case_mast_auction_preempts_where_it_can():
    # Scan 0 (t=0): A (level 0) starts in r0 on one machine (its data is only there); B (level 3)
    # fills r1. C (level 1, 16 GPUs, data in both) arrives at 1/16 h. Scan 1 (t=1/8): no region
    # has 16 free GPUs; with preemption r0 offers nothing (A's level 0 outranks C) and r1 can
    # preempt B, so r1 wins the auction: C starts at 1/8 (latency 3.75 min). B ran 1/8 h, no
    # checkpoint yet (every 30 min): 16 x 1/8 = 2 GPU-hours wasted, B queues again at 1/8.
    # C finishes at 1/8 + 1 = 9/8, an event pushed before scan 9's (at 9/8), so scan 9 restarts
    # B in r1 (its data is only there): latency 1 h > 30 min, an SLO violation at level 3.
    # B then runs its full 2 h again: 9/8 .. 25/8, before the 4 h horizon.
    result, state = run_mast(HAND, "mast", seed=0)
    assert events(state) == [("A", 0.0, 0.0), ("B", 0.0, 0.0), ("C", 0.0625, 0.125), ("B", 0.125, 1.125)]
    m = result.metrics
    assert m["preemptions"] == 1 and result.groups["priority"]["3"]["preemptions"] == 1
    assert m["gpu_hours_wasted"] == pytest.approx(2.0)
    # run: A 8 x 2 + B 16 x (1/8 + 2) + C 16 x 1 = 66 = finished 64 + wasted 2
    assert m["gpu_hours_run"] == pytest.approx(66.0)
    assert m["gpu_hours_finished_work"] == pytest.approx(64.0)
    assert m["conservation_error_gpu_hours"] == pytest.approx(0.0, abs=1e-9)
    assert result.groups["priority"]["1"]["slo_violation_rate"] == 0.0
    assert result.groups["priority"]["3"]["slo_violation_rate"] == 0.5  # B's second wait
    assert m["data_moves"] == 0


def test_hand_case_federated_binds_c_where_it_cannot_preempt():
    # At C's arrival the GPU demand/supply is r0: 8/16 (A) and r1: 16/16 (B), so C is bound to
    # r0, where the only running job, A, outranks it. C waits in r0's queue until A finishes at
    # 2 h (A's finish event precedes scan 16's): latency 2 - 1/16 h = 116.25 min, an SLO
    # violation at level 1. Nothing is preempted: run = finished = 8 x 2 + 16 x 2 + 16 x 1 = 64.
    result, state = run_mast(HAND, "federated", seed=0)
    assert events(state) == [("A", 0.0, 0.0), ("B", 0.0, 0.0), ("C", 0.0625, 2.0)]
    assert state.bound.tolist() == [0, 1, 0]
    m = result.metrics
    assert m["preemptions"] == 0 and m["gpu_hours_wasted"] == 0.0
    assert m["gpu_hours_run"] == pytest.approx(64.0) == m["gpu_hours_finished_work"]
    assert result.groups["priority"]["1"]["slo_violation_rate"] == 1.0
    assert result.groups["priority"]["1"]["latency_p50_minutes"] == pytest.approx(116.25)


def test_replication_when_no_data_region_has_the_hardware():
    # W's data is only in r0, which has no a100: MAST abandons the auction at scan 0, the
    # federated scheduler binds W to r1 at its arrival; either way the data is copied to r1,
    # the only region with an a100, ready at 0 + 1 h; that event was pushed before scan 8's
    # (t = 1), which starts W.
    data = json.loads(json.dumps(HAND))
    data["fleet"][1]["clusters"][0]["machines"] = {"h100": 2, "a100": 1}
    data["workloads"] = [{"id": "W", "arrival_hours": 0.0, "gpus": 8, "duration_hours": 0.5, "tenant": "hi",
                          "hardware": "a100", "data_regions": ["r0"]}]
    for scheduler in ("mast", "federated"):
        result, state = run_mast(data, scheduler, seed=0)
        assert events(state) == [("W", 0.0, 1.0)], scheduler
        assert result.metrics["data_moves"] == 1
        assert state.data[0].tolist() == [True, True]


def small(**changes) -> dict:
    return {"hours": 2.0, "regions": 3, "machines_per_region": 48, "load": 1.1, **changes}


@pytest.mark.parametrize("scheduler", ["mast", "federated"])
def test_deterministic_for_a_seed(scheduler):
    a = sim.run("mast", small(), scheduler, seed=3).to_dict()
    b = sim.run("mast", small(), scheduler, seed=3).to_dict()
    c = sim.run("mast", small(), scheduler, seed=4).to_dict()
    for d in (a, b, c):
        d.pop("wall_s")
    assert a == b
    assert a != c


@pytest.mark.parametrize("scheduler", ["mast", "federated"])
def test_conservation_of_gpu_hours(scheduler):
    result, state = run_mast(small(hours=3.0, machines_per_region=64, load=1.5, checkpoint_minutes=20.0,
                                   warmup_hours=0.0), scheduler, seed=2)
    m = result.metrics
    assert m["preemptions"] > 0 and m["gpu_hours_wasted"] > 0  # the identity is not trivial
    books = m["gpu_hours_finished_work"] + m["gpu_hours_wasted"] + m["gpu_hours_unfinished_work"]
    assert m["gpu_hours_run"] == pytest.approx(books, rel=1e-9)
    # and GPU-hours run equal the allocation integral over the horizon
    assert m["gpu_hours_run"] == pytest.approx(m["gpu_allocation_rate"] * m["gpus"] * 3.0, rel=1e-9)
    # every region's free GPUs equal its machines minus what its running workloads hold
    for region in state.regions:
        held = sum(float(o.tasks.sum() * region.demand_of(region._template_of[w])[0])
                   for w, o in region.running.items())
        assert region.state.free[:, 0].sum() == pytest.approx(len(region.state.free) * 8 - held)


def test_trace_quantiles_match_section_5_1():
    rng = np.random.default_rng(0)
    gpus = draw_gpus(rng.random(200_000))
    hours = draw_duration(rng.random(200_000))
    for value, q in ((16, 0.5), (64, 0.9), (128, 0.99)):   # GPUs: P50, P90, P99
        assert (gpus <= value).mean() >= q > (gpus < value).mean()
    for value, q in ((1 / 3, 0.5), (6.7, 0.9), (66.0, 0.99)):  # hours: P50, P90, P99
        assert (hours <= value).mean() == pytest.approx(q, abs=0.003)  # > 10 standard errors
        assert draw_duration(np.array([q]))[0] == pytest.approx(value, rel=1e-12)
    assert hours.max() <= DURATION_KNOTS[-1][1]
    assert set(np.unique(gpus[gpus < 8]).tolist()) <= {1, 2, 4} and (gpus[gpus >= 8] % 8 == 0).all()


def test_generated_trace_mix_and_load():
    from fleetplan.sim.mast.gms import PRIORITY_MIX
    from fleetplan.sim.mast.scenario import build_fleet, daily_curve
    from fleetplan.sim.mast.trace import build_tenants, generate_trace, mean_gpu_hours

    scenario = MastScenario(hours=8.0, regions=4, machines_per_region=2000, initial_fill=False, warmup_hours=0.0)
    rng = np.random.default_rng(5)
    fleet = build_fleet(scenario, rng)
    tenants = build_tenants(scenario, fleet, rng)
    t = generate_trace(scenario, fleet, tenants, rng)
    assert t.recurring.mean() == pytest.approx(0.3, abs=0.02)
    shares = np.bincount(tenants.priority[t.tenant], minlength=7) / t.size
    assert shares == pytest.approx(np.asarray(PRIORITY_MIX), abs=0.015)
    # offered load: arrivals x mean GPU-hours / (GPUs x hours), the curve's mean over the 8 hours
    curve = daily_curve(np.linspace(0, 8, 801), scenario).mean()
    offered = t.size * mean_gpu_hours() / (fleet.gpus.sum() * 8.0)
    assert offered == pytest.approx(scenario.load * curve, rel=0.1)
    # busy hours: the 12:00-14:00 rate over the 08:00-10:00 one follows the curve (about 1.12)
    early = ((t.arrival >= 0) & (t.arrival < 2)).sum()
    busy = ((t.arrival >= 4) & (t.arrival < 6)).sum()
    ratio = daily_curve(np.linspace(4, 6, 201), scenario).mean() / daily_curve(np.linspace(0, 2, 201), scenario).mean()
    assert busy / early == pytest.approx(ratio, abs=0.06)
    # quotas add up to quota_total of the fleet
    assert tenants.gpu_quota.sum() == pytest.approx(0.8 * fleet.gpus.sum())


def test_bundled_scenario_runs_and_plots(tmp_path):
    path = EXAMPLES / "mast-small.json"
    assert json.loads(path.read_text())["hours"] == 8.0
    result = sim.run("mast", {"file": str(path), "hours": 2.0}, "mast", seed=1)  # 2 h keeps the test short
    assert result.metrics["workloads"] > 20 and result.sim_time == 2 * 3600.0
    out = tmp_path / "mast.png"
    from fleetplan.plotting import plot_simulation

    plot_simulation(result, str(out))
    assert out.stat().st_size > 10_000
    # a field given beside the file overrides it
    shorter = sim.run("mast", {"file": str(path), "hours": 0.5}, "federated", seed=1)
    assert shorter.sim_time == 1800.0


def bad(change) -> dict:
    data = json.loads(json.dumps(HAND))
    change(data)
    return data


@pytest.mark.parametrize(("change", "path", "words"), [
    (lambda d: d["workloads"][1].update(tenant="nobody"), "workloads[1].tenant", "unknown tenant"),
    (lambda d: d["workloads"][2].update(hardware="tpu"), "workloads[2].hardware", "unknown GPU type"),
    (lambda d: d["workloads"][2]["data_regions"].append("mars"), "workloads[2].data_regions[2]", "unknown region"),
    (lambda d: d["workloads"][0].update(duration_hours=-1.0), "workloads[0].duration_hours", "must be > 0"),
    (lambda d: d["workloads"][0].update(gpus=24), "workloads[0].gpus", "largest region"),
    (lambda d: d["workloads"][0].update(gpus=12), "workloads[0].gpus", "multiple of 8"),
    (lambda d: d["workloads"][0].update(arrival_hours=-1), "workloads[0].arrival_hours", ""),
    (lambda d: d.update(regions=0), "regions", ""),
])
def test_bad_input_names_the_path(change, path, words):
    with pytest.raises(InstanceError) as error:
        run_mast(bad(change), "mast", seed=0)
    assert error.value.path == path
    assert words in error.value.reason


def test_bad_scenario_file_names_the_file(tmp_path):
    data = bad(lambda d: d["workloads"][1].update(tenant="nobody"))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InstanceError) as error:
        run_mast({"file": str(path)}, "federated", seed=0)
    assert error.value.source == str(path) and error.value.path == "workloads[1].tenant"
    assert str(path) in str(error.value)
    with pytest.raises(InstanceError, match="no such file"):
        run_mast({"file": str(tmp_path / "missing.json")}, "mast", seed=0)


def test_scenario_fields_are_described_for_the_cli():
    for name in ("hours", "regions", "load", "scan_minutes", "slo_minutes", "checkpoint_minutes"):
        assert MastScenario.model_fields[name].description
    assert SIMULATOR.schedulers == ("mast", "federated")
    assert "mast" in sim.names()


def test_progress_is_reported_in_simulated_hours():
    seen: list[tuple[float, float]] = []
    run_mast(small(hours=1.0), "mast", seed=0, progress=lambda now, end: seen.append((now, end)))
    assert seen and seen[-1][1] == 3.0 and all(0 <= a <= b for a, b in seen)  # 2 h warm-up + 1 h
    assert [a for a, _ in seen] == sorted(a for a, _ in seen)
    assert SIMULATOR.time_unit == "h" and SIMULATOR.takes_progress
    via_spec: list[tuple[float, float]] = []
    SIMULATOR.run(small(hours=1.0), "federated", 0, progress=lambda now, end: via_spec.append((now, end)))
    assert via_spec and via_spec[-1][1] == 3.0


@pytest.mark.slow
def test_mast_beats_federated_on_high_priority_slo():
    """§5.6's direction on a loaded 6-region fleet (a few hundred workloads over 8 hours)."""
    scenario = {"hours": 8.0, "regions": 6, "machines_per_region": 256, "load": 1.2}
    mast = sim.run("mast", scenario, "mast", seed=1)
    fed = sim.run("mast", scenario, "federated", seed=1)
    assert mast.metrics["slo_violation_rate_high"] <= fed.metrics["slo_violation_rate_high"]
    assert mast.metrics["slo_violation_rate"] < fed.metrics["slo_violation_rate"]
    for r in (mast, fed):
        assert math.isclose(r.metrics["conservation_error_gpu_hours"], 0.0, abs_tol=1e-6)


def test_early_stop_of_the_auction_changes_nothing(monkeypatch):
    # The auction stops at a plan with the best possible score; a full auction gives the same run.
    from fleetplan.sim.mast.engine import MastSim

    scenario = small(hours=3.0, regions=4, machines_per_region=64, load=1.4)
    fast = sim.run("mast", scenario, "mast", seed=6).to_dict()
    monkeypatch.setattr(MastSim, "best_free_key", lambda self, w: None)
    full = sim.run("mast", scenario, "mast", seed=6).to_dict()
    fast.pop("wall_s")
    full.pop("wall_s")
    assert fast == full


def test_synced_region_state_equals_one_built_from_an_instance():
    # Region.sync installs the running workloads as the RegionState's running jobs; a RegionState
    # built by the binpack kind from the same machines and running jobs must agree with it, and
    # RMS (place_workload with preemption) must make the same plan in both.
    from fleetplan.instances.binpack import BinpackInstance
    from fleetplan.solvers.binpack import RegionState, place_workload

    _, state = run_mast(small(hours=3.0, machines_per_region=64, load=1.5), "mast", seed=2)
    now = state.horizon
    preempting = 0
    for region in state.regions:
        if not region.running:
            continue
        region.sync(10_000, now, state.run_priority, state.run_start)
        ids = region.synced_ids.tolist()
        holdings = {"job": [], "machine": [], "gpus": [], "cpus": [], "memory_gb": []}
        for j, w in enumerate(ids):
            option = region.running[w]
            demand = region.demand_of(region._template_of[w])
            for row, tasks in zip(option.rows.tolist(), option.tasks.tolist(), strict=True):
                holdings["job"].append(j)
                holdings["machine"].append(row)
                holdings["gpus"].append(int(tasks * demand[0]))
                holdings["cpus"].append(int(tasks * demand[1]))
                holdings["memory_gb"].append(float(tasks * demand[2]))
        data = region.instance.model_dump()
        data["now_hours"] = now
        data["running"] = {"id": [str(w) for w in ids], "workload": [str(w) for w in ids],
                           "tenant": ["t"] * len(ids), "priority": state.run_priority[ids].tolist(),
                           "start_hours": state.run_start[ids].tolist(), "holdings": holdings}
        fresh = RegionState(BinpackInstance.model_validate(data))
        assert np.allclose(fresh.free, region.state.free)
        assert np.allclose(fresh.group_held, region.state.group_held)
        assert np.allclose(fresh.group_free, region.state.group_free)
        big = state.template_index[("h100", 128, 0)] if ("h100", 128, 0) in state.template_index else \
            max(range(len(region.instance.workloads)), key=lambda t: region.instance.workloads[t].jobs[0].tasks)
        a = place_workload(fresh, big, preemption=True)
        b = place_workload(region.state, big, preemption=True)
        assert a.placed == b.placed
        if a.placed:
            assert a.options[0].key == b.options[0].key
            assert a.options[0].preempted.tolist() == b.options[0].preempted.tolist()
            preempting += a.options[0].preempted.size > 0
            region.undo(b, big)
    assert preempting  # the comparison covered a plan that preempts


def test_experiments_compare_writes_table_json_and_plot(tmp_path):
    from fleetplan.benchmarks.experiments.mast import compare

    summary = compare(small(hours=1.0, regions=2, machines_per_region=32), [1], tmp_path)
    assert [r["scheduler"] for r in summary["runs"]] == ["mast", "federated"]
    table = (tmp_path / "mast_vs_federated.md").read_text()
    assert "| mast |" in table and "| federated |" in table
    assert json.loads((tmp_path / "mast_vs_federated.json").read_text())["seeds"] == [1]
    assert (tmp_path / "mast_vs_federated_slo.png").stat().st_size > 10_000


def test_warmup_is_simulated_but_not_measured():
    result, state = run_mast(small(hours=2.0, warmup_hours=1.0), "mast", seed=1)
    assert state.offset == 1.0 and state.horizon == 3.0 and result.sim_time == 2 * 3600.0
    t = state.trace
    assert result.metrics["workloads"] == ((t.arrival >= 1.0) & (t.arrival < 3.0) & ~t.initial).sum()
    assert ((t.arrival < 1.0) & ~t.initial).any()  # the warm-up had arrivals of its own
    assert result.series["time"][-1] < 2.0
    assert result.metrics["conservation_error_gpu_hours"] == pytest.approx(0.0, abs=1e-6)
