"""A Lagrangian bound for the aggregated RAS MIP (MAST §2) where the model's own LP is too
large, by the textbook decomposition (Fisher, "The Lagrangian relaxation
method for solving integer programming problems", Management Science 27(1), 1981).

The reservations are coupled only by the supply rows ``sum_r x[r, g] <= available[g]`` and
the disruption budget ``sum m <= room``. Price the budget at ``price >= 0`` per server moved
and take every other reservation out of each supply row (their counts are >= 0 on a ``<=``
row, so that only loosens it): what is left is one MIP per reservation, with its own fault
domains, guarantees and datacenter binaries, and

    sum_r (least cost of reservation r's MIP, moves priced) - price * room

is a lower bound on the model's optimum for any ``price >= 0``. Any lower bound on each MIP
(HiGHS's dual bound when it stops early) keeps it a bound. Unlike the datacenter relaxation
(:mod:`fleetplan.models.reservation.relaxation`) it keeps each fault domain and each binary
whole, which is where that relaxation is weak at 10^6 servers (benchmarks/results/reservation.md,
"RAS at 10^6: the Lagrangian pass"). The first price is the budget row's dual in the
datacenter relaxation's LP; while time is left, :class:`PriceSearch` moves it towards the best
one (the bound is concave in the price, and the servers the reservations' solutions move, less
the budget, is its slope: a bisection on that slope's sign). On the 20,000-server test region
(``tests/test_reservation_neighbourhood.py``) the first price, 2.135, bounds at 12,647.2 and
price 3 at 12,796.6, where the best plan known is 12,809.9 (benchmarks/results/reservation.md,
"The price of a move").

Each reservation's MIP is also a move of the search (:mod:`.neighbourhood`): its optimum,
with the current plan's supply put back, is often still feasible.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fleetplan.models.linear import LinearProgram


def budget_row(lp: LinearProgram) -> int | None:
    """The disruption budget's row of a reservation model or relaxation: the row holding every
    move column ``m`` and nothing else (the rows ``x + m >= c0`` hold an ``x`` too). None when
    the budget is infinite or nothing is held today (no such row)."""
    moves = lp.names["m"]
    count = moves.stop - moves.start
    if count == 0:
        return None
    in_row = np.diff(lp.matrix.tocsr().indptr)
    moves_in_row = np.diff(lp.matrix[:, moves].tocsr().indptr)
    rows = np.flatnonzero((moves_in_row == count) & (in_row == count))
    return int(rows[0]) if rows.size else None


def budget_price(lp: LinearProgram, row_dual: np.ndarray) -> float:
    """The price per server moved: the budget row's dual in a solved LP of ``lp`` (0 without a
    budget). HiGHS's sign for a binding ``<=`` row of a minimisation is negative."""
    row = budget_row(lp)
    return 0.0 if row is None else abs(float(row_dual[row]))



def subproblem(lp: LinearProgram, csc, cols: np.ndarray, budget: int | None, price: float) -> LinearProgram:
    """Reservation-alone MIP over ``cols`` (the columns of one reservation, every other column
    at 0): its rows but the budget's, each with the full row bounds, the moves priced at
    ``price``. Its optimum is that reservation's term of the Lagrangian bound."""
    matrix = csc[:, cols].tocsr()
    rows = np.flatnonzero(np.diff(matrix.indptr) > 0)
    if budget is not None:
        rows = rows[rows != budget]
    cost = lp.cost[cols].copy()
    moves = lp.names["m"]
    cost[(cols >= moves.start) & (cols < moves.stop)] += price
    return LinearProgram(cost=cost, matrix=matrix[rows], row_lower=lp.row_lower[rows].copy(),
                         row_upper=lp.row_upper[rows].copy(), col_lower=lp.col_lower[cols].copy(),
                         col_upper=lp.col_upper[cols].copy(), integrality=lp.integrality[cols].copy())


def servers_moved(lp: LinearProgram, cols: np.ndarray, values: np.ndarray) -> float:
    """Servers moved by a reservation's solution ``values`` on its columns ``cols`` (the sum of
    its move columns, rounded): its share of the bound's slope in the price."""
    moves = lp.names["m"]
    return float(np.round(values[(cols >= moves.start) & (cols < moves.stop)]).sum())


def lagrangian_bound(sub_bounds: np.ndarray, lp: LinearProgram, budget: int | None, price: float,
                     constant: float) -> float | None:
    """The bound from the reservations' MIP bounds ``sub_bounds`` (objective constant
    included); None unless every reservation has a finite one."""
    if sub_bounds.size == 0 or not np.all(np.isfinite(sub_bounds)):
        return None
    room = 0.0 if budget is None else float(lp.row_upper[budget])
    return float(sub_bounds.sum()) - price * room + constant


# The price search's steps: up by this factor while the solutions move more than the budget
# (no price is known yet at which they move less), and stop once the bracket is this narrow
# (relative) or after this many passes.
PRICE_GROWTH = 1.5
PRICE_TOLERANCE = 0.05
MAX_PASSES = 8


@dataclasses.dataclass
class PriceSearch:
    """Bisection on the budget's price by the sign of the bound's slope: the servers moved by
    the reservations' solutions at ``price``, less the budget's room. Positive: a higher price
    bounds higher (``lower`` rises to it); negative: a lower one does (``upper`` falls to it).

    ``scale`` is the first positive price to try when the relaxation's is 0."""

    price: float
    scale: float
    lower: float = 0.0
    upper: float | None = None
    passes: int = 0

    def next(self, moved: float, room: float) -> float | None:
        """The price of the next pass after one at ``self.price`` whose solutions moved
        ``moved`` servers, or None when the search is done."""
        self.passes += 1
        slope = moved - room
        if slope > 0:
            self.lower = max(self.lower, self.price)
        elif slope < 0:
            self.upper = self.price if self.upper is None else min(self.upper, self.price)
        if slope == 0 or self.passes >= MAX_PASSES:
            return None
        if self.upper is None:
            self.price = self.price * PRICE_GROWTH if self.price > 0 else self.scale
        elif self.upper - self.lower <= PRICE_TOLERANCE * self.upper:
            return None
        else:
            self.price = (self.lower + self.upper) / 2
        return self.price
