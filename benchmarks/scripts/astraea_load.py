"""Astraea §6.3 on the Venus-like trace: the schedulers at 0.5x to 1.5x the
arrival rate (the same 11,304 jobs submitted over 14 / k days), and two checks at 1x: the
generator before calibration (running time independent of GPU demand) and Tiresias-LAS with
submit-time order inside its queues.

Each finished run is appended to ``OUT/runs.csv`` (CPU seconds and load average beside it); a
rerun skips finished runs; the figure is ``OUT/astraea_load.png``.

    nice -n 10 .venv/bin/python benchmarks/scripts/astraea_load.py --out benchmarks/astraea-load
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from rows import read_rows, write_rows

from fleetplan.instances.outputs import save_figure
from fleetplan.sim.cluster import run_cluster

SCHEDULERS = ("astraea", "themis-ftf", "tiresias-las", "yarn-cs", "fifo")
FIELDS = ("variant", "load", "scheduler", "seed", "sharing_loss_fraction", "tenant_unfairness_ratio", "avg_jct_h",
          "avg_slowdown", "preemptions", "utilization", "cpu_s", "loadavg_1min")
PAPER = {"sharing_loss_fraction": {"astraea": 0.071, "themis-ftf": 0.197, "yarn-cs": 0.736},
         "tenant_unfairness_ratio": {"astraea": 0.052, "tiresias-las": 0.49, "yarn-cs": 0.446}}


def cells(loads: list[float], seed: int) -> list[tuple[str, float, str, dict]]:
    out = [("calibrated", k, s, {"span_days": 14.0 / k}) for k in loads for s in SCHEDULERS]
    out += [("independent", 1.0, s, {"duration_gpu_correlation": 0.0}) for s in SCHEDULERS]
    out += [("tiresias-submit-order", 1.0, "tiresias-las", {"tiresias_order": "submit"})]
    return out




def plot(rows: list[dict[str, str]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    mine = [r for r in rows if r["variant"] == "calibrated"]
    for scheduler in SCHEDULERS:
        pts = sorted((float(r["load"]), r) for r in mine if r["scheduler"] == scheduler)
        if not pts:
            continue
        x = [p[0] for p in pts]
        for ax, key in zip(axes, ("sharing_loss_fraction", "tenant_unfairness_ratio", "avg_jct_h"), strict=True):
            ax.plot(x, [float(p[1][key]) * (100 if key != "avg_jct_h" else 1) for p in pts], marker="o",
                    label=scheduler)
    for ax, key, title in zip(axes, ("sharing_loss_fraction", "tenant_unfairness_ratio", "avg_jct_h"),
                              ("sharing-loss jobs (%)", "tenant unfairness ratio (%)", "average JCT (h)"), strict=True):
        for scheduler, value in PAPER.get(key, {}).items():
            ax.scatter([1.0], [100 * value], marker="x", s=60, color="k")
            ax.annotate(f"paper {scheduler}", (1.0, 100 * value), fontsize=7, xytext=(4, 2),
                        textcoords="offset points")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("arrival rate / Venus's two-week rate")
        ax.grid(alpha=0.3)
    axes[2].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle("Astraea §6.3 on a Venus-like trace (11,304 jobs, 16 tenants, 800 GPUs), seed 1; x: the paper",
                 fontsize=11)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/astraea-load"))
    parser.add_argument("--loads", default="0.5,0.75,1,1.25,1.5")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--plot-only", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    runs = args.out / "runs.csv"
    rows = read_rows(runs)
    if not args.plot_only:
        done = {(r["variant"], float(r["load"]), r["scheduler"], int(r["seed"])) for r in rows}
        # 1x first (the paper's point), then the sweep outwards.
        todo = sorted(cells([float(k) for k in args.loads.split(",")], args.seed),
                      key=lambda c: (c[0] != "calibrated", abs(c[1] - 1.0), c[1]))
        for variant, load, scheduler, extra in todo:
            if (variant, load, scheduler, args.seed) in done:
                continue
            cpu = time.process_time()
            run = run_cluster({"generate": "venus", **extra}, scheduler, args.seed)
            cpu = time.process_time() - cpu
            m = run.result.metrics
            rows.append({"variant": variant, "load": load, "scheduler": scheduler, "seed": args.seed,
                         "sharing_loss_fraction": m["sharing_loss_fraction"],
                         "tenant_unfairness_ratio": m["tenant_unfairness_ratio"], "avg_jct_h": m["avg_jct_s"] / 3600,
                         "avg_slowdown": m["avg_slowdown"], "preemptions": m["preemptions"],
                         "utilization": m["utilization"], "cpu_s": round(cpu, 1),
                         "loadavg_1min": round(os.getloadavg()[0], 2)})
            write_rows(runs, rows, FIELDS)
            print(f"{variant:22s} {load:4.2f}x {scheduler:13s}: sharing loss {m['sharing_loss_fraction']:.3f}, "
                  f"tenant unfairness {m['tenant_unfairness_ratio']:.3f}, JCT {m['avg_jct_s'] / 3600:.2f} h, "
                  f"{cpu:.0f} s CPU", flush=True)
    plot(read_rows(runs), args.out / "astraea_load.png")


if __name__ == "__main__":
    main()
