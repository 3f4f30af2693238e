"""highspy and ortools must load into one process (docs/architecture.md, "Performance practice",
the known clash: highspy 1.15.x with ortools 9.15 fails with an undefined symbol). Each order
runs in a fresh interpreter, because the first import decides which shared libraries are loaded."""

import subprocess
import sys

import pytest

SOLVE_BOTH = """
import {first}, {second}
import highspy
from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model
h = highspy.Highs(); h.setOptionValue("output_flag", False)
h.addVar(0, 1); h.changeColCost(0, -1); h.run()
assert abs(h.getInfo().objective_function_value + 1) < 1e-9
model = cp_model.CpModel(); x = model.NewIntVar(0, 3, "x"); model.Maximize(x)
solver = cp_model.CpSolver(); assert solver.Solve(model) == cp_model.OPTIMAL and solver.Value(x) == 3
glop = pywraplp.Solver.CreateSolver("GLOP"); assert glop is not None
print("ok")
"""


@pytest.mark.parametrize("first,second", [("highspy", "ortools"), ("ortools", "highspy")])
def test_highspy_and_ortools_share_a_process(first, second):
    code = SOLVE_BOTH.format(first=first, second=second)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "ok"


def test_list_solvers_is_a_function_and_the_old_call_warns():
    import fleetplan
    import fleetplan.solvers.highs as highs_module  # the package is still a package

    assert highs_module.__name__ == "fleetplan.solvers.highs"
    names = {spec.name for spec in fleetplan.list_solvers("allocation")}
    assert "max-min-fairness" in names
    assert {spec.kind for spec in fleetplan.list_solvers()} >= {"allocation", "placement"}
    with pytest.warns(DeprecationWarning, match="list_solvers"):
        old = fleetplan.solvers("allocation")
    assert [spec.name for spec in old] == [spec.name for spec in fleetplan.list_solvers("allocation")]


# `import fleetplan` and building the CLI's parser (what `--help` costs) load no back-end:
# the heavy libraries load when a solver, plot or report that needs them runs.
LOADED_HEAVY = """
import sys
import fleetplan
import fleetplan.cli
fleetplan.cli.build_parser()
fleetplan.list_solvers()
from fleetplan.lazy import HEAVY_MODULES
print(",".join(sorted({name.split(".")[0] for name in sys.modules} & set(HEAVY_MODULES))))
"""


def test_import_fleetplan_loads_no_backend():
    run = subprocess.run([sys.executable, "-c", LOADED_HEAVY], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "", f"loaded at import: {run.stdout.strip()}"


def test_lazy_module_loads_on_first_use():
    code = ("import sys\nfrom fleetplan.lazy import lazy_module, lazy_attribute\n"
            "json_module = lazy_module('json')\ndumps = lazy_attribute('json', 'dumps')\n"
            "sys.modules.pop('json', None)\nassert 'json' not in sys.modules\n"
            "assert dumps([1]) == '[1]' and json_module.loads('2') == 2\nprint('ok')")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "ok", run.stderr
