"""Signals: Ctrl-C and SIGTERM end the command with one line and
130 / 143 at any moment fleetplan's code runs, start-up included; during ``bench`` the children
are stopped first, then their folders removed, within seconds and without a child's traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fleetplan

EXAMPLES = Path(fleetplan.__file__).parent / "examples"
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
LINES = {signal.SIGINT: "fleetplan: interrupted", signal.SIGTERM: "fleetplan: terminated"}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("moment", ["after the entry module", "while importing the application"])
def test_a_signal_during_start_up_is_one_line(signum, moment):
    """The console script's process (argv[0] 'fleetplan') gets the handlers with the entry
    module's first lines; a signal then, or while the rest loads, is one line and the code."""
    heavy = "import fleetplan.cli.app, fleetplan.instances, fleetplan.solvers" if moment.startswith("while") else ""
    code = ("import os, signal, sys, time\nsys.argv[0] = 'fleetplan'\nimport fleetplan.cli.entry\n"
            f"os.kill(os.getpid(), {int(signum)})\n{heavy}\ntime.sleep(5)\nprint('not stopped')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == CODES[signum], run.stderr
    assert run.stderr.strip() == LINES[signum]
    assert "not stopped" not in run.stdout


def test_a_library_importing_the_entry_module_keeps_its_handlers():
    code = ("import signal, sys\nsys.argv[0] = 'my-program'\nimport fleetplan.cli.entry\n"
            "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, "
            "signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["True", "True"], run.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("delay_s", [0.3, 0.6])
def test_a_signal_early_in_a_real_command_is_one_line(signum, delay_s, tmp_path):
    """`python -m fleetplan solve`, signalled while it starts: one line and 130 / 143 (or 0 if
    it had already finished), never a traceback."""
    command = [sys.executable, "-m", "fleetplan", "solve", str(EXAMPLES / "allocation-64-jobs.json"),
               "-o", str(tmp_path / "plan.json")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(delay_s)
    process.send_signal(signum)
    error = process.communicate(timeout=60)[1]
    assert "Traceback" not in error
    assert process.returncode in (CODES[signum], 0), error
    if process.returncode != 0:
        assert error.strip().splitlines()[-1] == LINES[signum]
        assert not list(tmp_path.iterdir())  # no plan, no temporary


def _bench_interrupted(signum: int, tmp_path: Path) -> tuple[int, str, float, int]:
    """Start `bench quick --workers 2` in a session of its own, signal it once cells run (the
    whole group for SIGINT, as a terminal's Ctrl-C; the parent for SIGTERM, as `kill`)."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # the cells' folders land here
    process = subprocess.Popen([sys.executable, "-m", "fleetplan", "bench", "quick", "--workers", "2",
                                "-o", str(tmp_path / "results")], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    lines: list[str] = []
    assert process.stderr is not None
    for line in process.stderr:  # wait for a few finished cells: children are running now
        lines.append(line)
        if line.startswith("[3/"):
            break
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    signalled = time.monotonic()
    rest = process.communicate(timeout=60)[1]
    return process.returncode, "".join(lines) + rest, time.monotonic() - signalled, process.pid


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_bench_stops_its_children_then_cleans_up(signum, tmp_path):
    code, stderr, seconds, session = _bench_interrupted(signum, tmp_path)
    assert code == CODES[signum], stderr
    assert "Traceback" not in stderr and "FileNotFoundError" not in stderr, stderr
    assert stderr.strip().splitlines()[-1] == LINES[signum]
    # Within 2 s on a quiet machine; the margin is for a loaded one (the issue saw 34-42 s).
    assert seconds < 10, seconds
    time.sleep(0.5)
    leftovers = [path.name for path in tmp_path.iterdir() if path.name.startswith("fleetplan-cell-")]
    assert leftovers == []
    # Processes of the bench's session still alive (zombies waiting for init to reap them are
    # gone already: their parent exited).
    states = subprocess.run(["ps", "-s", str(session), "-o", "stat="], capture_output=True, text=True)
    assert [state for state in states.stdout.split() if not state.startswith("Z")] == []


@pytest.mark.parametrize("launch", ["forkserver", "subprocess"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_cell_child_ends_quietly_on_a_signal(launch, signum, capfd):
    """A terminal's Ctrl-C reaches the cell children too: each ends at once with 130 / 143 and
    no traceback (one printed 29 lines while the parent removed its folder)."""
    from fleetplan.runs.cells import Cell, CellProcess

    cell = Cell(suite="t", group="g", kind="placement", instance="i",
                params={"tables": 3000, "jobs": 3000, "regions": 8}, seed=0, solver="cpsat",
                label="cpsat", options={}, repeat=0, time_limit=30.0)
    process = CellProcess(cell, launch=launch).start()
    time.sleep(1.5)  # the child is generating or solving
    os.kill(process._process.pid, signum)
    started = time.monotonic()
    row = process.wait()
    assert time.monotonic() - started < 5
    assert f"exited with code {CODES[signum]}" in row["message"] or f"code -{int(signum)}" in row["message"], row
    assert "Traceback" not in capfd.readouterr().err


# --- the end of a command: files and exit code agree -------------------------------------------

def _run_console(tmp_path: Path, patch: str, *arguments: str, command: list[str] | None = None
                 ) -> subprocess.CompletedProcess:
    """The console script's process (argv[0] 'fleetplan') running ``command`` (default: `solve`
    on the 64-job example), with ``patch`` (Python) applied after the toolkit loads: a
    deterministic moment to signal."""
    plan = tmp_path / "plan.json"
    argv = ["fleetplan", *(command or ["solve", str(EXAMPLES / "allocation-64-jobs.json"), "-o", str(plan)]),
            *arguments]
    code = ("import os, signal, sys, time\n"
            f"sys.argv = {argv!r}\n"
            "import fleetplan.cli.entry as entry\nimport fleetplan.cli.app as app\nimport fleetplan.cli.common as common\n"
            f"{patch}\nentry.run()\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


SIGNAL_SELF = "os.kill(os.getpid(), signal.SIGTERM)"


def test_a_signal_while_the_report_prints_leaves_no_plan(tmp_path):
    """The report comes before the write: a SIGTERM during it is 143 and no file."""
    patch = (f"original = app.render_result\n"
             f"def render_result(*a, **k):\n    {SIGNAL_SELF}\n    return original(*a, **k)\n"
             "app.render_result = render_result")
    run = _run_console(tmp_path, patch)
    assert run.returncode == 143, run.stderr
    assert run.stderr.strip() == "fleetplan: terminated"
    assert list(tmp_path.iterdir()) == []


def test_an_interruption_python_cannot_pass_on_is_sent_again(tmp_path):
    """A Ctrl-C that lands in an import lock's weakref callback (or a ``__del__``) was printed
    as "Exception ignored ... Traceback" and lost (seen once in CI). It is sent again: one
    line, 130, no plan."""
    patch = ("original = app.render_result\n"
             "class Late:\n    def __del__(self):\n        raise KeyboardInterrupt\n"
             "def render_result(*a, **k):\n    Late()\n    time.sleep(0.5)\n    return original(*a, **k)\n"
             "app.render_result = render_result")
    run = _run_console(tmp_path, patch)
    assert run.returncode == 130, run.stderr
    assert run.stderr.strip() == "fleetplan: interrupted"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("json_output", [False, True], ids=["report", "json"])
def test_a_signal_once_the_plan_is_written_ends_with_its_code(tmp_path, json_output):
    """Once the plan is in place (the write settles the exit code), a SIGTERM is noted and the
    command ends with 0 and its whole report: it used to say 'terminated' and 143 beside the
    plan it had written, while the report printed after the write."""
    patch = ("original = common.settle\n"
             f"def settle(code):\n    original(code)\n    {SIGNAL_SELF}\n"
             "common.settle = settle")
    run = _run_console(tmp_path, patch, *(["--json"] if json_output else []))
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert (tmp_path / "plan.json").is_file()
    if json_output:
        assert json.loads(run.stdout)["status"] in ("optimal", "feasible")
    else:
        assert "wrote plan to" in run.stdout


def test_generate_settles_once_its_instance_is_written(tmp_path):
    patch = ("original = common.settle\n"
             f"def settle(code):\n    original(code)\n    {SIGNAL_SELF}\n"
             "common.settle = settle")
    output = tmp_path / "instance.json"
    run = _run_console(tmp_path, patch, command=["generate", "allocation", "--jobs", "8", "-o", str(output)])
    assert run.returncode == 0, run.stderr
    assert "wrote allocation instance" in run.stdout and output.is_file()


def test_a_signal_during_teardown_keeps_the_code_and_a_second_ends_at_once(tmp_path):
    """Python's teardown reset the handlers to the default before freeing the modules, so a
    SIGTERM there killed the process silently (-15) after the plan was written. Now the at-exit
    functions run under the noting handler: one signal, the code stays 0; two, the process ends
    at once (the rest of the at-exit function never runs)."""
    patch = ("import atexit\n"
             f"def late():\n    {SIGNAL_SELF}\n    time.sleep(0.2)\n    {SIGNAL_SELF}\n    time.sleep(0.2)\n"
             "    print('not cut', flush=True)\n"
             "atexit.register(late)")
    run = _run_console(tmp_path, patch)
    assert run.returncode == 0, run.stderr
    assert "not cut" not in run.stdout and "wrote plan to" in run.stdout
    assert run.stderr == ""
    # And an object freed at teardown no longer sees one: the modules are not torn down.
    patch = ("class Late:\n    def __del__(self):\n        " + SIGNAL_SELF + "\n        time.sleep(0.5)\n"
             "app.late = Late()")
    run = _run_console(tmp_path, patch)
    assert run.returncode == 0, run.stderr


def test_a_signal_inside_an_extension_modules_initialisation_is_the_signal():
    """A handler raising while an extension module initialises reaches Python as ImportError
    caused by it: taken for a missing library (a compiled kernel silently replaced, the signal
    lost) or reported as an internal error, exit 1. It is raised again as the signal."""
    from fleetplan.errors import raise_interruption

    class Terminated(BaseException):
        pass

    for stop in (KeyboardInterrupt(), Terminated()):
        error = ImportError("initialization failed")
        error.__cause__ = stop
        with pytest.raises(type(stop)):
            raise_interruption(error)
    plain = ImportError("No module named 'nothing'")
    plain.__context__ = ValueError("unrelated")
    assert raise_interruption(plain) is None


def test_a_kernel_import_cut_by_a_signal_does_not_fall_back(monkeypatch):
    from fleetplan import kernels

    def cut(name):
        raise ImportError("initialization failed") from KeyboardInterrupt()

    monkeypatch.setattr(kernels, "enabled", lambda: True)
    monkeypatch.setattr(kernels.importlib, "import_module", cut)
    with pytest.raises(KeyboardInterrupt):
        kernels.load("fleetplan.anything")
