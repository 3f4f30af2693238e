"""Service targets: ``METRIC>=VALUE`` or ``METRIC<=VALUE`` over a kind's service metrics.

The metrics are the judges' (``evaluate(instance, plan).metrics``), in absolute units that mean
the same on any instance (docs/metrics.md). A target names one metric, the direction a planner
wants it to move and the value; :func:`parse_target` checks it against what each kind can be
sized for (:data:`TARGETABLE`).

>>> target = parse_target("min_time_share>=0.5", "allocation")
>>> target.metric, target.op, target.value
('min_time_share', '>=', 0.5)
>>> target.holds({"min_time_share": 0.5})
True
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from fleetplan.errors import InstanceError

Op = Literal[">=", "<="]

# Per kind: the metrics a target may name, the one direction that makes sense for each, and what
# the target asks (for messages and docs).
TARGETABLE: dict[str, dict[str, tuple[Op, str]]] = {
    "allocation": {
        "min_time_share": (">=", "every job holds GPUs at least this fraction of the time"),
        "min_throughput_vs_fastest": (">=", "every job runs at least this multiple of its speed alone on its "
                                            "fastest GPU type"),
        "min_speedup_over_isolated": (">=", "every job gets at least this multiple of its isolated 1/n share "
                                            "(relative to the sized cluster)"),
        "slo_missed_jobs": ("<=", "jobs whose SLO is missed (only 0 can be sized for)"),
        "makespan_s": ("<=", "every job finishes its steps within this many seconds"),
        "total_throughput": (">=", "the sum of every job's effective throughput (steps/s)"),
    },
    "placement": {
        "hp_demand_supply_max": ("<=", "the largest high-priority GPU demand/supply ratio of a region (every GPU "
                                       "type pooled, as MAST §5.6 reports it)"),
        "hp_demand_supply_max_per_type": ("<=", "the largest high-priority demand/supply ratio of a (region, GPU "
                                                "type) with supply: a purchase serves the type that is short"),
        "hp_gpu_hours_unserved": ("<=", "high-priority GPU-hours above supply, summed over regions and types"),
        "storage_over_capacity_bytes": ("<=", "bytes stored above capacity, summed over regions"),
    },
    "reservation": {
        "shortfall_rru": ("<=", "RRU by which reservations fall short of their request under their guarantee"),
    },
    "binpack": {
        "unplaced_workloads": ("<=", "pending workloads that do not place (only 0 can be sized for)"),
        "preempted_jobs": ("<=", "running jobs preempted to place them (only 0 can be sized for)"),
    },
    "gpushare": {
        "tasks_pending": ("<=", "tasks left pending (only 0 can be sized for)"),
    },
}

# The values a target may take whatever the instance, checked when it is read (so a sizing
# sweep refuses a bad value before its first point runs): (lowest, highest, lowest included).
# The kinds' sizers keep the checks that need the instance.
_VALUE_RANGES: dict[str, tuple[float, float, bool, str]] = {
    "min_time_share": (0.0, 1.0, True, "min_time_share must be >= 0 and at most 1 (a fraction of time)"),
    "min_throughput_vs_fastest": (0.0, math.inf, True, "min_throughput_vs_fastest must be >= 0"),
    "min_speedup_over_isolated": (0.0, math.inf, True, "min_speedup_over_isolated must be >= 0"),
    "total_throughput": (0.0, math.inf, True, "total_throughput must be >= 0"),
    "makespan_s": (0.0, math.inf, False, "makespan_s must be a positive number of seconds"),
    "hp_demand_supply_max": (0.0, math.inf, False, "hp_demand_supply_max must be positive"),
    "hp_demand_supply_max_per_type": (0.0, math.inf, False, "hp_demand_supply_max_per_type must be positive"),
    "hp_gpu_hours_unserved": (0.0, math.inf, True, "hp_gpu_hours_unserved must be >= 0"),
    "storage_over_capacity_bytes": (0.0, math.inf, True, "storage_over_capacity_bytes must be >= 0"),
    "slo_missed_jobs": (0.0, 0.0, True, "only slo_missed_jobs<=0 can be sized for (every SLO met)"),
    "shortfall_rru": (0.0, 0.0, True, "only shortfall_rru<=0 can be sized for (every request met)"),
    "unplaced_workloads": (0.0, 0.0, True, "only unplaced_workloads<=0 can be sized for"),
    "preempted_jobs": (0.0, 0.0, True, "only preempted_jobs<=0 can be sized for"),
    "tasks_pending": (0.0, 0.0, True, "only tasks_pending<=0 can be sized for"),
}

# A measured value within this (relative, and absolute for values near 0) of the target meets it:
# LP solutions are feasible only to about 1e-7.
TOLERANCE = 1e-6

_PATTERN = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|=>|=<|>|<|=)\s*(.+?)\s*$")


@dataclass(frozen=True)
class Target:
    """``metric op value``: what a plan's evaluation must show."""

    metric: str
    op: Op
    value: float

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"

    def holds(self, metrics: dict[str, float]) -> bool:
        """Whether ``metrics`` (an evaluation's) meet the target, to :data:`TOLERANCE`."""
        measured = metrics.get(self.metric)
        if measured is None or not math.isfinite(measured):
            return False
        slack = TOLERANCE * max(1.0, abs(self.value))
        return measured >= self.value - slack if self.op == ">=" else measured <= self.value + slack

    def shortfall(self, metrics: dict[str, float]) -> float:
        """How far ``metrics`` are from the target in the metric's units (0 when met)."""
        measured = metrics.get(self.metric, math.nan)
        if not math.isfinite(measured):
            return math.inf
        gap = self.value - measured if self.op == ">=" else measured - self.value
        return max(gap, 0.0)


def parse_target(text: str, kind: str) -> Target:
    """``"min_time_share>=0.5"`` -> :class:`Target`, checked against the kind's metrics."""
    known = TARGETABLE.get(kind)
    if known is None:
        raise InstanceError("--target", f"no sizing targets for kind '{kind}'")
    match = _PATTERN.match(text) if len(text) < 200 else None
    if match is None:
        raise InstanceError("--target", f"'{text[:60]}': expected METRIC>=VALUE or METRIC<=VALUE "
                                        f"(metrics of {kind}: {', '.join(known)})")
    metric, op, raw = match.groups()
    if metric not in known:
        close = [name for name in known if metric in name or name in metric]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InstanceError("--target", f"unknown metric '{metric}' for {kind} (known: {', '.join(known)}){hint}")
    wanted, meaning = known[metric]
    if op in (">", "<"):
        # A strict bound has no cheapest answer (any amount above the bound can be shaved), and
        # reading it as >= would call a plan that only reaches the bound a success.
        raise InstanceError("--target", f"'{text}': a target is METRIC>=VALUE (at least) or METRIC<=VALUE "
                                        f"(at most), not a strict '{op}': write {metric}{op}=VALUE")
    op = {"=>": ">=", "=<": "<="}.get(op, op)
    if op != wanted:
        raise InstanceError("--target", f"'{text}': {metric} is sized from one side only: {metric}{wanted}VALUE "
                                        f"({meaning})")
    try:
        value = float(raw)
    except ValueError:
        raise InstanceError("--target", f"'{text}': '{raw[:30]}' is not a number") from None
    if not math.isfinite(value):
        raise InstanceError("--target", f"'{text}': the value must be finite")
    target = Target(metric, op, value)  # type: ignore[arg-type]
    check_target_value(target, text)
    return target


def check_target_value(target: Target, text: str | None = None) -> None:
    """Refuse a value ``target``'s metric can never take as a target, whatever the instance
    (a time share above 1, a makespan of 0 s, a shortfall above 0); one error naming
    ``--target``. The kinds' sizers keep the checks that need the instance.

    >>> check_target_value(Target("min_time_share", ">=", 1.5))
    Traceback (most recent call last):
    ...
    fleetplan.errors.InstanceError: --target: 'min_time_share>=1.5': min_time_share must be >= 0 and at most 1 (a fraction of time)
    """
    if target.metric in _VALUE_RANGES:
        low, high, closed, rule = _VALUE_RANGES[target.metric]
        if target.value > high or target.value < low or (target.value == low and not closed):
            raise InstanceError("--target", f"'{text or f'{target.metric}{target.op}{target.value:g}'}': {rule}")


def parse_targets(texts: list[str], kind: str) -> list[Target]:
    """Every ``--target``; at least one, no metric twice."""
    if not texts:
        raise InstanceError("--target", f"give at least one target (metrics of {kind}: "
                                        f"{', '.join(TARGETABLE.get(kind, {}))})")
    targets = [parse_target(text, kind) for text in texts]
    seen: set[str] = set()
    for target in targets:
        if target.metric in seen:
            raise InstanceError("--target", f"{target.metric} is targeted twice")
        seen.add(target.metric)
    return targets
