"""Round trip of one small solve through `fleetplan serve` with warm workers, loopback only.

    python benchmarks/scripts/service_roundtrip.py [--jobs 64] [--requests 200] [--workers 2] [--big-mb 32] [--state]

Starts the service on a free loopback port (no token: loopback benchmark), waits for /readyz,
sends 20 warm-up requests, then REQUESTS sequential ``POST /v1/solve`` of a generated allocation
instance of JOBS jobs (the kind's default solver) over one keep-alive connection, each checked
200 with the objective of an in-process ``fleetplan.solve`` of the same instance. Prints one JSON
line: p50/p99/max of the round trip, the median of the solve's own ``wall_s`` (as the service
reports it), the load average before and after. With ``--big-mb`` it then sends a body of that
size (a large allocation instance) and polls /healthz every 50 ms while the body is checked: the
slowest /healthz answer is reported. ``--state`` serves with durable jobs (SQLite in a temporary
folder, removed at the end). The service is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

from service_load import free_port, stop_service


def main() -> None:
    import httpx

    import fleetplan

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=64)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--big-mb", type=float, default=0.0)
    parser.add_argument("--state", action="store_true", help="durable jobs (--state in a temporary folder)")
    args = parser.parse_args()
    instance = fleetplan.generate("allocation", {"jobs": args.jobs}, seed=0)
    expected = fleetplan.solve(instance).objective
    body = json.dumps({"instance": instance.model_dump()}).encode()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    import tempfile

    state = ["--state", tempfile.mkdtemp(prefix="fleetplan-roundtrip-")] if args.state else []
    service = subprocess.Popen([sys.executable, "-m", "fleetplan", "serve", "--port", str(port), "--insecure",
                                "--workers", str(args.workers), *state], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        load_before = os.getloadavg()
        headers = {"Content-Type": "application/json"}
        times, solve_s = [], []
        with httpx.Client(base_url=url, timeout=60) as client:
            for number in range(20 + args.requests):
                started = time.perf_counter()
                answer = client.post("/v1/solve", content=body, headers=headers)
                took = time.perf_counter() - started
                result = answer.json()
                if answer.status_code != 200 or abs(result["objective"] - expected) > 1e-9 * max(1.0, abs(expected)):
                    raise SystemExit(f"request {number}: {answer.status_code} {str(result)[:200]}")
                if number >= 20:
                    times.append(took)
                    solve_s.append(result["wall_s"])
        load_after = os.getloadavg()
        times.sort()
        report = {"jobs": args.jobs, "requests": len(times), "workers": args.workers, "state": bool(state),
                  "p50_ms": round(1000 * statistics.median(times), 2),
                  "p99_ms": round(1000 * times[min(len(times) - 1, int(0.99 * len(times)))], 2),
                  "max_ms": round(1000 * times[-1], 2),
                  "solve_wall_p50_ms": round(1000 * statistics.median(solve_s), 2),
                  "body_bytes": len(body), "load_before": load_before, "load_after": load_after}
        if args.big_mb:
            report["healthz_during_big_body"] = _healthz_during_big_body(url, args.big_mb)
        print(json.dumps(report))
    finally:
        stop_service(service)
        if state:
            import shutil

            shutil.rmtree(state[1], ignore_errors=True)


def _healthz_during_big_body(url: str, megabytes: float) -> dict[str, float]:
    import httpx

    import fleetplan

    # About 330 bytes of JSON per job in the allocation file layout.
    jobs = max(1, int(megabytes * 2**20 / 330))
    big = json.dumps({"instance": fleetplan.generate("allocation", {"jobs": jobs}, seed=1).model_dump(),
                      "wait": 0}).encode()
    done: list[float] = []

    def send() -> None:
        started = time.perf_counter()
        httpx.post(url + "/v1/solve", content=big, headers={"Content-Type": "application/json"}, timeout=300)
        done.append(time.perf_counter() - started)

    sender = threading.Thread(target=send)
    sender.start()
    slowest, polls = 0.0, 0
    with httpx.Client(base_url=url, timeout=60) as client:
        while sender.is_alive():
            started = time.perf_counter()
            client.get("/healthz")
            slowest = max(slowest, time.perf_counter() - started)
            polls += 1
            time.sleep(0.05)
    sender.join()
    return {"body_mb": round(len(big) / 2**20, 1), "big_request_s": round(done[0], 2), "healthz_polls": polls,
            "healthz_max_ms": round(1000 * slowest, 2)}


if __name__ == "__main__":
    main()
