"""Benchmark suites: the YAML file format, its validation, and where bundled suites live.

A suite names problem kinds, generator parameters to sweep, seeds, and the solvers (with
options) to pit against each other::

    name: gavel-scaling
    description: one line
    groups:
      - kind: allocation
        generator: {jobs: [32, 256], multi_gpu: [false, true]}   # a list is swept
        seeds: [0]
        repeats: 3
        time_limit: 600
        solvers:
          - name: max-min-fairness
            label: las
            options: {lp_algorithm: ipm}

A list value under ``generator`` is swept (cartesian product of every list); to pass a
parameter whose own value is a list, wrap it once more (``worker_types: [[v100, k80]]``).
``solvers: all`` stands for every solver registered for the kind, with default options, so a
solver added to the registry is benchmarked without editing the suite.

Loading validates everything up front — kinds, solver names, solver options, and every
generator parameter set after expansion — and fails with an :class:`InstanceError` naming the
YAML path (``groups[0].solvers[1].options.lp_algorithm``), never half-way through a sweep.

>>> suite = load_suite("quick")
>>> suite.name
'quick'
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, model_validator

from fleetplan import bounded_yaml
from fleetplan.errors import clip
from fleetplan.instances import KINDS, InstanceError, get_kind
from fleetplan.instances.base import StrictModel, validate_model
from fleetplan.runs.cells import SIM_KIND, Cell


def solvers(kind: str) -> list:
    """The registered solvers of ``kind`` (the registry loads on first use, not for --help)."""
    from fleetplan.solvers import solvers as registered

    return registered(kind)


def get_solver(kind: str, name: str):
    from fleetplan.solvers import get_solver as lookup

    return lookup(kind, name)

DEFAULT_TIME_LIMIT = 600.0
# Bounds checked before anything is expanded: a suite is a small hand-written file, and a
# YAML alias bomb (a few anchors, each a list of aliases to the last) expands exponentially.
MAX_SUITE_BYTES = 1_000_000
MAX_YAML_NODES = 50_000  # scalars, lists and mappings of the document with every alias expanded
# The seeds solve() and the generators take (numpy's generators are seeded with 64 bits): a
# larger one would pass here and fail in the first cell, after the sweep had started.
MAX_SEED = 2**63 - 1
MAX_CELLS = 100_000  # cells of the whole suite (parameter sets x seeds x solvers x repeats)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class SolverEntry(StrictModel):
    """One solver of a group: a registered name, an optional label, and its options."""

    name: str = Field(min_length=1)
    label: str | None = Field(default=None, min_length=1)
    options: dict[str, Any] = Field(default_factory=dict)

    @property
    def display(self) -> str:
        return self.label or self.name


class Group(StrictModel):
    """A block of cells: one kind, swept generator parameters, seeds, solvers, limits — or one
    simulator, swept scenario parameters, seeds and schedulers (see :mod:`.simcells`)."""

    name: str | None = Field(default=None, min_length=1, description="defaults to the group's index")
    kind: str | None = None
    simulator: str | None = Field(default=None, min_length=1)
    scenario: dict[str, Any] = Field(default_factory=dict)
    schedulers: list[str] | Literal["all"] = "all"
    generator: dict[str, Any] = Field(default_factory=dict)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    repeats: int = Field(default=1, ge=1, le=1000)
    time_limit: float = Field(default=DEFAULT_TIME_LIMIT, gt=0)
    threads: int = Field(default=1, ge=1)
    solvers: list[SolverEntry] | Literal["all"] = "all"

    def solver_entries(self) -> list[SolverEntry]:
        """The group's solvers, with ``all`` expanded from the registry."""
        if self.solvers == "all":
            return [SolverEntry(name=spec.name) for spec in solvers(str(self.kind))]
        return list(self.solvers)

    @property
    def sweep(self) -> dict[str, Any]:
        """What is swept: the scenario of a simulation group, else the generator parameters."""
        return self.scenario if self.simulator else self.generator

    def parameter_sets(self) -> list[dict[str, Any]]:
        """The cartesian product of every list under ``generator`` (``scenario``), in file order."""
        keys = list(self.sweep)
        axes = [value if isinstance(value, list) else [value] for value in self.sweep.values()]
        return [dict(zip(keys, combination, strict=True)) for combination in itertools.product(*axes)]

    def scheduler_names(self) -> list[str]:
        """A simulation group's schedulers, with ``all`` expanded from the simulator."""
        from fleetplan import sim

        if self.schedulers == "all":
            return list(sim.get_simulator(str(self.simulator)).schedulers)
        return list(self.schedulers)


class Suite(StrictModel):
    """A benchmark suite file."""

    name: str = Field(min_length=1)
    description: str = ""
    groups: list[Group] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> Suite:
        # Checked here rather than in Group so that errors carry the full path (groups[i]...).
        names: set[str] = set()
        total = 0
        for index, group in enumerate(self.groups):
            if group.simulator is not None:
                check_sim_group(group, f"groups[{index}]")
            else:
                _check_group(group, f"groups[{index}]")
            # Counted from the list lengths, before any product is built.
            total += group_cell_count(group)
            if total > MAX_CELLS:
                raise InstanceError(f"groups[{index}]", f"the suite expands to more than {MAX_CELLS:,} cells "
                                                        "(parameter sets x seeds x solvers x repeats)")
            name = group_name(group, index)
            if name in names:
                raise InstanceError(f"groups[{index}].name", f"duplicate group name '{name}'")
            names.add(name)
            field = "scenario" if group.simulator else "generator"
            for key, value in group.sweep.items():
                if isinstance(value, list) and not value:
                    raise InstanceError(f"groups[{index}].{field}.{key}", "an empty list sweeps nothing")
            if group.simulator:
                continue  # its scenarios were checked by check_sim_group
            spec = get_kind(str(group.kind))
            for params in group.parameter_sets():
                try:
                    validate_model(spec.generate_params, params)
                except InstanceError as error:
                    raise InstanceError(f"groups[{index}].generator.{error.path}", error.reason) from None
        return self


def _check_group(group: Group, at: str) -> None:
    for index, seed in enumerate(group.seeds):
        if not 0 <= seed <= MAX_SEED:
            raise InstanceError(f"{at}.seeds[{index}]", f"a seed must be in [0, 2^63 - 1] (got {clip(str(seed))})")
        if group.seeds.index(seed) != index:
            raise InstanceError(f"{at}.seeds[{index}]", f"duplicate seed {seed}")
    if group.kind is None:
        raise InstanceError(f"{at}.kind", "required field is missing (or give `simulator:` for a simulation group)")
    for field in ("scenario", "schedulers"):
        if field in group.model_fields_set:
            raise InstanceError(f"{at}.{field}", "only a simulation group (`simulator:`) takes this field")
    if group.kind not in KINDS:
        raise InstanceError(f"{at}.kind", f"unknown problem kind '{group.kind}' (known: {', '.join(sorted(KINDS))})")
    if group.solvers == "all":
        if not solvers(group.kind):
            raise InstanceError(f"{at}.solvers", f"no solver is registered for kind '{group.kind}'")
        return
    if not group.solvers:
        raise InstanceError(f"{at}.solvers", "must list at least one solver (or say 'all')")
    labels: set[str] = set()
    for index, entry in enumerate(group.solvers):
        try:
            spec = get_solver(group.kind, entry.name)
        except InstanceError as error:
            raise InstanceError(f"{at}.solvers[{index}].name", error.reason) from None
        unknown = sorted(set(entry.options) - set(spec.options))
        if unknown:
            known = ", ".join(sorted(spec.options)) or "none"
            raise InstanceError(f"{at}.solvers[{index}].options.{unknown[0]}",
                                f"unknown option for solver '{spec.name}' (known: {known})")
        for name, value in entry.options.items():
            # Values too, before the sweep starts (`partitions: 0` failed 35 s into it).
            try:
                spec.option_specs[name].validate(value)
            except InstanceError as error:
                raise InstanceError(f"{at}.solvers[{index}].options.{name}", error.reason) from None
        if entry.display in labels:
            raise InstanceError(f"{at}.solvers[{index}].label",
                                f"duplicate label '{entry.display}' (give each entry its own label)")
        labels.add(entry.display)


def check_sim_group(group: Group, at: str) -> None:
    """Validate a simulation group: the simulator, its schedulers, every scenario of the sweep."""
    from fleetplan import sim

    if group.kind is not None:
        raise InstanceError(f"{at}.kind", "a group has either `kind:` (solvers) or `simulator:`, not both")
    for field in ("generator", "solvers"):
        if field in group.model_fields_set:
            raise InstanceError(f"{at}.{field}", "a simulation group sweeps `scenario:` and `schedulers:` instead")
    try:
        spec = sim.get_simulator(str(group.simulator))
    except InstanceError as error:
        raise InstanceError(f"{at}.simulator", error.reason) from None
    if group.schedulers != "all":
        if not group.schedulers:
            raise InstanceError(f"{at}.schedulers", "must list at least one scheduler (or say 'all')")
        for index, name in enumerate(group.schedulers):
            if name not in spec.schedulers:
                raise InstanceError(f"{at}.schedulers[{index}]", f"unknown scheduler '{name}' for simulator "
                                                                 f"'{spec.name}' (known: {', '.join(spec.schedulers)})")
            if group.schedulers.index(name) != index:
                raise InstanceError(f"{at}.schedulers[{index}]", f"duplicate scheduler '{name}'")
    for index, seed in enumerate(group.seeds):
        if not 0 <= seed <= MAX_SEED:
            raise InstanceError(f"{at}.seeds[{index}]", f"a seed must be in [0, 2^63 - 1] (got {clip(str(seed))})")
    if any(isinstance(value, list) and not value for value in group.scenario.values()):
        return  # the suite reports the empty list with its path
    for params in group.parameter_sets():
        try:
            spec.scenario(params)
        except InstanceError as error:
            path = error.path.removeprefix("scenario").lstrip(".")
            raise InstanceError(f"{at}.scenario{'.' + path if path else ''}", error.reason) from None


def simulator_module(name: str) -> str:
    """The module that defines simulator ``name`` (from the registry)."""
    from fleetplan import sim

    sim.get_simulator(name)  # unknown names fail here, with the known ones listed
    return sim._MODULES[name]


def group_cell_count(group: Group) -> int:
    """Cells of one group, computed from the lengths alone (nothing is expanded)."""
    sweeps = math.prod(len(value) if isinstance(value, list) else 1 for value in group.sweep.values())
    if group.simulator:
        solver_count = len(group.scheduler_names())
    else:
        solver_count = len(solvers(str(group.kind))) if group.solvers == "all" else len(group.solvers)
    return sweeps * len(group.seeds) * max(solver_count, 1) * group.repeats


def output_folder(suite_name: str, root: str | os.PathLike[str] = "bench-results") -> Path:
    """The default results folder of a suite: ``root/NAME`` with NAME made a single safe path
    component, so a name such as ``../x`` or ``/etc`` can never lead outside ``root``."""
    component = _SAFE_NAME.sub("-", suite_name).strip("-.") or "suite"
    folder = Path(root) / component
    base = Path(root).resolve()
    if folder.resolve().parent != base:  # e.g. a symlink planted inside root
        raise InstanceError("name", f"suite name '{suite_name}' does not give a folder inside {root}/")
    return folder


def group_name(group: Group, index: int) -> str:
    """A group's name in the results table: its ``name`` field, else its index."""
    return group.name or str(index)


def bundled_suites() -> list[str]:
    """Names of the suites shipped in ``fleetplan/benchmarks/suites/``."""
    folder = resources.files("fleetplan.benchmarks").joinpath("suites")
    return sorted(entry.name[:-5] for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def suite_path(name_or_path: str | os.PathLike[str]) -> Path:
    """Resolve a suite argument: an existing file, or the name of a bundled suite."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    text = str(name_or_path)
    if "/" not in text and not text.endswith((".yaml", ".yml")):
        bundled = Path(str(resources.files("fleetplan.benchmarks").joinpath("suites", f"{text}.yaml")))
        if bundled.is_file():
            return bundled
        known = ", ".join(bundled_suites())
        raise InstanceError("", f"no suite file '{text}' and no bundled suite of that name (bundled: {known})")
    raise InstanceError("", "file not found", text)


def _load_yaml(text: str, source: str | None) -> Any:
    """The suite's YAML with its size, depth and expanded size bounded before it is built
    (:mod:`fleetplan.bounded_yaml`, shared with the command line's values)."""
    if len(text) > MAX_SUITE_BYTES:
        raise InstanceError("", f"suite file larger than {MAX_SUITE_BYTES:,} bytes", source)
    return bounded_yaml.load(text, source, max_bytes=MAX_SUITE_BYTES, max_nodes=MAX_YAML_NODES)


def parse_suite(text: str, source: str | None = None) -> Suite:
    """Validate the text of a suite file (its size and expanded size are bounded first)."""
    try:
        data = _load_yaml(text, source)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or "invalid YAML"
        raise InstanceError("", f"malformed YAML{where}: {problem}", source) from None
    except RecursionError:
        raise InstanceError("", "the YAML is nested too deeply", source) from None
    if not isinstance(data, dict):
        raise InstanceError("$", "expected a mapping with name and groups", source)
    return validate_model(Suite, data, source)


def load_suite(name_or_path: str | os.PathLike[str]) -> Suite:
    """Load and validate a suite: a YAML file, or a bundled name (``quick``, ``standard``...)."""
    path = suite_path(name_or_path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InstanceError("", f"cannot read file: {error}", str(path)) from None
    return parse_suite(text, str(path))


def instance_name(kind: str, params: dict[str, Any]) -> str:
    """A readable, unique name for a generated instance: ``allocation[jobs=32,multi_gpu=false]``."""
    inside = ",".join(f"{key}={json.dumps(params[key], separators=(',', ':'))}" for key in sorted(params))
    return f"{kind}[{inside}]"


def expand_cells(suite: Suite, *, repeats: int | None = None, plan_dir: str | None = None) -> list[Cell]:
    """The cells of ``suite`` in run order: group, parameter set, seed, solver, repeat.

    ``repeats`` overrides every group's own count (``fleetplan bench --repeats``).
    """
    cells: list[Cell] = []
    for index, group in enumerate(suite.groups):
        name = group_name(group, index)
        if group.simulator:
            module = simulator_module(group.simulator)
            schedulers = group.scheduler_names()
            for params in group.parameter_sets():
                instance = instance_name(group.simulator, params)
                for seed in group.seeds:
                    for scheduler in schedulers:
                        for repeat in range(repeats or group.repeats):
                            cells.append(Cell(
                                suite=suite.name, group=name, kind=SIM_KIND, instance=instance, params=params,
                                seed=seed, solver=scheduler, label=scheduler, options={}, repeat=repeat,
                                time_limit=group.time_limit, threads=group.threads, order=len(cells),
                                plan_dir=plan_dir, sim_module=module,
                            ))
            continue
        for params in group.parameter_sets():
            instance = instance_name(group.kind, params)
            for seed in group.seeds:
                for entry in group.solver_entries():
                    for repeat in range(repeats or group.repeats):
                        cells.append(Cell(
                            suite=suite.name, group=name, kind=group.kind, instance=instance,
                            params=params, seed=seed, solver=entry.name, label=entry.display,
                            options=dict(entry.options), repeat=repeat, time_limit=group.time_limit,
                            threads=group.threads, order=len(cells), plan_dir=plan_dir,
                        ))
    return cells
