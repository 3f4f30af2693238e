"""In-process callers get the CLI's answer for any sequence of calls.

HiGHS sizes one thread pool per process at its first run; a later solve asking for another
number of threads returned status ``error`` ("HiGHS: Not Set"). Each solver here solves one
instance with ``threads=1``, then ``threads=2``, then ``threads=1`` again in this one process:
the three answers agree, and each plan passes the judge (every solver of every kind: about 5 s
in all). A mixed sequence of kinds, solvers and options in one process matches the command
line's answers one by one.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

import fleetplan
from fleetplan.solvers.base import MAX_THREADS

# Small instances every solver of the kind finishes in well under a second.
INSTANCES = {
    "allocation": ({"jobs": 8}, 0),
    "placement": ({"tables": 12, "jobs": 10, "regions": 3}, 0),
    "reservation": ({"servers": 60, "datacenters": 2, "reservations": 3}, 0),
    "binpack": ({"clusters": 2, "machines": 12, "workloads": 2}, 0),
}


def _cases():
    for kind in sorted(INSTANCES):
        for spec in fleetplan.list_solvers(kind):
            yield pytest.param(kind, spec.name, id=f"{kind}-{spec.name}")


_instances: dict[str, object] = {}


def _instance(kind: str):
    if kind not in _instances:
        params, seed = INSTANCES[kind]
        _instances[kind] = fleetplan.generate(kind, params, seed=seed)
    return _instances[kind]


@pytest.mark.skipif(MAX_THREADS < 2, reason="needs two threads")
@pytest.mark.parametrize(("kind", "solver"), list(_cases()))
def test_thread_counts_in_sequence_give_the_same_answer(kind: str, solver: str) -> None:
    instance = _instance(kind)
    results = [fleetplan.solve(instance, solver, threads=threads, seed=0) for threads in (1, 2, 1)]
    statuses = [result.status for result in results]
    assert "error" not in statuses, [result.message for result in results]
    assert len(set(statuses)) == 1, statuses
    for result in results:
        if result.plan is not None:
            evaluation = fleetplan.evaluate(instance, result.plan)
            assert math.isclose(evaluation.objective, result.objective, rel_tol=1e-6, abs_tol=1e-6)
    objectives = [result.objective for result in results]
    if statuses[0] == "optimal":
        assert all(math.isclose(value, objectives[0], rel_tol=1e-6, abs_tol=1e-6) for value in objectives)


# (kind, solver, threads, options): kinds, back-ends and thread counts interleaved.
SEQUENCE = [
    ("allocation", "max-min-fairness", 2, {}),
    ("reservation", "mip-highs", 1, {}),
    ("allocation", "max-min-fairness", 1, {"backend": "pyomo"}),
    ("binpack", "mip-highs", 2, {}),
    ("allocation", "finish-time-fairness", 2, {"method": "levels"}),
    ("placement", "mip-highs", 1, {}),
]


@pytest.mark.slow  # six fresh processes; the thread-count test above reproduces the bug
@pytest.mark.skipif(MAX_THREADS < 2, reason="needs two threads")
def test_a_mixed_sequence_in_one_process_matches_the_command_line(tmp_path) -> None:
    in_process = []
    for kind, solver, threads, options in SEQUENCE:
        result = fleetplan.solve(_instance(kind), solver, threads=threads, seed=0, **options)
        in_process.append((result.status, result.objective))
    for (kind, solver, threads, options), (status, objective) in zip(SEQUENCE, in_process, strict=True):
        path = tmp_path / f"{kind}.json"
        if not path.exists():
            fleetplan.save(_instance(kind), path)
        command = [sys.executable, "-m", "fleetplan", "solve", str(path), "--solver", solver,
                   "--threads", str(threads), "--json"]
        for name, value in options.items():
            command += ["--option", f"{name}={value}"]
        run = subprocess.run(command, capture_output=True, text=True, timeout=120)
        answer = json.loads(run.stdout)
        assert answer["status"] == status, (kind, solver, answer.get("message"))
        assert math.isclose(answer["objective"], objective, rel_tol=1e-6, abs_tol=1e-6), (kind, solver)
