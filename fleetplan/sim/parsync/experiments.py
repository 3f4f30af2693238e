"""The paper's experiments as functions: §4.3/§5.2's "extra slots" search (Figures 2-3) and
§6.4's slot-quality table (Table 1), and the scenarios of Figures 3 and 5.
``python -m fleetplan.benchmarks.experiments.parsync`` runs them at the paper's scale (or 1/10
of it) as JSON lines and draws them (the drawing is :mod:`fleetplan.plotting.parsync`'s: a
simulator draws nothing)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from fleetplan.sim.parsync.core import simulate
from fleetplan.sim.parsync.scenario import FIVE_PHASES, Scenario, paper_scenario


def finishes_in_time(scenario: Scenario, scheduler: str, seed: int = 0, slack: float = 1.1) -> bool:
    """§4.3's criterion of a small delay: every task committed within slack x the submission period."""
    bounded = scenario.model_copy(update={"drain_s": (slack - 1) * scenario.duration_s})
    m = simulate(bounded, scheduler, seed).metrics
    return m["finished"] == 1.0 and m["makespan_s"] <= slack * scenario.duration_s


def min_extra_slots(scenario: Scenario, scheduler: str, seed: int = 0, *, slack: float = 1.1,
                    resolution: int | None = None, limit: int | None = None,
                    start: int | None = None,
                    on_probe: Callable[[int, bool], None] | None = None) -> int | None:
    """The fewest slots to add to ``scenario.slots`` for the run to finish in time (§4.3, Fig. 3).

    A bisection over multiples of ``resolution`` (default: 1% of the slots, rounded to the
    partition grid); None if even ``limit`` extra slots (default: as many again) do not suffice.
    The bracket is found by doubling from 0 extra slots, or, given ``start`` (extra slots, e.g.
    a smaller scale's answer scaled up), by galloping from there: steps of 1, 2, 4 ... units up
    while runs fail, down while they finish. Either way the answer is the smallest probed
    multiple that finishes with the one below failing (runs are assumed monotone in the slots).
    ``on_probe(extra_slots, finished_in_time)`` is called after each simulation.
    """
    grid = math.lcm(scenario.partitions, scenario.master_partitions)
    step = resolution or max(grid, round(scenario.slots / 100 / grid) * grid)
    if step % grid:
        raise ValueError(f"resolution must be a multiple of {grid} (partitions)")
    top = (limit if limit is not None else scenario.slots) // step

    def ok(units: int) -> bool:
        good = finishes_in_time(scenario.model_copy(update={"slots": scenario.slots + units * step}),
                                scheduler, seed, slack)
        if on_probe is not None:
            on_probe(units * step, good)
        return good

    if start is not None:
        bracket = _gallop(ok, min(max(round(start / step), 0), top), top)
        if bracket is None:
            return None
        lo, hi = bracket
        if hi == 0:
            return 0
    elif ok(0):
        return 0
    else:
        lo, hi = 0, 1
        while not ok(hi):           # lo fails, find a hi that succeeds
            lo, hi = hi, hi * 2
            if hi > top:
                if lo >= top or not ok(top):
                    return None
                hi = top
                break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi * step


def _gallop(ok: Callable[[int], bool], s: int, top: int) -> tuple[int, int] | None:
    """(lo, hi) units with ok(hi) and not ok(lo) (hi == 0: 0 suffices), from a first probe at s;
    None if even ``top`` fails."""
    d = 1
    if ok(s):
        hi = s
        while hi > 0:
            x = max(0, hi - d)
            if not ok(x):
                return x, hi
            hi, d = x, d * 2
        return 0, 0
    lo = s
    while lo < top:
        x = min(top, lo + d)
        if ok(x):
            return lo, x
        lo, d = x, d * 2
    return None


def extra_slots_sweep(base: Scenario, field: str, values: Iterable[Any], schedulers: Sequence[str],
                      seed: int = 0, **options: Any) -> list[dict[str, Any]]:
    """Figure 3: the extra slots each scheduler needs as ``field`` of the scenario varies.

    ``schedulers`` multiplies ``schedulers`` (the paper's A) when field is ``"A"``: A x N
    schedulers with batches of B/A tasks (§4.3).
    """
    rows = []
    for value in values:
        if field == "A":
            update = {"schedulers": base.schedulers * value,
                      "partitions": base.partitions * value,
                      "batch_size": max(1, base.batch_size // value)}
        else:
            update = {field: value}
        scenario = Scenario.model_validate({**base.model_dump(), **update})
        for name in schedulers:
            rows.append({field: value, "scheduler": name,
                         "extra_slots": min_extra_slots(scenario, name, seed, **options)})
    return rows


def slot_quality_table(scenario: Scenario, alphas: Iterable[float],
                       schedulers: Sequence[str] = ("parsync-latency-first", "parsync-adaptive",
                                                    "parsync-quality-first"),
                       seed: int = 0) -> list[dict[str, Any]]:
    """§6.4, Table 1: average sum of task execution time per job (STET), job scheduling delay
    (JSD) and job completion time (JCT) when preferred slots run tasks alpha x faster.
    A job is one batch."""
    rows = []
    for alpha in alphas:
        run = scenario.model_copy(update={"alpha": alpha})
        for name in schedulers:
            m = simulate(run, name, seed).metrics
            rows.append({"alpha": alpha, "scheduler": name, "stet_s": m["stet_mean_s"],
                         "jsd_s": m["jsd_mean_s"], "jct_s": m["jct_mean_s"], "quality": m["quality"]})
    return rows


# -- the paper's experiments from the command line ---------------------------------------------

Scale = Literal["paper", "tenth"]


def figure3_scenario(scale: Scale = "paper") -> Scenario:
    """§4.3/§5.2's default setting with N = 10 schedulers and P = 10 partitions, 90 s at exactly
    the cluster's capacity (S x 1/T = R); ``tenth``: slots, rate and batch size / 10, decision
    time x 10 (the same per-scheduler load), 20 s."""
    if scale == "paper":
        return Scenario(slots=200_000, schedulers=10, partitions=10, rate=40_000, batch_size=100,
                        decision_time_ms=0.25, duration_s=90, sync_gap_s=0.5)
    return Scenario(slots=20_000, schedulers=10, partitions=10, rate=4_000, batch_size=10,
                    decision_time_ms=2.5, duration_s=20, sync_gap_s=0.5)


def figure5_scenario(scale: Scale = "paper", **changes: Any) -> Scenario:
    """§6.1's five phases: 200k slots, 40k tasks/s, 20 schedulers and partitions, G = 0.5 s,
    300 s (``tenth``: 20k slots, 4k tasks/s, batches of 10 at 2.5 ms a task, 100 s)."""
    if scale == "paper":
        return paper_scenario(**changes)
    data: dict[str, Any] = {"slots": 20_000, "schedulers": 20, "partitions": 20, "rate": 4_000,
                            "batch_size": 10, "decision_time_ms": 2.5, "duration_s": 100,
                            "drain_s": 60, "phases": list(FIVE_PHASES)}
    data.update(changes)
    return Scenario.model_validate(data)


FIGURE5_SCHEDULERS = ("parsync-latency-first", "parsync-quality-first", "parsync-adaptive",
                      "statesync-latency-first")


__all__ = ["FIGURE5_SCHEDULERS", "figure3_scenario", "figure5_scenario", "finishes_in_time", "min_extra_slots",
           "slot_quality_table"]
