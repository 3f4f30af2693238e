"""The reduced LPs of the price decomposition run on a thread's spare HiGHS object, cleared
between LPs: every answer (status, values, duals, basis) is a new object's, whatever LPs the
spare solved before (other sizes, presolve off, a start basis, a time limit)."""

import numpy as np
import scipy.sparse as sp

from fleetplan.models.linear import LinearProgram
from fleetplan.solvers import highs as highs_runner
from fleetplan.solvers.allocation.price_decomposition import separable
from fleetplan.solvers.deadline import Deadline


def _lp(rng, n):
    A = sp.random(n, 2 * n, density=0.5, random_state=rng, format="csr") + sp.eye(n, 2 * n, format="csr")
    return LinearProgram(cost=rng.uniform(0.5, 1.5, 2 * n), matrix=A.tocsr(), row_lower=np.full(n, -np.inf),
                         row_upper=rng.uniform(1, 2, n), col_lower=np.zeros(2 * n), col_upper=np.ones(2 * n),
                         sense="max")


def _fresh(lp, tolerance, basis=None):
    """The reduced LP's run as it was made before the spare object: a new Highs each time."""
    highs = highs_runner.new_highs(None, 1, 0)
    highs_runner.pass_lp(highs, lp, "simplex")
    highs.setOptionValue("primal_feasibility_tolerance", tolerance)
    highs.setOptionValue("dual_feasibility_tolerance", tolerance)
    if lp.num_cols <= separable.TINY_LP_COLUMNS:
        highs.setOptionValue("presolve", "off")
    if basis is not None:
        highs_runner.set_basis(highs, basis)
    outcome = highs_runner.run(highs)
    return outcome, np.asarray(highs.getSolution().row_dual, dtype=float), highs_runner.basis_of(highs)


def test_the_spare_object_answers_as_a_new_one():
    rng = np.random.default_rng(0)
    lps = [_lp(rng, n) for n in (3, 40, 7, separable.TINY_LP_COLUMNS + 5, 2)]
    for round_ in range(2):
        for k, lp in enumerate(lps):
            tolerance = 1e-9 if k % 2 else 1e-7
            start = _fresh(lp, 1e-6)[2] if round_ else None  # a start basis on the second pass
            want, want_duals, want_basis = _fresh(lp, tolerance, start)
            got, got_duals = separable._solve_lp(lp, Deadline(60.0 if k == 2 else None), 1, 0, tolerance, start,
                                                 keep_basis=True)
            assert got.status == want.status == "optimal"
            assert got.values.tobytes() == want.values.tobytes() and got_duals.tobytes() == want_duals.tobytes()
            assert got.objective == want.objective and got.simplex_iterations == want.simplex_iterations
            assert all(np.array_equal(a, b) for a, b in zip(got.basis, want_basis, strict=True))
    assert highs_runner._SPARE.highs is not None and highs_runner._SPARE.highs.getNumCol() == 0
