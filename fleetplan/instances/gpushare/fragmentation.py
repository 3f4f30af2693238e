"""The FGD paper's fragmentation measure (Weng, Yang et al., ATC 2023, §3), as its simulator
computes it.

Reference: hkust-adsl/kubernetes-scheduler-simulator, ``pkg/utils/frag.go``
(``NodeGpuShareFragAmount``, ``GetNodePodFrag``, ``GetTypicalPods``) and
``pkg/type/resource.go``; ported here in numpy, not copied.

**The expected task mix** (the paper's "target workload"). Tasks are grouped by shape — CPU
request, GPU milli, GPU count and accepted models (a CPU request of 0 counts as 100 milli, the
Kubernetes default the simulator reads requests through) — and the shapes are taken in
decreasing order of popularity until they cover ``threshold_pct`` percent of the tasks (95 %,
one shape at a time, CPU tasks included: the settings of the paper's experiment scripts). Each
kept shape's weight is its share among the kept ones.

**A node's fragmentation for one task shape** is the GPU capacity on the node that a task of
that shape cannot use:

* the task cannot run there at all — it is a CPU task (the simulator counts all the node's idle
  GPU milli as fragmented for it), the node's model is not one it accepts, the node lacks the
  CPU, or fewer than ``num_gpu`` GPUs have ``gpu_milli`` left: all the node's idle GPU milli;
* it can: the idle milli of the GPUs with less than ``gpu_milli`` left.

The node's fragmentation is the mix-weighted sum over shapes; the cluster's, the sum over
nodes. Memory plays no part (the simulator's node state holds CPU and GPUs only).

Example
-------
>>> import numpy as np
>>> mix = TaskMix(cpu=np.array([1000]), gpu_milli=np.array([500]), num_gpu=np.array([1]),
...               access=np.ones((1, 1), dtype=bool), weight=np.array([1.0]))
>>> node_fragmentation(np.array([8000]), np.array([[300, 1000]]), np.array([0]), mix).tolist()
[300.0]
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from fleetplan.instances.gpushare import GpushareArrays, MixEntry, access_matrix

DEFAULT_THRESHOLD_PCT = 95
DEFAULT_STEP = 1
# Kubernetes reads a zero CPU request as this many milli-cores when scoring
# (schedulerutil.GetNonzeroRequests), and the simulator's task shapes come through it.
NONZERO_CPU_MILLI = 100
# Elements of one (shapes x rows x GPUs) block: large candidate sets are split to stay under it.
BLOCK_ELEMENTS = 2_000_000


@dataclass(frozen=True)
class TaskMix:
    """Task shapes and their weights; ``access[k, m]``: shape k accepts model m."""

    cpu: np.ndarray
    gpu_milli: np.ndarray
    num_gpu: np.ndarray
    access: np.ndarray
    weight: np.ndarray

    def __len__(self) -> int:
        return len(self.weight)


def mix_entries(cpu: np.ndarray, num_gpu: np.ndarray, gpu_milli: np.ndarray, specs: list[str], *,
                threshold_pct: float = DEFAULT_THRESHOLD_PCT, step: int = DEFAULT_STEP,
                include_cpu_tasks: bool = True) -> list[MixEntry]:
    """The expected task mix of a list of tasks (module docstring), most popular shape first."""
    counts: Counter[tuple[int, int, int, str]] = Counter()
    for c, n, m, s in zip(cpu.tolist(), num_gpu.tolist(), gpu_milli.tolist(), specs, strict=True):
        if n == 0 and not include_cpu_tasks:
            continue
        counts[(c if c > 0 else NONZERO_CPU_MILLI, m, n, s)] += 1
    if not counts:
        return []
    # By count, ties by the shape (CPU, milli, count, models), both descending, as the simulator
    # sorts its target pods.
    ranked = sorted(counts.items(), key=lambda item: (item[1], item[0]), reverse=True)
    total = sum(counts.values())
    expected = threshold_pct * total / 100.0
    kept, covered = 0, 0
    while covered < expected and kept < len(ranked):
        limit = kept + step
        while kept < limit and kept < len(ranked):
            covered += ranked[kept][1]
            kept += 1
    return [MixEntry(cpu_milli=shape[0], gpu_milli=shape[1], num_gpu=shape[2], gpu_spec=shape[3],
                     weight=count / covered) for shape, count in ranked[:kept]]


def task_mix(entries: list[MixEntry], models: list[str]) -> TaskMix:
    """The mix as arrays against the cluster's ``models``."""
    return TaskMix(
        cpu=np.array([e.cpu_milli for e in entries], dtype=np.int64),
        gpu_milli=np.array([e.gpu_milli for e in entries], dtype=np.int64),
        num_gpu=np.array([e.num_gpu for e in entries], dtype=np.int64),
        access=access_matrix([e.gpu_spec for e in entries], models),
        weight=np.array([e.weight for e in entries], dtype=float))


def instance_mix(instance: object) -> TaskMix:
    """The instance's expected task mix: its ``mix``, else derived from its tasks."""
    arrays: GpushareArrays = instance.arrays()  # type: ignore[attr-defined]
    entries = instance.mix  # type: ignore[attr-defined]
    if entries is None:
        entries = mix_entries(arrays.task_cpu, arrays.task_num_gpu, arrays.task_gpu_milli, arrays.task_spec)
    return task_mix(entries, arrays.models)


def node_fragmentation(cpu_left: np.ndarray, gpu_left: np.ndarray, model: np.ndarray, mix: TaskMix) -> np.ndarray:
    """Fragmented GPU milli of each row (a node state): ``cpu_left`` (R,), ``gpu_left`` (R, G)
    with 0 for GPU slots a node lacks, ``model`` (R,) model indices."""
    rows = len(cpu_left)
    out = np.zeros(rows)
    if rows == 0 or len(mix) == 0:
        return out
    width = max(gpu_left.shape[1], 1)
    chunk = max(1, BLOCK_ELEMENTS // (len(mix) * width))
    for start in range(0, rows, chunk):
        stop = min(rows, start + chunk)
        out[start:stop] = _fragmentation_block(cpu_left[start:stop], gpu_left[start:stop], model[start:stop], mix)
    return out


def _fragmentation_block(cpu_left: np.ndarray, gpu_left: np.ndarray, model: np.ndarray, mix: TaskMix) -> np.ndarray:
    total = gpu_left.sum(axis=1)  # (R,)
    enough = gpu_left[None, :, :] >= mix.gpu_milli[:, None, None]  # (K, R, G)
    usable = (gpu_left[None, :, :] * enough).sum(axis=2)  # milli on GPUs with enough left
    can_host = ((enough.sum(axis=2) >= mix.num_gpu[:, None])
                & (cpu_left[None, :] >= mix.cpu[:, None])
                & mix.access[:, model]
                & (mix.gpu_milli > 0)[:, None])
    lost = np.where(can_host, total[None, :] - usable, total[None, :])
    # Summed shape by shape in a fixed order, so a node's value does not depend on which other
    # rows are computed with it (a matrix product's blocking, and numpy's pairwise sum over a
    # single row, did, by an ulp: enough to move a truncated FGD score and the scheduler's choice).
    out = np.zeros(lost.shape[1])
    for weight, row in zip(mix.weight.tolist(), lost, strict=True):
        out += weight * row
    return out


__all__ = ["DEFAULT_STEP", "DEFAULT_THRESHOLD_PCT", "TaskMix", "instance_mix", "mix_entries", "node_fragmentation",
           "task_mix"]
