"""What ignoring heterogeneity costs in one LP snapshot (Gavel §4.1's baselines): for each
policy, the aware plan's objective against the agnostic plan's, both judged by the aware
objective (the ratio is aware / agnostic for maximized objectives, agnostic / aware for makespan).

    python benchmarks/scripts/agnostic_snapshot.py [--jobs 256] [--seed 0]

Prints a Markdown table: the generated instance as is, with half of each type's workers on
separate servers (`unconsolidated_fraction` 0.5) under the `runnable` baseline, and under Gavel's
`gavel` baseline. The agnostic plans spread their ties (fleetplan's default `ties: spread`).
"""

from __future__ import annotations

import argparse

import fleetplan

POLICIES = (("LAS", "max-min-fairness"), ("FTF", "finish-time-fairness"), ("makespan", "min-makespan"),
            ("max throughput", "max-throughput"))


def ratio(instance, solver: str, baseline: str) -> float:
    aware = fleetplan.solve(instance, solver)
    agnostic = fleetplan.solve(instance, f"{solver}-agnostic", baseline=baseline)
    judged = fleetplan.evaluate(instance, agnostic.plan.model_copy(update={"policy": aware.plan.policy}))
    if aware.evaluation.sense == "min":
        return judged.objective / aware.evaluation.objective
    return aware.evaluation.objective / judged.objective


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    plain = fleetplan.generate("allocation", {"jobs": args.jobs}, seed=args.seed)
    split = fleetplan.generate("allocation", {"jobs": args.jobs, "unconsolidated_fraction": 0.5}, seed=args.seed)
    rows = [("no zero throughputs (both baselines equal)", plain, "runnable"),
            ("`unconsolidated_fraction` 0.5, `runnable`", split, "runnable"),
            ("same, `gavel`", split, "gavel")]
    print("| | " + " | ".join(name for name, _ in POLICIES) + " |")
    print("|---|" + "---:|" * len(POLICIES))
    for label, instance, baseline in rows:
        cells = [f"{ratio(instance, solver, baseline):.3f}x" for _, solver in POLICIES]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
