"""What the scheduler extender reads of Kubernetes objects (:mod:`fleetplan.service.extender`):
resource quantities, a node's GPUs, CPU and memory left, a pod's request, and the text of an
``ExtenderArgs`` request with its node objects' texts kept.

The keys read are documented in :mod:`fleetplan.service.extender` and docs/embedding.md. Every
error is an :class:`~fleetplan.errors.InstanceError` naming the request's path to the value.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from fleetplan.errors import InstanceError
from fleetplan.instances.gpushare import (
    MAX_GPUS_PER_NODE,
    MILLI,
    MixEntry,
    access_matrix,
    parse_spec,
)
from fleetplan.solvers.gpushare.engine import TaskShape

GPU_RESOURCE = "nvidia.com/gpu"
SHARE_RESOURCE = "fleetplan.io/gpu-milli"
GPU_FREE_ANNOTATION = "fleetplan.io/gpu-milli-free"
CPU_FREE_ANNOTATION = "fleetplan.io/cpu-milli-free"
MEMORY_FREE_ANNOTATION = "fleetplan.io/memory-mib-free"
MODEL_LABEL = "nvidia.com/gpu.product"
RACK_LABEL = "fleetplan.io/rack"
POD_MODELS_ANNOTATION = "fleetplan.io/gpu-model"

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
        bound = f">= {low}" if high is None else f"in {low}..{high}"
        raise InstanceError(path, f"must be {bound}, got {value}")
    return value


def json_object(value: object, path: str, required: bool = False) -> dict[str, Any]:
    """``value`` when it is a JSON object; ``{}`` for a missing optional one; else an error at ``path``."""
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
    item = json_object(item, path, required=True)
    metadata = json_object(item.get("metadata"), f"{path}.metadata", required=True)
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise InstanceError(f"{path}.metadata.name", "a node needs a name")
    labels = json_object(metadata.get("labels"), f"{path}.metadata.labels")
    notes = json_object(metadata.get("annotations"), f"{path}.metadata.annotations")
    status = json_object(item.get("status"), f"{path}.status")
    allocatable = json_object(status.get("allocatable"), f"{path}.status.allocatable")
    capacity = json_object(status.get("capacity"), f"{path}.status.capacity")
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
        resources = json_object(json_object(container, f"{path}[{k}]", required=True).get("resources"), at)
        requests = json_object(resources.get("requests"), f"{at}.requests")
        limits = json_object(resources.get("limits"), f"{at}.limits")
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
    pod = json_object(pod, path, required=True)
    metadata = json_object(pod.get("metadata"), f"{path}.metadata")
    spec = json_object(pod.get("spec"), f"{path}.spec", required=True)
    containers = _container_requests(spec.get("containers"), f"{path}.spec.containers")
    if not containers:
        raise InstanceError(f"{path}.spec.containers", "a pod needs at least one container")
    init = _container_requests(spec.get("initContainers"), f"{path}.spec.initContainers")
    overhead = json_object(spec.get("overhead"), f"{path}.spec.overhead")
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
    notes = json_object(metadata.get("annotations"), f"{path}.metadata.annotations")
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


def node_name(item: object) -> str:
    """``metadata.name`` of a node object, or "" when it has none (for naming unreadable nodes)."""
    metadata = item.get("metadata") if isinstance(item, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else ""



__all__ = ["CPU_FREE_ANNOTATION", "GPU_FREE_ANNOTATION", "GPU_RESOURCE", "MEMORY_FREE_ANNOTATION", "MODEL_LABEL",
           "POD_MODELS_ANNOTATION", "RACK_LABEL", "SHARE_RESOURCE", "KnownNode", "NodeState", "PodRequest",
           "json_object", "node_name", "parse_quantity", "read_args", "read_node", "read_pod"]
