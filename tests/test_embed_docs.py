"""docs/embedding.md's scheduler loop runs as printed, and the sessions' docstring examples hold."""

import doctest
import importlib
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOOP = ROOT / "docs" / "examples" / "scheduler_loop.py"


def test_the_guide_prints_the_loop_that_runs(capsys, monkeypatch):
    assert LOOP.read_text() in (ROOT / "docs" / "embedding.md").read_text()
    monkeypatch.chdir(ROOT)
    runpy.run_path(str(LOOP), run_name="__main__")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 40 and lines[-1].startswith("round 39:")
    finished = sum(int(line.split(", ")[1].split()[0]) for line in lines)
    assert finished > 0  # jobs do finish: the loop advances them


@pytest.mark.parametrize("module", ["fleetplan.embed", "fleetplan.embed.allocation", "fleetplan.embed.binpack",
                                    "fleetplan.embed.reservation", "fleetplan.embed.gavel", "fleetplan.embed.locking",
                                    "fleetplan.service.store", "fleetplan.service.schemas",
                                    "fleetplan.solvers.warm"])
def test_docstring_examples(module, monkeypatch):
    monkeypatch.chdir(ROOT)
    failures, tried = doctest.testmod(importlib.import_module(module))
    assert failures == 0
    assert tried > 0 or module == "fleetplan.solvers.warm"


def test_the_readme_python_tour_runs(tmp_path, monkeypatch):
    """The README's Python block runs as printed (from the repository root, writing into out/)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("From Python:\n\n```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "out").mkdir()
    exec(compile(block, "README.md", "exec"), {})
    assert (tmp_path / "out" / "plan.json").exists()
