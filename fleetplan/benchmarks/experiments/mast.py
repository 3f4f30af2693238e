"""MAST §5.6's experiment at configurable scale, and the simulator's own speed.

* ``compare`` — an 8-hour trace played to MAST and to the federated scheduler, several seeds:
  SLO violation rate of within-quota workloads per priority level, overall and at the worst
  time bucket; a markdown table, the JSON of every run and the plot of SLO violations over the
  day (seed-averaged) for both schedulers.
* ``speed`` — one run per scheduler of a large trace: wall and CPU seconds, workloads, events,
  the load average of the (shared) machine.

Run as ``python -m fleetplan.benchmarks.experiments.mast compare --seeds 1,2,3 --out DIR`` or
``... speed --regions 10 --machines 4000 --out DIR``; every other scenario field can be given
as ``--set FIELD=VALUE``. Runs are independent (scenario, scheduler, seed) cells.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from fleetplan.plotting.mast import plot_compare
from fleetplan.sim.engine import SimResult
from fleetplan.sim.mast import SIMULATOR, run_mast

SCHEDULERS = ("mast", "federated")


def _run(scenario: dict, scheduler: str, seed: int) -> tuple[SimResult, dict]:
    started, cpu = time.perf_counter(), time.process_time()
    result, state = run_mast(scenario, scheduler, seed)
    timing = {"wall_s": time.perf_counter() - started, "cpu_s": time.process_time() - cpu,
              "loadavg_1min": os.getloadavg()[0], "events": result.events, "gms_passes": state.passes}
    return result, timing


def _mean_series(results: list[SimResult]) -> SimResult:
    """Seed-averaged series (buckets without decided events are skipped per seed)."""
    first = results[0]
    series = {"time": first.series["time"]}
    for key in first.series:
        if key != "time":
            stack = np.vstack([np.asarray(r.series[key], dtype=float) for r in results])
            seen = np.isfinite(stack)
            total = np.where(seen, stack, 0.0).sum(axis=0)
            count = seen.sum(axis=0)
            series[key] = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return SimResult(first.simulator, first.scheduler, -1, series=series)


def compare(scenario: dict, seeds: list[int], out: Path) -> dict:
    """§5.6: MAST vs federated on SLO violations by priority over the trace."""
    out.mkdir(parents=True, exist_ok=True)
    SIMULATOR.scenario(scenario)  # fail early on a bad field
    rows: list[dict] = []
    per: dict[str, list[SimResult]] = {s: [] for s in SCHEDULERS}
    for seed in seeds:
        for scheduler in SCHEDULERS:
            result, timing = _run(scenario, scheduler, seed)
            per[scheduler].append(result)
            m = result.metrics
            levels = {p: g["slo_violation_rate"] for p, g in result.groups["priority"].items()}
            rows.append({"scheduler": scheduler, "seed": seed, **timing, "metrics": m,
                         "priority": result.groups["priority"], "series": result.to_dict()["series"]})
            print(f"{scheduler:9s} seed {seed}: {int(m['workloads'])} workloads, SLO violations "
                  f"{100 * m['slo_violation_rate']:.2f}% (P0-2 {100 * m['slo_violation_rate_high']:.2f}%, worst "
                  f"bucket {100 * m['max_slo_violation_rate_high_over_time']:.1f}%), by level "
                  + " ".join(f"{p}:{100 * v:.1f}" if v == v else f"{p}:-" for p, v in levels.items())
                  + f"; alloc {100 * m['gpu_allocation_rate']:.1f}%, preemptions {int(m['preemptions'])}, "
                  f"moves {int(m['data_moves'])}; {timing['wall_s']:.1f} s ({timing['cpu_s']:.1f} s CPU)", flush=True)
    start_hour = float(SIMULATOR.scenario(scenario).start_hour)
    plot_compare({s: _mean_series(per[s]) for s in SCHEDULERS}, out / "mast_vs_federated_slo.png",
                 start_hour=start_hour, title=f"SLO violations over the day, mean of seeds {seeds} (MAST §5.6)")
    table = markdown_table(rows, seeds)
    (out / "mast_vs_federated.md").write_text(table)
    summary = {"scenario": scenario, "seeds": seeds, "runs": rows}
    (out / "mast_vs_federated.json").write_text(json.dumps(summary, indent=1, default=float))
    print(table)
    return summary


def markdown_table(rows: list[dict], seeds: list[int]) -> str:
    """Mean over seeds of the SLO violation rate per level, overall, P0-2, worst bucket."""
    head = ("| scheduler | P0 | P1 | P2 | P3 | P4 | P5 | P6 | all | P0-2 | worst 30-min bucket, all | worst, "
            "P0-2 | P95 latency (min) | allocation | preemptions | data moves |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for scheduler in SCHEDULERS:
        mine = [r for r in rows if r["scheduler"] == scheduler]
        if not mine:
            continue

        def mean(values: list[float]) -> float:
            values = [v for v in values if v is not None and v == v]
            return float(np.mean(values)) if values else float("nan")

        def pct(v: float) -> str:
            return "-" if v != v else f"{100 * v:.1f}%"

        levels = [pct(mean([r["priority"][str(p)]["slo_violation_rate"] for r in mine])) for p in range(7)]
        m = [r["metrics"] for r in mine]
        lines.append(f"| {scheduler} | " + " | ".join(levels) + " | "
                     + " | ".join(pct(mean([x[k] for x in m])) for k in (
                         "slo_violation_rate", "slo_violation_rate_high", "max_slo_violation_rate_over_time",
                         "max_slo_violation_rate_high_over_time"))
                     + f" | {mean([x['latency_p95_minutes'] for x in m]):.1f} | "
                     + f"{pct(mean([x['gpu_allocation_rate'] for x in m]))} | "
                     + f"{mean([x['preemptions'] for x in m]):.0f} | {mean([x['data_moves'] for x in m]):.0f} |")
    return "\n".join(lines) + f"\n\nMean over seeds {', '.join(map(str, seeds))}.\n"


def speed(scenario: dict, seed: int, out: Path) -> dict:
    """The simulator's own speed on one (large) trace per scheduler."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for scheduler in SCHEDULERS:
        before = os.getloadavg()[0]
        result, timing = _run(scenario, scheduler, seed)
        m = result.metrics
        rows.append({"scheduler": scheduler, "seed": seed, "loadavg_before": before, **timing,
                     "workloads": m["workloads"], "initial_running": m["initial_running"],
                     "scheduling_events": m["scheduling_events"], "gpus": m["gpus"]})
        print(f"{scheduler:9s}: {int(m['workloads'])} workloads (+{int(m['initial_running'])} running at the start) "
              f"on {int(m['gpus'])} GPUs, {timing['events']} events, {timing['gms_passes']} GMS passes: "
              f"{timing['wall_s']:.1f} s wall, {timing['cpu_s']:.1f} s CPU, load average {before:.1f} -> "
              f"{timing['loadavg_1min']:.1f}", flush=True)
    (out / "mast_speed.json").write_text(json.dumps({"scenario": scenario, "runs": rows}, indent=1, default=float))
    return {"runs": rows}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", choices=("compare", "speed"))
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--regions", type=int, default=10)
    parser.add_argument("--machines", type=int, default=400, help="8-GPU machines per region")
    parser.add_argument("--load", type=float, default=None)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/reports/mast"))
    args = parser.parse_args(argv)
    scenario: dict = {"hours": args.hours, "regions": args.regions, "machines_per_region": args.machines}
    if args.load is not None:
        scenario["load"] = args.load
    for item in args.set:
        name, _, value = item.partition("=")
        scenario[name] = json.loads(value)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.experiment == "compare":
        compare(scenario, seeds, args.out)
    else:
        speed(scenario, seeds[0], args.out)


if __name__ == "__main__":
    main()
