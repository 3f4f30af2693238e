"""Parked queue entries (fleetplan.solvers.parked) against the sorted list of tuples they replace."""

from __future__ import annotations

import bisect
import random

import numpy as np

from fleetplan.solvers.parked import ParkedEntries


def _entries(rng, count, items):
    # Few distinct gains, so that equal gains (ordered by item, then target) are common.
    chosen = rng.sample(items, count)
    return [(-float(rng.randint(1, 6)), item, rng.randint(0, 3)) for item in chosen]


def test_parked_entries_keep_the_order_and_answers_of_a_sorted_list():
    rng = random.Random(5)
    for _ in range(40):
        items = list(range(60))
        entries = _entries(rng, rng.randint(0, 40), items)
        bounds = {e[1]: rng.uniform(0, 10) for e in entries}
        parked = ParkedEntries.of(entries, [bounds[e[1]] for e in entries])
        reference = sorted(entries)
        assert parked.entries() == reference and len(parked) == len(reference)
        marks = sorted(_entries(rng, 8, list(range(60, 100))))  # items never parked, as in the climb
        if rng.random() < 0.5:
            rng.shuffle(marks)  # marks that go down as well as up (after a rebuild)
        for mark in [None, *marks]:
            expected = 0 if mark is None else bisect.bisect_right(reference, mark)
            assert parked.first_after(mark) == expected
            assert parked.after(mark).entries() == reference[expected:]
        limit = rng.uniform(0, 10)
        back, stay = parked.split(parked.bound <= limit)
        assert back == [e for e in reference if bounds[e[1]] <= limit]
        assert stay.entries() == [e for e in reference if bounds[e[1]] > limit]
        assert np.array_equal(stay.bound, [bounds[e[1]] for e in stay.entries()])
        extra = _entries(rng, 10, list(range(100, 140)))
        merged = stay.merged(ParkedEntries.of(extra, [1.0] * len(extra)))
        assert merged.entries() == sorted(stay.entries() + extra)
