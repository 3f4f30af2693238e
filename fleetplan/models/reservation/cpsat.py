"""The aggregated RAS MIP (:mod:`fleetplan.models.reservation`) in CP-SAT and in Pyomo.

Both are renderings of the same sparse model, so the three back-ends solve one formulation.

CP-SAT needs integers: every column is an integer count of its unit (1 for server counts and
indicators, :func:`~fleetplan.models.reservation.rru_unit` for RRU quantities, of which every
RRU coefficient is an exact multiple), each row is scaled by the least power of ten making its
coefficients integral (a ``>=`` bound rounds up, a ``<=`` bound down: exact for integer
left-hand sides), and the objective likewise; when no power up to 10^6 makes the objective
integral it is rounded there and ``exact_objective`` is False.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.lazy import lazy_module
from fleetplan.models.build_clock import Clock, _Ticker

cp_model = lazy_module("ortools.sat.python.cp_model")
pyo = lazy_module("pyomo.environ")

MAX_SCALE_POWER = 6


def integral_scale(values: np.ndarray) -> tuple[float, bool]:
    """The least power of ten (up to 10^6) making ``values`` integral, and whether it is exact."""
    for power in range(MAX_SCALE_POWER + 1):
        scaled = values * 10**power
        if np.all(np.abs(scaled - np.round(scaled)) <= 1e-9 * np.maximum(1.0, np.abs(scaled))):
            return 10.0**power, True
    return 10.0**MAX_SCALE_POWER, False


@dataclass
class CpsatModel:
    model: object  # cp_model.CpModel
    variables: list
    col_unit: np.ndarray
    objective_scale: float
    exact_objective: bool


# CPU seconds to translate one row (measured at 10^5 servers x 200 reservations: 11,902 rows in
# 1.9 s); a solver keeps this much back for the translation.
TRANSLATE_S_PER_ROW = 160e-6


def to_cpsat(lp, col_unit: np.ndarray, deadline: Clock | None = None) -> CpsatModel:
    """CP-SAT model of the sparse MIP ``lp`` (minimisation), columns counted in ``col_unit``;
    ``deadline`` is checked every 64 rows
    (:class:`~fleetplan.models.build_clock.BuildTimeout` when it has expired)."""
    ticker = _Ticker(deadline, every=64)
    model = cp_model.CpModel()
    lower = np.ceil(lp.col_lower / col_unit - 1e-9)
    upper = np.where(np.isfinite(lp.col_upper), np.floor(lp.col_upper / col_unit + 1e-9), np.nan)
    # Unbounded auxiliaries get a bound no feasible plan reaches: every row they sit in is
    # bounded by sums of bounded counts.
    ceiling = float(np.abs(lp.matrix).sum() / col_unit.min() + np.abs(lp.row_lower[np.isfinite(lp.row_lower)]).sum()
                    / col_unit.min() + 1)
    ceiling = min(ceiling, 2**50)
    variables = [model.NewIntVar(int(lo), int(ceiling if math.isnan(hi) else hi), f"c{j}")
                 for j, (lo, hi) in enumerate(zip(lower.tolist(), upper.tolist(), strict=True))]
    matrix = lp.matrix.tocsr()
    scaled = matrix @ _diag(col_unit)
    scaled = scaled.tocsr()
    for row in range(scaled.shape[0]):
        ticker.tick()
        cols = scaled.indices[scaled.indptr[row]:scaled.indptr[row + 1]]
        vals = scaled.data[scaled.indptr[row]:scaled.indptr[row + 1]]
        lo, hi = lp.row_lower[row], lp.row_upper[row]
        factor, exact = integral_scale(vals)
        if not exact:
            raise ValueError(f"row {row} has coefficients CP-SAT cannot scale to integers")
        coefs = np.round(vals * factor).astype(np.int64).tolist()
        expr = sum(c * variables[j] for c, j in zip(coefs, cols.tolist(), strict=True))
        if np.isfinite(lo) and np.isfinite(hi) and lo == hi:
            value = lo * factor
            if abs(value - round(value)) > 1e-6:  # an integral sum cannot equal a fractional value
                model.AddBoolOr([])
            model.Add(expr == int(round(value)))
            continue
        if np.isfinite(lo):
            model.Add(expr >= int(math.ceil(lo * factor - 1e-9)))
        if np.isfinite(hi):
            model.Add(expr <= int(math.floor(hi * factor + 1e-9)))
    cost = lp.cost * col_unit
    nonzero = np.flatnonzero(cost)
    factor, exact = integral_scale(cost[nonzero])
    coefs = np.round(cost[nonzero] * factor).astype(np.int64).tolist()
    model.Minimize(sum(c * variables[j] for c, j in zip(coefs, nonzero.tolist(), strict=True)))
    return CpsatModel(model=model, variables=variables, col_unit=col_unit, objective_scale=factor,
                      exact_objective=exact)


def _diag(values: np.ndarray):
    from scipy.sparse import diags

    return diags(values)


def add_hint(cpsat: CpsatModel, values: np.ndarray) -> None:
    """Hint a full solution (column values in the LP's units)."""
    for var, value, unit in zip(cpsat.variables, values.tolist(), cpsat.col_unit.tolist(), strict=True):
        cpsat.model.AddHint(var, int(round(value / unit)))


def read_values(cpsat: CpsatModel, solver) -> np.ndarray:
    """Column values in the LP's units."""
    return np.array([solver.Value(v) for v in cpsat.variables], dtype=float) * cpsat.col_unit


def to_pyomo(lp):
    """A Pyomo ``ConcreteModel`` of the sparse MIP ``lp``: variables ``v[j]``, one constraint per
    row, solved through :func:`fleetplan.solvers.highs.solve_pyomo`."""
    model = pyo.ConcreteModel()
    columns = range(lp.num_cols)
    integer = lp.integrality if lp.integrality is not None else np.zeros(lp.num_cols)

    def bounds(_, j):
        hi = lp.col_upper[j]
        return float(lp.col_lower[j]), (float(hi) if np.isfinite(hi) else None)

    def domain(_, j):
        return pyo.Integers if integer[j] else pyo.Reals

    model.v = pyo.Var(columns, bounds=bounds, domain=domain)
    matrix = lp.matrix.tocsr()
    rows = range(lp.num_rows)

    def row_rule(m, i):
        cols = matrix.indices[matrix.indptr[i]:matrix.indptr[i + 1]].tolist()
        vals = matrix.data[matrix.indptr[i]:matrix.indptr[i + 1]].tolist()
        body = sum(a * m.v[j] for a, j in zip(vals, cols, strict=True))
        lo, hi = lp.row_lower[i], lp.row_upper[i]
        return (float(lo) if np.isfinite(lo) else None, body, float(hi) if np.isfinite(hi) else None)

    model.rows = pyo.Constraint(rows, rule=row_rule)
    nonzero = np.flatnonzero(lp.cost)
    model.objective = pyo.Objective(expr=sum(float(lp.cost[j]) * model.v[int(j)] for j in nonzero),
                                    sense=pyo.minimize)
    return model


def read_pyomo(model, lp) -> np.ndarray:
    return np.array([pyo.value(model.v[j]) or 0.0 for j in range(lp.num_cols)], dtype=float)
