"""FGD, Fragmentation Gradient Descent (Weng, Yang et al., ATC 2023, §4): place each task where
it increases the cluster's fragmentation least.

Reference: hkust-adsl/kubernetes-scheduler-simulator, ``pkg/simulator/plugin/fgd_score.go``
(``calculateGpuShareFragExtendScore``) and ``pkg/utils/frag.go``. A node's score is
``int(sigmoid((F_before - F_after) / 1000) * 100)``, F the node's fragmentation against the
expected task mix (:mod:`fleetplan.instances.gpushare.fragmentation`). A sharing task tries every
GPU with enough milli left and keeps the best (the first by index on a tie), which is also the
GPU it is bound to; other tasks take what ``NodeResource.Sub`` takes (the first free GPUs).

Example: a 2-GPU node with 1,000 and 600 milli left and a mix of one shape (1,000 milli-cores,
500 GPU milli): both GPUs can take such a task, so F = 0. A 500-milli task on GPU 1 leaves 100
milli there, which the mix cannot use (F = 100, score int(sigmoid(-0.1) * 100) = 47); on GPU 0
it leaves 500 and 600 (F = 0, score 50): FGD binds it to GPU 0.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 8, "tasks": 60}, seed=0)
>>> fleetplan.solve(instance, "fgd").evaluation.feasible
True
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from fleetplan.instances.gpushare import GpushareInstance
from fleetplan.instances.gpushare.fragmentation import node_fragmentation
from fleetplan.solvers.base import Progress, SolveResult, register
from fleetplan.solvers.gpushare.engine import (
    MAX_SCORE,
    ClusterState,
    Policy,
    TaskShape,
    best_fit_gpus,
)
from fleetplan.solvers.gpushare.run import run_policy


def frag_score(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """``int64(sigmoid((before - after) / 1000) * 100)``, truncated as Go's conversion truncates."""
    return (MAX_SCORE / (1.0 + np.exp(-(before - after) / 1000.0))).astype(np.int64)


def sharing_candidates(state: ClusterState, nodes: np.ndarray, shape: TaskShape) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a sharing task: (row in ``nodes``, GPU, score) of every GPU with enough milli left."""
    left = state.gpu_left[nodes]
    rows, gpus = np.nonzero(left >= shape.gpu_milli)
    trial = left[rows].copy()
    trial[np.arange(rows.size), gpus] -= shape.gpu_milli
    cpu = state.cpu_left[nodes][rows] - shape.cpu
    after = node_fragmentation(cpu, trial, state.model[nodes][rows], state.mix)
    return rows, gpus, frag_score(state.fragmentation[nodes][rows], after)


class FGD(Policy):
    """FGD; ``ties="best-fit"`` breaks equal FGD scores by BestFit's score before the node's name
    (fleetplan's variant, not the paper's: see ``docs/gpushare.md``)."""

    name = "fgd"

    def __init__(self, ties: str = "name") -> None:
        self.ties = ties
        if ties == "best-fit":
            from fleetplan.solvers.gpushare.online.best_fit import BestFit

            self.name = "fgd-best-fit-ties"
            self._tie_break = BestFit()

    def scores(self, state: ClusterState, nodes: np.ndarray, shape: TaskShape) -> np.ndarray:
        if shape.is_sharing:
            rows, _, score = sharing_candidates(state, nodes, shape)
            out = np.full(nodes.size, np.iinfo(np.int64).min)
            np.maximum.at(out, rows, score)
        else:
            cpu, gpu = state.after(nodes, shape)
            out = frag_score(state.fragmentation[nodes], node_fragmentation(cpu, gpu, state.model[nodes], state.mix))
        if self.ties == "best-fit":  # FGD's score first, BestFit's (0..100) among equals
            out = out * 1000 + self._tie_break.scores(state, nodes, shape)
        return out

    def choose_gpus(self, state: ClusterState, node: int, shape: TaskShape, rng: np.random.Generator) -> list[int]:
        if not shape.is_sharing:
            return best_fit_gpus(state, node, shape)
        _, gpus, score = sharing_candidates(state, np.array([node]), shape)
        return [int(gpus[np.argmax(score)])]  # the first GPU of the highest score


@register("gpushare", "fgd", exact=False, default=True,
          description="Fragmentation Gradient Descent: each task where the cluster's expected fragmentation "
                      "grows least, sharing tasks on the GPU that does",
          reference="Weng, Yang et al., Beware of Fragmentation, USENIX ATC 2023, §4 (FGD)")
def fgd(instance: GpushareInstance, *, time_limit: float | None = None, seed: int = 0, threads: int = 1,
        progress: Progress, ties: Literal["name", "random", "best-fit"] = "name") -> SolveResult:
    """Place the tasks one at a time in arrival order by FGD (module docstring).

    Parameters
    ----------
    ties : str
        how equal FGD scores are broken: name (the node whose name sorts first, the paper's
        simulator), random (stock Kubernetes' uniform choice) or best-fit (BestFit's score
        among equals, then the name; fleetplan's variant)
    """
    policy = FGD("best-fit" if ties == "best-fit" else "name")
    return run_policy(instance, policy, time_limit=time_limit, seed=seed, progress=progress,
                      ties="random" if ties == "random" else "name")
