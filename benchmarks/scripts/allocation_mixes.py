"""Every allocation policy on adversarial mixes against its plain twin: the ratio table.

    .venv/bin/python -m fleetplan bench allocation-mixes -o DIR      # the suite (all policies)
    .venv/bin/python benchmarks/scripts/allocation_mixes.py report DIR [--limit 5]

The suite (fleetplan/benchmarks/suites/allocation-mixes.yaml) solves each policy on the plain
instance (distinct single-GPU jobs, every type usable, no priorities, no SLO) and on the same
instance with one thing added. This prints, per policy and mix, the solve's CPU seconds (the
cell's ``stats.cpu_s``: arrays, solve, plan and judge) divided by the plain twin's, marks every
ratio above ``--limit`` and every cell without a plan, and ends with the worst ratio per mix.

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("report", help="the ratio table of a finished (or partial) suite run")
    show.add_argument("folder", type=Path)
    show.add_argument("--limit", type=float, default=5.0)
    args = parser.parse_args()
    if not (args.folder / "results.csv").is_file():
        print(f"error: {args.folder}/results.csv not found (run the suite first)", file=sys.stderr)
        return 2
    return report(args.folder, args.limit)


if __name__ == "__main__":
    sys.exit(main())
