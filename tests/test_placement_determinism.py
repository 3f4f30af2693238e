"""Same instance, solver and seed, same plan (DESIGN.md), for the Tetris hill climb however fast
the machine runs it. Without a time limit the first pass used to alternate with applying moves
every 2 s of wall time: the plan depended on the machine's speed and load (at 10^5 tables the
first run in a process, slowed by compiling the kernels, gave another plan than the runs after
it; at 10^6 tables five runs gave 24.04-24.09). The alternation is now counted in tables.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fleetplan
import fleetplan.solvers.hill_climb as engine
import fleetplan.solvers.placement as placement
from fleetplan.solvers.placement.climb.first_pass import first_pass_batches


class _SlowClock:
    """A clock on which every reading is ``step`` seconds after the last: a machine where each
    chunk of the first pass takes longer than any timed batch."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now


def _solve(instance, **options):
    result = fleetplan.solve(instance, "hill-climb", replicas=False, **options)
    assert result.evaluation.feasible
    return result


@pytest.fixture
def small_batches(monkeypatch):
    """Counted batches on a test-sized instance (they start at 2 x FIRST_BATCH_ITEMS tables;
    the first pass hands the engine chunks of 8,192 tables, here of 256)."""
    monkeypatch.setattr(placement, "FIRST_BATCH_ITEMS", 256)
    monkeypatch.setattr(placement, "FIRST_BATCH_MOVES", 16)
    monkeypatch.setattr(placement, "first_pass_batches", lambda state: first_pass_batches(state, chunk=256))


def test_the_plan_without_a_limit_does_not_depend_on_the_clock(monkeypatch, small_batches):
    instance = fleetplan.generate("placement", {"regions": 8, "tables": 3000, "jobs": 3000}, seed=2)
    quick = _solve(instance)
    monkeypatch.setattr(engine, "time", _SlowClock(1.0))
    slow = _solve(instance)
    assert quick.stats["batches"] > 1  # the alternation ran
    assert np.array_equal(quick.plan.home_array(instance), slow.plan.home_array(instance))
    assert [(m.table, m.target) for m in quick.plan.moves] == [(m.table, m.target) for m in slow.plan.moves]
    assert quick.objective == slow.objective


def test_timed_batches_would_have_changed_the_plan(monkeypatch, small_batches):
    """The reproduction: the same slow clock with the old timed batches (2 s) gives another
    plan than a quick machine, so the test above can fail."""
    instance = fleetplan.generate("placement", {"regions": 8, "tables": 3000, "jobs": 3000}, seed=2)
    monkeypatch.setattr(placement, "_first_pass_batches", lambda time_limit, tables: {"batch_s": 2.0})
    quick = _solve(instance)
    monkeypatch.setattr(engine, "time", _SlowClock(1.0))
    slow = _solve(instance)
    assert not np.array_equal(quick.plan.home_array(instance), slow.plan.home_array(instance))


_RUN = textwrap.dedent("""
    import hashlib, fleetplan
    instance = fleetplan.generate("placement", {"regions": 20, "tables": 200000, "jobs": 200000}, seed=0)
    first = fleetplan.solve(instance, "hill-climb", replicas=False)
    second = fleetplan.solve(instance, "hill-climb", replicas=False)
    for result in (first, second):
        print(hashlib.sha1(result.plan.home_array(instance).tobytes()).hexdigest(), int(result.stats["batches"]))
""")


@pytest.mark.slow
def test_two_processes_and_two_runs_give_the_same_plan_at_200000_tables():
    """At 2 x 10^5 tables the counted batches run at their real size (the first run of each
    process also compiles the kernels: the slow run that gave another plan before)."""
    lines = []
    for _ in range(2):
        run = subprocess.run([sys.executable, "-c", _RUN], capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-2000:]
        lines += run.stdout.split("\n")[:2]
    assert len(set(lines)) == 1, lines
    assert int(lines[0].split()[1]) > 1
