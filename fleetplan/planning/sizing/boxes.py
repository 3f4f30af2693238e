"""Branch and bound over boxes of the purchase lattice: sizing under a policy that is not monotone.

A purchase is an integer vector ``0 <= add <= cap``. When whether a purchase passes is not
monotone in it (a policy's own allocation can get worse with more capacity), checking purchases
one by one in order of cost (:mod:`.lattice`) proves nothing above the first lower bound until
every cheaper purchase has been checked. Here the lattice is cut into boxes ``[lo, hi]``; a box is
dropped whole when a *box test* proves that no purchase in it can pass (for max-min fairness:
:mod:`.max_min_face`), and split in two along its widest side (in cost) otherwise. Boxes are taken
cheapest corner first, so the cheapest corner of the next box is a proven lower bound on every
purchase not yet ruled out; a box of one purchase that survives its test is checked exactly
(the policy solved and judged), and the first one that passes is the cheapest.

The order is fixed (the corner's cost, then the order boxes were made), and the limits count
boxes and checks, so a limit ends the search the same way at any machine load.

>>> out = search_boxes([1.0, 1.0], [3, 3], lambda lo, hi: float(lo.sum()) if hi.sum() >= 4 else float("inf"),
...                    lambda add: (bool(add.sum() >= 4 and add[0] == 1), None))
>>> out.found.tolist(), out.cost, out.proven
([1, 3], 4.0, True)
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fleetplan.planning.sizing.lattice import COST_TOLERANCE, LatticeOutcome

# A box survives its test but holds more than one purchase: checked boxes per point check allowed
# by default (the box tests are LPs of about a point check's size).
BOXES_PER_POINT = 2
# At most this share of the checks go to probes (below): the rest to boxes of one purchase.
PROBE_SHARE = 0.25
# A surviving box this narrow (its dearest corner at most this much dearer than its cheapest)
# has its dearest corner checked: the purchase in the box most likely to pass.
PROBE_WIDTH = 0.25


def search_boxes(price: Sequence[float], cap: Sequence[int], box_bound: Callable[[np.ndarray, np.ndarray], float],
                 check: Callable[[np.ndarray], tuple[bool, Any]], *, lower_bound: float = 0.0,
                 incumbent: tuple[np.ndarray, float, Any] | None = None, max_cost: float | None = None,
                 gap: float = 0.0, max_points: int = 2000, max_boxes: int | None = None,
                 probe_width: float = PROBE_WIDTH, deadline: float | None = None) -> LatticeOutcome:
    """The cheapest purchase that passes ``check``, boxes ruled out or bounded by ``box_bound``.

    ``box_bound(lo, hi)`` must be a lower bound on the cost of every passing purchase in the box
    (``inf`` when it holds none; ``-inf`` or anything below the corner's cost when it cannot
    tell). ``incumbent`` ``(add, cost, payload)``: a purchase known to pass; the search ends once
    every box left costs at least ``cost / (1 + gap)``. ``lower_bound``: a bound proven
    elsewhere, kept when larger. Past ``max_cost`` the lattice ends. ``max_points`` checks,
    ``max_boxes`` box tests (default ``BOXES_PER_POINT`` per point) and ``deadline``
    (``time.perf_counter()``) end the search early; ``bound`` is then the least bound of the
    boxes left. A box that survives its test and whose dearest corner costs at most
    ``1 + probe_width`` times its bound, and less than the best purchase known, has that corner
    checked (a purchase found early lets the search end within ``gap``), at most
    ``PROBE_SHARE * max_points`` times. The outcome's
    ``found`` is the best purchase known to pass (the incumbent if nothing cheaper was found)
    and ``proven`` says it is within ``gap`` of ``bound``.
    """
    price_array = np.asarray(price, dtype=float)
    cap_array = np.asarray(cap, dtype=int)
    max_boxes = max_points * BOXES_PER_POINT if max_boxes is None else max_boxes
    outcome = LatticeOutcome(bound=lower_bound)
    boxes = 0
    if incumbent is not None:
        outcome.found, outcome.cost, outcome.payload = incumbent[0], float(incumbent[1]), incumbent[2]
    order = itertools.count()
    # (bound, order, lo, hi, tested): a box's key is a lower bound on its passing purchases' cost
    heap: list[tuple[float, int, np.ndarray, np.ndarray, bool]] = [
        (0.0, next(order), np.zeros_like(cap_array), cap_array, False)]

    def close(cost: float) -> bool:
        return outcome.cost is not None and cost * (1 + gap) >= outcome.cost - COST_TOLERANCE * max(1.0, outcome.cost)

    while heap:
        cost, _, lo, hi, tested = heap[0]
        outcome.bound = max(lower_bound, cost)
        if close(cost):
            outcome.proven = True
            outcome.log.append(f"boxes: every box left costs at least {cost:g}: the purchase at {outcome.cost:g} is "
                               f"within {gap:.2%} ({outcome.checked} purchases checked, {boxes} boxes tested)")
            return outcome
        if max_cost is not None and cost > max_cost + COST_TOLERANCE * max(1.0, max_cost):
            break
        if outcome.checked >= max_points or boxes >= max_boxes or (deadline is not None and time.perf_counter() >= deadline):
            outcome.stopped = "time" if outcome.checked < max_points and boxes < max_boxes else "points"
            outcome.log.append(f"boxes: stopped after {outcome.checked} purchases checked and {boxes} boxes tested "
                               f"({outcome.stopped}); no purchase cheaper than {outcome.bound:g} can pass")  # the bound reported
            return outcome
        heapq.heappop(heap)
        if not tested:
            boxes += 1
            bound = box_bound(lo, hi)
            if bound == float("inf") or close(bound):
                outcome.skipped += 1
                continue
            if bound > cost + COST_TOLERANCE * max(1.0, abs(cost)):  # a better key: back in line
                heapq.heappush(heap, (bound, next(order), lo, hi, True))
                continue
        if np.array_equal(lo, hi):
            outcome.checked += 1
            passes, payload = check(lo)
            if passes:
                outcome.found, outcome.cost, outcome.payload = lo, float(price_array @ lo), payload
                outcome.proven = True
                outcome.log.append(f"boxes: the cheapest passing purchase costs {outcome.cost:g} ({outcome.checked} "
                                   f"purchases checked, {boxes} boxes tested, every cheaper box ruled out)")
                return outcome
            continue
        high_cost = float(price_array @ hi)
        affordable = max_cost is None or high_cost <= max_cost + COST_TOLERANCE * max(1.0, max_cost)
        if probe_width > 0 and affordable and outcome.probes < PROBE_SHARE * max_points \
                and (outcome.cost is None or high_cost < outcome.cost) \
                and high_cost <= (1 + probe_width) * cost + COST_TOLERANCE:
            outcome.checked += 1
            outcome.probes += 1
            passes, payload = check(hi)
            if passes:
                outcome.found, outcome.cost, outcome.payload = hi, high_cost, payload
        width = price_array * (hi - lo)
        k = int(np.argmax(width))
        middle = (int(lo[k]) + int(hi[k])) // 2
        lower_hi, upper_lo = hi.copy(), lo.copy()
        lower_hi[k], upper_lo[k] = middle, middle + 1
        heapq.heappush(heap, (max(cost, float(price_array @ lo)), next(order), lo, lower_hi, False))
        heapq.heappush(heap, (max(cost, float(price_array @ upper_lo)), next(order), upper_lo, hi, False))
    outcome.exhausted = True
    outcome.proven = True
    if outcome.cost is None:
        outcome.bound = float("inf")
        outcome.log.append(f"boxes: every purchase within the limits ruled out ({outcome.checked} checked, "
                           f"{boxes} boxes tested); none passes")
    else:
        outcome.bound = outcome.cost
        outcome.log.append(f"boxes: nothing cheaper than the purchase at {outcome.cost:g} passes "
                           f"({outcome.checked} checked, {boxes} boxes tested)")
    return outcome
