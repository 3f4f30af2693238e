"""Cluster simulator: hand-checked traces, Gavel's mechanism against its LP, the LTGF
formulas on Astraea's Figure 6, determinism, capacity, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fleetplan import sim
from fleetplan.instances import InstanceError
from fleetplan.sim.cluster import SCHEDULERS, run_cluster
from fleetplan.sim.cluster.traces import (
    GENERIC,
    Trace,
    astraea_trace,
    gavel_trace,
    read_csv_trace,
    write_csv_trace,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

SMALL = {"trace": str(EXAMPLES / "trace-small.csv"), "cluster": {"gpu": 4}, "server_size": 4,
         "interval_s": 1.0, "round_s": 1.0, "checkpoint_s": 0.0}


def generic_trace(gpus, durations, submit=None, tenant=None) -> Trace:
    n = len(gpus)
    ones = np.ones((n, 1))
    return Trace(ids=[f"j{m}" for m in range(n)], tenant=np.array(tenant or [0] * n),
                 tenant_names=[f"t{k}" for k in range(max(tenant or [0]) + 1)],
                 submit=np.array(submit or [0.0] * n, dtype=float), gpus=np.array(gpus),
                 steps=np.array(durations, dtype=float), steps_requested=np.array(durations, dtype=float),
                 model=[GENERIC] * n, state=np.zeros(n, dtype=int), worker_types=["gpu"], throughput=ones,
                 throughput_unconsolidated=ones.copy())


def test_registry_and_listing():
    assert "cluster" in sim.names()
    spec = sim.get_simulator("cluster")
    assert set(spec.schedulers) >= {"gavel", "gavel-ideal", "gavel-agnostic", "astraea", "fifo", "yarn-cs",
                                    "tiresias-las", "themis-ftf"}


def test_fifo_three_jobs_by_hand():
    # 4 GPUs. a (4 GPUs, 100 s) at 0 runs 0-100; b (2, 50 s) at 10 and c (2, 30 s) at 20 wait for
    # a, then run side by side: b 100-150, c 100-130. JCTs 100, 140, 110.
    run = run_cluster(SMALL, "fifo", 0)
    assert run.jct.tolist() == pytest.approx([100.0, 140.0, 110.0])
    assert run.result.metrics["avg_jct_s"] == pytest.approx(350.0 / 3)
    assert run.result.metrics["makespan_s"] == pytest.approx(150.0)
    assert run.result.metrics["preemptions"] == 0
    # busy 4x100 + 2x50 + 2x30 GPU-s over 150 s on 4 GPUs
    assert run.result.metrics["utilization"] == pytest.approx(560.0 / 600.0)
    assert run.result.groups["state"]["canceled"]["jobs"] == 1


def test_fifo_head_of_line_blocking_and_checkpoint_cost():
    # strict FIFO: the 4-GPU job at t=1 blocks the 1-GPU job at t=2 while 2 GPUs are free.
    trace = generic_trace([2, 4, 1], [10, 10, 10], submit=[0, 1, 2])
    run = run_cluster({"cluster": {"gpu": 4}, "server_size": 4, "interval_s": 1.0}, "fifo", 0, trace=trace)
    assert run.jct.tolist() == pytest.approx([10.0, 19.0, 28.0])
    # Tiresias with 5 s leases and a 2 GPU-s threshold: the long 4-GPU job (20 s) is preempted by a
    # newcomer of the top queue and pays 3 s when it resumes.
    trace = generic_trace([4, 4], [20, 5], submit=[0, 3])
    scenario = {"cluster": {"gpu": 4}, "server_size": 4, "interval_s": 1.0, "lease_s": 5.0,
                "checkpoint_s": 3.0, "tiresias_thresholds": [2.0]}
    run = run_cluster(scenario, "tiresias-las", 0, trace=trace)
    # j0 runs 0-5 (lease), j1 (0 attained, queue 0) wins at 5 and runs 5-10, j0 resumes at 10:
    # 3 s restore, 15 s left -> ends at 28.
    assert run.jct.tolist() == pytest.approx([28.0, 7.0])
    assert run.result.metrics["preemptions"] == 1
    assert run.result.metrics["overhead_s"] == pytest.approx(3.0)


def test_tiresias_order_keeps_a_backfilled_job_ahead_of_an_earlier_waiting_one():
    # By hand: 4 GPUs, 10 s leases, one queue in reach (attained << 3,250 GPU-s).
    # x (2 GPUs, 100 s) runs from 0. b (4 GPUs, 50 s) arrives at 10 and does not fit (2 free).
    # c (2 GPUs, 200 s) arrives at 20 and is backfilled into the 2 free GPUs.
    trace = generic_trace([2, 4, 2], [100, 50, 200], submit=[0, 10, 20])
    scenario = {"cluster": {"gpu": 4}, "server_size": 4, "interval_s": 10.0, "lease_s": 10.0,
                "checkpoint_s": 0.0}
    # Tiresias's order: after the pass at 20 the queue is [x, c, b] (waiting b behind running c);
    # when x ends at 100, c's lease ends too, c comes first and is renewed, b still does not fit.
    # c runs 20-220, b 220-270: JCTs 100, 260, 200, no preemption.
    run = run_cluster(scenario, "tiresias-las", 0, trace=trace)
    assert run.jct.tolist() == pytest.approx([100.0, 260.0, 200.0])
    assert run.result.metrics["preemptions"] == 0
    # Submit-time order: at 100 b (submitted at 10) comes before c (20), takes x's 2 GPUs and c's
    # 2, and preempts c: b runs 100-150, c (80 s done) resumes 150-270. JCTs 100, 140, 250.
    run = run_cluster({**scenario, "tiresias_order": "submit"}, "tiresias-las", 0, trace=trace)
    assert run.jct.tolist() == pytest.approx([100.0, 140.0, 250.0])
    assert run.result.metrics["preemptions"] == 1


def test_tiresias_demotion_lets_a_waiting_job_of_the_first_queue_through():
    # 2 GPUs, 1 s leases, thresholds 10 / 1e9 GPU-s. a (1 GPU, 30 s) at 0 and b (1 GPU, 30 s) at 1
    # run side by side; c (2 GPUs, 5 s) arrives at 2 and waits (queue [a, b, c]). At 10 a reaches
    # 10 GPU-s and joins the second queue; b, still ahead of c in the first, keeps its GPU and c
    # still does not fit, so a keeps the other. At 11 b is demoted too (second queue [a, b]):
    # c, alone in the first queue, takes both GPUs for 11-16. Then a (19 s left) runs 16-35 and
    # b (20 s left) 16-36. JCTs 35, 35, 14.
    trace = generic_trace([1, 1, 2], [30, 30, 5], submit=[0, 1, 2])
    scenario = {"cluster": {"gpu": 2}, "server_size": 2, "interval_s": 1.0, "lease_s": 1.0,
                "checkpoint_s": 0.0, "tiresias_thresholds": [10.0, 1e9]}
    run = run_cluster(scenario, "tiresias-las", 0, trace=trace)
    assert run.jct.tolist() == pytest.approx([35.0, 35.0, 14.0])
    assert run.result.metrics["preemptions"] == 2


def test_csv_roundtrip_and_bad_rows(tmp_path):
    trace = gavel_trace(12, seed=3, rate_per_hour=2.0)
    path = tmp_path / "t.csv"
    write_csv_trace(trace, path)
    back = read_csv_trace(path)
    assert back.ids == trace.ids and np.allclose(back.steps, trace.steps)
    assert np.allclose(back.throughput, trace.throughput)
    header = "id,tenant,submit_time,gpus,duration,model,state\n"
    cases = {
        "a,x,0,1,-5,,completed\n": ("row 2, column 'duration'", "must be > 0"),
        "a,x,0,1,5,NoSuchNet,completed\n": ("row 2, column 'model'", "unknown model"),
        "a,x,5,1,5,,completed\nb,x,1,1,5,,completed\n": ("row 3, column 'submit_time'", "not sorted"),
        "a,x,0,1,5,,completed\na,x,1,1,5,,completed\n": ("row 3, column 'id'", "duplicate"),
        "a,x,0,1,5,,exploded\n": ("row 2, column 'state'", "unknown state"),
        "a,x,0,two,5,,completed\n": ("row 2, column 'gpus'", "not a number"),
    }
    for body, (where, reason) in cases.items():
        bad = tmp_path / "bad.csv"
        bad.write_text(header + body)
        with pytest.raises(InstanceError) as info:
            read_csv_trace(bad)
        assert where in str(info.value) and reason in str(info.value) and "bad.csv" in str(info.value)
    big = tmp_path / "big.csv"
    big.write_text(header + "a,x,0,16,5,,completed\n")
    with pytest.raises(InstanceError, match="row 2, column 'gpus'.*needs 16 GPUs"):
        run_cluster({"trace": str(big), "cluster": {"gpu": 8}}, "fifo", 0)


def test_ltgf_reproduces_astraea_figure6():
    # 6 GPUs; jobs of 6, 3 and 3 GPUs, 40 minutes each, 10-minute rounds (leases).
    trace = generic_trace([6, 3, 3], [2400, 2400, 2400])
    scenario = {"cluster": {"gpu": 6}, "server_size": 8, "interval_s": 600.0, "lease_s": 600.0,
                "checkpoint_s": 0.0, "themis_error": 0.0}
    # (b) finish-time fairness alternates job 1 and jobs 2+3: over 20 minutes rho = 1.5, 0.75, 0.75
    ftf = run_cluster(dict(scenario, max_time_s=1200.0), "themis-ftf", 0, trace=trace)
    assert (ftf.sim.attained / ftf.sim.fair_job).tolist() == pytest.approx([1.5, 0.75, 0.75])
    # (c) LTGF: job 1 one round, jobs 2 and 3 two rounds: every rho is 1 over 30 minutes
    ltgf = run_cluster(dict(scenario, max_time_s=1800.0), "astraea", 0, trace=trace)
    assert (ltgf.sim.attained / ltgf.sim.fair_job).tolist() == pytest.approx([1.0, 1.0, 1.0])
    full = run_cluster(scenario, "astraea", 0, trace=trace)
    # job 1 runs rounds 1 and 4, jobs 2, 3 rounds 2, 3, 5, 6; then job 1 alone (rounds 7, 8)
    assert full.jct.tolist() == pytest.approx([4800.0, 3600.0, 3600.0])


@pytest.mark.parametrize(("multi_gpu", "tolerance"), [(False, 0.02), (True, 0.035)])
def test_gavel_mechanism_realises_the_allocation(multi_gpu, tolerance):
    # Long jobs, no completions: over 400 six-minute rounds the share of time each job spends on
    # each type comes within 2% of the LP's allocation X for single-GPU jobs (Gavel §7.5); with
    # 2-GPU gangs greedy packing leaves a few GPUs idle in some rounds (within 3.5%).
    trace = gavel_trace(14, seed=5, rate_per_hour=None, multi_gpu=multi_gpu, max_gpus=2)
    trace.steps[:] = 1e12
    scenario = {"cluster": {"v100": 4, "p100": 4, "k80": 4}, "server_size": 4, "checkpoint_s": 0.0}
    run = run_cluster(dict(scenario, max_time_s=400 * 360.0), "gavel", 0, trace=trace)
    sched = run.sim.scheduler
    assert sched.solves == 1
    assert (sched.X * trace.gpus[:, None]).sum(axis=0) == pytest.approx([4, 4, 4])  # X uses every GPU
    realised = run.sim.time_on_type / run.sim.now
    assert np.abs(realised - sched.X).max() < tolerance
    # the ideal baseline gives every job exactly its effective throughput sum_j T X
    ideal = run_cluster(dict(scenario, max_time_s=3600.0), "gavel-ideal", 0, trace=trace)
    expected = (ideal.sim.scheduler.X * trace.throughput).sum(axis=1) * 3600.0
    assert (trace.steps - ideal.sim.left) == pytest.approx(expected, rel=1e-6)  # steps are 1e12


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_each_scheduler_deterministic_and_within_capacity(scheduler):
    if scheduler.startswith("gavel"):
        scenario = {"generate": "gavel", "jobs": 6, "rate_per_hour": 4.0, "round_s": 1800.0,
                    "cluster": {"v100": 4, "p100": 4, "k80": 4}, "server_size": 4, "window_s": 600.0}
    else:
        scenario = {"generate": "venus", "jobs": 80, "span_days": 0.25, "tenants": 4, "cluster": {"gpu": 32},
                    "window_s": 600.0}
    first = sim.run("cluster", scenario, scheduler=scheduler, seed=3).to_dict()
    second = sim.run("cluster", scenario, scheduler=scheduler, seed=3).to_dict()
    first.pop("wall_s"), second.pop("wall_s")
    first["metrics"].pop("lp_solve_s", None), second["metrics"].pop("lp_solve_s", None)
    assert first == second
    assert first["metrics"]["jobs_finished"] == first["metrics"]["jobs"]
    # no window uses more GPU-time than the cluster has (Cluster.take also asserts per server)
    assert max(first["series"]["utilization"]) <= 1 + 1e-9


def test_generators_follow_the_papers():
    trace = gavel_trace(4000, seed=1, rate_per_hour=10.0)
    share = np.bincount(trace.gpus, minlength=9)[[1, 2, 4, 8]] / len(trace)
    assert share[0] == pytest.approx(0.70, abs=0.03) and share[3] == pytest.approx(0.05, abs=0.015)
    minutes = trace.steps / trace.throughput[:, 0] / 60
    assert minutes.min() >= 10 ** 1.5 - 1e-6 and minutes.max() <= 1e4 + 1e-6
    gaps = np.diff(trace.submit)
    assert gaps.mean() == pytest.approx(360.0, rel=0.08)  # Poisson at 10 jobs/hour
    venus = astraea_trace("venus", 20000, seed=2, gpus=800)
    duration = venus.steps
    for bound, target in zip((600, 3600, 21600, 86400), (0.673, 0.833, 0.906, 0.962), strict=True):
        assert (duration < bound).mean() == pytest.approx(target, abs=0.015)
    assert (venus.gpus == 1).mean() == pytest.approx(0.525, abs=0.015)
    assert (venus.gpus == 8).mean() == pytest.approx(0.226, abs=0.015)
    assert (venus.gpus > 8).mean() == pytest.approx(0.103, abs=0.015)
    assert (venus.state == 1).mean() == pytest.approx(0.279, abs=0.015)
    assert (venus.state == 2).mean() == pytest.approx(0.199, abs=0.015)
    assert len(venus.tenant_names) == 16 and venus.tenant_quota.sum() == 800


def test_yarn_quota_is_static_astraea_lends_idle_quota():
    # tenant t0 (quota 2 of 4 GPUs) submits three 1-GPU jobs of 10 s; t1 submits nothing yet.
    trace = generic_trace([1, 1, 1, 1], [10, 10, 10, 10], submit=[0, 0, 0, 100], tenant=[0, 0, 0, 1])
    scenario = {"cluster": {"gpu": 4}, "server_size": 4, "interval_s": 1.0, "quotas": {"t0": 2, "t1": 2}}
    yarn = run_cluster(scenario, "yarn-cs", 0, trace=trace)
    assert yarn.jct.tolist() == pytest.approx([10.0, 10.0, 20.0, 10.0])
    astraea = run_cluster(scenario, "astraea", 0, trace=trace)
    assert astraea.jct.tolist() == pytest.approx([10.0, 10.0, 10.0, 10.0])
    # eq. 8: t0's fair share is min(demand, quota). Astraea: 3 GPUs for 10 s against a fair 2 x 10
    # -> rho = 30 / 20. YARN-CS: 2 GPUs for 10 s then 1 for 10 s, fair 2 x 10 + 1 x 10 -> 30 / 30.
    assert astraea.result.groups["tenant"]["t0"]["ltgf"] == pytest.approx(30.0 / 20.0)
    assert yarn.result.groups["tenant"]["t0"]["ltgf"] == pytest.approx(30.0 / 30.0)


def test_gavel_runs_other_policies_and_rejects_unknown_ones():
    scenario = {"generate": "gavel", "jobs": 5, "rate_per_hour": 2.0, "multi_gpu": False,
                "cluster": {"v100": 1, "p100": 1, "k80": 1}, "round_s": 1800.0, "policy": "finish-time-fairness"}
    result = sim.run("cluster", scenario, scheduler="gavel", seed=2)
    assert result.metrics["jobs_finished"] == 5 and result.metrics["lp_solves"] >= 2
    with pytest.raises(InstanceError, match="unknown solver 'no-such-policy'"):
        sim.run("cluster", dict(scenario, policy="no-such-policy"), scheduler="gavel", seed=2)
    with pytest.raises(InstanceError, match="unknown scheduler"):
        sim.run("cluster", scenario, scheduler="round-robin", seed=2)


def test_coinciding_jct_curves_stay_visible():
    # Two schedulers that give every job the same JCT draw the same curve: each keeps its
    # marker and dash, and the figure says they coincide.
    from fleetplan.plotting.cluster import plot_jct_cdf
    from fleetplan.sim.cluster import run_cluster

    run = run_cluster({"jobs": 12}, "fifo", seed=1)
    figure = plot_jct_cdf({"fifo": run, "fifo again": run})
    lines = figure.axes[0].get_lines()
    assert len({(line.get_marker(), line.get_linestyle(), line.get_color()) for line in lines}) == 2
    assert any("coincide: fifo = fifo again" in text.get_text() for text in figure.axes[0].texts)
