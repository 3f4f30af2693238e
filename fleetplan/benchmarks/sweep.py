"""A sweep: expand a suite into cells, run those not yet done, write the table, finalize gaps.

>>> import tempfile
>>> from fleetplan.benchmarks.suite import parse_suite
>>> suite = parse_suite('''
... name: tiny
... groups:
...   - kind: allocation
...     generator: {jobs: 4}
...     solvers: [{name: max-min-fairness}]
... ''')
>>> out = tempfile.mkdtemp()
>>> rows = run_sweep(suite, out, progress=None)
>>> [(row["label"], row["status"], float(row["gap"]) < 1e-6) for row in rows]
[('max-min-fairness', 'optimal', True)]
"""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, TextIO

from fleetplan.benchmarks.suite import Suite, expand_cells
from fleetplan.instances import InstanceError
from fleetplan.instances.outputs import atomic_write_text
from fleetplan.runs import executors
from fleetplan.runs.cells import DEFAULT_GRACE_S, Cell
from fleetplan.runs.progress import SweepProgress
from fleetplan.runs.results import (
    FORMAT_VERSION,
    RESULTS_FILE,
    ResultsWriter,
    finalize,
    read_results,
    sort_rows,
    write_results,
)

Executor = Literal["local", "dask"]


def run_sweep(suite: Suite, out: str | os.PathLike[str], *, executor: Executor = "local",
              workers: int = 1, address: Any = None, tls: executors.DaskSecurity | None = None,
              insecure: bool = False, resume: bool = False,
              repeats: int | None = None, grace_s: float = DEFAULT_GRACE_S,
              save_plans: bool = False, progress: TextIO | None | Literal["auto"] = "auto",
              live: bool | None = None, command: str | None = None) -> list[dict[str, Any]]:
    """Run ``suite`` into ``out/results.csv`` and return the finalized rows.

    ``resume=True`` keeps the rows already in ``out/results.csv`` and runs only the cells whose
    key (group, instance, seed, label, repeat) is missing. ``progress=None`` is silent.
    ``out/run.json`` records each session: command, executor, machine, package versions, git
    commit. ``address`` (dask) is a scheduler address the caller named, checked by
    :func:`~fleetplan.runs.executors.dask_security`, or a ready ``Client``.

    A sweep that fails before its first row (the scheduler cannot be reached, a bad argument)
    leaves nothing behind: what it created is removed again.
    """
    if executor not in ("local", "dask"):
        raise InstanceError("executor", f"unknown executor '{executor}' (local or dask)")
    if executor == "dask" and not address:
        raise InstanceError("address", "the dask executor needs --address tls://HOST:8786 (or tcp:// on loopback)")
    cells = expand_cells(suite, repeats=repeats)
    client = None
    own_client = False
    if executor == "dask":
        # Connect before touching the disk, so an unreachable scheduler leaves no folder.
        own_client = isinstance(address, str)
        client = executors.connect_dask(address, tls, insecure=insecure) if own_client else address
    folder = Path(out)
    if resume:
        _refuse_foreign_results(folder, suite, cells)
    try:
        created = _create_folder(folder)
    except OSError as error:
        raise InstanceError("-o", f"{folder}: cannot create it ({error.strerror})") from None
    written = 0
    try:
        plan_dir = None
        if save_plans:
            (folder / "plans").mkdir(exist_ok=True)
            plan_dir = str((folder / "plans").resolve())
            cells = expand_cells(suite, repeats=repeats, plan_dir=plan_dir)
        session = {
            "command": command or f"run_sweep({suite.name!r}, executor={executor!r}, workers={workers})",
            "suite": suite.name, "executor": executor, "workers": workers,
            "address": str(address) if executor == "dask" else None, "machine": machine_description(),
            "versions": package_versions(), "git": git_state(),
            "results_format": FORMAT_VERSION,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        wanted = {cell.key for cell in cells}
        with ResultsWriter(folder, resume=resume) as writer:
            done = writer.done_keys & wanted
            todo = [cell for cell in cells if cell.key not in done]
            stream = None if progress is None else (sys.stderr if progress == "auto" else progress)
            display = SweepProgress(len(cells), len(done), stream=stream, live=live)
            with display:
                def on_row(cell: Cell, row: dict[str, Any]) -> None:
                    nonlocal written
                    writer.append(row)
                    written += 1
                    display.finish(cell, row)

                if executor == "local":
                    executors.run_local(todo, on_row, workers=workers, grace_s=grace_s, on_start=display.start)
                else:
                    executors.run_dask(todo, on_row, client=client, grace_s=grace_s, on_start=display.start)
            rows = writer.rows
    except BaseException:
        if written == 0 and not resume:
            _remove_created(folder, created)
        raise
    finally:
        if own_client and client is not None:
            client.close()
    session["cells_run"] = len(todo)
    session["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    _record_session(folder, session, resume)
    write_results(folder, sort_rows(finalize(rows), cells))
    # Read back, so callers see exactly what the file holds (strings, as any CSV reader would).
    return read_results(folder)


def _refuse_foreign_results(folder: Path, suite: Suite, cells: list[Cell]) -> None:
    """``--resume`` finishes one suite's sweep: a folder holding another suite's results (by
    its sessions in run.json, or rows that are no cell of this suite) is refused, not mixed."""
    sessions_file = folder / "run.json"
    if sessions_file.exists():
        try:
            sessions = json.loads(sessions_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            sessions = []
        names = {session.get("suite") for session in sessions if isinstance(session, dict)} - {None}
        if names and names != {suite.name}:
            raise InstanceError("--resume", f"{folder} holds results of suite {', '.join(sorted(map(str, names)))}, "
                                            f"not '{suite.name}': resume it with that suite, or choose another folder")
    if not (folder / RESULTS_FILE).exists():
        return
    known = {(cell.group, cell.instance) for cell in cells}
    foreign = {(row["group"], row["instance"]) for row in read_results(folder)} - known
    if foreign:
        group, instance = sorted(foreign)[0]
        raise InstanceError("--resume", f"{folder / RESULTS_FILE} holds {len(foreign)} instance(s) that are "
                                        f"not in suite '{suite.name}' (e.g. group '{group}', instance "
                                        f"'{instance}'): resume it with its own suite, or choose another folder")


def _create_folder(folder: Path) -> list[Path]:
    """Create ``folder`` and its missing parents; return the ones created (deepest last)."""
    missing = []
    probe = folder
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    folder.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def _remove_created(folder: Path, created: list[Path]) -> None:
    """Undo a sweep that never wrote a row: its empty table, plans folder and new folders."""
    (folder / RESULTS_FILE).unlink(missing_ok=True)
    plans = folder / "plans"
    if plans.is_dir() and not any(plans.iterdir()):
        plans.rmdir()
    for path in reversed(created):
        try:
            path.rmdir()  # only if empty: never remove what someone else put there
        except OSError:
            break


def git_state() -> dict[str, Any] | None:
    """The commit of the fleetplan checkout that ran, and whether its tree had local changes
    (None when fleetplan is not run from a git checkout)."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        # --no-optional-locks: a status only reads; refreshing the index would take its lock, and
        # a sweep stopped by `ulimit -f` or a signal mid-write left index.lock behind in the checkout.
        status = subprocess.run(["git", "--no-optional-locks", "-C", str(root), "status", "--porcelain",
                                 "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": bool(status.strip())}


VERSIONED = ("fleetplan", "highspy", "ortools", "pyomo", "numpy", "scipy", "dask", "distributed")


def package_versions() -> dict[str, str]:
    """Versions of the packages that decide the numbers (those installed)."""
    versions = {}
    for name in VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def machine_description() -> str:
    cpu = platform.processor() or platform.machine()
    return (f"{platform.system()} {platform.release()} {cpu}, {os.cpu_count()} logical CPUs, "
            f"Python {platform.python_version()}")


def _record_session(folder: Path, session: dict[str, Any], resume: bool) -> None:
    path = folder / "run.json"
    sessions: list[Any] = []
    if resume and path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            sessions = loaded if isinstance(loaded, list) else []
        except ValueError:
            sessions = []
    atomic_write_text(path, json.dumps([*sessions, session], indent=1) + "\n")
