"""Metrics of a cluster simulation (Gavel §7.1, Astraea §6.1.4); its pictures are
:mod:`fleetplan.plotting.cluster`'s.

* average / median / p95 job completion time (JCT = end - submit, whatever the final state),
  and over the steady-state window of jobs (Gavel §7.1 measures steady-state jobs);
* makespan (first submit to last end);
* finish-time fairness rho = JCT / t_isolated (Gavel §4.2, Themis): t_isolated is the job's
  time with 1/N of every worker, N the average number of active jobs over its life;
* LTGF rho^job (Astraea eq. 15) over each job's life; sharing-loss jobs: rho^job < 0.95
  (Astraea §6.3); rho^tenant (eq. 12, fair share of eq. 8) per tenant per window, and the
  tenant unfairness ratio: the share of (tenant, window) cells with demand and rho < 1 (§6.3);
* average slowdown (pending + running) / running (Astraea §3.2, §6.1.4);
* preemptions and their checkpoint overhead; GPU utilization.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fleetplan.sim.cluster.traces import STATES, Trace
from fleetplan.sim.engine import SimResult

SHARING_LOSS = 0.95


@dataclass
class ClusterRun:
    """A result plus the per-job arrays the plots need."""

    result: SimResult
    trace: Trace
    jct: np.ndarray  # NaN for unfinished jobs
    ltgf_job: np.ndarray
    ftf_rho: np.ndarray
    window_s: float
    tenant_rho: np.ndarray  # (windows, tenants), NaN where the tenant had no fair share
    sim: Any = None  # the finished engine state (arrays per job)


def _isolated_throughput(trace: Trace, total: np.ndarray, n_avg: np.ndarray) -> np.ndarray:
    fractions = total[None, :] / (np.maximum(n_avg, 1.0)[:, None] * trace.gpus[:, None])
    fractions = fractions / np.maximum(fractions.sum(axis=1, keepdims=True), 1.0)
    return (trace.throughput * fractions).sum(axis=1)


def collect(sim, scheduler: str, seed: int) -> ClusterRun:
    """Metrics, groups and series of a finished :class:`~fleetplan.sim.cluster.engine.Sim`."""
    trace = sim.trace
    n = sim.n
    done = np.isfinite(sim.finish)
    jct = sim.finish - trace.submit
    metrics: dict[str, float] = {"jobs": float(n), "jobs_finished": float(done.sum())}
    fin = jct[done]
    if done.any():
        metrics.update(avg_jct_s=float(fin.mean()), median_jct_s=float(np.median(fin)),
                       p95_jct_s=float(np.percentile(fin, 95)),
                       makespan_s=float(sim.finish[done].max() - trace.submit.min()))
        lo, hi = sim.scenario.steady_state
        window = np.zeros(n, dtype=bool)
        window[int(lo * n):max(int(hi * n), int(lo * n) + 1)] = True
        steady = jct[window & done]
        metrics["avg_jct_steady_s"] = float(steady.mean()) if len(steady) else float("nan")
        metrics["steady_jobs_unfinished"] = float((window & ~done).sum())
    life = np.where(done, jct, sim.now - trace.submit)
    n_avg = (np.where(done, sim.active_at_finish, sim.active_integral) - sim.active_at_arrival) / np.maximum(life, 1e-9)
    isolated = trace.steps / np.maximum(_isolated_throughput(trace, sim.cluster.total.astype(float), n_avg), 1e-12)
    ftf = np.where(done, jct / isolated, np.nan)
    ltgf = np.where(sim.fair_job > 0, sim.attained / np.maximum(sim.fair_job, 1e-12), np.nan)
    if done.any():
        metrics["avg_ftf_rho"] = float(np.nanmean(ftf))
        metrics["max_ftf_rho"] = float(np.nanmax(ftf))
    valid = np.isfinite(ltgf)
    if valid.any():
        metrics["avg_ltgf_job"] = float(ltgf[valid].mean())
        metrics["sharing_loss_fraction"] = float((ltgf[valid] < SHARING_LOSS).mean())
    running_time = sim.run_time
    slow = done & (running_time > 0)
    if slow.any():
        metrics["avg_slowdown"] = float((jct[slow] / running_time[slow]).mean())
    metrics["preemptions"] = float(sim.preemptions.sum())
    metrics["preemptions_per_job"] = float(sim.preemptions.mean()) if n else 0.0
    metrics["overhead_s"] = float(sim.overhead.sum())
    metrics["overhead_fraction"] = float(sim.overhead.sum() / fin.sum()) if done.any() and fin.sum() > 0 else 0.0
    span = (sim.now - trace.submit.min()) if n else 0.0
    metrics["utilization"] = float(sim.busy_integral / (sim.M * span)) if span > 0 else 0.0

    alloc = np.array(sim.win_alloc) if sim.win_alloc else np.zeros((0, sim.T))
    fair = np.array(sim.win_fair) if sim.win_fair else np.zeros((0, sim.T))
    with np.errstate(divide="ignore", invalid="ignore"):
        tenant_rho = np.where(fair > 1e-9, alloc / fair, np.nan)
    cells = np.isfinite(tenant_rho)
    metrics["tenant_unfairness_ratio"] = float((tenant_rho[cells] < 1 - 1e-6).mean()) if cells.any() else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        overall = np.where(sim.tenant_fair > 0, sim.tenant_alloc / sim.tenant_fair, np.nan)
    if np.isfinite(overall).any():
        metrics["min_ltgf_tenant"] = float(np.nanmin(overall))
    sched = sim.scheduler
    if hasattr(sched, "solves"):
        metrics["lp_solves"] = float(sched.solves)
        metrics["lp_solve_s"] = float(sched.solve_s)

    groups: dict[str, dict[str, dict[str, float]]] = {"tenant": {}, "state": {}, "gpus": {}}
    # The JCT distribution of finished jobs as its percentiles 0..100 (what a plot of one run
    # draws: the per-job arrays stay in ClusterRun).
    if done.any():
        groups["jct_percentile"] = {str(q): {"jct_s": float(v)} for q, v in
                                    zip(range(101), np.percentile(fin, np.arange(101)), strict=True)}
    for k, name in enumerate(trace.tenant_names):
        mine = trace.tenant == k
        if not mine.any():
            continue
        row = {"jobs": float(mine.sum()), "quota": float(sim.quota[k]), "ltgf": float(overall[k])}
        if (mine & done).any():
            row["avg_jct_s"] = float(jct[mine & done].mean())
        col = tenant_rho[:, k] if tenant_rho.size else np.zeros(0)
        if np.isfinite(col).any():
            row["unfairness_ratio"] = float((col[np.isfinite(col)] < 1 - 1e-6).mean())
        groups["tenant"][name] = row
    for code, name in enumerate(STATES):
        mine = (trace.state == code) & done
        if mine.any():
            groups["state"][name] = {"jobs": float(mine.sum()), "avg_jct_s": float(jct[mine].mean())}
    for g in np.unique(trace.gpus):
        mine = (trace.gpus == g) & done
        if mine.any():
            groups["gpus"][str(int(g))] = {"jobs": float(mine.sum()), "avg_jct_s": float(jct[mine].mean()),
                                           "sharing_loss_fraction": float((ltgf[mine & valid] < SHARING_LOSS).mean())
                                           if (mine & valid).any() else 0.0}
    windows = len(sim.win_busy)
    series = {"time": np.arange(windows) * sim.window,
              "utilization": np.array(sim.win_busy) / (sim.M * sim.window)}
    for k, name in enumerate(trace.tenant_names):
        series[f"ltgf_{name}"] = tenant_rho[:, k] if windows else np.zeros(0)
    result = SimResult(simulator="cluster", scheduler=scheduler, seed=seed, metrics=metrics, groups=groups,
                       series=series, events=sim.events, sim_time=float(sim.now),
                       message=f"{int(done.sum())}/{n} jobs finished on {sim.M} GPUs ({trace.name})")
    return ClusterRun(result=result, trace=trace, jct=np.where(done, jct, np.nan), ltgf_job=ltgf, ftf_rho=ftf,
                      window_s=sim.window, tenant_rho=tenant_rho, sim=sim)
