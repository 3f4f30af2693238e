"""Pictures a planner can read: one module per kind or simulator, one style
(:mod:`~fleetplan.plotting.style`).

* :mod:`~fleetplan.plotting.plans` — a plan against its instance, for every kind
  (``fleetplan plot INSTANCE PLAN -o FILE.png`` calls :func:`plot_plan`): the allocation heatmap
  and placement's regions here, :mod:`~fleetplan.plotting.reservation` and
  :mod:`~fleetplan.plotting.binpack` for the other two kinds;
* :mod:`~fleetplan.plotting.cluster`, :mod:`~fleetplan.plotting.parsync`,
  :mod:`~fleetplan.plotting.mast` — the simulators' results (``fleetplan simulate NAME --plot``
  and ``--out`` call :func:`plot_simulation` and :func:`simulation_figures`);
* :mod:`~fleetplan.plotting.bench` — the benchmark report's figures;
* :mod:`~fleetplan.plotting.planning` — ``compare`` and ``whatif`` figures.

Layers: plotting sits above the simulators and below the benchmarks, planning and the command
line; a simulator draws nothing and imports nothing from here. matplotlib loads inside the
drawing functions (object-oriented API, no pyplot state).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from fleetplan.plotting.plans import (  # noqa: F401  (the public names)
    plot_allocation,
    plot_placement,
    plot_plan,
)

# simulator name -> the module drawing its results (plot_run, plot_files)
SIMULATOR_MODULES = {"cluster": "fleetplan.plotting.cluster", "gpushare": "fleetplan.plotting.gpushare",
                     "mast": "fleetplan.plotting.mast",
                     "parsync": "fleetplan.plotting.parsync"}


def _simulator_module(name: str) -> Any:
    from fleetplan.errors import InstanceError

    if name not in SIMULATOR_MODULES:
        raise InstanceError("simulator", f"no pictures for simulator '{name}' (known: {', '.join(SIMULATOR_MODULES)})")
    return importlib.import_module(SIMULATOR_MODULES[name])


def plot_simulation(result: Any, path: str | Path | None = None) -> Any:
    """The figure of one simulation result (by its simulator), saved to ``path`` if given."""
    return _simulator_module(result.simulator).plot_run(result, path)


def simulation_figures(result: Any, folder: str | Path) -> list[Path]:
    """Every figure of one simulation result, written into ``folder``; the files written."""
    return _simulator_module(result.simulator).plot_files(result, folder)


__all__ = ["SIMULATOR_MODULES", "plot_allocation", "plot_placement", "plot_plan", "plot_simulation",
           "simulation_figures"]
