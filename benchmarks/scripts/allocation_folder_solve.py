"""Where the time of one ``fleetplan solve`` of a large allocation goes: the command run in this
process under cProfile (the CLI's own entry point would leave with ``os._exit`` before the
profile is written), its top functions by cumulative time printed, plus the load alone
(``load_instance`` of the same path, timed on its own, CPU and wall).

    .venv/bin/python benchmarks/scripts/allocation_folder_solve.py /tmp/a1m \\
        [--solver max-min-fairness] [--top 40] [--load-only]

``/tmp/a1m`` is a folder written by ``fleetplan export INSTANCE --format parquet -o /tmp/a1m``
(or an instance file, to compare). The whole command's wall time is measured outside, with
``/usr/bin/time -v fleetplan solve ...`` (benchmarks/results/allocation.md, "10^6 jobs from a
Parquet folder").
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="an exported folder or an instance file")
    parser.add_argument("--solver", default="max-min-fairness")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--load-only", action="store_true", help="time load_instance alone, no profile")
    args = parser.parse_args()

    import fleetplan

    wall, cpu = time.perf_counter(), time.process_time()
    instance = fleetplan.load_instance(args.path)
    print(f"load_instance({args.path}): {time.perf_counter() - wall:.2f} s wall, "
          f"{time.process_time() - cpu:.2f} s CPU ({type(instance).__name__})")
    if args.load_only:
        return
    del instance

    from fleetplan.cli.app import main as run

    output = os.path.join(tempfile.mkdtemp(), "plan.json")
    profile = cProfile.Profile()
    wall, cpu = time.perf_counter(), time.process_time()
    profile.enable()
    code = run(["solve", args.path, "--solver", args.solver, "-o", output])
    profile.disable()
    print(f"fleetplan solve (in process, profiled): exit {code}, {time.perf_counter() - wall:.2f} s wall, "
          f"{time.process_time() - cpu:.2f} s CPU")
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(args.top)
    print(text.getvalue())


if __name__ == "__main__":
    main()
