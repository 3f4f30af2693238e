"""Solver options: one description per option, from which validation, ``fleetplan solvers NAME``,
the docstrings and the docs table all come (in the spirit of ``scipy.optimize.show_options``).

An option is a keyword-only parameter of a registered solver function. Its *type* is the
parameter's annotation (``bool``, ``int``, ``float``, ``Literal[...]`` for a fixed set of choices,
``X | None``; ``Annotated[int, Field(ge=1)]`` for a bound), its *default* the parameter's default,
and its *meaning* the entry for it in the function's numpydoc ``Parameters`` section — or, for
the options many solvers share, the entry in :data:`GLOSSARY` (which may also bound the value).
:func:`fleetplan.solvers.base.register` appends the generated ``Parameters`` section to a
solver's docstring when it has none, so ``help(solver)`` shows the same text.

Options that several solvers take together are declared once, as an *option group*: a frozen
dataclass marked by :func:`option_group`, whose fields are options (type, default, bounds as
above). A solver takes the group as one keyword parameter (``lp: AllocationLpOptions =
...``); each field is an option of its own to the user (``--option refine=false``), listed in
the parameter's place with the default of the parameter's default instance, and
:func:`pack_options` gathers the fields a caller gives into the group instance the solver gets.

Example
-------
>>> from typing import Literal
>>> def solver(instance, *, method: Literal["a", "b"] = "a", partitions: int = 1):
...     '''Parameters
...     ----------
...     method : {"a", "b"}
...         which method to run
...     '''
>>> specs = option_specs(solver)
>>> specs["method"].type_text, specs["method"].meaning
("one of 'a', 'b'", 'which method to run')
>>> specs["partitions"].validate(0)
Traceback (most recent call last):
...
fleetplan.errors.InstanceError: options.partitions: 0 is not allowed: must be an int >= 1

A group: one declaration, its fields options of every solver that takes it.

>>> from dataclasses import dataclass
>>> @option_group
... @dataclass(frozen=True)
... class Search:
...     patience: int = 4
...     split: bool = True
>>> def grouped(instance, *, search: Search = Search(split=False), method: str = "a"):
...     return search
>>> [(spec.name, spec.default) for spec in option_specs(grouped).values()]
[('patience', 4), ('split', False), ('method', 'a')]
>>> pack_options(grouped, {"patience": 9, "method": "b"})
{'method': 'b', 'search': Search(patience=9, split=False)}
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import Field, TypeAdapter, ValidationError

from fleetplan.errors import excerpt
from fleetplan.instances.base import InstanceError

# The parameters every solver takes; they are arguments of ``solve()``, not options.
COMMON_PARAMETERS = frozenset({"time_limit", "seed", "threads", "progress"})


@dataclass(frozen=True)
class GlossaryEntry:
    """Meaning of an option many solvers share, and the bounds its value must keep."""

    meaning: str
    ge: float | None = None
    le: float | None = None
    gt: float | None = None
    lt: float | None = None


GLOSSARY: dict[str, GlossaryEntry] = {
    # allocation (Gavel)
    "backend": GlossaryEntry("LP back-end: highspy (a sparse matrix straight to HiGHS), pyomo (the "
                             "readable Pyomo model), ortools-glop or ortools-pdlp"),
    "lp_algorithm": GlossaryEntry("HiGHS algorithm: auto (simplex below 2,000 columns, interior point "
                                  "above), simplex, ipm or pdlp"),
    "partitions": GlossaryEntry("POP: split jobs and workers into this many random parts and solve "
                                "each (1 = the whole problem; faster, with a measured quality loss)", ge=1),
    "space_sharing": GlossaryEntry("add time on job pairs that share a worker (Gavel §3.1, measured "
                                   "colocated throughputs)"),
    "prune_pairs": GlossaryEntry("keep only job pairs whose colocated throughput beats time slicing"),
    "aggregate": GlossaryEntry("identical jobs share one set of variables (exact for these convex, "
                               "symmetric policies), then the answer is expanded"),
    "refine": GlossaryEntry("a second LP that holds the objective (within 1e-7) and hands spare "
                            "capacity to jobs that can use it"),
    "decomposition": GlossaryEntry(
        "how a max-min or linear LP is solved: auto (the price decomposition of "
        "fleetplan.solvers.allocation.price_decomposition.separable from 1,000 distinct jobs up, the full LP below), prices "
        "(the decomposition at any size) or none (always the full LP, the reference); the "
        "decomposition is certified optimal and falls back to the full LP where it does not apply. "
        "A max-min refinement (keep the level, maximize the sum of scores) is decomposed the same way "
        "(fleetplan.solvers.allocation.price_decomposition.separable_refine: first prices from buckets of similar jobs, "
        "sharpened by Newton's method on the Lagrangian dual smoothed by a soft maximum, then a "
        "reduced LP of the jobs near a tie and the certificate), so priority weights, which leave "
        "most jobs above the level, need no full LP; a level set by one job's own best score (a "
        "heavily weighted job) is proven by that refinement's plan, and where that bound is within "
        "the workers' reach (every job at it needs at most 0.9 of the workers, and of each set of "
        "types for the jobs that run only there) the refinement at the bound is tried before the "
        "max-min LP, whose prices are then not computed (times: benchmarks/results/allocation.md, "
        "'Weighted max-min fairness, part 2')"),
    "priorities": GlossaryEntry("weight each job's share by its priority weight (Gavel §4.1)"),
    "method": GlossaryEntry("finish-time fairness method: dinkelbach (a Dinkelbach-type iteration "
                            "with a certified bound, 2-3 LPs) or levels (a sequence of max-min LPs)"),
    "tolerance": GlossaryEntry("binary search stops when the makespan interval is this narrow "
                               "(relative)", gt=0.0, lt=1.0),
    "bottleneck_test": GlossaryEntry("water filling's bottleneck test: lp (one exact LP per step) or "
                                     "milp (Gavel App. A.1's MILP)"),
    # placement (Tetris)
    "replicas": GlossaryEntry("add §3.5 replicas (DR copy, ML collocation, hot tables) after placing"),
    "partitions_only": GlossaryEntry("skip placement: keep today's homes and only add replicas"),
    "hot_replica_share": GlossaryEntry("storage quota for hot-table replicas, as a share of each "
                                       "region's free storage", ge=0.0, le=1.0),
    "max_moves": GlossaryEntry("stop after this many table moves (none: until no move gains)", ge=0,
                               le=2**31 - 1),
    "requeue_neighbours": GlossaryEntry("after a move, recompute the gains of tables read by the same "
                                        "jobs (§3.4's recompute-before-move)"),
    "warm_start": GlossaryEntry("plan handed to the exact solver as its start: hill-climb, current "
                                "(today's placement) or none"),
    "split": GlossaryEntry("solve independent groups of tables (no job reads across groups) "
                           "separately"),
    # At most 1,024: a GPU term's levels times its total's levels above 1,024 pairs fall back to
    # the grid anyway, and counting up to 10^8 subset sums ran for minutes in gigabytes before
    # the time limit could act.
    "max_exact_levels": GlossaryEntry("piecewise-linear terms are exact up to this many reachable "
                                      "levels, a proven under-estimate on a grid above", ge=2, le=1024),
    "grid_levels": GlossaryEntry("breakpoints of the under-estimating grid when levels exceed "
                                 "max_exact_levels", ge=2, le=1024),
    "mip_rel_gap": GlossaryEntry("HiGHS stops when the relative MIP gap is this small", ge=0.0),
    "presolve": GlossaryEntry("HiGHS MIP presolve: off (default; HiGHS 1.14's presolve returns wrong "
                              "optima on small models), on or choose"),
}


@dataclass(frozen=True)
class OptionSpec:
    """One solver option: name, type, default, meaning."""

    name: str
    annotation: Any
    default: Any
    meaning: str

    @property
    def type_text(self) -> str:
        """The allowed values in words: ``bool``, ``int >= 1``, ``one of 'a', 'b'``."""
        return describe_type(self.annotation)

    def validate(self, value: Any) -> Any:
        """The value, checked against the type and bounds (ints pass for floats); raises an
        :class:`InstanceError` naming the option, the value and what is allowed."""
        try:
            return _adapter(self.annotation).validate_python(value, strict=True)
        except ValidationError:
            if isinstance(value, int) and not isinstance(value, bool) and _accepts_float(self.annotation):
                return self.validate(float(value))
            raise InstanceError(f"options.{self.name}",
                                f"{excerpt(value)} is not allowed: must be {_article(self.type_text)}") from None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type_text, "default": self.default, "meaning": self.meaning}


def option_group(cls: type) -> type:
    """Mark ``cls``, a frozen dataclass, as a group of options solvers take together (see the
    module docstring): a solver's keyword parameter annotated with it stands for its fields."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"{cls.__name__}: an option group is a frozen dataclass")
    cls.__option_group__ = True
    return cls


def is_option_group(annotation: Any) -> bool:
    """Whether ``annotation`` is a class marked by :func:`option_group`."""
    return isinstance(annotation, type) and bool(getattr(annotation, "__option_group__", False))


def option_specs(function: Any) -> dict[str, OptionSpec]:
    """The options of a solver function, in signature order (a group's fields in its place)."""
    meanings = parse_parameters_section(inspect.getdoc(function) or "")
    specs: dict[str, OptionSpec] = {}
    for name, annotation, default in _declared_options(function):
        if name in specs:
            raise TypeError(f"{getattr(function, '__name__', function)}: option '{name}' is declared twice")
        entry = GLOSSARY.get(name)
        if entry is not None and typing.get_origin(annotation) is not typing.Annotated:
            bounds = {k: v for k, v in (("ge", entry.ge), ("le", entry.le), ("gt", entry.gt), ("lt", entry.lt))
                      if v is not None}
            if bounds:
                annotation = typing.Annotated[annotation, Field(**bounds)]
        meaning = meanings.get(name) or (entry.meaning if entry else "")
        specs[name] = OptionSpec(name, annotation, default, meaning)
    return specs


def _declared_options(function: Any) -> list[tuple[str, Any, Any]]:
    """(name, annotation, default) of every option, a group parameter replaced by its fields."""
    hints = typing.get_type_hints(function, include_extras=True)
    declared = []
    for name, parameter in inspect.signature(function).parameters.items():
        if (parameter.kind is not inspect.Parameter.KEYWORD_ONLY or name in COMMON_PARAMETERS
                or name.startswith("_")):
            continue
        annotation = hints.get(name, Any)
        if is_option_group(annotation):
            group = _group_default(annotation, parameter.default)
            field_hints = typing.get_type_hints(annotation, include_extras=True)
            declared += [(field.name, field_hints.get(field.name, Any), getattr(group, field.name))
                         for field in dataclasses.fields(annotation)]
        else:
            declared.append((name, annotation, parameter.default))
    return declared


def _group_default(group: type, default: Any) -> Any:
    if default is inspect.Parameter.empty:
        return group()
    if not isinstance(default, group):
        raise TypeError(f"the default of an option group {group.__name__} must be one of its instances")
    return default


def group_parameters(function: Any) -> dict[str, tuple[Any, tuple[str, ...]]]:
    """``{parameter: (its default group instance, the group's field names)}`` for each option
    group ``function`` takes (empty for most solvers)."""
    hints = typing.get_type_hints(function, include_extras=True)
    groups: dict[str, tuple[Any, tuple[str, ...]]] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        annotation = hints.get(name)
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and is_option_group(annotation):
            groups[name] = (_group_default(annotation, parameter.default),
                            tuple(field.name for field in dataclasses.fields(annotation)))
    return groups


def pack_options(function: Any, options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments to call ``function`` with: ``options`` as the user gives them (flat,
    by option name), the fields of each option group gathered into an instance of the group
    (its parameter's default with the fields given replaced)."""
    groups = _GROUPS.get(function)
    if groups is None:
        groups = _GROUPS[function] = group_parameters(function)
    if not groups:
        return dict(options)
    packed = dict(options)
    for parameter, (default, names) in groups.items():
        given = {name: packed.pop(name) for name in names if name in packed}
        if given:
            packed[parameter] = dataclasses.replace(default, **given)
    return packed


_GROUPS: dict[Any, dict[str, tuple[Any, tuple[str, ...]]]] = {}


def parse_parameters_section(doc: str) -> dict[str, str]:
    """``{name: meaning}`` from a numpydoc ``Parameters`` section (the first line of each meaning
    block, joined with its continuation lines)."""
    match = re.search(r"^Parameters\n-{3,}\n(.*?)(?:\n\s*\n[A-Z][^\n]*\n-{3,}\n|\Z)", doc, re.S | re.M)
    if not match:
        return {}
    meanings: dict[str, str] = {}
    current: str | None = None
    for line in match.group(1).splitlines():
        header = re.match(r"^(\w+)\s*:", line)
        if header and not line.startswith(" "):
            current = header.group(1)
            meanings[current] = ""
        elif current is not None and line.strip():
            meanings[current] = (meanings[current] + " " + line.strip()).strip()
    return meanings


def parameters_section(specs: dict[str, OptionSpec]) -> str:
    """A numpydoc ``Parameters`` section for ``specs``."""
    lines = ["Parameters", "----------"]
    for spec in specs.values():
        lines.append(f"{spec.name} : {spec.type_text}, default {spec.default!r}")
        lines.append(f"    {spec.meaning or '(undocumented)'}")
    return "\n".join(lines)


def markdown_table(rows: list[tuple[str, str, OptionSpec]]) -> str:
    """The docs table: one row per (kind, solver, option)."""
    lines = ["| kind | solver | option | type | default | meaning |", "|---|---|---|---|---|---|"]
    for kind, solver, spec in rows:
        lines.append(f"| {kind} | `{solver}` | `{spec.name}` | {spec.type_text.replace('|', '/')} | "
                     f"`{spec.default!r}` | {spec.meaning} |")
    return "\n".join(lines) + "\n"


@cache
def _adapter(annotation: Any) -> TypeAdapter:
    return TypeAdapter(annotation)


def _accepts_float(annotation: Any) -> bool:
    if annotation is float:
        return True
    return any(_accepts_float(arg) for arg in typing.get_args(annotation))


def _article(text: str) -> str:
    return text if text.startswith(("one of", "none or")) else f"a {text}" if text[0] not in "aeiou" else f"an {text}"


def describe_type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        bounds = []
        for metadata in args[1:]:
            for item in getattr(metadata, "metadata", [metadata]):
                for attribute, symbol in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
                    value = getattr(item, attribute, None)
                    if value is not None:
                        bounds.append(f"{symbol} {value:g}" if isinstance(value, float) else f"{symbol} {value}")
        return " and ".join([f"{describe_type(args[0])} {bounds[0]}", *bounds[1:]]) if bounds else describe_type(args[0])
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(arg) for arg in args)
    if args and type(None) in args:
        rest = [arg for arg in args if arg is not type(None)]
        return "none or " + " or ".join(describe_type(arg) for arg in rest)
    return getattr(annotation, "__name__", str(annotation))
