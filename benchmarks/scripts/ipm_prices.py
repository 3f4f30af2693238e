"""Time the interior-point prices of one LAS solve alone: the compiled iterations and their
set-up (``ipm.max_min_prices``), called again and again on the arguments the separable method
passes it when it solves the ``gavel-distinct`` suite's instance (``throughput_noise`` 0.1,
multi-GPU jobs, seed 0).

    python benchmarks/scripts/ipm_prices.py [--jobs 2048] [--calls 100] [--processes 5]

Each of ``--processes`` fresh processes solves the instance once (capturing the arguments),
calls the method 5 times untimed, then ``--calls`` times timed; it prints the mean CPU ms of a
call and the iterations. The script prints each process's figure, then the median, and the
load average at the end. Run it from two trees (``PYTHONPATH=TREE``) to compare kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def one_process(jobs: int, calls: int) -> dict[str, float]:
    """One process: the captured call's mean CPU ms over ``calls`` calls, and its iterations."""
    import fleetplan
    from fleetplan.solvers.allocation.interior_point import ipm

    captured: dict[str, object] = {}
    original = ipm.max_min_prices

    def capture(*args, **kwargs):
        captured.setdefault("call", (args, kwargs))
        return original(*args, **kwargs)

    instance = fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1, "multi_gpu": True}, seed=0)
    ipm.max_min_prices = capture
    try:
        fleetplan.solve(instance, "max-min-fairness")
    finally:
        ipm.max_min_prices = original
    if "call" not in captured:
        raise SystemExit("ipm_prices.py: the solve did not price by the interior-point method")
    args, kwargs = captured["call"]
    kwargs = {key: value for key, value in kwargs.items() if key != "deadline"}
    for _ in range(5):
        prices = original(*args, **kwargs)
    started = time.process_time()
    for _ in range(calls):
        prices = original(*args, **kwargs)
    return {"ms": (time.process_time() - started) / calls * 1e3, "iterations": prices.iterations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2048)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.jobs < 1 or args.calls < 1 or args.processes < 1:
        print("ipm_prices.py: --jobs, --calls and --processes must be at least 1", file=sys.stderr)
        raise SystemExit(2)
    if args.child:
        print(json.dumps(one_process(args.jobs, args.calls)))
        return
    figures = []
    for _ in range(args.processes):
        done = subprocess.run([sys.executable, __file__, "--child", "--jobs", str(args.jobs), "--calls",
                               str(args.calls)], capture_output=True, text=True, check=True)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        figures.append(answer["ms"])
        print(f"{answer['ms']:.3f} ms a call, {answer['iterations']} iterations", flush=True)
    print(f"median {statistics.median(figures):.3f} ms a call over {args.processes} processes, "
          f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
