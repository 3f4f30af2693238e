"""Identical jobs are grouped by a lexicographic sort of their rows: the groups np.unique(axis=0)
gives, without its structured view of the rows."""

import numpy as np
import pytest

from fleetplan.models.allocation.policies import group_rows


@pytest.mark.parametrize("seed", range(5))
def test_groups_equal_numpys_unique_rows(seed):
    rng = np.random.default_rng(seed)
    for _ in range(100):
        table = rng.integers(0, 3, (int(rng.integers(1, 40)), int(rng.integers(0, 4)))).astype(float)
        if table.shape[1] and rng.random() < 0.3:
            table[int(rng.integers(0, len(table))), 0] = -0.0  # equal to 0.0, as np.unique has it
        want = np.unique(table, axis=0, return_index=True, return_inverse=True, return_counts=True)[1:]
        for got, expected in zip(group_rows(table), want, strict=True):
            assert np.array_equal(got, np.asarray(expected).reshape(-1))


def test_no_rows():
    assert all(len(part) == 0 for part in group_rows(np.zeros((0, 3))))


def _classes(representative, inverse, count):
    """The partition of the jobs the answer describes (independent of the classes' order)."""
    return sorted(tuple(np.flatnonzero(inverse == c)) for c in range(len(representative)))


@pytest.mark.parametrize("seed", range(3))
def test_aggregate_jobs_classes_are_the_equal_rows_with_a_first_column_remembered(seed):
    # A read-only first column found all distinct is remembered (a session's throughput table,
    # handed again at every re-solve); a writable one, or one with equal rows, never is. Either
    # way the classes are exactly the groups of equal rows over every column.
    from fleetplan.models.allocation import policies

    rng = np.random.default_rng(seed)
    distinct = rng.uniform(1, 2, (50, 3))
    distinct.flags.writeable = False
    repeated = np.repeat(rng.integers(0, 3, (10, 2)).astype(float), 5, axis=0)
    other = rng.integers(0, 2, 50).astype(float)
    for table in (distinct, repeated, distinct.copy()):
        for _ in range(2):
            got = policies.aggregate_jobs(table, other)
            want = group_rows(np.column_stack([table, other]))
            assert _classes(*got) == _classes(*want)
    assert policies._known_distinct(distinct)
    assert not policies._known_distinct(repeated) and not policies._known_distinct(distinct.copy())
    view = distinct[:, :2]  # a view: its base could change under it
    policies.aggregate_jobs(view, other)
    assert not policies._known_distinct(view)


def test_aggregate_jobs_reads_the_columns_after_an_equal_first_one():
    # Jobs equal in the first column are told apart, or not, by the later ones (a boolean
    # table, integers, NaN placeholders): the classes are the groups of equal rows over all.
    from fleetplan.models.allocation import policies

    rng = np.random.default_rng(4)
    first = np.repeat(rng.uniform(1, 2, (6, 3)), 4, axis=0)  # six groups of four equal rows
    runnable = np.tile([[True, False, True], [False, True, True]], (12, 1))
    scale = np.ones(24, dtype=int)
    missing = np.tile([np.nan, 1.0], 12)  # NaN with the first pattern: no further split
    got = policies.aggregate_jobs(first, runnable, scale, missing)
    want = group_rows(np.column_stack([first, runnable, scale, np.where(np.isnan(missing), -1.2345e300, missing)]))
    assert _classes(*got) == _classes(*want) == sorted(
        (4 * c + k, 4 * c + k + 2) for c in range(6) for k in (0, 1))
    same = policies.aggregate_jobs(first, np.zeros((24, 3), dtype=bool), np.ones(24), np.full(24, np.nan))
    assert _classes(*same) == [tuple(range(4 * c, 4 * c + 4)) for c in range(6)]
