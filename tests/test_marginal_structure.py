"""Marginal values' re-solves from the base's structure (each job's vertex and the free jobs,
``separable_structure.resolve_structure``): the objective and every service metric equal a
cold solve of the changed instance, on random instances; the structure path is really taken;
and a structure that does not fit hands over to the decomposition from prices."""

import math

import numpy as np
import pytest

import fleetplan
from fleetplan.embed import AllocationSession
from fleetplan.planning.marginal import allocation_units, marginal_values
from fleetplan.runs import shared
from fleetplan.solvers.allocation.price_decomposition import separable
from fleetplan.solvers.allocation.price_decomposition.reduced_basis import ReducedBasis
from fleetplan.solvers.allocation.price_decomposition.separable_structure import resolve_structure

# Small instances, the decomposition forced (below SEPARABLE_MIN_JOBS the full LP runs).
OPTIONS = {"decomposition": "prices"}


def _instance(seed: int, jobs: int = 240):
    rng = np.random.default_rng(seed)
    types = ["v100", "p100", "k80"] + (["h100"] if seed % 2 else [])
    data = fleetplan.generate("allocation", {"jobs": jobs, "throughput_noise": 0.1, "worker_types": types[:3]},
                              seed=seed).model_dump()
    if len(types) == 4:  # a fourth type, a drawn multiple of the V100 per job (no exact ties)
        data["worker_types"].append({"name": "h100", "count": int(rng.integers(20, 80)), "cost_per_hour": 4.5})
        for job in data["jobs"]:
            job["throughput"]["h100"] = float(job["throughput"]["v100"] * rng.uniform(1.8, 2.6))
    for worker in data["worker_types"]:  # scarce enough that capacity sets the level
        worker["count"] = int(rng.integers(max(4, jobs // 12), jobs // 4))
    return fleetplan.instances.instance_from_data(data)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_re_solves_from_the_structure_equal_cold_solves(seed):
    instance = _instance(seed)
    session = AllocationSession.from_instance(instance, solver="max-min-fairness", **OPTIONS)
    base = session.solve()
    hints = session.warm_start()
    assert any(len(hint) == 3 for hint in hints.values())  # the base left its structure
    structured = 0
    for _, _, more, fewer in allocation_units(instance):
        for build in (more, fewer):
            if not callable(build):  # a unit that cannot be removed says why instead
                continue
            unit = build()
            session.set_workers(unit.counts)
            session.start_from(hints)
            warm = session.solve()
            cold = fleetplan.solve(unit.instance(), "max-min-fairness", **OPTIONS)
            assert warm.status == cold.status == "optimal"
            structured += warm.stats.get("separable_structure", 0.0) == 1.0
            assert _close(warm.objective, cold.objective), (unit.counts, warm.objective, cold.objective)
            for name, value in cold.evaluation.metrics.items():
                assert _close(warm.evaluation.metrics[name], value), (unit.counts, name)
    assert base.status == "optimal" and structured >= 1


def test_marginal_values_equal_those_of_cold_re_solves():
    instance = _instance(11, jobs=300)
    values = marginal_values(instance, "max-min-fairness", workers=1, **OPTIONS)
    base = fleetplan.solve(instance, "max-min-fairness", **OPTIONS)
    for value, (_, _, more, _) in zip(values.values, allocation_units(instance), strict=True):
        cold = fleetplan.solve(more().instance(), "max-min-fairness", **OPTIONS)
        assert _close(value.more["objective"] + base.objective, cold.objective)
        for name, change in value.more.items():
            if name != "objective":
                assert _close(change + base.evaluation.metrics[name], cold.evaluation.metrics[name]), name


def test_a_structure_that_does_not_fit_falls_back():
    A = np.array([[2.0, 1.0], [1.0, 1.0], [1.5, 0.5]])
    ones = np.ones(3)
    W = np.array([1.0, 1.0])
    wrong_length = (np.zeros(2, dtype=int), np.ones(2, dtype=bool))
    assert resolve_structure(A, np.zeros(3), ones, ones, W, wrong_length, free_level=False).status == "fallback"
    no_vertex = (np.array([-2, 0, 0]), np.array([False, True, True]))  # a fixed job with no vertex
    assert resolve_structure(A, np.zeros(3), ones, ones, W, no_vertex, free_level=False).status == "fallback"
    # a structure that fits: its answer is the decomposition's, certified
    cold = separable.max_min(A, np.zeros(3), ones, ones, W, free_level=False)
    again = resolve_structure(A, np.zeros(3), ones, ones, W, cold.structure, free_level=False)
    assert again.status == "optimal" and _close(again.level, cold.level)


def test_a_job_change_in_a_session_drops_the_structure_but_keeps_the_prices():
    instance = _instance(3)
    session = AllocationSession.from_instance(instance, solver="max-min-fairness", **OPTIONS)
    session.solve()
    session.remove_jobs(session.job_ids[:1])
    assert all(len(hint) == 2 for hint in session.warm_start().values())
    result = session.solve()
    assert not any("structure" in line for line in result.log)
    assert any("warm-started" in line for line in result.log)


@pytest.mark.skipif(not shared.can_fork(), reason="no fork start method (or threads alive)")
def test_re_solves_from_the_structure_give_the_same_numbers_in_forked_processes():
    instance = _instance(4)
    sequential = marginal_values(instance, "max-min-fairness", workers=1, **OPTIONS)
    parallel = marginal_values(instance, "max-min-fairness", workers=3, **OPTIONS)
    assert parallel.to_dict() == sequential.to_dict()


def test_a_structure_the_certificate_rejects_hands_over_to_the_prices(monkeypatch):
    from fleetplan.solvers.allocation.price_decomposition import separable_structure

    monkeypatch.setattr(separable_structure, "STRUCTURE_ROUNDS", 1)
    instance = _instance(2)
    session = AllocationSession.from_instance(instance, solver="max-min-fairness", **OPTIONS)
    session.solve()
    hints = session.warm_start()
    key = next(key for key, hint in hints.items() if len(hint) == 3)
    level, prices, (choice, free, *_) = hints[key]  # the third part: the reduced LP's basis
    wrong = np.zeros_like(choice)  # every job on the first type, one job free: not the optimum's
    only_first = np.zeros_like(free)
    only_first[0] = True
    session.start_from({**hints, key: (level, prices, (wrong, only_first))})
    result = session.solve()
    cold = fleetplan.solve(instance, "max-min-fairness", **OPTIONS)
    assert any("structure: the certificate rejects" in line for line in result.log), result.log
    assert any("warm-started" in line for line in result.log)
    assert _close(result.objective, cold.objective)
    for name, value in cold.evaluation.metrics.items():
        assert _close(result.evaluation.metrics[name], value), name


def test_the_re_solves_shortcuts_equal_what_they_replace():
    from fleetplan.instances.allocation.rows import row_max as _row_max
    from fleetplan.solvers.allocation.price_decomposition import separable_certificate

    rng = np.random.default_rng(5)
    values = rng.normal(size=(500, 4))
    values[rng.random(values.shape) < 0.1] = -np.inf
    values[3] = np.inf
    assert np.array_equal(_row_max(values), values.max(axis=1))
    # the score duals from the reduced LP's slopes equal those recomputed from the vertices
    n = 400
    A = rng.uniform(0.5, 3.0, size=(n, 3))
    W = np.array([40.0, 30.0, 20.0])  # scarce: capacity sets the level
    ones, offset = np.ones(n), np.zeros(n)
    result = separable.max_min(A, offset, ones, ones, W, free_level=False)
    assert result.status == "optimal" and result.structure is not None
    choice, free = result.structure
    assert 0 < free.sum() < n
    *_, (_, _, _, alpha) = separable._max_min_reduced(A, offset, ones, ones, W, free, choice, False,
                                                      separable.Deadline(None), 1, 0)
    free_duals = rng.uniform(0.1, 1.0, size=int(free.sum()))
    given = separable_certificate.score_duals(A, offset, ones, result.prices, choice, free, free_duals, None, alpha)
    recomputed = separable_certificate.score_duals(A, offset, ones, result.prices, choice, free, free_duals, None)
    assert np.allclose(given[0], recomputed[0], rtol=1e-12, atol=0) and given[1] == recomputed[1]


def _scarce(n: int, seed: int):
    rng = np.random.default_rng(seed)
    A = rng.uniform(0.5, 3.0, size=(n, 4))
    return A, np.zeros(n), np.ones(n), np.array([n / 10, n / 12, n / 15, n / 20])


@pytest.mark.parametrize("seed", range(4))
def test_a_re_solve_from_the_neighbours_basis_pivots_less_for_the_same_answer(seed, monkeypatch):
    """One worker more or fewer of a type changes a capacity row's right-hand side only: started
    from the base's optimal basis the reduced LPs take fewer simplex pivots, and the certified
    level, plan and prices are those of the re-solve without a basis."""
    A, offset, ones, W = _scarce(600, seed)
    base = separable.max_min(A, offset, ones, ones, W, free_level=False)
    assert base.status == "optimal" and base.reduced_basis is not None
    pivots: list[int] = []
    solve_lp = separable._solve_lp
    monkeypatch.setattr(separable, "_solve_lp", lambda lp, *rest: (lambda out: pivots.append(
        out[0].simplex_iterations) or out)(solve_lp(lp, *rest)))
    warm_total = cold_total = 0
    for k in range(4):
        for step in (1.0, -1.0):
            changed = W.copy()
            changed[k] += step
            pivots.clear()
            warm = resolve_structure(A, offset, ones, ones, changed, base.structure + (base.reduced_basis,),
                                     free_level=False)
            warm_total += sum(pivots)
            pivots.clear()
            cold = resolve_structure(A, offset, ones, ones, changed, base.structure, free_level=False)
            cold_total += sum(pivots)
            assert warm.status == cold.status == "optimal"
            assert _close(warm.level, cold.level)
            assert np.allclose(warm.matrix, cold.matrix, rtol=0, atol=1e-7)
            assert np.allclose(warm.prices, cold.prices, rtol=1e-6, atol=1e-9)
    assert warm_total < cold_total


def test_a_reduced_basis_maps_onto_another_free_set():
    """Kept rows and cells keep their status; a newly freed job's rows are basic and its cells at
    zero (one basic per row); a basis that lost a basic cell is not used."""
    basis = ReducedBasis(free_jobs=np.array([2, 5]), cell_keys=np.array([2 * 2 + 0, 5 * 2 + 1]),
                                   cell_status=np.array([1, 1], dtype=np.int8), t_status=1,
                                   score_status=np.array([2, 0], dtype=np.int8),
                                   time_status=np.array([0, 2], dtype=np.int8),
                                   capacity_status=np.array([1, 2], dtype=np.int8))
    # 3 basic columns (two cells, t) and 1 basic row (capacity 0) for 2 * 2 + 2 = 6 rows: refused.
    assert basis.start_for(np.array([2, 5]), np.array([4, 11]), 2) is None
    basis.score_status[:] = 1  # now 3 + 2 + 1 = 6 basics for 6 rows
    same = basis.start_for(np.array([2, 5]), np.array([4, 11]), 2)
    assert same is not None and same[0].tolist() == [1, 1, 1] and same[1].tolist() == [1, 1, 0, 2, 1, 2]
    grown = basis.start_for(np.array([2, 3, 5]), np.array([4, 6, 7, 11]), 2)
    assert grown[0].tolist() == [1, 0, 0, 1, 1]  # job 3's cells at zero
    assert grown[1].tolist() == [1, 1, 1, 0, 1, 2, 1, 2]  # job 3's score and time rows basic
    assert basis.start_for(np.array([2, 5]), np.array([4, 10]), 2) is None  # cell (5, 1) gone
    assert basis.start_for(np.array([2, 5]), np.array([4, 11]), 3) is None  # another cluster


def test_re_solves_from_one_basis_reuse_its_buffer_and_repeat_bit_for_bit():
    A, offset, ones, W = _scarce(500, 7)
    base = separable.max_min(A, offset, ones, ones, W, free_level=False)
    changed = W + np.array([1.0, 0.0, 0.0, 0.0])
    structure = base.structure + (base.reduced_basis,)
    first = resolve_structure(A, offset, ones, ones, changed, structure, free_level=False)
    buffer = base.reduced_basis.scratch["costs"]
    second = resolve_structure(A, offset, ones, ones, changed, structure, free_level=False)
    assert base.reduced_basis.scratch["costs"] is buffer
    assert first.level == second.level and np.array_equal(first.matrix, second.matrix)
    assert np.array_equal(first.score_duals, second.score_duals)
