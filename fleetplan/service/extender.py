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
import threading
from typing import Any

import numpy as np

from fleetplan.errors import InstanceError
from fleetplan.instances.binpack import tasks_that_fit
from fleetplan.instances.gpushare import GpushareArrays, MixEntry
from fleetplan.instances.gpushare.fragmentation import task_mix
from fleetplan.service.kube_objects import (  # noqa: F401 - re-exported: the keys read
    CPU_FREE_ANNOTATION,
    GPU_FREE_ANNOTATION,
    GPU_RESOURCE,
    MEMORY_FREE_ANNOTATION,
    MODEL_LABEL,
    POD_MODELS_ANNOTATION,
    RACK_LABEL,
    SHARE_RESOURCE,
    KnownNode,
    NodeState,
    PodRequest,
    json_object,
    node_name,
    parse_quantity,
    read_args,
    read_node,
    read_pod,
)
from fleetplan.solvers.gpushare.engine import ClusterState, Policy, TaskShape
from fleetplan.solvers.gpushare.online.best_fit import BestFit
from fleetplan.solvers.gpushare.online.dot_product import DotProduct
from fleetplan.solvers.gpushare.online.fgd import FGD
from fleetplan.solvers.gpushare.online.gpu_packing import GpuPacking

MAX_EXTENDER_PRIORITY = 10  # k8s.io/kube-scheduler/extender/v1.MaxExtenderPriority

# The gpushare policies that score a node from the node object alone (GpuClustering needs the
# GPU "affinity" of every pod on the node, which a node object does not carry; Random scores
# nothing), and RMS's choice for a job of one task.
GPUSHARE_POLICIES: dict[str, type[Policy]] = {"fgd": FGD, "best-fit": BestFit, "dot-product": DotProduct,
                                              "gpu-packing": GpuPacking}
POLICIES = (*GPUSHARE_POLICIES, "rms")
ARGS_FIELDS = {"pod": "Pod", "nodes": "Nodes", "nodenames": "NodeNames"}
KNOWN_LIMIT = 20_000  # node objects' texts remembered (then all forgotten at once)


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
            name = state.name if state is not None else node_name(item) or f"items[{i}]"
            cache[name] = (state, error)
            if error:
                failed[name] = error
        with self._lock:
            self.cache = cache
        return {"nodes": len(cache), "failed": failed}

    @staticmethod
    def _items(nodes: object, path: str) -> list[Any]:
        nodes = json_object(nodes, path, required=True)
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
                 ) -> tuple[PodRequest, list[str], list[NodeState | None], list[str], list[Any] | None]:
        """The pod, and per candidate node its name, state (None: unreadable) and error, and the
        node objects as sent (None when the scheduler sent node names); ``texts``: the node
        objects' texts, to remember them."""
        args = json_object(args, "body", required=True)
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
                names.append(state.name if state is not None else node_name(item) or f"Nodes.items[{i}]")
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
        return pod, list(names), states, errors, None

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
        if items is not None:
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
        if items is None:
            return (head[:-1] + ',"Nodes":null}').encode()
        # Each element of Nodes.items has its text in read_args's list, in order (unless the body
        # repeated a key, which JSON leaves open: then the objects are encoded again).
        chosen = (",".join(texts[i] for i in passed) if len(texts) == len(items)
                  else ",".join(texts[i] if isinstance(items[i], KnownNode) else json.dumps(items[i])
                                for i in passed))
        return (head[:-1] + ',"Nodes":{"apiVersion":"v1","kind":"NodeList","metadata":{},"items":['
                + chosen + "]}}").encode()

    def _filter(self, args: object, texts: list[str] | None = None
                ) -> tuple[dict[str, Any], list[int], list[Any] | None]:
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
                                  "Nodes": None, "NodeNames": None if items is not None else [names[i] for i in passed]}
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


__all__ = ["GPU_FREE_ANNOTATION", "GPU_RESOURCE", "MAX_EXTENDER_PRIORITY", "MODEL_LABEL", "POLICIES",
           "SHARE_RESOURCE", "Extender", "KnownNode", "NodeState", "NodeTable", "PodRequest", "filter_error",
           "parse_quantity", "priorities", "read_args", "read_node", "read_pod", "rms_scores", "trace_mix"]
