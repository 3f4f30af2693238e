"""The valid inequalities of the reservation MIP (fleetplan.models.reservation.cuts; MAST §2):
every integer point of the model keeps them (checked on every assignment of tiny regions), and
they raise the LP bound without passing the optimum."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fleetplan.instances import generate, instance_from_data
from fleetplan.instances.reservation import FREE
from fleetplan.models.reservation import build, counts_from_assignment, full_solution, satisfies
from fleetplan.models.reservation.cuts import valid_inequalities, with_cuts
from tests.test_reservation_exact import random_tiny


def _tiny(seed: int) -> dict:
    """random_tiny with both reservations ML half the time and any guarantee level for b, and
    requests up to 5 RRU, so that the covers and tangents bind."""
    data = random_tiny(seed)
    rng = np.random.default_rng(1000 + seed)
    a, b = data["reservations"]
    if rng.random() < 0.5:
        a["workload"] = "ml"
    b["guarantee"] = str(rng.choice(["fault_domain", "datacenter", "none"]))
    for spec in (a, b):
        spec["capacity_rru"] = float(rng.integers(1, 6))
    return data


def _tiny_model(seed):
    arrays = instance_from_data(_tiny(seed)).arrays()
    return arrays, build(arrays)


def _with_lp(model, lp):
    """The model with another LP (its rows checked by ``satisfies``)."""
    return type(model)(**{**model.__dict__, "lp": lp})


def _integer_points(model, arrays):
    """Every assignment of the region's available servers (FREE or a reservation each) that the
    model accepts, as (the assignment, the model's columns with the least auxiliaries)."""
    rows = np.flatnonzero(arrays.available)
    assignment = arrays.server_current.copy()
    for choice in itertools.product(range(FREE, arrays.num_reservations), repeat=rows.size):
        assignment[rows] = choice
        x = counts_from_assignment(model, arrays, assignment)
        if x is None:
            continue
        values = full_solution(model, x)
        if satisfies(model, values):
            yield choice, values


@pytest.mark.parametrize("seed", range(30))
def test_every_integer_point_keeps_the_cuts(seed):
    arrays, model = _tiny_model(seed)
    strengthened = _with_lp(model, with_cuts(model, arrays))
    feasible = 0
    # The least auxiliaries are the hardest case for the cuts (a larger y only helps them).
    for choice, values in _integer_points(model, arrays):
        feasible += 1
        assert satisfies(strengthened, values), (seed, choice)
    assert feasible or not satisfies(model, full_solution(model, np.zeros(model.num_keys)))


def _lp_bound(lp) -> float:
    from fleetplan.solvers import highs as runner

    highs = runner.new_highs(60, 1, 0)
    runner.pass_lp(highs, lp, "simplex")
    highs.setOptionValue("solve_relaxation", True)
    highs.run()
    return float(highs.getInfo().objective_function_value)


def test_cuts_raise_the_lp_bound_and_keep_below_the_optimum():
    import fleetplan

    instance = generate("reservation", {"servers": 2000, "reservations": 15, "datacenters": 4}, seed=1)
    arrays = instance.arrays()
    model = build(arrays)
    found = valid_inequalities(model, arrays)
    assert found is not None and found[0].shape[0] > 0
    plain, cut = _lp_bound(model.lp) + model.constant, _lp_bound(with_cuts(model, arrays)) + model.constant
    assert cut > plain + 1.0
    exact = fleetplan.solve(instance, "mip-highs", time_limit=60, warm_start="none")
    assert exact.status == "optimal"
    assert cut <= exact.objective + 1e-6


def test_no_binaries_no_cuts():
    data = random_tiny(0)
    for spec in data["reservations"]:
        spec["workload"] = "general"
    instance = instance_from_data(data)
    model = build(instance.arrays())
    assert valid_inequalities(model, instance.arrays()) is None
    assert with_cuts(model, instance.arrays()) is model.lp


def _summed(model, arrays, relaxed, values: np.ndarray) -> np.ndarray:
    """The relaxation's point for the model's point ``values``: counts and moves summed over
    the fault domains of each datacenter, T, z, y and e as they are."""
    groups = model.groups
    code = (model.key_res * arrays.num_types + groups.type[model.key_group]) * arrays.num_dcs \
        + groups.dc[model.key_group]
    _, of_key = np.unique(code, return_inverse=True)
    names, point = model.lp.names, np.zeros(relaxed.num_cols)
    x = np.bincount(of_key, weights=values[names["x"]], minlength=relaxed.names["x"].stop)
    point[relaxed.names["x"]] = x
    moves = np.zeros(x.size)
    np.add.at(moves, of_key[model.key_c0 > 0], values[names["m"]])
    c0 = np.bincount(of_key, weights=model.key_c0, minlength=x.size)
    point[relaxed.names["m"]] = moves[c0 > 0]
    for name in ("T", "z", "y", "e"):
        point[relaxed.names[name]] = values[names[name]]
    return point


@pytest.mark.parametrize("seed", range(30))
def test_datacenter_relaxation_keeps_every_integer_point(seed):
    from fleetplan.models.reservation.relaxation import datacenter_relaxation

    arrays, model = _tiny_model(seed)
    relaxed = datacenter_relaxation(model, arrays)
    as_model = _with_lp(model, relaxed)
    for choice, values in _integer_points(model, arrays):
        point = _summed(model, arrays, relaxed, values)
        assert satisfies(as_model, point), (seed, choice)
        assert relaxed.cost @ point == pytest.approx(model.lp.cost @ values, abs=1e-9)


def test_datacenter_relaxation_bounds_the_model_lp():
    from fleetplan.models.reservation.relaxation import datacenter_relaxation

    instance = generate("reservation", {"servers": 2000, "reservations": 15, "datacenters": 4}, seed=1)
    arrays = instance.arrays()
    model = build(arrays)
    relaxed = datacenter_relaxation(model, arrays)
    assert relaxed.num_cols < model.lp.num_cols
    assert _lp_bound(relaxed) <= _lp_bound(with_cuts(model, arrays)) + 1e-6
