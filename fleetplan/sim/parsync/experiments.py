"""The paper's experiments as functions: §4.3/§5.2's "extra slots" search (Figures 2-3) and
§6.4's slot-quality table (Table 1)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from fleetplan.sim.parsync.core import simulate
from fleetplan.sim.parsync.scenario import Scenario


def finishes_in_time(scenario: Scenario, scheduler: str, seed: int = 0, slack: float = 1.1) -> bool:
    """§4.3's criterion of a small delay: every task committed within slack x the submission period."""
    bounded = scenario.model_copy(update={"drain_s": (slack - 1) * scenario.duration_s})
    m = simulate(bounded, scheduler, seed).metrics
    return m["finished"] == 1.0 and m["makespan_s"] <= slack * scenario.duration_s


def min_extra_slots(scenario: Scenario, scheduler: str, seed: int = 0, *, slack: float = 1.1,
                    resolution: int | None = None, limit: int | None = None) -> int | None:
    """The fewest slots to add to ``scenario.slots`` for the run to finish in time (§4.3, Fig. 3).

    A bisection over multiples of ``resolution`` (default: 1% of the slots, rounded to the
    partition grid); None if even ``limit`` extra slots (default: as many again) do not suffice.
    """
    grid = math.lcm(scenario.partitions, scenario.master_partitions)
    step = resolution or max(grid, round(scenario.slots / 100 / grid) * grid)
    if step % grid:
        raise ValueError(f"resolution must be a multiple of {grid} (partitions)")
    top = (limit if limit is not None else scenario.slots) // step

    def ok(units: int) -> bool:
        return finishes_in_time(scenario.model_copy(update={"slots": scenario.slots + units * step}),
                                scheduler, seed, slack)

    if ok(0):
        return 0
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
