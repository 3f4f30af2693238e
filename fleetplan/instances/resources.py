"""What a size costs before it is tried: generators and simulators estimate the memory (and
time) a parameter set needs, and a size that cannot fit in this machine's memory is refused at
once, with the figure, instead of running out of memory after a minute;
a generator is also refused when its estimated time is beyond :data:`MAX_GENERATE_S` (a
simulation's time is bounded by ``time_limit`` instead: its length depends on the scheduler and
the load, which the estimates do not model).

Each estimate is a linear model of the sizes that drive the work, with coefficients measured on
this machine (peak resident memory over the interpreter's, generation and ``save`` included;
benchmarks/results/reliability.md, has the measurements) and a safety factor. The
memory available is the kernel's ``MemAvailable`` and, when set, the process's address-space
limit (``ulimit -v``); a machine that says neither is not checked.

>>> estimate = Estimate(memory_bytes=3e12, seconds=4e4, what="jobs = 1,000,000,000")
>>> estimate.describe()
'jobs = 1,000,000,000 needs about 3,000 GB of memory and about 11 h'
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fleetplan.errors import InstanceError

# Estimates are multiplied by this before they are compared with the memory available: the
# measured coefficients vary by about 30 % with the parameters that are not modelled.
SAFETY = 1.5
# What the interpreter, numpy and pydantic hold before the work starts (not in the estimates).
BASELINE_BYTES = 150e6
# A generator whose estimated time is beyond this is refused too: at the top
# of their ranges the estimates reach 40 s (placement), 6 s (reservation), 6 min (allocation,
# 10^7 jobs: refused on memory first on a machine of less than 44 GB) and 48 min (binpack with
# every machine in one cluster, whose generation still grows with the square of a cluster's
# machines); ten minutes is an order of magnitude beyond any instance the benchmarks use.
MAX_GENERATE_S = 600.0


@dataclass(frozen=True)
class Estimate:
    """Memory (bytes, peak over the interpreter's) and wall time (seconds, on a quiet core)
    that a size needs; ``what`` names the size in the parameters' own words."""

    memory_bytes: float
    seconds: float
    what: str
    # The parameters that set the size (those ``what`` names): a refusal scales them down
    # together to say what would fit.
    sizes: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.what} needs about {format_bytes(self.memory_bytes)} of memory and about {format_seconds(self.seconds)}"


def format_bytes(value: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6)):
        if value >= size:
            return f"{value / size:,.0f} {unit}" if value >= 10 * size else f"{value / size:,.1f} {unit}"
    return f"{value / 1e3:,.0f} kB"


def format_seconds(value: float) -> str:
    if value >= 7200:
        return f"{value / 3600:,.0f} h"
    if value >= 120:
        return f"{value / 60:,.0f} min"
    return f"{max(value, 0.1):,.1f} s" if value < 10 else f"{value:,.0f} s"


def available_memory() -> float | None:
    """Bytes this process can still take: ``MemAvailable`` less nothing, capped by ``ulimit -v``
    less what the process already maps; None when the system says neither."""
    limits: list[float] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                limits.append(int(line.split()[1]) * 1024.0)
                break
    except (OSError, ValueError, IndexError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append(max(soft - _mapped_bytes(), 0.0))
    return min(limits) if limits else None


def _mapped_bytes() -> float:
    try:
        for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def check_fits(estimate: Estimate, path: str = "parameters", source: str | None = None,
               max_seconds: float | None = None,
               rescale: Callable[[float], Estimate] | None = None) -> None:
    """Refuse (an :class:`InstanceError` naming ``path``) a size whose estimate, times
    :data:`SAFETY`, is more than the memory available, or whose estimated time is more than
    ``max_seconds`` (None: time is not checked).

    ``rescale(fraction)``, the estimate with the sizes scaled down by ``fraction``, lets the
    refusal say the largest size that would fit; without it the refusal asks for a smaller one."""
    available = available_memory()

    def fits(candidate: Estimate) -> bool:
        return ((available is None or candidate.memory_bytes * SAFETY <= available)
                and (max_seconds is None or candidate.seconds <= max_seconds))

    def smaller() -> str:
        largest = _largest_fitting(rescale, fits) if rescale is not None else None
        return f"; at most about {largest.what} fits" if largest is not None else "; choose a smaller size"

    if available is not None and estimate.memory_bytes * SAFETY > available:
        raise InstanceError(path, f"too large for this machine: {estimate.describe()} ({format_bytes(estimate.memory_bytes * SAFETY)} "
                                  f"with the {SAFETY:g}x margin kept for what the estimate leaves out), and "
                                  f"{format_bytes(available)} is available{smaller()}", source)
    if max_seconds is not None and estimate.seconds > max_seconds:
        raise InstanceError(path, f"too slow: {estimate.describe()}, more than the {format_seconds(max_seconds)} "
                                  f"a generator may take{smaller()}", source)


def _largest_fitting(rescale: Callable[[float], Estimate], fits: Callable[[Estimate], bool]) -> Estimate | None:
    """The estimate of the largest fraction of the sizes that fits (bisection: the estimates
    grow with the sizes), or None when even a sliver does not."""
    low, high = 0.0, 1.0
    if not fits(rescale(1e-9)):
        return None
    for _ in range(60):
        middle = (low + high) / 2
        if fits(rescale(middle)):
            low = middle
        else:
            high = middle
    return rescale(low)


__all__ = ["MAX_GENERATE_S", "Estimate", "available_memory", "check_fits", "format_bytes", "format_seconds"]
