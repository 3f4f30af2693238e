"""Time a scheduling round with fleetplan embedded: a change of 1% of the jobs, from the change to a
judged plan, against a cold ``fleetplan.solve`` of the same final problem from a dict.

    python benchmarks/scripts/embed_rounds.py 10000 --rounds 20
    python benchmarks/scripts/embed_rounds.py 65536 --rounds 10 --solver max-throughput
    python benchmarks/scripts/embed_rounds.py 10000 --rounds 1000 --memory     # the steady loop

Jobs are Gavel-like and all distinct (``throughput_noise=0.1``, the ``gavel-distinct`` suite's
instances); the cluster is the generator's (jobs / 4 workers of each type). Each round
``--change`` of the jobs change: half leave and as many arrive (new jobs drawn from a pool of
the same generator) with ``--mix turnover`` (default: what makes Gavel re-solve); with ``--mix
update`` that many jobs get re-measured throughputs (+-20%) instead. A round's time is
``session.remove_jobs`` + ``add_jobs`` (or ``update_jobs``) + ``session.solve()`` (the solve
judges the plan); the cold baseline, measured on the same round's final problem in the same
process, is ``fleetplan.solve(dict)`` (validating the dict, building the arrays, solving from
scratch, judging). Both are timed in CPU seconds of this process (the machine is shared: wall
time would count other engineers' load) and in wall seconds; medians over the rounds are
printed, with the ratio of the medians. ``--memory`` prints the resident set size every 100
rounds (psutil) instead of timing cold solves. Every round's objective is checked against the
cold solve's (relative 1e-6) unless ``--memory``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fleetplan
from fleetplan.embed import AllocationSession
from fleetplan.instances.allocation import AllocationParams, generated_instance_data


def job_table(jobs: list[dict], types: list[str]) -> dict[str, np.ndarray]:
    """Jobs of the generator's dicts as columns (what a scheduler holds already)."""
    table: dict[str, np.ndarray] = {"id": np.array([job["id"] for job in jobs], dtype=object)}
    table["throughput"] = np.array([[job["throughput"].get(t, 0.0) for t in types] for job in jobs])
    for name, default in (("scale_factor", 1), ("weight", 1.0), ("steps_left", np.nan), ("time_elapsed", 0.0),
                          ("slo_hours", np.nan)):
        table[name] = np.array([job.get(name, default) if job.get(name, default) is not None else np.nan
                                for job in jobs], dtype=float)
    table["scale_factor"] = table["scale_factor"].astype(np.int64)
    return table


def cpu_and_wall(function):
    cpu, wall = time.process_time(), time.perf_counter()
    value = function()
    return value, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", type=int)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--solver", default="max-min-fairness")
    parser.add_argument("--change", type=float, default=0.01, help="share of the jobs changed each round")
    parser.add_argument("--mix", choices=("turnover", "update"), default="turnover")
    parser.add_argument("--memory", action="store_true", help="report memory every 100 rounds, no cold solves")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    changed = max(2, int(round(args.change * args.jobs)))
    pool = generated_instance_data(AllocationParams(jobs=args.jobs + changed * args.rounds, throughput_noise=0.1),
                                   args.seed)
    cluster = generated_instance_data(AllocationParams(jobs=args.jobs, throughput_noise=0.1), args.seed)["worker_types"]
    types = [t["name"] for t in cluster]
    jobs = pool["jobs"]
    table = job_table(jobs, types)
    live = list(range(args.jobs))
    following = args.jobs
    rng = np.random.default_rng(args.seed)
    session = AllocationSession(cluster, {name: column[: args.jobs] for name, column in table.items()},
                                solver=args.solver)
    first = session.solve()
    print(f"{args.jobs} jobs, {args.solver}: first solve {first.status} in {first.wall_s:.3f} s; "
          f"{changed} jobs change a round ({args.mix})")
    warm_cpu, warm_wall, cold_cpu, cold_wall = [], [], [], []
    if args.memory:
        import psutil

        process = psutil.Process()
    for round_number in range(1, args.rounds + 1):
        if args.mix == "turnover":
            leaving_at = rng.choice(len(live), size=changed // 2, replace=False)
            leaving = [jobs[live[k]]["id"] for k in leaving_at]
            arriving = list(range(following, following + changed - changed // 2))
            following += len(arriving)
            keep = np.ones(len(live), dtype=bool)
            keep[leaving_at] = False
            live = [m for m, kept in zip(live, keep, strict=True) if kept] + arriving
            batch = {name: column[arriving] for name, column in table.items()}

            def change(leaving=leaving, batch=batch):
                session.remove_jobs(leaving)
                session.add_jobs(batch)
        else:
            rows = rng.choice(len(live), size=changed, replace=False)
            factor = rng.uniform(0.8, 1.2, size=(changed, len(types)))
            ids = [jobs[live[k]]["id"] for k in rows]
            new = table["throughput"][[live[k] for k in rows]] * factor
            table["throughput"][[live[k] for k in rows]] = new
            for k, m in enumerate(rows):
                job = jobs[live[m]]
                job["throughput"] = {t: float(new[k, j]) for j, t in enumerate(types) if job["throughput"].get(t, 0) > 0}

            def change(ids=ids, new=new):
                session.update_jobs({"id": ids, "throughput": new})

        result, cpu, wall = cpu_and_wall(lambda: (change(), session.solve())[1])
        warm_cpu.append(cpu)
        warm_wall.append(wall)
        if args.memory:
            if round_number % 100 == 0 or round_number == 1:
                print(f"round {round_number}: rss {process.memory_info().rss / 2**20:.1f} MiB, "
                      f"{result.status}, {result.wall_s * 1e3:.1f} ms")
            continue
        data = {"kind": "allocation", "worker_types": cluster, "jobs": [jobs[m] for m in live]}
        cold, cpu, wall = cpu_and_wall(lambda data=data: fleetplan.solve(data, args.solver))
        cold_cpu.append(cpu)
        cold_wall.append(wall)
        if abs(cold.objective - result.objective) > 1e-6 * max(1.0, abs(cold.objective)):
            raise SystemExit(f"round {round_number}: session objective {result.objective!r} != cold {cold.objective!r}")
        if result.status != cold.status:
            raise SystemExit(f"round {round_number}: status {result.status} != cold {cold.status}")
    median = statistics.median
    print(f"round (change + solve + judge): median {median(warm_cpu) * 1e3:.1f} ms CPU, "
          f"{median(warm_wall) * 1e3:.1f} ms wall over {args.rounds} rounds")
    if cold_cpu:
        print(f"cold fleetplan.solve(dict): median {median(cold_cpu) * 1e3:.1f} ms CPU, {median(cold_wall) * 1e3:.1f} ms wall")
        print(f"ratio of medians: {median(warm_cpu) / median(cold_cpu):.3f} (CPU), "
              f"{median(warm_wall) / median(cold_wall):.3f} (wall); objectives equal to 1e-6 in every round")


if __name__ == "__main__":
    main()
