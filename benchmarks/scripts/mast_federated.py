"""MAST §5.6 against a federated scheduler modelled as the paper describes early binding, over many
seeds with confidence intervals, and which mechanism makes the difference.

Variants (each a scheduler plus scenario fields):

* ``mast`` — late binding: GMS order, an RMS auction over every region holding the data;
* ``federated-live`` — early binding at arrival to the region of lowest demand/supply (running +
  queued GPUs of the type, priority-blind), seen exactly; bound for good, preemption only inside
  that region, no migration;
* ``federated`` — the same with the dispatcher's view refreshed every 5 minutes (the default);
* ``federated-30`` — refreshed every 30 minutes;
* ``federated-daily`` — refreshed once a day: the view of the trace's start (a planning estimate);
* ``mast-nopreempt`` / ``federated-live-nopreempt`` — both without preemption, to see how much of
  the difference comes from where a high-priority workload can preempt.

Settings: ``default`` (load 1.2, quotas 80% of the fleet) and ``busy`` (load 1.4, quotas 95%).
Each finished cell is appended to ``OUT/results.csv`` at once (with CPU seconds and the load
average); a rerun skips finished cells. ``--report`` prints the table of means with 95% t
intervals over seeds and the paired differences against MAST.

    nice -n 10 .venv/bin/python benchmarks/scripts/mast_federated.py --seeds 1-20 --out benchmarks/mast/federated
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from rows import read_rows, write_rows

from fleetplan.instances.outputs import atomic_write_text
from fleetplan.sim.mast import run_mast

BASE = {"regions": 10, "machines_per_region": 800, "hours": 8.0}
SETTINGS = {"default": {}, "busy": {"load": 1.4, "quota_total": 0.95}}
VARIANTS = {
    "mast": ("mast", {}),
    "federated-live": ("federated", {"federated_refresh_minutes": 0.0}),
    "federated": ("federated", {"federated_refresh_minutes": 5.0}),
    "federated-30": ("federated", {"federated_refresh_minutes": 30.0}),
    "federated-daily": ("federated", {"federated_refresh_minutes": 1440.0}),
    "mast-nopreempt": ("mast", {"preemption": False}),
    "federated-live-nopreempt": ("federated", {"federated_refresh_minutes": 0.0, "preemption": False}),
}
METRICS = ("slo_violation_rate", "slo_violation_rate_high", "max_slo_violation_rate_over_time",
           "max_slo_violation_rate_high_over_time", "latency_p95_minutes", "gpu_allocation_rate", "preemptions")
FIELDS = ("setting", "variant", "seed", *METRICS, "workloads", "cpu_s", "wall_s", "loadavg_1min")




def run_cell(setting: str, variant: str, seed: int) -> dict:
    scheduler, fields = VARIANTS[variant]
    cpu, wall = time.process_time(), time.perf_counter()
    result, _ = run_mast({**BASE, **SETTINGS[setting], **fields}, scheduler, seed)
    m = result.metrics
    return {"setting": setting, "variant": variant, "seed": seed, **{k: m[k] for k in METRICS},
            "workloads": m["workloads"], "cpu_s": round(time.process_time() - cpu, 2),
            "wall_s": round(time.perf_counter() - wall, 2), "loadavg_1min": round(os.getloadavg()[0], 2)}


def interval(values: np.ndarray) -> tuple[float, float]:
    """Mean and the half-width of its 95% t interval."""
    from scipy import stats

    values = values[np.isfinite(values)]
    if len(values) < 2:
        return float(values.mean()) if len(values) else float("nan"), float("nan")
    half = stats.t.ppf(0.975, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return float(values.mean()), float(half)


def report(rows: list[dict[str, str]]) -> str:
    """Markdown: per setting and variant, mean ± 95% CI over seeds; and federated - MAST, paired."""
    lines = []
    for setting in SETTINGS:
        mine = [r for r in rows if r["setting"] == setting]
        if not mine:
            continue
        seeds = sorted({int(r["seed"]) for r in mine})
        lines.append(f"\n*{setting}* ({', '.join(f'{k}={v}' for k, v in SETTINGS[setting].items()) or 'load 1.2, quotas 80%'}; "
                     f"{len(seeds)} seeds), mean ± 95% interval over seeds:\n")
        lines.append("| variant | seeds | SLO violations, all | P0-2 | worst 30-min bucket, all | worst, P0-2 | "
                     "P95 latency (min) | preemptions | all: variant - mast, paired | P0-2: variant - mast |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        base = {int(r["seed"]): r for r in mine if r["variant"] == "mast"}
        base_np = {int(r["seed"]): r for r in mine if r["variant"] == "mast-nopreempt"}
        for variant in VARIANTS:
            vrows = [r for r in mine if r["variant"] == variant]
            if not vrows:
                continue

            def col(key: str, rows_=vrows) -> np.ndarray:
                return np.array([float(r[key]) for r in rows_])

            cells = []
            for key, scale, fmt in (("slo_violation_rate", 100, "{:.2f}% ± {:.2f}"),
                                    ("slo_violation_rate_high", 100, "{:.2f}% ± {:.2f}"),
                                    ("max_slo_violation_rate_over_time", 100, "{:.1f}% ± {:.1f}"),
                                    ("max_slo_violation_rate_high_over_time", 100, "{:.1f}% ± {:.1f}"),
                                    ("latency_p95_minutes", 1, "{:.1f} ± {:.1f}"),
                                    ("preemptions", 1, "{:.0f} ± {:.0f}")):
                mean, half = interval(col(key) * scale)
                cells.append(fmt.format(mean, half))
            reference = base_np if variant.endswith("nopreempt") else base
            paired = []
            for key in ("slo_violation_rate", "slo_violation_rate_high"):
                diffs = np.array([100 * (float(r[key]) - float(reference[int(r["seed"])][key])) for r in vrows
                                  if int(r["seed"]) in reference])
                if variant in ("mast", "mast-nopreempt") or len(diffs) == 0:
                    paired.append("")
                else:
                    mean, half = interval(diffs)
                    paired.append(f"{mean:+.2f} ± {half:.2f} pts")
            lines.append(f"| {variant} | {len(vrows)} | " + " | ".join(cells) + " | " + " | ".join(paired) + " |")
    return "\n".join(lines) + "\n"


def parse_seeds(text: str) -> list[int]:
    if "-" in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(s) for s in text.split(",")]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/mast/federated"))
    parser.add_argument("--seeds", default="1-20")
    parser.add_argument("--settings", default=",".join(SETTINGS))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--report", action="store_true", help="only print the table of what is finished")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "results.csv"
    rows = read_rows(results)
    if not args.report:
        done = {(r["setting"], r["variant"], int(r["seed"])) for r in rows}
        for seed in parse_seeds(args.seeds):
            for setting in args.settings.split(","):
                for variant in args.variants.split(","):
                    if (setting, variant, seed) in done:
                        continue
                    row = run_cell(setting, variant, seed)
                    rows.append(row)
                    write_rows(results, rows, FIELDS)
                    print(f"{setting:8s} {variant:26s} seed {seed:2d}: SLO {100 * row['slo_violation_rate']:.2f}% "
                          f"(P0-2 {100 * row['slo_violation_rate_high']:.2f}%), {row['cpu_s']:.1f} s CPU, "
                          f"load {row['loadavg_1min']}", flush=True)
    table = report(read_rows(results))
    atomic_write_text(args.out / "table.md", table)
    print(table)


if __name__ == "__main__":
    main()
