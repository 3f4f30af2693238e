"""Tetris past one day (MAST §3.4, §5.6): the hill climb run day after day, each
day's plan becoming the next day's current placement, with the same daily move quota in bytes.

From V0 on the generated 20-region, 10^4-table instances one day's climb uses the whole quota;
this script shows where the high-priority GPU demand/supply ratio goes when the climb may keep
moving. For each seed and day it records the judge's metrics of the day's plan (max and std of
high-priority demand/supply across regions, training at home, bytes moved, objective) and stops
a seed when a day moves nothing or ``--days`` is reached. Rows are written to
``OUT/days.csv`` as each day finishes; the figure is ``OUT/tetris_days.png``.

    nice -n 10 .venv/bin/python benchmarks/scripts/tetris_days.py --seeds 0,1,2 --days 20 --out benchmarks/tetris-days

``--solver lns --time-limit 20`` runs the neighbourhood search instead, 20 s a day (the climb
first, then neighbourhoods re-optimised exactly); the figure's title names the solver.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from rows import write_rows

import fleetplan
from fleetplan.instances.outputs import save_figure

FIELDS = ("seed", "day", "objective", "hp_demand_supply_max", "hp_demand_supply_std", "hp_demand_supply_overall",
          "hp_demand_supply_max_per_type", "home_training_rate", "bytes_moved", "move_quota_bytes", "tables_moved",
          "cpu_s", "loadavg_1min")
PAPER = {"V0": (2.63, 0.76), "V1": (0.98, 0.30)}


def next_day(instance, plan):
    """The instance whose current placement (``tables.home``) is ``plan``'s."""
    data = instance.model_dump()
    region_of = dict(zip(plan.home.table, plan.home.region, strict=True))
    data["tables"]["home"] = [region_of[t] for t in data["tables"]["id"]]
    return type(instance).model_validate(data)


def run_seed(seed: int, days: int, params: dict, rows: list[dict], out: Path, solver: str = "hill-climb",
             time_limit: float | None = None) -> None:
    instance = fleetplan.generate("placement", params, seed=seed)
    v0 = fleetplan.evaluate(instance, fleetplan.solve(instance, "keep").plan).metrics
    rows.append({"seed": seed, "day": 0, "objective": fleetplan.evaluate(
        instance, fleetplan.solve(instance, "keep").plan).objective, **{k: v0.get(k, "") for k in FIELDS[3:11]},
        "bytes_moved": 0.0, "tables_moved": 0, "cpu_s": 0.0, "loadavg_1min": round(os.getloadavg()[0], 2)})
    for day in range(1, days + 1):
        cpu = time.process_time()
        result = fleetplan.solve(instance, solver, replicas=False, seed=seed, time_limit=time_limit)
        cpu = time.process_time() - cpu
        m = result.evaluation.metrics
        rows.append({"seed": seed, "day": day, "objective": result.objective,
                     **{k: m.get(k, "") for k in FIELDS[3:11]}, "cpu_s": round(cpu, 2),
                     "loadavg_1min": round(os.getloadavg()[0], 2)})
        write_rows(out / "days.csv", rows, FIELDS)
        print(f"seed {seed} day {day:2d}: max {m['hp_demand_supply_max']:.3f} std {m['hp_demand_supply_std']:.3f} "
              f"moved {m['bytes_moved'] / m['move_quota_bytes']:.0%} of the quota ({int(m['tables_moved'])} tables), "
              f"objective {result.objective:.4f}, {cpu:.1f} s CPU", flush=True)
        if m["tables_moved"] == 0:
            break
        instance = next_day(instance, result.plan)



def plot(rows: list[dict], path: Path, solver: str = "hill-climb") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    for seed in sorted({int(r["seed"]) for r in rows}):
        mine = sorted((r for r in rows if int(r["seed"]) == seed), key=lambda r: int(r["day"]))
        day = np.array([int(r["day"]) for r in mine])
        for ax, key in zip(axes[:2], ("hp_demand_supply_max", "hp_demand_supply_std"), strict=True):
            ax.plot(day, [float(r[key]) for r in mine], marker="o", ms=3, label=f"seed {seed}")
        moved = [float(r["bytes_moved"]) / float(r["move_quota_bytes"]) for r in mine[1:]]
        axes[2].plot(day[1:], moved, marker="o", ms=3, label=f"seed {seed}")
    for ax, (title, index) in zip(axes[:2], (("max high-priority GPU demand/supply", 0),
                                             ("std across regions", 1)), strict=True):
        ax.axhline(PAPER["V1"][index], color="k", ls="--", lw=0.8, label=f"paper V1 ({PAPER['V1'][index]})")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("day (0 = V0, today's placement)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].axhline(1.0, color="grey", lw=0.8)
    axes[2].set_title("bytes moved / daily quota", fontsize=10)
    axes[2].set_xlabel("day")
    axes[2].grid(alpha=0.3)
    axes[2].legend(fontsize=8)
    name = "hill climb" if solver == "hill-climb" else f"`{solver}`"
    fig.suptitle(f"Tetris {name} day after day (20 regions, 10^4 tables and jobs; same daily quota)", fontsize=11)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--days", type=int, default=20)
    parser.add_argument("--regions", type=int, default=20)
    parser.add_argument("--tables", type=int, default=10000)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/tetris-days"))
    parser.add_argument("--solver", default="hill-climb", help="a placement solver (default: hill-climb)")
    parser.add_argument("--time-limit", type=float, default=None, help="seconds a day (default: none)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    params = {"regions": args.regions, "tables": args.tables, "jobs": args.jobs}
    rows: list[dict] = []
    for seed in (int(s) for s in args.seeds.split(",")):
        run_seed(seed, args.days, params, rows, args.out, args.solver, args.time_limit)
    plot(rows, args.out / "tetris_days.png", args.solver)


if __name__ == "__main__":
    main()
