"""Large-neighbourhood search for Tetris: the neighbourhood sub-MIP against the
judge and brute force, the search never worse than its start, its plans through the judge, the
brute-force optimum on tiny instances."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import enumerated_optimum

import fleetplan
from fleetplan.instances.placement import PlacementInstance, PlacementPlan
from fleetplan.instances.placement.evaluate import objective_terms
from fleetplan.models.placement.neighbourhood import Background, neighbourhood_model
from fleetplan.solvers import highs

SETTINGS = [{}, {"split_ml_demand": "largest_region"}, {"overload_form": "combined_high_priority"},
            {"split_ml_demand": "largest_region", "overload_form": "combined_high_priority"}]


def tiny(seed: int, setting: dict | None = None, **params) -> PlacementInstance:
    base = fleetplan.generate("placement", {"regions": 3, "tables": 6, "jobs": 8, **params}, seed=seed)
    data = base.model_dump()
    data.update(setting or {})
    return PlacementInstance.model_validate(data)


def solve_model(model, fixed: np.ndarray | None = None):
    """The model's optimum, or its value with the free tables fixed at ``fixed`` (None: the
    model has no solution there)."""
    lp = model.lp
    if fixed is not None:
        lower, upper = lp.col_lower.copy(), lp.col_upper.copy()
        for t, options in model.x_index.items():
            for r, c in options:
                lower[c] = upper[c] = float(fixed[t] == r)
        lp = dataclasses.replace(lp, col_lower=lower, col_upper=upper)
    h = highs.new_highs(None, 1, 0)
    highs.pass_lp(h, lp, "simplex")
    h.setOptionValue("presolve", "off")
    h.setOptionValue("mip_rel_gap", 1e-10)
    return highs.run(h)


@pytest.mark.parametrize("setting", SETTINGS, ids=["default", "largest", "combined", "both"])
def test_neighbourhood_model_is_the_exact_objective_up_to_a_constant(setting):
    """With every table free and exact levels, the model's objective differs from the judge's by
    the same constant at every placement (the terms no free table touches), and it has no
    solution exactly where the placement breaks a hard row."""
    checked = 0
    for seed in range(6):
        instance = tiny(seed, setting, move_quota_share=None)
        a = instance.arrays()
        model = neighbourhood_model(a, Background.of(a, a.table_home), np.arange(a.num_tables))
        assert model.exact
        rng = np.random.default_rng(seed)
        offsets = []
        for _ in range(8):
            home = rng.integers(0, a.num_regions, a.num_tables)
            outcome = solve_model(model, home)
            verdict = fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, home))
            assert (outcome.objective is not None) == verdict.feasible
            if outcome.objective is not None:
                offsets.append(sum(objective_terms(a, home).values()) - outcome.objective)
        if len(offsets) > 1:
            assert max(offsets) - min(offsets) == pytest.approx(0.0, abs=1e-7)
            checked += 1
    assert checked >= 3


# Two draws a setting by default, two more with the slow set: each setting's model is built and
# checked by default (none of these four draws has every table pinned by the quota).
@pytest.mark.parametrize("seeds", [(0, 1), pytest.param((2, 3), marks=pytest.mark.slow)], ids=["seeds01", "seeds23"])
@pytest.mark.parametrize("setting", SETTINGS, ids=["default", "largest", "combined", "both"])
def test_whole_instance_neighbourhood_finds_the_brute_force_optimum(setting, seeds):
    for seed in seeds:
        instance = tiny(seed, setting)
        a = instance.arrays()
        model = neighbourhood_model(a, Background.of(a, a.table_home), np.arange(a.num_tables))
        if model is None:  # every table pinned by the quota: today's placement is the only one
            continue
        best = enumerated_optimum(instance)  # the same tiny instances as the search's test below
        outcome = solve_model(model)
        home = a.table_home.copy()
        home[model.free] = model.homes(outcome.values)
        got = fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, home))
        assert got.feasible
        assert got.objective == pytest.approx(best, rel=1e-7, abs=1e-9)


def test_a_neighbourhood_with_the_rest_fixed_is_exact_against_enumerating_it():
    """Two tables free out of eight: the sub-MIP's answer is the best of the 3^2 placements of
    those two with the others where they are."""
    for seed in range(6):
        instance = fleetplan.generate("placement", {"regions": 3, "tables": 8, "jobs": 10,
                                                    "move_quota_share": None}, seed=seed)
        a = instance.arrays()
        rng = np.random.default_rng(seed)
        start = rng.integers(0, a.num_regions, a.num_tables)
        if not fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, start)).feasible:
            start = a.table_home.copy()
        free = rng.choice(a.num_tables, size=2, replace=False)
        model = neighbourhood_model(a, Background.of(a, start), free)
        outcome = solve_model(model)
        home = start.copy()
        home[model.free] = model.homes(outcome.values)
        best = np.inf
        for r0 in range(a.num_regions):
            for r1 in range(a.num_regions):
                trial = start.copy()
                trial[free] = (r0, r1)
                verdict = fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, trial))
                if verdict.feasible:
                    best = min(best, verdict.objective)
        got = fleetplan.evaluate(instance, PlacementPlan.from_arrays(instance, home)).objective
        assert got == pytest.approx(best, rel=1e-7, abs=1e-9)


# Four draws by default (0 and 1 are enumerated already for the whole-instance neighbourhood
# above), six more with the slow set.
@pytest.mark.parametrize("seed", [*range(4), *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(4, 10))])
def test_lns_finds_the_brute_force_optimum_on_tiny_instances(seed):
    instance = tiny(seed)
    result = fleetplan.solve(instance, "lns")
    assert result.evaluation.feasible
    assert result.objective == pytest.approx(enumerated_optimum(instance), rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lns_never_worse_than_the_climb_and_passes_the_judge(seed):
    instance = fleetplan.generate("placement", {"regions": 5, "tables": 60, "jobs": 60}, seed=seed)
    climb = fleetplan.solve(instance, "hill-climb")
    result = fleetplan.solve(instance, "lns", patience=8, neighbourhood_tables=12, seed=seed)
    assert result.success and result.evaluation.violations == []
    assert result.objective == fleetplan.evaluate(instance, result.plan).objective
    assert result.objective <= climb.objective + 1e-9
    assert result.model_objective == pytest.approx(result.objective, rel=1e-9, abs=1e-9)
    # The move log adds up: its gains are the fall from today's objective.
    today = fleetplan.evaluate(instance, PlacementPlan.current(instance)).objective
    assert sum(move.gain for move in result.plan.moves) == pytest.approx(today - result.objective, abs=1e-7)


def test_lns_is_deterministic_without_a_time_limit():
    instance = fleetplan.generate("placement", {"regions": 4, "tables": 40, "jobs": 40}, seed=4)
    # search_min_s: the count (patience) stops it, not the machine's speed.
    first = fleetplan.solve(instance, "lns", patience=6, neighbourhood_tables=10, seed=3, search_min_s=600)
    second = fleetplan.solve(instance, "lns", patience=6, neighbourhood_tables=10, seed=3, search_min_s=600)
    assert first.plan.home_array(instance).tolist() == second.plan.home_array(instance).tolist()


def test_lns_refuses_bad_options():
    instance = tiny(0)
    with pytest.raises(fleetplan.InstanceError, match="neighbourhood_tables"):
        fleetplan.solve(instance, "lns", neighbourhood_tables=0)
