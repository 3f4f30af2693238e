"""``--time-limit`` counts from the process's start: the time a command spent before its solver,
sizer or simulator started (Python's start-up, imports, loading) is taken out of what that one
is given, and a limit already spent still gives a plan or a clear status, never a negative
limit. The command's start is faked here (``started``, as the console script passes it), so the
tests do not depend on how fast or loaded the machine is."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

import fleetplan
from fleetplan.cli import entry
from fleetplan.cli.app import main
from fleetplan.solvers import base

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GAVEL = str(EXAMPLES / "allocation-gavel-4.1.json")


class _FixedClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def perf_counter(self) -> float:
        return self.now


@pytest.mark.parametrize(("age", "start"), [(1.5, 98.5), (None, 99.0), (1000.0, 99.0), (0.5, 99.0)],
                         ids=["the process's start", "unknown age", "a process older than its command",
                              "never after the import"])
def test_the_command_starts_when_its_process_did(monkeypatch, age, start):
    """Now 100, this package imported at 99: the process's start where the system gives it and
    it is plausible, else the import."""
    monkeypatch.setattr(entry, "time", _FixedClock(100.0))
    monkeypatch.setattr(entry, "IMPORTED", 99.0)
    monkeypatch.setattr(entry, "process_age", lambda: age)
    assert entry.command_start() == start


def test_the_process_age_is_read_where_the_system_gives_it():
    age = entry.process_age()
    assert age is None or 0.0 <= age < 24 * 3600


@pytest.fixture
def solver_limits(monkeypatch):
    """The ``time_limit`` each solver function is called with."""
    seen: list[float | None] = []
    real = base.get_solver

    def get_solver(kind, name=None):
        spec = real(kind, name)

        def function(instance, *, time_limit, **options):
            seen.append(time_limit)
            return spec.function(instance, time_limit=time_limit, **options)

        return dataclasses.replace(spec, function=function)

    monkeypatch.setattr(base, "get_solver", get_solver)
    return seen


def test_solve_takes_the_start_up_out_of_the_solvers_limit(solver_limits, tmp_path, capsys):
    assert main(["solve", GAVEL, "--time-limit", "3", "-o", str(tmp_path / "a.json")],
                started=time.perf_counter()) == 0
    assert main(["solve", GAVEL, "--time-limit", "3", "-o", str(tmp_path / "b.json")],
                started=time.perf_counter() - 1.5) == 0
    fresh, late = solver_limits
    assert fresh > 1.5 >= late > 0  # loading and the writing reserve come off both


def test_solve_with_its_limit_spent_before_the_solver_still_answers(solver_limits, tmp_path, capsys):
    out = tmp_path / "plan.json"
    code = main(["solve", GAVEL, "--solver", "max-min-fairness", "--time-limit", "2", "-o", str(out), "--json"],
                started=time.perf_counter() - 10)
    assert solver_limits == [0.01]  # the least a back-end is given, never below
    answer = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and answer["status"] in fleetplan.solvers.STATUSES
    if code == 0:  # a plan (the isolated allocation, status time_limit) that the judge accepts
        assert answer["status"] == "time_limit"
        plan = fleetplan.load_plan(str(out))
        assert fleetplan.evaluate(fleetplan.load_instance(GAVEL), plan).violations == []
    else:
        assert not out.exists()


@pytest.fixture
def sizer_limits(monkeypatch):
    """What is left of the limit when the kind's sizer starts."""
    from fleetplan.planning import kinds
    from fleetplan.planning.sizing import time_left

    seen: list[float | None] = []
    real = kinds.planning_kind

    class _Kind:
        def __init__(self, kind):
            self.real = real(kind)

        def __getattr__(self, name):
            return getattr(self.real, name)

        def sizer(self):
            sizer = self.real.sizer()

            def spying(instance, targets, purchases, *, time_limit, started, **options):
                seen.append(time_left(time_limit, started))
                return sizer(instance, targets, purchases, time_limit=time_limit, started=started, **options)

            return spying

    monkeypatch.setattr(kinds, "planning_kind", _Kind)
    return seen


def test_size_takes_the_start_up_out_of_the_sizers_limit(sizer_limits, tmp_path, capsys):
    size = ["size", GAVEL, "--target", "min_time_share>=1", "--buy", "v100=3", "--buy", "k80=1", "--time-limit", "3"]
    assert main([*size, "-o", str(tmp_path / "a.json")], started=time.perf_counter()) == 0
    assert main([*size, "-o", str(tmp_path / "b.json")], started=time.perf_counter() - 1.5) == 0
    fresh, late = sizer_limits
    assert fresh > 1.5 >= late > 0


def test_size_with_its_limit_spent_still_answers(sizer_limits, tmp_path, capsys):
    out = tmp_path / "sized.json"
    code = main(["size", GAVEL, "--target", "min_time_share>=1", "--buy", "v100=3", "--buy", "k80=1",
                 "--time-limit", "2", "-o", str(out), "--json"], started=time.perf_counter() - 10)
    assert sizer_limits == [0.01]
    answer = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and answer["status"] in ("optimal", "feasible", "time_limit", "infeasible", "error")
    assert out.exists() == (code == 0)
    if code == 1:
        assert answer["output"] is None


@pytest.fixture
def simulator_limits(monkeypatch):
    from fleetplan.sim.engine import SimulatorSpec

    seen: list[float | None] = []
    real = SimulatorSpec.run

    def run(self, *args, time_limit=None, **kwargs):
        seen.append(time_limit)
        return real(self, *args, time_limit=time_limit, **kwargs)

    monkeypatch.setattr(SimulatorSpec, "run", run)
    return seen


def test_simulate_takes_the_start_up_out_of_the_simulations_limit(simulator_limits, tmp_path, capsys):
    simulate = ["simulate", "cluster", "--jobs", "10", "--time-limit", "3"]
    assert main([*simulate, "-o", str(tmp_path / "a.json")], started=time.perf_counter()) == 0
    assert main([*simulate, "-o", str(tmp_path / "b.json")], started=time.perf_counter() - 1.5) == 0
    fresh, late = simulator_limits
    assert fresh > 1.5 >= late > 0


def test_simulate_with_its_limit_spent_stops_with_nothing_written(simulator_limits, tmp_path, capsys):
    out = tmp_path / "result.json"
    code = main(["simulate", "cluster", "--jobs", "3000", "--rate_per_hour", "30", "--time-limit", "2",
                 "-o", str(out)], started=time.perf_counter() - 10)
    assert simulator_limits == [0.01]
    assert code == 1 and "stopped at --time-limit 2 s" in capsys.readouterr().err
    assert not out.exists()
