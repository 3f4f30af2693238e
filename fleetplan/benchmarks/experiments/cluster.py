"""The papers' experiments at configurable scale, writing metrics JSON and plots.

* ``gavel-las`` - Gavel §7.3 / Figure 9: heterogeneity-aware against agnostic LAS on the
  simulated 108-GPU cluster (36 V100, 36 P100, 36 K80), average JCT of steady-state jobs
  against the input job rate, several seeds per rate;
* ``astraea`` - Astraea §6.3-6.4: schedulers on a Venus- or Philly-like trace; sharing-loss
  jobs, tenant unfairness ratio, average JCT and slowdown.

Run as ``python -m fleetplan.benchmarks.experiments.cluster gavel-las --rates 1,2,3 --seeds 1,2
--jobs 300 --out DIR`` or ``... astraea --shape venus --out DIR``. Runs are independent
(scenario, scheduler, seed) cells, the unit a ``fleetplan bench`` suite would sweep.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from fleetplan.plotting.cluster import plot_jct_cdf, plot_jct_vs_load, plot_tenant_ltgf
from fleetplan.sim.cluster import run_cluster
from fleetplan.sim.cluster.metrics import ClusterRun

GAVEL_SCHEDULERS = ("gavel", "gavel-agnostic")
ASTRAEA_SCHEDULERS = ("astraea", "themis-ftf", "tiresias-las", "yarn-cs", "fifo")


def gavel_las(rates: list[float], seeds: list[int], jobs: int, out: Path, multi_gpu: bool = True,
              schedulers: tuple[str, ...] = GAVEL_SCHEDULERS, steady: tuple[float, float] = (0.2, 0.8),
              policy: str = "max-min-fairness") -> dict:
    """Average steady-state JCT per (scheduler, rate) over ``seeds`` (Gavel Figure 9a)."""
    out.mkdir(parents=True, exist_ok=True)
    rows, points = [], {s: [] for s in schedulers}
    last: dict[str, ClusterRun] = {}
    for rate in rates:
        for sched in schedulers:
            values = []
            for seed in seeds:
                scenario = {"generate": "gavel", "jobs": jobs, "rate_per_hour": rate, "multi_gpu": multi_gpu,
                            "steady_state": steady, "policy": policy}
                started, cpu = time.perf_counter(), time.process_time()
                run = run_cluster(scenario, sched, seed)
                metrics = run.result.metrics
                rows.append({"scheduler": sched, "rate_per_hour": rate, "seed": seed,
                             "wall_s": time.perf_counter() - started, "cpu_s": time.process_time() - cpu,
                             **metrics})
                values.append(metrics["avg_jct_steady_s"])
                last[sched] = run
                print(f"{sched:16s} rate {rate:5.2f} seed {seed}: steady avg JCT "
                      f"{metrics['avg_jct_steady_s'] / 3600:8.2f} h, all {metrics['avg_jct_s'] / 3600:8.2f} h, "
                      f"util {metrics['utilization']:.2f}, {rows[-1]['wall_s']:.0f} s ({rows[-1]['cpu_s']:.0f} s CPU)",
                      flush=True)
            points[sched].append((rate, float(np.mean(values)), float(np.std(values))))
    plot_jct_vs_load(points, out / "jct_vs_load.png", "Gavel §7.3: LAS, 108 GPUs")
    plot_jct_cdf(last, out / "jct_cdf.png", f"JCT CDF at {rates[-1]:g} jobs/h")
    summary = {"rates": rates, "seeds": seeds, "jobs": jobs, "multi_gpu": multi_gpu, "points": points,
               "runs": rows}
    (out / "gavel_las.json").write_text(json.dumps(summary, indent=1, default=float))
    return summary


def astraea(shape: str, seeds: list[int], out: Path, jobs: int | None = None,
            schedulers: tuple[str, ...] = ASTRAEA_SCHEDULERS, gpus: int | None = None) -> dict:
    """Astraea §6.3-6.4 metrics per scheduler on a ``shape`` trace."""
    out.mkdir(parents=True, exist_ok=True)
    rows, runs = [], {}
    for sched in schedulers:
        for seed in seeds:
            scenario: dict = {"generate": shape, "jobs": jobs}
            if gpus:
                scenario["cluster"] = {"gpu": gpus}
            started, cpu = time.perf_counter(), time.process_time()
            run = run_cluster(scenario, sched, seed)
            m = run.result.metrics
            rows.append({"scheduler": sched, "seed": seed, "wall_s": time.perf_counter() - started,
                         "cpu_s": time.process_time() - cpu, **m})
            runs[sched] = run
            print(f"{sched:14s} seed {seed}: sharing-loss {m['sharing_loss_fraction']:.3f}, tenant unfairness "
                  f"{m['tenant_unfairness_ratio']:.3f}, avg JCT {m['avg_jct_s'] / 3600:.2f} h, slowdown "
                  f"{m['avg_slowdown']:.2f}, preemptions {m['preemptions']:.0f}, {rows[-1]['wall_s']:.0f} s "
                  f"({rows[-1]['cpu_s']:.0f} s CPU)",
                  flush=True)
    plot_jct_cdf(runs, out / "jct_cdf.png", f"{shape}-like trace")
    for sched, run in runs.items():
        plot_tenant_ltgf(run, out / f"tenant_ltgf_{sched}.png")
    summary = {"shape": shape, "seeds": seeds, "jobs": jobs, "runs": rows}
    (out / "astraea.json").write_text(json.dumps(summary, indent=1, default=float))
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fleetplan.benchmarks.experiments.cluster")
    sub = parser.add_subparsers(dest="experiment", required=True)
    g = sub.add_parser("gavel-las")
    g.add_argument("--rates", default="1,2,3")
    g.add_argument("--seeds", default="1")
    g.add_argument("--jobs", type=int, default=300)
    g.add_argument("--single-gpu", action="store_true")
    g.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("astraea")
    a.add_argument("--shape", default="venus", choices=("venus", "philly"))
    a.add_argument("--seeds", default="1")
    a.add_argument("--jobs", type=int, default=None)
    a.add_argument("--gpus", type=int, default=None)
    a.add_argument("--schedulers", default=",".join(ASTRAEA_SCHEDULERS))
    a.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.experiment == "gavel-las":
        gavel_las([float(r) for r in args.rates.split(",")], seeds, args.jobs, args.out,
                  multi_gpu=not args.single_gpu)
    else:
        astraea(args.shape, seeds, args.out, args.jobs, tuple(args.schedulers.split(",")), args.gpus)


if __name__ == "__main__":
    main()
