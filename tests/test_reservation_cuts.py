"""The valid inequalities of the reservation MIP (fleetplan.models.reservation.cuts; MAST §2):
every integer point of the model keeps them (checked on every assignment of tiny regions), and
they raise the LP bound without passing the optimum."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fleetplan.instances import generate, instance_from_data
from fleetplan.instances.reservation import FREE
from fleetplan.models.reservation import build, counts_from_assignment, full_solution
from fleetplan.models.reservation.cuts import valid_inequalities, with_cuts
from fleetplan.solvers.reservation.relax_fix import satisfies
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


@pytest.mark.parametrize("seed", range(30))
def test_every_integer_point_keeps_the_cuts(seed):
    instance = instance_from_data(_tiny(seed))
    arrays = instance.arrays()
    model = build(arrays)
    cut = with_cuts(model, arrays)
    strengthened = type(model)(**{**model.__dict__, "lp": cut})
    rows = np.flatnonzero(arrays.available)
    assignment = arrays.server_current.copy()
    feasible = 0
    for choice in itertools.product(range(FREE, arrays.num_reservations), repeat=rows.size):
        assignment[rows] = choice
        x = counts_from_assignment(model, arrays, assignment)
        if x is None:
            continue
        # The least auxiliaries are the hardest case for the cuts (a larger y only helps them).
        values = full_solution(model, x)
        if satisfies(model, values):
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
