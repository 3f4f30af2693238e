"""(jobs, types) tables as an allocation plan's rows: row sums and maxima at numpy's numbers
without its strided reductions, and a plan field of rows made only when read.

>>> import numpy as np
>>> row_sums(np.array([[1.0, 2.0, 3.0], [0.5, 0.25, 0.0]])).tolist()
[6.0, 0.75]
"""

from __future__ import annotations

import gc
from typing import Any, ClassVar

import numpy as np

# Rows at most this long are summed column by column (see row_sums).
SHORT_ROW = 7


def row_sums(values: np.ndarray) -> np.ndarray:
    """``values.sum(axis=1)`` of a (jobs, types) table, the same numbers: numpy reduces a row
    shorter than 8 from the left, one strided pass per job, and added column by column it is
    the same sums in 8 times less time (0.03 ms against 0.27 at 16,384 x 4; the judge sums
    four such tables). Longer rows go to numpy (its pairwise sums from 8 on)."""
    if values.ndim != 2 or not 0 < values.shape[1] <= SHORT_ROW:
        return values.sum(axis=1)
    total = values[:, 0].copy()
    for column in range(1, values.shape[1]):
        total += values[:, column]
    return total


def row_max(values: np.ndarray) -> np.ndarray:
    """``values.max(axis=1)`` (NaN propagates as there), column by column at any width: a
    maximum is exact in any order (2,048 x 3: 5 us against numpy's 72; see :func:`row_sums`)."""
    if values.ndim != 2 or values.shape[1] == 0:
        return values.max(axis=1)
    top = values[:, 0].copy()
    for column in range(1, values.shape[1]):
        np.maximum(top, values[:, column], out=top)
    return top


def rows_of(matrix: np.ndarray) -> list[list[float]]:
    """``matrix.tolist()`` with the cyclic garbage collector paused: the rows are lists of floats
    (no cycle to find), and the collections their making triggers took three quarters of the
    time (0.52 s against 0.14 s for 10^6 x 3)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return matrix.tolist()
    finally:
        if collecting:
            gc.enable()


class LazyRows:
    """For a pydantic model whose field :attr:`lazy_field` (a list of rows) may be left out of
    its dict while the private array ``_pending_rows`` holds them: the rows are made when the
    field is first read, and every public way of reading the model — its fields, dumps,
    comparison, copies, pickles, repr — reads them. A what-if or marginal-values re-solve reads
    only the judge's numbers, and 16,384 rows of Python floats cost 3 ms to make and more to
    free (a quarter of such a re-solve).

    One way does not: another pydantic model holding such a model as a field serialises the
    field from its dict (a wrap serializer here would cover it, but would blank the model's
    serialization schema), so call :meth:`materialise` before nesting one (nothing in fleetplan
    nests a plan: a ``SolveResult`` is a dataclass that dumps its plan itself)."""

    lazy_field: ClassVar[str] = "allocation"

    def __getattr__(self, name: str) -> Any:
        # Called only when the name is not in the instance's dict: a lazy model's rows.
        if name == self.lazy_field:
            pending = (self.__pydantic_private__ or {}).get("_pending_rows")  # type: ignore[attr-defined]
            if pending is not None:
                rows = rows_of(pending)
                # In the fields' order, as an eager model's dict (its repr, dict(model)) has them.
                values = self.__dict__
                ordered = {field: rows if field == name else values[field]
                           for field in type(self).model_fields if field in values or field == name}  # type: ignore[attr-defined]
                values.clear()
                values.update(ordered)
                self._pending_rows = None
                return rows
        return super().__getattr__(name)  # type: ignore[misc]

    def materialise(self) -> Any:
        """Make the rows now (they are made when first read otherwise); returns the model."""
        if self.lazy_field not in self.__dict__:
            getattr(self, self.lazy_field)
        return self

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return super(LazyRows, self.materialise()).model_dump(**kwargs)  # type: ignore[misc]

    def model_dump_json(self, **kwargs: Any) -> str:
        return super(LazyRows, self.materialise()).model_dump_json(**kwargs)  # type: ignore[misc]

    def model_copy(self, **kwargs: Any) -> Any:
        return super(LazyRows, self.materialise()).model_copy(**kwargs)  # type: ignore[misc]

    def __eq__(self, other: object) -> bool:
        # The fields decide (BaseModel's also compares the private arrays, which are caches of
        # them, and an array refuses to be a truth value).
        if not isinstance(other, LazyRows):
            return NotImplemented
        return type(self) is type(other) and self.materialise().__dict__ == other.materialise().__dict__

    __hash__ = None  # type: ignore[assignment]  (mutable models, as BaseModel's)

    def __iter__(self) -> Any:
        return super(LazyRows, self.materialise()).__iter__()  # type: ignore[misc]

    def __repr_args__(self) -> Any:
        return super(LazyRows, self.materialise()).__repr_args__()  # type: ignore[misc]

    def __getstate__(self) -> dict[Any, Any]:
        return super(LazyRows, self.materialise()).__getstate__()  # type: ignore[misc]

    def __copy__(self) -> Any:
        return super(LazyRows, self.materialise()).__copy__()  # type: ignore[misc]

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        return super(LazyRows, self.materialise()).__deepcopy__(memo)  # type: ignore[misc]


__all__ = ["LazyRows", "row_max", "row_sums", "rows_of"]
