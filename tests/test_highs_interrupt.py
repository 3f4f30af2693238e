"""HiGHS stops at the deadline in branch and bound too, and says ``time_limit``."""

import time

import numpy as np
import scipy.sparse as sp

from fleetplan.models.linear import LinearProgram
from fleetplan.solvers.highs import interrupt_at, new_highs, pass_lp, run


def _knapsack(items: int = 40) -> LinearProgram:
    """A knapsack with large random weights: presolve cannot settle it, branch and bound runs."""
    weights = np.random.default_rng(0).integers(10**5, 10**6, size=items).astype(float)
    return LinearProgram(cost=weights.copy(), matrix=sp.csr_matrix(weights.reshape(1, -1)),
                         row_lower=np.array([0.0]), row_upper=np.array([weights.sum() / 2 + 0.5]),
                         col_lower=np.zeros(items), col_upper=np.ones(items), sense="max",
                         integrality=np.ones(items))


def test_an_interrupted_mip_is_a_time_limit_not_an_error():
    for events in [("mip",), ("simplex", "ipm", "mip")]:
        highs = new_highs(None, 1, 0)
        interrupt_at(highs, time.perf_counter() - 1.0, events=events)
        pass_lp(highs, _knapsack())
        outcome = run(highs)
        assert outcome.status == "time_limit", (events, outcome.log)


def test_a_time_limit_also_watches_branch_and_bound():
    """The MIP callback is subscribed whenever a limit is given; without one, nothing is."""
    limited = new_highs(5.0, 1, 0)
    assert len(limited.cbMipInterrupt.callbacks) == 1
    assert not limited.cbSimplexInterrupt.callbacks and not limited.cbIpmInterrupt.callbacks
    assert not new_highs(None, 1, 0).cbMipInterrupt.callbacks
    highs = new_highs(30.0, 1, 0)
    pass_lp(highs, _knapsack())
    outcome = run(highs)
    assert outcome.status == "optimal" and outcome.objective is not None
