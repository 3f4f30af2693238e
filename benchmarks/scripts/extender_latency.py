"""Latency of the Kubernetes scheduler extender (`fleetplan serve --extender`) over loopback.

    python benchmarks/scripts/extender_latency.py [--nodes 1000] [--pods 200] [--policy fgd] [--cache]

Starts the extender on a free loopback port with a token in the path (as kube-scheduler's
``urlPrefix`` carries it), builds NODES node objects as the scheduler sends them (labels,
annotations, conditions, addresses, node info and a few images each; a third 8-GPU nodes, a
third 4-GPU, a sixth 2-GPU, a sixth CPU-only; each GPU's milli left drawn at random, seed 0),
then for each of PODS pods (in turn a GPU share of 250-750 milli, one or two whole GPUs, a CPU
pod) does what the scheduler does: ``filter`` with every node, then ``prioritize`` with the node
objects that passed. Every answer is checked (200, no Error, scores in 0..10). One keep-alive
connection, as Go's client keeps; the bodies are made before the clock starts. ``--cache``: the
scheduler is ``nodeCacheCapable`` — the node list is posted once to ``/extender/nodes`` and the
verbs get node names only. Prints one JSON line: p50/p99/max of filter, prioritize and the pair
(and of the pair's time in the extender reading bodies and answering, from its Server-Timing
headers), the extender process's CPU time per pair (mean, from /proc: what the machine's load
does not inflate), the filter body's size, the load average before and after. The extender is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

import numpy as np

TOKEN = "benchmark-token-0123456789"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def node_object(i: int, rng: np.random.Generator) -> dict:
    kind = i % 6
    gpus, model, cpu, memory_gi = ((8, "NVIDIA-A100-SXM4-80GB", 96, 1152), (8, "NVIDIA-A100-SXM4-80GB", 96, 1152),
                                   (4, "Tesla-T4", 48, 192), (4, "Tesla-T4", 48, 192), (2, "Tesla-V100-SXM2-32GB", 32, 244),
                                   (0, "", 64, 256))[kind]
    name = f"node-{i:05d}"
    labels = {"kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "node.kubernetes.io/instance-type": f"type-{kind}", "topology.kubernetes.io/zone": f"zone-{i % 3}",
              "fleetplan.io/rack": str(i // 16)}
    notes = {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
             "fleetplan.io/cpu-milli-free": str(int(rng.integers(cpu * 200, cpu * 1000))),
             "fleetplan.io/memory-mib-free": str(int(rng.integers(memory_gi * 200, memory_gi * 1024)))}
    capacity = {"cpu": str(cpu), "memory": f"{memory_gi * 1024 * 1024}Ki", "pods": "110",
                "ephemeral-storage": "1047552Mi", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    if gpus:
        labels.update({"nvidia.com/gpu.product": model, "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.present": "true"})
        notes["fleetplan.io/gpu-milli-free"] = ",".join(str(x) for x in rng.choice([0, 0, 250, 500, 750, 1000, 1000], gpus))
        capacity["nvidia.com/gpu"] = str(gpus)
    allocatable = dict(capacity, cpu=f"{cpu * 1000 - 500}m")
    condition = {"status": "False", "lastHeartbeatTime": "2026-11-28T09:02:11Z",
                 "lastTransitionTime": "2026-11-20T08:14:03Z"}
    return {"metadata": {"name": name, "uid": f"00000000-0000-4000-8000-{i:012d}", "resourceVersion": str(180000 + i),
                         "creationTimestamp": "2026-11-20T08:14:03Z", "labels": labels, "annotations": notes},
            "spec": {"podCIDR": f"10.{i // 256}.{i % 256}.0/24", "providerID": f"aws:///zone/i-{i:012x}"},
            "status": {"capacity": capacity, "allocatable": allocatable,
                       "conditions": [dict(condition, type=t, reason=f"KubeletHasNo{t}", message=f"kubelet has no {t}")
                                      for t in ("MemoryPressure", "DiskPressure", "PIDPressure")]
                       + [dict(condition, type="Ready", status="True", reason="KubeletReady",
                               message="kubelet is posting ready status")],
                       "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 256}.{i % 256}"},
                                     {"type": "Hostname", "address": name}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                       "nodeInfo": {"machineID": f"{i:032x}", "systemUUID": f"{i:032x}", "bootID": f"{i:032x}",
                                    "kernelVersion": "5.15.0-1051-aws", "osImage": "Ubuntu 22.04.4 LTS",
                                    "containerRuntimeVersion": "containerd://1.7.12", "kubeletVersion": "v1.30.2",
                                    "kubeProxyVersion": "v1.30.2", "operatingSystem": "linux", "architecture": "amd64"},
                       "images": [{"names": [f"registry.example.com/team/image-{k}@sha256:{k:064x}",
                                             f"registry.example.com/team/image-{k}:v{k}.0"],
                                   "sizeBytes": 100_000_000 + k} for k in range(6)]}}


def pod_object(k: int) -> dict:
    kind = k % 4
    limits = ({"fleetplan.io/gpu-milli": str(250 * (1 + k % 3))}, {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"},
              {})[kind]
    return {"metadata": {"name": f"pod-{k}", "namespace": "ml", "uid": f"11111111-0000-4000-8000-{k:012d}"},
            "spec": {"containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "resources": {
                "requests": {"cpu": "4", "memory": "16Gi", **limits}, "limits": limits}}],
                "schedulerName": "default-scheduler"},
            "status": {"phase": "Pending"}}


def _timing(answer) -> tuple[float, float]:  # noqa: ANN001 - an httpx response
    """(reading the body, answering) in seconds, from the extender's Server-Timing header."""
    parts = dict(part.strip().split(";dur=") for part in answer.headers["server-timing"].split(","))
    return float(parts["read"]) / 1e3, float(parts["answer"]) / 1e3


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    import httpx

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--policy", default="fgd")
    parser.add_argument("--cache", action="store_true", help="nodeCacheCapable: node names only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    nodes = [node_object(i, rng) for i in range(args.nodes)]
    nodes_text = json.dumps({"metadata": {}, "items": nodes}, separators=(",", ":"))
    names_text = json.dumps([node["metadata"]["name"] for node in nodes])
    port = free_port()
    prefix = f"http://127.0.0.1:{port}/extender/{TOKEN}"
    load_before = os.getloadavg()[0]
    service = subprocess.Popen([sys.executable, "-m", "fleetplan", "serve", "--extender", "--port", str(port),
                                "--token", TOKEN, "--extender-policy", args.policy], stderr=subprocess.DEVNULL)
    try:
        client = httpx.Client(timeout=30, headers={"Content-Type": "application/json"})
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if client.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        if args.cache:
            stored = client.post(f"{prefix}/nodes", content=nodes_text.encode())
            assert stored.status_code == 200 and stored.json()["nodes"] == args.nodes, stored.text[:300]
        filters, priorities, pairs, sizes, passed_counts = [], [], [], [], []
        server_read, server_answer = [], []  # the pair's, from the answers' Server-Timing headers
        for k in range(-10, args.pods):  # ten warm-up pods
            if k == 0:
                cpu_at_start = _cpu_seconds(service.pid)
            pod = json.dumps(pod_object(k % 1000), separators=(",", ":"))
            given = f'"NodeNames":{names_text}' if args.cache else f'"Nodes":{nodes_text}'
            body = f'{{"Pod":{pod},{given}}}'.encode()
            started = time.perf_counter()
            answer = client.post(f"{prefix}/filter", content=body)
            filtered = time.perf_counter() - started
            server = [_timing(answer)]
            result = answer.json()
            assert answer.status_code == 200 and result["Error"] == "", answer.text[:300]
            if args.cache:
                passing = result["NodeNames"]
                body = f'{{"Pod":{pod},"NodeNames":{json.dumps(passing)}}}'.encode()
            else:
                passing = result["Nodes"]["items"]
                body = f'{{"Pod":{pod},"Nodes":{json.dumps({"items": passing}, separators=(",", ":"))}}}'.encode()
            started = time.perf_counter()
            answer = client.post(f"{prefix}/prioritize", content=body)
            prioritized = time.perf_counter() - started
            server.append(_timing(answer))
            scores = answer.json()
            assert answer.status_code == 200 and len(scores) == len(passing), answer.text[:300]
            assert all(0 <= entry["Score"] <= 10 for entry in scores)
            if k >= 0:
                filters.append(filtered)
                priorities.append(prioritized)
                pairs.append(filtered + prioritized)
                sizes.append(len(f'{{"Pod":{pod},{given}}}'))
                passed_counts.append(len(passing))
                server_read.append(server[0][0] + server[1][0])
                server_answer.append(server[0][1] + server[1][1])

        server_cpu_per_pair = (_cpu_seconds(service.pid) - cpu_at_start) / args.pods

        def summary(values: list[float]) -> dict[str, float]:
            ordered = sorted(values)
            return {"p50_ms": round(1e3 * statistics.median(ordered), 1),
                    "p99_ms": round(1e3 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1),
                    "max_ms": round(1e3 * ordered[-1], 1)}

        print(json.dumps({"nodes": args.nodes, "pods": args.pods, "policy": args.policy, "cache": args.cache,
                          "filter_body_mb": round(statistics.median(sizes) / 2**20, 2),
                          "nodes_passed_median": statistics.median(passed_counts),
                          "filter": summary(filters), "prioritize": summary(priorities),
                          "filter_plus_prioritize": summary(pairs),
                          "pair_server_reading_body": summary(server_read),
                          "pair_server_answering": summary(server_answer),
                          "server_cpu_per_pair_ms": round(1e3 * server_cpu_per_pair, 1),
                          "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}))
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(timeout=30)


if __name__ == "__main__":
    main()
