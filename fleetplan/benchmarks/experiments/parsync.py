"""ParSync's Figure 3, Figure 5 and Table 1 from the command line (ATC'21 §5.2, §6.1, §6.4):
``python -m fleetplan.benchmarks.experiments.parsync {figure3,figure5,table1,plot5,plot3}``
runs the simulations of :mod:`fleetplan.sim.parsync.experiments` and writes one JSON line per
result on stdout (and appended to ``--out``); ``plot5``/``plot3`` draw them
(:mod:`fleetplan.plotting.parsync`)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

from fleetplan.sim.engine import SimResult
from fleetplan.sim.parsync.core import simulate
from fleetplan.sim.parsync.experiments import (
    FIGURE5_SCHEDULERS,
    figure3_scenario,
    figure5_scenario,
    min_extra_slots,
)
from fleetplan.sim.parsync.scenario import FIVE_PHASES, Scenario


def _emit(out: TextIO | None, row: dict[str, Any]) -> None:
    line = json.dumps(row)
    print(line, flush=True)
    if out is not None:
        out.write(line + "\n")
        out.flush()


def _timed(scenario: Scenario, scheduler: str, seed: int) -> tuple[SimResult, dict[str, float]]:
    cpu, wall = time.process_time(), time.perf_counter()
    result = simulate(scenario, scheduler, seed)
    return result, {"cpu_s": round(time.process_time() - cpu, 1),
                    "wall_s": round(time.perf_counter() - wall, 1),
                    "load_avg_1min": round(os.getloadavg()[0], 1)}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fleetplan.benchmarks.experiments.parsync {figure3,figure5,table1} [--scale paper]``:
    one JSON line per result on stdout (and appended to ``--out``); ``--plot`` draws Figure 5
    (from ``--out`` files, possibly of several processes) or Figure 3."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fleetplan.benchmarks.experiments.parsync",
                                     description="ParSync's Figure 3, Figure 5 and Table 1 (ATC'21 §5.2, §6.1, §6.4)")
    parser.add_argument("experiment", choices=["figure3", "figure5", "table1", "plot5", "plot3"])
    parser.add_argument("--scale", choices=["paper", "tenth"], default="paper")
    parser.add_argument("--schedulers", nargs="+", help="scheduler names (default: the experiment's)")
    parser.add_argument("--alphas", nargs="+", type=float, default=[0.9, 0.6, 0.4], help="Table 1's alpha values")
    parser.add_argument("--tau", type=float, default=None, help="Adaptive's tau (s); default 2 (Figure 5), 1 (Table 1)")
    parser.add_argument("--resolution", type=int, default=None, help="Figure 3: extra-slot step (default 1%% of the slots)")
    parser.add_argument("--start", type=int, default=None,
                        help="Figure 3: first probe (extra slots), galloping from it (default: 0, doubling)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="append the JSON lines to this file")
    parser.add_argument("--inputs", nargs="+", default=[], help="plot5/plot3: JSON-lines files to draw")
    parser.add_argument("--plot", help="plot5/plot3: the PNG to write")
    args = parser.parse_args(argv)
    out = open(args.out, "a") if args.out else None  # noqa: SIM115 - closed below
    try:
        if args.experiment == "figure3":
            base = figure3_scenario(args.scale)
            for name in args.schedulers or ["parsync-random", "samesyn-random", "statesync-random"]:
                cpu, wall = time.process_time(), time.perf_counter()
                probes: list[list[Any]] = []

                def probe(x: int, ok: bool, probes: list[list[Any]] = probes, name: str = name) -> None:
                    probes.append([x, ok])
                    print(f"{name}: {x} extra slots {'finish' if ok else 'do not finish'} in time "
                          f"({time.process_time():.0f} CPU s so far)", file=sys.stderr, flush=True)

                extra = min_extra_slots(base, name, args.seed, resolution=args.resolution,
                                        start=args.start, on_probe=probe)
                _emit(out, {"experiment": "figure3", "scale": args.scale, "scheduler": name, "seed": args.seed,
                            "extra_slots": extra, "start": args.start, "probes": probes,
                            "cpu_s": round(time.process_time() - cpu, 1),
                            "wall_s": round(time.perf_counter() - wall, 1),
                            "load_avg_1min": round(os.getloadavg()[0], 1)})
        elif args.experiment == "figure5":
            for name in args.schedulers or FIGURE5_SCHEDULERS:
                tau = args.tau if args.tau is not None else 2.0
                result, timing = _timed(figure5_scenario(args.scale, tau_s=tau), name, args.seed)
                _emit(out, {"experiment": "figure5", "scale": args.scale, "scheduler": name,
                            "tau_s": tau, **timing, "metrics": result.to_dict()["metrics"],
                            "phase": result.to_dict()["groups"]["phase"],
                            "series": {k: result.to_dict()["series"][k]
                                       for k in ("time", "delay_mean", "quality", "throughput", "backlog")}})
        elif args.experiment == "table1":
            tau = args.tau if args.tau is not None else 1.0
            names = args.schedulers or ["parsync-latency-first", "parsync-adaptive", "parsync-quality-first"]
            for alpha in args.alphas:
                for name in names:
                    sc = figure5_scenario(args.scale, tau_s=tau, alpha=alpha)
                    result, timing = _timed(sc, name, args.seed)
                    m = result.metrics
                    _emit(out, {"experiment": "table1", "scale": args.scale, "alpha": alpha,
                                "scheduler": name, "tau_s": tau, **timing,
                                "stet_s": m["stet_mean_s"], "jsd_s": m["jsd_mean_s"],
                                "jct_s": m["jct_mean_s"], "quality": m["quality"],
                                "delay_mean_s": m["delay_mean_s"], "finished": m["finished"]})
        elif args.experiment == "plot5":
            from fleetplan.plotting.parsync import plot_compare

            runs: dict[str, SimResult] = {}
            for path in args.inputs:
                with open(path) as f:
                    for line in f:
                        row = json.loads(line)
                        if row.get("experiment") != "figure5":
                            continue
                        series = {k: np.array([np.nan if v is None else v for v in vs], dtype=float)
                                  for k, vs in row["series"].items()}
                        label = row["scheduler"] + (f" (tau {row['tau_s']:g} s)" if "adaptive" in row["scheduler"] else "")
                        runs[label] = SimResult(simulator="parsync", scheduler=row["scheduler"],
                                                seed=args.seed, series=series)
            plot_compare(runs, args.plot, phases=len(FIVE_PHASES),
                         duration_s=figure5_scenario(args.scale).duration_s,
                         title=f"Figure 5 at {'the paper' if args.scale == 'paper' else '1/10'}'s scale (seed {args.seed})")
        else:
            from fleetplan.plotting.parsync import plot_extra_slots

            rows = []
            for path in args.inputs:
                with open(path) as f:
                    rows += [r for r in map(json.loads, f) if r.get("experiment") == "figure3"]
            base = figure3_scenario(args.scale)
            seeds = sorted({r.setdefault("seed", args.seed) for r in rows})
            for r in rows:
                r["N"] = base.schedulers
            plot_extra_slots(rows, args.plot, x="seed" if len(seeds) > 1 else "N",
                             title=f"Figure 3 at {'the paper' if args.scale == 'paper' else '1/10'}'s scale: fewest "
                                   f"extra slots\n({base.slots:,} slots, {base.rate:,.0f} tasks/s, N = P = "
                                   f"{base.schedulers}, {base.duration_s:g} s, seed{'s' * (len(seeds) > 1)} "
                                   f"{', '.join(map(str, seeds))})")
    finally:
        if out is not None:
            out.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
