"""GpuClustering: put tasks of the same GPU "affinity" (sharing, or k whole GPUs) together, and
prefer fuller nodes (the FGD paper's clustering baseline).

Reference: hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/gpu_clustering_score.go``
with the affinities of ``GetGpuAffinityFromPodAnnotation``. With ``fill = 25 * (8000 - GPU milli
left) // 8000`` (integer arithmetic), a GPU task scores ``75 + fill`` on a node holding only
tasks of its affinity, ``50 + fill`` on one holding its affinity among others, ``25 + fill``
on a node without GPU tasks and ``fill`` elsewhere; a CPU task scores 0 everywhere.

Example: a sharing task; a 2-GPU node with 1,200 milli left holding only sharing tasks scores
75 + 25 * 6800 // 8000 = 96; an empty 8-GPU node 25 + 0 = 25.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 8, "tasks": 60}, seed=0)
>>> fleetplan.solve(instance, "gpu-clustering").evaluation.feasible
True
"""

from __future__ import annotations

import numpy as np

from fleetplan.solvers.base import register
from fleetplan.solvers.gpushare.engine import MAX_SCORE, MIN_SCORE, ClusterState, Policy, TaskShape
from fleetplan.solvers.gpushare.online.dot_product import MAX_SPEC_GPU as MAX_SPEC_GPU_MILLI
from fleetplan.solvers.gpushare.run import policy_solver


class GpuClustering(Policy):
    name = "gpu-clustering"

    def scores(self, state: ClusterState, nodes: np.ndarray, shape: TaskShape) -> np.ndarray:
        if shape.num_gpu == 0:
            return np.full(nodes.size, MIN_SCORE, dtype=np.int64)
        quarter = MAX_SCORE // 4
        fill = np.fix(quarter * (MAX_SPEC_GPU_MILLI - state.gpu_left[nodes].sum(axis=1)) / MAX_SPEC_GPU_MILLI)
        tag = 0 if shape.is_sharing else shape.num_gpu
        affinity = state.affinity[nodes]
        kinds = (affinity > 0).sum(axis=1)
        mine = affinity[:, tag] > 0
        base = np.where(mine, np.where(kinds == 1, 3 * quarter, 2 * quarter), np.where(kinds == 0, quarter, 0))
        return (base + fill).astype(np.int64)


gpu_clustering = register("gpushare", "gpu-clustering", exact=False,
                          description="GpuClustering: tasks of one GPU affinity (sharing, k whole GPUs) together, fuller nodes first",
                          reference="Weng, Yang et al., USENIX ATC 2023, §5 (baseline GpuClustering)")(
    policy_solver(GpuClustering, "gpu_clustering",
                  "Place the tasks one at a time in arrival order by GPU clustering (module docstring)."))
