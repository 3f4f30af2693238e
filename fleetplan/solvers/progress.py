"""The progress contract every solver and simulator keeps, and the guard that keeps it.

A solve reports ``progress(fraction, message)``; a simulation ``progress(now, end)`` in
simulated time (``now / end`` is its fraction). Whatever the solver or simulator underneath
does, the caller sees:

* a fraction that is None (not known yet) or in [0, 1] — a simulation's ``now`` in [0, end];
* monotone: it never decreases, and once known it stays known (a later None repeats the last
  fraction);
* a last call at 1.0 (``now == end``) when the run returns a result;
* at least one call a second on a long run, even while a back-end (a MIP, an LP) is busy and
  says nothing: the last fraction again, with how long it has run.

The guard sits between the caller's callback and the run (:func:`fleetplan.solve`,
:meth:`fleetplan.sim.engine.SimulatorSpec.run`): solvers report what they know, when they know
it, and need not each re-implement the rules. The heartbeat is a daemon thread; calls to the
caller's callback are serialised by a lock, so it is never called twice at once. A back-end
that holds Python's global lock for longer than a second (a C call that does not release it)
delays the heartbeat until it returns.

>>> calls = []
>>> guard = ProgressGuard(lambda f, m: calls.append(f))
>>> with guard:
...     guard(0.5, "half"); guard(0.25, "a step back"); guard(None, "unknown"); guard(7.0, "past the end")
>>> calls
[0.5, 0.5, 0.5, 1.0]
>>> guard.finish("done"); calls[-1]
1.0
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

HEARTBEAT_S = 1.0

PROGRESS_CONTRACT = ("fraction None (unknown) or in [0, 1], never decreasing, a last call at 1.0, and at least "
                     "one call a second on a long run")


class ProgressGuard:
    """``callback(fraction, message)`` behind the contract: clamps, keeps monotone, beats at
    least every ``heartbeat_s`` while entered (``with guard:``), and :meth:`finish` says 1.0."""

    def __init__(self, callback: Callable[[float | None, str], None] | None,
                 heartbeat_s: float = HEARTBEAT_S) -> None:
        self.callback = callback
        self.heartbeat_s = heartbeat_s
        self.fraction: float | None = None
        self.message = ""
        self.finished = False
        self._lock = threading.Lock()
        self._last_call = self._started = time.monotonic()
        # The heartbeat's stop signal, made only for a callback (a beat needs one): most solves
        # pass none, and the event (a condition and its lock) was a tenth of fleetplan.solve's
        # own time around a 2,048-job LAS solve.
        self._stop: threading.Event | None = threading.Event() if callback is not None else None
        self._thread: threading.Thread | None = None

    def __call__(self, fraction: float | None, message: str = "") -> None:
        if fraction is not None:
            try:
                fraction = float(fraction)
            except (TypeError, ValueError):
                fraction = None
        if fraction is not None and math.isnan(fraction):
            fraction = None
        if fraction is not None:
            fraction = min(max(fraction, 0.0), 1.0)
            if self.fraction is not None:
                fraction = max(fraction, self.fraction)
        elif self.fraction is not None:
            fraction = self.fraction
        self._emit(fraction, message)

    def _emit(self, fraction: float | None, message: str) -> None:
        with self._lock:
            if self.finished:
                return
            self.fraction, self.message = fraction, message
            self._last_call = time.monotonic()
            if self.callback is not None:
                self.callback(fraction, message)

    def finish(self, message: str = "done") -> None:
        """The last call, at 1.0 (once; later calls are dropped)."""
        self.stop_beat()
        if not self.finished:
            self._emit(1.0, message)
            self.finished = True

    def _beat(self) -> None:
        # Wake ten times a beat and beat after 0.8 of one quiet: a gap stays under a beat even
        # when the wake-up comes late on a loaded machine.
        while not self._stop.wait(self.heartbeat_s / 10):
            if time.monotonic() - self._last_call >= self.heartbeat_s * 0.8:
                elapsed = time.monotonic() - self._started
                base = self.message.split(" (running ")[0] if self.message else "running"
                try:
                    self._emit(self.fraction, f"{base} (running {elapsed:.0f} s)")
                except Exception:  # noqa: BLE001 - a failing callback stops the beat, not the run
                    return

    def __enter__(self) -> ProgressGuard:
        self._started = self._last_call = time.monotonic()
        if self.callback is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._beat, name="fleetplan-progress", daemon=True)
            self._thread.start()
        return self

    def stop_beat(self) -> None:
        """Stop the heartbeat (no more calls of its own); calls already made stand."""
        if self._stop is not None:
            self._stop.set()

    def __exit__(self, *exc: Any) -> None:
        self.stop_beat()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class SimulationProgressGuard:
    """The same contract for a simulation's ``progress(now, end)``: ``now`` clamped to [0, end]
    and never decreasing, a heartbeat repeating the last position, :meth:`finish` at ``end``."""

    def __init__(self, callback: Callable[[float, float], None] | None, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.callback = callback
        self.now = 0.0
        self.end = math.inf
        self._guard = ProgressGuard(self._forward if callback is not None else None, heartbeat_s)

    def _forward(self, fraction: float | None, message: str) -> None:
        assert self.callback is not None
        self.callback(self.now, self.end)

    def __call__(self, now: float, end: float) -> None:
        end = float(end)
        if math.isfinite(end) and end > 0:
            self.end = end
            now = min(max(float(now), self.now), end)
            self.now = now
            self._guard(now / end, "")
        else:  # the end is not known: the position still moves forward
            self.now = max(float(now), self.now)
            self._guard(None, "")

    def finish(self, end: float | None = None) -> None:
        """The last call, at the end (``end``: the simulated time reached, for a run whose end
        was not known beforehand)."""
        if not math.isfinite(self.end):
            self.end = max(end, self.now) if end is not None else self.now
        already = self.now == self.end and self._guard.fraction == 1.0
        self.now = self.end
        if already:  # the simulator's own last call was at the end
            self._guard.finished = True
            self._guard.stop_beat()
        else:
            self._guard.finish()

    def __enter__(self) -> SimulationProgressGuard:
        self._guard.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._guard.__exit__(*exc)


__all__ = ["HEARTBEAT_S", "PROGRESS_CONTRACT", "ProgressGuard", "SimulationProgressGuard"]
