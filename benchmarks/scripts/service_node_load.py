"""The Node client's load on `fleetplan serve`, with the CPU the service's own process spends per
answer, loopback only, bounded in time.

    python benchmarks/scripts/service_node_load.py [--clients 50] [--seconds 60] [--solve-rate SECONDS]

Starts ``fleetplan serve --queue 256`` (2 workers) on a free loopback port with a token, waits
until it answers, then runs ``node benchmarks/scripts/service_client.mjs`` against it
(allocation solves, every 20th request a misspelled field that must come back 422) and reads the
service's process CPU (its event loop and threads: user and system time, from
``/proc/PID/stat``) before and after. Prints the client's JSON line and one of its own:
``service_process_cpu_s``, ``service_process_cpu_ms_per_answer`` and the load average at the
start and the end. With ``--solve-rate`` it first and last measures the workers' own rate for
the allocation solves the client sends (``service_load.py --solve-rate-only allocation``), and
adds the ratio of valid solves answered a second to their mean.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_load import cpu_seconds, free_port, solve_rate, stop_service, wait_ready  # noqa: E402


def main() -> None:

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--solve-rate", type=float, default=0.0, metavar="SECONDS",
                        help="measure the workers' own rate for this long before and after the load")
    args = parser.parse_args()
    before = solve_rate(args.solve_rate, 2, "allocation") if args.solve_rate > 0 else None
    port, token = free_port(), secrets.token_hex(16)
    url = f"http://127.0.0.1:{port}"
    service = subprocess.Popen([sys.executable, "-m", "fleetplan", "serve", "--port", str(port), "--token", token,
                                "--queue", "256"], stderr=subprocess.DEVNULL)
    try:
        wait_ready(url)
        load_before, cpu_before = os.getloadavg()[0], cpu_seconds(service.pid)
        client = subprocess.run(["node", str(ROOT / "benchmarks" / "scripts" / "service_client.mjs"), url, token,
                                 str(ROOT / "examples" / "allocation-gavel-4.1.json"), "--clients", str(args.clients),
                                 "--seconds", str(args.seconds)], capture_output=True, text=True, check=True)
        cpu = cpu_seconds(service.pid) - cpu_before
        load_after = os.getloadavg()[0]
    finally:
        stop_service(service)
    answers = json.loads(client.stdout)
    print(client.stdout.strip())
    measured = {"service_process_cpu_s": round(cpu, 2),
                "service_process_cpu_ms_per_answer": round(1000 * cpu / max(answers["answered"], 1), 3),
                "load_before_after": [round(load_before, 2), round(load_after, 2)]}
    if before is not None:
        after = solve_rate(args.solve_rate, 2, "allocation")
        mean = (before["rate_per_s"] + after["rate_per_s"]) / 2
        valid = answers["codes"].get("200", 0) / answers["seconds"]
        measured.update(solve_rate_before_after_per_s=[before["rate_per_s"], after["rate_per_s"]],
                        valid_per_s=round(valid, 2), valid_throughput_vs_solve_rate=round(valid / mean, 3))
    print(json.dumps(measured))


if __name__ == "__main__":
    main()
