"""Gavel §7.3 as the paper draws it: average JCT of steady-state jobs against the input job rate,
heterogeneity-aware against agnostic, on 36 V100 + 36 P100 + 36 K80 (Figures 8, 9 and 10a).

Three panels: LAS on the continuous-single trace (Figure 8), LAS on the continuous-multiple
trace (Figure 9) and finish-time fairness on the continuous-multiple trace (Figure 10). Gavel's
own sweeps (its EXPERIMENTS.md) run rates 0-6 jobs/h (single) and 0-3 (multiple), seeds 0-2,
and measure jobs 4,000-5,000 of each trace; here each trace has ``--jobs`` jobs and the window
is the job-index fraction ``--window`` (default jobs 600-1,050 of 1,500), three seeds.

Every finished cell (panel, scheduler, rate, seed) is written to ``OUT/results.csv`` at once,
with its CPU and wall seconds and the 1-minute load average; a rerun skips finished cells, so
an interrupted sweep loses one cell at most. ``--plot-only`` redraws ``OUT/gavel_73.png``.

    nice -n 10 .venv/bin/python benchmarks/scripts/gavel_73.py --out benchmarks/gavel73
"""

from __future__ import annotations

import argparse
import csv
import io
import time
from pathlib import Path

import numpy as np

from fleetplan.instances.outputs import atomic_write_text, save_figure
from fleetplan.sim.cluster import run_cluster

PANELS = {
    # name: (policy, multi_gpu, title)
    "single-las": ("max-min-fairness", False, "LAS, continuous-single (Fig. 8)"),
    "multi-las": ("max-min-fairness", True, "LAS, continuous-multiple (Fig. 9)"),
    "multi-ftf": ("finish-time-fairness", True, "FTF, continuous-multiple (Fig. 10)"),
}
SCHEDULERS = ("gavel", "gavel-agnostic")
FIELDS = ("panel", "policy", "multi_gpu", "scheduler", "rate_per_hour", "seed", "jobs", "window",
          "avg_jct_steady_h", "avg_ftf_steady", "avg_jct_all_h", "utilization", "steady_unfinished",
          "lp_solves", "cpu_s", "wall_s", "loadavg_1min")


def _load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def read_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def write_rows(path: Path, rows: list[dict]) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def run_cell(panel: str, scheduler: str, rate: float, seed: int, jobs: int, window: tuple[float, float]) -> dict:
    policy, multi_gpu, _ = PANELS[panel]
    scenario = {"generate": "gavel", "jobs": jobs, "rate_per_hour": rate, "multi_gpu": multi_gpu,
                "steady_state": window, "policy": policy}
    cpu, wall = time.process_time(), time.perf_counter()
    run = run_cluster(scenario, scheduler, seed)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    m = run.result.metrics
    lo, hi = window
    steady = np.zeros(jobs, dtype=bool)
    steady[int(lo * jobs):max(int(hi * jobs), int(lo * jobs) + 1)] = True
    ftf = run.ftf_rho[steady]
    return {"panel": panel, "policy": policy, "multi_gpu": multi_gpu, "scheduler": scheduler,
            "rate_per_hour": rate, "seed": seed, "jobs": jobs, "window": f"{lo:g}-{hi:g}",
            "avg_jct_steady_h": m["avg_jct_steady_s"] / 3600.0,
            "avg_ftf_steady": float(np.nanmean(ftf)) if np.isfinite(ftf).any() else float("nan"),
            "avg_jct_all_h": m["avg_jct_s"] / 3600.0, "utilization": m["utilization"],
            "steady_unfinished": m.get("steady_jobs_unfinished", 0.0), "lp_solves": m.get("lp_solves", 0.0),
            "cpu_s": round(cpu, 2), "wall_s": round(wall, 2), "loadavg_1min": _load()}


def summarize(rows: list[dict[str, str]]) -> dict[tuple[str, str], list[tuple[float, float, float, int]]]:
    """(panel, scheduler) -> [(rate, mean JCT h, std, seeds)] over the finished seeds."""
    groups: dict[tuple[str, str, float], list[float]] = {}
    for row in rows:
        key = (row["panel"], row["scheduler"], float(row["rate_per_hour"]))
        groups.setdefault(key, []).append(float(row["avg_jct_steady_h"]))
    out: dict[tuple[str, str], list[tuple[float, float, float, int]]] = {}
    for (panel, scheduler, rate), values in sorted(groups.items()):
        out.setdefault((panel, scheduler), []).append((rate, float(np.mean(values)), float(np.std(values)),
                                                       len(values)))
    return out


def plot(rows: list[dict[str, str]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(rows)
    panels = [p for p in PANELS if any(k[0] == p for k in summary)]
    fig, axes = plt.subplots(2, len(panels), figsize=(4.6 * len(panels), 6.6), squeeze=False,
                             gridspec_kw={"height_ratios": [2.2, 1]})
    for col, panel in enumerate(panels):
        ax, ratio_ax = axes[0, col], axes[1, col]
        curves = {}
        for scheduler, label, color in (("gavel", "heterogeneity-aware", "tab:blue"),
                                        ("gavel-agnostic", "agnostic (ties spread)", "tab:orange")):
            points = summary.get((panel, scheduler), [])
            if not points:
                continue
            rate = np.array([p[0] for p in points])
            mean = np.array([p[1] for p in points])
            std = np.array([p[2] for p in points])
            ax.plot(rate, mean, marker="o", color=color, label=label)
            ax.fill_between(rate, mean - std, mean + std, color=color, alpha=0.2)
            curves[scheduler] = dict(zip(rate.tolist(), mean.tolist(), strict=True))
        ax.set_title(PANELS[panel][2], fontsize=10)
        ax.set_ylabel("average JCT, steady-state jobs (h)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        if len(curves) == 2:
            common = sorted(set(curves["gavel"]) & set(curves["gavel-agnostic"]))
            ratio = [curves["gavel-agnostic"][r] / curves["gavel"][r] for r in common]
            ratio_ax.plot(common, ratio, marker="s", color="tab:green")
            for r, value in zip(common, ratio, strict=True):
                ratio_ax.annotate(f"{value:.2f}", (r, value), textcoords="offset points", xytext=(0, 5),
                                  ha="center", fontsize=7)
        ratio_ax.axhline(1.0, color="grey", lw=0.8)
        ratio_ax.set_xlabel("input job rate (jobs/hour)")
        ratio_ax.set_ylabel("agnostic / aware")
        ratio_ax.grid(alpha=0.3)
    fig.suptitle("Gavel §7.3 on 36 V100 + 36 P100 + 36 K80: mean ± std over seeds", fontsize=11)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/gavel73"))
    parser.add_argument("--panels", default=",".join(PANELS))
    parser.add_argument("--rates-single", default="1,2,3,4,5,6,7")
    parser.add_argument("--rates-multi", default="0.5,1,1.5,2,2.5,3,3.5")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--jobs", type=int, default=1500)
    parser.add_argument("--window", default="0.4,0.7")
    parser.add_argument("--plot-only", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.csv"
    rows = read_rows(results)
    window = tuple(float(x) for x in args.window.split(","))
    if not args.plot_only:
        done = {(r["panel"], r["scheduler"], float(r["rate_per_hour"]), int(r["seed"])) for r in rows}
        seeds = [int(s) for s in args.seeds.split(",")]
        cells = []
        for panel in args.panels.split(","):
            rates = args.rates_single if panel.startswith("single") else args.rates_multi
            for rate in (float(r) for r in rates.split(",")):
                for seed in seeds:
                    for scheduler in SCHEDULERS:
                        cells.append((panel, scheduler, rate, seed))
        # Low load first across every panel: the curves fill in from the left.
        cells.sort(key=lambda c: (c[2] / (3.5 if c[0].startswith("multi") else 7.0), c[0], c[3], c[1]))
        for panel, scheduler, rate, seed in cells:
            if (panel, scheduler, rate, seed) in done:
                continue
            row = run_cell(panel, scheduler, rate, seed, args.jobs, window)
            rows.append(row)
            write_rows(results, rows)
            print(f"{panel:10s} {scheduler:15s} rate {rate:4.1f} seed {seed}: steady JCT "
                  f"{row['avg_jct_steady_h']:7.2f} h, util {row['utilization']:.2f}, {row['cpu_s']:.0f} s CPU "
                  f"(load {row['loadavg_1min']})", flush=True)
            rows = read_rows(results)
    plot(read_rows(results), args.out / "gavel_73.png")


if __name__ == "__main__":
    main()
