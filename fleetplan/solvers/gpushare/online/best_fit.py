"""BestFit: the node with the least CPU and GPU left after the task, each normalised by the
largest node's and weighted one half.

Reference: hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/best_fit_score.go``
(``getBestFitScore``): ``score = int(100 * (1 - (0.5 (cpu_free - cpu) / 128000 + 0.5
(gpu_free - gpu) / 8000)))``. The simulator then rescales the scores to 0..100 across the nodes
(``NormalizeScore``), which keeps the order and the top set, so the choice is the same.

Example: 32,000 milli-cores and 2,000 GPU milli free, a task of 8,000 and 1,000: 0.5 * 24000 /
128000 + 0.5 * 1000 / 8000 = 0.15625, score int(84.375) = 84.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 8, "tasks": 60}, seed=0)
>>> fleetplan.solve(instance, "best-fit").evaluation.feasible
True
"""

from __future__ import annotations

import numpy as np

from fleetplan.solvers.base import register
from fleetplan.solvers.gpushare.engine import MAX_SCORE, ClusterState, Policy, TaskShape
from fleetplan.solvers.gpushare.online.dot_product import MAX_SPEC_CPU, MAX_SPEC_GPU
from fleetplan.solvers.gpushare.run import policy_solver


class BestFit(Policy):
    name = "best-fit"

    def scores(self, state: ClusterState, nodes: np.ndarray, shape: TaskShape) -> np.ndarray:
        left = (0.5 * (state.cpu_left[nodes] - shape.cpu) / MAX_SPEC_CPU
                + 0.5 * (state.gpu_left[nodes].sum(axis=1) - shape.gpu_total) / MAX_SPEC_GPU)
        return np.trunc(MAX_SCORE * (1.0 - left)).astype(np.int64)


best_fit = register("gpushare", "best-fit", exact=False,
                    description="BestFit: the node left with the least CPU and GPU (normalised, weighted one half each)",
                    reference="Weng, Yang et al., USENIX ATC 2023, §5 (baseline BestFit)")(
    policy_solver(BestFit, "best_fit",
                  "Place the tasks one at a time in arrival order by best fit (module docstring)."))
