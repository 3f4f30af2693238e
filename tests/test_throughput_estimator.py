"""Gavel's throughput estimator (§3.3, §6): low-rank completion and reference-job matching."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.solvers.allocation.throughput_estimator import (
    closest_reference,
    complete_matrix,
    held_out_error,
    reference_match_error,
    reference_matrix,
)


def low_rank_throughputs(rows: int, cols: int, rank: int, seed: int) -> np.ndarray:
    """exp(row effect + column effect + rank-r term): the model the completion assumes."""
    rng = np.random.default_rng(seed)
    logs = rng.normal(size=(rows, 1)) + rng.normal(size=(1, cols))
    logs += 0.5 * rng.normal(size=(rows, rank)) @ rng.normal(size=(rank, cols))
    return np.exp(logs)


def test_baseline_recovers_a_job_speed_times_type_speed_table_exactly():
    truth = np.outer([1.0, 2.0, 5.0, 0.5], [3.0, 1.0, 0.25])
    partial = truth.copy()
    partial[[0, 2, 3], [1, 0, 2]] = np.nan
    np.testing.assert_allclose(complete_matrix(partial, rank=0), truth, rtol=1e-9)


def test_low_rank_completion_recovers_hidden_entries_and_keeps_measured_ones():
    truth = low_rank_throughputs(40, 12, rank=2, seed=1)
    rng = np.random.default_rng(2)
    hidden = rng.random(truth.shape) < 0.2
    partial = np.where(hidden, np.nan, truth)
    completed = complete_matrix(partial, rank=2, max_iter=3000, tol=1e-12)
    np.testing.assert_array_equal(completed[~hidden], truth[~hidden])
    error = np.abs(completed[hidden] - truth[hidden]) / truth[hidden]
    assert np.median(error) < 1e-3
    baseline = np.abs(complete_matrix(partial, rank=0)[hidden] - truth[hidden]) / truth[hidden]
    assert np.median(baseline) > 10 * np.median(error)


def test_closest_reference_finds_the_job_a_new_job_copies():
    references = low_rank_throughputs(20, 8, rank=2, seed=3)
    new_job = np.full(8, np.nan)
    new_job[[0, 2, 5, 7]] = references[6, [0, 2, 5, 7]]
    for metric in ("l2", "cosine"):
        index, fingerprint = closest_reference(new_job, references, rank=2, metric=metric)
        assert index == 6
    np.testing.assert_allclose(fingerprint, references[6], rtol=1e-2)


def test_real_tables_have_the_expected_shape():
    isolated, rows, cols = reference_matrix("isolated")
    assert isolated.shape == (83, 6) and (isolated[np.isfinite(isolated)] > 0).all()
    assert np.isfinite(isolated).mean() > 0.95  # a few jobs do not fit on some type (memory)
    assert cols == ["v100", "p100", "k80", "v100_unconsolidated", "p100_unconsolidated", "k80_unconsolidated"]
    colocated, jobs, pairs = reference_matrix("colocated")
    assert colocated.shape == (len(jobs), len(pairs))
    assert 0.5 < np.isfinite(colocated).mean() < 1.0  # some pairs cannot share a GPU


def test_held_out_error_on_the_real_colocation_table_is_seeded_and_beats_the_baseline():
    matrix, _, _ = reference_matrix("colocated")
    first = held_out_error(matrix, fraction=0.3, rank=2, seed=0)
    assert first == held_out_error(matrix, fraction=0.3, rank=2, seed=0)
    assert first["held_out"] == round(0.3 * np.isfinite(matrix).sum())
    baseline = held_out_error(matrix, fraction=0.3, rank=0, seed=0)
    assert first["median_relative_error"] < baseline["median_relative_error"]


def test_reference_matching_leave_one_out_runs_on_the_real_table():
    matrix, _, _ = reference_matrix("isolated")
    result = reference_match_error(matrix[:20], profiled_columns=2, rank=1, seed=0)
    assert result["jobs"] == 20
    assert 0 <= result["reference_median_relative_error"] < 1


@pytest.mark.parametrize("bad, message", [
    (np.array([[1.0, -2.0], [1.0, 1.0]]), "positive"),
    (np.array([[np.nan, np.nan], [1.0, 1.0]]), "at least one measured"),
])
def test_bad_matrices_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        complete_matrix(bad)
