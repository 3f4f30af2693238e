"""Headline figures read from the tables the experiment scripts write, as one JSON line
(``fleetplan bench headline`` reads it; benchmarks/headline.yaml).

    python benchmarks/scripts/headline_figures.py gavel73 DIR       # gavel_73.py --out DIR
    python benchmarks/scripts/headline_figures.py astraea DIR       # astraea_load.py --out DIR
    python benchmarks/scripts/headline_figures.py tetris-days DIR LNS_DIR   # tetris_days.py, climb and lns
    python benchmarks/scripts/headline_figures.py gpushare-grid DIR PAPER   # the gpushare grid's --out, --paper-results
    python benchmarks/scripts/headline_figures.py gpushare-optimum DIR      # gpushare --optimum --out DIR
    python benchmarks/scripts/headline_figures.py duals FILE        # planning_speed.py duals N lines
    python benchmarks/scripts/headline_figures.py parsync FILE      # parsync figure3 --out FILE lines
    python benchmarks/scripts/headline_figures.py time-limits FILE  # time_limits.py --jsonl FILE

* ``gavel73``: on the continuous-single LAS panel, agnostic over aware average steady-state JCT
  (the mean over seeds of each, then their ratio, as benchmarks/results/simulators.md's table),
  lowest and highest over the rates up to 6 jobs/h and over the rates above 6.
* ``astraea``: on the calibrated trace, Astraea's lead over Themis in sharing-loss jobs
  (Themis's fraction over Astraea's) at 0.75x and 1x: lowest and highest; and whether the order
  Astraea < Themis < YARN-CS holds at every load from 0.75x (exit status 1 if not: the row says it does).
* ``tetris-days``: the climb's seed 1, max and std of high-priority demand/supply on the day its
  max stops changing (by less than 0.0005 on every later day); the last day's max of seeds 0
  and 2 in the ``lns`` folder.

* ``gpushare-grid``: the largest distance, over the paper's six policies and the traces, between
  our mean allocation at the end of the arrivals and the paper's authors' own runs (points of the
  cluster's GPUs, ``gpushare.paper_runs``), FGD's own largest, and the grid's wall minutes (from
  the first run's start to the last run's end, by the runs' ``run.json`` records).
* ``gpushare-optimum``: over the seeds, the lowest and highest plan and bound (% of the GPUs),
  the largest gap (points) and the lowest and highest wall seconds of ``OUT/optimum.csv``.
* ``duals``: the lowest and highest ``added`` of ``planning_speed.py duals`` lines, in percent.
* ``parsync``: Figure 3's extra slots per scheme over the seeds: SameSyn's (``samesyn-random``)
  lowest and highest, DiffSyn's (``parsync-random``) highest; exit status 1 unless SameSyn needs
  more than DiffSyn on every seed (the row's claim).
* ``time-limits``: how far from its limit every ``simulate`` row ends (the largest distance
  between the median wall of a row's runs and its limit, either side), and the lowest and
  highest CPU of the allocation rows at 2 s.

Run on the committed tables (``benchmarks/gavel73``, ``benchmarks/astraea-load``,
``benchmarks/tetris-days`` and ``-lns``) it gives the figures RESULTS.md quotes.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from rows import read_rows


def gavel73(folder: Path) -> dict:
    means: dict[tuple[str, float], list[float]] = defaultdict(list)
    for row in read_rows(folder / "results.csv"):
        if row["panel"] == "single-las":
            means[(row["scheduler"], float(row["rate_per_hour"]))].append(float(row["avg_jct_steady_h"]))
    rates = sorted({rate for _, rate in means})
    ratio = {rate: statistics.mean(means[("gavel-agnostic", rate)]) / statistics.mean(means[("gavel", rate)])
             for rate in rates if ("gavel", rate) in means and ("gavel-agnostic", rate) in means}
    low = [value for rate, value in ratio.items() if rate <= 6]
    high = [value for rate, value in ratio.items() if rate > 6]
    if not low or not high:
        sys.exit(f"headline_figures.py: {folder}: the single-LAS panel needs rates up to 6 and above 6 jobs/h")
    return {"ratio_by_rate": {f"{rate:g}": round(value, 3) for rate, value in ratio.items()},
            "up_to_6": [min(low), max(low)], "above_6": [min(high), max(high)],
            "up_to_6_min": min(low), "up_to_6_max": max(low), "above_6_min": min(high), "above_6_max": max(high)}


def astraea(folder: Path) -> dict:
    loss = {(float(row["load"]), row["scheduler"]): float(row["sharing_loss_fraction"])
            for row in read_rows(folder / "runs.csv") if row["variant"] == "calibrated"}
    loads = sorted({load for load, _ in loss})
    lead = {load: loss[(load, "themis-ftf")] / loss[(load, "astraea")] for load in (0.75, 1.0)}
    ordered = all(loss[(load, "astraea")] < loss[(load, "themis-ftf")] < loss[(load, "yarn-cs")]
                  for load in loads if load >= 0.75)
    found = {"lead_by_load": {f"{load:g}": round(value, 3) for load, value in lead.items()},
             "lead_min": min(lead.values()), "lead_max": max(lead.values()), "order_holds_from_0.75x": ordered}
    if not ordered:
        print(json.dumps(found))
        sys.exit("headline_figures.py: the order Astraea < Themis < YARN-CS does not hold at every load from 0.75x")
    return found


def tetris_days(folder: Path, lns_folder: Path) -> dict:
    days: dict[int, list[dict[str, str]]] = defaultdict(list)
    for row in read_rows(folder / "days.csv"):
        days[int(row["seed"])].append(row)
    seed1 = sorted(days[1], key=lambda row: int(row["day"]))
    maxima = [float(row["hp_demand_supply_max"]) for row in seed1]
    settled = next(day for day in range(len(seed1))
                   if all(abs(later - maxima[day]) < 0.0005 for later in maxima[day:]))
    last = {}
    for row in read_rows(lns_folder / "days.csv"):
        seed = int(row["seed"])
        if seed not in last or int(row["day"]) > int(last[seed]["day"]):
            last[seed] = row
    return {"climb_seed1_settled_day": int(seed1[settled]["day"]),
            "climb_seed1_max": float(seed1[settled]["hp_demand_supply_max"]),
            "climb_seed1_std": float(seed1[settled]["hp_demand_supply_std"]),
            "lns_last_day": int(last[0]["day"]),
            "lns_seed0_max": float(last[0]["hp_demand_supply_max"]),
            "lns_seed2_max": float(last[2]["hp_demand_supply_max"])}


def gpushare_grid(folder: Path, paper_folder: Path) -> dict:
    from fleetplan.benchmarks.experiments.gpushare import paper_runs

    allocated: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in read_rows(folder / "summary.csv"):
        allocated[(row["trace"], row["policy"])].append(float(row["allocated_gpu_pct"]))
    paper = paper_runs(paper_folder, "130", "allocated")
    distance = {key: abs(statistics.mean(values) - statistics.mean(paper[key]))
                for key, values in allocated.items() if paper.get(key)}
    if not distance:
        sys.exit(f"headline_figures.py: no (trace, policy) of {folder} has the paper's runs in {paper_folder}")
    spans = []
    for record in folder.glob("*/*/*/run.json"):
        wall = float(json.loads(record.read_text()).get("wall_s") or 0.0)
        spans.append((record.stat().st_mtime - wall, record.stat().st_mtime))
    return {"largest_points": max(distance.values()),
            "fgd_largest_points": max(value for (_, policy), value in distance.items() if policy == "fgd"),
            "traces": len({trace for trace, _ in distance}), "runs": len(spans),
            "grid_minutes": (max(end for _, end in spans) - min(start for start, _ in spans)) / 60 if spans else None}


def gpushare_optimum(folder: Path) -> dict:
    rows = read_rows(folder / "optimum.csv")
    plan = [float(row["plan_gpu_pct"]) for row in rows]
    bound = [float(row["bound_gpu_pct"]) for row in rows]
    wall = [float(row["wall_s"]) for row in rows]
    return {"seeds": len(rows), "plan_min": min(plan), "plan_max": max(plan), "bound_min": min(bound),
            "bound_max": max(bound), "gap_points_max": max(float(row["gap_points"]) for row in rows),
            "wall_s_min": min(wall), "wall_s_max": max(wall)}


def duals(path: Path) -> dict:
    added = [100 * float(json.loads(line)["added"]) for line in path.read_text().splitlines()
             if line.startswith("{") and '"what": "duals"' in line]
    if not added:
        sys.exit(f"headline_figures.py: no `planning_speed.py duals` line in {path}")
    return {"added_pct_min": min(added), "added_pct_max": max(added), "solves": len(added)}


def parsync(path: Path) -> dict:
    slots: dict[str, dict[int, float]] = defaultdict(dict)
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("experiment") == "figure3":
            slots[row["scheduler"]][int(row["seed"])] = float(row["extra_slots"])
    same, diff = slots["samesyn-random"], slots["parsync-random"]
    seeds = sorted(set(same) & set(diff))
    if not seeds:
        sys.exit(f"headline_figures.py: {path}: no seed with both samesyn-random and parsync-random")
    found = {"seeds": len(seeds), "samesyn_min": min(same[k] for k in seeds), "samesyn_max": max(same[k] for k in seeds),
             "diffsyn_max": max(diff[k] for k in seeds)}
    if not all(same[k] > diff[k] for k in seeds):
        print(json.dumps(found))
        sys.exit("headline_figures.py: SameSyn does not need more extra slots than DiffSyn on every seed")
    return found


def time_limits(path: Path) -> dict:
    runs: dict[tuple[str, str, float], list[dict]] = defaultdict(list)
    for line in path.read_text().splitlines():
        row = json.loads(line)
        runs[(row["kind"], row["solver"], float(row["limit"]))].append(row)
    off = [abs(statistics.median(row["wall"] for row in rows) - limit)
           for (kind, _, limit), rows in runs.items() if kind == "simulate"]
    cpu = [statistics.median(row["cpu"] for row in rows)
           for (kind, _, limit), rows in runs.items() if kind == "allocation" and limit == 2]
    if not off or not cpu:
        sys.exit(f"headline_figures.py: {path}: needs simulate rows and allocation rows at 2 s")
    return {"simulate_within_s": max(off), "allocation_2s_cpu_min": min(cpu), "allocation_2s_cpu_max": max(cpu)}


def main() -> None:
    what, *folders = sys.argv[1:] or ["help"]
    runs = {"gavel73": (gavel73, 1), "astraea": (astraea, 1), "tetris-days": (tetris_days, 2),
            "gpushare-grid": (gpushare_grid, 2), "gpushare-optimum": (gpushare_optimum, 1), "duals": (duals, 1),
            "parsync": (parsync, 1), "time-limits": (time_limits, 1)}
    if what not in runs or len(folders) != runs[what][1]:
        sys.exit(__doc__.split("\n\n")[1])
    print(json.dumps(runs[what][0](*(Path(folder) for folder in folders))))


if __name__ == "__main__":
    main()
