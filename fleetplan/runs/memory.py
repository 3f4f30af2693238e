"""The memory a solver (or simulator) run uses itself, not the interpreter's.

A child process's peak resident memory (``ru_maxrss``) is mostly Python, numpy and the
back-end libraries: about 150 MiB whatever the solver does. The harness therefore reports the
**increase of resident memory over the child's baseline**, with the baseline taken just before
the solve — after fleetplan, the back-ends (:data:`BACKENDS`, preloaded so that a lazy import
inside the solve is not charged to it) and the generated instance are in memory:

* ``rss-increase`` (Linux): the kernel's high-water mark ``VmHWM`` is reset to the current RSS
  (``/proc/self/clear_refs``, value 5) before the solve, so ``VmHWM - baseline`` afterwards is
  the solve's own peak, C extensions (HiGHS, OR-Tools) included.
* ``maxrss-increase`` (elsewhere): ``ru_maxrss - baseline``; a lower bound, since the
  process's earlier peak (e.g. while generating the instance) may hide the solve's.
* either with ``+imports``: the back-ends were not preloaded (a fresh interpreter per cell, as
  on Dask, where preloading them all would cost seconds per cell), so the figure includes
  importing the back-end the solver uses (tens of MiB).

>>> probe = MemoryProbe()
>>> with probe:
...     block = bytearray(64 * 1024 * 1024)
...     block[::4096] = b"x" * len(block[::4096])  # touch every page, so it becomes resident
>>> probe.method in ("rss-increase", "maxrss-increase") and probe.increase_mb >= 0
True
"""

from __future__ import annotations

import importlib
import re
import resource
import sys
from pathlib import Path

from fleetplan.errors import raise_interruption

# Back-end modules the solvers import lazily; loaded before the baseline is taken.
BACKENDS = (
    "scipy.sparse", "highspy", "pyomo.environ", "ortools.sat.python.cp_model",
    "ortools.linear_solver.python.model_builder_helper",
)
_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def preload_backends() -> list[str]:
    """Import every installed back-end of :data:`BACKENDS`; returns the ones loaded."""
    loaded = []
    for name in BACKENDS:
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise_interruption(error)
            continue
        loaded.append(name)
    return loaded


def _status_mb(field: str) -> float | None:
    try:
        match = re.search(rf"^{field}:\s+(\d+)\s+kB", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) / 1024 if match else None


def max_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # macOS: bytes


def current_rss_mb() -> float:
    """Resident memory now, in MiB (``VmRSS``; ``ru_maxrss`` where /proc is missing)."""
    current = _status_mb("VmRSS")
    return current if current is not None else max_rss_mb()


def _reset_peak() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return _status_mb("VmHWM") is not None


class MemoryProbe:
    """``with MemoryProbe() as probe: ...`` then ``probe.increase_mb``, ``probe.baseline_mb``
    and ``probe.method`` (see the module docstring)."""

    def __init__(self, preloaded: bool = True) -> None:
        self.preloaded = preloaded  # whether the back-ends were imported before the baseline
        self.baseline_mb = 0.0
        self.peak_mb = 0.0
        self.method = ""
        self._reset = False

    def __enter__(self) -> MemoryProbe:
        self.baseline_mb = current_rss_mb()
        self._reset = _reset_peak()
        self.method = "rss-increase" if self._reset else "maxrss-increase"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        hwm = _status_mb("VmHWM") if self._reset else None
        self.peak_mb = hwm if hwm is not None else max_rss_mb()

    @property
    def increase_mb(self) -> float:
        return max(0.0, self.peak_mb - self.baseline_mb)
