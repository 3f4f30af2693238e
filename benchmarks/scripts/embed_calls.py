"""Time a binpack or reservation session call against a cold ``fleetplan.solve`` from a dict.

    python benchmarks/scripts/embed_calls.py binpack --machines 64000 --calls 20
    python benchmarks/scripts/embed_calls.py reservation --servers 20000 --calls 5

binpack: MAST's largest region (20 dynamic clusters; ``--machines`` GPU machines of 8 GPUs),
one workload placed per call (``BinpackSession.place``, the plan applied) against a cold
``fleetplan.solve(dict, "rms-greedy")`` of the same region and workload (the file's dict:
validation, arrays, the greedy, the judge); the plans are checked equal.

reservation: a generated region of ``--servers`` servers; each call sends one rack (chosen at
random) into maintenance (the previous one comes back) and re-solves (``ReservationSession.solve``,
``mip-highs``, the plan applied), against a cold ``fleetplan.solve(dict, "mip-highs",
warm_start="current")`` of the same instance; the objectives are checked equal to the MIP gap.

Medians of CPU and wall seconds of this process over the calls are printed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fleetplan
from fleetplan.embed import BinpackSession, ReservationSession
from fleetplan.instances.base import parse_json_text, to_json_text


def timed(function):
    cpu, wall = time.process_time(), time.perf_counter()
    value = function()
    return value, time.process_time() - cpu, time.perf_counter() - wall


def binpack(args) -> tuple[list, list]:
    region = fleetplan.generate("binpack", {"clusters": 20, "machines": args.machines, "workloads": args.calls,
                                            "load": 0.9}, seed=args.seed)
    pool = [{**w.model_dump(), "id": f"pending-{k}"} for k, w in enumerate(region.workloads)]
    session = BinpackSession(region)
    warm, cold = [], []
    for workload in pool:
        data = parse_json_text(to_json_text(session.instance([workload])))
        reference, cpu, wall = timed(lambda data=data: fleetplan.solve(data, "rms-greedy"))
        cold.append((cpu, wall))
        result, cpu, wall = timed(lambda workload=workload: session.place(workload))
        warm.append((cpu, wall))
        assert result.plan.model_dump() == reference.plan.model_dump()
    print(f"binpack: {args.machines} machines, {len(region.arrays().running_ids)} running jobs, {args.calls} calls")
    return warm, cold


def reservation(args) -> tuple[list, list]:
    region = fleetplan.generate("reservation", {"servers": args.servers}, seed=args.seed)
    session = ReservationSession(region, solver="mip-highs", time_limit=120)
    session.solve()
    warm, cold = [], []
    arrays = session.instance().arrays()
    racks = np.random.default_rng(args.seed).choice(len(arrays.rack_ids), size=args.calls, replace=False)
    for call in range(args.calls):
        if call:  # yesterday's rack is back
            session.set_maintenance(np.flatnonzero(arrays.server_rack == racks[call - 1]), on=False)
        session.set_maintenance(np.flatnonzero(arrays.server_rack == racks[call]))
        data = parse_json_text(to_json_text(session.instance()))
        reference, cpu, wall = timed(lambda data=data: fleetplan.solve(data, "mip-highs", time_limit=120,
                                                                       warm_start="current"))
        cold.append((cpu, wall))
        result, cpu, wall = timed(session.solve)
        warm.append((cpu, wall))
        assert result.status == reference.status
        assert abs(result.objective - reference.objective) <= 1e-4 * abs(reference.objective)
    print(f"reservation: {args.servers} servers, {args.calls} re-solves after a rack's maintenance")
    return warm, cold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("binpack", "reservation"))
    parser.add_argument("--machines", type=int, default=64_000)
    parser.add_argument("--servers", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warm, cold = binpack(args) if args.kind == "binpack" else reservation(args)
    median = statistics.median
    for name, rows in (("session call", warm), ("cold fleetplan.solve(dict)", cold)):
        print(f"{name}: median {median(r[0] for r in rows) * 1e3:.1f} ms CPU, {median(r[1] for r in rows) * 1e3:.1f} ms wall")
    print(f"ratio of medians: {median(r[0] for r in warm) / median(r[0] for r in cold):.3f} (CPU)")


if __name__ == "__main__":
    main()
