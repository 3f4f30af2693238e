"""The heterogeneity-agnostic policies' tie spreading (fleetplan/solvers/allocation/agnostic.py):
the least-squares QP with only job totals and worker rows, solved through its dual
(``closest_split``), equals HiGHS's QP solver on the same problem; and a plan spread that way
is the one the QP gives."""

from __future__ import annotations

import numpy as np
import pytest

import fleetplan
from fleetplan.solvers.allocation import agnostic


def qp_only(monkeypatch):
    monkeypatch.setattr(agnostic, "closest_split", lambda *args: None)


def random_split(seed: int, classes: int, types: int, unusable: float, tight: float):
    """A random instance of the QP: goals, totals and counts drawn, the workers ``tight`` times
    what the goals use (below 1: the goals do not fit, the prices bind)."""
    rng = np.random.default_rng(seed)
    usable = rng.random((classes, types)) >= unusable
    usable[np.arange(classes), rng.integers(types, size=classes)] = True
    cell_class, cell_type = np.nonzero(usable)
    totals = rng.uniform(0.2, 1.0, classes)
    share = np.where(usable, rng.uniform(0.5, 1.5, (classes, types)), 0.0)
    goal_matrix = totals[:, None] * share / share.sum(axis=1, keepdims=True)
    scale = rng.choice([1.0, 2.0, 4.0], classes)
    count = rng.integers(1, 4, classes).astype(float)
    held = (count * scale)[cell_class]
    goals_use = np.bincount(cell_type, weights=held * goal_matrix[cell_class, cell_type], minlength=types)
    # Another split of the same totals (each class's time on its types in other proportions)
    # fits the workers, so the QP is feasible; the goals need more of some types than that.
    other = np.where(usable, rng.uniform(0.0, 1.0, (classes, types)) ** 3, 0.0) + usable * 1e-3
    other = totals[:, None] * other / other.sum(axis=1, keepdims=True)
    other_use = np.bincount(cell_type, weights=held * other[cell_class, cell_type], minlength=types)
    workers = np.maximum(goals_use * tight, other_use)
    return goal_matrix[cell_class, cell_type], cell_class, cell_type, scale, totals, count, workers


def reference_qp(goal, cell_class, cell_type, scale, totals, count, workers):
    """The same QP by HiGHS (the QP solver the spreading falls back on)."""
    import highspy
    import scipy.sparse as sp

    from fleetplan.models.linear import INF, LinearProgram
    from fleetplan.solvers import highs as highs_runner

    cells, classes, types = len(goal), len(totals), len(workers)
    column = np.arange(cells)
    held = (count * scale)[cell_class]
    matrix = sp.vstack([sp.csr_matrix((np.ones(cells), (cell_class, column)), shape=(classes, cells)),
                        sp.csr_matrix((held, (cell_type, column)), shape=(types, cells))], format="csr")
    lp = LinearProgram(cost=-2.0 * count[cell_class] * goal, matrix=matrix,
                       row_lower=np.concatenate([totals, np.full(types, -INF)]),
                       row_upper=np.concatenate([totals, workers]), col_lower=np.zeros(cells),
                       col_upper=np.ones(cells), sense="min")
    highs = highs_runner.new_highs(None, 1, 0)
    highs_runner.pass_lp(highs, lp)
    highs.setOptionValue("solver", "choose")
    highs.passHessian(cells, cells, highspy.HessianFormat.kTriangular, np.arange(cells + 1, dtype=np.int32),
                      np.arange(cells, dtype=np.int32), 2.0 * count[cell_class])
    outcome = highs_runner.run(highs)
    assert outcome.status == "optimal"
    return outcome.values


def objective(x, goal, cell_class, count):
    return float((count[cell_class] * (x - goal) ** 2).sum())


@pytest.mark.parametrize(("seed", "classes", "types", "unusable", "tight"), [
    (0, 40, 3, 0.3, 0.8), (1, 200, 3, 0.3, 0.9), (2, 120, 6, 0.5, 0.7), (3, 60, 3, 0.0, 1.2), (4, 300, 4, 0.4, 0.95)])
def test_the_dual_split_equals_the_qp_solver(seed, classes, types, unusable, tight):
    problem = random_split(seed, classes, types, unusable, tight)
    goal, cell_class, cell_type, scale, totals, count, workers = problem
    fast = agnostic.closest_split(*problem)
    assert fast is not None
    reference = reference_qp(*problem)
    # Feasible: every class's total, every worker row, the bounds.
    np.testing.assert_allclose(np.bincount(cell_class, weights=fast, minlength=classes), totals, atol=1e-9)
    used = np.bincount(cell_type, weights=(count * scale)[cell_class] * fast, minlength=types)
    assert np.all(used <= workers * (1 + 1e-9) + 1e-9)
    assert fast.min() >= 0.0 and fast.max() <= 1.0
    # The QP's optimum is unique: the same point, the same objective.
    np.testing.assert_allclose(fast, reference, atol=1e-6)
    assert objective(fast, goal, cell_class, count) <= objective(reference, goal, cell_class, count) * (1 + 1e-9) + 1e-12


def test_goals_that_fit_come_back_unchanged():
    goal, cell_class, cell_type, scale, totals, count, workers = random_split(5, 50, 3, 0.3, 2.0)
    np.testing.assert_allclose(agnostic.closest_split(goal, cell_class, cell_type, scale, totals, count, workers),
                               goal, atol=1e-12)


def test_the_unusable_types_mix_spreads_as_the_qp_does(monkeypatch):
    """Finish-time fairness, heterogeneity-agnostic, 30% of (job, type) pairs unusable: the
    proportional split does not fit, the spread goes through the dual split; the plan is the
    QP's to 1e-7 and the judge scores it the same."""
    instance = fleetplan.generate("allocation", {"jobs": 1024, "throughput_noise": 0.1, "multi_gpu": False,
                                                 "slo_fraction": 0.0, "unusable_share": 0.3}, seed=0)
    fast = fleetplan.solve(instance, "finish-time-fairness-agnostic")
    assert fast.stats["ties_qp"] == 1.0
    qp_only(monkeypatch)
    reference = fleetplan.solve(instance, "finish-time-fairness-agnostic")
    np.testing.assert_allclose(fast.plan.matrix(instance), reference.plan.matrix(instance), atol=1e-7)
    assert fast.evaluation.objective == pytest.approx(reference.evaluation.objective, rel=1e-9)
    assert fast.evaluation.violations == []
