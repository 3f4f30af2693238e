"""Cells — one (instance, solver, seed, repeat) of a sweep — and the function that runs one.

A benchmark suite (:func:`fleetplan.benchmarks.suite.expand_cells`) and a what-if sweep
(:mod:`fleetplan.planning.whatif`) both turn their question into cells. :func:`run_cell` runs one
cell in the current process and returns its row of the results table. :class:`CellProcess`
runs a cell in a fresh Python child process (``python -m fleetplan.runs.cells``), so
each run's time and peak memory are its own and a run past its limit can be killed; both
executors use it, which is why their tables agree except for timings.

The child reads the cell as JSON on stdin and writes the row as JSON to a file: nothing is
pickled, and solvers that print to stdout cannot corrupt the answer.

>>> from fleetplan.benchmarks.suite import expand_cells, load_suite
>>> cells = expand_cells(load_suite("quick"))
>>> row = run_cell(cells[0])
>>> row["status"], row["violations"]
('optimal', 0)
"""

from __future__ import annotations

import json
import math
import multiprocessing
import multiprocessing.context
import multiprocessing.process
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from fleetplan.instances import Evaluation, InstanceError, generate, save
from fleetplan.runs.memory import BACKENDS, MemoryProbe, preload_backends

# The shared suite format's columns, then the harness's own: the sense of the objective (to
# compare bounds the right way), which objective the judge scored (solvers of different policies
# of one kind are scored differently, and only like is compared with like), what the gap was
# measured against, the solver's own measurements as JSON (``stats``), the memory baseline and
# how memory was measured (:mod:`.memory`), a simulator's metrics as JSON, and the table's format.
COLUMNS: tuple[str, ...] = (
    "suite", "group", "kind", "instance", "params", "seed", "solver", "label", "options", "repeat",
    "status", "objective", "bound", "best_bound", "gap", "wall_s", "peak_mem_mb", "violations",
    "message", "sense", "objective_name", "gap_reference", "stats", "mem_baseline_mb",
    "mem_measure", "metrics", "format_version",
)
# Version 1: the first 22 columns; 2 added ``stats``; 3 added the last four and changed
# ``peak_mem_mb`` from the child's whole peak to the solve's own increase (see results.py).
FORMAT_VERSION = 3
# The `kind` of a simulation cell's row (a group with `simulator:`; see .simcells).
SIM_KIND = "simulation"
# A simulation cell that ran to its end.
SIM_STATUS = "done"
# Beyond time_limit * KILL_FACTOR + grace a child is killed (solvers honour their limit within
# a few percent; the grace covers interpreter start and instance generation).
KILL_FACTOR = 1.5
DEFAULT_GRACE_S = 10.0
KILLED_MESSAGE = "killed: past time limit"
Launch = Literal["forkserver", "subprocess"]


@dataclass(frozen=True)
class Cell:
    """Everything needed to run one solver once on one generated instance."""

    suite: str
    group: str
    kind: str
    instance: str
    params: dict[str, Any]
    seed: int
    solver: str
    label: str
    options: dict[str, Any]
    repeat: int
    time_limit: float
    threads: int = 1
    order: int = 0
    plan_dir: str | None = field(default=None, compare=False)
    sim_module: str | None = None  # a simulation cell: the simulator's module (see .simcells)
    # A cell on a given instance instead of a generated one (``fleetplan whatif``): the
    # instance file's JSON text, changed by ``params`` (field path -> value; see
    # fleetplan.planning.whatif.apply_changes) before solving.
    instance_data: str | None = field(default=None, repr=False)
    # A cell that is not one solver's solve (a purchase schedule over periods, say): the
    # ``fleetplan.module:function`` that answers it, given the cell, with the row's values
    # (:func:`run_task_cell`). It is named, not pickled, so a cell stays plain JSON.
    runner: str | None = None

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """What identifies a cell across runs of a sweep (used by ``--resume``)."""
        return cell_key(self.group, self.instance, self.seed, self.label, self.repeat)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Cell:
        return cls(**json.loads(text))


def cell_key(group: Any, instance: Any, seed: Any, label: Any, repeat: Any) -> tuple[str, str, str, str, str]:
    return (str(group), str(instance), str(seed), str(label), str(repeat))


def base_row(cell: Cell) -> dict[str, Any]:
    """The row's identifying columns, with every result column empty."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS, "")
    row.update(
        suite=cell.suite, group=cell.group, kind=cell.kind, instance=cell.instance,
        params=json.dumps(cell.params, sort_keys=True), seed=cell.seed, solver=cell.solver,
        label=cell.label, options=json.dumps(cell.options, sort_keys=True), repeat=cell.repeat,
        format_version=FORMAT_VERSION,
    )
    return row


def error_row(cell: Cell, message: str, wall_s: float | str = "", peak_mem_mb: float | str = "") -> dict[str, Any]:
    row = base_row(cell)
    row.update(status="error", message=one_line(message), wall_s=wall_s, peak_mem_mb=peak_mem_mb)
    return row


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _number(value: float | None) -> float | str:
    return value if value is not None and math.isfinite(value) else ""


def _with_memory(row: dict[str, Any], probe: MemoryProbe) -> dict[str, Any]:
    """Fill the memory columns from a probe that ran (left empty when the run never started)."""
    if probe.method:
        row.update(peak_mem_mb=round(probe.increase_mb, 1), mem_baseline_mb=round(probe.baseline_mb, 1),
                   mem_measure=probe.method + ("" if probe.preloaded else "+imports"))
    return row


def plan_file(plan_dir: str | os.PathLike[str], cell: Cell) -> Path:
    """Where ``--save-plans`` keeps a cell's plan."""
    safe = "__".join(part.replace("/", "_") for part in cell.key)
    return Path(plan_dir) / f"{safe}.json"


def objective_name(evaluation: Evaluation) -> str:
    """What the judge scored: the names of the objective's terms (``+``-joined, sorted).

    Two plans are comparable only when this and the sense agree — e.g. a FIFO plan and a
    max-min plan of the same allocation instance are scored by different objectives.
    """
    return "+".join(sorted(evaluation.terms)) or "objective"


def _failure_row(cell: Cell, error: Exception) -> dict[str, Any]:
    """The row of a cell that raised: bad input in one line, anything else with its exception
    type and the file and line it came from."""
    if isinstance(error, InstanceError):
        return error_row(cell, f"invalid input: {error}")
    where = traceback.extract_tb(error.__traceback__)[-1]
    return error_row(cell, f"{type(error).__name__}: {error} ({Path(where.filename).name}:{where.lineno})")


def run_cell(cell: Cell, preload: bool = True, instance: Any = None) -> dict[str, Any]:
    """Generate the cell's instance (or take ``instance``, already built), solve it, and return
    its row (in this process).

    The objective, the violation count, the sense and the objective's name come from ``evaluate`` (through
    :func:`fleetplan.solve`); ``bound`` is the solver's own proven bound; ``best_bound`` and
    ``gap`` stay empty until every cell of the instance is in (see :mod:`.results`).
    """
    probe = MemoryProbe(preloaded=preload)
    if cell.sim_module:
        return run_sim_cell(cell, probe, preload)
    if cell.runner:
        return run_task_cell(cell, probe, preload)
    row = base_row(cell)
    try:
        if instance is None:
            instance = _cell_instance(cell)
        from fleetplan.solvers import (  # the registry loads in the child, not for --help
            load_kind,
            solve,
        )

        load_kind(cell.kind)  # importing the kind's solvers is not the solve's time
        if preload:
            preload_backends()  # a lazy import inside the solve is not the solver's memory
        cpu_started = time.process_time()
        with probe:
            result = solve(instance, cell.solver, time_limit=cell.time_limit, seed=cell.seed,
                           threads=cell.threads, **cell.options)
        cpu_s = time.process_time() - cpu_started
    except Exception as error:  # a crashing solver is a result, not the end of the sweep
        return _with_memory(_failure_row(cell, error), probe)
    evaluation = result.evaluation
    row.update(
        status=result.status, objective=_number(result.objective), bound=_number(result.bound),
        wall_s=round(result.wall_s, 6),
        violations=len(evaluation.violations) if evaluation is not None else "",
        message=one_line(result.message), sense=evaluation.sense if evaluation is not None else "",
        objective_name=objective_name(evaluation) if evaluation is not None else "",
        # The solver's own measurements (e.g. model-build and solve seconds), kept as JSON.
        # cpu_s: the solve's CPU seconds (all threads), beside wall_s for a machine that is shared.
        stats=json.dumps({k: _number(v) for k, v in sorted({**result.stats, "cpu_s": cpu_s}.items())}),
        metrics=json.dumps({k: _number(v) for k, v in sorted(evaluation.metrics.items())})
        if evaluation is not None else "",
    )
    _with_memory(row, probe)
    if cell.plan_dir and result.plan is not None:
        save(result.plan, plan_file(cell.plan_dir, cell))
    return row


def _cell_instance(cell: Cell) -> Any:
    """The cell's instance: generated from its parameters, or its own instance data changed
    by its parameters (a what-if point)."""
    if cell.instance_data is None:
        return generate(cell.kind, cell.params, seed=cell.seed)
    from fleetplan.instances import instance_from_data
    from fleetplan.instances.paths import apply_changes

    return instance_from_data(apply_changes(json.loads(cell.instance_data), cell.params), cell.instance)


def run_sim_cell(cell: Cell, probe: MemoryProbe, preload: bool) -> dict[str, Any]:
    """Run one simulation cell in this process and return its row."""
    import importlib

    row = base_row(cell)
    try:
        spec = importlib.import_module(str(cell.sim_module)).SIMULATOR
        scenario = spec.scenario(cell.params)
        if preload:
            preload_backends()
        cpu_started = time.process_time()
        with probe:
            result = spec.run(scenario, cell.solver, cell.seed)
        cpu_s = time.process_time() - cpu_started
    except Exception as error:  # a crashing simulator is a result, not the end of the sweep
        return _with_memory(_failure_row(cell, error), probe)
    data = result.to_dict()
    row.update(status=SIM_STATUS, wall_s=round(result.wall_s, 6), message=one_line(result.message),
               metrics=json.dumps(data["metrics"], sort_keys=True),
               stats=json.dumps({"events": data["events"], "sim_time": data["sim_time"], "cpu_s": round(cpu_s, 6)}))
    if cell.plan_dir:
        plan_file(cell.plan_dir, cell).write_text(json.dumps(data), encoding="utf-8")
    return _with_memory(row, probe)


# What a runner's answer may set: the row's result columns (the rest identify the cell).
TASK_FIELDS = ("status", "objective", "bound", "message", "sense", "objective_name", "violations")


def task_runner(name: str) -> Any:
    """The function a task cell names (``fleetplan.module:function``); only fleetplan's own
    modules are imported, whatever a cell's JSON says."""
    import importlib

    module, _, function = name.partition(":")
    if not module.startswith("fleetplan.") or not function.isidentifier():
        raise InstanceError("runner", f"'{name[:80]}' is not a fleetplan.MODULE:FUNCTION")
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError):
        raise InstanceError("runner", f"no function {name[:80]}") from None


def run_task_cell(cell: Cell, probe: MemoryProbe, preload: bool) -> dict[str, Any]:
    """Run a cell whose :attr:`Cell.runner` answers it: the runner gets the cell and returns a
    dict of the row's result columns (:data:`TASK_FIELDS`), its ``metrics`` and ``stats`` as
    dicts; the wall and CPU seconds and the memory are measured here, as for a solve."""
    row = base_row(cell)
    try:
        runner = task_runner(str(cell.runner))
        if preload:
            preload_backends()
        wall_started, cpu_started = time.perf_counter(), time.process_time()
        with probe:
            answer = runner(cell)
        cpu_s, wall_s = time.process_time() - cpu_started, time.perf_counter() - wall_started
    except Exception as error:  # a failing point is a result, not the end of the sweep
        return _with_memory(_failure_row(cell, error), probe)
    row.update({name: answer[name] for name in TASK_FIELDS if name in answer})
    for name in ("objective", "bound"):
        if name in answer:
            row[name] = _number(answer[name])
    row["message"] = one_line(str(row["message"]))
    row.update(wall_s=round(wall_s, 6),
               # an infinite metric is a finding (an unbounded value), kept as JSON's Infinity
               metrics=json.dumps({k: v if isinstance(v, float) and math.isinf(v) else _number(v)
                                   for k, v in sorted(answer.get("metrics", {}).items())}),
               stats=json.dumps({k: _number(v) for k, v in sorted({**answer.get("stats", {}), "cpu_s": cpu_s}.items())}))
    return _with_memory(row, probe)


class CellProcess:
    """One cell running in a child process of its own, killed if it outlives its limit.

    ``launch="forkserver"`` (the local executor's) forks the child from a server process that
    has already imported fleetplan, so a cell starts in milliseconds; ``launch="subprocess"``
    starts a fresh interpreter (``python -m fleetplan.runs.cells``), which works inside
    daemonic processes such as Dask workers. Either way the child runs :func:`run_cell` and
    nothing but that cell, so its ``ru_maxrss`` is that cell's peak memory.

    >>> from fleetplan.benchmarks.suite import expand_cells, load_suite
    >>> process = CellProcess(expand_cells(load_suite("quick"))[0]).start()
    >>> process.wait()["status"]
    'optimal'
    """

    def __init__(self, cell: Cell, grace_s: float = DEFAULT_GRACE_S, launch: Launch = "forkserver"):
        if launch not in ("forkserver", "subprocess"):
            raise ValueError(f"unknown launch method {launch!r}")
        self.cell = cell
        self.launch = launch
        self.deadline_s = cell.time_limit * KILL_FACTOR + grace_s
        self._process: subprocess.Popen[bytes] | multiprocessing.process.BaseProcess | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        self._started = 0.0
        self._row: dict[str, Any] | None = None  # the row, once the child has finished

    def start(self) -> CellProcess:
        self._folder = tempfile.TemporaryDirectory(prefix="fleetplan-cell-")
        folder = Path(self._folder.name)
        if self.launch == "forkserver":
            self._process = _forkserver().Process(
                target=_forked_child, args=(self.cell.to_json(), str(folder)), daemon=True)
            self._process.start()
        else:
            (folder / "cell.json").write_text(self.cell.to_json(), encoding="utf-8")
            with open(folder / "cell.json", "rb") as stdin, open(folder / "stderr.txt", "wb") as stderr:
                # The child imports what this process can (e.g. a simulator module on sys.path).
                env = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "fleetplan.runs.cells", str(folder / "row.json")],
                    stdin=stdin, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                )
        self._started = time.monotonic()
        return self

    @property
    def started(self) -> bool:
        return self._process is not None and getattr(self._process, "pid", None) is not None

    def _exit_code(self) -> int | None:
        process = self._process
        if isinstance(process, subprocess.Popen):
            return process.poll()
        assert process is not None
        return process.exitcode

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    def poll(self) -> dict[str, Any] | None:
        """The row once the child has finished (or was killed now); None while it runs."""
        assert self._process is not None, "start() first"
        if self._row is not None:  # polled again (e.g. by a cleanup after Ctrl-C): same answer
            return self._row
        code = self._exit_code()
        if code is None:
            if self.elapsed_s <= self.deadline_s:
                return None
            self.kill()
            return self._finish(error_row(self.cell, KILLED_MESSAGE, wall_s=round(self.elapsed_s, 6)))
        return self._finish(self._read_row(code))

    def wait(self, interval_s: float = 0.05) -> dict[str, Any]:
        while (row := self.poll()) is None:
            time.sleep(interval_s)
        return row

    def kill(self) -> None:
        process = self._process
        if process is None or getattr(process, "pid", None) is None or self._exit_code() is not None:
            return  # never started, or already ended
        process.kill()
        if isinstance(process, subprocess.Popen):
            process.wait()
        else:
            process.join()

    def _read_row(self, code: int) -> dict[str, Any]:
        assert self._folder is not None
        folder = Path(self._folder.name)
        try:
            row = json.loads((folder / "row.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            errors = folder / "stderr.txt"
            text = errors.read_text(encoding="utf-8", errors="replace") if errors.exists() else ""
            tail = text.strip().splitlines()
            detail = tail[-1] if tail else "no output"
            return error_row(self.cell, f"child process exited with code {code}: {detail}",
                             wall_s=round(self.elapsed_s, 6))
        return {column: row.get(column, "") for column in COLUMNS}

    def _finish(self, row: dict[str, Any]) -> dict[str, Any]:
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None
        self._row = row
        return row


def run_cell_isolated(cell: Cell, grace_s: float = DEFAULT_GRACE_S,
                      launch: Launch = "subprocess") -> dict[str, Any]:
    """Run one cell in a child process and wait for its row (what a Dask task does)."""
    return CellProcess(cell, grace_s, launch).start().wait()


_FORKSERVER: multiprocessing.context.BaseContext | None = None


def _forkserver() -> multiprocessing.context.BaseContext:
    """The forkserver context, its server preloading fleetplan and every solver.

    Not plain fork: the parent may hold threads (HiGHS, OR-Tools, Dask, rich) that a fork
    would copy in an arbitrary state; the server forks from a clean single-threaded process.
    """
    global _FORKSERVER
    if _FORKSERVER is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["fleetplan.runs.cells", *BACKENDS])
        _FORKSERVER = context
    return _FORKSERVER


def _write_row(row: dict[str, Any], target: Path) -> None:
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps(row), encoding="utf-8")
    os.replace(temporary, target)


def _quiet_on_interrupt() -> None:
    """A cell child ends at once and silently on Ctrl-C or SIGTERM (exit code 130 / 143): the
    parent stops its children and then cleans up, and a terminal's Ctrl-C reaches the whole
    process group (a child printed a 29-line traceback)."""
    signal.signal(signal.SIGINT, lambda signum, frame: os._exit(130))
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(143))


def _forked_child(cell_json: str, folder: str) -> None:
    _quiet_on_interrupt()
    try:
        _write_row(run_cell(Cell.from_json(cell_json)), Path(folder) / "row.json")
    except BaseException:
        Path(folder, "stderr.txt").write_text(traceback.format_exc(), encoding="utf-8")
        raise


def _main(argv: list[str]) -> int:
    """Child entry point: cell JSON on stdin, row JSON written atomically to ``argv[0]``.

    A fresh interpreter does not preload the back-ends (several seconds per cell): the solve's
    memory then includes importing the back-end it uses, and ``mem_measure`` says ``+imports``.
    """
    _quiet_on_interrupt()
    _write_row(run_cell(Cell.from_json(sys.stdin.read()), preload=False), Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
