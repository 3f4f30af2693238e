"""Start-up: `fleetplan --help` builds its parser without numpy, pydantic or any
kind, and the light copies the parser reads agree with the modules they stand in for."""

import subprocess
import sys

import fleetplan
from fleetplan import errors
from fleetplan.benchmarks import suite
from fleetplan.cli.commands import bench as command
from fleetplan.runs import cells


def test_help_loads_no_numpy_pydantic_or_kind():
    # nor the service's web stack (uvicorn and its fast path, httptools and uvloop; FastAPI):
    # `fleetplan serve` imports it when it runs
    code = ("import sys\nfrom fleetplan.cli import build_parser\nparser = build_parser()\n"
            "parser.format_help()\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'pydantic', 'yaml', 'uvicorn', "
            "'uvloop', 'httptools', 'fastapi', 'starlette')"
            " or m.startswith('fleetplan.instances') or m.startswith('fleetplan.solvers'))\n"
            "print(heavy)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_light_copies_agree_with_the_modules():
    assert list(errors.KIND_NAMES) == sorted(fleetplan.KINDS)
    assert command.DEFAULT_GRACE_S == cells.DEFAULT_GRACE_S
    assert command.bundled_suites() == suite.bundled_suites()
    assert fleetplan.InstanceError is errors.InstanceError


def test_help_lists_every_command():
    run = subprocess.run([sys.executable, "-m", "fleetplan", "--help"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    for name in ("generate", "validate", "solve", "evaluate", "solvers", "bench", "import", "export", "plot"):
        assert name in run.stdout
