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


@dataclass
class LinearProgram:
    """``optimize c @ x`` subject to ``row_lower <= A @ x <= row_upper`` and column bounds.

    ``integrality`` (optional) marks integer columns with 1, continuous with 0.
    ``names`` maps a block of columns to a slice, so callers can read their variables back.
    """

    cost: np.ndarray
    matrix: sp.csr_matrix
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
