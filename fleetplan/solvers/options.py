"""Solver options: one description per option, from which validation, ``fleetplan solvers NAME``,
the docstrings and the docs table all come (in the spirit of ``scipy.optimize.show_options``).

An option is a keyword-only parameter of a registered solver function. Its *type* is the
parameter's annotation (``bool``, ``int``, ``float``, ``Literal[...]`` for a fixed set of choices,
``X | None``; ``Annotated[int, Field(ge=1)]`` for a bound), its *default* the parameter's default,
and its *meaning* the entry for it in the function's numpydoc ``Parameters`` section — or, for
the options many solvers share, the entry in :data:`GLOSSARY` (which may also bound the value).
:func:`fleetplan.solvers.base.register` appends the generated ``Parameters`` section to a
solver's docstring when it has none, so ``help(solver)`` shows the same text.

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
"""

from __future__ import annotations

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
    "priorities": GlossaryEntry("weight each job's share by its priority weight (Gavel §4.1)"),
    "method": GlossaryEntry("finish-time fairness method: dinkelbach (a Dinkelbach-type iteration "
                            "with a certified bound, 2-3 LPs) or levels (a sequence of max-min LPs)"),
    "tolerance": GlossaryEntry("binary search stops when the makespan interval is this narrow "
                               "(relative)", gt=0.0),
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


def option_specs(function: Any) -> dict[str, OptionSpec]:
    """The options of a solver function, in signature order."""
    hints = typing.get_type_hints(function, include_extras=True)
    meanings = parse_parameters_section(inspect.getdoc(function) or "")
    specs: dict[str, OptionSpec] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        if (parameter.kind is not inspect.Parameter.KEYWORD_ONLY or name in COMMON_PARAMETERS
                or name.startswith("_")):
            continue
        annotation = hints.get(name, Any)
        entry = GLOSSARY.get(name)
        if entry is not None and typing.get_origin(annotation) is not typing.Annotated:
            bounds = {k: v for k, v in (("ge", entry.ge), ("le", entry.le), ("gt", entry.gt)) if v is not None}
            if bounds:
                annotation = typing.Annotated[annotation, Field(**bounds)]
        meaning = meanings.get(name) or (entry.meaning if entry else "")
        specs[name] = OptionSpec(name, annotation, parameter.default, meaning)
    return specs


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
