"""The progress contract, kept by every solver and every simulator: a fraction
that is None or in [0, 1], never decreasing, a last call at 1.0, at least one call a second on
a long run. Every registered solver runs here on a small instance of its kind; it also writes
nothing on stderr (no back-end's log lines) and every statistic it returns has a glossary entry."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import fleetplan
from fleetplan import sim
from fleetplan.instances import glossary
from fleetplan.solvers.progress import ProgressGuard

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SMALL = {"allocation": "inventory-30-jobs.json", "placement": "placement-small.json",
         "reservation": "reservation-small.json", "binpack": "binpack-small.json",
         "gpushare": "gpushare-small.json"}


def check_contract(calls: list[tuple[float, float | None, str]], who: str) -> None:
    assert calls, f"{who}: never reported progress"
    fractions = [fraction for _, fraction, _ in calls]
    assert all(f is None or 0.0 <= f <= 1.0 for f in fractions), (who, fractions)
    known = [f for f in fractions if f is not None]
    assert known == sorted(known), f"{who}: progress went back: {known}"
    first_known = next((i for i, f in enumerate(fractions) if f is not None), len(fractions))
    assert all(f is not None for f in fractions[first_known:]), f"{who}: a known fraction became None"
    assert fractions[-1] == 1.0, f"{who}: no final 1.0 ({fractions[-3:]})"


def _record() -> tuple[list[tuple[float, float | None, str]], object]:
    calls: list[tuple[float, float | None, str]] = []
    started = time.perf_counter()
    return calls, lambda fraction, message: calls.append((time.perf_counter() - started, fraction, message))


def _solvers() -> list[tuple[str, str]]:
    return [(spec.kind, spec.name) for spec in fleetplan.list_solvers()]


@pytest.mark.parametrize(("kind", "solver"), _solvers(), ids=[f"{k}/{s}" for k, s in _solvers()])
def test_every_solver_keeps_the_progress_contract(kind, solver):
    instance = fleetplan.load_instance(EXAMPLES / SMALL[kind])
    calls, progress = _record()
    try:
        # a short limit: solvers that search until it ends (lns, cpsat) still report every second
        # (two seconds are two beats: the contract is the same at any length)
        result = fleetplan.solve(instance, solver, time_limit=2, progress=progress)
    except ValueError as error:  # a policy needing fields the example lacks says so up front
        assert "required" in str(error) or "needs" in str(error), error
        assert not calls
        return
    check_contract(calls, f"{kind}/{solver}")
    assert result.status in fleetplan.solvers.STATUSES
    missing = sorted(name for name in result.stats if glossary.describe(name, kind) is None)
    assert not missing, f"{kind}/{solver}: statistics without a glossary entry: {missing}"


QUIET = """
import fleetplan
for kind, name in {cases!r}:
    instance = fleetplan.load_instance({examples!r} + "/" + {small!r}[kind])
    fleetplan.solve(instance, name, time_limit=20)
"""


def test_back_ends_write_nothing_on_stderr():
    # HiGHS, CP-SAT and OR-Tools' logs stay inside: the exact solvers of every
    # kind and the LP back-ends, in one fresh process (file descriptors, not sys.stderr).
    cases = [(spec.kind, spec.name) for spec in fleetplan.list_solvers() if spec.exact][:12]
    code = QUIET.format(cases=cases, examples=str(EXAMPLES), small=SMALL)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stderr == "", run.stderr[:500]
    assert run.stdout == "", run.stdout[:500]


def test_a_quiet_long_run_still_reports_every_second():
    """The beat's thread on the real clock: a call at least every heartbeat (0.5 s here; the
    contract's is 1 s), however late a loaded machine wakes the thread within that margin."""
    calls, progress = _record()
    guard = ProgressGuard(progress, heartbeat_s=0.5)
    with guard:
        guard(0.2, "starting")
        time.sleep(1.6)  # a back-end busy and silent
    guard.finish()
    check_contract(calls, "a silent run")
    times = [0.0] + [t for t, _, _ in calls]
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) < 1.0
    assert all(f == 0.2 for _, f, _ in calls[1:-1])  # the beat repeats the last fraction
    assert "running" in calls[1][2]


class _QuietClock:
    """``time.monotonic`` for the guard, moved only by its waits (``wait``: ``timeout``
    seconds pass; the stop is set after ``waits`` of them)."""

    def __init__(self, waits: int) -> None:
        self.now, self.waits = 0.0, waits

    def monotonic(self) -> float:
        return self.now

    def wait(self, timeout: float) -> bool:
        self.now += timeout
        self.waits -= 1
        return self.waits < 0


def test_the_beat_comes_after_four_fifths_of_a_quiet_heartbeat(monkeypatch):
    """The beat's rule on a clock that only its waits move: it wakes ten times a heartbeat and
    calls once 0.8 of one has passed without a call, repeating the last fraction, so no gap
    reaches a heartbeat however the machine schedules the thread (a heartbeat of 10 s keeps the
    sums exact)."""
    from fleetplan.solvers import progress as progress_module

    clock = _QuietClock(waits=30)
    monkeypatch.setattr(progress_module, "time", clock)
    calls: list[tuple[float, float | None, str]] = []
    guard = ProgressGuard(lambda fraction, message: calls.append((clock.now, fraction, message)), heartbeat_s=10.0)
    guard(0.2, "starting")
    guard._stop = clock  # the beat's loop waits on the clock, not on a thread event
    guard._beat()
    assert [t for t, _, _ in calls] == [0.0, 8.0, 16.0, 24.0]
    assert all(f == 0.2 for _, f, _ in calls) and all("(running " in m for _, _, m in calls[1:])


@pytest.mark.slow
def test_a_long_mip_reports_every_second():
    instance = fleetplan.generate("placement", {"regions": 10, "tables": 2000, "jobs": 2000}, seed=1)
    calls, progress = _record()
    fleetplan.solve(instance, "mip-highs", time_limit=4, progress=progress)
    check_contract(calls, "mip-highs")
    times = [0.0] + [t for t, _, _ in calls]
    assert max(b - a for a, b in zip(times, times[1:], strict=False)) < 1.5


SCENARIOS = {
    "cluster": {"jobs": 20},
    "parsync": {"slots": 2000, "schedulers": 2, "partitions": 2, "rate": 400, "duration_s": 2, "drain_s": 2},
    "mast": {"hours": 1, "regions": 2, "machines_per_region": 32},
    "gpushare": {"inflation": 1.3},
}


class _Calls(list):
    def append_pair(self, now: float, end: float) -> None:
        self.append((now, end))


@pytest.mark.parametrize("name", sim.names())
def test_every_simulator_keeps_the_progress_contract(name):
    spec = sim.get_simulator(name)
    for scheduler in spec.schedulers[:2]:
        calls = _Calls()
        spec.run(SCENARIOS[name], scheduler, seed=1, progress=calls.append_pair)
        assert calls, f"{name}/{scheduler}: never reported"
        nows = [now for now, _ in calls]
        assert nows == sorted(nows) and nows[0] >= 0, (name, scheduler, nows)
        assert all(now <= end for now, end in calls)
        assert calls[-1][0] == calls[-1][1], f"{name}/{scheduler}: the last call is not at the end"


def test_a_guard_without_a_callback_finishes_and_exits_quietly():
    # No callback: no heartbeat (and nothing to stop), yet the contract's bookkeeping holds.
    guard = ProgressGuard(None)
    with guard:
        guard(0.4, "part")
        guard(0.2, "back")
    assert guard.fraction == 0.4
    guard.finish("done")
    assert guard.finished and guard.fraction == 1.0
    from fleetplan.solvers.progress import SimulationProgressGuard

    simulation = SimulationProgressGuard(None)
    with simulation:
        simulation(10.0, 10.0)  # the simulator's own last call at the end
    simulation.finish()
    assert simulation.now == 10.0
