"""Ctrl-C during a CP-SAT solve ends the command with our one line and exit 130:
CP-SAT's own SIGINT handler is off and the solve runs where a signal can stop it."""

import subprocess
import sys

import pytest

SCRIPT = """
import os, signal, sys, threading, time
from ortools.sat.python import cp_model
from fleetplan.solvers.cpsat_run import solve_interruptibly
model = cp_model.CpModel()
xs = [model.new_int_var(0, 100, f"x{i}") for i in range(60)]
for i in range(59):
    model.add(xs[i] + xs[i + 1] <= 100 + i % 7)
model.add_all_different(xs)
model.maximize(sum((i % 13 + 1) * x for i, x in enumerate(xs)))
solver = cp_model.CpSolver()
solver.parameters.max_time_in_seconds = 60
solver.parameters.num_workers = 1
class Terminated(BaseException):
    pass
def terminated(*_):
    raise Terminated()
signal.signal(signal.SIGTERM, terminated)
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIG{name})).start()
started = time.time()
try:
    solve_interruptibly(solver, model)
    print("finished")
except (KeyboardInterrupt, Terminated) as error:
    print(type(error).__name__, round(time.time() - started))
"""


@pytest.mark.parametrize("name, expected", [("INT", "KeyboardInterrupt"), ("TERM", "Terminated")])
def test_a_signal_stops_the_solve_and_raises_in_the_main_thread(name, expected):
    run = subprocess.run([sys.executable, "-c", SCRIPT.replace("{name}", name)], capture_output=True,
                         text=True, timeout=120)
    # Exit 0: no abort at exit ("terminate called without an active exception"), no signal death.
    assert run.returncode == 0, run.stderr
    word, seconds = run.stdout.split()
    assert word == expected and int(seconds) < 30, run.stdout


CLI_SCRIPT = """
import os, signal, sys, threading
import fleetplan.solvers.placement.exact as exact
inner = exact.solve_interruptibly
def with_ctrl_c(solver, model, callback=None):
    # Ctrl-C one second into the CP-SAT search (the command's time limit is minutes away).
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    return inner(solver, model, callback)
exact.solve_interruptibly = with_ctrl_c
from fleetplan.cli.entry import main
sys.exit(main(sys.argv[1:]))
"""


def test_cli_ctrl_c_during_cpsat_is_one_line_and_exit_130(tmp_path):
    instance = tmp_path / "p.json"
    subprocess.run([sys.executable, "-m", "fleetplan", "generate", "placement", "--regions", "6", "--tables", "150",
                    "--jobs", "150", "--seed", "3", "-o", str(instance)], check=True, capture_output=True)
    plan = tmp_path / "plan.json"
    run = subprocess.run([sys.executable, "-c", CLI_SCRIPT, "solve", str(instance), "--solver", "cpsat",
                          "--time-limit", "300", "-o", str(plan)], capture_output=True, text=True, timeout=280)
    assert run.returncode == 130, run.stderr
    assert run.stderr.strip().splitlines() == ["fleetplan: interrupted"]
    assert not plan.exists() and list(tmp_path.iterdir()) == [instance]
