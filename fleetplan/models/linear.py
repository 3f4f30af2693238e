"""A linear program as plain sparse arrays — the form handed to HiGHS without a modelling layer.

Building a model through Pyomo costs more than solving it once jobs number in the tens of
thousands (docs/architecture.md, "Performance practice"); the same formulation assembled here as a CSR
matrix goes to ``highspy.Highs.passModel`` in a fraction of a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from fleetplan.lazy import lazy_module

sp = lazy_module("scipy.sparse")


@dataclass(frozen=True)
class ColumnMatrix:
    """A sparse matrix as compressed columns (``indptr``, row ``indices``, ``data``), the layout
    HiGHS takes, for an LP built column by column: handed over as it is, where a scipy matrix
    would first check a layout its builder made itself (0.08 ms of the 1 ms a 2,048-job LAS
    solve's reduced LP takes). :meth:`tocsc` is itself; :meth:`tocsr` the scipy matrix.

    >>> m = ColumnMatrix(np.array([1.0, 2.0, 3.0]), np.array([0, 1, 1]), np.array([0, 2, 3]), (2, 2))
    >>> m.tocsr().toarray().tolist()
    [[1.0, 0.0], [2.0, 3.0]]
    """

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]

    def tocsc(self) -> ColumnMatrix:
        return self

    def tocsr(self) -> sp.csr_matrix:
        return sp.csc_matrix((self.data, self.indices, self.indptr), shape=self.shape).tocsr()


@dataclass
class LinearProgram:
    """``optimize c @ x`` subject to ``row_lower <= A @ x <= row_upper`` and column bounds.

    ``integrality`` (optional) marks integer columns with 1, continuous with 0.
    ``names`` maps a block of columns to a slice, so callers can read their variables back.
    """

    cost: np.ndarray
    matrix: sp.csr_matrix | ColumnMatrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    sense: Literal["min", "max"] = "min"
    integrality: np.ndarray | None = None
    names: dict[str, slice] = field(default_factory=dict)

    @property
    def num_cols(self) -> int:
        return int(self.cost.shape[0])

    @property
    def num_rows(self) -> int:
        return int(self.matrix.shape[0])

    def check(self) -> None:
        """Shapes agree (a bug guard for model builders, not user-input validation)."""
        rows, cols = self.matrix.shape
        assert cols == self.num_cols == len(self.col_lower) == len(self.col_upper)
        assert rows == len(self.row_lower) == len(self.row_upper)


INF = float("inf")
