"""Compiled kernels: where fleetplan uses numba, and the switch that turns them off.

Some solvers spend their time in many numpy calls on small arrays (the interior-point method's
iterations at a few thousand jobs, the Tetris climb's per-table estimates), where each call's
fixed cost, not its arithmetic, sets the time. Those loops have a compiled form in a
``*_kernels.py`` module beside the numpy code they replace:

* compiled with ``numba.njit(cache=True)`` (the machine code is kept on disk beside the module,
  so only a process on a fresh install pays for compiling), one thread, no ``parallel``;
* imported only when a solve needs them (``import numba`` costs about half a second), never by
  ``import fleetplan``;
* checked in tests against the numpy code they replace, which stays as the reference.

Set ``FLEETPLAN_KERNELS=0`` in the environment to run the numpy code instead (to compare the two,
or where numba cannot run).

>>> isinstance(enabled(), bool)
True
"""

from __future__ import annotations

import os

ENVIRONMENT_SWITCH = "FLEETPLAN_KERNELS"


def enabled() -> bool:
    """Whether solvers use their compiled kernels (``FLEETPLAN_KERNELS`` is not ``0``)."""
    return os.environ.get(ENVIRONMENT_SWITCH, "1").strip() != "0"
