"""Contracts shared by every problem kind: instances, plans, evaluations, errors and file I/O.

Every kind (``allocation``, ``placement``, ``reservation``, ``binpack``) defines

* an *instance* — a pydantic model saved as JSON with ``kind`` and ``schema_version``;
* a *plan* — the solution, JSON too, naming the solver and options that produced it;
* ``evaluate(instance, plan) -> Evaluation`` — the one judge, written independently of solvers;
* ``generate(params, seed) -> instance`` — a seeded, deterministic generator.

and registers them as a :class:`ProblemKind` in :mod:`fleetplan.instances`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from fleetplan.errors import InstanceError

SCHEMA_VERSION = 1


def json_path(loc: Sequence[str | int]) -> str:
    """Render a pydantic ``loc`` tuple as a JSON path: ``("jobs", 3, "weight")`` -> ``jobs[3].weight``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "$"


# Validation lists every error, up to this many (a file with a million bad rows says so briefly).
MAX_ERRORS = 20


# How pydantic names the members of a union in an error's location: ``list[str]``,
# ``HomeColumns``, ``int`` (field names are snake_case, so never match).
_UNION_TAG = re.compile(r"^(?:[a-z]+\[.*\]|str|int|float|bool|[A-Z]\w*)$")


def _is_tag(part: Any) -> bool:
    return isinstance(part, str) and (part.startswith("function-") or bool(_UNION_TAG.match(part)))


def _closest_union_members(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For a value that matches no member of a union, pydantic reports every member's errors;
    keep those of the member with the fewest (the one the value nearly is). One null among
    table ids gave 21 lines, 20 of them saying that valid ids are not integers."""
    members: dict[tuple, dict[str, list[int]]] = {}
    for position, item in enumerate(items):
        loc = item["loc"]
        at = next((i for i, part in enumerate(loc) if isinstance(part, str) and _UNION_TAG.match(part)), None)
        if at is not None:
            members.setdefault(tuple(loc[:at]), {}).setdefault(loc[at], []).append(position)
    dropped: set[int] = set()
    for branches in members.values():
        closest = min(branches, key=lambda tag: len(branches[tag]))
        for tag, positions in branches.items():
            if tag != closest:
                dropped.update(positions)
    return [item for position, item in enumerate(items) if position not in dropped]


def _from_validation_error(error: ValidationError, source: str | None) -> InstanceError:
    found = []
    items = _closest_union_members(error.errors())
    for item in items[:MAX_ERRORS]:
        loc = [p for p in item["loc"] if not _is_tag(p)]
        reason = item["msg"]
        raised = (item.get("ctx") or {}).get("error")
        if isinstance(raised, InstanceError):
            # A validator's own InstanceError (a ValueError, so pydantic collected it): its
            # path and reason as the validator wrote them, and any further errors it carries.
            found += [(raised.path, raised.reason), *raised.more]
            continue
        if item["type"] == "missing":
            reason = "required field is missing"
        elif item["type"] == "extra_forbidden":
            reason = "unknown field"
        elif item["type"] == "value_error":
            reason = reason.removeprefix("Value error, ")
        elif item["type"] == "finite_number":
            reason = "must be a finite number (NaN and infinity are not allowed)"
        elif item["type"].endswith("_type") and "input" in item:
            reason = f"{reason} (got {_short(item['input'])})"
        found.append((json_path(loc), reason))
    if len(items) > MAX_ERRORS:
        found.append(("", f"... {len(items) - MAX_ERRORS} more errors not listed"))
    (path, reason), *more = found
    return InstanceError(path, reason, source, more)


def _short(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (str, bool, int, float, type(None))) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


class StrictModel(BaseModel):
    """Base of every file schema: unknown fields, NaN and infinity are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=False)

    @classmethod
    def model_validate(cls, obj: Any, *args: Any, **kwargs: Any) -> Any:
        """pydantic's ``model_validate``; a failure in which a validator raised an
        :class:`InstanceError` is that error (with any others found), not a ValidationError:
        :class:`InstanceError` is a ValueError, which pydantic collects from validators."""
        try:
            return super().model_validate(obj, *args, **kwargs)
        except ValidationError as error:
            if any(isinstance((item.get("ctx") or {}).get("error"), InstanceError) for item in error.errors()):
                raise _from_validation_error(error, None) from None
            raise


def _not_a_boolean(value: Any) -> Any:
    # `true` equals 1 in Python, and Literal[1] let it pass.
    if isinstance(value, bool):
        raise ValueError(f"must be the integer {SCHEMA_VERSION}, got {json.dumps(value)}")
    return value


SchemaVersion = Annotated[Literal[1], BeforeValidator(_not_a_boolean)]


class InstanceBase(StrictModel):
    """Fields every instance file carries."""

    kind: str
    schema_version: SchemaVersion = SCHEMA_VERSION
    name: str = ""

    def reuse_arrays(self, previous: InstanceBase, touched: set[str]) -> None:
        """After this instance was made from ``previous`` by changing only the top-level fields
        ``touched`` (:func:`fleetplan.instances.paths.changed_instance`), take over whatever of
        ``previous``'s column arrays still holds. A kind whose arrays are costly to build
        overrides this; by default the arrays are built afresh when asked for."""


class ColumnBacked:
    """Mixin of an instance whose list fields are made from columns on first access (a column
    instance of a session or a Parquet load): dumping, serialising or iterating it makes them
    first. Put it before the instance class: ``class C(ColumnBacked, SomeInstance)``."""

    def materialize(self) -> None:
        """Make the list fields now (saving, comparing or copying needs them)."""
        raise NotImplementedError

    def model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.materialize()
        return super().model_dump(*args, **kwargs)  # type: ignore[misc]

    def model_dump_json(self, *args: Any, **kwargs: Any) -> str:
        self.materialize()
        return super().model_dump_json(*args, **kwargs)  # type: ignore[misc]

    def __iter__(self):
        self.materialize()
        return super().__iter__()  # type: ignore[misc]


class PlanBase(StrictModel):
    """Fields every plan file carries: which solver made it and how."""

    kind: str
    schema_version: SchemaVersion = SCHEMA_VERSION
    solver: str = ""
    options: dict[str, Any] = Field(default_factory=dict)

    def drop_solver_arrays(self) -> None:
        """Forget any array the solver left on the plan for its first judging (see
        :meth:`fleetplan.instances.allocation.AllocationPlan.from_matrix`); none by default."""


class Violation(StrictModel):
    """One broken constraint: which, where, and by how much (in the constraint's own unit)."""

    constraint: str
    where: str
    amount: float
    message: str = ""


class Evaluation(StrictModel):
    """The judge's verdict on a plan: objective with its terms, violations and metrics.

    ``breakdown`` holds the per-item readings behind the aggregates, as named column-wise tables
    (``{"jobs": {"id": [...], "effective_throughput": [...]}}`` for allocation,
    ``{"regions": {"id": [...], "gpu_demand": [...], ...}}`` for placement): every column of a
    table has one entry per row, ``id`` first. Column-wise keeps a 10^5-row table a few lists,
    cheap to build and to write as JSON. :meth:`table` gives one as a pandas DataFrame.
    """

    kind: str
    objective: float
    sense: Literal["min", "max"]
    terms: dict[str, float] = Field(default_factory=dict)
    violations: list[Violation] = Field(default_factory=list)
    metrics: dict[str, float] = Field(default_factory=dict)
    breakdown: dict[str, dict[str, list[Any]]] = Field(
        default_factory=dict, description="per-item tables (jobs, regions, ...), column-wise")

    model_config = ConfigDict(extra="forbid", allow_inf_nan=True)

    @property
    def feasible(self) -> bool:
        return not self.violations

    def table(self, name: str) -> Any:
        """One breakdown table as a pandas DataFrame indexed by ``id``.

        >>> from fleetplan.instances.base import Evaluation
        >>> verdict = Evaluation(kind="x", objective=0.0, sense="min",
        ...                      breakdown={"jobs": {"id": ["a", "b"], "load": [1.0, 2.0]}})
        >>> verdict.table("jobs")["load"].tolist()
        [1.0, 2.0]
        """
        import pandas as pd

        if name not in self.breakdown:
            known = ", ".join(sorted(self.breakdown)) or "none"
            raise KeyError(f"no breakdown table {name!r} (this evaluation has: {known})")
        frame = pd.DataFrame(self.breakdown[name])
        return frame.set_index("id") if "id" in frame.columns else frame


@dataclass(frozen=True)
class ProblemKind:
    """What the library knows about one problem kind: its data, judge and generator, and what
    each layer above needs of it (so no module branches on a kind's name)."""

    name: str
    instance_type: type[InstanceBase]
    plan_type: type[PlanBase]
    evaluate: Callable[[Any, Any], Evaluation]
    generate: Callable[..., Any]
    generate_params: type[BaseModel]
    description: str = ""
    # Today's plan, for kinds whose instance carries one (placement: tables where they are);
    # `fleetplan solve` shows its metrics beside the new plan's.
    current_plan: Callable[[Any], Any] | None = None
    # Memory and time a parameter set needs (``estimate(params) -> resources.Estimate``):
    # ``generate`` refuses a size that cannot fit before generating it.
    estimate: Callable[[Any], Any] | None = None
    # The next instance after an event, from files (``fleetplan generate KIND --from FILE --event
    # EVENT``: ``next_instance(params, seed) -> instance``); None: the kind has no events.
    next_instance: Callable[..., Any] | None = None
    # The exact order of plans, for a kind whose float objective cannot hold it (binpack's
    # lexicographic RMS score): a key from an evaluation's metrics (smaller is better), how two
    # keys differ in words (``(text, "better" | "worse" | "same")``), and a note for the reader.
    # None: the objective orders plans.
    order_key: Callable[[Mapping[str, float]], tuple[float, ...]] | None = None
    order_difference: Callable[[tuple[float, ...], tuple[float, ...]], tuple[str, str | None]] | None = None
    objective_note: str | None = None
    score_name: str | None = None  # what the encoded score is called ("RMS score")
    # Metrics a reader needs first, above the objective (where the objective is an encoded score).
    lead_metrics: tuple[str, ...] = ()
    # What the layers above do with the kind. They are named "module:attribute" and imported when
    # used (:meth:`load`), so this low layer imports none of them (tests/test_layers.py) and
    # `import fleetplan` stays light; tests/test_kind_registry.py resolves every one.
    # The modules registering the kind's solvers (imported when the kind is first asked for).
    solver_modules: tuple[str, ...] = ()
    # plot(instance, plan, path) -> Figure: ``fleetplan plot``.
    plot: str | None = None
    # The command line's view of the kind (a ``fleetplan.cli.display.views.KindView`` subclass): what
    # `solve` and `evaluate` print beyond the shared tables.
    cli_view: str | None = None
    # The kind's tables (a module with from_frames, to_frames, plan_to_frame, plan_from_frame):
    # ``fleetplan.from_frames``, ``fleetplan import``/``export``.
    frames: str | None = None
    # The tables a folder of the kind holds, as ``fleetplan export`` writes them: (required,
    # optional) names; how ``load_instance(FOLDER)`` tells a folder's kind.
    folder_tables: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    # from_folder(folder, tables, settings) -> instance, where a kind reads a folder otherwise
    # than through its ``frames`` module's (placement: column-wise, faster at 10^6 rows).
    folder_reader: str | None = None
    # Whether a what-if may set ``clusters.NAME[.HARDWARE].machines``: a count the file holds as
    # rows of machines (fleetplan.instances.paths).
    machine_counts: bool = False
    # The in-process session class (:mod:`fleetplan.embed`) and the changes the HTTP service lets
    # a PATCH send to it (each one of the session's methods); None: no sessions for the kind.
    session: str | None = None
    session_operations: tuple[str, ...] = ()
    # ``fleetplan demo``: the solvers worth comparing (empty: the default solver) and the metrics
    # that show the difference (name -> column heading).
    demo_solvers: tuple[str, ...] = ()
    demo_metrics: Mapping[str, str] = field(default_factory=dict, hash=False)  # a kind stays hashable

    def load(self, entry: str) -> Any:
        """The function, class or module the registration names in ``entry`` (a field name),
        imported now; an :class:`InstanceError` naming the kind when it has none."""
        path = getattr(self, entry)
        if not path:
            raise InstanceError("kind", f"no {entry.replace('_', ' ')} for the '{self.name}' kind")
        return load_path(path)


def load_path(path: str) -> Any:
    """``"package.module:attribute"`` -> the attribute (``"package.module"`` -> the module)."""
    import importlib

    module, _, attribute = path.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


# Numbers a file may hold. Integers must fit numpy's int64; other numbers stay below 1e30 in
# magnitude, so the sums and squares the judges take of a million of them stay finite.
MAX_INTEGER = 2**63 - 1
MAX_MAGNITUDE = 1e30


def parse_json_text(text: str, source: str | None = None) -> Any:
    """Parse JSON, turning a syntax error, a too-deep nesting or an out-of-range number into a
    one-line :class:`InstanceError` (naming the JSON path where one is known)."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise InstanceError("", f"malformed JSON at line {error.lineno} column {error.colno}: {error.msg}", source) from None
    except RecursionError:
        raise InstanceError("$", "JSON nested too deeply (no fleetplan file nests more than a few levels)", source) from None
    except ValueError as error:
        raise InstanceError("", str(error), source) from None
    check_numbers(data, source)
    return data


def check_numbers(data: Any, source: str | None = None) -> None:
    """Reject integers beyond int64 and numbers above :data:`MAX_MAGNITUDE`, naming the path.

    Python reads any JSON integer exactly, but numpy and the solvers cannot hold 2^70, and
    finite values near 1e308 overflow to infinity as soon as they are summed. Long numeric
    columns are checked as numpy arrays, so a million-row file costs milliseconds here.
    """
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, loc = stack.pop()
        if isinstance(value, dict):
            stack.extend((item, (*loc, key)) for key, item in value.items())
        elif isinstance(value, list):
            if value and _numeric_column_ok(value):
                continue
            stack.extend((item, (*loc, index)) for index, item in enumerate(value))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int):
            if abs(value) > MAX_INTEGER or abs(value) > MAX_MAGNITUDE:
                _number_error(value, loc, source)
        elif isinstance(value, float) and not abs(value) <= MAX_MAGNITUDE:  # NaN too
            _number_error(value, loc, source)
        elif isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
            # a column a Python caller built as an array (a file's are lists)
            bad = np.flatnonzero(~(np.abs(value.ravel()) <= MAX_MAGNITUDE))
            if bad.size:
                _number_error(float(value.ravel()[bad[0]]), (*loc, int(bad[0])), source)


def _numeric_column_ok(values: list[Any]) -> bool:
    """True when ``values`` is a column that needs no per-item walk: all strings or all booleans
    (they hold no number), or plain numbers all in range (checked in numpy). False sends it to the per-item
    walk, which names the offending entry."""
    first = values[0]
    if type(first) in (str, bool):
        return all(type(value) is type(first) for value in values)
    if type(first) not in (int, float):
        return False
    if len(values) <= 64:  # short lists (a job's tables): numpy's per-call cost would dominate
        return all((type(value) is int and -MAX_INTEGER <= value <= MAX_INTEGER)
                   or (type(value) is float and -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE)
                   for value in values)
    try:
        array = np.asarray(values)
    except (OverflowError, ValueError):
        return False
    if array.dtype.kind not in "if" or array.ndim != 1:
        return False
    return bool(np.all(np.abs(array) <= MAX_MAGNITUDE))


def _number_error(value: float | int, loc: tuple[str | int, ...], source: str | None) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InstanceError(json_path(loc), f"{value} is not a finite number (a file cannot hold NaN or "
                                            "infinity either)", source)
    shown = f"{value:.3g}" if isinstance(value, float) else (str(value) if len(str(value)) < 24 else f"an integer of {len(str(value))} digits")
    bound = "64-bit integers (|n| < 2^63)" if isinstance(value, int) and abs(value) > MAX_INTEGER else f"|x| <= {MAX_MAGNITUDE:g}"
    raise InstanceError(json_path(loc), f"{shown} is out of range (fleetplan holds {bound}, so sums cannot overflow)", source)


def _reject_constant(name: str) -> float:
    raise ValueError(f"malformed JSON: {name} is not a JSON number")


def read_json_file(path: str | os.PathLike[str]) -> Any:
    """Read and parse a JSON file with one-line errors."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InstanceError("", "file not found", source) from None
    except (OSError, UnicodeDecodeError) as error:
        raise InstanceError("", f"cannot read file: {error}", source) from None
    return parse_json_text(text, source)


def validate_model(model_type: type[BaseModel], data: Any, source: str | None = None,
                   context: dict[str, Any] | None = None) -> Any:
    """Validate ``data`` against ``model_type``; any failure becomes an :class:`InstanceError`.
    ``context`` reaches the models' validators (a change's ``previous`` instance and the fields it
    ``touched``, so a validator can check only what the change can have broken)."""
    try:
        # Strict: a worker count given as the string "16", or a scale factor as true, is an
        # error, not silently coerced (integers still pass where numbers are expected).
        return model_type.model_validate(data, strict=True, context=context)
    except ValidationError as error:
        raise _from_validation_error(error, source) from None
    except InstanceError as error:
        if error.source is None and source is not None:
            raise InstanceError(error.path, error.reason, source) from None
        raise


def to_json_text(model: BaseModel) -> str:
    return model.model_dump_json(indent=1) + "\n"


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float made null (JSON has no NaN or infinity), through
    dicts, lists and tuples."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def finite_or_none(value: float | None) -> float | None:
    """``value``, or None where JSON could not hold it (NaN, infinity) or it is missing.

    >>> finite_or_none(2.5), finite_or_none(float("inf")), finite_or_none(None)
    (2.5, None, None)
    """
    if value is None or not math.isfinite(value):
        return None
    return value
