"""Gavel's side of ``gavel_same_run.py``: Gavel's published policy code, timed as Gavel times it.

Gavel's code is not part of fleetplan and is not copied here: this script imports it from a
checkout of the stanford-futuredata/gavel repository that the caller points it at
(``--gavel-checkout``; its ``scheduler/`` directory goes on ``sys.path``), and prints the
checkout's commit (``git rev-parse HEAD``) so every figure names the code it timed. Run it with
the environment of ``benchmarks/gavel-env/requirements.txt`` (``make gavel-env``: cvxpy with
ECOS), not fleetplan's.

    .venv-gavel/bin/python benchmarks/scripts/gavel_side.py gavel-2048.json las out.npy \\
        --gavel-checkout /tmp/gavel

``INSTANCE.json`` is the file ``gavel_same_run.py`` writes: Gavel's dictionaries with the job
index as the job id (``throughputs``, ``scale_factors``, ``priority_weights``, ``cluster_spec``).
The script builds Gavel's inputs the way its microbenchmark
(``scheduler/scripts/microbenchmarks/sweep_policy_runtimes.py``) does — ``JobIdPair(i, None)``
keys, the policy built with ``solver='ECOS'`` — calls ``get_allocation`` once on the first
``--warm-up-jobs`` jobs (imports, cvxpy's first compilation), then times one
``get_allocation`` on the whole instance:

* ``las``: ``max_min_fairness.MaxMinFairnessPolicyWithPerf`` (its objective normalises each job
  by its throughput under Gavel's proportional allocation, a closed form, then one LP);
* ``max-throughput``: ``max_sum_throughput.ThroughputSumWithPerf`` (one LP).

It prints one JSON line, ``cpu_s`` (``time.process_time``) and ``wall_s`` of the timed call,
``types`` (the sorted worker types: the columns of the saved allocation), ``commit``,
``warnings`` (what Gavel's code printed, e.g. its "not optimal" warning) and the versions of
cvxpy, ECOS and numpy, and saves the allocation to ``OUT.npy`` (rows in Gavel's sorted job
order). Bad input: one line on stderr naming the problem, exit code 2, no output file.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

POLICIES = {"las": ("max_min_fairness", "MaxMinFairnessPolicyWithPerf"),
            "max-throughput": ("max_sum_throughput", "ThroughputSumWithPerf")}
FIELDS = ("throughputs", "scale_factors", "priority_weights", "cluster_spec")


class BadInput(Exception):
    """A one-line message about the command's input (exit code 2)."""


def checkout_commit(checkout: Path) -> str:
    """The checkout's commit, after checking it holds Gavel's policies."""
    for name, _ in POLICIES.values():
        if not (checkout / "scheduler" / "policies" / f"{name}.py").is_file():
            raise BadInput(f"--gavel-checkout: {checkout} has no scheduler/policies/{name}.py "
                           "(a checkout of stanford-futuredata/gavel is expected)")
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    if done.returncode != 0:
        raise BadInput(f"--gavel-checkout: {checkout} is not a git checkout (git rev-parse HEAD failed)")
    return done.stdout.strip()


def read_instance(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise BadInput(f"INSTANCE: cannot read {path}: {error}") from None
    missing = [field for field in FIELDS if field not in data]
    if missing:
        raise BadInput(f"INSTANCE: {path} lacks {', '.join(missing)} (written by gavel_same_run.py)")
    if not data["throughputs"]:
        raise BadInput(f"INSTANCE: {path} has no jobs")
    return data


def gavel_inputs(data: dict, job_pair: type, jobs: int | None = None) -> tuple[dict, dict, dict, dict]:
    """Gavel's dictionaries keyed by ``JobIdPair(i, None)``, as its microbenchmark builds them."""
    ids = sorted(int(key) for key in data["throughputs"])[:jobs]
    throughputs = {job_pair(i, None): {t: float(v) for t, v in data["throughputs"][str(i)].items()} for i in ids}
    scale_factors = {job_pair(i, None): int(data["scale_factors"][str(i)]) for i in ids}
    weights = {job_pair(i, None): float(data["priority_weights"][str(i)]) for i in ids}
    cluster_spec = {t: int(c) for t, c in data["cluster_spec"].items()}
    return throughputs, scale_factors, weights, cluster_spec


def call(policy: object, which: str, inputs: tuple[dict, dict, dict, dict]) -> dict:
    throughputs, scale_factors, weights, cluster_spec = inputs
    if which == "las":
        return policy.get_allocation(throughputs, scale_factors, weights, cluster_spec)
    return policy.get_allocation(throughputs, scale_factors, cluster_spec)


def run(args: argparse.Namespace) -> dict:
    checkout = Path(args.gavel_checkout).resolve()
    commit = checkout_commit(checkout)
    data = read_instance(Path(args.instance))
    sys.path.insert(0, str(checkout / "scheduler"))
    import cvxpy
    import ecos
    import numpy as np
    from job_id_pair import JobIdPair
    from policies import max_min_fairness, max_sum_throughput

    module, name = POLICIES[args.policy]
    policy = getattr({"max_min_fairness": max_min_fairness, "max_sum_throughput": max_sum_throughput}[module],
                     name)(solver="ECOS")
    inputs = gavel_inputs(data, JobIdPair)
    printed = io.StringIO()  # Gavel's code prints its warnings on stdout, where our JSON line goes
    with contextlib.redirect_stdout(printed):
        call(policy, args.policy, gavel_inputs(data, JobIdPair, args.warm_up_jobs))
        warm_up_printed = printed.getvalue()
        cpu, wall = time.process_time(), time.perf_counter()
        allocation = call(policy, args.policy, inputs)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    job_ids = sorted(allocation)
    types = sorted(data["cluster_spec"])
    matrix = np.array([[allocation[job][t] for t in types] for job in job_ids], dtype=float)
    out = Path(args.out)
    partial = out.with_name(out.name + ".partial.npy")
    np.save(partial, matrix)
    os.replace(partial, out)
    return {"cpu_s": cpu, "wall_s": wall, "types": types, "commit": commit, "policy": f"{module}.{name}",
            "jobs": len(job_ids), "warnings": printed.getvalue()[len(warm_up_printed):].strip(),
            "cvxpy": cvxpy.__version__, "ecos": ecos.__version__, "numpy": np.__version__}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("instance", help="Gavel's dictionaries as gavel_same_run.py writes them (JSON)")
    parser.add_argument("policy", choices=sorted(POLICIES))
    parser.add_argument("out", help="where the allocation goes (.npy; jobs in sorted order, columns in `types`)")
    parser.add_argument("--gavel-checkout", default=os.environ.get("GAVEL_CHECKOUT"),
                        help="a checkout of stanford-futuredata/gavel (default: $GAVEL_CHECKOUT)")
    parser.add_argument("--warm-up-jobs", type=int, default=64, help="jobs of the warm-up call (default 64)")
    args = parser.parse_args(argv)
    try:
        if not args.gavel_checkout:
            raise BadInput("--gavel-checkout: not given (nor $GAVEL_CHECKOUT)")
        if args.warm_up_jobs < 1:
            raise BadInput("--warm-up-jobs: must be at least 1")
        if not args.out.endswith(".npy"):
            raise BadInput("OUT: must end in .npy")
        answer = run(args)
    except BadInput as error:
        print(f"gavel_side.py: {error}", file=sys.stderr)
        return 2
    print(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
