"""Random: each task on a node drawn uniformly among those that fit, a sharing task on a GPU
drawn uniformly among those with enough milli left (the FGD paper's Random baseline).

Reference: hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/random_score.go``
(a node picked at PreScore gets the maximum score, the others the minimum) and
``allocateGpuIdBasedOnRandomFit`` in ``open_gpu_share.go`` (the ``random`` GPU selection of the
paper's experiment scripts).

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 8, "tasks": 60}, seed=0)
>>> fleetplan.solve(instance, "random", seed=3).evaluation.feasible
True
"""

from __future__ import annotations

import numpy as np

from fleetplan.solvers.base import register
from fleetplan.solvers.gpushare.engine import ClusterState, Policy, TaskShape, best_fit_gpus
from fleetplan.solvers.gpushare.run import policy_solver


class RandomFit(Policy):
    name = "random"
    random_node = True

    def choose_gpus(self, state: ClusterState, node: int, shape: TaskShape, rng: np.random.Generator) -> list[int]:
        if not shape.is_sharing:
            return best_fit_gpus(state, node, shape)
        enough = np.flatnonzero(state.gpu_left[node, : int(state.gpus[node])] >= shape.gpu_milli)
        return [int(enough[rng.integers(enough.size)])]


random_fit = register("gpushare", "random", exact=False,
                      description="Random: a node drawn uniformly among those that fit, a sharing task on a random GPU",
                      reference="Weng, Yang et al., USENIX ATC 2023, §5 (baseline Random)")(
    policy_solver(RandomFit, "random_fit",
                  "Place the tasks one at a time in arrival order on random nodes (module docstring).", with_ties=False))
