"""DotProd, Tetris's alignment score (Grandl et al., SIGCOMM 2014) as the FGD paper runs it:
prefer the node whose free (CPU, GPU) vector is least aligned with the task's request.

Reference: hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/dot_product_score.go``
with the experiment's settings (``-gpusel best -dimext merge -norm max``): the node's free CPU
and total free GPU milli and the task's CPU and total GPU milli, each divided by the largest
node's (128,000 milli-cores, 8,000 GPU milli), give ``score = int(100 * (1 - dot / 2))``.
GPUs are bound by the ``best`` selection (the least milli left that is enough).

Example: a node with 64,000 milli-cores and 4,000 GPU milli free, a task of 16,000 and 1,000:
dot = 0.5 * 0.125 + 0.5 * 0.125 = 0.125, score int(100 * (1 - 0.0625)) = 93.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 8, "tasks": 60}, seed=0)
>>> fleetplan.solve(instance, "dot-product").evaluation.feasible
True
"""

from __future__ import annotations

import numpy as np

from fleetplan.solvers.base import register
from fleetplan.solvers.gpushare.engine import MAX_SCORE, ClusterState, Policy, TaskShape
from fleetplan.solvers.gpushare.run import policy_solver

# Largest node of the trace (the simulator's MaxSpecCpu and MaxSpecGpu), for normalising.
MAX_SPEC_CPU, MAX_SPEC_GPU = 128_000.0, 8_000.0


class DotProduct(Policy):
    name = "dot-product"

    def scores(self, state: ClusterState, nodes: np.ndarray, shape: TaskShape) -> np.ndarray:
        free_cpu = state.cpu_left[nodes] / MAX_SPEC_CPU
        free_gpu = state.gpu_left[nodes].sum(axis=1) / MAX_SPEC_GPU
        dot = free_cpu * (shape.cpu / MAX_SPEC_CPU) + free_gpu * (shape.gpu_total / MAX_SPEC_GPU)
        return (MAX_SCORE * (1.0 - dot / 2.0)).astype(np.int64)


dot_product = register("gpushare", "dot-product", exact=False,
                       description="DotProd (Tetris): the node whose free CPU/GPU vector is least aligned with the request",
                       reference="Grandl et al., Tetris, SIGCOMM 2014; as run in Weng, Yang et al., USENIX ATC 2023, §5")(
    policy_solver(DotProduct, "dot_product",
                  "Place the tasks one at a time in arrival order by the dot-product score (module docstring)."))
