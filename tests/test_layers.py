"""The house's layers (docs/architecture.md): imports point one way, from the command line down
to the problem data. Every ``import`` in the package — at module level or inside a function — is
checked, so a lazy import cannot go upward either."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fleetplan"

# Lower rank: lower layer. A module may import its own layer and any lower one. The leaf
# utilities (errors, lazy, kernels, highs_pool, bounded_yaml) import nothing of fleetplan's but errors.
RANK = {
    "errors": 0, "lazy": 0, "kernels": 0, "highs_pool": 0, "bounded_yaml": 1,
    "instances": 2, "models": 3, "solvers": 4, "embed": 5, "sim": 5, "plotting": 6, "runs": 7, "planning": 8,
    "benchmarks": 9, "service": 10, "cli": 11, "__main__": 12,
}
# The package root (`import fleetplan`, `from fleetplan import solve`) is the public facade,
# loaded lazily; any layer may use it as it would use the layer it forwards to.
FACADE = {"", "__init__"}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("fleetplan"):
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("fleetplan")]
    return found


def test_imports_point_down():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        here = _layer(".".join(relative.parts))
        if here in FACADE:
            continue
        for line, module in _imports(path):
            there = _layer(module)
            if there in FACADE or there == here:
                continue
            if RANK[there] > RANK[here]:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} ({here}) imports {module} ({there})")
    assert not upward, "imports that point upward:\n" + "\n".join(upward)


def test_every_layer_is_ranked():
    layers = {path.name if path.is_dir() else path.stem for path in PACKAGE.iterdir()
              if (path.is_dir() and (path / "__init__.py").exists()) or path.suffix == ".py"}
    assert layers - FACADE <= set(RANK), sorted(layers - FACADE - set(RANK))
