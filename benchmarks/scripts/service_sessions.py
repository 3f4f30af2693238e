"""A scheduler's round over HTTP with a session, against a cold HTTP solve of the same cluster.

    python benchmarks/scripts/service_sessions.py [--jobs 10000] [--rounds 10] [--change 0.01] [--solver max-min-fairness]

Starts `fleetplan serve` on a free loopback port (no token: loopback benchmark), makes a session
of JOBS Gavel-like distinct jobs (``throughput_noise=0.1``, as ``embed_rounds.py``), then each
round changes CHANGE of the jobs (half leave, as many arrive: one PATCH) and re-solves (one POST
.../solve); the round is the wall time of the two requests. After each round the same final
cluster is solved cold over HTTP (``POST /v1/solve`` with the whole instance: the body, its
checks, the validation and the solve), and the two objectives must agree (relative 1e-6).
Prints one JSON line: medians of the round and of the cold solve, their ratio, the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from service_load import free_port, stop_service


def main() -> None:
    import httpx
    import numpy as np

    from fleetplan.instances.allocation import AllocationParams, generated_instance_data

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--change", type=float, default=0.01)
    parser.add_argument("--solver", default="max-min-fairness")
    args = parser.parse_args()
    changed = max(2, int(round(args.change * args.jobs)))
    pool = generated_instance_data(AllocationParams(jobs=args.jobs + changed * args.rounds, throughput_noise=0.1), 0)
    cluster = generated_instance_data(AllocationParams(jobs=args.jobs, throughput_noise=0.1), 0)["worker_types"]
    types = [t["name"] for t in cluster]
    jobs = pool["jobs"]
    live = list(range(args.jobs))
    following = args.jobs
    rng = np.random.default_rng(0)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = subprocess.Popen([sys.executable, "-m", "fleetplan", "serve", "--port", str(port), "--insecure",
                                "--workers", "2", "--max-body-mb", "256"], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        client = httpx.Client(base_url=url, timeout=300)
        headers = {"Content-Type": "application/json"}

        def post(path: str, body: dict, method: str = "POST") -> dict:
            answer = client.request(method, path, content=json.dumps(body).encode(), headers=headers)
            if answer.status_code not in (200, 201):
                raise SystemExit(f"{method} {path}: {answer.status_code} {answer.text[:300]}")
            return answer.json()

        instance = {"kind": "allocation", "worker_types": cluster, "jobs": [jobs[m] for m in live]}
        session = post("/v1/sessions", {"instance": instance, "solver": args.solver, "time_limit": 120})["id"]
        post(f"/v1/sessions/{session}/solve", {})
        rounds, colds = [], []
        load_before = os.getloadavg()
        for _ in range(args.rounds):
            leaving_at = rng.choice(len(live), size=changed // 2, replace=False)
            leaving = [jobs[live[k]]["id"] for k in leaving_at]
            arriving = list(range(following, following + changed - changed // 2))
            following += len(arriving)
            keep = np.ones(len(live), dtype=bool)
            keep[leaving_at] = False
            live = [m for m, kept in zip(live, keep, strict=True) if kept] + arriving
            new = [jobs[m] for m in arriving]
            columns = {"id": [job["id"] for job in new],
                       "throughput": [[job["throughput"].get(t, 0.0) for t in types] for job in new],
                       "scale_factor": [job.get("scale_factor", 1) for job in new]}
            started = time.perf_counter()
            post(f"/v1/sessions/{session}", {"changes": [{"op": "remove_jobs", "ids": leaving},
                                                         {"op": "add_jobs", "jobs": columns}]}, "PATCH")
            warm = post(f"/v1/sessions/{session}/solve", {})
            rounds.append(time.perf_counter() - started)
            instance = {"kind": "allocation", "worker_types": cluster, "jobs": [jobs[m] for m in live]}
            started = time.perf_counter()
            cold = post("/v1/solve", {"instance": instance, "solver": args.solver, "time_limit": 120})
            colds.append(time.perf_counter() - started)
            if abs(cold["objective"] - warm["objective"]) > 1e-6 * max(1.0, abs(cold["objective"])):
                raise SystemExit(f"session {warm['objective']!r} != cold {cold['objective']!r}")
        round_s, cold_s = statistics.median(rounds), statistics.median(colds)
        print(json.dumps({"jobs": args.jobs, "changed_per_round": changed, "rounds": args.rounds,
                          "solver": args.solver, "round_ms": round(1000 * round_s, 1),
                          "cold_http_solve_ms": round(1000 * cold_s, 1), "ratio": round(round_s / cold_s, 3),
                          "load_before": load_before, "load_after": os.getloadavg()}))
    finally:
        stop_service(service)


if __name__ == "__main__":
    main()
