"""The solver catalog: every registered solver's kind, name, promise and options, as data.

``fleetplan solvers`` (the list, one solver's options, ``--json``) and ``solve --solver NAME
--help`` read ``fleetplan/data/solver-catalog.json`` instead of importing every solver module
and its kinds (about 1 s of start-up): the same trade as a package's entry points. The file is
generated from the registry itself, and a test keeps it equal to what the registry says now::

    python -m fleetplan.cli.catalog            # rewrite the catalog after changing a solver
    python -m fleetplan.cli.catalog --check    # exit 1 if it is stale

A solver registered at run time by user code is not in the file; :func:`entries` with
``live=True`` asks the registry instead.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

CATALOG_FILE = "solver-catalog.json"


def entry(spec: Any) -> dict[str, Any]:
    """One solver as plain data (a :class:`fleetplan.solvers.base.SolverSpec` in, JSON out)."""
    return spec.to_dict()


def build() -> list[dict[str, Any]]:
    """The catalog from the live registry (imports every solver module)."""
    from fleetplan.solvers import solvers

    return [entry(spec) for spec in solvers()]


def _catalog_path() -> Path:
    return Path(str(resources.files("fleetplan") / "data" / CATALOG_FILE))


def render() -> str:
    """The catalog file's text for the registry as it is now."""
    return json.dumps(build(), indent=1, sort_keys=True) + "\n"


def entries(kind: str | None = None, *, live: bool = False) -> list[dict[str, Any]]:
    """The solvers of ``kind`` (all when None), from the catalog file (or the registry when
    ``live`` or when the file is missing)."""
    path = _catalog_path()
    if live or not path.is_file():
        catalog = build()
    else:
        catalog = json.loads(path.read_text(encoding="utf-8"))
    return [item for item in catalog if kind is None or item["kind"] == kind]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    path = _catalog_path()
    if args == ["--check"]:
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if current != text:
            print(f"{path} is stale: run `python -m fleetplan.cli.catalog`", file=sys.stderr)
            return 1
        return 0
    if args:
        print("usage: python -m fleetplan.cli.catalog [--check]", file=sys.stderr)
        return 2
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path} ({len(json.loads(text))} solvers)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
