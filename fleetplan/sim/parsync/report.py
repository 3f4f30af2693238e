"""Metrics of a ParSync run: scalars, per scheduler, per phase and over time (ParSync §6).

Scheduling delay is commit time minus submission time; quality the share of tasks placed on a
preferred slot (§6); conflicts the rejected commit requests; backlog the submitted tasks not yet
committed; utilization the busy share of slots. Series are per ``metrics_interval_s`` bucket
(``time`` is the bucket's end); ``sched_*`` series are 2-D, one column per scheduler, from
which plots draw the median and the 10-90th percentile band among schedulers (Figures 6-7).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fleetplan.sim.engine import SimResult

# A fleetplan.sim.parsync.core._Run. Named, not imported: core.py imports this module
# (build_result), and the imports point one way.
_Run = Any


def grouped_quantiles(group: np.ndarray, value: np.ndarray, weight: np.ndarray, n_groups: int,
                      qs: tuple[float, ...]) -> np.ndarray:
    """Weighted quantiles of ``value`` per group id in [0, n_groups) (NaN for an empty group)."""
    out = np.full((n_groups, len(qs)), np.nan)
    if value.size == 0:
        return out
    order = np.lexsort((value, group))
    v, w = value[order], weight[order].astype(float)
    cum = np.cumsum(w)
    totals = np.bincount(group, weights=weight, minlength=n_groups)
    before = np.concatenate(([0.0], np.cumsum(totals)[:-1]))
    ok = totals > 0
    for j, qq in enumerate(qs):
        # the first value whose cumulative weight reaches the quantile (within its group)
        target = before + np.maximum(qq * totals, 1e-9)
        pos = np.minimum(np.searchsorted(cum, target - 1e-9 * np.maximum(totals, 1), side="left"), v.size - 1)
        out[ok, j] = v[pos[ok]]
    return out


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def build_result(run: _Run, scheduler: str, seed: int, end: float) -> SimResult:
    sc, N, dt = run.sc, run.N, run.dt
    nb = min(run.nb, int(end / dt) + 1)   # the bucket holding the last event
    rec = np.array(run.records, dtype=float).reshape(-1, 4)
    r_b, r_i = rec[:, 0].astype(np.int64), rec[:, 1].astype(np.int64)
    r_d, r_w = rec[:, 2], rec[:, 3]
    # weighted sums as (a * b).sum(), not a @ b: BLAS sums in an order that depends on its threads
    qs = (0.5, 0.9)
    overall = grouped_quantiles(np.zeros(r_d.size, dtype=np.int64), r_d, r_w, 1, qs)[0]
    per_sched = grouped_quantiles(r_i, r_d, r_w, N, qs)
    per_bucket = grouped_quantiles(r_b, r_d, r_w, run.nb, qs)[:nb]
    per_bs = grouped_quantiles(r_b * N + r_i, r_d, r_w, run.nb * N, qs).reshape(run.nb, N, 2)[:nb]

    g, c, pref = run.b_granted[:nb], run.b_conflicts[:nb], run.b_preferred[:nb]
    committed, conflicts = float(g.sum()), float(c.sum())
    submitted = float(sum(run.submitted))
    util = run.b_util[:nb]
    backlog = run.b_backlog[:nb].sum(axis=1)
    jobs = np.array(run.jobs, dtype=float).reshape(-1, 4)
    finished = committed == submitted

    def nanmean(x: np.ndarray) -> float:
        return float(np.nanmean(x)) if np.isfinite(x).any() else float("nan")

    metrics = {
        "tasks_submitted": submitted,
        "tasks_committed": committed,
        "unfinished_tasks": submitted - committed,
        "finished": float(finished),
        "makespan_s": float(run.last_commit) if finished else float("nan"),
        "delay_mean_s": float((r_d * r_w).sum() / r_w.sum()) if r_w.size else float("nan"),
        "delay_median_s": float(overall[0]),
        "delay_p90_s": float(overall[1]),
        "conflicts": conflicts,
        "conflict_rate": conflicts / (conflicts + committed) if conflicts + committed else 0.0,
        "first_round_conflicts": float(run.first_round_conflicts),
        "throughput": committed / run.last_commit if run.last_commit > 0 else 0.0,
        "quality": float(pref.sum() / committed) if committed else float("nan"),
        "mean_score": float(run.b_score[:nb].sum() / committed) if committed else float("nan"),
        "utilization_mean": nanmean(util),
        "backlog_mean": nanmean(backlog),
        "backlog_max": float(np.nanmax(backlog)) if np.isfinite(backlog).any() else 0.0,
        "staleness_mean_s": float(run.as_int.sum() / (N * (run.as_last - run.as_from)))
        if run.as_from >= 0 and run.as_last > run.as_from else float("nan"),
        "staleness_min_s": float(run.as_min.min()) if run.as_from >= 0 else float("nan"),
        "staleness_max_s": float(run.as_max.max()) if run.as_from >= 0 else float("nan"),
        "jsd_mean_s": float(jobs[:, 1].mean()) if jobs.size else float("nan"),
        "jct_mean_s": float(jobs[:, 2].mean()) if jobs.size else float("nan"),
        "stet_mean_s": float(jobs[:, 3].mean()) if jobs.size else float("nan"),
        "quality_first_share": run.quality_decisions / run.decisions if run.decisions else 0.0,
    }

    groups: dict[str, dict[str, dict[str, float]]] = {"scheduler": {}, "phase": {}}
    for i in range(N):
        gi = float(g[:, i].sum())
        m = r_i == i
        groups["scheduler"][str(i)] = {
            "committed": gi,
            "delay_mean_s": float((r_d[m] * r_w[m]).sum() / gi) if gi else float("nan"),
            "delay_median_s": float(per_sched[i, 0]),
            "delay_p90_s": float(per_sched[i, 1]),
            "conflicts": float(c[:, i].sum()),
            "quality": float(pref[:, i].sum() / gi) if gi else float("nan"),
            "backlog_max": float(np.nanmax(run.b_backlog[:nb, i])) if nb else 0.0,
        }
    # phases by bucket: the k-th phase, then the drain after the submission period
    bounds = [k * run.plen for k in range(len(sc.phases) + 1)] + [max(end, sc.duration_s)]
    names = [str(k + 1) for k in range(len(sc.phases))] + ["drain"]
    b_mid = (np.arange(nb) + 0.5) * dt
    # §5.2's Figure 4: groups A (the first schedulers_a) and B, each phase apart
    members = {"": np.ones(N, dtype=bool)}
    if sc.schedulers_a:
        members["A/"] = np.arange(N) < sc.schedulers_a
        members["B/"] = ~members["A/"]
        groups["group"] = {}
    for name, lo, hi in zip(names, bounds[:-1], bounds[1:], strict=True):
        sel = (b_mid >= lo) & (b_mid < hi)
        if not sel.any():
            continue
        span = float(sel.sum()) * dt
        for prefix, who in members.items():
            m = sel[r_b] & who[r_i]
            q = grouped_quantiles(np.zeros(int(m.sum()), dtype=np.int64), r_d[m], r_w[m], 1, qs)[0]
            gk = float(g[sel][:, who].sum())
            entry = {
                "delay_mean_s": float((r_d[m] * r_w[m]).sum() / gk) if gk else float("nan"),
                "delay_median_s": float(q[0]), "delay_p90_s": float(q[1]),
                "throughput": gk / span, "conflicts_per_s": float(c[sel][:, who].sum()) / span,
                "quality": float(pref[sel][:, who].sum() / gk) if gk else float("nan"),
                "mean_score": float(run.b_score[:nb][sel][:, who].sum() / gk) if gk else float("nan"),
            }
            if prefix:
                groups["group"][prefix + name] = entry
            else:
                entry.update(utilization=nanmean(util[sel]), backlog_mean=nanmean(backlog[sel]))
                groups["phase"][name] = entry

    sg = g.sum(axis=1)
    series = {
        "time": (np.arange(nb) + 1) * dt,
        "submitted": run.b_submitted[:nb] / dt,
        "throughput": sg / dt,
        "conflicts": c.sum(axis=1) / dt,
        "delay_mean": _ratio(run.b_delay[:nb].sum(axis=1), sg),
        "delay_median": per_bucket[:, 0],
        "delay_p90": per_bucket[:, 1],
        "quality": _ratio(pref.sum(axis=1), sg),
        "utilization": util,
        "backlog": backlog,
        "sched_throughput": g / dt,
        "sched_conflicts": c / dt,
        "sched_delay_mean": _ratio(run.b_delay[:nb], g),
        "sched_delay_median": per_bs[:, :, 0],
        "sched_quality": _ratio(pref, g),
        "sched_backlog": run.b_backlog[:nb],
    }
    return SimResult(simulator="parsync", scheduler=scheduler, seed=seed, metrics=metrics,
                     groups=groups, series=series, events=run.events, sim_time=end,
                     message="" if finished else f"{submitted - committed:.0f} tasks uncommitted at the end")
