"""Solvers of the ``reservation`` kind (RAS, MAST §2): importing this module registers them.

``mip-highs`` and ``cpsat`` live in :mod:`fleetplan.solvers.reservation.exact`, ``keep``,
``greedy`` and ``hill-climb`` in :mod:`fleetplan.solvers.reservation.heuristics`.
"""

from fleetplan.solvers.reservation import exact as reservation_exact  # noqa: F401  (registers solvers)
from fleetplan.solvers.reservation import heuristics as reservation_heuristics  # noqa: F401  (registers solvers)

__all__: list[str] = []
