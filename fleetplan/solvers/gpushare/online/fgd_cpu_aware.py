"""FGD with CPU-aware ties: FGD's score first; among nodes of equal FGD score, the node where
the task strands the least idle GPU capacity for want of CPU, then the node name.

Why: FGD's fragmentation counts a node's idle GPUs as lost only once its CPU falls below what
a shape of the mix needs. A CPU-only task that leaves enough CPU for every shape changes no
shape's fit and scores 50 on every node, so ties send it to the first name — often a node with
idle GPUs, whose CPU a few such tasks later run out (the "idle on CPU-exhausted nodes" column
of ``benchmarks/results/gpushare.md``). This policy reads the CPU the idle GPUs are expected
to need instead of the all-or-nothing fit.

**The CPU-stranded GPU milli** of a node with ``c`` milli-cores and ``g`` idle GPU milli left:
``s(c, g) = max(0, g - c / r)``, ``r`` the mix's CPU per GPU milli (the weighted CPU of the
mix's GPU shapes over their weighted GPU milli): the idle GPU milli the node's CPU could not
serve at the mix's ratio. A task's **CPU-aware key** on a node is
``999 - min(999, round(s(after) - s(before)))`` (0..999: higher is better; the increase is in
GPU milli, 1,000 a whole GPU), and the node's score is ``1000 * FGD + key``: the key only
breaks FGD's ties. A task that takes GPUs as well as CPU can lower ``s`` (key capped at 999).

Example: the mix's ratio ``r`` is 8 milli-cores per GPU milli (8 cores per GPU). A CPU-only
task of 8,000 milli-cores, FGD 50 on two nodes: node A has 2 idle GPUs and 24,000 milli-cores
(``s`` = max(0, 2000 - 3000) = 0 before, max(0, 2000 - 2000) = 0 after: key 999), node B has 2
idle GPUs and 16,000 (``s`` 0 before, 2000 - 1000 = 1000 after: key 0). FGD by name may pick B;
this policy picks A. A node with no idle GPU always keys 999 for a CPU-only task.

Measured (``benchmarks/results/gpushare.md``, "A CPU-aware online policy"): more GPUs allocated
than FGD on the default trace at every seed, less on the CPU-heavy cpu250 variant; not the
default.

>>> import fleetplan
>>> instance = fleetplan.generate("gpushare", {"nodes": 8, "tasks": 60}, seed=0)
>>> fleetplan.solve(instance, "fgd-cpu-aware").evaluation.feasible
True
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.gpushare.fragmentation import TaskMix
from fleetplan.solvers.base import register
from fleetplan.solvers.gpushare.engine import ClusterState, TaskShape
from fleetplan.solvers.gpushare.online.fgd import FGD
from fleetplan.solvers.gpushare.run import policy_solver

# The key's range: FGD's score is scaled by KEY_RANGE so the key decides among equals only.
KEY_RANGE = 1000


def cpu_per_gpu_milli(mix: TaskMix) -> float:
    """The mix's CPU (milli-cores) per GPU milli over its GPU shapes, weighted; 0 without any.

    >>> import numpy as np
    >>> mix = TaskMix(cpu=np.array([8000, 4000, 2000]), gpu_milli=np.array([1000, 500, 0]),
    ...               num_gpu=np.array([1, 1, 0]), access=np.ones((3, 1), dtype=bool),
    ...               weight=np.array([0.5, 0.25, 0.25]))
    >>> cpu_per_gpu_milli(mix)  # (0.5 * 8000 + 0.25 * 4000) / (0.5 * 1000 + 0.25 * 500)
    8.0
    """
    gpu = mix.gpu_milli * mix.num_gpu
    used = gpu > 0
    milli = float((mix.weight[used] * gpu[used]).sum())
    return float((mix.weight[used] * mix.cpu[used]).sum()) / milli if milli > 0 else 0.0


def cpu_stranded_milli(cpu_left: np.ndarray, idle_milli: np.ndarray, ratio: float) -> np.ndarray:
    """``max(0, idle_milli - cpu_left / ratio)``: idle GPU milli the CPU left cannot serve at
    ``ratio`` milli-cores per GPU milli (none when ``ratio`` is 0: the mix needs no CPU)."""
    if ratio <= 0:
        return np.zeros(np.shape(idle_milli))
    return np.maximum(0.0, idle_milli - np.maximum(cpu_left, 0) / ratio)


def cpu_aware_key(state: ClusterState, nodes: np.ndarray, shape: TaskShape) -> np.ndarray:
    """The CPU-aware key (module docstring) of placing ``shape`` on each of ``nodes``: 0..999."""
    ratio = cpu_per_gpu_milli(state.mix)
    idle = state.gpu_left[nodes].sum(axis=1)
    cpu = state.cpu_left[nodes]
    before = cpu_stranded_milli(cpu, idle, ratio)
    after = cpu_stranded_milli(cpu - shape.cpu, idle - shape.gpu_total, ratio)
    growth = np.clip(np.rint(after - before), 0, KEY_RANGE - 1).astype(np.int64)
    return KEY_RANGE - 1 - growth


class FGDCpuAware(FGD):
    """FGD; among equal FGD scores the node where the task strands the least idle GPU milli for
    want of CPU (module docstring), then the node name."""

    name = "fgd-cpu-aware"

    def __init__(self) -> None:
        super().__init__(ties="name")

    def scores(self, state: ClusterState, nodes: np.ndarray, shape: TaskShape) -> np.ndarray:
        return super().scores(state, nodes, shape) * KEY_RANGE + cpu_aware_key(state, nodes, shape)


fgd_cpu_aware = register(
    "gpushare", "fgd-cpu-aware", exact=False,
    description="FGD whose ties go to the node where the task strands the least idle GPU capacity for want "
                "of CPU (at the mix's CPU per GPU), then the name; fleetplan's variant",
    reference="Weng, Yang et al., USENIX ATC 2023, §4 (FGD); the CPU-aware tie-break is fleetplan's")(
    policy_solver(FGDCpuAware, "fgd_cpu_aware",
                  "Place the tasks one at a time in arrival order by FGD with CPU-aware ties (module docstring)."))

__all__ = ["KEY_RANGE", "FGDCpuAware", "cpu_aware_key", "cpu_per_gpu_milli", "cpu_stranded_milli", "fgd_cpu_aware"]
