"""The one-task-at-a-time scheduling loop the gpushare policies share: filter, score, bind.

This follows the Kubernetes scheduler as the FGD paper's simulator runs it
(hkust-adsl/kubernetes-scheduler-simulator: ``pkg/simulator/simulator.go`` schedules the pods
one by one; ``pkg/simulator/plugin/open_gpu_share.go`` filters and binds GPUs; each policy in
``pkg/simulator/plugin/*_score.go`` scores the nodes that pass), re-written in numpy:

* **filter** — a node passes when it has the task's CPU and memory left (Kubernetes'
  NodeResourcesFit) and, for a GPU task, its model is accepted and ``num_gpu`` of its GPUs have
  ``gpu_milli`` left (Open-Gpu-Share);
* **score** — the policy's integer score (0..100) of every node that passes; the highest wins,
  ties going to the node whose name sorts first, as the simulator's own fork of the Kubernetes
  scheduler breaks them "for reproducibility" (``vendor/k8s.io/kubernetes/pkg/scheduler/core/
  generic_scheduler.go``, ``selectHost``); ``ties="random"`` breaks them uniformly at random
  instead, as the stock Kubernetes scheduler does;
* **bind** — the policy picks the GPUs on the chosen node (by default the best fit for a
  sharing task — the GPU with the least milli left that is enough — and the first wholly free
  GPUs by index for whole-GPU tasks: the simulator's ``best`` GPU selection and
  ``AllocateExclusiveGpuId``).

Speed: a node's score depends only on its own state and the task's shape (CPU, memory, GPU
count, milli, accepted models), so scores are cached per (shape, node) and a node's entries
are dropped when a task is bound to it. A run over the trace's 1,213 nodes scores each node
again only when it changed since the last task of the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fleetplan.instances.gpushare import MAX_GPUS_PER_NODE, MILLI, GpushareArrays
from fleetplan.instances.gpushare.fragmentation import TaskMix, node_fragmentation

# Score a policy gives a node it does not score (a CPU task under a GPU-only policy).
MIN_SCORE, MAX_SCORE = 0, 100


@dataclass(frozen=True)
class TaskShape:
    """What the filter and the scores read of a task."""

    cpu: int
    memory: int
    num_gpu: int
    gpu_milli: int
    access: np.ndarray  # (M,) bool: accepted models

    @property
    def is_sharing(self) -> bool:
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def gpu_total(self) -> int:
        return self.num_gpu * self.gpu_milli


class ClusterState:
    """What is left on every node, and the per-node values the policies read: CPU, memory and
    each GPU's milli left (0 for GPU slots a node lacks), the count of tasks of each GPU
    "affinity" on the node (column 0 sharing tasks, column k tasks of k whole GPUs), and each
    node's fragmentation against ``mix``."""

    def __init__(self, arrays: GpushareArrays, mix: TaskMix) -> None:
        self.arrays = arrays
        self.mix = mix
        self.cpu_left = arrays.node_cpu.astype(np.int64).copy()
        self.memory_left = arrays.node_memory.astype(np.int64).copy()
        width = max(arrays.max_gpus, 1)
        self.gpu_left = np.where(np.arange(width)[None, :] < arrays.node_gpus[:, None], MILLI, 0).astype(np.int64)
        self.gpus = arrays.node_gpus
        self.model = arrays.node_model
        self.affinity = np.zeros((arrays.num_nodes, MAX_GPUS_PER_NODE + 1), dtype=np.int64)
        self.fragmentation = node_fragmentation(self.cpu_left, self.gpu_left, self.model, mix)
        self.allocated_milli = 0

    @classmethod
    def from_left(cls, arrays: GpushareArrays, mix: TaskMix, cpu_left: np.ndarray, memory_left: np.ndarray,
                  gpu_left: np.ndarray, affinity: np.ndarray | None = None) -> ClusterState:
        """A state in the middle of a run: what is left on each node given as it is (CPU and
        memory (N,), each GPU's milli (N, G), 0 for slots a node lacks), not computed from
        placements — a scheduler extender reads it from the cluster's node objects.
        ``affinity`` (N, MAX_GPUS_PER_NODE + 1) counts the tasks of each GPU affinity on each
        node when known (GpuClustering reads it); zeros otherwise."""
        state = cls.__new__(cls)
        state.arrays, state.mix = arrays, mix
        state.cpu_left = np.asarray(cpu_left, dtype=np.int64)
        state.memory_left = np.asarray(memory_left, dtype=np.int64)
        state.gpu_left = np.asarray(gpu_left, dtype=np.int64).reshape(arrays.num_nodes, -1)
        state.gpus, state.model = arrays.node_gpus, arrays.node_model
        state.affinity = (np.zeros((arrays.num_nodes, MAX_GPUS_PER_NODE + 1), dtype=np.int64)
                          if affinity is None else np.asarray(affinity, dtype=np.int64))
        state.fragmentation = node_fragmentation(state.cpu_left, state.gpu_left, state.model, mix)
        state.allocated_milli = 0
        return state

    def feasible(self, shape: TaskShape) -> np.ndarray:
        """(N,) bool: the nodes that pass the filter for ``shape``."""
        mask = (self.cpu_left >= shape.cpu) & (self.memory_left >= shape.memory)
        if shape.num_gpu > 0:
            mask &= shape.access[self.model]
            mask &= (self.gpu_left >= shape.gpu_milli).sum(axis=1) >= shape.num_gpu
        return mask

    def after(self, nodes: np.ndarray, shape: TaskShape) -> tuple[np.ndarray, np.ndarray]:
        """CPU (n,) and GPU (n, G) left on ``nodes`` once ``shape`` is taken from each as the
        simulator's ``NodeResource.Sub`` takes it: from the GPUs with the least milli left that
        is enough (whole-GPU tasks: the first free GPUs by index)."""
        cpu = self.cpu_left[nodes] - shape.cpu
        gpu = self.gpu_left[nodes].copy()
        if shape.num_gpu > 0:
            order = np.argsort(gpu, axis=1, kind="stable")
            ordered = np.take_along_axis(gpu, order, axis=1)
            enough = ordered >= shape.gpu_milli
            take = enough & (np.cumsum(enough, axis=1) <= shape.num_gpu)
            ordered -= np.where(take, shape.gpu_milli, 0)
            np.put_along_axis(gpu, order, ordered, axis=1)
        return cpu, gpu

    def bind(self, node: int, gpus: list[int], shape: TaskShape) -> None:
        self.cpu_left[node] -= shape.cpu
        self.memory_left[node] -= shape.memory
        for g in gpus:
            self.gpu_left[node, g] -= shape.gpu_milli
        if shape.num_gpu > 0:
            self.affinity[node, 0 if shape.is_sharing else shape.num_gpu] += 1
        self.allocated_milli += shape.gpu_total
        self.fragmentation[node] = node_fragmentation(self.cpu_left[node:node + 1], self.gpu_left[node:node + 1],
                                                      self.model[node:node + 1], self.mix)[0]


def best_fit_gpus(state: ClusterState, node: int, shape: TaskShape) -> list[int]:
    """The simulator's ``best`` GPU selection (``allocateGpuIdBasedOnBestFit``): a sharing task
    on the GPU with the least milli left that is enough (the first such by index); a whole-GPU
    task on the first free GPUs by index (``AllocateExclusiveGpuId``)."""
    if shape.num_gpu == 0:
        return []
    left = state.gpu_left[node, : int(state.gpus[node])]
    if shape.is_sharing:
        enough = np.flatnonzero(left >= shape.gpu_milli)
        return [int(enough[np.argmin(left[enough])])]
    return np.flatnonzero(left == MILLI)[: shape.num_gpu].astype(int).tolist()


class Policy:
    """A scoring policy: ``scores`` of the nodes that pass the filter, and the GPUs it binds.

    ``random_node``: the policy draws a node uniformly among those that pass instead of
    scoring (the simulator's Random plugin)."""

    name = "policy"
    random_node = False

    def scores(self, state: ClusterState, nodes: np.ndarray, shape: TaskShape) -> np.ndarray:
        raise NotImplementedError

    def choose_gpus(self, state: ClusterState, node: int, shape: TaskShape, rng: np.random.Generator) -> list[int]:
        return best_fit_gpus(state, node, shape)


def task_shapes(arrays: GpushareArrays) -> tuple[np.ndarray, list[TaskShape]]:
    """Per task the index of its shape, and the distinct shapes."""
    spec_ids = {s: i for i, s in enumerate(sorted(set(arrays.task_spec)))}
    spec = np.fromiter((spec_ids[s] for s in arrays.task_spec), dtype=np.int64, count=arrays.num_tasks)
    keys = np.column_stack([arrays.task_cpu, arrays.task_memory, arrays.task_num_gpu, arrays.task_gpu_milli, spec])
    if arrays.num_tasks == 0:
        return np.zeros(0, dtype=np.int64), []
    distinct, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    shapes = [TaskShape(int(k[0]), int(k[1]), int(k[2]), int(k[3]), arrays.task_access[f])
              for k, f in zip(distinct, first, strict=True)]
    return inverse.reshape(-1).astype(np.int64), shapes


@dataclass
class Outcome:
    """Where each task went: node row (-1 pending) and GPU indices; ``scheduled`` tasks were
    tried before the run stopped (all of them unless a time limit cut it)."""

    task_node: np.ndarray
    task_gpus: list[list[int]]
    scheduled: int


TIES = ("name", "random")


def place_in_order(state: ClusterState, policy: Policy, *, seed: int, order: np.ndarray | None = None,
                   ties: str = "name", stop: Callable[[int], bool] | None = None,
                   observe: Callable[[int, int], None] | None = None,
                   tie_rank: np.ndarray | None = None) -> Outcome:
    """Place the instance's tasks one at a time (``order``: task rows; default arrival order).

    ``ties``: equal top scores go to the node whose name sorts first (``"name"``, the paper's
    simulator) or to one drawn uniformly (``"random"``, stock Kubernetes). ``tie_rank`` (N,)
    replaces the names' order for ``"name"``: the node of the smallest rank wins (the paper's
    simulator prefixes every node's name with a random number before the run, so its "first
    name" is a random but fixed node: see :func:`shuffled_name_rank`). ``stop(k)`` is asked
    before the k-th task (a time limit); ``observe(task, node)`` is told each outcome (node -1:
    pending), after the bind."""
    if ties not in TIES:
        raise ValueError(f"ties must be one of {TIES}, got {ties!r}")
    arrays = state.arrays
    rng = np.random.default_rng(seed)
    if tie_rank is None:
        name_rank = np.empty(arrays.num_nodes, dtype=np.int64)
        name_rank[np.argsort(np.array(arrays.node_ids, dtype=object), kind="stable")] = np.arange(arrays.num_nodes)
    else:
        name_rank = np.asarray(tie_rank, dtype=np.int64)
        if name_rank.shape != (arrays.num_nodes,):
            raise ValueError(f"tie_rank must have one entry per node ({arrays.num_nodes}), got shape {name_rank.shape}")
    shape_of, shapes = task_shapes(arrays)
    rows = np.arange(arrays.num_tasks) if order is None else np.asarray(order, dtype=np.int64)
    cache = np.zeros((len(shapes), arrays.num_nodes), dtype=np.int64)
    valid = np.zeros((len(shapes), arrays.num_nodes), dtype=bool)
    task_node = np.full(arrays.num_tasks, -1, dtype=np.int64)
    task_gpus: list[list[int]] = [[] for _ in range(arrays.num_tasks)]
    scheduled = 0
    for k, j in enumerate(rows.tolist()):
        if stop is not None and stop(k):
            break
        scheduled += 1
        s = int(shape_of[j])
        shape = shapes[s]
        candidates = np.flatnonzero(state.feasible(shape))
        if candidates.size == 0:
            if observe is not None:
                observe(j, -1)
            continue
        if policy.random_node:
            node = int(candidates[rng.integers(candidates.size)])
        else:
            stale = candidates[~valid[s, candidates]]
            if stale.size:
                cache[s, stale] = policy.scores(state, stale, shape)
                valid[s, stale] = True
            scores = cache[s, candidates]
            best = candidates[scores == scores.max()]
            if best.size == 1:
                node = int(best[0])
            elif ties == "name":
                node = int(best[np.argmin(name_rank[best])])
            else:
                node = int(best[rng.integers(best.size)])
        gpus = policy.choose_gpus(state, node, shape, rng)
        state.bind(node, gpus, shape)
        valid[:, node] = False
        task_node[j] = node
        task_gpus[j] = gpus
        if observe is not None:
            observe(j, node)
    return Outcome(task_node, task_gpus, scheduled)


def shuffled_name_rank(node_ids: list[str], rng: np.random.Generator) -> np.ndarray:
    """(N,) the rank of each node's name once renamed as the paper's simulator renames them.

    Before the first task its ``syncClusterResourceList`` sorts the nodes by name, draws a
    permutation ``p`` of 0..N-1 and renames the i-th node ``"%04d-" % p[i] + name``; ties then
    go to the smallest of these names, i.e. to the node with the smallest ``p``. So the node
    that wins a tie is random per run (the seed) but the same all through the run. ``rng``
    draws ``p`` (numpy's generator, not Go's ``math/rand``: the same procedure, other draws).

    >>> rank = shuffled_name_rank(["b", "a", "c"], np.random.default_rng(0))
    >>> sorted(rank.tolist())
    [0, 1, 2]
    """
    n = len(node_ids)
    by_name = np.argsort(np.array(node_ids, dtype=object), kind="stable")
    prefix = rng.permutation(n)
    rank = np.empty(n, dtype=np.int64)
    rank[by_name] = prefix  # distinct 4-digit prefixes: their order is the new names' order
    return rank


__all__ = ["MAX_SCORE", "MIN_SCORE", "TIES", "ClusterState", "Outcome", "Policy", "TaskShape", "best_fit_gpus",
           "place_in_order", "shuffled_name_rank", "task_shapes"]
