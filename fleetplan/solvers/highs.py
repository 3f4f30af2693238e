"""Runners for HiGHS: a :class:`~fleetplan.models.linear.LinearProgram` through ``highspy``
directly, or a Pyomo model through Pyomo's HiGHS interface. Both return an :class:`LpOutcome`.

HiGHS's interior point method (``lp_algorithm="ipm"``) solves large Gavel-like LPs far faster
than its default dual simplex (the design's measurement on 2 cores: 5 s against 8 min at
65,536 jobs; docs/architecture.md, "Performance practice"), so it is the default for large LPs;
``simplex`` gives vertex solutions on small ones.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fleetplan.highs_pool import use_threads
from fleetplan.lazy import lazy_attribute, lazy_module
from fleetplan.models.linear import LinearProgram

highspy = lazy_module("highspy")
pyo = lazy_module("pyomo.environ")
AppsiHighs = lazy_attribute("pyomo.contrib.appsi.solvers", "Highs")

LpAlgorithm = Literal["auto", "simplex", "ipm", "pdlp"]
# Below this many columns simplex is fast and exact to the vertex; above it the interior
# point method wins (measured: benchmarks/RESULTS.md).
AUTO_IPM_COLUMNS = 2_000


@dataclass
class LpOutcome:
    """What came back from HiGHS, independent of how the model was handed over."""

    status: str  # optimal | time_limit | infeasible | unbounded | error
    values: np.ndarray | None
    objective: float | None
    log: list[str] = field(default_factory=list)
    build_s: float = 0.0
    solve_s: float = 0.0
    # The rows' dual values (HiGHS's sign convention: for a maximization, a binding <= row has
    # a non-negative dual), when the solver reports a dual-feasible point.
    row_duals: np.ndarray | None = None
    simplex_iterations: int = 0
    # The final simplex basis (:func:`basis_of`) where the caller asked for it.
    basis: tuple[np.ndarray, np.ndarray] | None = None


# Keyed by the back-ends' status names, so this module loads without HiGHS or Pyomo.
_STATUS = {
    "kOptimal": "optimal",
    "kTimeLimit": "time_limit",
    "kInfeasible": "infeasible",
    "kUnbounded": "unbounded",
    "kUnboundedOrInfeasible": "infeasible",
    "kIterationLimit": "time_limit",
    # Only this module's deadline callbacks interrupt HiGHS (``interrupt_at``, ``new_highs``).
    "kInterrupt": "time_limit",
}


def _algorithm_name(algorithm: LpAlgorithm, num_cols: int) -> str:
    if algorithm == "auto":
        return "ipm" if num_cols > AUTO_IPM_COLUMNS else "simplex"
    return algorithm


def _set_options(highs: highspy.Highs, time_limit: float | None, threads: int, seed: int) -> highspy.Highs:
    """Quiet, seeded, ``threads`` threads and HiGHS's own ``time_limit``: every run's options."""
    use_threads(threads)
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("random_seed", int(seed) % 2_147_483_647)
    highs.setOptionValue("threads", int(threads))
    if time_limit is not None:
        highs.setOptionValue("time_limit", float(time_limit))
    return highs


def new_highs(time_limit: float | None, threads: int, seed: int) -> highspy.Highs:
    highs = _set_options(highspy.Highs(), time_limit, threads, seed)
    if time_limit is not None:
        # HiGHS 1.14 does not check its own limit inside branch and bound's sub-MIP heuristics
        # (a neighbourhood of the placement search ran minutes past a 5 s limit there); the MIP
        # callback does run there. LPs never fire it, so their hot paths pay nothing.
        interrupt_at(highs, time.perf_counter() + float(time_limit), events=("mip",))
    return highs


# One spare Highs object per thread for the small LPs solved many times a solve (the price
# decomposition's reduced LPs): a HiGHS object is a few hundred option records, and making one
# cost 0.2 ms of a 2,048-job LAS solve's 11 where clearing a used one (its model, solution and
# options back to the defaults, as a new object's) costs 0.05.
_SPARE = threading.local()


@contextlib.contextmanager
def lp_highs(time_limit: float | None, threads: int, seed: int) -> Iterator[highspy.Highs]:
    """A Highs object for one LP, set as :func:`new_highs` sets one; the thread's spare object
    when it has one (cleared to a new object's state), given back, cleared, when the block ends
    without an error. For LPs only: :func:`new_highs`'s branch-and-bound interrupt is not
    registered (an LP never fires it; HiGHS's own time limit is set as there).

    >>> import scipy.sparse as sp
    >>> lp = LinearProgram(cost=np.array([1.0, 1.0]), matrix=sp.csr_matrix([[1.0, 2.0]]),
    ...     row_lower=np.array([-np.inf]), row_upper=np.array([4.0]), col_lower=np.zeros(2),
    ...     col_upper=np.array([3.0, 3.0]), sense="max")
    >>> for _ in range(2):  # the second LP runs on the first one's object, cleared
    ...     with lp_highs(None, 1, 0) as highs:
    ...         pass_lp(highs, lp)
    ...         print(run(highs).objective)
    3.5
    3.5
    """
    highs = getattr(_SPARE, "highs", None)
    _SPARE.highs = None  # a nested LP in this thread makes its own
    highs = _set_options(highspy.Highs() if highs is None else highs, time_limit, threads, seed)
    yield highs
    highs.clear()  # model, solution and options: the next LP finds a new object's state
    _SPARE.highs = highs


def pass_lp(highs: highspy.Highs, lp: LinearProgram, algorithm: LpAlgorithm = "auto") -> None:
    """Hand ``lp`` to ``highs`` as one sparse model (no per-row Python calls)."""
    model = highspy.HighsLp()
    model.num_col_ = lp.num_cols
    model.num_row_ = lp.num_rows
    model.col_cost_ = np.asarray(lp.cost, dtype=float)
    model.col_lower_ = np.asarray(lp.col_lower, dtype=float)
    model.col_upper_ = np.asarray(lp.col_upper, dtype=float)
    model.row_lower_ = np.asarray(lp.row_lower, dtype=float)
    model.row_upper_ = np.asarray(lp.row_upper, dtype=float)
    model.sense_ = highspy.ObjSense.kMaximize if lp.sense == "max" else highspy.ObjSense.kMinimize
    csc = lp.matrix.tocsc()
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = csc.indptr.astype(np.int32)
    model.a_matrix_.index_ = csc.indices.astype(np.int32)
    model.a_matrix_.value_ = csc.data.astype(float)
    if lp.integrality is not None:
        model.integrality_ = [highspy.HighsVarType(int(v)) for v in lp.integrality]
    highs.passModel(model)
    chosen = _algorithm_name(algorithm, lp.num_cols)
    highs.setOptionValue("solver", chosen)


def interrupt_at(highs: highspy.Highs, stop_at: float | None,
                 events: tuple[str, ...] = ("simplex", "ipm", "mip")) -> None:
    """Stop simplex, the interior point method and branch-and-bound (``events``) at
    ``stop_at``, a :func:`time.perf_counter` reading (HiGHS checks its own limit only between
    phases); the run's status is then ``time_limit``.

    >>> import scipy.sparse as sp
    >>> knapsack = LinearProgram(cost=np.array([3.0, 2.0]), matrix=sp.csr_matrix([[2.0, 1.0]]),
    ...     row_lower=np.array([0.0]), row_upper=np.array([2.5]), col_lower=np.zeros(2),
    ...     col_upper=np.ones(2), sense="max", integrality=np.ones(2))
    >>> highs = new_highs(None, 1, 0)
    >>> pass_lp(highs, knapsack)
    >>> interrupt_at(highs, time.perf_counter() + 60.0)
    >>> run(highs).objective
    3.0
    """
    if stop_at is None:
        return

    def interrupt(event) -> None:
        if time.perf_counter() > stop_at:
            event.interrupt()

    callbacks = {"simplex": highs.cbSimplexInterrupt, "ipm": highs.cbIpmInterrupt, "mip": highs.cbMipInterrupt}
    for event in events:
        callbacks[event] += interrupt


def run(highs: highspy.Highs) -> LpOutcome:
    """Run ``highs`` on the model it holds and collect the outcome."""
    started = time.perf_counter()
    highs.run()
    solve_s = time.perf_counter() - started
    model_status = highs.getModelStatus()
    status = _STATUS.get(model_status.name, "error")
    log = [f"HiGHS: {highs.modelStatusToString(model_status)} in {solve_s:.3f} s"]
    values = objective = None
    row_duals = None
    info = highs.getInfo()
    if info.primal_solution_status == 2:  # feasible point available
        solution = highs.getSolution()
        values = np.asarray(solution.col_value, dtype=float)
        objective = float(info.objective_function_value)
        if info.dual_solution_status == 2 and solution.dual_valid:
            row_duals = np.asarray(solution.row_dual, dtype=float)
    elif status == "optimal":
        status = "error"
    return LpOutcome(status=status, values=values, objective=objective, log=log, solve_s=solve_s,
                     row_duals=row_duals, simplex_iterations=int(info.simplex_iteration_count))


def basis_of(highs: highspy.Highs) -> tuple[np.ndarray, np.ndarray] | None:
    """The simplex basis ``highs`` ended with, as (column, row) status codes (HiGHS's
    ``HighsBasisStatus`` values, int8), or None when it has none."""
    basis = highs.getBasis()
    if not basis.valid:
        return None
    return np.array(basis.col_status, dtype=np.int8), np.array(basis.row_status, dtype=np.int8)


def set_basis(highs: highspy.Highs, basis: tuple[np.ndarray, np.ndarray]) -> bool:
    """Start ``highs``'s next simplex run from ``basis`` (as :func:`basis_of` gives it); False
    when HiGHS refuses it (the run then starts from its own)."""
    by_value = sorted(highspy.HighsBasisStatus.__members__.values(), key=lambda status: status.value)
    start = highspy.HighsBasis()
    start.col_status = [by_value[code] for code in basis[0].tolist()]
    start.row_status = [by_value[code] for code in basis[1].tolist()]
    start.valid = True
    return highs.setBasis(start) == highspy.HighsStatus.kOk


def solve_lp(lp: LinearProgram, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
             algorithm: LpAlgorithm = "auto") -> LpOutcome:
    """Solve a sparse LP with HiGHS through ``passModel``."""
    started = time.perf_counter()
    highs = new_highs(time_limit, threads, seed)
    pass_lp(highs, lp, algorithm)
    build_s = time.perf_counter() - started
    outcome = run(highs)
    outcome.build_s = build_s
    return outcome


PYOMO_STATUS = {
    "optimal": "optimal",
    "maxTimeLimit": "time_limit",
    "maxIterations": "time_limit",
    "infeasible": "infeasible",
    "unbounded": "unbounded",
    "infeasibleOrUnbounded": "infeasible",
}


def solve_pyomo(model: pyo.ConcreteModel, *, time_limit: float | None = None, threads: int = 1,
                seed: int = 0, algorithm: LpAlgorithm = "auto") -> LpOutcome:
    """Solve a Pyomo model with HiGHS through Pyomo's persistent ``appsi`` interface; the
    solution is loaded into the model's variables."""
    use_threads(threads)
    solver = AppsiHighs()
    num_cols = sum(1 for _ in model.component_data_objects(pyo.Var, active=True))
    solver.highs_options = {
        "random_seed": int(seed) % 2_147_483_647,
        "threads": int(threads),
        "solver": _algorithm_name(algorithm, num_cols),
    }
    if time_limit is not None:
        solver.config.time_limit = float(time_limit)
    solver.config.load_solution = False
    started = time.perf_counter()
    results = solver.solve(model)
    elapsed = time.perf_counter() - started
    condition = results.termination_condition
    status = PYOMO_STATUS.get(condition.name, "error")
    objective = results.best_feasible_objective
    if objective is not None and math.isfinite(objective):
        results.solution_loader.load_vars()
        objective = float(objective)
    else:
        objective = None
        if status == "optimal":
            status = "error"
    return LpOutcome(status=status, values=None, objective=objective,
                     log=[f"HiGHS via Pyomo: {condition.name} in {elapsed:.3f} s"], solve_s=elapsed)
