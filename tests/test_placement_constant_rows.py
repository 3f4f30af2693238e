"""Rows of the placement MIP (MAST Figure 4) that pinned tables and decided jobs make constant
are skipped when true and reported when false, never handed to Pyomo."""

from __future__ import annotations

import pyomo.environ as pyo

import fleetplan
from fleetplan.models.placement.mip import _rows, _Ticker

# The issue's instance: its home-training row resolves to a constant.
CONSTANT_HOME_TRAINING = {"regions": 5, "tables": 11, "jobs": 14, "gpu_types": 3, "applications": 3,
                          "ml_share": 0.2, "first_time_share": 0.7, "popularity_skew": 1.2, "load": 0.7,
                          "storage_headroom": 3.0, "move_quota_share": 0.2, "dr_policy": "none"}


def test_the_issues_instance_solves_with_both_exact_solvers():
    instance = fleetplan.generate("placement", CONSTANT_HOME_TRAINING, seed=420)
    for solver in ("mip-highs", "cpsat"):
        result = fleetplan.solve(instance, solver, time_limit=30.0)
        assert result.status in ("optimal", "feasible"), (solver, result.message)
        assert result.evaluation.violations == []
        assert result.objective <= fleetplan.solve(instance, "keep").objective + 1e-9


def test_a_constant_row_is_skipped_and_a_false_one_reported():
    model = pyo.ConcreteModel()
    model.constant_violations = []
    model.build_clock = _Ticker(None)
    model.x = pyo.Var([0, 1], bounds=(0, 1))
    rows = {0: 0.0 <= 1.0, 1: 2.0 <= 1.0, 2: None}
    model.rows = pyo.Constraint([0, 1, 2], rule=_rows(
        model, "rows", lambda m, i: rows[i] if rows[i] is not None else m.x[0] + m.x[1] <= 1))
    assert list(model.rows.keys()) == [2]
    assert model.constant_violations == ["rows[1]"]
    model.scalar = pyo.Constraint(rule=_rows(model, "scalar", lambda m: 1.0 >= 2.0))
    assert model.constant_violations == ["rows[1]", "scalar"]
