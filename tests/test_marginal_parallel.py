"""Marginal values' re-solves shared out over forked processes: the same numbers as in one
process (every re-solve starts warm from the base, never from another unit's), the children's
errors raised in the caller, and a refused worker count."""

import ast
import multiprocessing
import subprocess
import sys

import pytest
from conftest import EXAMPLES
from test_planning_kinds import reservation_region

import fleetplan
from fleetplan.errors import InstanceError
from fleetplan.planning import marginal
from fleetplan.planning.marginal import marginal_values
from fleetplan.runs import shared
from fleetplan.runs.shared import run_shared

needs_fork = pytest.mark.skipif(not shared.can_fork(), reason="no fork start method (or threads alive)")


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="no fork start method")
def test_run_shared_deals_the_tasks_to_forked_children_in_order():
    # In a fresh interpreter: the test process may hold other threads (earlier tests'), and with
    # threads alive run_shared rightly stays in one process.
    code = ("import os; from fleetplan.runs.shared import run_shared; "
            "print(os.getpid(), run_shared(lambda task: (task, os.getpid()), list(range(7)), 3))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    parent, _, listed = done.stdout.strip().partition(" ")
    pids = ast.literal_eval(listed)
    assert [task for task, _ in pids] == list(range(7))
    assert pids[0][1] == pids[3][1] == int(parent)          # this process keeps every third task
    assert len({pid for _, pid in pids}) == 3 and pids[1][1] == pids[4][1] != pids[2][1]


@needs_fork
def test_a_child_s_error_is_raised_in_the_caller():
    def work(task):
        if task == 3:  # dealt to the child
            raise ValueError("unit 3 broke")
        return task

    with pytest.raises(ValueError, match="unit 3 broke"):
        run_shared(work, [0, 1, 2, 3], 2)


@needs_fork
@pytest.mark.parametrize("solver", ["max-min-fairness", "max-throughput"])
def test_parallel_re_solves_give_the_sequential_numbers(solver):
    instance = fleetplan.load_instance(EXAMPLES / "inventory-30-jobs.json")
    sequential = marginal_values(instance, solver, workers=1)
    parallel = marginal_values(instance, solver, workers=3)
    assert parallel.to_dict() == sequential.to_dict()
    assert all(value.more is not None and value.fewer is not None for value in parallel.values)
    # and each unit's numbers are those of its own re-solve, whatever ran before it
    alone = marginal_values(instance, solver, workers=1)
    assert alone.to_dict() == sequential.to_dict()


@needs_fork
def test_parallel_re_solves_of_a_kind_without_a_session():
    instance = reservation_region(request=2.0)
    assert marginal_values(instance, "mip-highs", workers=2).to_dict() == \
        marginal_values(instance, "mip-highs", workers=1).to_dict()


def test_the_default_stays_in_process_where_a_fork_would_not_pay():
    assert marginal.default_workers(8, base_seconds=0.001, cores=4, load=0.0) == 1
    assert marginal.default_workers(1, base_seconds=10.0, cores=4, load=0.0) == 1


@needs_fork
def test_the_default_takes_the_cores_others_leave_free(monkeypatch):
    monkeypatch.setattr(shared, "can_fork", lambda: True)  # the arithmetic, whatever threads are alive
    workers = [marginal.default_workers(8, base_seconds=1.0, cores=2, load=load) for load in (0.0, 1.0, 1.4, 2.0, 4.0)]
    assert workers == [2, 2, 1, 1, 1]  # the load counts this process too
    assert marginal.default_workers(3, base_seconds=1.0, cores=8, load=1.0) == 3
    assert marginal.default_workers(8, base_seconds=1.0, cores=8, load=4.0) == 5


def test_a_worker_count_below_one_is_refused():
    with pytest.raises(InstanceError, match="workers"):
        marginal_values(fleetplan.load_instance(EXAMPLES / "allocation-gavel-4.1.json"), "max-throughput", workers=0)
