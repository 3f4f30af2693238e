"""The ``gpushare`` kind: tasks that take whole GPUs or a share of one, on nodes with CPU, memory
and GPUs of several models (Weng, Yang et al., "Beware of Fragmentation: Scheduling GPU-Sharing
Workloads with Fragmentation Gradient Descent", USENIX ATC 2023, on Alibaba's GPU cluster trace
v2023).

A node has CPU (milli-cores), memory (MiB) and ``gpus`` GPUs of one ``model``, each GPU with
1,000 milli of capacity. A task asks for CPU and memory and either nothing on a GPU
(``num_gpu == 0``), ``gpu_milli`` (1..1000) of one GPU (``num_gpu == 1``: a GPU-sharing task when
below 1,000) or ``num_gpu`` whole GPUs of one node (``gpu_milli == 1000``); ``gpu_spec`` lists
the GPU models it accepts (``"V100M16|V100M32"``; empty: any). Tasks are listed in arrival
order: the order in which the one-at-a-time policies place them.

Why a kind beside ``binpack`` rather than inside it (``docs/architecture.md``): binpack's unit is
a gang-scheduled job of whole-GPU tasks with preemption, scored by MAST's lexicographic RMS
order; here the unit is one task that may take a fraction of a *particular* GPU, the plan must
name the GPU indices, and the judge's measure is the FGD paper's fragmentation against the
expected task mix. One kind holding both would need a special case in every check.

The *expected task mix* against which fragmentation is measured (the paper's "target workload")
is ``mix`` when the instance gives it, else it is derived from the instance's own tasks as the
paper's simulator derives it (:func:`fleetplan.instances.gpushare.fragmentation.task_mix`).

Example
-------
>>> instance = GpushareInstance.model_validate({
...     "kind": "gpushare",
...     "nodes": {"id": ["n0"], "cpu_milli": [32000], "memory_mib": [65536], "gpus": [2],
...               "model": ["T4"]},
...     "tasks": {"id": ["a", "b"], "cpu_milli": [4000, 8000], "memory_mib": [8192, 8192],
...               "num_gpu": [1, 2], "gpu_milli": [500, 1000], "gpu_spec": ["", "T4"]}})
>>> instance.arrays().task_gpu_milli_total.tolist()
[500, 2000]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field, PrivateAttr, model_validator

from fleetplan.instances.base import InstanceBase, InstanceError, PlanBase, StrictModel
from fleetplan.instances.columns import check_same_length, first_true, id_index

KIND = "gpushare"
MILLI = 1000  # capacity of one GPU, in milli
MAX_GPUS_PER_NODE = 64
SPEC_SEPARATOR = "|"


class NodeColumns(StrictModel):
    """Nodes column-wise: row i is node i."""

    id: list[str]
    cpu_milli: list[int] = Field(description="CPU capacity, milli-cores")
    memory_mib: list[int] = Field(description="memory capacity, MiB")
    gpus: list[int] = Field(description="GPUs on the node, each of 1,000 milli")
    model: list[str] = Field(description="GPU model of the node's GPUs (empty for a CPU-only node)")


class TaskColumns(StrictModel):
    """Tasks column-wise, in arrival order: row j is task j."""

    id: list[str]
    cpu_milli: list[int] = Field(description="CPU request, milli-cores")
    memory_mib: list[int] = Field(description="memory request, MiB")
    num_gpu: list[int] = Field(description="GPUs: 0 (a CPU task), 1 (whole or shared) or more (whole GPUs of one node)")
    gpu_milli: list[int] = Field(description="milli of each GPU: 1..1000 when num_gpu is 1, 1000 when more, 0 when none")
    gpu_spec: list[str] | None = Field(default=None, description="accepted GPU models separated by '|' "
                                       "(empty: any); omitted: every task accepts any model")


class MixEntry(StrictModel):
    """One task shape of the expected task mix and its weight (the shares sum to 1)."""

    cpu_milli: int = Field(ge=0)
    num_gpu: int = Field(ge=0, le=MAX_GPUS_PER_NODE)
    gpu_milli: int = Field(ge=0, le=MILLI)
    gpu_spec: str = ""
    weight: float = Field(gt=0, le=1)


@dataclass(frozen=True, eq=False)
class GpushareArrays:
    """Column-wise view of a gpushare instance: what the judge and the policies compute with.

    ``node_model`` indexes ``models`` (which holds every node model, "" for nodes without one);
    ``task_access[j, m]`` says whether task j accepts GPUs of model ``models[m]``.
    """

    node_ids: list[str]
    node_cpu: np.ndarray  # (N,) milli
    node_memory: np.ndarray  # (N,) MiB
    node_gpus: np.ndarray  # (N,)
    node_model: np.ndarray  # (N,) index into models
    models: list[str]
    task_ids: list[str]
    task_cpu: np.ndarray  # (T,)
    task_memory: np.ndarray  # (T,)
    task_num_gpu: np.ndarray  # (T,)
    task_gpu_milli: np.ndarray  # (T,)
    task_spec: list[str]  # (T,) normalised spec text ("" any)
    task_access: np.ndarray  # (T, M) bool

    @property
    def num_nodes(self) -> int:
        return len(self.node_ids)

    @property
    def num_tasks(self) -> int:
        return len(self.task_ids)

    @property
    def max_gpus(self) -> int:
        return int(self.node_gpus.max(initial=0))

    @property
    def task_gpu_milli_total(self) -> np.ndarray:
        return self.task_num_gpu * self.task_gpu_milli

    @property
    def gpu_milli_capacity(self) -> int:
        return int(self.node_gpus.sum()) * MILLI


def parse_spec(text: str) -> list[str]:
    """The models a ``gpu_spec`` names (``"A|B"`` -> ``["A", "B"]``; empty -> any, ``[]``)."""
    text = text.strip()
    return [] if not text else [part.strip() for part in text.split(SPEC_SEPARATOR)]


def access_matrix(specs: list[str], models: list[str]) -> np.ndarray:
    """(len(specs), len(models)) bool: spec i accepts model m (an empty spec accepts any model;
    a node without a model is accepted only by an empty spec, as the paper's simulator has it)."""
    out = np.ones((len(specs), len(models)), dtype=bool)
    distinct: dict[str, np.ndarray] = {}
    for i, spec in enumerate(specs):
        if not spec:
            continue
        if spec not in distinct:
            named = set(parse_spec(spec))
            distinct[spec] = np.array([m in named for m in models], dtype=bool)
        out[i] = distinct[spec]
    return out


class GpushareInstance(InstanceBase):
    """A GPU cluster's nodes and the tasks to place on them, in arrival order."""

    kind: Literal["gpushare"] = KIND
    source: str = Field(default="", description="where the data comes from (attribution)")
    nodes: NodeColumns
    tasks: TaskColumns
    mix: list[MixEntry] | None = Field(default=None, description="the expected task mix fragmentation is "
                                       "measured against; omitted: derived from the tasks")

    _arrays: GpushareArrays | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _validate_columns(self) -> GpushareInstance:
        self._arrays = build_arrays(self)
        return self

    def arrays(self) -> GpushareArrays:
        """The instance as numpy arrays (built once, when the instance is validated)."""
        if self._arrays is None:
            self._arrays = build_arrays(self)
        return self._arrays


def _int_column(values: list[int], path: str, low: int, high: int | None = None) -> np.ndarray:
    array = np.asarray(values, dtype=np.int64).reshape(len(values))
    bad = array < low if high is None else (array < low) | (array > high)
    if bad.any():
        i = first_true(bad)
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise InstanceError(f"{path}[{i}]", f"must be {bound}, got {array[i]}")
    return array


def build_arrays(instance: GpushareInstance) -> GpushareArrays:
    """Validate the columns with vectorised checks and build the arrays."""
    n = instance.nodes
    num_nodes = len(n.id)
    if num_nodes == 0:
        raise InstanceError("nodes.id", "a cluster needs at least one node")
    check_same_length(n, ("cpu_milli", "memory_mib", "gpus", "model"), num_nodes, "nodes", "nodes")
    id_index(n.id, "nodes.id")
    node_cpu = _int_column(n.cpu_milli, "nodes.cpu_milli", 0)
    node_memory = _int_column(n.memory_mib, "nodes.memory_mib", 0)
    node_gpus = _int_column(n.gpus, "nodes.gpus", 0, MAX_GPUS_PER_NODE)
    for i, model in enumerate(n.model):
        if SPEC_SEPARATOR in model or model != model.strip():
            raise InstanceError(f"nodes.model[{i}]", f"a model name has no '{SPEC_SEPARATOR}' and no surrounding "
                                                     f"spaces, got {model!r}")
    models = sorted(set(n.model))
    model_index = {m: i for i, m in enumerate(models)}
    node_model = np.fromiter((model_index[m] for m in n.model), dtype=np.int64, count=num_nodes)

    t = instance.tasks
    num_tasks = len(t.id)
    check_same_length(t, ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"), num_tasks,
                      "tasks", "tasks")
    id_index(t.id, "tasks.id")
    task_cpu = _int_column(t.cpu_milli, "tasks.cpu_milli", 0)
    task_memory = _int_column(t.memory_mib, "tasks.memory_mib", 0)
    num_gpu = _int_column(t.num_gpu, "tasks.num_gpu", 0, MAX_GPUS_PER_NODE)
    gpu_milli = _int_column(t.gpu_milli, "tasks.gpu_milli", 0, MILLI)
    bad = (num_gpu == 0) != (gpu_milli == 0)
    if bad.any():
        j = first_true(bad)
        raise InstanceError(f"tasks.gpu_milli[{j}]", f"a task with num_gpu {num_gpu[j]} asks for "
                            f"{gpu_milli[j]} milli: gpu_milli is 0 exactly when num_gpu is 0")
    bad = (num_gpu > 1) & (gpu_milli != MILLI)
    if bad.any():
        j = first_true(bad)
        raise InstanceError(f"tasks.gpu_milli[{j}]", f"a task of {num_gpu[j]} GPUs takes them whole: gpu_milli "
                            f"must be {MILLI}, got {gpu_milli[j]} (only a one-GPU task shares a GPU)")
    specs = [""] * num_tasks if t.gpu_spec is None else [_normalised_spec(s, f"tasks.gpu_spec[{j}]")
                                                          for j, s in enumerate(t.gpu_spec)]
    if instance.mix is not None:
        if not instance.mix:
            raise InstanceError("mix", "an expected task mix needs at least one entry (omit it to derive one)")
        for k, entry in enumerate(instance.mix):
            if (entry.num_gpu == 0) != (entry.gpu_milli == 0):
                raise InstanceError(f"mix[{k}].gpu_milli", "gpu_milli is 0 exactly when num_gpu is 0")
            _normalised_spec(entry.gpu_spec, f"mix[{k}].gpu_spec")
        total = sum(entry.weight for entry in instance.mix)
        if abs(total - 1.0) > 1e-6:
            raise InstanceError("mix", f"the weights must sum to 1, got {total:.9g}")
    return GpushareArrays(
        node_ids=list(n.id), node_cpu=node_cpu, node_memory=node_memory, node_gpus=node_gpus,
        node_model=node_model, models=models, task_ids=list(t.id), task_cpu=task_cpu,
        task_memory=task_memory, task_num_gpu=num_gpu, task_gpu_milli=gpu_milli, task_spec=specs,
        task_access=access_matrix(specs, models),
    )


def _normalised_spec(text: str, path: str) -> str:
    parts = parse_spec(text)
    if any(not part for part in parts):
        raise InstanceError(path, f"an empty model name in {text!r} (models are separated by "
                                  f"'{SPEC_SEPARATOR}'; an empty spec accepts any model)")
    return SPEC_SEPARATOR.join(parts)


# --- the plan ------------------------------------------------------------------------------

class AssignmentColumns(StrictModel):
    """Placed tasks column-wise: row k puts task ``task`` on ``node``, on the GPUs ``gpus``
    (0-based indices on that node; empty for a CPU task)."""

    task: list[str] = Field(default_factory=list)
    node: list[str] = Field(default_factory=list)
    gpus: list[list[int]] = Field(default_factory=list)


class GpusharePlan(PlanBase):
    """Where each placed task runs; a task not listed is left pending."""

    kind: Literal["gpushare"] = KIND
    assignments: AssignmentColumns = Field(default_factory=AssignmentColumns)

    @classmethod
    def from_arrays(cls, instance: GpushareInstance, task_node: np.ndarray, task_gpus: list[list[int]],
                    **fields: object) -> GpusharePlan:
        """A plan from per-task node rows (-1: pending) and GPU index lists."""
        arrays = instance.arrays()
        placed = np.flatnonzero(task_node >= 0)
        return cls(assignments=AssignmentColumns(
            task=[arrays.task_ids[j] for j in placed],
            node=[arrays.node_ids[int(task_node[j])] for j in placed],
            gpus=[list(task_gpus[j]) for j in placed]), **fields)


__all__ = [
    "KIND", "MILLI", "AssignmentColumns", "GpushareArrays", "GpushareInstance", "GpusharePlan", "MixEntry",
    "NodeColumns", "TaskColumns", "access_matrix", "build_arrays", "parse_spec",
]
