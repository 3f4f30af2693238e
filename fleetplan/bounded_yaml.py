"""YAML read with its size bounded before anything is built: bench suites and the values of
``--option``, ``--param`` and ``--NAME VALUE`` on the command line.

Three bounds hold before the document is constructed: its length in characters, its nesting
depth, and the number of values once every alias is expanded (an *alias bomb* — a few anchors,
each a list of aliases to the previous one — is a few hundred bytes that expand to billions of
values: 2 GB and 16 s before the error line, which then echoed 254 MB). The
expanded size is counted on the node graph, where an alias is one shared node, in time linear
in the text.

Numbers are read as YAML 1.2 reads them: ``1e12`` and ``1e-9`` are numbers (YAML 1.1, PyYAML's
default, wants a dot and a signed exponent and read them as strings). A
number without a dot whose exponent is not negative and whose value is a whole number
(``1e6``) is an integer, so it fits integer options and parameters as well as float ones.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import yaml

from fleetplan.errors import InstanceError

MAX_BYTES = 1_000_000  # characters of one document
MAX_NODES = 50_000  # scalars, lists and mappings once every alias is expanded
MAX_DEPTH = 100  # lists and mappings inside one another

_YAML12_NUMBER = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
_NUMBER_TAG = "tag:fleetplan,2026:yaml12-number"


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader (libyaml's parser when present) with YAML 1.2's exponent numbers."""


def _construct_number(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int | float:
    text = node.value.replace("_", "")
    mantissa, _, exponent = text.lower().partition("e")
    if "." not in mantissa and int(exponent) >= 0 and int(exponent) <= 400:
        value = Decimal(text)
        if value == value.to_integral_value():
            return int(value)
    return float(text)


_Loader.add_implicit_resolver(_NUMBER_TAG, _YAML12_NUMBER, list("-+0123456789."))
_Loader.add_constructor(_NUMBER_TAG, _construct_number)


def expanded_size(root: yaml.Node, source: str | None = None, path: str = "",
                  max_nodes: int = MAX_NODES) -> tuple[int, int]:
    """(values, depth) of the document once every alias is expanded, each capped just above its
    bound; computed on the node graph without expanding it. Refuses a recursive alias."""
    sizes: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        if children_done:
            on_path.discard(key)
            count = min(1 + sum(sizes[id(child)][0] for child in children), max_nodes + 1)
            depth = min(1 + max((sizes[id(child)][1] for child in children), default=0), MAX_DEPTH + 1)
            sizes[key] = (count, depth) if children else (1, 0)
            continue
        if key in on_path:
            raise InstanceError(path, "the YAML refers to itself (a recursive alias)", source)
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                raise InstanceError(path, "the YAML refers to itself (a recursive alias)", source)
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def load(text: str, source: str | None = None, path: str = "", max_bytes: int = MAX_BYTES,
         max_nodes: int = MAX_NODES) -> Any:
    """``yaml.safe_load(text)`` with YAML 1.2 numbers, refused with an :class:`InstanceError`
    (naming ``source`` and ``path``) when it is longer than ``max_bytes`` characters, nested
    deeper than :data:`MAX_DEPTH` or larger than ``max_nodes`` values once expanded.
    Malformed YAML raises ``yaml.YAMLError`` as ``yaml.safe_load`` does."""
    if len(text) > max_bytes:
        raise InstanceError(path, f"longer than {max_bytes:,} characters ({len(text):,})", source)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        count, depth = expanded_size(node, source, path, max_nodes)
        if count > max_nodes:  # before anything is built
            raise InstanceError(path, f"the YAML expands to more than {max_nodes:,} values once its "
                                      "aliases are resolved (an alias bomb?)", source)
        if depth > MAX_DEPTH:
            raise InstanceError(path, f"the YAML is nested more than {MAX_DEPTH} levels deep", source)
        return loader.construct_document(node)
    except RecursionError:
        raise InstanceError(path, "the YAML is nested too deeply", source) from None
    finally:
        loader.dispose()
