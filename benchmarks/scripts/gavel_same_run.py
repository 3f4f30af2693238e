"""fleetplan against Gavel's own policy code in the same run, timing what a user pays (issue 23
item 6): from a validated instance to a judged plan.

For each size the script writes the instance the ``gavel-distinct`` suite generates
(``throughput_noise`` 0.1, seed 0) as a fleetplan JSON file and as Gavel's dictionaries
(throughputs per job and worker type, scale factors, priority weights, cluster spec), then runs
fresh processes, alternating the two sides, ``--repeats`` times:

* fleetplan: load and validate the instance (not timed), one warm-up solve of an 8-job instance
  (imports), then ``fleetplan.solve(instance, SOLVER)`` timed — the instance's arrays, the
  solve, the plan and the judge's evaluation. In the same process a second solve of the same
  instance (its arrays now built) gives the figure RESULTS.md quoted before this script: the
  solver without building the arrays.
* Gavel: ``--gavel-python`` runs ``--gavel-script INSTANCE.json las|max-throughput OUT.npy``,
  which must time Gavel's ``get_allocation`` after a warm-up call and print one JSON line with
  ``cpu_s`` and ``wall_s``, and save the allocation (jobs in Gavel's sorted order, columns in
  the sorted worker types it prints as ``types``). Gavel's code is not part of fleetplan: rebuild
  its policies from the stanford-futuredata/gavel repository (scheduler/policies) in an
  environment of their own (cvxpy with ECOS). Its allocation is scored by fleetplan's judge.

Each run is appended to ``OUT/runs.csv`` with the 1-minute load average as it finishes;
``--report`` prints the medians and the ratios.

    python benchmarks/scripts/gavel_same_run.py --out benchmarks/gavel-same-run \\
        --gavel-python /tmp/gavel-venv/bin/python --gavel-script /tmp/gavel-side/gavel_side.py
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SOLVERS = {"las": "max-min-fairness", "max-throughput": "max-throughput"}
FIELDS = ("policy", "gpus", "jobs", "side", "repeat", "cpu_s", "wall_s", "solver_only_cpu_s", "solver_only_wall_s",
          "objective", "status", "violations", "loadavg_1min")


def export(jobs: int, folder: Path, multi_gpu: bool) -> tuple[Path, Path]:
    """The instance as fleetplan JSON and as Gavel's dictionaries (job index as the job id)."""
    import fleetplan

    instance = fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1, "multi_gpu": multi_gpu},
                                  seed=0)
    ours = folder / f"instance-{jobs}.json"
    fleetplan.save(instance, ours)
    arrays = instance.arrays()
    types = list(arrays.worker_types)
    theirs = folder / f"gavel-{jobs}.json"
    theirs.write_text(json.dumps({
        "throughputs": {str(m): {t: float(arrays.throughput[m, j]) for j, t in enumerate(types)}
                        for m in range(len(arrays.job_ids))},
        "scale_factors": {str(m): int(arrays.scale_factor[m]) for m in range(len(arrays.job_ids))},
        "priority_weights": {str(m): float(arrays.weight[m]) for m in range(len(arrays.job_ids))},
        "cluster_spec": {t: int(c) for t, c in zip(types, arrays.num_workers, strict=True)}}))
    return ours, theirs


def fleetplan_side(path: str, solver: str) -> None:
    """One fresh process: load (untimed), warm up, time the user's solve, then the solver alone."""
    import fleetplan

    instance = fleetplan.load_instance(path)
    fleetplan.solve(fleetplan.generate("allocation", {"jobs": 8}, seed=0), solver)
    cpu, wall = time.process_time(), time.perf_counter()
    result = fleetplan.solve(instance, solver)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    again_cpu, again_wall = time.process_time(), time.perf_counter()
    fleetplan.solve(instance, solver)
    again_cpu, again_wall = time.process_time() - again_cpu, time.perf_counter() - again_wall
    print(json.dumps({"cpu_s": cpu, "wall_s": wall, "solver_only_cpu_s": again_cpu,
                      "solver_only_wall_s": again_wall, "objective": result.objective, "status": result.status,
                      "violations": len(result.evaluation.violations)}))


def judge_gavel(instance_path: Path, policy: str, matrix_path: Path, types: list[str]) -> tuple[float, int]:
    """fleetplan's judge on Gavel's allocation (its rows in sorted job order: job index = id)."""
    import fleetplan
    from fleetplan.instances.allocation import AllocationPlan

    instance = fleetplan.load_instance(instance_path)
    arrays = instance.arrays()
    theirs = np.load(matrix_path)
    order = sorted(range(len(arrays.job_ids)))  # Gavel sorts its integer job ids
    matrix = np.zeros_like(arrays.throughput)
    for j, name in enumerate(arrays.worker_types):
        matrix[order, j] = theirs[:, types.index(name)]
    policy_name = "max_min_fairness" if policy == "las" else "max_throughput"
    evaluation = fleetplan.evaluate(instance, AllocationPlan.from_matrix(instance, matrix, policy=policy_name))
    return evaluation.objective, len(evaluation.violations)


def read_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def write_rows(path: Path, rows: list[dict]) -> None:
    from fleetplan.instances.outputs import atomic_write_text

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def report(rows: list[dict[str, str]]) -> str:
    lines = ["| policy | GPUs per job | jobs | Gavel CPU | fleetplan CPU, instance to judged plan | ratio | fleetplan CPU, "
             "solver only (arrays built) | ratio | Gavel objective | fleetplan objective | runs | load |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for policy, gpus, jobs in sorted({(r["policy"], r["gpus"], int(r["jobs"])) for r in rows}):
        if True:
            mine = [r for r in rows if r["policy"] == policy and r["gpus"] == gpus and int(r["jobs"]) == jobs]
            gavel = [r for r in mine if r["side"] == "gavel"]
            ours = [r for r in mine if r["side"] == "fleetplan"]
            if not gavel or not ours:
                continue

            def med(rs: list[dict[str, str]], key: str) -> float:
                return statistics.median(float(r[key]) for r in rs)

            g, f, s = med(gavel, "cpu_s"), med(ours, "cpu_s"), med(ours, "solver_only_cpu_s")
            loads = [float(r["loadavg_1min"]) for r in mine]
            lines.append(f"| {policy} | {gpus} | {jobs:,} | {g:.3g} s | {f:.3g} s | {g / f:.1f}x | {s:.3g} s | {g / s:.1f}x | "
                         f"{float(gavel[0]['objective']):.10g} | {float(ours[0]['objective']):.10g} | "
                         f"{len(gavel)} + {len(ours)} | {min(loads):.1f}-{max(loads):.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    side = sub.add_parser("fleetplan-side")
    side.add_argument("instance")
    side.add_argument("solver")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/gavel-same-run"))
    parser.add_argument("--jobs", default="2048,16384,65536")
    parser.add_argument("--policies", default="las,max-throughput")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gavel-python")
    parser.add_argument("--gavel-script")
    parser.add_argument("--single-gpu", action="store_true", help="every job on one GPU (the suite's mix is "
                        "multi-GPU; on one GPU Gavel's isolated normalisation equals X_equal's, so objectives compare)")
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "fleetplan-side":
        fleetplan_side(args.instance, args.solver)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    runs = args.out / "runs.csv"
    rows = read_rows(runs)
    if not args.report:
        if not (args.gavel_python and args.gavel_script):
            parser.error("--gavel-python and --gavel-script are needed to run (or use --report)")
        work = Path(tempfile.mkdtemp(prefix="gavel-same-run-"))
        sizes = [int(n) for n in args.jobs.split(",")]
        gpus = "1" if args.single_gpu else "mix"
        files = {n: export(n, work, not args.single_gpu) for n in sizes}
        for repeat in range(args.repeats):
            for policy in args.policies.split(","):
                for n in sizes:
                    sides = ("gavel", "fleetplan") if repeat % 2 == 0 else ("fleetplan", "gavel")
                    for which in sides:
                        if which == "fleetplan":
                            done = subprocess.run([sys.executable, __file__, "fleetplan-side", str(files[n][0]),
                                                   SOLVERS[policy]], capture_output=True, text=True, check=True)
                            answer = json.loads(done.stdout.strip().splitlines()[-1])
                        else:
                            matrix = work / f"gavel-{policy}-{n}.npy"
                            done = subprocess.run([args.gavel_python, args.gavel_script, str(files[n][1]), policy,
                                                   str(matrix)], capture_output=True, text=True, check=True)
                            answer = json.loads(done.stdout.strip().splitlines()[-1])
                            objective, violations = judge_gavel(files[n][0], policy, matrix, answer["types"])
                            answer.update(objective=objective, violations=violations, status="",
                                          solver_only_cpu_s="", solver_only_wall_s="")
                        rows.append({"policy": policy, "gpus": gpus, "jobs": n, "side": which, "repeat": repeat,
                                     **{k: answer.get(k, "") for k in FIELDS[5:12]},
                                     "loadavg_1min": round(os.getloadavg()[0], 2)})
                        write_rows(runs, rows)
                        print(f"{policy} {n} {which} repeat {repeat}: {float(answer['cpu_s']):.3f} s CPU, "
                              f"objective {answer['objective']}", flush=True)
    table = report(read_rows(runs))
    print(table)


if __name__ == "__main__":
    main()
