"""The rows the RAS models share (the exact model and its relaxation): a COO accumulator, the
move rows (a key keeps today's servers unless moves pay for it, within the budget) and the
storage-to-compute ratio rows."""

from __future__ import annotations

import numpy as np

from fleetplan.instances.reservation import STORAGE


class RowBuilder:
    """COO accumulator: add blocks of (row, col, value) and row bounds."""

    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self.cols: list[np.ndarray] = []
        self.vals: list[np.ndarray] = []
        self.lower: list[np.ndarray] = []
        self.upper: list[np.ndarray] = []
        self.count = 0

    def block(self, num: int, lower, upper) -> int:
        start = self.count
        self.lower.append(np.broadcast_to(np.asarray(lower, dtype=float), (num,)).copy())
        self.upper.append(np.broadcast_to(np.asarray(upper, dtype=float), (num,)).copy())
        self.count += num
        return start

    def add(self, rows, cols, vals) -> None:
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        self.rows.append(rows)
        self.cols.append(cols)
        self.vals.append(np.broadcast_to(np.asarray(vals, dtype=float), rows.shape).copy())


def move_rows(rows: RowBuilder, with_c0: np.ndarray, c0: np.ndarray, budget_room: float, x0: int, m0: int) -> None:
    """``x + m >= c0`` for the keys holding servers today (``with_c0``, their counts ``c0``; m
    the moves column of each), and ``sum m <= budget_room`` when the budget is finite."""
    if with_c0.size:
        start = rows.block(with_c0.size, c0, np.inf)
        rows.add(start + np.arange(with_c0.size), x0 + with_c0, 1.0)
        rows.add(start + np.arange(with_c0.size), m0 + np.arange(with_c0.size), 1.0)
    if np.isfinite(budget_room):
        start = rows.block(1, -np.inf, budget_room)
        rows.add(np.full(with_c0.size, start), m0 + np.arange(with_c0.size), 1.0)


def ratio_rows(rows: RowBuilder, arrays, key_res: np.ndarray, key_type: np.ndarray, cap: np.ndarray,
                chosen: np.ndarray, inverse: np.ndarray, num_pairs: int, x0: int, e0: int) -> None:
    """``e -/+ (storage - ratio * compute) >= 0`` per (reservation, datacenter) pair: the keys
    ``chosen`` (of reservations with a ratio) summed into their pair ``inverse``."""
    storage = arrays.type_category[key_type[chosen]] == STORAGE
    signed = np.where(storage, 1.0, -arrays.res_ratio[key_res[chosen]]) * cap[chosen]
    for sign in (1.0, -1.0):
        start = rows.block(num_pairs, 0.0, np.inf)
        rows.add(start + np.arange(num_pairs), e0 + np.arange(num_pairs), 1.0)
        rows.add(start + inverse, x0 + chosen, -sign * signed)
