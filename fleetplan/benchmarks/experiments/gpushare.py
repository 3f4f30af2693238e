"""The FGD paper's experiment grid (Weng, Yang et al., USENIX ATC 2023, §5; the simulator's
``experiments/run_scripts/generate_run_scripts.py``): trace variants x scoring policies x seeds,
each run the inflation experiment of :mod:`fleetplan.sim.gpushare` at 130 %, from the command line.

    .venv/bin/python -m fleetplan.benchmarks.experiments.gpushare --data ../shared/data/alibaba-gpu-v2023 \\
        --traces default --seeds 42 --out runs/gpushare [--resume]

Each run writes ``OUT/TRACE/POLICY/SEED/curve.csv`` and ``run.json`` (its metrics and wall
time); ``--resume`` skips runs whose ``run.json`` exists. At the end, ``OUT/summary.csv`` has
one row per run and ``OUT/curves-TRACE.png`` the policies' mean curves per trace (Figures 7
and 9). The same grid runs on the bench executors (locally or on Dask) as the suite
``fleetplan bench gpushare``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

# The paper's 17 trace variants (generate_run_scripts.py's FileList).
TRACES = ("default", "cpu050", "cpu100", "cpu200", "cpu250", "gpushare100", "gpushare40", "gpushare60",
          "gpushare80", "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33", "multigpu20", "multigpu30",
          "multigpu40", "multigpu50")
SEEDS = tuple(range(42, 52))
# The paper's sensitivity figures (its plot scripts' workload lists and axis labels): the GPUs left
# unallocated when the arrived demand reaches 100 % of the cluster's, per trace family.
SENSITIVITY = (
    ("Figure 11", "GPU-sharing tasks' share of the GPU requests",
     (("gpushare40", "40%"), ("gpushare60", "60%"), ("gpushare80", "80%"), ("gpushare100", "100%"))),
    ("Figure 12", "multi-GPU tasks' share of the GPU requests",
     (("multigpu20", "20%"), ("multigpu30", "30%"), ("multigpu40", "40%"), ("multigpu50", "50%"))),
    ("Figure 13", "GPU-model-constrained tasks' share of the GPU requests",
     (("gpuspec10", "10%"), ("gpuspec20", "20%"), ("gpuspec25", "25%"), ("gpuspec33", "33%"))),
    ("Figure 14", "non-GPU tasks' share of the tasks",
     (("cpu050", "5%"), ("cpu100", "10%"), ("cpu200", "20%"), ("cpu250", "25%"))),
)
NODES_FILE = "openb_node_list_gpu_node.csv"
SUMMARY_COLUMNS = ("trace", "policy", "seed", "wall_s", "load_average", "tasks_arrived", "tasks_placed",
                   "allocated_gpu_pct", "fragmentation_gpu_pct", "unallocated_gpu_pct", "allocated_gpu_pct_at_100",
                   "fragmentation_gpu_pct_at_100", "idle_gpu_pct_cpu_stranded")


def run_grid(data: Path, traces: list[str], policies: list[str], seeds: list[int], inflation: float, out: Path,
             resume: bool = False, log=print, ties: str = "name", node_names: str = "shuffled") -> list[dict]:
    """Run every (trace, policy, seed) not yet done; the rows of every run, done before or now."""
    from fleetplan import sim
    from fleetplan.instances.outputs import atomic_write_text

    spec = sim.get_simulator("gpushare")
    rows = []
    for trace in traces:
        scenario = {"nodes": str(data / NODES_FILE), "tasks": str(data / f"openb_pod_list_{trace}.csv"),
                    "inflation": inflation, "ties": ties, "node_names": node_names}
        for policy in policies:
            for seed in seeds:
                folder = out / trace / policy / str(seed)
                record = folder / "run.json"
                if resume and record.exists():
                    rows.append(json.loads(record.read_text(encoding="utf-8")))
                    continue
                started = time.perf_counter()
                result = spec.run(scenario, policy, seed)
                wall = time.perf_counter() - started
                folder.mkdir(parents=True, exist_ok=True)
                for name, text in spec.tables(result).items():
                    atomic_write_text(folder / name, text)
                row = {"trace": trace, "policy": policy, "seed": seed, "wall_s": round(wall, 3),
                       "load_average": round(os.getloadavg()[0], 2), **result.metrics}
                atomic_write_text(record, json.dumps(row, indent=1) + "\n")
                rows.append(row)
                log(f"{trace} {policy} seed {seed}: {wall:.1f} s, {result.metrics['allocated_gpu_pct']:.2f}% allocated")
    return rows


def _seeded_arrivals(data: Path, trace: str, seed: int, inflation: float):
    """The trace's instance, the cluster's GPU milli, the arrival order the grid's ``seed`` draws
    (inflated to ``inflation`` times the cluster's GPUs) and how many of them reach 100 % of it."""
    import numpy as np

    from fleetplan.sim.gpushare import Scenario, inflate, load_trace

    trace_instance = load_trace(Scenario(nodes=str(data / NODES_FILE), tasks=str(data / f"openb_pod_list_{trace}.csv")))
    a = trace_instance.arrays()
    capacity = a.gpu_milli_capacity
    order = inflate(a.task_gpu_milli, a.task_gpu_milli_total, capacity, inflation, np.random.default_rng(seed))
    within = int(np.searchsorted(np.cumsum(a.task_gpu_milli_total[order]), capacity, side="right"))
    return trace_instance, capacity, order, within


def arrival_bounds(data: Path, trace: str, seed: int, inflation: float) -> dict:
    """With the arrivals of ``seed`` known, once they reach 100 % of the cluster's GPU demand and
    at their end: the offline greedy's plan and the upper bound on any placement (% of the
    cluster's GPUs; :mod:`fleetplan.solvers.gpushare.offline.greedy`)."""
    from fleetplan.sim.gpushare import arrivals
    from fleetplan.solvers import solve

    trace_instance, capacity, order, within = _seeded_arrivals(data, trace, seed, inflation)
    row = {"trace": trace, "seed": seed}
    for label, rows in (("100", order[:within]), ("end", order)):
        result = solve(arrivals(trace_instance, rows), "offline-greedy", seed=seed)
        if not result.evaluation.feasible:  # a bug, never a figure
            raise RuntimeError(f"offline-greedy plan violates {result.evaluation.violations[:2]}")
        row[f"offline_gpu_pct_at_{label}"] = 100.0 * result.objective / capacity
        row[f"bound_gpu_pct_at_{label}"] = 100.0 * result.bound / capacity
        row[f"offline_wall_s_at_{label}"] = round(result.wall_s, 3)
    return row


def arrival_optimum(data: Path, trace: str, seed: int, inflation: float, time_limit: float = 600.0,
                    pricing: str = "packed", at: str = "100") -> dict:
    """With the arrivals of ``seed`` known, once they reach 100 % of the cluster's GPU demand
    (``at="100"``) or all of them (``at="end"``: ``inflation`` times the cluster's GPUs):
    ``offline-patterns``' plan and its per-node bound (% of the cluster's GPUs) and the wall time."""
    from fleetplan.sim.gpushare import arrivals
    from fleetplan.solvers import solve

    trace_instance, capacity, order, within = _seeded_arrivals(data, trace, seed, inflation)
    a = trace_instance.arrays()
    if at == "end":
        within = len(order)
    result = solve(arrivals(trace_instance, order[:within]), "offline-patterns", seed=seed, time_limit=time_limit,
                   pricing=pricing)
    if not result.evaluation.feasible:  # a bug, never a figure
        raise RuntimeError(f"offline-patterns plan violates {result.evaluation.violations[:2]}")
    return {"trace": trace, "seed": seed, "pricing": pricing, "at": at, "status": result.status,
            "arrived_gpu_pct": 100.0 * float(a.task_gpu_milli_total[order[:within]].sum()) / capacity,
            "plan_gpu_pct": 100.0 * result.objective / capacity, "bound_gpu_pct": 100.0 * result.bound / capacity,
            "gap_points": 100.0 * (result.bound - result.objective) / capacity, "wall_s": round(result.wall_s, 1),
            "load_average": round(os.getloadavg()[0], 2)}


def peak_tasks(path: Path) -> tuple[list[str], list[list[str]], float, float]:
    """The trace's tasks alive at its peak of GPU demand (created at or before the instant,
    deleted after it): the header, the rows, the instant (s) and the demand (GPU milli)."""
    import csv

    import numpy as np

    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rows = list(reader)
    column = {name: i for i, name in enumerate(header)}
    for name in ("creation_time", "deletion_time", "num_gpu", "gpu_milli"):
        if name not in column:
            raise ValueError(f"{path}: column '{name}' is missing (the peak needs creation and deletion times)")
    created = np.array([float(r[column["creation_time"]]) for r in rows])
    deleted = np.array([float(r[column["deletion_time"]]) if r[column["deletion_time"]] else np.inf for r in rows])
    demand = np.array([int(r[column["num_gpu"]]) * int(r[column["gpu_milli"]]) for r in rows], dtype=float)
    times = np.concatenate([created, deleted[np.isfinite(deleted)]])
    change = np.concatenate([demand, -demand[np.isfinite(deleted)]])
    order = np.lexsort((change, times))  # at one instant, deletions before creations
    level = np.cumsum(change[order])
    at = float(times[order][int(np.argmax(level))])
    alive = (created <= at) & (deleted > at)
    return header, [r for r, keep in zip(rows, alive, strict=True) if keep], at, float(level.max())


def write_peak(path: Path, out: Path) -> str:
    """Write the peak's tasks to ``out`` and, with every GPU-sharing task rounded up to a whole
    GPU, to ``out``'s ``-whole`` sibling; a line saying what was written."""
    import csv
    import io

    from fleetplan.instances.outputs import atomic_write_text

    header, rows, at, demand = peak_tasks(path)
    milli = header.index("gpu_milli")
    whole = [[*r[:milli], "1000" if r[header.index("num_gpu")] != "0" else r[milli], *r[milli + 1:]] for r in rows]
    for target, table in ((out, rows), (out.with_name(out.stem + "-whole" + out.suffix), whole)):
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows([header, *table])
        atomic_write_text(target, text.getvalue())
    return (f"peak at {at:g} s: {len(rows)} tasks alive, {demand / 1000:.1f} GPUs of demand; wrote {out} and "
            f"{out.with_name(out.stem + '-whole' + out.suffix)} (sharing tasks on whole GPUs)")


def write_summary(rows: list[dict], out: Path) -> None:
    from fleetplan.instances.outputs import atomic_write_text

    lines = [",".join(SUMMARY_COLUMNS)]
    for row in rows:
        lines.append(",".join(str(row.get(column, "")) for column in SUMMARY_COLUMNS))
    atomic_write_text(out / "summary.csv", "\n".join(lines) + "\n")


def summary_table(rows: list[dict]) -> str:
    """Markdown: per trace and policy the mean and standard deviation over seeds of the GPUs
    allocated and fragmented (% of the cluster's) at 100 % and at the end of the arrivals, and
    the median wall time of one run."""
    import statistics

    def spread(values: list[float]) -> str:
        deviation = statistics.stdev(values) if len(values) > 1 else 0.0
        return f"{statistics.mean(values):.2f} ± {deviation:.2f}"

    lines = ["| trace | policy | runs | allocated at 100% | allocated at end | fragmented at 100% | "
             "fragmented at end | pending demand at end | idle on CPU-exhausted nodes at end | wall s (median) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    keys = ("allocated_gpu_pct_at_100", "allocated_gpu_pct", "fragmentation_gpu_pct_at_100",
            "fragmentation_gpu_pct", "unallocated_gpu_pct", "idle_gpu_pct_cpu_stranded")
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["trace"], row["policy"]), []).append(row)
    for (trace, policy), runs in groups.items():
        cells = [spread([float(run[key]) for run in runs]) for key in keys]
        wall = statistics.median(float(run["wall_s"]) for run in runs)
        lines.append(f"| {trace} | {policy} | {len(runs)} | {' | '.join(cells)} | {wall:.2f} |")
    return "\n".join(lines)


def pivot_table(rows: list[dict], key: str) -> str:
    """Markdown: one row per trace, one column per policy, the mean of ``key`` over seeds (the
    paper's Figures 11-14 show the variants side by side)."""
    import statistics

    policies = list(dict.fromkeys(row["policy"] for row in rows))
    traces = list(dict.fromkeys(row["trace"] for row in rows))
    lines = [f"| trace ({key}) | " + " | ".join(policies) + " |", "|---" * (len(policies) + 1) + "|"]
    for trace in traces:
        cells = []
        for policy in policies:
            values = [float(r[key]) for r in rows if r["trace"] == trace and r["policy"] == policy]
            cells.append(f"{statistics.mean(values):.2f}" if values else "-")
        lines.append(f"| {trace} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


PAPER_POLICIES = {"01-Random": "random", "02-DotProd": "dot-product", "03-GpuClustering": "gpu-clustering",
                  "04-GpuPacking": "gpu-packing", "05-BestFit": "best-fit", "06-FGD": "fgd"}


def paper_table(rows: list[dict], folder: Path) -> str:
    """Markdown: our allocation and fragmentation at the end of the arrivals beside the paper's
    authors' own runs (their simulator's ``experiments/analysis/expected_results/
    analysis_allo_discrete.csv`` and ``analysis_frag_discrete.csv``, columns ``130``), means
    over the seeds each side has."""
    import statistics

    allocated, fragmented = paper_runs(folder, "130", "allocated"), paper_runs(folder, "130", "fragmented")
    lines = ["| trace | policy | allocated (ours) | allocated (paper's runs) | fragmented (ours) | "
             "fragmented (paper's runs) |", "|---|---|---|---|---|---|"]
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["trace"], row["policy"]), []).append(row)
    def cell(values: list[float] | None) -> str:
        return f"{statistics.mean(values):.2f}" if values else "-"

    differences: dict[str, list[float]] = {}
    for (trace, policy), runs in groups.items():
        ours_a = statistics.mean(float(r["allocated_gpu_pct"]) for r in runs)
        ours_f = statistics.mean(float(r["fragmentation_gpu_pct"]) for r in runs)
        paper_a = allocated.get((trace, policy))
        paper_f = fragmented.get((trace, policy))
        lines.append(f"| {trace} | {policy} | {ours_a:.2f} | {cell(paper_a)} | {ours_f:.2f} | {cell(paper_f)} |")
        if paper_a:
            differences.setdefault(policy, []).append(ours_a - statistics.mean(paper_a))
    lines += ["", "| policy | traces | mean abs(ours − paper's), allocated | largest | mean (ours − paper's) |",
              "|---|---|---|---|---|"]
    for policy, values in differences.items():
        lines.append(f"| {policy} | {len(values)} | {statistics.mean(abs(v) for v in values):.2f} | "
                     f"{max(abs(v) for v in values):.2f} | {statistics.mean(values):+.2f} |")
    return "\n".join(lines)


def paper_runs(folder: Path, column: str = "130", what: str = "allocated") -> dict[tuple[str, str], list[float]]:
    """The paper authors' own runs, per (trace, policy): the seeds' values of ``column`` (the
    arrived demand in % of the cluster's GPUs) of ``analysis_allo_discrete.csv`` (``what=
    "allocated"``) or ``analysis_frag_discrete.csv`` (``"fragmented"``) in their simulator's
    ``experiments/analysis/expected_results``."""
    import csv

    name = {"allocated": "analysis_allo_discrete.csv", "fragmented": "analysis_frag_discrete.csv"}[what]
    theirs: dict[tuple[str, str], list[float]] = {}
    with (folder / name).open(encoding="utf-8") as handle:
        for record in csv.DictReader(handle):
            policy = PAPER_POLICIES.get(record["sc_policy"])
            if policy is not None:
                trace = record["workload"].removeprefix("openb_pod_list_")
                theirs.setdefault((trace, policy), []).append(float(record[column]))
    return theirs


def paper_unallocated(folder: Path) -> dict[tuple[str, str], list[float]]:
    """The paper's runs, per (trace, policy): the GPUs unallocated (%) at 100 % of arrivals."""
    return {key: [100.0 - value for value in values] for key, values in paper_runs(folder, "100").items()}


def unallocated_at_100(rows: list[dict]) -> dict[tuple[str, str], list[float]]:
    """Ours, per (trace, policy): the seeds' GPUs unallocated (% of the cluster's) when the arrived
    demand reaches 100 %, the quantity of the paper's Figures 11-14."""
    found: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        found.setdefault((row["trace"], row["policy"]), []).append(100.0 - float(row["allocated_gpu_pct_at_100"]))
    return found


def sensitivity_table(rows: list[dict], paper: Path | None = None) -> str:
    """Markdown, one block per figure of :data:`SENSITIVITY`: per trace and policy the mean over
    seeds of the unallocated GPUs at 100 % of arrivals, ours and (with ``paper``) the paper's
    runs, then per policy the mean and largest difference over the 16 traces."""
    import statistics

    ours = unallocated_at_100(rows)
    theirs = paper_unallocated(paper) if paper else {}
    policies = list(dict.fromkeys(row["policy"] for row in rows))
    head = " | ".join(f"{p} (ours{' / paper' if paper else ''})" for p in policies)
    lines = []
    differences: dict[str, list[float]] = {}
    for figure, axis, traces in SENSITIVITY:
        lines += ["", f"{figure} — GPUs unallocated at 100 % of arrivals [%], by {axis}:", "",
                  f"| trace | {head} |", "|---" * (len(policies) + 1) + "|"]
        for trace, label in traces:
            cells = []
            for policy in policies:
                mine = ours.get((trace, policy))
                cell = f"{statistics.mean(mine):.2f}" if mine else "-"
                if paper:
                    other = theirs.get((trace, policy))
                    cell += f" / {statistics.mean(other):.2f}" if other else " / -"
                    if mine and other:
                        differences.setdefault(policy, []).append(statistics.mean(mine) - statistics.mean(other))
                cells.append(cell)
            lines.append(f"| {trace} ({label}) | " + " | ".join(cells) + " |")
    if differences:
        lines += ["", "| policy | traces | mean abs(ours − paper's), unallocated at 100 % | largest | "
                      "mean (ours − paper's) |", "|---|---|---|---|---|"]
        for policy, values in differences.items():
            lines.append(f"| {policy} | {len(values)} | {statistics.mean(abs(v) for v in values):.2f} | "
                         f"{max(abs(v) for v in values):.2f} | {statistics.mean(values):+.2f} |")
    return "\n".join(lines).lstrip("\n")


def bound_table(bounds: list[dict], rows: list[dict]) -> str:
    """Markdown: per trace the offline plan and the bound (means over seeds, % of the cluster's
    GPUs) and per policy how far below the offline plan it allocates (percentage points), at
    100 % of arrivals and at the end."""
    import statistics

    lines = ["| trace | policy | offline plan at 100% | bound at 100% | policy below offline at 100% | "
             "offline plan at end | bound at end | policy below offline at end |", "|---|---|---|---|---|---|---|---|"]
    by_seed = {(b["trace"], b["seed"]): b for b in bounds}
    for trace in dict.fromkeys(b["trace"] for b in bounds):
        policies = dict.fromkeys(r["policy"] for r in rows if r["trace"] == trace)
        for policy in policies:
            runs = [r for r in rows if r["trace"] == trace and r["policy"] == policy and (trace, r["seed"]) in by_seed]
            if not runs:
                continue
            cells = []
            for label, key in (("100", "allocated_gpu_pct_at_100"), ("end", "allocated_gpu_pct")):
                bound = [by_seed[(trace, r["seed"])][f"bound_gpu_pct_at_{label}"] for r in runs]
                offline = [by_seed[(trace, r["seed"])][f"offline_gpu_pct_at_{label}"] for r in runs]
                below = [b - float(r[key]) for b, r in zip(offline, runs, strict=True)]
                cells += [f"{statistics.mean(offline):.2f}", f"{statistics.mean(bound):.2f}",
                          f"{statistics.mean(below):.2f}"]
            lines.append(f"| {trace} | {policy} | {' | '.join(cells)} |")
    return "\n".join(lines)


def draw(out: Path, traces: list[str], policies: list[str], seeds: list[int]) -> list[Path]:
    """One picture per trace: the policies' mean curves over the seeds."""
    import csv

    from fleetplan.plotting.gpushare import plot_policies

    written = []
    for trace in traces:
        runs: dict[str, list[dict]] = {}
        for policy in policies:
            for seed in seeds:
                path = out / trace / policy / str(seed) / "curve.csv"
                if path.exists():
                    with path.open(encoding="utf-8") as handle:
                        table = list(csv.DictReader(handle))
                    runs.setdefault(policy, []).append({k: [float(r[k]) for r in table] for k in table[0]})
        if runs:
            target = out / f"curves-{trace}.png"
            plot_policies(runs, target, title=f"{trace} trace, inflated to 130%: mean over {len(seeds)} seed(s)")
            written.append(target)
    return written


def draw_sensitivity(out: Path, rows: list[dict], paper: Path | None = None) -> Path:
    """``OUT/sensitivity.png``: the paper's Figures 11-14 from our runs (and the paper's own runs)."""
    from fleetplan.plotting.gpushare import plot_sensitivity

    theirs = paper_unallocated(paper) if paper is not None else None
    seeds = len({row["seed"] for row in rows})
    target = out / "sensitivity.png"
    plot_sensitivity(SENSITIVITY, unallocated_at_100(rows), theirs, target,
                     title=f"GPUs unallocated when the arrived demand reaches 100 %: mean over {seeds} seed(s)")
    return target


def main(argv: list[str] | None = None) -> int:
    from fleetplan.sim.gpushare import POLICIES, VARIANTS

    parser = argparse.ArgumentParser(prog="python -m fleetplan.benchmarks.experiments.gpushare",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="folder of the trace's CSV files")
    parser.add_argument("--traces", nargs="+", default=list(TRACES), choices=TRACES, metavar="TRACE",
                        help="trace variants (default: the paper's 17)")
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES + VARIANTS, metavar="POLICY",
                        help="default: the paper's six")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS), help="default: 42..51")
    parser.add_argument("--inflation", type=float, default=1.3)
    parser.add_argument("--ties", choices=("name", "random"), default="name",
                        help="equal scores: the first node name (the paper's simulator) or random (stock Kubernetes)")
    parser.add_argument("--node-names", choices=("shuffled", "trace"), default="shuffled",
                        help="the order name ties follow: shuffled (the paper's simulator renames its nodes with "
                             "a random prefix drawn with the seed) or trace (the trace's own names)")
    parser.add_argument("--out", required=False, help="folder for the runs, summary.csv and the pictures")
    parser.add_argument("--peak-out", default=None, metavar="FILE.csv",
                        help="instead of the grid: write the first trace's tasks alive at its peak GPU demand "
                             "(and FILE-whole.csv, sharing tasks on whole GPUs), for fleetplan import and size")
    parser.add_argument("--resume", action="store_true", help="skip runs already written")
    parser.add_argument("--paper-results", default=None, metavar="DIR",
                        help="the folder of the paper's own results (its simulator's experiments/analysis/"
                             "expected_results): print them beside ours")
    parser.add_argument("--bound", action="store_true",
                        help="also bound what any placement could allocate, per trace and seed (bounds.csv)")
    parser.add_argument("--optimum", action="store_true",
                        help="instead of the grid: per trace and seed, offline-patterns' plan and per-node bound at "
                             "100 %% of arrivals (optimum.csv in --out)")
    parser.add_argument("--pricing", choices=("packed", "relaxed"), default="packed",
                        help="with --optimum: offline-patterns' pricing (packed: GPU by GPU)")
    parser.add_argument("--optimum-at", choices=("100", "end"), default="100",
                        help="with --optimum: the arrivals up to 100 %% of the cluster's GPU demand, or all of "
                             "them (--inflation's share, 130 %% by default)")
    args = parser.parse_args(argv)
    data = Path(args.data)
    missing = [name for name in [NODES_FILE, *(f"openb_pod_list_{t}.csv" for t in args.traces)]
               if not (data / name).is_file()]
    if missing:
        print(f"error: --data {data}: no {missing[0]}", file=sys.stderr)
        return 2
    if args.peak_out is not None:
        print(write_peak(data / f"openb_pod_list_{args.traces[0]}.csv", Path(args.peak_out)))
        return 0
    if args.out is None:
        print("error: --out: the folder for the runs is required", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.optimum:
        def show(row: dict) -> None:
            print(f"| {row['trace']} | {row['seed']} | {row['arrived_gpu_pct']:.2f} | {row['plan_gpu_pct']:.2f} | "
                  f"{row['bound_gpu_pct']:.2f} | {row['gap_points']:.3f} | {row['status']} | {row['wall_s']} | "
                  f"{row['load_average']} |", flush=True)

        _per_seed(out, args, "optimum",
                  lambda trace, seed: arrival_optimum(data, trace, seed, args.inflation, pricing=args.pricing,
                                                      at=args.optimum_at), show)
        return 0
    rows = run_grid(data, args.traces, args.policies, args.seeds, args.inflation, out, args.resume, ties=args.ties,
                    node_names=args.node_names)
    write_summary(rows, out)
    for path in draw(out, args.traces, args.policies, args.seeds):
        print(f"wrote {path}")
    print(f"wrote {out / 'summary.csv'} ({len(rows)} runs)")
    print(summary_table(rows))
    if len(args.traces) > 1:
        print(pivot_table(rows, "allocated_gpu_pct"))
    paper = Path(args.paper_results) if args.paper_results is not None else None
    if paper is not None:
        print(paper_table(rows, paper))
    if any(trace in args.traces for _, _, family in SENSITIVITY for trace, _ in family):
        print(sensitivity_table(rows, paper))
        print(f"wrote {draw_sensitivity(out, rows, paper)}")
    if args.bound:
        found = _per_seed(out, args, "bounds", lambda trace, seed: arrival_bounds(data, trace, seed, args.inflation))
        print(bound_table(found, rows))
    return 0


def _per_seed(out: Path, args: argparse.Namespace, name: str, compute: Callable[[str, int], dict],
              show: Callable[[dict], None] | None = None) -> list[dict]:
    """``compute(trace, seed)`` for every trace and seed of the run, each answer kept as
    ``OUT/TRACE/NAME-SEED.json`` (read back with ``--resume``) and all of them as ``OUT/NAME.csv``."""
    from fleetplan.instances.outputs import atomic_write_text

    found = []
    for trace in args.traces:
        for seed in args.seeds:
            record = out / trace / f"{name}-{seed}.json"
            if args.resume and record.exists():
                found.append(json.loads(record.read_text(encoding="utf-8")))
            else:
                found.append(compute(trace, seed))
                record.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(record, json.dumps(found[-1], indent=1) + "\n")
            if show is not None:
                show(found[-1])
    columns = list(found[0])
    atomic_write_text(out / f"{name}.csv", "\n".join([",".join(columns)] + [
        ",".join(str(row[c]) for c in columns) for row in found]) + "\n")
    return found


if __name__ == "__main__":
    raise SystemExit(main())
