"""Algorithms and backends, and the solver registry.

Each kind's solver modules register their functions with :func:`fleetplan.solvers.base.register`
when imported; :func:`~fleetplan.solvers.base.solvers` and :func:`~fleetplan.solvers.base.get_solver`
import a kind's modules the first time the kind is asked for (``KIND_MODULES``), so solving one
kind loads no other kind's solvers.

The package is also callable: ``fleetplan.solvers("allocation")`` lists the registered solvers
(the public API DESIGN.md names), while ``import fleetplan.solvers.highs`` still finds the
submodule — a plain function of that name would shadow the package.
"""

import sys
import types

from fleetplan.solvers.base import (
    STATUSES,
    Progress,
    SolveResult,
    SolverSpec,
    get_solver,
    load_kind,
    register,
    relative_gap,
    solve,
    solvers,
)


class _RegistryModule(types.ModuleType):
    """This package's module type: calling it calls :func:`fleetplan.solvers.base.solvers`."""

    def __call__(self, kind: str | None = None) -> list[SolverSpec]:
        return solvers(kind)


sys.modules[__name__].__class__ = _RegistryModule

__all__ = [
    "STATUSES", "Progress", "SolveResult", "SolverSpec", "get_solver", "load_kind", "register", "relative_gap",
    "solve", "solvers",
]
