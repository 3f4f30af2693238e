"""What checking a request costs the solve service's process: in the process itself, or handed to
an intake process and back (the bound below which `fleetplan serve` checks a request in its own
process, ``INLINE_CHECK_BYTES`` of :mod:`fleetplan.service.app`).

    python benchmarks/scripts/service_check_cost.py [--calls 2000]

For the allocation and the binpack requests of ``service_load.py`` (the example instances, a
seed; the binpack one with ``rms-greedy``): the CPU of ``intake`` called in this process, and
the CPU this process spends handing the same request to a pool of two intake processes (as the
service starts them: fork server, warmed) and reading the answer, 16 in flight. Prints one JSON
line, milliseconds per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def process_cpu() -> float:
    """User plus system CPU of this process, every thread."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from fleetplan.service.schemas import intake, warm_intake

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    bodies = {
        "allocation": {"instance": json.loads((ROOT / "examples" / "allocation-gavel-4.1.json").read_text()),
                       "seed": 1},
        "binpack": {"instance": json.loads((ROOT / "examples" / "binpack-small.json").read_text()),
                    "solver": "rms-greedy", "seed": 1},
    }
    raws = {name: json.dumps(body).encode() for name, body in bodies.items()}
    report: dict[str, dict[str, float]] = {}
    from fleetplan.solvers import load_kind

    load_kind()
    for name, raw in raws.items():
        assert intake("solve", raw, 300.0)[0] == 200
        for _ in range(50):
            intake("solve", raw, 300.0)
        started = time.process_time()
        for _ in range(args.calls):
            intake("solve", raw, 300.0)
        report[name] = {"bytes": len(raw), "in_process_ms": round(1000 * (time.process_time() - started) / args.calls, 3)}

    async def through_pool() -> None:
        pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("forkserver"), initializer=warm_intake)
        loop = asyncio.get_running_loop()
        try:
            await asyncio.gather(*[loop.run_in_executor(pool, intake, "solve", raws["allocation"], 300.0)
                                   for _ in range(20)])
            for name, raw in raws.items():
                in_flight = asyncio.Semaphore(16)

                async def one(raw: bytes = raw, in_flight: asyncio.Semaphore = in_flight) -> None:
                    async with in_flight:
                        await loop.run_in_executor(pool, intake, "solve", raw, 300.0)

                started = process_cpu()
                await asyncio.gather(*[one() for _ in range(args.calls)])
                report[name]["round_trip_ms_of_this_process"] = round(1000 * (process_cpu() - started) / args.calls, 3)
        finally:
            pool.shutdown()

    asyncio.run(through_pool())
    import os

    print(json.dumps({**report, "load": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
