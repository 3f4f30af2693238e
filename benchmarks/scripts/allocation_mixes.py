"""Every allocation policy on adversarial mixes against its plain twin: the ratio table.

    .venv/bin/python -m fleetplan bench allocation-mixes -o DIR      # the suite (all policies)
    .venv/bin/python benchmarks/scripts/allocation_mixes.py report DIR [--limit 5]
    .venv/bin/python benchmarks/scripts/allocation_mixes.py cells --policy water-filling \
        --mix "priorities 50% at 8" [--repeats 3]                         # a few cells, in-process

The suite (fleetplan/benchmarks/suites/allocation-mixes.yaml) solves each policy on the plain
instance (distinct single-GPU jobs, every type usable, no priorities, no SLO) and on the same
instance with one thing added. This prints, per policy and mix, the solve's CPU seconds (the
cell's ``stats.cpu_s``: arrays, solve, plan and judge) divided by the plain twin's, marks every
ratio above ``--limit`` and every cell without a plan, and ends with the worst ratio per mix.

``cells`` solves the named policies on the suite's plain instance and one mix, ``--repeats``
times each in this process (after one warm-up solve), and prints the median CPU seconds of
each (the suite's ``cpu_s``: ``fleetplan.solve`` with its judge) and their ratio: a figure for a
cell one change touches, steadier on a shared machine than the suite's single run.

Nothing here is imported by fleetplan.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MIXES = {"plain": "plain", "priorities": "priorities", "scale-factors": "scale factors 1-8",
         "slo-rows": "SLO rows (50%)", "unusable-types": "unusable types (30%)", "huge-job": "one huge job"}


def mix_name(row: dict) -> str:
    params = json.loads(row["params"])
    name = MIXES.get(row["group"], row["group"])
    if row["group"] == "priorities":
        name += f" {100 * params['priority_share']:g}% at {params['priority_weight']:g}"
    return name


def report(folder: Path, limit: float) -> int:
    from fleetplan.runs.results import read_results, row_failed

    rows = read_results(folder / "results.csv")
    cpu: dict[tuple[str, str], float] = {}
    failed: dict[tuple[str, str], str] = {}
    for row in rows:
        key = (row["label"], mix_name(row))
        stats = json.loads(row["stats"] or "{}")
        if row_failed(row) or "cpu_s" not in stats:
            failed[key] = row["status"]
        else:
            cpu[key] = float(stats["cpu_s"])
    policies = sorted({label for label, _ in [*cpu, *failed]})
    mixes = [name for name in dict.fromkeys(mix_name(row) for row in rows) if name != "plain"]
    print(f"| policy | plain (CPU s) | {' | '.join(mixes)} |")
    print(f"|---|---:|{'---:|' * len(mixes)}")
    worst: dict[str, float] = {}
    over = 0
    for policy in policies:
        twin = cpu.get((policy, "plain"))
        cells = []
        for name in mixes:
            if (policy, name) in failed:
                cells.append(f"**{failed[(policy, name)]}**")
                over += 1
                continue
            value = cpu.get((policy, name))
            if value is None or twin is None:
                cells.append("-")
                continue
            ratio = value / max(twin, 1e-9)
            worst[name] = max(worst.get(name, 0.0), ratio)
            flagged = ratio > limit
            over += flagged
            cells.append(f"**{ratio:.1f}x**" if flagged else f"{ratio:.1f}x")
        shown = "-" if twin is None else f"{twin:.3f}"
        print(f"| {policy} | {shown} | {' | '.join(cells)} |")
    print()
    print("worst ratio per mix: " + ", ".join(f"{name} {ratio:.1f}x" for name, ratio in worst.items()))
    print(f"cells above {limit:g}x or without a plan: {over}")
    return 0


def cells(policies: list[str], mix: str, repeats: int) -> int:
    import statistics
    import time

    import fleetplan
    from fleetplan.benchmarks.suite import expand_cells, load_suite

    def name_of(cell) -> str:
        return mix_name({"group": cell.group, "params": json.dumps(cell.params)})

    chosen = [cell for cell in expand_cells(load_suite("allocation-mixes"))
              if cell.label in policies and name_of(cell) in ("plain", mix)]
    if not any(name_of(cell) == mix for cell in chosen):
        names = sorted({name_of(cell) for cell in expand_cells(load_suite("allocation-mixes"))})
        print(f"error: --mix: no mix {mix!r} (one of: {', '.join(names)})", file=sys.stderr)
        return 2
    instances: dict[str, object] = {}
    median: dict[tuple[str, str], float] = {}
    for cell in chosen:
        instance = instances.setdefault(cell.instance, fleetplan.generate(cell.kind, cell.params, seed=cell.seed))
        fleetplan.solve(instance, cell.solver, seed=cell.seed)  # imports and caches are not the cell's
        spent = []
        for _ in range(repeats):
            started = time.process_time()
            fleetplan.solve(instance, cell.solver, time_limit=cell.time_limit, seed=cell.seed)
            spent.append(time.process_time() - started)
        median[(cell.label, name_of(cell))] = statistics.median(spent)
        print(f"{cell.label} on {name_of(cell)}: CPU s {', '.join(f'{s:.3f}' for s in spent)}", flush=True)
    print()
    print(f"| policy | plain (CPU s, median of {repeats}) | {mix} (CPU s) | ratio |")
    print("|---|---:|---:|---:|")
    for policy in policies:
        twin, value = median.get((policy, "plain")), median.get((policy, mix))
        if twin is not None and value is not None:
            print(f"| {policy} | {twin:.3f} | {value:.3f} | {value / twin:.1f}x |")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("report", help="the ratio table of a finished (or partial) suite run")
    show.add_argument("folder", type=Path)
    show.add_argument("--limit", type=float, default=5.0)
    some = sub.add_parser("cells", help="median CPU seconds of a few policies on one mix and its plain twin")
    some.add_argument("--policy", action="append", required=True)
    some.add_argument("--mix", required=True, help='as the report names it, e.g. "priorities 50%% at 8"')
    some.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.command == "cells":
        if args.repeats < 1:
            print("error: --repeats must be at least 1", file=sys.stderr)
            return 2
        return cells(args.policy, args.mix, args.repeats)
    if not (args.folder / "results.csv").is_file():
        print(f"error: {args.folder}/results.csv not found (run the suite first)", file=sys.stderr)
        return 2
    return report(args.folder, args.limit)


if __name__ == "__main__":
    sys.exit(main())
