"""The solver catalog file answers `fleetplan solvers` without importing a solver; it must say
exactly what the live registry says (regenerate with `python -m fleetplan.cli.catalog`)."""

from __future__ import annotations

import json
import subprocess
import sys

from fleetplan.cli import catalog as solver_catalog
from fleetplan.cli import main


def test_the_catalog_file_equals_the_live_registry():
    assert solver_catalog.main(["--check"]) == 0, "run `python -m fleetplan.cli.catalog`"


def test_listing_and_options_come_from_the_catalog(capsys):
    assert main(["solvers", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == solver_catalog.entries(live=True)
    assert main(["solvers", "placement/hill-climb", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["name"] == "hill-climb" and one["kind"] == "placement" and one["options"]
    assert main(["solvers", "binpack", "--json"]) == 0
    assert {entry["kind"] for entry in json.loads(capsys.readouterr().out)} == {"binpack"}


def test_fleetplan_solvers_imports_no_solver_module():
    code = ("import sys; from fleetplan.cli import main; main(['solvers']); "
            "print(sorted(m for m in sys.modules if m.startswith('fleetplan.solvers') "
            "or m.startswith('fleetplan.instances.') or m in ('numpy', 'pydantic')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_an_unknown_solver_is_one_line_and_exit_2(capsys):
    assert main(["solvers", "no-such-solver"]) == 2
    assert "neither a problem kind" in capsys.readouterr().err
