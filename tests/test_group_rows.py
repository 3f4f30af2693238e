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
