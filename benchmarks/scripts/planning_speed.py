"""Planning speed (the planning issue's targets), timed as a user pays: whole processes.

    python benchmarks/scripts/planning_speed.py size JOBS [--repeats N]
        `fleetplan size` on a generated instance of JOBS distinct jobs (throughput noise 0.1),
        target min_time_share>=0.5, V100/P100/K80 buyable: CPU and wall seconds of the process,
        status and gap (median of the repeats).
    python benchmarks/scripts/planning_speed.py whatif JOBS [--points 20] [--executor local|dask]
        a sweep of the V100 count over POINTS values under max-min fairness against one cold
        `fleetplan solve` of the same instance (both whole processes; dask: a one-worker cluster
        started on loopback for the run, its start-up not counted).
    python benchmarks/scripts/planning_speed.py size-policy INSTANCE.json --target T --buy B [--buy ...]
        `fleetplan size INSTANCE --policy max-min-fairness` (the lattice search), whole processes:
        CPU and wall seconds, status, cost, bound, gap and the purchases checked (JOBS is ignored).
    python benchmarks/scripts/planning_speed.py marginal JOBS [--repeats N]
        `fleetplan.marginal_values` (4 GPU types, one more and one fewer each: 8 re-solves, each
        warm from the base) in this process (workers=1) and spread over forked processes (the
        default, or --workers N), against one cold max-min-fairness solve of the same instance:
        wall and CPU seconds (the children's CPU included). --without-ceiling-try: both without
        max-min fairness's weighted refinement tried first at the jobs' best-score bound.
    python benchmarks/scripts/planning_speed.py marginal-profile JOBS [--repeats N]
        a CPU timer around each part of N marginal_values calls in one process (session set-up,
        base solve, re-solves, the structure re-solve and how its calls ended, the judge, ...),
        cProfile's top functions over N more, and the largest relative difference of any answer
        (objective, metric) to a cold solve of the changed instance.
    python benchmarks/scripts/planning_speed.py duals JOBS [--repeats N]
        max-min fairness and max throughput in one process with the dual prices read and with
        their reading switched off, alternating: what the prices add to a solve.

Prints one JSON line per measurement. Nothing here is imported by fleetplan.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLEETPLAN = [sys.executable, "-m", "fleetplan"]
CEILING_TRY = True  # see without_ceiling_try


def run(argv: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one child process (its children included), and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    return wall, cpu, done.stdout


def instance(folder: Path, jobs: int) -> Path:
    path = folder / f"distinct-{jobs}.json"
    if not path.exists():
        subprocess.run([*FLEETPLAN, "generate", "allocation", "--jobs", str(jobs), "--throughput_noise", "0.1",
                        "--seed", "0", "-o", str(path)], check=True, capture_output=True)
    return path


def bench_size(folder: Path, jobs: int, repeats: int) -> None:
    path = instance(folder, jobs)
    rows = []
    for _ in range(repeats):
        wall, cpu, out = run([*FLEETPLAN, "size", str(path), "--target", "min_time_share>=0.5", "--buy", "v100",
                              "--buy", "p100", "--buy", "k80", "--json"])
        data = json.loads(out)
        rows.append({"wall_s": wall, "cpu_s": cpu, "status": data["status"], "gap": data["gap"],
                     "cost": data["cost"], "bound": data["bound"], "mip_s": data["stats"].get("mip_s")})
    print(json.dumps({"what": "size", "jobs": jobs, "load": os.getloadavg()[0],
                      "median_cpu_s": statistics.median(r["cpu_s"] for r in rows),
                      "median_wall_s": statistics.median(r["wall_s"] for r in rows), "runs": rows}))


def bench_whatif(folder: Path, jobs: int, points: int, executor: str, repeats: int) -> None:
    path = instance(folder, jobs)
    data = json.loads(path.read_text())
    count = data["worker_types"][0]["count"]
    step = max(1, count // points)
    stop = step * points
    cold, sweep = [], []
    extra: list[str] = []
    cluster = None
    if executor == "dask":
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None)
        extra = ["--executor", "dask", "--address", cluster.scheduler_address]
    try:
        for repeat in range(repeats):
            wall, cpu, _ = run([*FLEETPLAN, "solve", str(path), "--json", "-o", str(folder / "cold.json")])
            cold.append({"wall_s": wall, "cpu_s": cpu})
            out = folder / f"sweep-{executor}-{repeat}"
            wall, cpu, text = run([*FLEETPLAN, "whatif", str(path), "--vary",
                                   f"worker_types.{data['worker_types'][0]['name']}.count={step}:{stop}:{step}",
                                   "-o", str(out), "--json", *extra])
            rows = json.loads(text)["rows"]
            sweep.append({"wall_s": wall, "cpu_s": cpu, "points": len(rows),
                          "failed": sum(r["status"] not in ("optimal", "feasible") for r in rows)})
    finally:
        if cluster is not None:
            cluster.close()
    cold_wall = statistics.median(r["wall_s"] for r in cold)
    sweep_wall = statistics.median(r["wall_s"] for r in sweep)
    print(json.dumps({"what": "whatif", "jobs": jobs, "executor": executor, "load": os.getloadavg()[0],
                      "cold_solve_wall_s": cold_wall, "sweep_wall_s": sweep_wall,
                      "ratio_wall": sweep_wall / cold_wall, "cold": cold, "sweep": sweep}))


def bench_duals(jobs: int, repeats: int) -> None:
    import fleetplan
    from fleetplan.solvers import highs
    from fleetplan.solvers.allocation import lp, policies

    instance_ = fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1}, seed=0)
    real = policies.policy_duals
    real_prices, real_run = lp._lp_prices, highs.run

    def run_without_duals(solver_):
        outcome = real_run(solver_)
        outcome.row_duals = None
        return outcome
    for solver in ("max-min-fairness", "max-throughput"):
        times: dict[str, list[float]] = {"with": [], "without": []}
        fleetplan.solve(instance_, solver)  # warm the imports
        for _ in range(repeats):
            for mode in ("with", "without"):
                # without: the prices are neither read from HiGHS nor converted nor kept
                policies.policy_duals = real if mode == "with" else (lambda *args: {})
                lp._lp_prices = real_prices if mode == "with" else (lambda *args: (None, None))
                highs.run = real_run if mode == "with" else run_without_duals
                started = time.process_time()
                result = fleetplan.solve(instance_, solver)
                times[mode].append(time.process_time() - started)
                assert bool(result.duals) == (mode == "with")
        policies.policy_duals, lp._lp_prices, highs.run = real, real_prices, real_run
        with_s, without_s = statistics.median(times["with"]), statistics.median(times["without"])
        print(json.dumps({"what": "duals", "jobs": jobs, "solver": solver, "load": os.getloadavg()[0],
                          "median_cpu_with_s": with_s, "median_cpu_without_s": without_s,
                          "added": with_s / without_s - 1}))


def bench_size_policy(path: str, targets: list[str], buy: list[str], repeats: int) -> None:
    rows = []
    for _ in range(repeats):
        argv = [*FLEETPLAN, "size", path, *sum((["--target", t] for t in targets), []),
                *sum((["--buy", b] for b in buy), []), "--policy", "max-min-fairness", "--json"]
        wall, cpu, out = run(argv)
        data = json.loads(out)
        rows.append({"wall_s": wall, "cpu_s": cpu, "status": data["status"], "cost": data["cost"],
                     "bound": data["bound"], "gap": data["gap"], "points": data["stats"].get("points_checked")})
    print(json.dumps({"what": "size-policy", "instance": path, "load": os.getloadavg()[0],
                      "median_cpu_s": statistics.median(r["cpu_s"] for r in rows),
                      "median_wall_s": statistics.median(r["wall_s"] for r in rows), "runs": rows}))


def marginal_instance(jobs: int):
    """The marginal-values instance: JOBS distinct jobs (throughput noise 0.1) on V100, P100, K80
    and a fourth type 1.8-2.6 times a V100 per job (drawn: an exact multiple ties every job's two
    fastest types, which the price decomposition leaves to the full LP), so four prices are measured."""
    import numpy as np

    import fleetplan

    data = fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1, "worker_types":
                                             ["v100", "p100", "k80"]}, seed=0).model_dump()
    rng = np.random.default_rng(1)
    data["worker_types"].append({"name": "h100", "count": data["worker_types"][0]["count"], "cost_per_hour": 4.5})
    for job in data["jobs"]:
        job["throughput"]["h100"] = float(job["throughput"]["v100"] * rng.uniform(1.8, 2.6))
    return fleetplan.instances.instance_from_data(data)


def without_ceiling_try() -> None:
    """Switch off, for this process, the weighted refinement that max-min fairness tries first at
    the jobs' best-score bound (``lp._refine_at_ceiling``): on the marginal instance it does not
    certify and costs the cold solve (and the base solve) its time; the re-solves never try it."""
    from fleetplan.solvers.allocation import lp

    global CEILING_TRY
    CEILING_TRY = False
    lp._refine_at_ceiling = lambda *args, **kwargs: None


def bench_marginal(jobs: int, repeats: int, workers: int | None) -> None:
    import fleetplan

    instance_ = marginal_instance(jobs)
    fleetplan.solve(instance_, "max-min-fairness")  # the imports, outside the clock

    def clocked(call) -> tuple[float, float]:
        """Wall and CPU seconds of ``call()``, the CPU of forked children included."""
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu, wall = time.process_time(), time.perf_counter()
        call()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, cpu + (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)

    runs: dict[str, list[tuple[float, float]]] = {"cold": [], "sequential": [], "parallel": []}
    workers = None if workers is None or workers <= 0 else workers
    for _ in range(repeats):
        runs["cold"].append(clocked(lambda: fleetplan.solve(instance_, "max-min-fairness")))
        runs["sequential"].append(clocked(lambda: fleetplan.marginal_values(instance_, "max-min-fairness", workers=1)))
        runs["parallel"].append(clocked(lambda: fleetplan.marginal_values(instance_, "max-min-fairness",
                                                                          workers=workers)))
    from fleetplan.planning.marginal import default_workers

    median = {what: (statistics.median(w for w, _ in rows), statistics.median(c for _, c in rows))
              for what, rows in runs.items()}
    print(json.dumps({"what": "marginal", "jobs": jobs, "load": os.getloadavg()[0], "commit": _commit(),
                      "ceiling_try": CEILING_TRY,
                      "workers": workers or default_workers(8, median["cold"][0]),
                      **{f"{what}_{clock}_s": value[k] for what, value in median.items()
                         for k, clock in enumerate(("wall", "cpu"))},
                      "ratio_wall_sequential": median["sequential"][0] / median["cold"][0],
                      "ratio_wall_parallel": median["parallel"][0] / median["cold"][0],
                      "ratio_cpu_parallel": median["parallel"][1] / median["cold"][1]}))


# What a marginal_values call spends its time on: (label, module, attribute[, class]) of each part.
PROFILED = (("marginal_values (whole call)", "fleetplan.planning.marginal", "marginal_values"),
            ("session set-up (the jobs as columns)", "fleetplan.embed.allocation", "from_instance",
             "AllocationSession"),
            ("base solve + 8 re-solves, each judged", "fleetplan.embed.allocation", "solve", "AllocationSession"),
            ("the 8 re-solves, each judged (and the fork, if any)", "fleetplan.runs.shared", "run_shared"),
            ("re-solve from the base's structure", "fleetplan.solvers.allocation.price_decomposition.separable_structure",
             "resolve_structure"),
            ("decomposition from prices (base; a re-solve whose structure fails)",
             "fleetplan.solvers.allocation.price_decomposition.separable", "_max_min"),
            ("weighted refinement tried at the ceiling (base)", "fleetplan.solvers.allocation.lp",
             "_refine_at_ceiling"),
            ("judge, evaluate() (base and re-solves)", "fleetplan.solvers.base", "_judge"),
            ("plan built from the matrix (base and re-solves)", "fleetplan.instances.allocation", "from_matrix",
             "AllocationPlan"))


ROUNDS: dict[str, int] = {}  # the structure re-solves' endings, counted by _timed_parts


def _against_cold(instance_) -> float:
    """The largest relative difference, over the 8 units, the objective and every reported
    metric, between marginal_values' answer (base + change) and a cold solve of the changed
    instance (relative to max(1e-9, |cold|))."""
    import fleetplan
    from fleetplan.planning.marginal import allocation_units

    values = fleetplan.marginal_values(instance_, "max-min-fairness", workers=1)
    worst = 0.0
    for value, (_, _, more, fewer) in zip(values.values, allocation_units(instance_), strict=True):
        for change, build in ((value.more, more), (value.fewer, fewer)):
            if change is None:  # a GPU type with none to remove
                continue
            cold = fleetplan.solve(build().instance(), "max-min-fairness")
            answers = {"objective": (values.objective, cold.objective)}
            answers.update({name: (values.metrics[name], cold.evaluation.metrics[name]) for name in change
                            if name != "objective"})
            for name, (base, exact) in answers.items():
                worst = max(worst, abs(base + change[name] - exact) / max(1e-9, abs(exact)))
    return worst


def _timed_parts(spent: dict[str, list[float]]) -> None:
    """Wrap each part of PROFILED so that its calls add [calls, CPU seconds] to ``spent``."""
    import functools
    import importlib

    for label, module_name, attribute, *owner in PROFILED:
        spent[label] = [0, 0.0]
        try:  # a part the code being measured does not have (an older commit's) stays at 0
            holder = importlib.import_module(module_name)
        except ImportError:
            continue
        holder = getattr(holder, owner[0]) if owner else holder
        raw = holder.__dict__.get(attribute)
        if raw is None:
            continue
        function = raw.__func__ if isinstance(raw, classmethod) else raw

        def timed(*args, _function=function, _label=label, _attribute=attribute, **kwargs):
            started = time.process_time()
            result = None
            try:
                result = _function(*args, **kwargs)
                return result
            finally:
                spent[_label][0] += 1
                spent[_label][1] += time.process_time() - started
                if _attribute == "resolve_structure" and result is not None:  # how its calls ended
                    ending = f"{result.status} in {int(result.stats.get('separable_rounds', 0))} round(s)"
                    ROUNDS[ending] = ROUNDS.get(ending, 0) + 1

        timed = functools.wraps(function)(timed)
        setattr(holder, attribute, classmethod(timed) if isinstance(raw, classmethod) else timed)


def bench_marginal_profile(jobs: int, repeats: int) -> None:
    """REPEATS calls of marginal_values in one process, twice: with a CPU timer around each part
    of PROFILED (what a call spends, near-free to measure), and under cProfile (its own overhead
    per Python call inflates call-heavy parts: reading 16,384 job objects into columns is 100,000
    attribute reads). Per call: the CPU seconds of each part and its share of the whole."""
    import cProfile
    import pstats

    import fleetplan

    instance_ = marginal_instance(jobs)
    fleetplan.marginal_values(instance_, "max-min-fairness", workers=1)  # imports and first-call costs
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for _ in range(repeats):
        fleetplan.marginal_values(instance_, "max-min-fairness", workers=1)
    profiler.disable()
    top = pstats.Stats(profiler).stats  # {(file, line, name): (calls, primitive, own, cumulative, callers)}
    spent: dict[str, list[float]] = {}
    _timed_parts(spent)
    from fleetplan.planning import marginal  # looked up at each call, so the timed one runs

    for _ in range(repeats):
        marginal.marginal_values(instance_, "max-min-fairness", workers=1)
    whole = spent[PROFILED[0][0]][1]
    timers = {label: {"calls": calls / repeats, "cpu_s": seconds / repeats, "share": seconds / whole}
              for label, (calls, seconds) in spent.items()}
    by_cumulative = sorted(top.items(), key=lambda item: -item[1][3])
    profiled_whole = next(value[3] for (path, _, name), value in by_cumulative if name == "marginal_values")
    cprofile = [{"function": f"{Path(path).parent.name}/{Path(path).name}:{name}", "calls": value[0] / repeats,
                 "cpu_s": value[3] / repeats, "share": value[3] / profiled_whole}
                for (path, _, name), value in by_cumulative if "fleetplan" in path][:25]
    print(json.dumps({"what": "marginal-profile", "jobs": jobs, "repeats": repeats, "load": os.getloadavg()[0],
                      "commit": _commit(), "ceiling_try": CEILING_TRY, "timers": timers,
                      "structure_re_solves": {ending: count / repeats for ending, count in ROUNDS.items()},
                      "largest_relative_difference_to_cold": _against_cold(instance_), "cprofile_top": cprofile}))


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parent)
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("size", "size-policy", "marginal", "marginal-profile", "whatif", "duals"))
    parser.add_argument("jobs", help="distinct jobs (size-policy: the instance file)")
    parser.add_argument("--target", action="append", default=[])
    parser.add_argument("--buy", action="append", default=[])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--points", type=int, default=20)
    parser.add_argument("--workers", type=int, default=0, help="marginal: processes (0: the default)")
    parser.add_argument("--executor", choices=("local", "dask"), default="local")
    parser.add_argument("--folder", default=None, help="keep the generated instances here")
    parser.add_argument("--without-ceiling-try", action="store_true",
                        help="marginal, marginal-profile: max-min fairness without its weighted ceiling try")
    args = parser.parse_args()
    folder = Path(args.folder or tempfile.mkdtemp(prefix="planning-speed-"))
    folder.mkdir(parents=True, exist_ok=True)
    if args.what == "size-policy":
        bench_size_policy(args.jobs, args.target, args.buy, args.repeats)
        return
    jobs = int(args.jobs)
    if args.without_ceiling_try:
        without_ceiling_try()
    if args.what == "size":
        bench_size(folder, jobs, args.repeats)
    elif args.what == "marginal":
        bench_marginal(jobs, args.repeats, args.workers)
    elif args.what == "marginal-profile":
        bench_marginal_profile(jobs, args.repeats)
    elif args.what == "whatif":
        bench_whatif(folder, jobs, args.points, args.executor, args.repeats)
    else:
        bench_duals(jobs, args.repeats)


if __name__ == "__main__":
    main()
