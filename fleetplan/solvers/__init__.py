"""Algorithms and backends, and the solver registry.

Each kind's solver modules register their functions with :func:`fleetplan.solvers.base.register`
when imported; :func:`~fleetplan.solvers.base.list_solvers` and
:func:`~fleetplan.solvers.base.get_solver` import a kind's modules the first time the kind is
asked for (the kind's ``ProblemKind.solver_modules``), so solving one kind loads no other kind's solvers.

``fleetplan.list_solvers("allocation")`` lists the registered solvers. The older spelling
``fleetplan.list_solvers("allocation")`` — this package made callable — still works and warns
(DeprecationWarning); ``import fleetplan.solvers.highs`` finds the submodule as ever.
"""

import sys
import types
import warnings

from fleetplan.solvers.base import (
    STATUSES,
    Progress,
    SolveResult,
    SolverSpec,
    get_solver,
    list_solvers,
    load_kind,
    register,
    relative_gap,
    solve,
    solvers,
)


class _RegistryModule(types.ModuleType):
    """This package's module type: calling it still lists the solvers, with a deprecation
    warning (a module that is also a function surprised readers; :func:`list_solvers` is the
    plain function)."""

    def __call__(self, kind: str | None = None) -> list[SolverSpec]:
        warnings.warn("fleetplan.solvers(kind) is deprecated; use fleetplan.list_solvers(kind)",
                      DeprecationWarning, stacklevel=2)
        return list_solvers(kind)


sys.modules[__name__].__class__ = _RegistryModule

__all__ = [
    "STATUSES", "Progress", "SolveResult", "SolverSpec", "get_solver", "list_solvers", "load_kind", "register",
    "relative_gap", "solve", "solvers",
]
