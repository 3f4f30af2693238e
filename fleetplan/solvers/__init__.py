"""Algorithms and backends, and the solver registry.

Importing this package registers every solver: each solver module below registers its
functions with :func:`fleetplan.solvers.base.register` when imported.

The package is also callable: ``fleetplan.solvers("allocation")`` lists the registered solvers
(the public API DESIGN.md names), while ``import fleetplan.solvers.highs`` still finds the
submodule — a plain function of that name would shadow the package.
"""

import sys
import types

from fleetplan.solvers import (
    allocation,  # noqa: F401
    binpack,  # noqa: F401
    placement,  # noqa: F401
    reservation,  # noqa: F401
)
from fleetplan.solvers.allocation import policies as allocation_policies  # noqa: F401
from fleetplan.solvers.allocation import water_filling  # noqa: F401
from fleetplan.solvers.base import (
    STATUSES,
    Progress,
    SolveResult,
    SolverSpec,
    get_solver,
    register,
    relative_gap,
    solve,
    solvers,
)
from fleetplan.solvers.placement import exact as placement_exact  # noqa: F401


class _RegistryModule(types.ModuleType):
    """This package's module type: calling it calls :func:`fleetplan.solvers.base.solvers`."""

    def __call__(self, kind: str | None = None) -> list[SolverSpec]:
        return solvers(kind)


sys.modules[__name__].__class__ = _RegistryModule

__all__ = [
    "STATUSES", "Progress", "SolveResult", "SolverSpec", "get_solver", "register", "relative_gap",
    "solve", "solvers",
]
