"""fleetplan against Gavel's own policy code in the same run, timing what a user pays: from a validated instance to a judged plan.

For each size the script writes the instance the ``gavel-distinct`` suite generates
(``throughput_noise`` 0.1, seed 0) as a fleetplan JSON file and as Gavel's dictionaries
(throughputs per job and worker type, scale factors, priority weights, cluster spec), then runs
fresh processes, alternating the two sides, ``--repeats`` times:

* fleetplan: load and validate the instance (not timed), one warm-up solve of an instance of the
  same size and kind generated with another seed (imports, and the large-instance path the timed
  size takes: sampled prices and held jobs from 8,192 jobs, the compiled kernels' sizes), then
  ``fleetplan.solve(instance, SOLVER)`` timed — the instance's arrays, the solve, the plan and
  the judge's evaluation. In the same process a second solve of the same instance (its arrays
  now built) gives the figure RESULTS.md quoted before this script: the solver without building
  the arrays. Until 2026-11-28 the warm-up was an 8-job instance, which left that path cold;
  ``--warm-up-jobs 8`` runs it so again.
* Gavel: ``--gavel-python`` (default ``.venv-gavel/bin/python``, built by ``make gavel-env``) runs
  ``--gavel-script`` (default ``benchmarks/scripts/gavel_side.py``) ``INSTANCE.json
  las|max-throughput OUT.npy --gavel-checkout CHECKOUT``: Gavel's published policies imported
  from a checkout of the stanford-futuredata/gavel repository (``--gavel-checkout``), timed
  after a warm-up call; it prints one JSON line with ``cpu_s``, ``wall_s``, the sorted worker
  ``types`` (the columns of the allocation it saves, jobs in Gavel's sorted order) and the
  checkout's ``commit``. Its allocation is scored by fleetplan's judge.

Each run is appended to ``OUT/runs.csv`` with the 1-minute load average as it finishes and the
Gavel commit; ``--report`` prints the medians and the ratios.

    make gavel-env
    git clone -q --no-checkout https://github.com/stanford-futuredata/gavel /tmp/gavel
    git -C /tmp/gavel sparse-checkout set --no-cone '/scheduler/*' '!/scheduler/traces/'
    git -C /tmp/gavel checkout -q c4fa40097339e9608ab71fd64c8bdea96a5e4a4c
    python benchmarks/scripts/gavel_same_run.py --out benchmarks/gavel-same-run --gavel-checkout /tmp/gavel
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rows import read_rows, write_rows

SOLVERS = {"las": "max-min-fairness", "max-throughput": "max-throughput"}
FIELDS = ("policy", "gpus", "jobs", "side", "repeat", "cpu_s", "wall_s", "solver_only_cpu_s", "solver_only_wall_s",
          "objective", "status", "violations", "loadavg_1min", "warm_up_jobs", "gavel_commit")
ROOT = Path(__file__).resolve().parents[2]


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


def warm_up_instance(instance: object, jobs: int | None) -> object:
    """An instance of the timed one's kind and size (or ``jobs`` jobs) from another seed."""
    import fleetplan

    multi_gpu = any(job.scale_factor > 1 for job in instance.jobs)
    size = len(instance.jobs) if jobs is None else jobs
    return fleetplan.generate("allocation", {"jobs": size, "throughput_noise": 0.1, "multi_gpu": multi_gpu}, seed=1)


def fleetplan_side(path: str, solver: str, warm_up_jobs: int | None) -> None:
    """One fresh process: load (untimed), warm up, time the user's solve, then the solver alone."""
    import fleetplan

    instance = fleetplan.load_instance(path)
    fleetplan.solve(warm_up_instance(instance, warm_up_jobs), solver)
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




def gavel_label(row: dict[str, str]) -> str:
    """Which Gavel code a row timed: the checkout's commit, or the rebuild of the runs before 2026-11-28."""
    return row.get("gavel_commit", "")[:7] or "older rebuild"


def report(rows: list[dict[str, str]]) -> str:
    """Medians per policy, GPUs per job, size and Gavel code (rows of another commit never mix)."""
    lines = ["| Gavel code | policy | GPUs per job | jobs | Gavel CPU | fleetplan CPU, instance to judged plan | ratio | "
             "fleetplan CPU, solver only (arrays built) | ratio | Gavel wall | fleetplan wall | Gavel objective | "
             "fleetplan objective | runs | load |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    by_code: dict[tuple[str, str, str, int], list[dict[str, str]]] = {}
    for r in rows:
        by_code.setdefault((gavel_label(r), r["policy"], r["gpus"], int(r["jobs"])), []).append(r)

    def med(rs: list[dict[str, str]], key: str) -> float:
        return statistics.median(float(r[key]) for r in rs)

    for label, policy, gpus, jobs in sorted(by_code, key=lambda k: (k[0] == "older rebuild", k[1], k[2], k[3])):
        mine = by_code[(label, policy, gpus, jobs)]
        gavel = [r for r in mine if r["side"] == "gavel"]
        ours = [r for r in mine if r["side"] == "fleetplan"]
        if not gavel or not ours:
            continue
        g, f, s = med(gavel, "cpu_s"), med(ours, "cpu_s"), med(ours, "solver_only_cpu_s")
        loads = [float(r["loadavg_1min"]) for r in mine]
        lines.append(f"| {label} | {policy} | {gpus} | {jobs:,} | {g:.3g} s | {f:.3g} s | {g / f:.1f}x | {s:.3g} s | "
                     f"{g / s:.1f}x | {med(gavel, 'wall_s'):.3g} s | {med(ours, 'wall_s'):.3g} s | "
                     f"{float(gavel[0]['objective']):.10g} | {float(ours[0]['objective']):.10g} | "
                     f"{len(gavel)} + {len(ours)} | {min(loads):.1f}-{max(loads):.1f} |")
    return "\n".join(lines) + "\n"


def ratios(rows: list[dict[str, str]]) -> dict[str, dict[str, dict[str, float]]]:
    """Gavel's median CPU over fleetplan's, per policy and size: what a user pays, and the solver only."""
    answer: dict[str, dict[str, dict[str, float]]] = {"user_pays": {}, "solver_only": {}}
    for policy, jobs in sorted({(r["policy"], r["jobs"]) for r in rows}):
        mine = [r for r in rows if (r["policy"], r["jobs"]) == (policy, jobs)]
        gavel = statistics.median(float(r["cpu_s"]) for r in mine if r["side"] == "gavel")
        for key, column in (("user_pays", "cpu_s"), ("solver_only", "solver_only_cpu_s")):
            ours = statistics.median(float(r[column]) for r in mine if r["side"] == "fleetplan")
            answer[key].setdefault(policy, {})[str(jobs)] = gavel / ours
    return answer


PHASES = ("arrays", "prices", "highs", "refine", "driver", "policy", "plan", "duals", "judge", "dispatch")


def profile(jobs: int, solver: str, repeats: int, warm_up_jobs: int | None, processes: int) -> None:
    """Where the CPU of ``fleetplan.solve(instance, SOLVER)`` goes, as a user pays it.

    In each of ``processes`` fresh processes: a warm-up solve of another instance of the size
    (or of ``warm_up_jobs`` jobs: 8 leaves the large-instance path cold, as a process's first
    solve finds it), then ``repeats`` times a freshly loaded instance (its arrays not built)
    solved, with each phase's own CPU time
    (``time.process_time``, callees excluded) taken by wrapping the functions that do it: the
    instance's arrays, the policy's LP driver, the rest of the policy's code (options, backend),
    the plan, the dual prices, the judge, and ``fleetplan.solve``'s own dispatch (the solver's
    look-up, option checks, the garbage collector's freeze, naming the plan). Medians per phase.
    """
    rows: list[dict[str, float]] = []
    imported: list[str] = []
    for _ in range(processes):
        done = subprocess.run([sys.executable, __file__, "profile-process", str(jobs), solver, str(repeats),
                               str(warm_up_jobs or 0)], capture_output=True, text=True, check=True)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        rows += answer["rows"]
        imported = answer["imported"]
    warm = f"an instance of {warm_up_jobs:,} jobs" if warm_up_jobs else "an instance of the size"
    print(f"fleetplan.solve(instance, {solver!r}) at {jobs:,} distinct jobs, {processes} process(es) x {repeats} "
          f"run(s) after a warm-up on {warm}, load average {os.getloadavg()[0]:.1f} at the end; CPU ms, median "
          "of each phase (own time, callees excluded):")
    print("| phase | median ms | share of the median total |")
    print("|---|---:|---:|")
    total = statistics.median(row["total"] for row in rows)
    for name in (*PHASES, "total"):
        value = statistics.median(row[name] for row in rows)
        print(f"| {name} | {value * 1e3:.2f} | {value / total:.0%} |")
    print(f"modules first imported during the timed solves (last process): {len(imported)}"
          + (f" ({', '.join(imported)})" if imported else ""))


def profile_process(jobs: int, solver: str, repeats: int, warm_up_jobs: int | None) -> dict[str, list]:
    """One process of :func:`profile`: the phases of each run, and the modules the runs imported."""
    import fleetplan
    import fleetplan.solvers.allocation as allocation_solvers
    import fleetplan.solvers.base as base
    from fleetplan.instances.allocation import AllocationInstance, AllocationPlan
    from fleetplan.solvers.allocation import drivers, lp, policies
    from fleetplan.solvers.allocation.price_decomposition import separable

    own = dict.fromkeys(PHASES, 0.0)
    stack: list[list[float]] = []  # per open phase: [children's CPU]

    def timed(name: str, function):
        def wrapper(*args, **kwargs):
            stack.append([0.0])
            started = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.process_time() - started
                children = stack.pop()[0]
                own[name] += spent - children
                if stack:
                    stack[-1][0] += spent
        return wrapper

    patches = [(AllocationInstance, "arrays"), (AllocationPlan, "from_matrix"), (policies, "solve_policy"),
               (policies, "policy_duals"), (base, "evaluate"), (separable, "_interior_point_prices"),
               (separable, "_solve_lp"), (lp, "_refine_separable"),
               (drivers, "drive_max_min_fairness" if solver == "max-min-fairness" else "drive_max_throughput")]
    names = {"arrays": "arrays", "from_matrix": "plan", "solve_policy": "policy", "policy_duals": "duals",
             "evaluate": "judge", "_interior_point_prices": "prices", "_solve_lp": "highs",
             "_refine_separable": "refine"}
    for owner, attribute in patches:
        original = getattr(owner, attribute)
        name = names.get(attribute, "driver")
        if isinstance(owner, type) and isinstance(owner.__dict__.get(attribute), classmethod):
            setattr(owner, attribute, classmethod(timed(name, original.__func__)))
        else:
            setattr(owner, attribute, timed(name, original))
        for module in (allocation_solvers, policies):  # names imported into the modules that call them
            if module is not owner and getattr(module, attribute, None) is original:
                setattr(module, attribute, getattr(owner, attribute))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "instance.json"
        fleetplan.save(fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1, "multi_gpu": True},
                                          seed=0), path)
        fleetplan.solve(warm_up_instance(fleetplan.load_instance(path), warm_up_jobs), solver)
        rows = []
        before = set(sys.modules)
        for _ in range(repeats):
            instance = fleetplan.load_instance(path)
            for name in own:
                own[name] = 0.0
            stack.append([0.0])
            started = time.process_time()
            fleetplan.solve(instance, solver)
            total = time.process_time() - started
            own["dispatch"] = total - stack.pop()[0]
            rows.append({**own, "total": total})
    return {"rows": rows, "imported": sorted(set(sys.modules) - before)}


def fail(message: str) -> None:
    """Bad input: one line naming the option, exit code 2."""
    print(f"gavel_same_run.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command")
    side = sub.add_parser("fleetplan-side")
    side.add_argument("instance")
    side.add_argument("solver")
    side.add_argument("--warm-up-jobs", type=int)
    where = sub.add_parser("profile", help="where the CPU of one solve goes, phase by phase")
    where.add_argument("--jobs", type=int, default=2048)
    where.add_argument("--policy", choices=sorted(SOLVERS), default="las")
    where.add_argument("--repeats", type=int, default=30, help="runs in each process")
    where.add_argument("--processes", type=int, default=1)
    where.add_argument("--warm-up-jobs", type=int, help="jobs of the warm-up instance (default: the size)")
    child = sub.add_parser("profile-process")
    for name in ("jobs", "solver", "repeats", "warm_up_jobs"):
        child.add_argument(name)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/gavel-same-run"))
    parser.add_argument("--jobs", default="2048,16384,65536")
    parser.add_argument("--policies", default="las,max-throughput")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--gavel-python", default=str(ROOT / ".venv-gavel" / "bin" / "python"),
                        help="the Python of Gavel's environment (default .venv-gavel, `make gavel-env`)")
    parser.add_argument("--gavel-script", default=str(Path(__file__).with_name("gavel_side.py")))
    parser.add_argument("--gavel-checkout", help="a checkout of stanford-futuredata/gavel, passed to the script")
    parser.add_argument("--warm-up-jobs", type=int, help="jobs of fleetplan's warm-up instance (default: as many "
                        "as the timed instance; 8 was the warm-up before 2026-11-28)")
    parser.add_argument("--single-gpu", action="store_true", help="every job on one GPU (the suite's mix is "
                        "multi-GPU)")
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--json", action="store_true", help="end with one JSON line: the ratios of this run's rows")
    args = parser.parse_args(argv)
    if args.command == "fleetplan-side":
        fleetplan_side(args.instance, args.solver, args.warm_up_jobs)
        return
    if args.command == "profile":
        profile(args.jobs, SOLVERS[args.policy], args.repeats, args.warm_up_jobs, args.processes)
        return
    if args.command == "profile-process":
        print(json.dumps(profile_process(int(args.jobs), args.solver, int(args.repeats), int(args.warm_up_jobs) or None)))
        return
    if not args.report:
        if not args.gavel_checkout:
            fail("--gavel-checkout: needed to run (or use --report)")
        if not Path(args.gavel_python).is_file():
            fail(f"--gavel-python: {args.gavel_python} not found (make gavel-env builds .venv-gavel)")
        done = subprocess.run(["git", "-C", args.gavel_checkout, "rev-parse", "HEAD"], capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"--gavel-checkout: {args.gavel_checkout} is not a git checkout")
        commit = done.stdout.strip()  # both sides' rows name the Gavel code they were timed against
    args.out.mkdir(parents=True, exist_ok=True)
    runs = args.out / "runs.csv"
    rows = read_rows(runs)
    stored = len(rows)
    if not args.report:
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
                            warm = [] if args.warm_up_jobs is None else ["--warm-up-jobs", str(args.warm_up_jobs)]
                            done = subprocess.run([sys.executable, __file__, "fleetplan-side", str(files[n][0]),
                                                   SOLVERS[policy], *warm], capture_output=True, text=True, check=True)
                            answer = json.loads(done.stdout.strip().splitlines()[-1])
                        else:
                            matrix = work / f"gavel-{policy}-{n}.npy"
                            done = subprocess.run([args.gavel_python, args.gavel_script, str(files[n][1]), policy,
                                                   str(matrix), "--gavel-checkout", args.gavel_checkout],
                                                  capture_output=True, text=True, check=True)
                            answer = json.loads(done.stdout.strip().splitlines()[-1])
                            if answer["commit"] != commit:
                                raise SystemExit(f"the Gavel side timed commit {answer['commit']}, not {commit}")
                            objective, violations = judge_gavel(files[n][0], policy, matrix, answer["types"])
                            answer.update(objective=objective, violations=violations, status="",
                                          solver_only_cpu_s="", solver_only_wall_s="")
                        rows.append({"policy": policy, "gpus": gpus, "jobs": n, "side": which, "repeat": repeat,
                                     **{k: answer.get(k, "") for k in FIELDS[5:12]},
                                     "loadavg_1min": round(os.getloadavg()[0], 2),
                                     "warm_up_jobs": (args.warm_up_jobs or n) if which == "fleetplan" else "",
                                     "gavel_commit": commit})
                        write_rows(runs, rows, FIELDS)
                        print(f"{policy} {n} {which} repeat {repeat}: {float(answer['cpu_s']):.3f} s CPU, "
                              f"objective {answer['objective']}", flush=True)
    table = report(read_rows(runs))
    print(table)
    if args.json:
        print(json.dumps({"gavel_commit": rows[-1]["gavel_commit"] if len(rows) > stored else None,
                          **ratios(rows[stored:] if len(rows) > stored else rows)}))


if __name__ == "__main__":
    main()
