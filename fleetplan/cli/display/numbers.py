"""Numbers as the command prints them: counts with thousands separators, gaps as percentages,
bytes and seconds in readable units, a metric in its glossary unit's one format.

>>> fmt_gap(0.0123), fmt_gap(1e-9), fmt_number(18000.0)
('1.23%', '0%', '18,000')
"""

from __future__ import annotations

import math

# Rows of a plan shown before "... N more" (the per-kind views and the plan renderer).
PREVIEW_ROWS = 10

# An infinite value printed as what it means, never "inf" (the JSON holds null): a VSS is
# infinite when the mean scenario's orders leave some scenario unservable. Any other infinite
# or NaN value (an infeasible sizing's bound) prints as "-", as a missing one does.
INFINITE_MEANINGS = {"vss": "mean plan unservable"}


def _not_finite(value: object, name: str | None = None) -> str | None:
    """The text for a NaN or infinite ``value``, or None for a finite one."""
    if isinstance(value, float) and not math.isfinite(value):
        return INFINITE_MEANINGS.get(name or "", "-") if value > 0 else "-"
    return None


def fmt(value: float | None, digits: int = 6) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}"


def fmt_number(value: float | None, digits: int = 6) -> str:
    """A count or an amount as a planner writes it: 18,000 (not 1.8e+04), 3.2, 568."""
    from fleetplan.instances.glossary import fmt_number as glossary_number

    if value is None:
        return "-"
    return _not_finite(value) or glossary_number(value, digits)


def fmt_gap(gap: float | None) -> str:
    """A relative gap as a percentage; below 1e-6 it is 0% (solver noise, not a gap)."""
    if gap is None:
        return "-"
    return "0%" if gap < 1e-6 else f"{100 * gap:.3g}%"


def fmt_bytes(value: float) -> str:
    from fleetplan.instances.glossary import fmt_bytes as glossary_bytes

    return glossary_bytes(value)


def fmt_seconds(value: float) -> str:
    from fleetplan.instances.glossary import fmt_duration

    return fmt_duration(value)


def fmt_measure(name: str, value: float | None, digits: int = 6, scope: str | None = None) -> str:
    """A metric in its unit's one format, from the glossary (:func:`fleetplan.instances.glossary.format_value`):
    a fraction always as a percentage, bytes as GB/TB, seconds as a readable duration — never
    chosen by the value (1.0957 and 0.6794 of one metric print alike)."""
    from fleetplan.instances.glossary import format_value

    if value is not None and (name == "gap" or name.endswith("_gap")):  # a gap prints one way everywhere
        return _not_finite(value, name) or fmt_gap(value)
    return _not_finite(value, name) or format_value(name, value, digits, scope)


