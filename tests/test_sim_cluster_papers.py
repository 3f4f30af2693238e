"""The papers' qualitative results at small scale (fast), and nearer their scale (slow)."""

from __future__ import annotations

import pytest

from fleetplan.sim.cluster import run_cluster

SMALL_GAVEL = {"generate": "gavel", "jobs": 10, "rate_per_hour": 2.0, "multi_gpu": False,
               "cluster": {"v100": 2, "p100": 2, "k80": 2}, "server_size": 4, "round_s": 1200.0}
# Running times independent of GPU demand (the generator before its calibration): at this
# size the calibrated trace (longer jobs for larger demands) offers 1.5x more GPU-time to 32 GPUs.
SMALL_VENUS = {"generate": "venus", "jobs": 150, "span_days": 0.5, "tenants": 4, "cluster": {"gpu": 32},
               "duration_gpu_correlation": 0.0}


@pytest.mark.parametrize("seed", [1, 2])
def test_heterogeneity_aware_las_beats_agnostic_and_tracks_the_ideal(seed):
    # Gavel §7.3 (Figure 9): aware LAS has the lower average JCT; §7.5 (Figure 13b): the round
    # mechanism comes close to the ideal baseline that receives the allocation exactly.
    aware = run_cluster(SMALL_GAVEL, "gavel", seed).result.metrics["avg_jct_s"]
    agnostic = run_cluster(SMALL_GAVEL, "gavel-agnostic", seed).result.metrics["avg_jct_s"]
    ideal = run_cluster(SMALL_GAVEL, "gavel-ideal", seed).result.metrics["avg_jct_s"]
    # With the agnostic plan's ties spread over the types, agnostic / aware is
    # 1.25 / 1.50 on seeds 1 / 2 here (Gavel's own simulator: 1.3-1.5x on its §7.1 traces).
    assert aware < 0.85 * agnostic
    assert ideal * 0.9 < aware < ideal * 1.1


@pytest.mark.parametrize("seed", [1, 2])
def test_astraea_fairer_than_fifo_and_yarn(seed):
    # Astraea §6.3-6.4: fewer sharing-loss jobs, fewer unfair tenant windows, lower average JCT
    runs = {s: run_cluster(SMALL_VENUS, s, seed).result.metrics for s in ("astraea", "fifo", "yarn-cs")}
    for baseline in ("fifo", "yarn-cs"):
        assert runs["astraea"]["sharing_loss_fraction"] < 0.5 * runs[baseline]["sharing_loss_fraction"]
        assert runs["astraea"]["tenant_unfairness_ratio"] < runs[baseline]["tenant_unfairness_ratio"]
        assert runs["astraea"]["avg_jct_s"] < runs[baseline]["avg_jct_s"]


@pytest.mark.slow
def test_astraea_against_themis_and_yarn_on_a_venus_like_trace():
    # Astraea §6.3 at Venus scale (11,304 jobs, 16 tenants, 800 GPUs; ~25 s of CPU per run):
    # sharing-loss jobs Astraea < Themis < YARN-CS; tenant unfairness lowest with Astraea.
    scenario = {"generate": "venus"}
    runs = {s: run_cluster(scenario, s, 1).result.metrics for s in ("astraea", "themis-ftf", "yarn-cs")}
    loss = {s: m["sharing_loss_fraction"] for s, m in runs.items()}
    assert loss["astraea"] < loss["themis-ftf"] < loss["yarn-cs"]
    # Tenant unfairness: Astraea below YARN-CS, but not below Themis on the calibrated trace
    # (35.1% against 32.2%, benchmarks/RESULTS.md), unlike the paper's 5.2%.
    unfair = {s: m["tenant_unfairness_ratio"] for s, m in runs.items()}
    assert unfair["astraea"] < unfair["yarn-cs"]


@pytest.mark.slow
def test_gavel_108_gpus_aware_las_lower_jct():
    # Gavel §7.3 on its simulated cluster (36 V100, 36 P100, 36 K80), continuous-multiple trace
    scenario = {"generate": "gavel", "jobs": 120, "rate_per_hour": 2.0}
    aware = run_cluster(scenario, "gavel", 1).result.metrics["avg_jct_s"]
    agnostic = run_cluster(scenario, "gavel-agnostic", 1).result.metrics["avg_jct_s"]
    assert aware < agnostic
