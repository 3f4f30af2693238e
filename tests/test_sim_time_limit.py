"""The simulators' time limit in the Python API: ``fleetplan.sim.run(...,
time_limit=S)`` and :meth:`SimulatorSpec.run` stop a simulation that would run longer, with
:class:`SimulationTimeLimit` (how far it got, no result), as ``fleetplan simulate --time-limit``
does; on the main thread and off it (where no signal can be armed), and without touching a
caller's own timer.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

import pytest

from fleetplan import sim
from fleetplan.instances import InstanceError

# Scenarios that run for minutes (the reproductions of tests/test_reliability_limits.py).
LONG = {
    "cluster": {"jobs": 3000, "rate_per_hour": 30},
    "parsync": {"slots": 2_000_000, "partitions": 20, "duration_s": 300},
    "mast": {"regions": 24, "hours": 48},
}
SHORT = {"cluster": {"jobs": 10}, "parsync": {"slots": 2000, "schedulers": 2, "partitions": 2, "rate": 400,
                                               "duration_s": 5},
         "mast": {"hours": 1, "regions": 2, "machines_per_region": 32}}
LIMIT = 1.0
WALL_METRICS = {"lp_solve_s"}  # measured seconds, not simulated ones
# The stop may come late by a simulation step (these scenarios run for minutes unstopped).
SLACK_S = 2.5


def _stopped(name: str) -> tuple[sim.SimulationTimeLimit, float]:
    """The stop and the CPU seconds (every thread's) the run took: the limit is on wall time,
    so a run spends at most about that much CPU however loaded the machine, while a loaded
    machine stretches the wall time whatever the simulator does."""
    started = time.process_time()
    with pytest.raises(sim.SimulationTimeLimit) as stop:
        sim.run(name, LONG[name], time_limit=LIMIT)
    return stop.value, time.process_time() - started


@pytest.mark.parametrize("name", sorted(LONG))
def test_a_long_simulation_stops_at_its_limit_with_how_far_it_got(name):
    stop, seconds = _stopped(name)
    assert seconds < LIMIT + SLACK_S, seconds
    assert stop.simulator == name and stop.time_limit == LIMIT
    assert "no result" in str(stop) and f"time limit of {LIMIT:g} s" in str(stop)
    if stop.reached is not None:
        now, end = stop.reached
        assert 0 <= now and (end == float("inf") or now <= end)
        assert "of simulated time" in str(stop)


@pytest.mark.parametrize("name", sorted(LONG))
def test_the_limit_holds_off_the_main_thread(name):
    """No SIGALRM there: the limit is checked at every progress report, which every simulator
    now makes (cluster's after each step)."""
    outcome: dict[str, object] = {}

    def work() -> None:
        try:
            outcome["result"] = _stopped(name)
        except BaseException as error:  # the assertion inside, seen by the main thread
            outcome["error"] = error

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert "error" not in outcome, outcome.get("error")
    stop, seconds = outcome["result"]
    assert seconds < LIMIT + SLACK_S, seconds
    assert stop.reached is not None  # stopped at a progress report, which says how far


@pytest.mark.parametrize("name", sorted(SHORT))
def test_a_run_within_its_limit_is_the_run_without_one(name):
    free = sim.run(name, SHORT[name], seed=3)
    limited = sim.run(name, SHORT[name], seed=3, time_limit=120)
    simulated = {key: value for key, value in free.metrics.items() if key not in WALL_METRICS}
    assert {key: limited.metrics[key] for key in simulated} == simulated and limited.events == free.events


def test_progress_still_reaches_the_caller_under_a_limit():
    seen: list[tuple[float, float]] = []
    sim.run("cluster", SHORT["cluster"], progress=lambda now, end: seen.append((now, end)), time_limit=120)
    assert seen and all(now <= later for (now, _), (later, _) in zip(seen, seen[1:], strict=False))


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "5", True])
def test_a_bad_time_limit_is_refused_by_name(value):
    with pytest.raises(InstanceError) as error:
        sim.run("cluster", SHORT["cluster"], time_limit=value)
    assert error.value.path == "time_limit"


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers here")
def test_a_callers_own_timer_is_left_alone():
    """A caller that armed SIGALRM keeps its handler and timer; the limit still holds through
    the progress reports."""
    rung: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: rung.append(signum))
    signal.setitimer(signal.ITIMER_REAL, 600)
    try:
        stop, seconds = _stopped("parsync")
        assert seconds < LIMIT + SLACK_S
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 500 < remaining <= 600
        assert signal.getsignal(signal.SIGALRM) is not previous and not rung
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers here")
def test_a_ring_that_lands_where_python_cannot_raise_rings_again():
    """The alarm firing inside a ``__del__`` (as inside a gc callback) cannot stop anything
    there: Python reports it as unraisable. The limit rings again in the simulation's own code
    instead, and the caller's unraisable hook never sees it."""
    from fleetplan.sim.engine import _alarm, _OutOfTime

    reported: list[object] = []
    entered: list[bool] = []

    class Slow:
        def __del__(self) -> None:
            entered.append(True)
            until = time.perf_counter() + 30
            while time.perf_counter() < until:  # the first ring lands here
                pass

    hook = sys.unraisablehook
    sys.unraisablehook = reported.append
    try:
        with pytest.raises(_OutOfTime):
            with _alarm(0.02):
                slow = Slow()
                del slow
                until = time.perf_counter() + 30  # a bound for the failing case only
                while time.perf_counter() < until:
                    pass
    finally:
        sys.unraisablehook = hook
    assert entered == [True] and reported == []
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0 and sys.unraisablehook is hook
