"""Solvers of the ``reservation`` kind (RAS, MAST §2): importing this module registers them.

``mip-highs`` and ``cpsat`` live in :mod:`fleetplan.solvers.reservation_exact`, ``keep``,
``greedy`` and ``hill-climb`` in :mod:`fleetplan.solvers.reservation_heuristics`.
"""

from fleetplan.solvers import reservation_exact, reservation_heuristics  # noqa: F401  (registers solvers)

__all__: list[str] = []
