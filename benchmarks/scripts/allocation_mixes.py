"""Every allocation policy on adversarial mixes against its plain twin: the ratio table.

    .venv/bin/python -m fleetplan bench allocation-mixes -o DIR      # the suite (all policies)
    .venv/bin/python benchmarks/scripts/allocation_mixes.py report DIR [--limit 5]
    .venv/bin/python benchmarks/scripts/allocation_mixes.py cells --policy water-filling \
        --mix "priorities 50% at 8" [--repeats 3]                         # a few cells, in-process
    .venv/bin/python benchmarks/scripts/allocation_mixes.py profile --policy water-filling \
        --mix "priorities 50% at 8"                                       # where one cell's time goes

The suite (fleetplan/benchmarks/suites/allocation-mixes.yaml) solves each policy on the plain
instance (distinct single-GPU jobs, every type usable, no priorities, no SLO) and on the same
instance with one thing added. This prints, per policy and mix, the solve's CPU seconds (the
cell's ``stats.cpu_s``: arrays, solve, plan and judge) divided by the plain twin's, marks every
ratio above ``--limit`` and every cell without a plan, and ends with the worst ratio per mix.

``cells`` solves the named policies on the suite's plain instance and one mix, ``--repeats``
times each in this process (after one warm-up solve), and prints the median CPU seconds of
each (the suite's ``cpu_s``: ``fleetplan.solve`` with its judge) and their ratio: a figure for a
cell one change touches, steadier on a shared machine than the suite's single run.
``profile`` runs one such solve under cProfile (after a warm-up solve) and prints the seconds
of its parts: every HiGHS run (the solver's LPs, the decomposition's reduced LPs, the judge's
LP), the price decomposition's calls, the simulation of cap events, the judge.

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

    chosen = suite_cells(policies, mix)
    if chosen is None:
        return 2
    instances: dict[str, object] = {}
    median: dict[tuple[str, str], float] = {}
    for name, cell in chosen:
        if cell.instance not in instances:
            instances[cell.instance] = fleetplan.generate(cell.kind, cell.params, seed=cell.seed)
        instance = instances[cell.instance]
        fleetplan.solve(instance, cell.solver, seed=cell.seed)  # imports and caches are not the cell's
        spent = []
        for _ in range(repeats):
            started = time.process_time()
            fleetplan.solve(instance, cell.solver, time_limit=cell.time_limit, seed=cell.seed)
            spent.append(time.process_time() - started)
        median[(cell.label, name)] = statistics.median(spent)
        print(f"{cell.label} on {name}: CPU s {', '.join(f'{s:.3f}' for s in spent)}", flush=True)
    print()
    print(f"| policy | plain (CPU s, median of {repeats}) | {mix} (CPU s) | ratio |")
    print("|---|---:|---:|---:|")
    for policy in policies:
        twin, value = median.get((policy, "plain")), median.get((policy, mix))
        if twin is not None and value is not None:
            print(f"| {policy} | {twin:.3f} | {value:.3f} | {value / twin:.1f}x |")
    return 0


def suite_cells(policies: list[str], mix: str) -> list | None:
    """The suite's cells of ``policies`` on the plain instance and ``mix``; None (after a
    one-line error) when the suite has no such mix."""
    from fleetplan.benchmarks.suite import expand_cells, load_suite

    every = expand_cells(load_suite("allocation-mixes"))
    names = {id(cell): mix_name({"group": cell.group, "params": json.dumps(cell.params)}) for cell in every}
    if mix not in names.values():
        print(f"error: --mix: no mix {mix!r} (one of: {', '.join(sorted(set(names.values())))})", file=sys.stderr)
        return None
    unknown = sorted(set(policies) - {cell.label for cell in every})
    if unknown:
        print(f"error: --policy: not in the suite: {', '.join(unknown)}", file=sys.stderr)
        return None
    return [(names[id(cell)], cell) for cell in every
            if cell.label in policies and names[id(cell)] in ("plain", mix)]


def profile(policy: str, mix: str) -> int:
    import cProfile
    import pstats

    import fleetplan

    chosen = suite_cells([policy], mix)
    if chosen is None:
        return 2
    _, cell = next((name, cell) for name, cell in chosen if name == mix)
    instance = fleetplan.generate(cell.kind, cell.params, seed=cell.seed)
    fleetplan.solve(instance, cell.solver, seed=cell.seed)
    profiler = cProfile.Profile()
    profiler.enable()
    result = fleetplan.solve(instance, cell.solver, seed=cell.seed)
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    parts: dict[str, list[float]] = {}
    for (file, _, name), (_, calls, _, cumulative, _) in stats.items():
        key = ("HiGHS runs" if "highspy._core.run" in name
               else "price decomposition" if name == "max_min" and file.endswith("separable.py")
               else "simulating cap events" if name == "simulate_events"
               else "the judge (evaluate)" if name == "_judge" and file.endswith("base.py") else None)
        if key:
            parts.setdefault(key, [0, 0.0])
            parts[key][0] += calls
            parts[key][1] += cumulative
    total = max(cumulative for (_, _, _, cumulative, _) in stats.values())
    print(f"{policy} on {mix}: {total:.3f} s profiled; stats {json.dumps(result.stats)}")
    for key, (calls, seconds) in sorted(parts.items()):
        print(f"  {key}: {int(calls)} calls, {seconds:.3f} s")
    # Who asked HiGHS: the callers of fleetplan.solvers.highs.run.
    runner = next((value for (file, _, name), value in stats.items()
                   if name == "run" and file.endswith("solvers/highs.py")), None)
    if runner is not None:
        for (file, _, name), (_, calls, _, seconds) in sorted(runner[4].items(), key=lambda item: -item[1][3]):
            print(f"    HiGHS for {Path(file).stem}.{name}: {calls} calls, {seconds:.3f} s")
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
    one = sub.add_parser("profile", help="where one policy's solve on one mix spends its time (cProfile)")
    one.add_argument("--policy", required=True)
    one.add_argument("--mix", required=True)
    args = parser.parse_args()
    if args.command == "profile":
        return profile(args.policy, args.mix)
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
