"""Simulators built on the solvers: a plain, deterministic ``(scenario, scheduler, seed)``
function per simulator (see :mod:`fleetplan.sim.engine` for the pattern).

Simulators are found by name without importing the others (or their solvers)::

    from fleetplan import sim
    result = sim.run("parsync", {"schedulers": 4}, scheduler="latency-first", seed=1)
    print(result.metrics)

A ``time_limit`` (seconds, the whole call) stops a simulation that would run longer: it raises
:class:`SimulationTimeLimit`, saying how far it got, and returns no result.
"""

from __future__ import annotations

import importlib
from typing import Any

from pydantic import BaseModel

from fleetplan.instances.base import InstanceError
from fleetplan.sim.engine import (
    EventQueue,
    ProgressCallback,
    SimResult,
    SimulationTimeLimit,
    SimulatorSpec,
)

# name -> module defining SIMULATOR; a new simulator adds one line here.
_MODULES: dict[str, str] = {
    "cluster": "fleetplan.sim.cluster",
    "gpushare": "fleetplan.sim.gpushare",
    "mast": "fleetplan.sim.mast",
    "parsync": "fleetplan.sim.parsync",
}


def names() -> list[str]:
    """The simulators fleetplan knows."""
    return sorted(_MODULES)


def get_simulator(name: str) -> SimulatorSpec:
    """The :class:`SimulatorSpec` of simulator ``name`` (imports its module on first use)."""
    if name not in _MODULES:
        raise InstanceError("simulator", f"unknown simulator '{name}' (known: {', '.join(names()) or 'none'})")
    return importlib.import_module(_MODULES[name]).SIMULATOR


def run(name: str, scenario: dict[str, Any] | BaseModel | None = None, scheduler: str | None = None,
        seed: int = 0, *, progress: ProgressCallback | None = None, time_limit: float | None = None) -> SimResult:
    """Run simulator ``name`` on ``scenario`` (a dict or its model) with ``scheduler``; see
    :meth:`SimulatorSpec.run` for ``progress`` and ``time_limit``."""
    return get_simulator(name).run(scenario, scheduler, seed, progress=progress, time_limit=time_limit)


__all__ = ["EventQueue", "SimResult", "SimulationTimeLimit", "SimulatorSpec", "get_simulator", "names", "run"]
