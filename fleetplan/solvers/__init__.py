"""Algorithms and backends, and the solver registry.

Importing this package registers every solver: each solver module below registers its
functions with :func:`fleetplan.solvers.base.register` when imported.
"""

from fleetplan.solvers import (
    allocation,  # noqa: F401  (registers solvers)
    allocation_policies,  # noqa: F401  (registers solvers)
    placement,  # noqa: F401  (registers solvers)
    placement_exact,  # noqa: F401  (registers solvers)
    water_filling,  # noqa: F401  (registers solvers)
)
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

__all__ = [
    "STATUSES", "Progress", "SolveResult", "SolverSpec", "get_solver", "register", "relative_gap",
    "solve", "solvers",
]
