"""Deferred imports of heavy back-ends, so ``import fleetplan`` and ``fleetplan --help`` answer
at once (Pyomo, OR-Tools, HiGHS and SciPy cost seconds together; most commands need none).

A leaf module below every layer: it imports nothing from fleetplan.

``pyo = lazy_module("pyomo.environ")`` binds a stand-in whose first attribute access imports the
real module; ``Highs = lazy_attribute("pyomo.contrib.appsi.solvers", "Highs")`` does the same for
one name of a module (called, or read for its attributes). Unlike ``importlib.util.LazyLoader``
this imports no parent package up front (``pyomo/__init__`` alone costs a third of a second).

Example
-------
>>> math_module = lazy_module("math")
>>> math_module.sqrt(16.0)
4.0
"""

from __future__ import annotations

import importlib
import sys
from typing import Any


class _LazyModule:
    __slots__ = ("_name", "_module")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: Any = None

    def _load(self) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._load(), attribute)

    def __repr__(self) -> str:
        state = "loaded" if self._module is not None else "not loaded yet"
        return f"<lazy module '{self._name}' ({state})>"


class _LazyAttribute:
    __slots__ = ("_module", "_attribute", "_value")

    def __init__(self, module: str, attribute: str) -> None:
        self._module = module
        self._attribute = attribute
        self._value: Any = None

    def _load(self) -> Any:
        if self._value is None:
            self._value = getattr(importlib.import_module(self._module), self._attribute)
        return self._value

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._load(), attribute)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._load()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<lazy {self._module}.{self._attribute}>"


def not_loaded(*modules: str) -> bool:
    """Whether any of ``modules`` has not been imported yet in this process (its first import
    still has to be paid: what a solver's clock keeps back before it loads a back-end)."""
    return any(name not in sys.modules for name in modules)


def lazy_module(name: str) -> Any:
    """A stand-in for module ``name`` that imports it on first attribute access."""
    return _LazyModule(name)


def lazy_attribute(module: str, attribute: str) -> Any:
    """A stand-in for ``from module import attribute``, imported on first use (call or attribute)."""
    return _LazyAttribute(module, attribute)


# The modules ``import fleetplan`` must not load (tests/test_imports.py checks it).
HEAVY_MODULES = ("pyomo", "ortools", "highspy", "scipy", "pandas", "pyarrow", "matplotlib", "dask")
