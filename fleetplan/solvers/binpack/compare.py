"""What the greedy RMS gives up (MAST §4.3), and what one-at-a-time placement gives up (§4.1,
Table 1), measured on seeded small regions against the exact models.

``greedy_gap`` solves single-workload regions with ``rms-greedy``, ``cpsat`` and ``mip-highs``,
and counts how often the greedy's plan equals the exact optimum in the judge's lexicographic
order (:func:`~fleetplan.instances.binpack.evaluate.score_key`), where it loses when it does not
(a workload left waiting, more preempted jobs or higher priorities, younger jobs, more machines
or racks), and whether the two exact back-ends agree. ``batch_loss`` solves regions with several
pending workloads one at a time (greedy and exact) and jointly (``batch-cpsat``).

Run it::

    .venv/bin/python -m fleetplan.solvers.binpack.compare --regions 200 --batch-regions 50
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from fleetplan.instances import generate
from fleetplan.instances.binpack import PRIORITY_LEVELS
from fleetplan.instances.binpack.evaluate import score_key
from fleetplan.solvers.base import solve

# Nearly full (MAST runs at ~98% GPU allocation, §5.2) and a pending priority of 2, so that most
# placements need preemption — the case where the greedy's choices matter.
SMALL_REGION = {"clusters": 3, "machines": 12, "workloads": 1, "max_jobs_per_workload": 2, "gpu_scale": 0.5,
                "load": 0.98, "pending_priority": 2}
BATCH_REGION = {"clusters": 2, "machines": 10, "workloads": 4, "max_jobs_per_workload": 1, "gpu_scale": 0.25,
                "load": 0.9, "pending_priority": 2}
YOUTH_TOLERANCE = 1e-6


def where_worse(greedy: tuple, exact: tuple) -> str:
    """The first component of the score key in which the greedy is worse ('equal' if none)."""
    names = ["waiting", *(f"preempted_p{p}" for p in range(PRIORITY_LEVELS)), "youth", "machines", "racks"]
    for name, g, e in zip(names, greedy, exact, strict=True):
        tolerance = YOUTH_TOLERANCE if name == "youth" else 0.0
        if g > e + tolerance:
            return name
        if g < e - tolerance:
            return f"better:{name}"  # cannot happen against a proven optimum
    return "equal"


def greedy_gap(regions: int, params: dict[str, Any] | None = None, time_limit: float = 30.0,
               first_seed: int = 0) -> dict[str, Any]:
    """Greedy against the exact single-workload optimum on ``regions`` seeded regions."""
    params = {**SMALL_REGION, **(params or {})}
    outcome: Counter[str] = Counter()
    agree = disagree = 0
    extra = Counter()
    by_case: Counter[str] = Counter()
    cases = []
    for seed in range(first_seed, first_seed + regions):
        instance = generate("binpack", params, seed=seed)
        greedy = solve(instance, "rms-greedy")
        exact = solve(instance, "cpsat", time_limit=time_limit)
        mip = solve(instance, "mip-highs", time_limit=time_limit)
        for result in (greedy, exact, mip):
            assert result.evaluation is not None and not result.evaluation.violations, (seed, result.solver)
        if exact.status not in ("optimal", "infeasible") or mip.status not in ("optimal", "infeasible"):
            outcome["exact not proven"] += 1
            continue
        key_g, key_e, key_m = (score_key(r.evaluation) for r in (greedy, exact, mip))
        if where_worse(key_m, key_e) == "equal" and where_worse(key_e, key_m) == "equal":
            agree += 1
        else:
            disagree += 1
        verdict = where_worse(key_g, key_e)
        outcome[verdict] += 1
        case = ("no plan" if exact.status == "infeasible" else "needs preemption"
                if exact.evaluation.metrics["preempted_jobs"] else "fits without preemption")
        by_case[f"{case}:{'equal' if verdict == 'equal' else 'worse'}"] += 1
        if verdict != "equal":
            mg, me = greedy.evaluation.metrics, exact.evaluation.metrics
            for name in ("preempted_jobs", "machines_used", "racks_used", "unplaced_workloads"):
                extra[name] += mg[name] - me[name]
            cases.append({"seed": seed, "worse_in": verdict, "greedy": list(key_g), "exact": list(key_e),
                          "extra_preempted": mg["preempted_jobs"] - me["preempted_jobs"],
                          "extra_racks": mg["racks_used"] - me["racks_used"]})
    compared = sum(outcome.values()) - outcome["exact not proven"]
    return {"regions": regions, "params": params, "compared": compared, "greedy_equal": outcome["equal"],
            "greedy_equal_rate": outcome["equal"] / compared if compared else None,
            "worse_in": {k: v for k, v in sorted(outcome.items()) if k not in ("equal", "exact not proven")},
            "exact_not_proven": outcome["exact not proven"], "cpsat_highs_agree": agree,
            "cpsat_highs_disagree": disagree, "greedy_minus_exact_totals": dict(extra),
            "by_case": dict(sorted(by_case.items())), "cases": cases}


def batch_loss(regions: int, params: dict[str, Any] | None = None, time_limit: float = 30.0,
               first_seed: int = 0) -> dict[str, Any]:
    """Workloads placed and preemptions: greedy and exact one at a time against the batch model."""
    params = {**BATCH_REGION, **(params or {})}
    totals: Counter[str] = Counter()
    better = Counter()
    per_region = []
    for seed in range(first_seed, first_seed + regions):
        instance = generate("binpack", params, seed=seed)
        runs = {name: solve(instance, name, time_limit=time_limit) for name in ("rms-greedy", "cpsat", "batch-cpsat")}
        for name, result in runs.items():
            assert result.evaluation is not None and not result.evaluation.violations, (seed, name)
            totals[f"{name}:placed"] += int(result.evaluation.metrics["placed_workloads"])
            totals[f"{name}:preempted"] += int(result.evaluation.metrics["preempted_jobs"])
            totals[f"{name}:{result.status}"] += 1
        per_region.append({"seed": seed, **{f"{name}:{what}": runs[name].evaluation.metrics[f"{what}"]
                                            for name in runs for what in ("placed_workloads", "preempted_jobs")}})
        batch_key = score_key(runs["batch-cpsat"].evaluation)
        for name in ("rms-greedy", "cpsat"):
            verdict = where_worse(score_key(runs[name].evaluation), batch_key)
            better[f"{name}:{'equal' if verdict == 'equal' else 'batch better in ' + verdict}"] += 1
    return {"regions": regions, "params": params, "workloads": regions * params["workloads"],
            "totals": dict(sorted(totals.items())), "against_batch": dict(sorted(better.items())),
            "per_region": per_region}


WORSE_LABELS = {"waiting": "a workload left waiting", "youth": "younger jobs preempted",
                "machines": "more machines", "racks": "more racks",
                **{f"preempted_p{p}": f"more priority-{p} jobs preempted" for p in range(PRIORITY_LEVELS)}}


def plot_report(report: dict[str, Any], path: str) -> None:
    """Draw the greedy's gap to the exact optimum and the batch model's gain over one-at-a-time
    placement (MAST §4.3, Table 1) from a :func:`main` report, as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from fleetplan.instances.outputs import atomic_write

    gap = report["greedy_gap"]
    batch = report.get("batch_loss")
    figure = Figure(figsize=(14, 10.5) if batch else (14, 5.2), layout="constrained")
    axes = figure.subplots(2 if batch else 1, 2, squeeze=False)
    # (a) How often the greedy equals the optimum, by kind of region, and where it loses.
    ax = axes[0, 0]
    cases = ("no plan", "fits without preemption", "needs preemption")
    equal = [gap["by_case"].get(f"{c}:equal", 0) for c in cases]
    worse = [gap["by_case"].get(f"{c}:worse", 0) for c in cases]
    rows = [f"{c}\n({e + w} regions)" for c, e, w in zip(cases, equal, worse, strict=True)]
    ax.barh(rows, equal, color="tab:green", label="greedy equals the exact optimum")
    ax.barh(rows, worse, left=equal, color="tab:red", label="greedy worse")
    for y, (e, w) in enumerate(zip(equal, worse, strict=True)):
        text = (f"{e} equal" + (f", {w} worse" if w else "")) if e + w else "none"
        ax.text(e + w + 1, y, text, va="center", fontsize=10)
    ax.invert_yaxis()
    ax.set_xlim(0, max(e + w for e, w in zip(equal, worse, strict=True)) * 1.45 + 1)
    ax.set_xlabel("regions")
    ax.set_title(f"(a) rms-greedy against the CP-SAT optimum: equal in {gap['greedy_equal']} of "
                 f"{gap['compared']} regions", fontsize=11)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    # (b) Where the greedy is worse: by how much (extra jobs preempted, extra racks).
    ax = axes[0, 1]
    lost = gap["cases"]
    if lost:
        reasons = Counter(WORSE_LABELS.get(c["worse_in"], c["worse_in"]) for c in lost)
        values = sorted({c["extra_preempted"] for c in lost} | {c["extra_racks"] for c in lost})
        xs = list(range(int(min(values)), int(max(values)) + 1))
        width = 0.4
        for shift, key, label, color in ((-width / 2, "extra_preempted", "jobs preempted", "tab:red"),
                                         (width / 2, "extra_racks", "racks used", "tab:blue")):
            counts = Counter(int(c[key]) for c in lost)
            ax.bar([x + shift for x in xs], [counts.get(x, 0) for x in xs], width, color=color,
                   label=f"{label}: greedy minus optimum")
        ax.set_xticks(xs)
        ax.set_xlim(xs[0] - 1, xs[-1] + 1)
        ax.set_ylim(0, ax.get_ylim()[1] * (1.25 + 0.08 * len(reasons)))  # room for the reasons' box
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("greedy minus exact optimum (jobs, or racks)")
        ax.set_ylabel("regions where the greedy is worse")
        why = "\n".join(f"{n} with {r}" for r, n in reasons.most_common())
        ax.set_title(f"(b) the {len(lost)} regions where the greedy is worse, by the first difference "
                     "in the score:", fontsize=11)
        ax.text(0.98, 0.97, why, ha="right", va="top", fontsize=9, transform=ax.transAxes,
                bbox={"facecolor": "white", "edgecolor": "0.7"})
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    else:
        ax.text(0.5, 0.5, "the greedy equals the optimum in every region", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
    if batch:
        regions = batch["per_region"]
        for column, what, short, unit in ((0, "placed_workloads", "placed", "workloads placed"),
                                          (1, "preempted_jobs", "preempted", "jobs preempted")):
            ax = axes[1, column]
            diffs = {name: [r[f"batch-cpsat:{what}"] - r[f"{name}:{what}"] for r in regions]
                     for name in ("rms-greedy", "cpsat")}
            low = int(min(min(d) for d in diffs.values()))
            high = int(max(max(d) for d in diffs.values()))
            xs = list(range(low, high + 1))
            width = 0.4
            for shift, (name, color) in zip((-width / 2, width / 2), (("rms-greedy", "tab:orange"),
                                                                      ("cpsat", "tab:purple")), strict=True):
                counts = Counter(int(d) for d in diffs[name])
                total = int(sum(diffs[name]))
                ax.bar([x + shift for x in xs], [counts.get(x, 0) for x in xs], width, color=color,
                       label=f"one at a time by {name} (total {total:+d})")
            ax.set_xticks(xs)
            ax.set_xlim(xs[0] - 1, xs[-1] + 1)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel(f"batch-cpsat minus one-at-a-time ({unit} per region)")
            ax.set_ylabel("regions")
            totals = batch["totals"]
            ax.set_title(f"({'cd'[column]}) {unit}: batch model against one at a time, {len(regions)} regions x "
                         f"{batch['params']['workloads']} workloads\n(totals: batch-cpsat "
                         f"{totals[f'batch-cpsat:{short}']}, cpsat "
                         f"{totals[f'cpsat:{short}']}, rms-greedy "
                         f"{totals[f'rms-greedy:{short}']})", fontsize=10)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    atomic_write(path, lambda temporary: figure.savefig(temporary, dpi=150, format="png"), ".png")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--regions", type=int, default=200)
    parser.add_argument("--batch-regions", type=int, default=50)
    parser.add_argument("--time-limit", type=float, default=30.0)
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help="also draw the greedy's gap and the batch model's gain to this PNG")
    args = parser.parse_args(argv)
    if args.plot is not None and not args.plot.lower().endswith(".png"):
        parser.error(f"--plot {args.plot}: the file must end in .png")
    report = {"greedy_gap": greedy_gap(args.regions, time_limit=args.time_limit)}
    if args.batch_regions:
        report["batch_loss"] = batch_loss(args.batch_regions, time_limit=args.time_limit)
    print(json.dumps(report, indent=1))
    if args.plot is not None:
        plot_report(report, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
