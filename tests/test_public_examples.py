"""Every public function of ``fleetplan`` carries a runnable example (the doctest pass of
``make test`` runs them: pyproject's --doctest-modules)."""

import inspect

import pytest

import fleetplan


@pytest.mark.parametrize("name", sorted(name for name in fleetplan.__all__
                                        if inspect.isfunction(getattr(fleetplan, name))))
def test_a_public_function_shows_how_it_is_called(name):
    assert ">>>" in (inspect.getdoc(getattr(fleetplan, name)) or ""), f"fleetplan.{name} has no example"
