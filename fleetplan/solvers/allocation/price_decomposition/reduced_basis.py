"""A max-min reduced LP's simplex basis kept by what each status belongs to, so that it can
start another reduced LP: a neighbouring problem's (one GPU more changes a capacity row's
right-hand side only) or the next round's, whose free set has grown
(:mod:`~fleetplan.solvers.allocation.price_decomposition.separable_structure`).

The reduced LP (:func:`~fleetplan.solvers.allocation.price_decomposition.separable.reduced_lp`) has rows (each
free job's score row, then each free job's time row, then one capacity row per type) and
columns (each free job's cells, in job then type order, then the level t).

>>> import numpy as np
>>> basis = ReducedBasis(np.array([4]), np.array([4 * 2 + 0]), np.array([1], dtype=np.int8), 1,
...                      np.array([0], dtype=np.int8), np.array([1], dtype=np.int8), np.array([1, 0], dtype=np.int8))
>>> columns, rows = basis.start_for(np.array([4, 7]), np.array([8, 14, 15]), 2)   # job 7 freed since
>>> columns.tolist(), rows.tolist()   # job 7's cells at zero, its score and time rows basic
([1, 0, 0, 1], [0, 1, 1, 1, 1, 0])
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# HiGHS's basis status codes (HighsBasisStatus), kept as int8 in a ReducedBasis.
_AT_LOWER, _BASIC = 0, 1


@dataclass
class ReducedBasis:
    """A max-min reduced LP's optimal simplex basis, each status keyed by what it belongs to
    (a free job's score and time rows, a (job, type) cell, t, a capacity row). Started from it,
    the dual simplex of a neighbour's reduced LP takes a few pivots instead of about a hundred
    from a slack basis (0-6 against 74-109 for one GPU more or fewer of 16,384 jobs' 4 types)."""

    free_jobs: np.ndarray  # sorted job indices
    cell_keys: np.ndarray  # job * K + type, sorted (the LP's column order)
    cell_status: np.ndarray
    t_status: int
    score_status: np.ndarray  # per free job
    time_status: np.ndarray
    capacity_status: np.ndarray  # per type
    # Buffers a re-solve from this basis borrows and gives back (each taken with dict.pop, so
    # two threads never share one): the certificate's (jobs, vertices) costs, whose fresh pages
    # cost a 16,384-job re-solve more than pricing the vertices itself.
    scratch: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def start_for(self, free_jobs: np.ndarray, cell_keys: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(column, row) statuses for the reduced LP over ``free_jobs`` with columns
        ``cell_keys``: kept where the row or column was in this basis, a new job's rows basic and
        its cells at zero (a valid basis: one basic per row); None where the counts do not add up
        (a cell this basis had basic is gone)."""
        if len(self.capacity_status) != K:
            return None
        rows = _kept(self.free_jobs, free_jobs)
        columns = _kept(self.cell_keys, cell_keys)
        col_status = np.append(np.where(columns >= 0, self.cell_status[np.maximum(columns, 0)], _AT_LOWER),
                               self.t_status).astype(np.int8)
        row_status = np.concatenate([np.where(rows >= 0, self.score_status[np.maximum(rows, 0)], _BASIC),
                                     np.where(rows >= 0, self.time_status[np.maximum(rows, 0)], _BASIC),
                                     self.capacity_status]).astype(np.int8)
        if int((col_status == _BASIC).sum() + (row_status == _BASIC).sum()) != len(row_status):
            return None
        return col_status, row_status


def _kept(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Each of ``new``'s (sorted, distinct) keys' position in ``old`` (sorted), or -1."""
    if not len(old):
        return np.full(len(new), -1)
    where = np.minimum(np.searchsorted(old, new), len(old) - 1)
    return np.where(old[where] == new, where, -1)
