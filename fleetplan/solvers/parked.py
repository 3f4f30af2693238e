"""Queue entries the hill climb holds out of its heap while they are over the budget.

:func:`fleetplan.solvers.hill_climb.hill_climb` takes every entry whose item cannot move within
what is left of the cost budget out of its queue at once (``_Climb.park``) and puts back those
that fit when a move frees budget (``_Climb.unpark``). At 10^6 tables, with the daily byte quota
nearly used, that is hundreds of thousands of entries, and each of the hundreds of moves that
send a table back home (freeing a little quota) looks at all of them. Held as Python tuples,
each look converted every item's bound to an array and rebuilt two lists: about 30 ms a time,
half of the climb's last phase. Here they are numpy columns in key order, each entry's bound
recorded when it was parked (a parked item does not move, so its bound does not change), and
a look costs a comparison of one column with the budget.

>>> parked = ParkedEntries.of([(-2.0, 7, 1), (-3.0, 4, 0), (-1.0, 9, 2)], [5.0, 1.0, 9.0])
>>> len(parked), parked.entry(0), parked.first_after((-2.5, 0, 0))
(3, (-3.0, 4, 0), 1)
>>> back, stay = parked.split(parked.bound <= 5.0)
>>> back, stay.entries()
([(-3.0, 4, 0), (-2.0, 7, 1)], [(-1.0, 9, 2)])
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

import numpy as np

Entry = tuple[float, int, int]  # the climb's queue key: (-gain, item, target)


class ParkedEntries:
    """Parked queue entries in key order (``neg_gain``, then ``item``, then ``target``, as
    the tuples compare), with ``bound``: each item's lower bound of cost when parked."""

    def __init__(self, neg_gain: np.ndarray | None = None, item: np.ndarray | None = None,
                 target: np.ndarray | None = None, bound: np.ndarray | None = None) -> None:
        self.neg_gain = np.zeros(0) if neg_gain is None else neg_gain
        self.item = np.zeros(0, dtype=np.int64) if item is None else item
        self.target = np.zeros(0, dtype=np.int64) if target is None else target
        self.bound = np.zeros(0) if bound is None else bound
        # first_after's last answer and the mark it was asked for: the climb's mark only grows
        # until the entries are rebuilt, so the next answer is found from there.
        self._pos = 0
        self._pos_mark: Entry | None = None

    @classmethod
    def of(cls, entries: Sequence[Entry], bounds: Sequence[float] | np.ndarray) -> ParkedEntries:
        """Entries (any order) with their items' bounds."""
        count = len(entries)
        neg_gain = np.fromiter(map(itemgetter(0), entries), dtype=float, count=count)
        item = np.fromiter(map(itemgetter(1), entries), dtype=np.int64, count=count)
        target = np.fromiter(map(itemgetter(2), entries), dtype=np.int64, count=count)
        return cls._sorted(neg_gain, item, target, np.asarray(bounds, dtype=float).reshape(count))

    @classmethod
    def _sorted(cls, neg_gain: np.ndarray, item: np.ndarray, target: np.ndarray, bound: np.ndarray
                ) -> ParkedEntries:
        order = np.lexsort((target, item, neg_gain))
        return cls(neg_gain[order], item[order], target[order], bound[order])

    def __len__(self) -> int:
        return int(self.item.size)

    def entry(self, index: int) -> Entry:
        return float(self.neg_gain[index]), int(self.item[index]), int(self.target[index])

    def entries(self) -> list[Entry]:
        return list(zip(self.neg_gain.tolist(), self.item.tolist(), self.target.tolist(), strict=True))

    def first_after(self, mark: Entry | None) -> int:
        """The index of the first entry whose key is above ``mark`` (None: 0)."""
        if mark is None:
            return 0
        if self._pos_mark is None or mark < self._pos_mark:
            # Entries with a smaller gain key, then (same key) a smaller item, come first.
            low = int(np.searchsorted(self.neg_gain, mark[0], side="left"))
            high = int(np.searchsorted(self.neg_gain, mark[0], side="right"))
            self._pos = low + int(np.searchsorted(self.item[low:high], mark[1], side="left"))
        position, size = self._pos, len(self)
        while position < size and self.entry(position) <= mark:
            position += 1
        self._pos, self._pos_mark = position, mark
        return position

    def after(self, mark: Entry | None) -> ParkedEntries:
        """The entries above ``mark`` (all of them when it is None)."""
        start = self.first_after(mark)
        if start == 0:
            return self
        return ParkedEntries(self.neg_gain[start:], self.item[start:], self.target[start:], self.bound[start:])

    def merged(self, other: ParkedEntries) -> ParkedEntries:
        """These entries and ``other``'s, in key order."""
        if not len(other):
            return self
        if not len(self):
            return other
        return self._sorted(np.concatenate([self.neg_gain, other.neg_gain]), np.concatenate([self.item, other.item]),
                            np.concatenate([self.target, other.target]), np.concatenate([self.bound, other.bound]))

    def split(self, back: np.ndarray) -> tuple[list[Entry], ParkedEntries]:
        """The entries where ``back`` (a mask) is true, as tuples, and the others still parked."""
        taken = np.flatnonzero(back)
        returned = list(zip(self.neg_gain[taken].tolist(), self.item[taken].tolist(), self.target[taken].tolist(),
                            strict=True))
        stay = ~back
        return returned, ParkedEntries(self.neg_gain[stay], self.item[stay], self.target[stay], self.bound[stay])
