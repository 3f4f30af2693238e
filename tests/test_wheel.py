"""The wheel as a user installs it: built from a clean clone of this repository's HEAD (only
committed files), installed into a fresh virtual environment with its dependencies from the
package index, and run from a folder outside any source tree. It must carry the licence files in
its metadata, the compiled kernels (which must load) and every data file of the package.

Slow (a compile and a full install: a few minutes, most of it downloading the dependencies the
first time); needs git, a C compiler and the package index: `make test-slow`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import fleetplan

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ("fleetplan.instances.allocation.job_kernels", "fleetplan.solvers.allocation.ipm_kernels",
           "fleetplan.solvers.allocation.vertex_kernels")

pytestmark = pytest.mark.slow

# Run inside the fresh environment: where fleetplan and its kernels load from, and the version.
PROBE = f"""
import json, fleetplan
from fleetplan import kernels
loaded = {{name: kernels.load(name) for name in {KERNELS!r}}}
print(json.dumps({{"package": fleetplan.__file__, "version": fleetplan.__version__,
                  "kernels": {{name: module and module.__file__ for name, module in loaded.items()}}}}))
"""


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    run = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, f"{' '.join(map(str, command))} exited {run.returncode}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


def _clean_environment() -> dict[str, str]:
    """This process's environment without anything that would put a source tree on the path."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "FLEETPLAN_KERNELS")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _packaged_files(source: Path) -> list[str]:
    """Every committed file of the package the wheel must hold: all of fleetplan/ but the Cython
    sources (the wheel holds what they compile to)."""
    listed = subprocess.run(["git", "ls-files", "fleetplan"], cwd=source, capture_output=True, text=True,
                            check=True).stdout.split()
    return sorted(path for path in listed if not path.endswith(".pyx"))


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to clone the repository")
def test_the_wheel_installs_and_runs_outside_the_source_tree(tmp_path):
    env = _clean_environment()
    source, dist, venv, elsewhere = (tmp_path / name for name in ("source", "dist", "venv", "elsewhere"))
    elsewhere.mkdir()
    _run(["git", "clone", "--quiet", str(ROOT), str(source)], tmp_path, env, 120)
    assert not list(source.rglob("*.so")), "a clean clone holds no compiled kernels"

    # pip builds in an isolated environment with pyproject.toml's build requirements
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist), str(source)],
         tmp_path, env, 1200)
    (wheel,) = dist.glob("fleetplan-*.whl")
    assert wheel.name.startswith(f"fleetplan-{fleetplan.__version__}-")

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"fleetplan-{fleetplan.__version__}.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode("utf-8")
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata and "License-File: NOTICE" in metadata
    assert {f"{info}/licenses/LICENSE", f"{info}/licenses/NOTICE"} <= names
    assert "# Changelog" in metadata  # the changelog is part of the long description
    assert not [path for path in _packaged_files(source) if path not in names]
    for name in KERNELS:
        assert [n for n in names if n.startswith(name.replace(".", "/") + ".") and n.endswith((".so", ".pyd"))], name

    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env, 300)
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], tmp_path, env, 1800)

    probe = json.loads(_run([str(python), "-c", PROBE], elsewhere, env, 120).stdout)
    site = Path(probe["package"]).resolve().parent
    assert site.is_relative_to(venv.resolve()), f"fleetplan loaded from {probe['package']}"
    assert probe["version"] == fleetplan.__version__
    for name, path in probe["kernels"].items():
        assert path is not None, f"{name} did not load from the wheel (the numpy code would run)"
        assert Path(path).resolve().is_relative_to(site)
    missing = [path for path in _packaged_files(source) if not (site.parent / path).is_file()]
    assert missing == []

    command = venv / "bin" / "fleetplan"
    helped = _run([str(command), "--help"], elsewhere, env, 120)
    assert "demo" in helped.stdout and "solve" in helped.stdout
    version = _run([str(command), "--version"], elsewhere, env, 120)
    assert version.stdout.strip() == f"fleetplan {fleetplan.__version__}"
    demo = _run([str(command), "demo"], elsewhere, env, 600)
    for kind in ("allocation", "placement", "reservation", "binpack", "sizing"):
        assert kind in demo.stdout, kind
    assert list(elsewhere.iterdir()) == [], "the demo writes nothing into the folder it runs from"
