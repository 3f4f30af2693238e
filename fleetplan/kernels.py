"""Compiled kernels: where fleetplan runs compiled loops instead of numpy or Python, and the
switch that turns them off.

Some code spends its time in many numpy calls on small arrays (the interior-point method's
iterations at a few thousand jobs, the Tetris climb's per-table gains) or in Python attribute
reads over thousands of objects (an allocation instance's columns), where each call's fixed
cost, not its arithmetic, sets the time. Those loops have a compiled form in a ``*_kernels``
module near the code they replace:

* allocation instances (``instances/allocation/job_kernels.pyx``): the jobs' columns that
  ``AllocationInstance.arrays()`` reads, from each job's instance dict in one pass;
* allocation solvers (``solvers/allocation/*_kernels.pyx``, for ``interior_point/`` and
  ``price_decomposition/``);
* these are Cython, compiled by the install (``pyproject.toml``'s ext-modules at the module
  paths it lists; ``make`` reinstalls when a ``.pyx`` file changes), as scikit-learn does, so
  a kernel loads like any extension module, in about a millisecond, with no compiler or
  just-in-time step at run time. A 2,048-job solve takes tens of milliseconds: numba's
  start-up (1.5-3 s in the first call of each process, measured here) would dwarf it;
* placement (``solvers/placement/climb/*_kernels.py``): numba (``njit(cache=True)``, machine
  code kept on disk beside the module), used only for climbs large enough to repay that
  start-up (:func:`fleetplan.solvers.kernels.use_jit`);
* the numpy or Python code stays as the reference: tests check each kernel against it, and it
  runs wherever a kernel is not built, not worth its start-up, or switched off.

Set ``FLEETPLAN_KERNELS=0`` in the environment to run the reference code instead (to compare
the two). A leaf module below every layer (it imports only :mod:`fleetplan.errors`), so the
instances layer can load its kernels as the solvers do.

>>> isinstance(enabled(), bool)
True
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from fleetplan.errors import raise_interruption

ENVIRONMENT_SWITCH = "FLEETPLAN_KERNELS"


def enabled() -> bool:
    """Whether compiled kernels are used (``FLEETPLAN_KERNELS`` is not ``0``)."""
    return os.environ.get(ENVIRONMENT_SWITCH, "1").strip() != "0"


def load(name: str) -> ModuleType | None:
    """The compiled kernel module ``name``, or None when kernels are switched off or it was not
    built (a source tree used without installing it): the caller then runs its reference code."""
    if not enabled():
        return None
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise_interruption(error)
        return None
