"""The pattern every simulator follows: an event heap, a result object, a registry.

A simulator is a plain, deterministic function ``simulate(scenario, scheduler, seed) ->
SimResult`` that calls the solvers below it and returns metrics; it knows no CLI and no harness.
Time advances from event to event (:class:`EventQueue`), so idle time costs nothing; the state
lives in numpy arrays inside the simulator. Each simulator module declares one
:class:`SimulatorSpec` named ``SIMULATOR``; :mod:`fleetplan.sim` finds it by name without
importing the others, and ``fleetplan bench`` sweeps any of them (locally or on Dask).

Progress: a simulate function may take a keyword ``progress``, a callable ``progress(now, end)``
(simulated time so far and at the end, in the spec's ``time_unit``: seconds unless it says
``"h"``; ``end`` inf when not known beforehand) that it calls now and then;
:meth:`SimulatorSpec.run` passes one only to functions that accept it, behind the guard of
:mod:`fleetplan.solvers.progress` (``now`` never goes back, a call at least every second, the
last at the end), so the caller sees the same contract from every simulator.

Example
-------
>>> from fleetplan.sim.engine import EventQueue
>>> queue = EventQueue()
>>> queue.push(5.0, "finish", 7)
>>> queue.push(1.0, "arrive", 3)
>>> queue.pop()
(1.0, 'arrive', 3)
"""

from __future__ import annotations

import contextlib
import heapq
import inspect
import math
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel

from fleetplan.instances.base import InstanceError, validate_model


class EventQueue:
    """A min-heap of ``(time, kind, payload)`` events; ties pop in the order they were pushed.

    The insertion counter breaks ties, so two events at one instant never compare payloads and
    a run is deterministic whatever the payloads are.
    """

    __slots__ = ("_heap", "_counter")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, Any]] = []
        self._counter = 0

    def push(self, time: float, kind: str, payload: Any = None) -> None:
        if not math.isfinite(time):
            raise ValueError(f"event '{kind}' at non-finite time {time}")
        heapq.heappush(self._heap, (float(time), self._counter, kind, payload))
        self._counter += 1

    def pop(self) -> tuple[float, str, Any]:
        time, _, kind, payload = heapq.heappop(self._heap)
        return time, kind, payload

    def peek_time(self) -> float:
        """Time of the next event (``inf`` when the queue is empty)."""
        return self._heap[0][0] if self._heap else math.inf

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)


@dataclass
class SimResult:
    """What every simulator returns.

    ``metrics`` are scalar summaries (``avg_jct_s``, ``conflicts`` ...); ``groups`` the same per
    group (per priority level, tenant, scheduler instance: ``groups["priority"]["0"]["slo_violation_rate"]``);
    ``series`` time series as equal-length numpy arrays, one of them named ``time``.
    """

    simulator: str
    scheduler: str
    seed: int
    metrics: dict[str, float] = field(default_factory=dict)
    groups: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    series: dict[str, np.ndarray] = field(default_factory=dict)
    events: int = 0
    sim_time: float = 0.0
    wall_s: float = 0.0
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: numpy arrays become lists, non-finite numbers None."""

        def clean(value: Any) -> Any:
            if isinstance(value, np.ndarray):
                return [clean(v) for v in value.tolist()]
            if isinstance(value, dict):
                return {str(k): clean(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [clean(v) for v in value]
            if isinstance(value, (float, np.floating)):
                return float(value) if math.isfinite(value) else None
            if isinstance(value, np.integer):
                return int(value)
            return value

        return clean({
            "simulator": self.simulator, "scheduler": self.scheduler, "seed": self.seed,
            "metrics": self.metrics, "groups": self.groups, "series": self.series,
            "events": self.events, "sim_time": self.sim_time, "wall_s": self.wall_s,
            "message": self.message,
        })


SimulateFunction = Callable[[BaseModel, str, int], SimResult]
# progress(now, end): simulated time so far and at the end of the run (SimulatorSpec.time_unit;
# end may be inf when the simulator cannot know it).
ProgressCallback = Callable[[float, float], None]
TIME_UNITS = {"s": 1.0, "h": 3600.0}  # seconds per unit of a progress report


def _accepts_progress(function: Callable[..., Any]) -> bool:
    """Whether ``function`` takes a ``progress`` keyword (or any keyword, ``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # builtins and some callables have no signature
        return False
    return any((p.name == "progress" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
               or p.kind is p.VAR_KEYWORD for p in parameters)


class SimulationTimeLimit(RuntimeError):
    """A simulation stopped at its time limit (:meth:`SimulatorSpec.run`'s ``time_limit``): there
    is no result, since partial metrics would describe a different, shorter run (``fleetplan
    simulate --time-limit`` makes the same choice). ``reached`` is how far the
    simulation got, ``(now, end)`` in the spec's ``time_unit`` (``end`` may be ``inf`` when the
    simulator does not know it), or None when it stopped before reporting any progress (building
    its trace, or a simulator that does not report)."""

    def __init__(self, simulator: str, time_limit: float, reached: tuple[float, float] | None,
                 unit: str = "s") -> None:
        self.simulator, self.time_limit, self.reached, self.unit = simulator, time_limit, reached, unit
        how_far = ""
        if reached is not None:
            now, end = reached
            total = f" of {end:g} {unit}" if 0 < end < math.inf else ""
            how_far = f" after {now:g} {unit}{total} of simulated time"
        super().__init__(f"simulator '{simulator}' stopped at its time limit of {time_limit:g} s{how_far}; "
                         "no result")


# After a ring that landed where it could not raise: how soon to ring again.
RING_AGAIN_S = 0.01


class _OutOfTime(BaseException):
    """Raised inside a simulation when its time limit passes; a BaseException so that no
    ``except Exception`` in the simulator swallows it. :meth:`SimulatorSpec.run` turns it into
    :class:`SimulationTimeLimit`."""


@contextlib.contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    """Raise :class:`_OutOfTime` after ``seconds`` of wall time wherever the main thread is
    (building a trace, a scheduler's Python code; a C call in progress finishes first).
    Armed only on the main thread, where SIGALRM exists and no interval timer is already set
    (a caller's own alarm is left alone); elsewhere the limit is checked at each progress
    report only. A ring that lands where Python cannot raise (a gc callback, a ``__del__``) is
    rung again :data:`RING_AGAIN_S` later instead of being reported as unraisable."""
    if (seconds is None or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()
            or signal.getitimer(signal.ITIMER_REAL)[0] > 0):
        yield
        return

    active = True

    def ring(signum: int, frame: object) -> None:
        if active:
            raise _OutOfTime()

    previous_hook = sys.unraisablehook

    def swallowed(unraisable: Any) -> None:
        # The ring landed where Python cannot raise (a gc or weakref callback, a __del__): it
        # is not the caller's error, so ring again shortly, in the simulation's own code.
        if isinstance(unraisable.exc_value, _OutOfTime):
            if active:
                signal.setitimer(signal.ITIMER_REAL, RING_AGAIN_S)
            return
        previous_hook(unraisable)

    previous = signal.signal(signal.SIGALRM, ring)
    sys.unraisablehook = swallowed
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield
    finally:
        try:  # a ring before this line raises here; the cleanup below runs all the same
            active = False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            sys.unraisablehook = previous_hook


def _checked_time_limit(time_limit: float | None) -> float | None:
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) \
            or not math.isfinite(time_limit) or time_limit <= 0:
        raise InstanceError("time_limit", f"must be a positive number of seconds, got {time_limit!r}")
    return float(time_limit)


@dataclass(frozen=True)
class SimulatorSpec:
    """A simulator: its name, scenario model, schedulers it can run and the function itself."""

    name: str
    simulate: SimulateFunction
    scenario_type: type[BaseModel]
    schedulers: tuple[str, ...]
    description: str
    reference: str = ""
    # Pictures are not a simulator's: fleetplan.plotting draws every simulator's results (one
    # module per simulator, found by this name), above the simulators in the layers.
    # Optional: the simulator's own ``fleetplan simulate NAME`` flags (aliases of scenario fields,
    # flags that choose the scheduler): ``flags(params, scheduler)`` maps the ``--FIELD VALUE``
    # pairs and ``--scheduler`` (or None) to scenario fields and a scheduler, raising
    # InstanceError("--flag", reason) on bad input; ``flags_help`` lists them for ``--help``.
    flags: Callable[[dict[str, Any], str | None], tuple[dict[str, Any], str | None]] | None = None
    flags_help: tuple[tuple[str, str], ...] = ()
    # Unit of the times ``simulate`` passes to ``progress(now, end)``: "s" (seconds) or "h" (hours).
    time_unit: str = "s"
    # The metrics a bench report shows first (the others follow alphabetically, up to its width).
    report_metrics: tuple[str, ...] = ()
    # Optional: the memory (and time) a scenario needs, ``estimate(scenario) ->
    # fleetplan.instances.resources.Estimate``; :meth:`run` refuses a scenario that cannot fit
    # in this machine's memory before simulating it.
    estimate: Callable[[BaseModel], Any] | None = None
    # Optional: data files a run's ``--out DIR`` holds beside result.json, ``tables(result) ->
    # {file name: text}`` (the gpushare simulator's curve.csv).
    tables: Callable[[SimResult], dict[str, str]] | None = None
    # Whether ``simulate`` takes a ``progress`` keyword: looked up once, from its signature.
    takes_progress: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        if self.time_unit not in TIME_UNITS:
            raise ValueError(f"SimulatorSpec {self.name!r}: time_unit must be one of {sorted(TIME_UNITS)}, "
                             f"got {self.time_unit!r}")
        object.__setattr__(self, "takes_progress", _accepts_progress(self.simulate))

    def scenario(self, data: dict[str, Any] | BaseModel | None = None) -> BaseModel:
        """Validate a scenario given as a dict (or pass a model through)."""
        if isinstance(data, self.scenario_type):
            return data
        if isinstance(data, BaseModel):
            data = data.model_dump()
        return validate_model(self.scenario_type, data or {}, "scenario")

    def run(self, scenario: dict[str, Any] | BaseModel | None = None, scheduler: str | None = None,
            seed: int = 0, progress: ProgressCallback | None = None,
            time_limit: float | None = None) -> SimResult:
        """Validate, then simulate; ``scheduler`` defaults to the first one listed.

        ``progress(now, end)`` is handed to the simulate function when it takes a ``progress``
        keyword (:attr:`takes_progress`) and silently not used otherwise.

        ``time_limit``: seconds of wall time for the whole call (validation, the trace, the
        simulation). A simulation not finished by then raises :class:`SimulationTimeLimit`
        (how far it got, no result). The limit is checked at every progress report of the
        simulator and, on the main thread, also by a SIGALRM timer that interrupts any Python
        code (not a C call in progress); off the main thread, a simulator that does not report
        progress is not stopped.
        """
        scheduler = scheduler or self.schedulers[0]
        if scheduler not in self.schedulers:
            raise InstanceError("scheduler", f"unknown scheduler '{scheduler}' for simulator "
                                             f"'{self.name}' (known: {', '.join(self.schedulers)})")
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
            raise InstanceError("seed", "must be an integer in [0, 2^63)")
        time_limit = _checked_time_limit(time_limit)
        started = time.perf_counter()
        reached: list[tuple[float, float]] = []
        try:
            with _alarm(time_limit):
                result = self._run(scenario, scheduler, seed, progress, time_limit, started, reached)
        except _OutOfTime:
            raise SimulationTimeLimit(self.name, time_limit, reached[-1] if reached else None,
                                      self.time_unit) from None
        result.wall_s = time.perf_counter() - started
        return result

    def _run(self, scenario: dict[str, Any] | BaseModel | None, scheduler: str, seed: int,
             progress: ProgressCallback | None, time_limit: float | None, started: float,
             reached: list[tuple[float, float]]) -> SimResult:
        model = self.scenario(scenario)
        if self.estimate is not None:
            from fleetplan.instances.resources import check_fits

            check_fits(self.estimate(model), "scenario")
        # The progress contract (fleetplan.solvers.progress): now in [0, end] and never back,
        # a call at least every second, the last at the end.
        from fleetplan.solvers.progress import SimulationProgressGuard

        guard = SimulationProgressGuard(progress)
        with guard:
            if not self.takes_progress or (progress is None and time_limit is None):
                result = self.simulate(model, scheduler, seed)
            else:
                stop_at = math.inf if time_limit is None else started + time_limit

                def watched(now: float, end: float) -> None:
                    if reached:
                        reached[0] = (now, end)
                    else:
                        reached.append((now, end))
                    if progress is not None:
                        guard(now, end)
                    if time.perf_counter() > stop_at:
                        raise _OutOfTime()

                result = self.simulate(model, scheduler, seed, progress=watched)
        guard.finish(result.sim_time / TIME_UNITS[self.time_unit])
        return result
