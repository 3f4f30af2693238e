"""Markdown helpers shared by the report and its simulation sections."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def fmt_value(value: Any, digits: int = 4) -> str:
    """A table cell: ``-`` for missing or non-finite values, floats to ``digits`` significant digits."""
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:.{digits}g}"
    return str(value)


def markdown_table(header: Sequence[str], lines: Sequence[Sequence[Any]]) -> list[str]:
    """A Markdown table (one string per line) with every cell formatted by :func:`fmt_value`."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(fmt_value(cell) for cell in line) + " |" for line in lines]
    return out
