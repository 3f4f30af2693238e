"""The project ships under a licence a legal review can accept: LICENSE (Apache-2.0), NOTICE
naming every third-party file the package carries, and CHANGELOG.md, all declared in
pyproject.toml so that the wheel's metadata carries them (tests/test_wheel.py builds the wheel)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import fleetplan

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))


def test_pyproject_declares_the_licence_and_its_files():
    project = _pyproject()["project"]
    assert project["license"] == "Apache-2.0"  # an SPDX expression (PEP 639), not a table
    assert {"LICENSE", "NOTICE"} <= set(project["license-files"])
    # PEP 639's fields need a setuptools that writes Metadata-Version 2.4
    requires = " ".join(_pyproject()["build-system"]["requires"])
    assert int(re.search(r"setuptools>=(\d+)", requires).group(1)) >= 77


def test_the_licence_notice_and_changelog_exist():
    licence = (ROOT / "LICENSE").read_text("utf-8")
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence  # the whole text, not a pointer to it
    assert (ROOT / "NOTICE").is_file()
    assert (ROOT / "CHANGELOG.md").is_file()


def test_notice_names_every_bundled_third_party_data_file():
    notice = (ROOT / "NOTICE").read_text("utf-8")
    assert "fleetplan/data/gavel_throughputs.json" in notice
    assert "MIT License" in notice and "Copyright (c) 2020 Stanford Future Data Systems" in notice
    # a data file that records a licence of its own is someone else's: NOTICE must name it
    for path in sorted((ROOT / "fleetplan" / "data").glob("*.json")):
        data = json.loads(path.read_text("utf-8"))
        if isinstance(data, dict) and "license" in data:
            assert path.relative_to(ROOT).as_posix() in notice, path.name


def test_the_version_has_one_source_and_a_changelog_entry():
    project = _pyproject()
    assert "version" in project["project"]["dynamic"] and "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fleetplan.__version__"}
    changelog = (ROOT / "CHANGELOG.md").read_text("utf-8")
    assert re.search(rf"^## {re.escape(fleetplan.__version__)}\b", changelog, flags=re.M)
    # the changelog travels in the wheel's long description
    readme = project["tool"]["setuptools"]["dynamic"]["readme"]
    assert "CHANGELOG.md" in readme["file"]


def test_the_readme_names_the_licence():
    assert "Apache License 2.0" in (ROOT / "README.md").read_text("utf-8")
