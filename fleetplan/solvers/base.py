"""The solver contract: one result object, one registry, one way to call any solver.

Every solver of every kind is a plain function registered with :func:`register`::

    @register("allocation", "max-min-fairness", description="...", exact=True)
    def max_min_fairness(instance, *, time_limit, seed, threads, progress, **options) -> SolveResult

whose options are its other keyword parameters, or the fields of an option group several
solvers share (:mod:`fleetplan.solvers.options`), and is called through :func:`solve`, which validates the options, times the run and scores the
plan with the kind's ``evaluate`` — so the objective a result reports is always the judge's.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from fleetplan.errors import clip, excerpt
from fleetplan.instances import (
    InstanceBase,
    InstanceError,
    PlanBase,
    as_instance,
    evaluate,
    get_kind,
)
from fleetplan.instances.base import Evaluation, finite_or_none
from fleetplan.solvers.options import OptionSpec, option_specs, pack_options, parameters_section
from fleetplan.solvers.progress import ProgressGuard

Status = Literal["optimal", "feasible", "time_limit", "infeasible", "error"]
STATUSES: tuple[str, ...] = ("optimal", "feasible", "time_limit", "infeasible", "error")


class Progress(Protocol):
    """Progress callback: ``fraction`` in [0, 1] (None when unknown) and a short message.
    :func:`solve` keeps the contract (:data:`PROGRESS_CONTRACT`) for every solver."""

    def __call__(self, fraction: float | None, message: str) -> None: ...


def no_progress(fraction: float | None, message: str) -> None:
    """The default progress callback: says nothing."""


@dataclass
class SolveResult:
    """What every solver returns (in the spirit of ``scipy.optimize.OptimizeResult``).

    ``objective`` is the evaluator's score of ``plan``; ``bound`` the best proven bound on the
    optimum (None when the method proves none); ``gap`` the relative distance between them.
    ``model_objective`` is what the solver's own model claimed, kept to check the two agree.
    """

    status: Status
    plan: PlanBase | None = None
    objective: float | None = None
    bound: float | None = None
    gap: float | None = None
    wall_s: float = 0.0
    log: list[str] = field(default_factory=list)
    message: str = ""
    solver: str = ""
    kind: str = ""
    model_objective: float | None = None
    evaluation: Evaluation | None = None
    stats: dict[str, float] = field(default_factory=dict)
    # What binds: per constraint family (``workers``: one more GPU of a type; ``slo``: a job's
    # throughput floor one step/s lower), the objective gained per unit, in the judge's
    # objective units and its better direction. ``duals_source`` says how they were found:
    # "lp" (the LP's own duals) or "estimate" (re-solves with a unit more and less).
    duals: dict[str, dict[str, float]] = field(default_factory=dict)
    duals_source: str = ""

    @property
    def success(self) -> bool:
        return self.status in ("optimal", "feasible", "time_limit") and self.plan is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "solver": self.solver, "status": self.status,
            "objective": finite_or_none(self.objective), "bound": finite_or_none(self.bound),
            "gap": finite_or_none(self.gap), "wall_s": self.wall_s, "message": self.message,
            "model_objective": finite_or_none(self.model_objective), "stats": self.stats,
            "duals": self.duals, "duals_source": self.duals_source or None, "log": self.log,
            "evaluation": self.evaluation.model_dump() if self.evaluation else None,
            "plan": self.plan.model_dump() if self.plan else None,
        }


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """|bound - objective| / max(|objective|, 1e-9), or None when either is unknown."""
    if objective is None or bound is None or not (math.isfinite(objective) and math.isfinite(bound)):
        return None
    return abs(bound - objective) / max(abs(objective), 1e-9)


SolverFunction = Callable[..., SolveResult]


@dataclass(frozen=True)
class SolverSpec:
    """A registered solver: its kind, name, function and what it promises."""

    kind: str
    name: str
    function: SolverFunction
    description: str
    exact: bool
    reference: str = ""
    default: bool = False

    @property
    def options(self) -> dict[str, Any]:
        """The solver-specific keyword options and their defaults (a leading underscore marks
        a parameter the registration fixes, not one a user sets)."""
        return {name: spec.default for name, spec in self.option_specs.items()}

    @property
    def option_specs(self) -> dict[str, OptionSpec]:
        """Each option's type, default and meaning (:mod:`fleetplan.solvers.options`)."""
        return _option_specs(self.function)

    def to_dict(self) -> dict[str, Any]:
        """The solver as plain data: kind, name, promise, reference and options (JSON-ready; the
        solver catalog and the service's /v1/solvers are lists of these)."""
        return {"kind": self.kind, "name": self.name, "exact": self.exact, "default": self.default,
                "description": self.description, "reference": self.reference,
                "options": [option.to_dict() for option in self.option_specs.values()]}

    def check_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """The options, each validated against its type and allowed values; raises an
        :class:`InstanceError` naming the first bad one before any work starts."""
        specs = self.option_specs
        unknown = sorted(set(options) - set(specs))
        if unknown:
            known = ", ".join(specs) or "none"
            raise InstanceError(f"options.{unknown[0]}", f"unknown option for solver '{self.name}' (known: {known})")
        return {name: specs[name].validate(value) for name, value in options.items()}


_SPEC_CACHE: dict[SolverFunction, dict[str, OptionSpec]] = {}


def _option_specs(function: SolverFunction) -> dict[str, OptionSpec]:
    if function not in _SPEC_CACHE:
        _SPEC_CACHE[function] = option_specs(function)
    return _SPEC_CACHE[function]


_REGISTRY: dict[tuple[str, str], SolverSpec] = {}


def register(kind: str, name: str, *, description: str, exact: bool, reference: str = "",
             default: bool = False) -> Callable[[SolverFunction], SolverFunction]:
    """Decorator: register ``function`` as solver ``name`` of problem ``kind``."""

    def decorate(function: SolverFunction) -> SolverFunction:
        if (kind, name) in _REGISTRY:
            raise ValueError(f"solver {kind}/{name} is registered twice")
        doc = function.__doc__ or ""
        specs = option_specs(function)  # also refuses an option declared twice, at import
        if "Parameters\n" not in doc and specs:
            # The generated numpydoc section, so help(solver) shows every option.
            function.__doc__ = doc.rstrip() + "\n\n" + parameters_section(specs) + "\n"
        _REGISTRY[(kind, name)] = SolverSpec(kind, name, function, description, exact, reference, default)
        return function

    return decorate


def load_kind(kind: str | None = None) -> None:
    """Register the solvers of ``kind`` (of every kind when None) by importing the modules its
    registration names (``ProblemKind.solver_modules``). Only when the kind is first asked for:
    `fleetplan solve` on an allocation instance need not import (or wait for, on a loaded
    machine) the other kinds' solvers."""
    if kind in _LOADED_KINDS:
        return
    import importlib

    from fleetplan.instances import KINDS

    for name in KINDS if kind is None else (kind,):
        if name in KINDS:
            for module in KINDS[name].solver_modules:
                importlib.import_module(module)
    _LOADED_KINDS.add(kind)


# The kinds (None: all) whose solver modules are imported: every fleetplan.solve asks again, and
# importlib's look-ups of modules already there took get_solver from 0.05 ms to 0.02 (2,048-job LAS).
_LOADED_KINDS: set[str | None] = set()


def list_solvers(kind: str | None = None) -> list[SolverSpec]:
    """The registered solvers, of one kind or all, sorted by kind then name.

    >>> "max-min-fairness" in [spec.name for spec in list_solvers("allocation")]
    True
    """
    if kind is not None:
        get_kind(kind)
    load_kind(kind)
    return sorted(
        (spec for spec in _REGISTRY.values() if kind is None or spec.kind == kind),
        key=lambda spec: (spec.kind, spec.name),
    )


# The name this function had before :func:`list_solvers` (kept: modules import it).
solvers = list_solvers


def split_solver_name(name: str) -> tuple[str | None, str]:
    """``"placement/mip-highs"`` -> ``("placement", "mip-highs")``; a bare name -> ``(None, name)``."""
    kind, slash, bare = name.rpartition("/")
    return (kind, bare) if slash else (None, name)


def get_solver(kind: str, name: str | None = None) -> SolverSpec:
    """A registered solver.

    ``get_solver(KIND, NAME)``, ``get_solver(KIND, "KIND/NAME")`` and ``get_solver("KIND/NAME")``
    name one; ``get_solver(KIND)`` is the kind's default solver; ``get_solver(NAME)`` a bare
    name that only one kind registers (names repeat across kinds: ``mip-highs``, ``cpsat``).

    >>> get_solver("allocation", "max-min-fairness").kind
    'allocation'
    """
    if name is None and kind not in _kind_names():
        wanted_kind, bare = split_solver_name(kind)
        if wanted_kind is not None:
            return get_solver(wanted_kind, bare)
        matches = [spec for spec in list_solvers() if spec.name == bare]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise InstanceError("solver", f"solver '{bare}' exists for several kinds; name one: "
                                + ", ".join(f"{spec.kind}/{spec.name}" for spec in matches))
        get_kind(kind)  # neither a kind nor a solver name: "unknown problem kind"
    get_kind(kind)
    load_kind(kind)
    if name is None:
        defaults = [spec for spec in list_solvers(kind) if spec.default] or list_solvers(kind)
        if not defaults:
            raise InstanceError("solver", f"no solver is registered for kind '{kind}'")
        return defaults[0]
    named_kind, bare = split_solver_name(name)
    if named_kind is not None and named_kind != kind:
        raise InstanceError("solver", f"solver '{clip(name)}' is for kind '{named_kind}', "
                                      f"not '{kind}'")
    if (kind, bare) not in _REGISTRY:
        known = ", ".join(spec.name for spec in list_solvers(kind))
        raise InstanceError("solver", f"unknown solver '{clip(bare)}' for kind '{kind}' (known: {known})")
    return _REGISTRY[(kind, bare)]


def _kind_names() -> tuple[str, ...]:
    from fleetplan.errors import KIND_NAMES

    return KIND_NAMES


MAX_THREADS = 1024


def solve(instance: InstanceBase | dict[str, Any], solver: str | None = None, *,
          time_limit: float | None = None, seed: int = 0, threads: int = 1,
          progress: Progress | None = None, started: float | None = None, **options: Any) -> SolveResult:
    """Solve ``instance`` with the registered solver ``solver`` (the kind's default if None).

    Parameters
    ----------
    instance : an instance model, or a plain dict in the instance file's layout (anything else,
        a file name included, raises a ``TypeError`` naming what is accepted: read a file with
        :func:`fleetplan.load_instance` first)
    solver : a solver name of the instance's kind (``fleetplan.list_solvers(kind)``), bare or as
        ``KIND/NAME``; None: the kind's default
    time_limit : seconds for the whole solve (model building and judging included); None: no limit
    seed : random seed; the same instance, solver, options and seed give the same plan
    threads : solver threads (at most the machine's cores are used)
    progress : callback ``progress(fraction, message)``; the contract every solver keeps:
        ``fraction`` is None (unknown) or in [0, 1] and never decreases, the last call says 1.0,
        and a long solve calls at least about once a second (:data:`PROGRESS_CONTRACT`;
        :mod:`fleetplan.solvers.progress`)
    started : a ``time.perf_counter()`` reading from which ``time_limit`` counts (default: now):
        a caller that spent part of its limit before calling (loading a file) passes when it
        began, and the plan still records the limit it was given
    **options : the solver's options (``fleetplan solvers NAME`` lists them)

    The plan is scored by the kind's ``evaluate``; the result's ``objective`` is that score.
    Bad options (unknown names, values of the wrong type or out of range) raise
    :class:`InstanceError` before any work starts.

    >>> import fleetplan
    >>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
    >>> result = solve(instance, "max-min-fairness", time_limit=60)
    >>> result.status, result.objective == result.evaluation.objective
    ('optimal', True)
    """
    instance = as_instance(instance, "instance")
    spec = get_solver(instance.kind, solver)
    options = spec.check_options(options)
    time_limit = check_time_limit(time_limit)
    solver_limit = time_limit
    if time_limit is not None and started is not None:
        solver_limit = max(time_limit - (time.perf_counter() - started), 0.01)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise InstanceError("seed", f"{excerpt(seed)} is not allowed: must be an integer in [0, 2^63)")
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise InstanceError("threads", f"{excerpt(threads)} is not allowed: must be an integer in [1, {MAX_THREADS}]")
    threads = min(threads, _cores())
    started = time.perf_counter()
    # The progress contract (fleetplan.solvers.progress), whatever the solver reports.
    guard = ProgressGuard(progress)
    with instance_hidden_from_gc(), guard:
        result = spec.function(instance, time_limit=solver_limit, seed=seed, threads=threads,
                               progress=guard, **pack_options(spec.function, options))
        result.wall_s = time.perf_counter() - started
        _judge(instance, spec, result, time_limit, seed, threads, options)
    guard.finish(f"{spec.name}: {result.status}")
    return result


def check_time_limit(time_limit: Any) -> float | None:
    """A time limit in seconds (None: none); raises :class:`InstanceError` for anything else."""
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not (
            math.isfinite(time_limit) and time_limit > 0):
        raise InstanceError("time_limit", f"{excerpt(time_limit)} is not allowed: must be a positive number of seconds")
    return float(time_limit)


@functools.cache
def _cores() -> int:
    """The machine's logical CPUs, read once: ``os.cpu_count`` reads a file of the system on
    every call (0.06 ms in a 2,048-job LAS solve's 11), and the count does not change."""
    return os.cpu_count() or 1


@contextlib.contextmanager
def instance_hidden_from_gc() -> Iterator[None]:
    """Keep Python's cyclic garbage collector off the objects that exist before a solve.

    A large instance is tens of thousands of long-lived objects, and every full collection that
    a solve's temporaries trigger walks all of them (0.15 s a pass at 16,384 Gavel jobs, several
    times the LP's own solve time). ``gc.freeze`` moves what exists now to a permanent
    generation that collections skip, while garbage the solve creates (Pyomo models are full of
    reference cycles) is still collected; ``gc.unfreeze`` puts everything back at the end.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _judge(instance: InstanceBase, spec: SolverSpec, result: SolveResult, time_limit: float | None,
           seed: int, threads: int, options: dict[str, Any]) -> None:
    """Name the solver on the result and score its plan with the kind's judge."""
    result.solver = spec.name
    result.kind = instance.kind
    if result.plan is not None:
        result.plan.solver = spec.name
        result.plan.options = {"time_limit": time_limit, "seed": seed, "threads": threads, **options}
        result.evaluation = evaluate(instance, result.plan)
        result.plan.drop_solver_arrays()  # the plan the caller gets holds only its own fields
        if result.model_objective is None:
            result.model_objective = result.objective
        result.objective = result.evaluation.objective
        if result.status == "optimal" and result.bound is None and spec.exact:
            result.bound = result.model_objective
        result.gap = relative_gap(result.objective, result.bound)
