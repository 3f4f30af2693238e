"""The planner's questions, above the paper's: how much to buy, what if, what binds, which plan.

* :func:`size` — the cheapest capacity to add so that service targets hold
  (:mod:`fleetplan.planning.sizing`, one module per kind);
* :func:`whatif` — sweeps over the fields of one's own instance (:mod:`fleetplan.planning.whatif`);
* :func:`compare` — plans side by side, metric by metric (:mod:`fleetplan.planning.compare`);
* :func:`marginal_values` — one unit more and fewer of each capacity, re-solved (:mod:`fleetplan.planning.marginal`);
* :func:`service_frontier` — the best a service metric can be on a cluster, no policy (:mod:`fleetplan.planning.frontier`);
* :mod:`fleetplan.planning.kinds` — what planning knows of each kind, told once;
* :mod:`fleetplan.planning.targets` — the ``METRIC>=VALUE`` targets sizing meets.

Planning calls the solvers and the judges; nothing below it imports it (docs/architecture.md, "The layers").
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "size": "fleetplan.planning.sizing", "SizingResult": "fleetplan.planning.sizing",
    "Purchase": "fleetplan.planning.sizing", "Target": "fleetplan.planning.targets",
    "parse_target": "fleetplan.planning.targets", "TARGETABLE": "fleetplan.planning.targets",
    "whatif": "fleetplan.planning.whatif", "compare": "fleetplan.planning.compare",
    "marginal_values": "fleetplan.planning.marginal", "MarginalValues": "fleetplan.planning.marginal",
    "service_frontier": "fleetplan.planning.frontier", "planning_kind": "fleetplan.planning.kinds",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fleetplan.planning' has no attribute '{name}'")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
