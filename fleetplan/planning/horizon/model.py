"""The multi-period planning model: one copy of a kind's sizing model per period and scenario,
linked by the installed base, minimising the discounted cost.

Over purchasable items ``i`` (GPU types, or GPU-hours of a region and type), periods
``t = 1..T`` and scenarios ``s`` with probabilities ``p_s``::

    minimise   sum_s p_s sum_t d_t [ sum_i price[i, t] order[i, t, s] - salvage[i, t] order[i, t, s]
                                     + opex_i * hours * add[i, t, s] ]           (+ the existing fleet's opex)
    subject to add[i, t, s] = sum_{tau : tau + L_i <= t < tau + L_i + life_i} order[i, tau, s]
               the kind's sizing model of period t under scenario s, its capacity columns = add[., t, s]
               min_i y <= order <= max_i y, y binary                             (where min_order > 0)
               sum_i price[i, t] order[i, t, s] (+ opex) <= budget_t                (where a budget is set)
               order[i, t, s] = order[i, t, s']   for t <= D                      (non-anticipativity)

with ``d_t = (1 + r)^-(t-1)``. An order's salvage is credited where its unit leaves: at the end
of its life (``salvage`` times its price), or at the horizon's end at its straight-line book
value. Orders are whole units for the allocation kind (a MIP, solved by HiGHS with its bound),
continuous for placement.

Scenarios that share an order share its column, so non-anticipativity holds by construction
(no equality rows); ``robust`` shares every period.

A kind may give each item a ``scale`` (units one column counts, default 1): bytes of storage
are ordered in columns of 10^k bytes so that HiGHS sees numbers near 1, not 10^16. A scaled
item's order is then read from a column in the item's own units tied to it by one equality row
(``order = scale * scaled``; presolve removes it), so ``order_column`` always holds units.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from fleetplan.lazy import lazy_module
from fleetplan.models.linear import INF, LinearProgram
from fleetplan.planning.horizon.spec import HorizonSpec

sp = lazy_module("scipy.sparse")


@dataclasses.dataclass
class PeriodBlock:
    """One period's sizing model under one scenario: ``lp`` (no costs of its own), the column of
    each purchasable item's added capacity (-1: the item cannot be added there), and how to read
    the period's plan from the block's part of a solution."""

    lp: LinearProgram
    capacity_columns: np.ndarray
    exact: bool = True
    payload: Any = None


class PeriodKind(Protocol):
    """What the horizon model needs of a kind (allocation, placement)."""

    items: list[str]
    integer: bool

    def existing(self, period: int) -> np.ndarray: ...

    def existing_opex(self, period: int) -> float: ...

    def useful(self, period: int, scenario: int) -> np.ndarray: ...

    def block(self, period: int, scenario: int, add_cap: np.ndarray, role: str) -> PeriodBlock: ...


@dataclasses.dataclass
class HorizonModel:
    """The assembled program and where everything sits in it."""

    lp: LinearProgram
    order_column: np.ndarray  # (items, periods, scenarios) -> column
    binary_column: np.ndarray  # (items, periods, scenarios) -> column or -1
    add_column: np.ndarray  # (items, periods, scenarios) -> column or -1
    block_offset: np.ndarray  # (periods, scenarios) -> first column of the block
    blocks: list[list[PeriodBlock]]  # [period][scenario]
    usable: np.ndarray  # (items, order period, use period) -> 1 where an order is in use
    constant: float  # the existing fleet's discounted opex (in every scenario)
    exact: bool


def usable_matrix(spec: HorizonSpec, items: Sequence[str]) -> np.ndarray:
    """``U[i, tau, t]`` = 1 where a unit of item i ordered in period tau is usable in period t."""
    T = spec.periods
    usable = np.zeros((len(items), T, T))
    for i, name in enumerate(items):
        option = spec.buy[name]
        for tau in range(T):
            arrival = tau + option.lead_time
            end = T if option.lifetime is None else min(T, arrival + option.lifetime)
            usable[i, tau, arrival:end] = 1.0
    return usable


def salvage_value(spec: HorizonSpec, name: str, period: int) -> float:
    """The present value (at period 1) of what one unit ordered in ``period`` is worth when it
    leaves: its residual at the end of its life, or its book value when the horizon ends."""
    option = spec.buy[name]
    T = spec.periods
    price = spec.price(name, period)
    arrival = period + option.lead_time  # 1-based: first usable period
    if option.lifetime is None:
        return 0.0  # no life given: no depreciation schedule to read a value from
    leaves = arrival + option.lifetime  # the first period it is gone
    if leaves <= T + 1:
        return option.salvage * price * spec.discount(leaves)
    remaining = leaves - (T + 1)
    book = option.salvage + (1.0 - option.salvage) * remaining / option.lifetime
    return book * price * spec.discount(T + 1)


def order_upper(spec: HorizonSpec, kind: PeriodKind, scenarios: int) -> np.ndarray:
    """Per item and order period, the most one order may hold: its ``max_order``, else what every
    target could need (the item's useful capacity at its busiest, or ``min_order`` if more); 0 when
    it would arrive after the horizon."""
    T = spec.periods
    upper = np.zeros((len(kind.items), T))
    useful = np.max([[kind.useful(t, s) for s in range(scenarios)] for t in range(T)], axis=(0, 1))
    for i, name in enumerate(kind.items):
        option = spec.buy[name]
        most = option.max_order if option.max_order is not None else max(float(useful[i]), option.min_order)
        if kind.integer:
            most = float(np.floor(most + 1e-9))
        for t in range(T):
            upper[i, t] = most if t + option.lead_time < T else 0.0
    return upper


def build_horizon_model(spec: HorizonSpec, kind: PeriodKind, probabilities: Sequence[float],
                        shared_until: int, role: str = "restriction",
                        fixed_orders: Callable[[int, int], float | None] | None = None) -> HorizonModel:
    """The program of the module docstring. ``shared_until``: orders of periods 1..D are one
    column for every scenario; ``fixed_orders(i, t)`` fixes an order (for the mean-value
    solution's recourse), None leaves it free."""
    T, S, n_items = spec.periods, len(probabilities), len(kind.items)
    usable = usable_matrix(spec, kind.items)
    upper = order_upper(spec, kind, S)
    scale = np.asarray(getattr(kind, "scale", np.ones(n_items)), dtype=float)
    opex = np.array([spec.buy[name].opex_per_hour * spec.hours_per_period for name in kind.items])
    costs: list[float] = []
    lower: list[float] = []
    uppers: list[float] = []
    integrality: list[int] = []

    def new_column(cost: float, low: float, high: float, integer: bool) -> int:
        costs.append(cost)
        lower.append(low)
        uppers.append(high)
        integrality.append(int(integer))
        return len(costs) - 1

    order_column = np.full((n_items, T, S), -1, dtype=int)  # in the item's units
    scaled_column = np.full((n_items, T, S), -1, dtype=int)  # in units of scale[i]: what the rows use
    binary_column = np.full((n_items, T, S), -1, dtype=int)
    head_rows: list[tuple[list[int], list[float], float, float]] = []
    for i, name in enumerate(kind.items):
        option = spec.buy[name]
        for t in range(T):
            groups = [list(range(S))] if t < shared_until else [[s] for s in range(S)]
            for group in groups:
                weight = float(sum(probabilities[s] for s in group))
                cost = weight * (spec.discount(t + 1) * spec.price(name, t + 1) - salvage_value(spec, name, t + 1))
                high = upper[i, t] / scale[i]
                low = 0.0
                fixed = fixed_orders(i, t) if fixed_orders is not None and t < shared_until else None
                if fixed is not None:
                    low = high = float(fixed) / scale[i]
                column = new_column(cost * scale[i], low, high, kind.integer)
                scaled_column[i, t, group] = order_column[i, t, group] = column
                if scale[i] != 1.0:
                    order_column[i, t, group] = new_column(0.0, 0.0, INF, False)
                    head_rows.append(([int(order_column[i, t, group[0]]), column], [1.0, -scale[i]], 0.0, 0.0))
                if option.min_order > 0 and high > 0:
                    binary_column[i, t, group] = new_column(0.0, 0.0, 1.0, True)
    n_head = len(costs)

    blocks: list[list[PeriodBlock]] = []
    block_offset = np.zeros((T, S), dtype=int)
    add_column = np.full((n_items, T, S), -1, dtype=int)
    offset = n_head
    exact = True
    for t in range(T):
        row = []
        for s in range(S):
            add_cap = (usable[:, :, t] * upper).sum(axis=1)  # in units; the block's columns count scale[i]
            block = kind.block(t, s, add_cap, role)
            exact = exact and block.exact
            block_offset[t, s] = offset
            present = block.capacity_columns >= 0
            add_column[present, t, s] = offset + block.capacity_columns[present]
            offset += block.lp.num_cols
            row.append(block)
        blocks.append(row)

    block_cost = np.zeros(offset - n_head)
    for t in range(T):
        for s in range(S):
            columns = add_column[:, t, s]
            present = columns >= 0
            block_cost[columns[present] - n_head] += (probabilities[s] * spec.discount(t + 1) * opex[present]
                                                      * scale[present])

    # Rows: blocks (block diagonal, shifted right past the head), links, minimum orders, budgets.
    for i in range(n_items):
        for t in range(T):
            for s in range(S):
                entries_cols, entries_vals = [], []
                if add_column[i, t, s] >= 0:
                    entries_cols.append(int(add_column[i, t, s]))
                    entries_vals.append(1.0)
                for tau in np.flatnonzero(usable[i, :, t]):
                    entries_cols.append(int(scaled_column[i, tau, s]))
                    entries_vals.append(-1.0)
                if entries_cols:
                    head_rows.append((entries_cols, entries_vals, 0.0, 0.0))
    for i, name in enumerate(kind.items):
        minimum = spec.buy[name].min_order
        for t in range(T):
            for column, binary in {(int(scaled_column[i, t, s]), int(binary_column[i, t, s])) for s in range(S)}:
                if binary >= 0:
                    head_rows.append(([column, binary], [1.0, -minimum / scale[i]], 0.0, INF))
                    head_rows.append(([column, binary], [1.0, -upper[i, t] / scale[i]], -INF, 0.0))
    for t in range(T):
        budget = spec.budget_of(t + 1)
        if budget is None:
            continue
        for s in range(S):
            cols = [int(scaled_column[i, t, s]) for i in range(n_items)]
            vals = [spec.price(name, t + 1) * scale[i] for i, name in enumerate(kind.items)]
            room = budget
            if spec.budget_covers == "capex+opex":
                room -= kind.existing_opex(t)
                cols += [int(c) for c in add_column[:, t, s] if c >= 0]
                vals += [float(o * k) for o, k, c in zip(opex, scale, add_column[:, t, s], strict=True) if c >= 0]
            head_rows.append((cols, vals, -INF, room))

    block_matrices = [blocks[t][s].lp.matrix for t in range(T) for s in range(S)]
    diagonal = sp.block_diag(block_matrices, format="csr") if block_matrices else sp.csr_matrix((0, 0))
    diagonal = sp.hstack([sp.csr_matrix((diagonal.shape[0], n_head)), diagonal], format="csr")
    rows, cols, vals = [], [], []
    for r, (columns, values, _, _) in enumerate(head_rows):
        rows += [r] * len(columns)
        cols += columns
        vals += values
    head = sp.csr_matrix((vals, (rows, cols)), shape=(len(head_rows), offset))
    matrix = sp.vstack([diagonal, head], format="csr")
    block_lower = np.concatenate([blocks[t][s].lp.row_lower for t in range(T) for s in range(S)])
    block_upper = np.concatenate([blocks[t][s].lp.row_upper for t in range(T) for s in range(S)])
    lp = LinearProgram(
        cost=np.concatenate([np.array(costs), block_cost]),
        matrix=matrix,
        row_lower=np.concatenate([block_lower, [r[2] for r in head_rows]]),
        row_upper=np.concatenate([block_upper, [r[3] for r in head_rows]]),
        col_lower=np.concatenate([np.array(lower), *[blocks[t][s].lp.col_lower for t in range(T) for s in range(S)]]),
        col_upper=np.concatenate([np.array(uppers), *[blocks[t][s].lp.col_upper for t in range(T) for s in range(S)]]),
        sense="min",
        integrality=np.concatenate([np.array(integrality, dtype=int), *[
            blocks[t][s].lp.integrality if blocks[t][s].lp.integrality is not None
            else np.zeros(blocks[t][s].lp.num_cols, dtype=int) for t in range(T) for s in range(S)]]),
    )
    lp.check()
    constant = sum(spec.discount(t + 1) * kind.existing_opex(t) for t in range(T))
    return HorizonModel(lp, order_column, binary_column, add_column, block_offset, blocks, usable, float(constant),
                        exact)


def block_values(model: HorizonModel, values: np.ndarray, period: int, scenario: int) -> np.ndarray:
    """The part of a solution that belongs to one block."""
    start = model.block_offset[period, scenario]
    return values[start: start + model.blocks[period][scenario].lp.num_cols]
