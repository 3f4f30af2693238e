"""A Kubernetes scheduler extender: the ``filter`` and ``prioritize`` verbs of kube-scheduler's
HTTP extender interface (``k8s.io/kube-scheduler/extender/v1``), answered by fleetplan's
placement policies over the node and pod objects the scheduler sends.

This module is the computation, JSON in and out, with no web framework;
:mod:`fleetplan.service.extender_app` serves it (``fleetplan serve --extender``).

What is read (docs/embedding.md, "A Kubernetes scheduler extender", has the table):

* of a **node**: ``metadata.name``; its GPUs, ``status.allocatable["nvidia.com/gpu"]`` (else
  ``status.capacity``); what is left on each GPU, the annotation
  ``fleetplan.io/gpu-milli-free`` (``"1000,400,0,1000"``: one integer 0..1000 per GPU; absent:
  every GPU wholly free); its GPU model, the label ``nvidia.com/gpu.product`` (GPU feature
  discovery's); CPU and memory left, the annotations ``fleetplan.io/cpu-milli-free`` and
  ``fleetplan.io/memory-mib-free`` (absent: ``status.allocatable``'s ``cpu`` and ``memory``);
  for the ``rms`` policy its rack, the label ``fleetplan.io/rack`` (an integer; absent: a rack
  of its own);
* of the **pod**: the containers' ``cpu`` and ``memory`` requests (a limit stands for a missing
  request, as Kubernetes defaults it), summed, the largest init container's if larger, plus
  ``spec.overhead``; whole GPUs, ``nvidia.com/gpu``; a share of one GPU,
  ``fleetplan.io/gpu-milli`` (1..1000; an extended resource the scheduler leaves to the
  extender, ``managedResources`` with ``ignoredByScheduler``); the GPU models it accepts, the
  annotation ``fleetplan.io/gpu-model`` (``"V100M16|V100M32"``; absent: any).

**filter** passes the nodes with the pod's CPU and memory left and, for a GPU pod, a model it
accepts and ``num_gpu`` GPUs with its milli left — the gpushare policies' own filter
(:meth:`fleetplan.solvers.gpushare.engine.ClusterState.feasible`). A node that can never take
the pod (its GPU model, too few GPUs, unreadable GPU keys) is *failed and unresolvable*; one
whose GPUs, CPU or memory are taken for now is *failed* (preempting pods there may help).

**prioritize** scores the nodes with the policy's own scoring function, the same code the
solvers run, and maps the scores of the nodes that can take the pod onto kube-scheduler's
0..10 (``MaxExtenderPriority``): the best gets 10, the worst 0, linearly between, rounded (all
10 when they tie); a node that cannot take the pod gets 0.

Example (no HTTP):

>>> node = {"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "T4"},
...                      "annotations": {"fleetplan.io/gpu-milli-free": "1000,300"}},
...         "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"}}}
>>> pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {
...     "requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"fleetplan.io/gpu-milli": "500"}}}]}}
>>> extender = Extender("fgd")
>>> extender.filter({"Pod": pod, "Nodes": {"items": [node]}})["FailedNodes"]
{}
>>> extender.prioritize({"Pod": pod, "Nodes": {"items": [node]}})
[{'Host': 'n1', 'Score': 10}]
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.instances.binpack import tasks_that_fit
from fleetplan.instances.gpushare import (
    MAX_GPUS_PER_NODE,
    MILLI,
    GpushareArrays,
    MixEntry,
    access_matrix,
    parse_spec,
)
from fleetplan.instances.gpushare.fragmentation import task_mix
from fleetplan.solvers.gpushare.best_fit import BestFit
from fleetplan.solvers.gpushare.dot_product import DotProduct
from fleetplan.solvers.gpushare.engine import ClusterState, Policy, TaskShape
from fleetplan.solvers.gpushare.fgd import FGD
from fleetplan.solvers.gpushare.gpu_packing import GpuPacking

GPU_RESOURCE = "nvidia.com/gpu"
SHARE_RESOURCE = "fleetplan.io/gpu-milli"
GPU_FREE_ANNOTATION = "fleetplan.io/gpu-milli-free"
CPU_FREE_ANNOTATION = "fleetplan.io/cpu-milli-free"
MEMORY_FREE_ANNOTATION = "fleetplan.io/memory-mib-free"
MODEL_LABEL = "nvidia.com/gpu.product"
RACK_LABEL = "fleetplan.io/rack"
POD_MODELS_ANNOTATION = "fleetplan.io/gpu-model"
MAX_EXTENDER_PRIORITY = 10  # k8s.io/kube-scheduler/extender/v1.MaxExtenderPriority

# The gpushare policies that score a node from the node object alone (GpuClustering needs the
# GPU "affinity" of every pod on the node, which a node object does not carry; Random scores
# nothing), and RMS's choice for a job of one task.
GPUSHARE_POLICIES: dict[str, type[Policy]] = {"fgd": FGD, "best-fit": BestFit, "dot-product": DotProduct,
                                              "gpu-packing": GpuPacking}
POLICIES = (*GPUSHARE_POLICIES, "rms")
ARGS_FIELDS = {"pod": "Pod", "nodes": "Nodes", "nodenames": "NodeNames"}
KNOWN_LIMIT = 20_000  # node objects' texts remembered (then all forgotten at once)

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")
_SUFFIX = {None: Decimal(1), "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal(10**3),
           "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18),
           "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
           "Pi": Decimal(2**50), "Ei": Decimal(2**60)}
_MIB = Decimal(2**20)


def parse_quantity(value: object, path: str) -> Decimal:
    """A Kubernetes resource quantity (``"500m"``, ``"2"``, ``"64Gi"``, ``"1e3"``) as a
    non-negative decimal; anything else raises :class:`InstanceError` naming ``path``.

    >>> float(parse_quantity("250m", "cpu")), float(parse_quantity("1.5Gi", "memory")) / 2**20
    (0.25, 1536.0)
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InstanceError(path, f"a quantity is a string such as '500m' or '4Gi', got {type(value).__name__}")
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise InstanceError(path, f"{str(value)[:40]!r} is not a Kubernetes quantity (such as '500m', '2', '4Gi')")
    number, exponent, suffix = match.groups()
    try:
        amount = Decimal(number) * (Decimal(10) ** int(exponent[1:]) if exponent else _SUFFIX[suffix])
    except (InvalidOperation, OverflowError):
        raise InstanceError(path, f"{str(value)[:40]!r} is out of range") from None
    if amount < 0:
        raise InstanceError(path, f"must be >= 0, got {value}")
    return amount


def _whole(amount: Decimal, path: str, high: int | None = None) -> int:
    if amount != amount.to_integral_value():
        raise InstanceError(path, f"must be a whole number, got {amount}")
    if high is not None and amount > high:
        raise InstanceError(path, f"must be at most {high}, got {amount}")
    return int(amount)


def _integer(text: object, path: str, low: int, high: int | None = None) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise InstanceError(path, f"must be an integer, got {str(text)[:40]!r}") from None
    if value < low or (high is not None and value > high):
        raise InstanceError(path, f"must be in {low}..{high if high is not None else ''}, got {value}")
    return value


def _mapping(value: object, path: str, required: bool = False) -> dict[str, Any]:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise InstanceError(path, "missing" if value is None else f"must be an object, got {type(value).__name__}")
    return value


# --- nodes ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeState:
    """What the extender reads of one node object."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpu_left: tuple[int, ...]  # milli left on each GPU
    model: str
    rack: int | None


def read_node(item: object, path: str) -> NodeState:
    """One node object (``path``: where it is in the request, for errors)."""
    item = _mapping(item, path, required=True)
    metadata = _mapping(item.get("metadata"), f"{path}.metadata", required=True)
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise InstanceError(f"{path}.metadata.name", "a node needs a name")
    labels = _mapping(metadata.get("labels"), f"{path}.metadata.labels")
    notes = _mapping(metadata.get("annotations"), f"{path}.metadata.annotations")
    status = _mapping(item.get("status"), f"{path}.status")
    allocatable = _mapping(status.get("allocatable"), f"{path}.status.allocatable")
    capacity = _mapping(status.get("capacity"), f"{path}.status.capacity")
    gpus = 0
    for where, table in (("allocatable", allocatable), ("capacity", capacity)):
        if GPU_RESOURCE in table:
            at = f"{path}.status.{where}[{GPU_RESOURCE!r}]"
            gpus = _whole(parse_quantity(table[GPU_RESOURCE], at), at, MAX_GPUS_PER_NODE)
            break
    if GPU_FREE_ANNOTATION in notes:
        at = f"{path}.metadata.annotations[{GPU_FREE_ANNOTATION!r}]"
        text = str(notes[GPU_FREE_ANNOTATION]).strip()
        left = tuple(_integer(part, at, 0, MILLI) for part in text.split(",")) if text else ()
        if len(left) != gpus:
            raise InstanceError(at, f"lists {len(left)} GPUs, the node has {gpus} ({GPU_RESOURCE})")
    else:
        left = (MILLI,) * gpus
    if CPU_FREE_ANNOTATION in notes:
        cpu = _integer(notes[CPU_FREE_ANNOTATION], f"{path}.metadata.annotations[{CPU_FREE_ANNOTATION!r}]", 0)
    elif "cpu" in allocatable:
        cpu = int(parse_quantity(allocatable["cpu"], f"{path}.status.allocatable.cpu") * 1000)
    else:
        raise InstanceError(f"{path}.status.allocatable.cpu", "missing (or give the annotation "
                                                              f"{CPU_FREE_ANNOTATION})")
    if MEMORY_FREE_ANNOTATION in notes:
        memory = _integer(notes[MEMORY_FREE_ANNOTATION], f"{path}.metadata.annotations[{MEMORY_FREE_ANNOTATION!r}]", 0)
    elif "memory" in allocatable:
        memory = int(parse_quantity(allocatable["memory"], f"{path}.status.allocatable.memory") / _MIB)
    else:
        raise InstanceError(f"{path}.status.allocatable.memory", "missing (or give the annotation "
                                                                 f"{MEMORY_FREE_ANNOTATION})")
    model = str(labels.get(MODEL_LABEL, "")).strip() if gpus else ""
    if "|" in model:
        raise InstanceError(f"{path}.metadata.labels[{MODEL_LABEL!r}]", f"a model name has no '|', got {model!r}")
    rack = None
    if RACK_LABEL in labels:
        rack = _integer(labels[RACK_LABEL], f"{path}.metadata.labels[{RACK_LABEL!r}]", 0)
    return NodeState(name, cpu, memory, left, model, rack)


class NodeTable:
    """Nodes as numpy columns, in the order given."""

    def __init__(self, nodes: list[NodeState]):
        self.nodes = nodes
        self.names = [node.name for node in nodes]
        count = len(nodes)
        self.cpu = np.fromiter((node.cpu_milli for node in nodes), dtype=np.int64, count=count)
        self.memory = np.fromiter((node.memory_mib for node in nodes), dtype=np.int64, count=count)
        self.gpus = np.fromiter((len(node.gpu_left) for node in nodes), dtype=np.int64, count=count)
        width = max(int(self.gpus.max(initial=0)), 1)
        self.gpu_left = np.zeros((count, width), dtype=np.int64)
        for i, node in enumerate(nodes):
            if node.gpu_left:
                self.gpu_left[i, : len(node.gpu_left)] = node.gpu_left
        self.models = sorted({node.model for node in nodes})
        index = {model: k for k, model in enumerate(self.models)}
        self.model = np.fromiter((index[node.model] for node in nodes), dtype=np.int64, count=count)
        # A node without a rack label is a rack of its own (numbered past every labelled rack).
        labelled = [node.rack for node in nodes if node.rack is not None]
        first_free = max(labelled, default=-1) + 1
        self.rack = np.array([node.rack if node.rack is not None else first_free + i
                              for i, node in enumerate(nodes)], dtype=np.int64)

    def subset(self, rows: np.ndarray) -> NodeTable:
        """The table of ``rows`` (same models list, so model indices and accepted models agree)."""
        sub = NodeTable.__new__(NodeTable)
        sub.nodes = [self.nodes[i] for i in rows.tolist()]
        sub.names = [self.names[i] for i in rows.tolist()]
        for name in ("cpu", "memory", "gpus", "gpu_left", "model", "rack"):
            setattr(sub, name, getattr(self, name)[rows])
        sub.models = self.models
        return sub

    def arrays(self) -> GpushareArrays:
        """The nodes as the gpushare policies read them (no tasks)."""
        none = np.zeros(0, dtype=np.int64)
        return GpushareArrays(node_ids=self.names, node_cpu=self.cpu, node_memory=self.memory, node_gpus=self.gpus,
                              node_model=self.model, models=self.models, task_ids=[], task_cpu=none,
                              task_memory=none, task_num_gpu=none, task_gpu_milli=none, task_spec=[],
                              task_access=np.zeros((0, len(self.models)), dtype=bool))


# --- the pod -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PodRequest:
    """What the extender reads of the pod: CPU (milli-cores), memory (MiB), GPUs."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # of each GPU: 1000 for whole GPUs, 1..1000 for a share of one
    gpu_spec: str  # accepted models, "A|B" ("" any)

    def shape(self, models: list[str]) -> TaskShape:
        return TaskShape(self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli,
                         access_matrix([self.gpu_spec], models)[0])

    def mix_entry(self) -> MixEntry:
        return MixEntry(cpu_milli=self.cpu_milli, num_gpu=self.num_gpu, gpu_milli=self.gpu_milli,
                        gpu_spec=self.gpu_spec, weight=1.0)


def _container_requests(containers: object, path: str) -> list[dict[str, Decimal]]:
    if containers is None:
        return []
    if not isinstance(containers, list):
        raise InstanceError(path, f"must be a list, got {type(containers).__name__}")
    out = []
    for k, container in enumerate(containers):
        at = f"{path}[{k}].resources"
        resources = _mapping(_mapping(container, f"{path}[{k}]", required=True).get("resources"), at)
        requests = _mapping(resources.get("requests"), f"{at}.requests")
        limits = _mapping(resources.get("limits"), f"{at}.limits")
        wanted: dict[str, Decimal] = {}
        for name in ("cpu", "memory", GPU_RESOURCE, SHARE_RESOURCE):
            # A limit stands for a missing request (Kubernetes defaults the request to it).
            where, table = ("requests", requests) if name in requests else ("limits", limits)
            if name in table:
                wanted[name] = parse_quantity(table[name], f"{at}.{where}[{name!r}]")
        out.append(wanted)
    return out


def read_pod(pod: object, path: str = "Pod") -> PodRequest:
    """The pod's request (see the module docstring for the keys read)."""
    pod = _mapping(pod, path, required=True)
    metadata = _mapping(pod.get("metadata"), f"{path}.metadata")
    spec = _mapping(pod.get("spec"), f"{path}.spec", required=True)
    containers = _container_requests(spec.get("containers"), f"{path}.spec.containers")
    if not containers:
        raise InstanceError(f"{path}.spec.containers", "a pod needs at least one container")
    init = _container_requests(spec.get("initContainers"), f"{path}.spec.initContainers")
    overhead = _mapping(spec.get("overhead"), f"{path}.spec.overhead")
    total: dict[str, Decimal] = {}
    for name in ("cpu", "memory", GPU_RESOURCE, SHARE_RESOURCE):
        running = sum((c.get(name, Decimal(0)) for c in containers), Decimal(0))
        total[name] = max(running, max((c.get(name, Decimal(0)) for c in init), default=Decimal(0)))
        if name in overhead:
            total[name] += parse_quantity(overhead[name], f"{path}.spec.overhead[{name!r}]")
    gpus = _whole(total[GPU_RESOURCE], f"{path}.spec.containers[*].resources[{GPU_RESOURCE!r}]", MAX_GPUS_PER_NODE)
    share = _whole(total[SHARE_RESOURCE], f"{path}.spec.containers[*].resources[{SHARE_RESOURCE!r}]")
    if gpus and share:
        raise InstanceError(f"{path}.spec.containers", f"asks for both {GPU_RESOURCE} ({gpus}) and {SHARE_RESOURCE} "
                                                       f"({share}): a pod takes whole GPUs or a share of one")
    if share > MILLI:
        raise InstanceError(f"{path}.spec.containers[*].resources[{SHARE_RESOURCE!r}]",
                            f"a share of one GPU is 1..{MILLI} milli, got {share} (ask for {GPU_RESOURCE} instead)")
    num_gpu, milli = (gpus, MILLI) if gpus else ((1, share) if share else (0, 0))
    notes = _mapping(metadata.get("annotations"), f"{path}.metadata.annotations")
    spec_text = str(notes.get(POD_MODELS_ANNOTATION, "")).strip()
    parts = parse_spec(spec_text)
    if any(not part for part in parts):
        raise InstanceError(f"{path}.metadata.annotations[{POD_MODELS_ANNOTATION!r}]",
                            f"an empty model name in {spec_text!r} (models are separated by '|')")
    name = f"{metadata.get('namespace', 'default')}/{metadata.get('name', '?')}"
    # Requests round up, as Kubernetes' MilliValue does; what nodes have rounds down.
    return PodRequest(name, math.ceil(total["cpu"] * 1000), math.ceil(total["memory"] / _MIB), num_gpu, milli,
                      "|".join(parts))


# --- the request's text ---------------------------------------------------------------------------

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class KnownNode:
    """An element of ``Nodes.items`` whose exact text was read before: its state, not decoded."""

    state: NodeState


def read_args(body: bytes, known: dict[str, NodeState] | None = None) -> tuple[Any, list[str]]:
    """ExtenderArgs from JSON bytes, and the text of each element of ``Nodes.items`` as sent:
    filter answers with the nodes that pass, and splicing their text back costs nothing, where
    encoding the objects again costs as much as reading them.

    ``known`` maps node objects' texts to their states: when every element but the last is the
    text of one (the scheduler sends the same objects pod after pod), those elements are not
    decoded — :class:`KnownNode` stands in their place — which saves most of the reading. This is
    exact: the elements are cut where an element of the array may start (``,{"metadata":``); if
    each piece but the last is a known text, each is one whole JSON object, so the cuts are the
    array's own; the last is decoded and must close the array. Anything else reads every element.

    >>> args, texts = read_args(b'{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a"}}]}}')
    >>> args["Nodes"]["items"][0]["metadata"]["name"], texts
    ('a', ['{"metadata": {"name": "a"}}'])
    """
    try:
        text = body.decode("utf-8")
        texts: list[str] = []
        value, end = _value(text, _SPACE.match(text, 0).end(), texts, "args", known or {})
        if _SPACE.match(text, end).end() != len(text):
            raise ValueError(f"extra data at character {end}")
    except (UnicodeDecodeError, RecursionError, ValueError) as error:
        raise InstanceError("body", f"not JSON ({str(error)[:80]})") from None
    return value, texts


def _value(text: str, i: int, texts: list[str], where: str, known: dict[str, NodeState]) -> tuple[Any, int]:
    """The JSON value at ``i``; the top level's ``Nodes`` and its ``items`` are walked element by
    element (their texts kept), anything else decoded at once."""
    if where == "items" and text.startswith("[", i):
        items, i = [], _SPACE.match(text, i + 1).end()
        if text.startswith("]", i):
            return items, i + 1
        quick = _known_items(text, i, known) if known else None
        if quick is not None:
            items, pieces, end = quick
            texts.extend(pieces)
            return items, end
        while True:
            item, end = _DECODER.raw_decode(text, i)
            items.append(item)
            texts.append(text[i:end])
            i = _SPACE.match(text, end).end()
            if text.startswith("]", i):
                return items, i + 1
            if not text.startswith(",", i):
                raise ValueError(f"expected ',' or ']' at character {i}")
            i = _SPACE.match(text, i + 1).end()
    if where in ("args", "nodes") and text.startswith("{", i):
        out: dict[str, Any] = {}
        i = _SPACE.match(text, i + 1).end()
        if text.startswith("}", i):
            return out, i + 1
        while True:
            key, i = _DECODER.raw_decode(text, i)
            if not isinstance(key, str):
                raise ValueError(f"expected a key at character {i}")
            i = _SPACE.match(text, i).end()
            if not text.startswith(":", i):
                raise ValueError(f"expected ':' at character {i}")
            i = _SPACE.match(text, i + 1).end()
            inner = {"args": "nodes" if key.lower() == "nodes" else "", "nodes": "items" if key == "items" else ""}
            out[key], i = _value(text, i, texts, inner[where], known)
            i = _SPACE.match(text, i).end()
            if text.startswith("}", i):
                return out, i + 1
            if not text.startswith(",", i):
                raise ValueError(f"expected ',' or '}}' at character {i}")
            i = _SPACE.match(text, i + 1).end()
    return _DECODER.raw_decode(text, i)


_ELEMENT = ',{"metadata":'


def _known_items(text: str, i: int, known: dict[str, NodeState]) -> tuple[list[Any], list[str], int] | None:
    """The elements of the array whose first element starts at ``i``, when all but the last are
    known texts (see :func:`read_args`); else None."""
    if not text.startswith(_ELEMENT[1:], i):
        return None
    starts = [i]
    while (j := text.find(_ELEMENT, starts[-1])) >= 0:
        starts.append(j + 1)
    items: list[Any] = []
    pieces = []
    for start, following in zip(starts, starts[1:], strict=False):
        piece = text[start:following - 1]
        state = known.get(piece)
        if state is None:
            return None
        items.append(KnownNode(state))
        pieces.append(piece)
    last, end = _DECODER.raw_decode(text, starts[-1])
    close = _SPACE.match(text, end).end()
    if not text.startswith("]", close):
        return None
    items.append(last)
    pieces.append(text[starts[-1]:end])
    return items, pieces, close + 1


# --- the verbs -----------------------------------------------------------------------------------

def priorities(raw: np.ndarray, fits: np.ndarray) -> np.ndarray:
    """Scores on kube-scheduler's 0..10 from a policy's raw scores: over the nodes that fit, the
    best 10, the worst 0, linear between, rounded (10 for all when they tie); 0 where the pod
    does not fit.

    >>> priorities(np.array([50, 47, 0, 45]), np.array([True, True, False, True])).tolist()
    [10, 4, 0, 0]
    """
    out = np.zeros(raw.shape, dtype=np.int64)
    if not fits.any():
        return out
    chosen = raw[fits].astype(float)
    low, high = chosen.min(), chosen.max()
    scaled = np.full(chosen.shape, MAX_EXTENDER_PRIORITY, dtype=float) if high == low else \
        np.rint(MAX_EXTENDER_PRIORITY * (chosen - low) / (high - low))
    out[fits] = scaled.astype(np.int64)
    return out


class Extender:
    """The extender's state: its policy, the expected task mix, and a cache of node objects
    for a scheduler configured ``nodeCacheCapable`` (which sends node names only).

    ``policy``: one of :data:`POLICIES`. ``mix``: the expected task mix FGD measures
    fragmentation against — ``"trace"`` (the default: :func:`trace_mix`, the task shapes of
    Alibaba's GPU trace as fleetplan's gpushare generator draws them), ``"pod"`` (each pod's own
    shape: FGD then keeps room for more pods like the one it places) or the entries of a
    gpushare instance's ``mix``.
    """

    def __init__(self, policy: str = "fgd", mix: list[MixEntry] | str = "trace"):
        if policy not in POLICIES:
            raise ValueError(f"policy: '{policy}' is not one of {', '.join(POLICIES)}")
        if isinstance(mix, str) and mix not in ("trace", "pod"):
            raise ValueError(f"mix: '{mix}' is not 'trace', 'pod' or a list of mix entries")
        self.policy_name = policy
        self.policy = GPUSHARE_POLICIES[policy]() if policy in GPUSHARE_POLICIES else None
        self.mix: list[MixEntry] | None = list(trace_mix()) if mix == "trace" else (None if mix == "pod" else list(mix))
        self.cache: dict[str, tuple[NodeState | None, str]] = {}  # name -> (state, error)
        # The exact text of node objects read before: the same text is the same node, read
        # again without decoding it (the scheduler sends the same objects pod after pod).
        self.known: dict[str, NodeState] = {}
        self._lock = threading.Lock()

    # --- the node cache --------------------------------------------------------------------------
    def remember(self, body: object) -> dict[str, Any]:
        """Replace the node cache with a NodeList (``kubectl get nodes -o json``); the answer
        counts the nodes read and lists those that could not be read."""
        items = self._items(body, "body")
        cache, failed = {}, {}
        for i, item in enumerate(items):
            state, error = self._read(item, f"items[{i}]")
            name = state.name if state is not None else _name_of(item) or f"items[{i}]"
            cache[name] = (state, error)
            if error:
                failed[name] = error
        with self._lock:
            self.cache = cache
        return {"nodes": len(cache), "failed": failed}

    @staticmethod
    def _items(nodes: object, path: str) -> list[Any]:
        nodes = _mapping(nodes, path, required=True)
        items = nodes.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise InstanceError(f"{path}.items", f"must be a list, got {type(items).__name__}")
        return items

    @staticmethod
    def _read(item: object, path: str) -> tuple[NodeState | None, str]:
        if isinstance(item, KnownNode):
            return item.state, ""
        try:
            return read_node(item, path), ""
        except InstanceError as error:
            return None, f"fleetplan extender: {error}"

    def learn(self, texts: list[str], items: list[Any], states: list[NodeState | None]) -> None:
        """Remember the node objects read from these texts (see :func:`read_args`)."""
        if len(texts) != len(items):
            return
        if len(self.known) + len(texts) > KNOWN_LIMIT:
            self.known = {}
        for text, item, state in zip(texts, items, states, strict=True):
            if state is not None and not isinstance(item, KnownNode):
                self.known[text] = state

    def _request(self, args: object, texts: list[str] | None = None
                 ) -> tuple[PodRequest, list[str], list[NodeState | None], list[str], list[Any]]:
        """The pod, and per candidate node its name, state (None: unreadable), the error and
        the object as sent (None with node names); ``texts``: the node objects' texts, to
        remember them."""
        args = _mapping(args, "body", required=True)
        given = {}
        for key, value in args.items():
            # Go's JSON decoding matches field names without regard to case, as here.
            field = ARGS_FIELDS.get(key.lower()) if isinstance(key, str) else None
            if field is None:
                raise InstanceError(str(key)[:60], "unknown field of ExtenderArgs (Pod, Nodes, NodeNames)")
            given[field] = value
        pod = read_pod(given.get("Pod"), "Pod")
        if given.get("Nodes") is not None:
            items = self._items(given["Nodes"], "Nodes")
            names, states, errors = [], [], []
            for i, item in enumerate(items):
                state, error = self._read(item, f"Nodes.items[{i}]")
                names.append(state.name if state is not None else _name_of(item) or f"Nodes.items[{i}]")
                states.append(state)
                errors.append(error)
            if texts is not None:
                self.learn(texts, items, states)
            return pod, names, states, errors, items
        names = given.get("NodeNames")
        if names is None:
            raise InstanceError("Nodes", "missing: ExtenderArgs needs Nodes (or NodeNames with nodeCacheCapable)")
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            raise InstanceError("NodeNames", "must be a list of node names")
        with self._lock:
            cache = self.cache
        states, errors = [], []
        for name in names:
            state, error = cache.get(name, (None, "fleetplan extender: the node is not in the extender's node cache "
                                                  "(POST the node list to /extender/nodes)"))
            states.append(state)
            errors.append(error)
        return pod, list(names), states, errors, []

    # --- scoring ----------------------------------------------------------------------------------
    def _evaluate(self, pod: PodRequest, states: list[NodeState | None]) -> tuple[np.ndarray, np.ndarray, list[str],
                                                                                   np.ndarray]:
        """Per readable node: whether the pod fits, whether it never can (unresolvable), the
        reason it does not, and the policy's raw score (meaningful where it fits)."""
        readable = [state for state in states if state is not None]
        table = NodeTable(readable)
        count = len(readable)
        shape = pod.shape(table.models)
        cpu_short = table.cpu < shape.cpu
        memory_short = table.memory < shape.memory
        wrong_model = np.zeros(count, dtype=bool)
        too_few = np.zeros(count, dtype=bool)
        busy = np.zeros(count, dtype=bool)
        if shape.num_gpu > 0:
            wrong_model = ~shape.access[table.model] | (table.gpus == 0)
            too_few = table.gpus < shape.num_gpu
            busy = (table.gpu_left >= shape.gpu_milli).sum(axis=1) < shape.num_gpu
        fits = ~(cpu_short | memory_short | wrong_model | too_few | busy)
        never = wrong_model | too_few
        reasons = []
        for i in range(count):
            if fits[i]:
                reasons.append("")
            elif wrong_model[i]:
                model = table.nodes[i].model
                reasons.append(f"no GPU of a model the pod accepts ({pod.gpu_spec or 'any'}; the node has "
                               f"{'no GPU' if table.gpus[i] == 0 else repr(model)})")
            elif too_few[i]:
                reasons.append(f"the node has {table.gpus[i]} GPUs, the pod asks for {pod.num_gpu}")
            else:
                short = [what for what, flag in (
                    (f"{pod.num_gpu} GPU(s) with {pod.gpu_milli} milli free", busy[i]),
                    (f"{pod.cpu_milli} CPU milli-cores (has {table.cpu[i]})", cpu_short[i]),
                    (f"{pod.memory_mib} MiB of memory (has {table.memory[i]})", memory_short[i])) if flag]
                reasons.append("not enough left: " + ", ".join(short))
        raw = np.zeros(count)
        rows = np.flatnonzero(fits)
        if rows.size:
            raw[rows] = self._scores(table, rows, shape, pod)
        return fits, never, reasons, raw

    def _scores(self, table: NodeTable, rows: np.ndarray, shape: TaskShape, pod: PodRequest) -> np.ndarray:
        if self.policy is None:
            return rms_scores(table, rows, shape)
        entries = self.mix if self.mix is not None else ([pod.mix_entry()] if pod.num_gpu else [])
        # The state of the nodes that fit only: a node's score reads its own state alone.
        sub = table.subset(rows)
        state = ClusterState.from_left(sub.arrays(), task_mix(entries, sub.models), sub.cpu, sub.memory,
                                       sub.gpu_left)
        return self.policy.scores(state, np.arange(rows.size), shape).astype(float)

    def raw_scores(self, args: object) -> dict[str, float]:
        """The policy's own scores (before the mapping onto 0..10) of the nodes that can take
        the pod: for tests and for whoever wants to see why a node won."""
        pod, names, states, _, _ = self._request(args)
        fits, _, _, raw = self._evaluate(pod, states)
        readable = [name for name, state in zip(names, states, strict=True) if state is not None]
        return {name: float(score) for name, score, ok in zip(readable, raw, fits, strict=True) if ok}

    # --- the verbs --------------------------------------------------------------------------------
    def filter(self, args: object) -> dict[str, Any]:
        """ExtenderArgs -> ExtenderFilterResult. A bad pod or request is answered in ``Error``
        (the scheduler reports it on the pod); a node that cannot be read fails alone."""
        try:
            result, passed, items = self._filter(args)
        except InstanceError as error:
            return filter_error(error)
        if items:
            result["Nodes"] = {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                               "items": [items[i] for i in passed]}
        return result

    def filter_json(self, body: bytes) -> bytes:
        """:meth:`filter` from and to JSON bytes, the passing node objects copied as sent."""
        try:
            args, texts = read_args(body, self.known)
            result, passed, items = self._filter(args, texts)
        except InstanceError as error:
            return json.dumps(filter_error(error)).encode()
        head = json.dumps({key: value for key, value in result.items() if key != "Nodes"}, separators=(",", ":"))
        if not items:
            return (head[:-1] + ',"Nodes":null}').encode()
        # Each element of Nodes.items has its text in read_args's list, in order (unless the body
        # repeated a key, which JSON leaves open: then the objects are encoded again).
        chosen = (",".join(texts[i] for i in passed) if len(texts) == len(items)
                  else ",".join(texts[i] if isinstance(items[i], KnownNode) else json.dumps(items[i])
                                for i in passed))
        return (head[:-1] + ',"Nodes":{"apiVersion":"v1","kind":"NodeList","metadata":{},"items":['
                + chosen + "]}}").encode()

    def _filter(self, args: object, texts: list[str] | None = None) -> tuple[dict[str, Any], list[int], list[Any]]:
        pod, names, states, errors, items = self._request(args, texts)
        fits, never, reasons, _ = self._evaluate(pod, states)
        failed, unresolvable, passed = {}, {}, []
        k = 0
        for i, (name, state) in enumerate(zip(names, states, strict=True)):
            if state is None:
                unresolvable[name] = errors[i]
                continue
            if fits[k]:
                passed.append(i)
            elif never[k]:
                unresolvable[name] = f"fleetplan extender: {reasons[k]}"
            else:
                failed[name] = f"fleetplan extender: {reasons[k]}"
            k += 1
        result: dict[str, Any] = {"FailedNodes": failed, "FailedAndUnresolvableNodes": unresolvable, "Error": "",
                                  "Nodes": None, "NodeNames": None if items else [names[i] for i in passed]}
        return result, passed, items

    def prioritize(self, args: object) -> list[dict[str, Any]]:
        """ExtenderArgs -> HostPriorityList (every node given, in order). Raises
        :class:`InstanceError` for a bad request (HostPriorityList has no error field)."""
        pod, names, states, _, _ = self._request(args)
        return self._priorities(pod, names, states)

    def prioritize_json(self, body: bytes) -> bytes:
        """:meth:`prioritize` from and to JSON bytes (raises :class:`InstanceError`)."""
        args, texts = read_args(body, self.known)
        pod, names, states, _, _ = self._request(args, texts)
        return json.dumps(self._priorities(pod, names, states), separators=(",", ":")).encode()

    def _priorities(self, pod: PodRequest, names: list[str], states: list[NodeState | None]) -> list[dict[str, Any]]:
        fits, _, _, raw = self._evaluate(pod, states)
        scores = iter(priorities(raw, fits).tolist())
        return [{"Host": name, "Score": next(scores) if state is not None else 0}
                for name, state in zip(names, states, strict=True)]


@functools.cache
def trace_mix(tasks: int = 4000) -> tuple[MixEntry, ...]:
    """The expected task mix of ``tasks`` tasks drawn by fleetplan's gpushare generator (the
    shapes and proportions of Alibaba's GPU trace v2023, seed 0), as the FGD paper's simulator
    derives a mix from a trace (:func:`~fleetplan.instances.gpushare.fragmentation.mix_entries`)."""
    from fleetplan.instances.gpushare.fragmentation import mix_entries
    from fleetplan.instances.gpushare.generate import GpushareParams, generate

    arrays = generate(GpushareParams(nodes=1, tasks=tasks), seed=0).arrays()
    return tuple(mix_entries(arrays.task_cpu, arrays.task_num_gpu, arrays.task_gpu_milli, arrays.task_spec))


def filter_error(error: InstanceError) -> dict[str, Any]:
    """The ExtenderFilterResult of a request that could not be read."""
    return {"Nodes": None, "NodeNames": None, "FailedNodes": {}, "FailedAndUnresolvableNodes": {},
            "Error": f"fleetplan extender: {error}"}


def rms_scores(table: NodeTable, rows: np.ndarray, shape: TaskShape) -> np.ndarray:
    """MAST RMS's order of the nodes for a job of one task (``fleetplan.solvers.binpack``: the
    rack-batched allocation's window of fewest racks — one rack, the roomiest on ties — then the
    roomiest machine in it): the room of the node's rack for tasks like this pod, then the
    node's own, as one number (larger is better). Room is counted with binpack's
    :func:`~fleetplan.instances.binpack.tasks_that_fit` over (GPUs, CPU cores, memory GB); a
    share of a GPU counts the GPUs' room in shares of its size."""
    left = table.gpu_left[rows]
    if shape.num_gpu:
        gpu_room = (left // shape.gpu_milli).sum(axis=1).astype(float)
        gpu_demand = float(shape.num_gpu if not shape.is_sharing else 1)
    else:
        gpu_room, gpu_demand = np.zeros(rows.size), 0.0
    free = np.column_stack([gpu_room, table.cpu[rows] / 1000.0, table.memory[rows] / 1024.0])
    fit = tasks_that_fit(free, np.array([gpu_demand, shape.cpu / 1000.0, shape.memory / 1024.0]))
    fit = np.minimum(fit, 2**20)  # a pod asking nothing fits without bound
    rack = table.rack[rows]
    _, inverse = np.unique(rack, return_inverse=True)
    rack_room = np.bincount(inverse, weights=fit)[inverse]
    return rack_room * (float(fit.max()) + 1.0) + fit


def _name_of(item: object) -> str:
    metadata = item.get("metadata") if isinstance(item, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else ""


__all__ = ["GPU_FREE_ANNOTATION", "GPU_RESOURCE", "MAX_EXTENDER_PRIORITY", "MODEL_LABEL", "POLICIES",
           "SHARE_RESOURCE", "Extender", "NodeState", "NodeTable", "PodRequest", "parse_quantity", "priorities",
           "read_args", "read_node", "read_pod", "rms_scores", "trace_mix"]
