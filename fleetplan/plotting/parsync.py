"""Pictures of the ``parsync`` simulator, in the manner of ParSync's Figures 3-8 (ATC'21).

* :func:`plot_run` — one run, four panels (throughput with utilization dashed, delay, conflicts,
  quality): the median among schedulers and the 10-90th percentile band (Figures 6, 7).
* :func:`plot_groups` — §5.2's two scheduler groups: quality and delay per group (Figure 4).
* :func:`plot_compare` — several runs: mean delay and quality over time (Figures 5 and 8).
* :func:`plot_extra_slots` — the extra slots each synchronisation needs (Figure 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fleetplan.plotting.style import LEGEND_SIZE, PANEL_TITLE_SIZE, colour, grid, new_figure, save
from fleetplan.plotting.style import title as suptitle
from fleetplan.sim.engine import SimResult


def _phase_lines(ax: Any, result: SimResult, n_phases: int, duration: float) -> None:
    for k in range(1, n_phases + 1):
        ax.axvline(k * duration / n_phases, color="0.8", lw=0.8, zorder=0)


def _band(ax: Any, time: np.ndarray, per_sched: np.ndarray, color: str, label: str) -> None:
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo, mid, hi = np.nanpercentile(per_sched, [10, 50, 90], axis=1)
    ax.fill_between(time, lo, hi, color=color, alpha=0.25, lw=0, label=f"{label} 10-90th pct.")
    ax.plot(time, mid, color=color, lw=1.5, label=f"{label} median")


def plot_run(result: SimResult, path: str | Path, *, phases: int = 1, duration_s: float | None = None,
             title: str | None = None) -> Path:
    """Figures 6/7: throughput, delay, conflicts and quality per scheduler over time."""
    s = result.series
    t = s["time"]
    duration = duration_s if duration_s is not None else float(t[-1])
    fig, axes = new_figure(11, 7, 2, 2, sharex=True)
    panels = [("sched_throughput", "(a) throughput per scheduler [tasks/s]"),
              ("sched_delay_mean", "(b) scheduling delay [s]"),
              ("sched_conflicts", "(c) conflicts per scheduler [1/s]"),
              ("sched_quality", "(d) quality [share on preferred slots]")]
    for ax, (key, label) in zip(axes.flat, panels, strict=True):
        _band(ax, t, s[key], colour(0), "schedulers")
        ax.set_title(label, fontsize=PANEL_TITLE_SIZE)
        _phase_lines(ax, result, phases, duration)
        grid(ax)
        ax.ticklabel_format(axis="y", useOffset=False)  # a flat series must not read "1e-14+2.5e-2"
        values = np.asarray(s[key], dtype=float)
        top = float(np.nanmax(values)) if values.size and np.isfinite(values).any() else 0.0
        ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)
    util_ax = axes[0, 0].twinx()
    util_ax.plot(t, s["utilization"], "k--", lw=2, label="cluster utilization")
    util_ax.set_ylim(0, 1.05)
    util_ax.set_ylabel("utilization")
    axes[0, 0].legend(loc="upper left", fontsize=LEGEND_SIZE)
    util_ax.legend(loc="lower right", fontsize=LEGEND_SIZE)
    axes[1, 1].set_ylim(0, 1.05)
    for ax in axes[1]:
        ax.set_xlabel("time [s]")
    suptitle(fig, title or f"parsync / {result.scheduler} (seed {result.seed})")
    out = Path(path)
    save(fig, out)
    return out


def plot_groups(result: SimResult, path: str | Path, *, schedulers_a: int, phases: int = 1,
                duration_s: float | None = None, title: str | None = None) -> Path:
    """Figure 4: delay and quality of group A (the first ``schedulers_a``, dark) and group B
    (pale): median and 10-90th percentile band within each group, utilization dashed."""
    s = result.series
    t = s["time"]
    duration = duration_s if duration_s is not None else float(t[-1])
    fig, (ax_q, ax_d) = new_figure(12, 4.5, 1, 2)
    for ax, key in ((ax_q, "sched_quality"), (ax_d, "sched_delay_mean")):
        _band(ax, t, s[key][:, :schedulers_a], colour(0), "group A")
        _band(ax, t, s[key][:, schedulers_a:], colour(1), "group B")
        _phase_lines(ax, result, phases, duration)
        ax.set_xlabel("time [s]")
        grid(ax)
    util = ax_d.twinx()
    util.plot(t, s["utilization"], "g:", lw=2, label="cluster utilization")
    util.set_ylim(0, 1.05)
    util.legend(loc="lower right", fontsize=LEGEND_SIZE)
    ax_q.set_ylim(0, 1.05)
    ax_q.set_title("(a) quality [share on preferred slots]", fontsize=PANEL_TITLE_SIZE)
    ax_d.set_title("(b) scheduling delay [s]", fontsize=PANEL_TITLE_SIZE)
    ax_q.legend(fontsize=LEGEND_SIZE)
    suptitle(fig, title or f"parsync / {result.scheduler} (seed {result.seed})")
    out = Path(path)
    save(fig, out)
    return out


def plot_compare(results: Mapping[str, SimResult], path: str | Path, *, phases: int = 1,
                 duration_s: float | None = None, tau_s: float | None = None,
                 title: str = "") -> Path:
    """Figures 5/8: mean scheduling delay (log scale) and quality of several runs over time."""
    fig, (ax_d, ax_q) = new_figure(12, 4.5, 1, 2)
    for label, r in results.items():
        t = r.series["time"]
        ax_d.plot(t, r.series["delay_mean"], lw=1.5, label=label)
        ax_q.plot(t, r.series["quality"], lw=1.5, label=label)
    last = max(float(r.series["time"][-1]) for r in results.values())
    for ax in (ax_d, ax_q):
        _phase_lines(ax, next(iter(results.values())), phases, duration_s or last)
        ax.set_xlabel("time [s]")
        grid(ax)
    if tau_s is not None:
        ax_d.axhline(tau_s, color="k", ls=":", lw=1, label=f"tau = {tau_s:g} s")
    ax_d.set_yscale("log")
    ax_d.set_ylabel("mean scheduling delay [s]")
    ax_d.set_title("(a) scheduling delay", fontsize=PANEL_TITLE_SIZE)
    ax_q.set_ylabel("share of tasks on preferred slots")
    ax_q.set_ylim(0, 1.05)
    ax_q.set_title("(b) scheduling quality", fontsize=PANEL_TITLE_SIZE)
    ax_d.legend(fontsize=LEGEND_SIZE)
    if title:
        suptitle(fig, title)
    out = Path(path)
    save(fig, out)
    return out


def plot_extra_slots(rows: Sequence[Mapping[str, Any]], path: str | Path, *, x: str,
                     title: str = "") -> Path:
    """Figure 3: bars of the extra slots each synchronisation scheme needs per setting of ``x``.

    ``rows`` carry ``x``, ``scheduler`` and ``extra_slots`` (as
    :func:`fleetplan.sim.parsync.experiments.min_extra_slots` finds them).
    """
    xs = sorted({r[x] for r in rows})
    schemes = list(dict.fromkeys(r["scheduler"] for r in rows))
    width = 0.8 / len(schemes)
    fig, ax = new_figure(6.5, 4)
    for j, scheme in enumerate(schemes):
        values = [next((r["extra_slots"] for r in rows if r[x] == v and r["scheduler"] == scheme), np.nan)
                  for v in xs]
        sync = {"parsync": "DiffSyn", "samesyn": "SameSyn", "statesync": "StateSync"}.get(scheme.split("-")[0])
        bars = ax.bar(np.arange(len(xs)) + (j - (len(schemes) - 1) / 2) * width, values, width,
                      label=f"{scheme} ({sync})" if sync else scheme)
        ax.bar_label(bars, fmt="{:,.0f}", fontsize=LEGEND_SIZE)
    ax.margins(y=0.12)
    ax.set_xticks(np.arange(len(xs)), [f"{v:g}" for v in xs])
    ax.set_xlabel(x)
    ax.set_ylabel("extra slots needed")
    grid(ax, "y")
    ax.legend(fontsize=LEGEND_SIZE)
    if title:
        ax.set_title(title, fontsize=PANEL_TITLE_SIZE)
    out = Path(path)
    save(fig, out)
    return out


def plot_files(result: SimResult, folder: str | Path) -> list[Path]:
    """``simulate parsync --out DIR``: the run's four panels."""
    return [plot_run(result, Path(folder) / "parsync.png")]


__all__ = ["plot_compare", "plot_extra_slots", "plot_files", "plot_groups", "plot_run"]
