"""Load on `fleetplan serve`, loopback only, bounded in count and time.

    python benchmarks/scripts/service_load.py [--clients 8] [--seconds 30] [--workers 2] [--kill-worker]
        [--solve-rate SECONDS]

Starts the service on a free loopback port, runs CLIENTS threads for SECONDS (each at most
MAX_REQUESTS requests) that mix small allocation solves, small binpack solves and bad requests
(malformed JSON, an unknown solver), and prints one JSON line: requests, answers by status
code, p50/p99 latency per kind of request, throughput, lost or duplicated answers (every request
carries its own id in its options' seed and must come back exactly once), 5xx on valid input,
and the service's resident memory (the whole process tree) sampled every second. With
``--kill-worker`` a worker process is killed every 5 s mid-request: those requests must come back
as 500 answers, not be lost, and the rest unaffected. The service is stopped at the end.

``--solve-rate SECONDS`` first measures what the workers alone can do, for the ratio the HTTP
throughput is judged by: the service's own job manager (the same worker processes, warm) in
this process, handed the same valid solves (allocation and binpack alternately, each with its
own seed) straight, no HTTP, no intake checks, no clients, enough in flight to keep every worker
busy — once before the load and once after it (the machine is shared: the mean of the two is the
rate). The JSON line then holds ``solve_rate_per_s`` and ``valid_throughput_vs_solve_rate``: the
valid solves answered 200 a second over HTTP, divided by that rate.

The JSON line also holds the CPU seconds the service's own process (its event loop and threads)
used over the load, per answer, and those of the processes under it (fork server, workers,
intake processes; a process replaced meanwhile counts only from its start).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_REQUESTS = 5000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def children(pid: int) -> list[int]:
    return [child for child, parent in _parents().items() if parent == pid]


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return parents


def tree(pid: int) -> list[int]:
    """``pid`` and every descendant (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of one process so far (0 once it has ended)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def solve_rate(seconds: float, workers: int, mix: str = "both") -> dict[str, float]:
    """Solves a second the job manager's warm workers answer when nothing else stands between
    them and the work (see the module's docstring)."""
    import asyncio

    from fleetplan.service.jobs import JobManager

    allocation = json.loads((ROOT / "examples" / "allocation-gavel-4.1.json").read_text())
    binpack = json.loads((ROOT / "examples" / "binpack-small.json").read_text())

    async def run() -> dict[str, float]:
        manager = JobManager(workers=workers, queue_size=256)
        await manager.start()
        loop = asyncio.get_running_loop()
        number, answered, ok = 0, 0, 0
        jobs = {}

        def submit() -> asyncio.Future:
            nonlocal number
            number += 1
            body = ({"instance": allocation, "seed": number} if number % 2 or mix == "allocation" else
                    {"instance": binpack, "solver": "rms-greedy", "seed": number})
            job = manager.submit("solve", json.dumps(body).encode(), 60.0, "rate")
            waiter = loop.create_future()
            job.waiters.append(waiter)
            jobs[waiter] = job
            return waiter

        try:
            pending = {submit() for _ in range(4 * workers)}
            began = time.monotonic()
            stop = began + seconds
            while time.monotonic() < stop:
                finished, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                answered += len(finished)
                ok += sum(1 for waiter in finished if jobs.pop(waiter).http == 200)
                pending |= {submit() for _ in finished}
            elapsed = time.monotonic() - began
        finally:
            manager.close()
        return {"solves": answered, "answered_200": ok, "seconds": round(elapsed, 1),
                "rate_per_s": round(answered / elapsed, 2)}

    return asyncio.run(run())


def stop_service(service: subprocess.Popen) -> None:
    """SIGTERM, as an orchestrator stops it; killed when it has not ended within 60 s."""
    service.send_signal(signal.SIGTERM)
    try:
        service.wait(timeout=60)
    except subprocess.TimeoutExpired:
        service.kill()


def wait_ready(url: str, seconds: float = 60.0) -> None:
    """Until the service at ``url`` answers /healthz (or ``seconds`` pass)."""
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)


def main() -> None:
    import httpx

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kill-worker", action="store_true")
    parser.add_argument("--solve-rate", type=float, default=0.0, metavar="SECONDS",
                        help="first measure the workers' own solve rate for this long (see above)")
    parser.add_argument("--solve-rate-only", choices=("both", "allocation"), default=None,
                        help="only measure the solve rate, of both kinds of solve or of the allocation solves "
                             "alone (what the Node client sends), and print it")
    args = parser.parse_args()
    if args.solve_rate_only:
        print(json.dumps({"solve_rate": solve_rate(args.solve_rate or 30.0, args.workers, args.solve_rate_only),
                          "mix": args.solve_rate_only, "load": os.getloadavg()[0]}))
        return
    rate = solve_rate(args.solve_rate, args.workers) if args.solve_rate > 0 else None
    if rate is not None:
        print(json.dumps({"solve_rate": rate, "load": os.getloadavg()[0]}), flush=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    service = subprocess.Popen([sys.executable, "-m", "fleetplan", "serve", "--port", str(port), "--insecure", "--workers",
                                str(args.workers), "--queue", "256"], stderr=subprocess.DEVNULL)
    try:
        wait_ready(url)
        allocation = json.loads((ROOT / "examples" / "allocation-gavel-4.1.json").read_text())
        binpack = json.loads((ROOT / "examples" / "binpack-small.json").read_text())
        results: list[tuple[str, int, float, int]] = []  # kind, code, seconds, request id
        lock = threading.Lock()
        stop_at = time.monotonic() + args.seconds
        counter = iter(range(10**9))

        def client(seed: int) -> None:
            rng = random.Random(seed)
            with httpx.Client(base_url=url, timeout=120) as session:
                for _ in range(MAX_REQUESTS):
                    if time.monotonic() >= stop_at:
                        return
                    with lock:
                        number = next(counter)
                    pick = rng.random()
                    if pick < 0.45:
                        kind, body = "allocation", {"instance": allocation, "seed": number}
                    elif pick < 0.9:
                        kind, body = "binpack", {"instance": binpack, "solver": "rms-greedy", "seed": number}
                    elif pick < 0.95:
                        kind, body = "bad-json", None
                    else:
                        kind, body = "bad-solver", {"instance": allocation, "solver": "teleport", "seed": number}
                    started = time.perf_counter()
                    try:
                        code, echoed = ask(session, body, number)
                    except httpx.HTTPError:
                        continue  # counted as lost: sent, never answered
                    with lock:
                        results.append((kind, code, time.perf_counter() - started, echoed))

        def ask(session, body, number):
            if body is None:
                answer = session.post("/v1/solve", content=b"{oops", headers={"Content-Type": "application/json"})
                return answer.status_code, number
            answer = session.post("/v1/solve", json=body)
            data = answer.json()
            plan = data.get("plan") if isinstance(data, dict) else None
            return answer.status_code, (plan["options"]["seed"] if plan else number)

        memory: list[float] = []
        killed = [0]

        def watch() -> None:
            last_kill = time.monotonic()
            while time.monotonic() < stop_at:
                memory.append(rss_mb(tree(service.pid)))
                if args.kill_worker and time.monotonic() - last_kill >= 5:
                    # A running job's worker process (the job's state names it).
                    try:
                        running = httpx.get(url + "/v1/jobs?state=running&limit=1", timeout=10).json()["jobs"]
                        pid = httpx.get(f"{url}/v1/jobs/{running[0]['id']}", timeout=10).json().get("pid") if running else None
                        if pid:
                            os.kill(pid, signal.SIGKILL)
                            killed[0] += 1
                    except (OSError, httpx.HTTPError, KeyError, IndexError):
                        pass
                    last_kill = time.monotonic()
                time.sleep(1.0)

        threads = [threading.Thread(target=client, args=(seed,)) for seed in range(args.clients)]
        watcher = threading.Thread(target=watch)
        # The CPU of the service's process (the event loop, its threads) and of the processes
        # under it (fork server, workers, intake) over the load.
        others = [pid for pid in tree(service.pid) if pid != service.pid]
        cpu_before = cpu_seconds(service.pid), {pid: cpu_seconds(pid) for pid in others}
        began = time.monotonic()
        for thread in [*threads, watcher]:
            thread.start()
        for thread in [*threads, watcher]:
            thread.join()
        elapsed = time.monotonic() - began
        service_cpu = cpu_seconds(service.pid) - cpu_before[0]
        others_cpu = sum(cpu_seconds(pid) - cpu_before[1].get(pid, 0.0) for pid in tree(service.pid)
                         if pid != service.pid)
        ids = Counter(number for kind, _, _, number in results if kind in ("allocation", "binpack"))
        sent = next(counter)
        codes = Counter(code for _, code, _, _ in results)
        latency = {}
        for kind in ("allocation", "binpack", "bad-json", "bad-solver"):
            times = sorted(seconds for k, _, seconds, _ in results if k == kind)
            if times:
                latency[kind] = {"p50_ms": 1000 * statistics.median(times),
                                 "p99_ms": 1000 * times[min(len(times) - 1, int(0.99 * len(times)))], "n": len(times)}
        valid_5xx = sum(1 for kind, code, _, _ in results if kind in ("allocation", "binpack") and code >= 500)
        valid_ok = sum(1 for kind, code, _, _ in results if kind in ("allocation", "binpack") and code == 200)
        measured: dict = {}
        if rate is not None:
            after = solve_rate(args.solve_rate, args.workers)
            mean_rate = (rate["rate_per_s"] + after["rate_per_s"]) / 2
            measured = {"solve_rate_before_after_per_s": [rate["rate_per_s"], after["rate_per_s"]],
                        "solve_rate_per_s": round(mean_rate, 2), "valid_per_s": round(valid_ok / elapsed, 2),
                        "valid_throughput_vs_solve_rate": round(valid_ok / elapsed / mean_rate, 3)}
        print(json.dumps({
            "clients": args.clients, "seconds": round(elapsed, 1), "workers": args.workers,
            "load": os.getloadavg()[0], "sent": sent, "answered": len(results), "lost": sent - len(results),
            "duplicated": sum(count - 1 for count in ids.values() if count > 1), "codes": dict(codes),
            "throughput_per_s": round(len(results) / elapsed, 2), "latency": latency,
            "valid_5xx": valid_5xx, "workers_killed": killed[0], **measured,
            "service_process_cpu_s": round(service_cpu, 2),
            "service_process_cpu_ms_per_answer": round(1000 * service_cpu / max(len(results), 1), 3),
            "other_service_processes_cpu_s": round(others_cpu, 2),
            # every 10th one-second sample of the service's tree (service, fork server, job processes)
            "rss_mb_samples": [round(value, 1) for value in memory[::10]],
        }))
    finally:
        stop_service(service)


if __name__ == "__main__":
    main()
