"""Speed measurements on RAS regions (MAST §2), as in benchmarks/results/reservation.md's RAS
section. Each prints CPU and wall seconds and the load average.

    .venv/bin/python benchmarks/scripts/ras_speed.py solve 100000 cpsat 120 warm_start=relax-and-fix
    .venv/bin/python benchmarks/scripts/ras_speed.py solve 1000000 mip-highs 600 threads=2
    .venv/bin/python benchmarks/scripts/ras_speed.py lp 1000000 ipm 540
    .venv/bin/python benchmarks/scripts/ras_speed.py lp 100000 simplex 60 on cuts
    .venv/bin/python benchmarks/scripts/ras_speed.py trajectory 100000 240 off
    .venv/bin/python benchmarks/scripts/ras_speed.py relaxation 1000000

Regions: 10^4 servers x 100 reservations x 6 datacenters, 10^5 x 200 x 8, 10^6 x 1,000 x 12 (10
fault domains each), seed 0. ``trajectory`` runs HiGHS on the aggregated model from the
greedy's plan and prints its incumbent and bound every 2 s.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

import fleetplan
from fleetplan.models.reservation import build, counts_from_assignment, full_solution

REGIONS = {10_000: {"reservations": 100, "datacenters": 6}, 100_000: {"reservations": 200, "datacenters": 8},
           1_000_000: {"reservations": 1000, "datacenters": 12, "fault_domains_per_datacenter": 10}}


def region(servers: int):
    return fleetplan.generate("reservation", {"servers": servers, **REGIONS[servers]}, seed=0)


def cpu_now() -> float:
    """CPU seconds of this process and of its finished children (mip-highs runs its HiGHS
    MIPs in forked children: fleetplan/solvers/reservation/bounded.py)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def clock(cpu: float, wall: float) -> str:
    return f"cpu {cpu_now() - cpu:.1f} s, wall {time.perf_counter() - wall:.1f} s, load {os.getloadavg()[0]:.1f}"


def solve(servers: int, solver: str, limit: float, options: list[str]) -> None:
    instance = region(servers)
    chosen = dict(option.split("=", 1) for option in options)
    threads = int(chosen.pop("threads", 1))
    cpu, wall = cpu_now(), time.perf_counter()
    result = fleetplan.solve(instance, solver, time_limit=limit, threads=threads, **chosen)
    gap = (result.objective - result.bound) / result.objective if result.bound is not None else None
    above = "" if gap is None else f" ({100 * gap:.3f} % above the bound)"
    print(f"{servers} {solver} {chosen} threads {threads} limit {limit}: {result.status}, objective {result.objective}, "
          f"bound {result.bound}, gap {gap}{above}; {clock(cpu, wall)}")
    for line in [line for line in result.log[:-8] if "Lagrangian" in line or "relaxation" in line] + result.log[-8:]:
        print("   ", line)


def lp(servers: int, algorithm: str, limit: float, crossover: str = "on", cuts: str = "nocuts") -> None:
    """The model's LP relaxation; ``cuts``: with the rows of fleetplan/models/reservation/cuts.py."""
    from fleetplan.models.reservation.cuts import with_cuts
    from fleetplan.solvers import highs as runner

    instance = region(servers)
    model = build(instance.arrays())
    relaxed = with_cuts(model, instance.arrays()) if cuts == "cuts" else model.lp
    cpu, wall = cpu_now(), time.perf_counter()
    highs = runner.new_highs(limit, 1, 0)
    runner.pass_lp(highs, relaxed, algorithm)
    if algorithm == "ipm":
        highs.setOptionValue("run_crossover", crossover)
    highs.setOptionValue("solve_relaxation", True)
    highs.run()
    print(f"{servers} LP by {algorithm} ({cuts}, {relaxed.num_rows} rows): {highs.modelStatusToString(highs.getModelStatus())}, "
          f"{highs.getInfo().objective_function_value + model.constant:.2f}; {clock(cpu, wall)}")


def relaxation(servers: int) -> None:
    """The LP bound of the datacenter relaxation (fleetplan/models/reservation/relaxation.py)."""
    from fleetplan.models.reservation.relaxation import datacenter_relaxation
    from fleetplan.solvers import highs as runner

    instance = region(servers)
    cpu, wall = cpu_now(), time.perf_counter()
    model = build(instance.arrays())
    relaxed = datacenter_relaxation(model, instance.arrays())
    highs = runner.new_highs(None, 1, 0)
    runner.pass_lp(highs, relaxed, "simplex")
    highs.setOptionValue("solve_relaxation", True)
    highs.run()
    print(f"{servers} datacenter relaxation ({relaxed.num_cols} columns, {relaxed.num_rows} rows): "
          f"{highs.modelStatusToString(highs.getModelStatus())}, "
          f"{highs.getInfo().objective_function_value + model.constant:.2f}; {clock(cpu, wall)}")


def trajectory(servers: int, limit: float, presolve: str) -> None:
    import highspy

    from fleetplan.solvers import highs as runner
    from fleetplan.solvers.reservation.exact import PRESOLVE_RULES_OFF
    from fleetplan.solvers.reservation.heuristics import ras_greedy

    instance = region(servers)
    cpu, wall = cpu_now(), time.perf_counter()
    model = build(instance.arrays())
    greedy = ras_greedy(instance, time_limit=None, seed=0, threads=1, progress=lambda *args: None)
    counts = counts_from_assignment(model, instance.arrays(), greedy.plan.assignment_array(instance))
    start = full_solution(model, counts)
    print(f"model and greedy ({greedy.objective:.2f}): {clock(cpu, wall)}", flush=True)
    highs = runner.new_highs(limit, 1, 0)
    runner.pass_lp(highs, model.lp, "simplex")
    highs.setOptionValue("solver", "choose")
    highs.changeObjectiveOffset(float(model.constant))
    highs.setOptionValue("presolve", presolve)
    if presolve != "off":
        highs.setOptionValue("presolve_rule_off", PRESOLVE_RULES_OFF)
    solution = highspy.HighsSolution()
    solution.col_value = np.asarray(start).tolist()
    solution.value_valid = True
    highs.setSolution(solution)
    cpu, wall, last = cpu_now(), time.perf_counter(), [0.0]

    def report(event) -> None:
        if time.perf_counter() - last[0] > 2.0:
            last[0] = time.perf_counter()
            primal, dual = event.data_out.mip_primal_bound, event.data_out.mip_dual_bound
            print(f"incumbent {primal:.2f}, bound {dual:.2f}, gap {(primal - dual) / primal:.2%}; "
                  f"{clock(cpu, wall)}", flush=True)

    highs.cbMipInterrupt += report
    highs.run()
    info = highs.getInfo()
    print(f"end: {info.objective_function_value:.2f}, bound {info.mip_dual_bound:.2f}; {clock(cpu, wall)}")


if __name__ == "__main__":
    command, servers, *rest = sys.argv[1:]
    if command == "solve":
        solve(int(servers), rest[0], float(rest[1]), rest[2:])
    elif command == "lp":
        lp(int(servers), rest[0], float(rest[1]), *rest[2:])
    elif command == "relaxation":
        relaxation(int(servers))
    elif command == "trajectory":
        trajectory(int(servers), float(rest[0]), rest[1])
    else:
        raise SystemExit(f"unknown command {command!r} (solve, lp, relaxation, trajectory)")
