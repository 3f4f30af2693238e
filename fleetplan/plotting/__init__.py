"""Pictures a planner can read, one module per kind or tool, one style.

* :mod:`~fleetplan.plotting.plans` — a plan against its instance (allocation heatmap, placement
  regions before and after); ``fleetplan plot`` calls :func:`plot_plan`;
* :mod:`~fleetplan.plotting.planning` — ``compare`` and ``whatif`` figures.

matplotlib loads inside the drawing functions (object-oriented API, no pyplot state).
"""

from __future__ import annotations

from fleetplan.plotting.plans import (  # noqa: F401  (the public names)
    plot_allocation,
    plot_placement,
    plot_plan,
)

__all__ = ["plot_allocation", "plot_placement", "plot_plan"]
