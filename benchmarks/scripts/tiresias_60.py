"""`tiresias-las` on Tiresias's own 60-job trace, in Tiresias's queue order and in submit order,
as benchmarks/results/simulators.md ("Tiresias's queue order") runs it, with one JSON line.

    python benchmarks/scripts/tiresias_60.py --checkout DIR

DIR is a checkout of Tiresias's repository (SymbioticLab/Tiresias); its ``simulator/60_job.csv``
(job_id, num_gpu, submit_time, iterations, model_name, duration, interval) is converted to the
cluster simulator's trace format (``id,submit_time,gpus,duration``, duration in seconds) in a
temporary folder, never copied into this repository. The cluster: 8 GPUs (2 servers x 4), 1 s
leases and intervals, no restore cost, Tiresias's thresholds (3,250 / 7,200 GPU-s). Prints per
order the median, p95 and average JCT and the preemptions.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import tempfile
from pathlib import Path


def converted(source: Path) -> str:
    """Tiresias's job list as the simulator's CSV trace (sorted by submit time, as it requires)."""
    with source.open(newline="") as handle:
        jobs = sorted(csv.DictReader(handle), key=lambda job: (float(job["submit_time"]), int(job["job_id"])))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "submit_time", "gpus", "duration"])
    for job in jobs:
        writer.writerow([job["job_id"], job["submit_time"], job["num_gpu"], job["duration"]])
    return out.getvalue()


def main() -> None:
    from fleetplan.sim.cluster import run_cluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", required=True, type=Path, help="a checkout of SymbioticLab/Tiresias")
    args = parser.parse_args()
    source = args.checkout / "simulator" / "60_job.csv"
    if not source.exists():
        raise SystemExit(f"tiresias_60.py: --checkout {args.checkout}: no simulator/60_job.csv")
    found = {}
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.csv"
        trace.write_text(converted(source))
        for order in ("tiresias", "submit"):
            scenario = {"trace": str(trace), "cluster": {"gpu": 8}, "server_size": 4, "interval_s": 1.0,
                        "lease_s": 1.0, "checkpoint_s": 0.0, "tiresias_thresholds": [3250.0, 7200.0],
                        "tiresias_order": order}
            metrics = run_cluster(scenario, "tiresias-las", 0).result.metrics
            found[order] = {name: metrics[name] for name in ("median_jct_s", "p95_jct_s", "avg_jct_s", "preemptions")}
    print(json.dumps(found))


if __name__ == "__main__":
    main()
