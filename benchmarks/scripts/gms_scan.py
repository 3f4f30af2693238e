"""Time of one GMS-scan pass (MAST §4.2, §5.4: about 34 s in Python for 6,000-10,000 workloads;
the goal here: under 0.1 s for 10,000 pending workloads across 200 tenants).

    .venv/bin/python benchmarks/scripts/gms_scan.py [--workloads 10000] [--tenants 200] [--runs 7] [--seed 0]

The queue: tenants of Zipf-like sizes (a few tenants own most workloads), GPUs per workload 16 /
64 / 128 at P50 / P90 / P99, 4 to 12 CPUs per GPU, exponential ages, quotas
drawn so that a good share of tenants run out (over-quota workloads and refusals followed by
fits). Prints the median CPU and wall time of ``--runs`` scans, and the same for the plain
one-workload-at-a-time quota scan (:func:`fleetplan.sim.mast.gms.sequential_quota_scan`) on the
same queue, with the counts the scan produced.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from fleetplan.sim.mast.gms import GmsParameters, gms_scan, sequential_quota_scan


def make_queue(workloads: int, tenants: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    weight = 1.0 / np.arange(1, tenants + 1) ** 1.1
    tenant = rng.choice(tenants, size=workloads, p=weight / weight.sum())
    u = rng.random(workloads)
    gpus = np.select([u < 0.5, u < 0.9, u < 0.99], [rng.choice([1, 8, 16], workloads), 64, 128], 256).astype(float)
    cpus = gpus * rng.integers(4, 13, workloads)
    demand = np.bincount(tenant, weights=gpus, minlength=tenants)
    # Quotas between a quarter and twice each tenant's pending demand; running use up to 60% of it.
    gpu_quota = np.ceil(demand * rng.uniform(0.25, 2.0, tenants) + 8)
    cpu_quota = gpu_quota * 10
    return {
        "tenant": tenant, "age_hours": rng.exponential(3.0, workloads), "gpus": gpus, "cpus": cpus,
        "tenant_priority": rng.integers(0, 7, tenants), "tenant_gpu_quota": gpu_quota,
        "tenant_cpu_quota": cpu_quota, "tenant_gpus_used": np.floor(gpu_quota * rng.uniform(0, 0.6, tenants)),
        "tenant_cpus_used": np.floor(cpu_quota * rng.uniform(0, 0.6, tenants)),
        "tenant_window_usage": rng.exponential(100.0, tenants),
    }


def timed(function, runs: int) -> tuple[float, float, object]:
    cpu, wall, result = [], [], None
    for _ in range(runs):
        c0, w0 = time.process_time(), time.perf_counter()
        result = function()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--tenants", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    queue = make_queue(args.workloads, args.tenants, args.seed)
    params = GmsParameters()
    gms_scan(**queue, params=params)  # warm-up: first-call imports and allocations
    cpu, wall, scan = timed(lambda: gms_scan(**queue, params=params), args.runs)
    by_credit = np.argsort(-scan.credit, kind="stable")
    seq_args = (queue["tenant"], queue["gpus"], queue["cpus"], by_credit, queue["tenant_gpu_quota"],
                queue["tenant_cpu_quota"], queue["tenant_gpus_used"], queue["tenant_cpus_used"])
    seq_cpu, seq_wall, within = timed(lambda: sequential_quota_scan(*seq_args), args.runs)
    assert np.array_equal(within, scan.within_quota), "vectorised and sequential scans disagree"
    refused = ~scan.within_quota
    assert np.array_equal(np.sort(scan.order), np.arange(args.workloads))
    # A tenant "refuses then fits" when some workload of it is refused and a lower-credit one admitted.
    rank = np.empty(args.workloads, dtype=np.int64)
    rank[by_credit] = np.arange(args.workloads)
    first_refusal = np.full(args.tenants, args.workloads)
    np.minimum.at(first_refusal, queue["tenant"][refused], rank[refused])
    late_fit = scan.within_quota & (rank > first_refusal[queue["tenant"]])
    print(f"workloads {args.workloads}, tenants {args.tenants}, seed {args.seed}, runs {args.runs}")
    print(f"over quota: {int(refused.sum())} workloads; tenants with a refusal: "
          f"{int((first_refusal < args.workloads).sum())}; admitted after a refusal: {int(late_fit.sum())}")
    print(f"gms_scan (vectorised): median CPU {cpu * 1e3:.2f} ms, wall {wall * 1e3:.2f} ms")
    print(f"quota scan alone, one workload at a time: median CPU {seq_cpu * 1e3:.2f} ms, wall {seq_wall * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
