"""Peak memory and time of generating (and saving) instances and of running simulators, at the
sizes the estimates of fleetplan.instances.resources were fitted to.

    .venv/bin/python benchmarks/scripts/sizes.py [--quick]

Each size runs in a fresh process; the figure is the peak resident memory over the process's
own before the work (``ru_maxrss``, the generator and ``save``, or the simulation) and the wall
time of the work, beside the estimate the toolkit makes before trying. ``--quick`` skips the
sizes that take more than a few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

GENERATE = [
    ("allocation", {"jobs": 100_000}), ("allocation", {"jobs": 1_000_000}),
    ("allocation", {"jobs": 1000, "entities": 100_000}),
    ("placement", {"tables": 100_000, "jobs": 1000}), ("placement", {"tables": 1000, "jobs": 100_000}),
    ("placement", {"tables": 200_000, "jobs": 200_000}),
    ("reservation", {"servers": 100_000}), ("reservation", {"servers": 1_000_000}),
    ("binpack", {"machines": 10_000, "workloads": 1000, "clusters": 20}),
    ("binpack", {"machines": 10_000, "cpu_machines": 50_000, "workloads": 1000, "clusters": 20}),
    ("binpack", {"machines": 10_000, "workloads": 10_000, "clusters": 20}),
    ("binpack", {"machines": 100_000, "workloads": 1000, "clusters": 20}),
    ("binpack", {"machines": 100_000, "cpu_machines": 500_000, "workloads": 100_000, "clusters": 200}),
]
SIMULATE = [
    ("cluster", {"jobs": 100_000, "rate_per_hour": 1000, "max_time_s": 1}),
    ("cluster", {"jobs": 1_000_000, "generate": "philly", "max_time_s": 1}),
    ("mast", {"regions": 16}), ("mast", {"regions": 64}), ("mast", {"regions": 128}),
    ("parsync", {}), ("parsync", {"slots": 2_000_000, "partitions": 20}),
]
SLOW = {json.dumps(p, sort_keys=True) for p in (
    {"jobs": 1_000_000}, {"tables": 200_000, "jobs": 200_000}, {"servers": 1_000_000},
    {"machines": 100_000, "cpu_machines": 500_000, "workloads": 100_000, "clusters": 200},
    {"jobs": 1_000_000, "generate": "philly", "max_time_s": 1}, {"regions": 128},
    {"slots": 2_000_000, "partitions": 20})}

CHILD = r"""
import json, os, resource, sys, tempfile, time
what, name, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
import fleetplan
if what == "generate":
    spec = fleetplan.instances.get_kind(name)
    estimate = spec.estimate(spec.generate_params(**params))
else:
    from fleetplan import sim
    spec = sim.get_simulator(name)
    estimate = spec.estimate(spec.scenario(params))
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
if what == "generate":
    with tempfile.TemporaryDirectory() as folder:
        fleetplan.save(fleetplan.generate(name, params, seed=0), os.path.join(folder, "i.json"))
else:
    spec.run(params, None, 0)
seconds = time.perf_counter() - started
peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024
print(json.dumps({"peak_mb": peak / 1e6, "seconds": seconds, "estimate_mb": estimate.memory_bytes / 1e6,
                  "estimate_s": estimate.seconds}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| what | name | parameters | peak memory | estimate | wall | estimate |")
    print("|---|---|---|---:|---:|---:|---:|")
    for what, cases in (("generate", GENERATE), ("simulate", SIMULATE)):
        for name, params in cases:
            if args.quick and json.dumps(params, sort_keys=True) in SLOW:
                continue
            run = subprocess.run([sys.executable, "-c", CHILD, what, name, json.dumps(params)],
                                 capture_output=True, text=True, timeout=1800)
            if run.returncode != 0:
                print(f"| {what} | {name} | {params} | failed: {run.stderr.strip().splitlines()[-1]} | | | |")
                continue
            row = json.loads(run.stdout.strip().splitlines()[-1])
            print(f"| {what} | {name} | {params} | {row['peak_mb']:,.0f} MB | {row['estimate_mb']:,.0f} MB | "
                  f"{row['seconds']:.1f} s | {row['estimate_s']:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
