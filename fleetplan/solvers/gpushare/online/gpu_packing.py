"""GpuPacking: fill partly used GPUs first, then free GPUs of partly used nodes, then free nodes
(the FGD paper's packing baseline).

Reference: hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/gpu_packing_score.go``
(``getPackingScore``), integer arithmetic as there:

* every GPU of the node free: ``max(33 - free GPUs, free GPUs)``;
* else the task's GPUs, taken from the least milli left up: if some are free,
  ``max(50 - free ones used, 33)``; else ``max(100 - sum(left * 100 // 1000) // 10, 50)``;
* a CPU task scores 0 everywhere.

Example: a sharing task on a node whose GPUs have 400 and 1,000 milli left uses the 400 one:
``100 - 40 // 10 = 96``; on a wholly free 8-GPU node it scores ``max(33 - 8, 8) = 25``.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 8, "tasks": 60}, seed=0)
>>> fleetplan.solve(instance, "gpu-packing").evaluation.feasible
True
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.gpushare import MILLI
from fleetplan.solvers.base import register
from fleetplan.solvers.gpushare.engine import MAX_SCORE, MIN_SCORE, ClusterState, Policy, TaskShape
from fleetplan.solvers.gpushare.run import policy_solver


class GpuPacking(Policy):
    name = "gpu-packing"

    def scores(self, state: ClusterState, nodes: np.ndarray, shape: TaskShape) -> np.ndarray:
        if shape.num_gpu == 0:
            return np.full(nodes.size, MIN_SCORE, dtype=np.int64)
        left = state.gpu_left[nodes]
        free = (left == MILLI).sum(axis=1)
        order = np.argsort(left, axis=1, kind="stable")
        ordered = np.take_along_axis(left, order, axis=1)
        enough = ordered >= shape.gpu_milli
        use = enough & (np.cumsum(enough, axis=1) <= shape.num_gpu)
        free_used = (use & (ordered == MILLI)).sum(axis=1)
        ratio = (np.where(use, ordered * 100 // MILLI, 0)).sum(axis=1)
        shared = np.maximum(MAX_SCORE - ratio // 10, MAX_SCORE // 2)
        some_free = np.maximum(MAX_SCORE // 2 - free_used, MAX_SCORE // 3)
        all_free = np.maximum(MAX_SCORE // 3 - free, free)
        return np.where(free == state.gpus[nodes], all_free, np.where(free_used > 0, some_free, shared)).astype(np.int64)


gpu_packing = register("gpushare", "gpu-packing", exact=False,
                       description="GpuPacking: partly used GPUs first, then free GPUs of used nodes, then free nodes",
                       reference="Weng, Yang et al., USENIX ATC 2023, §5 (baseline GpuPacking)")(
    policy_solver(GpuPacking, "gpu_packing",
                  "Place the tasks one at a time in arrival order by GPU packing (module docstring)."))
