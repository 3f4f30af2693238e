"""Compiled kernels: where fleetplan runs compiled loops instead of numpy, and the switch that
turns them off.

Some solvers spend their time in many numpy calls on small arrays (the interior-point method's
iterations at a few thousand jobs, the Tetris climb's per-table gains), where each call's fixed
cost, not its arithmetic, sets the time. Those loops have a compiled form in a ``*_kernels``
module near the numpy code they replace:

* allocation (``solvers/allocation/*_kernels.pyx``, for ``interior_point/`` and
  ``price_decomposition/``, at the module paths ``pyproject.toml`` builds): Cython, compiled by
  the install (``pyproject.toml``'s ext-modules; ``make`` reinstalls when a ``.pyx`` file changes), as
  scikit-learn does, so a kernel loads like any extension module, in about a millisecond, with
  no compiler or just-in-time step at run time. A 2,048-job solve takes tens of milliseconds:
  numba's start-up (1.5-3 s in the first call of each process, measured here) would dwarf it;
* placement (``solvers/placement/climb/*_kernels.py``): numba (``njit(cache=True)``, machine code kept
  on disk beside the module), used only for climbs of JIT_MIN_SIZE tables or more
  (:func:`use_jit`), which repay that start-up;
* the numpy code stays as the reference: tests check each kernel against it, and it runs
  wherever a kernel is not built, not worth its start-up, or switched off.

Set ``FLEETPLAN_KERNELS=0`` in the environment to run the numpy code instead (to compare the two).

>>> isinstance(enabled(), bool)
True
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from fleetplan.errors import raise_interruption

ENVIRONMENT_SWITCH = "FLEETPLAN_KERNELS"
# numba's start-up (import and first call: 1.5-3 s in each process; compiling, about 18 s once
# per install) pays off from about this size: the Tetris climb at 10^5 tables took 3.7 s with
# its kernels against 6.0 s without, start-up included, while a 10-table solve went from 2.1 to
# 3.3-3.7 s of wall.
JIT_MIN_SIZE = 50_000


def enabled() -> bool:
    """Whether solvers use their compiled kernels (``FLEETPLAN_KERNELS`` is not ``0``)."""
    return os.environ.get(ENVIRONMENT_SWITCH, "1").strip() != "0"


def use_jit(size: int) -> bool:
    """Whether a problem of ``size`` (the Tetris climb's tables) runs its numba kernels."""
    return enabled() and size >= JIT_MIN_SIZE


def load(name: str) -> ModuleType | None:
    """The compiled kernel module ``name``, or None when kernels are switched off or it was not
    built (a source tree used without installing it): the caller then runs its numpy code."""
    if not enabled():
        return None
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise_interruption(error)
        return None
