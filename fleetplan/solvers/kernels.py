"""The solvers' side of the compiled kernels: the switch and the loader
(:func:`enabled`, :func:`load`, ``ENVIRONMENT_SWITCH``) live in :mod:`fleetplan.kernels`, which
lists where every kernel is, and are re-exported here; what stays here is when a numba kernel
repays its start-up (:func:`use_jit`).

>>> use_jit(10)
False
"""

from __future__ import annotations

from fleetplan.kernels import ENVIRONMENT_SWITCH, enabled, load

__all__ = ["ENVIRONMENT_SWITCH", "JIT_MIN_SIZE", "enabled", "load", "use_jit"]

# numba's start-up (import and first call: 1.5-3 s in each process; compiling, about 18 s once
# per install) pays off from about this size: the Tetris climb at 10^5 tables took 3.7 s with
# its kernels against 6.0 s without, start-up included, while a 10-table solve went from 2.1 to
# 3.3-3.7 s of wall.
JIT_MIN_SIZE = 50_000


def use_jit(size: int) -> bool:
    """Whether a problem of ``size`` (the Tetris climb's tables) runs its numba kernels."""
    return enabled() and size >= JIT_MIN_SIZE
