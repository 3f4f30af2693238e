"""Gavel's throughput estimator (Gavel §3.3, §6, Figure 7): matrix completion and reference jobs.

Gavel profiles a new job on a few configurations, completes the rest of its row by low-rank
matrix completion against pre-profiled *reference jobs* (as Quasar does), and takes the
throughputs of the closest reference job as its initial estimate. The functions here:

* :func:`reference_matrix` — the measured table as a matrix: job types x worker types
  (``"isolated"``: V100, P100, K80 and their unconsolidated variants), or single-GPU job types x
  (worker type, partner job) (``"colocated"``: a job's throughput when sharing a GPU, §3.1).
* :func:`complete_matrix` — fill the missing entries: in log space (throughputs span four orders
  of magnitude and combine multiplicatively: job speed x accelerator speed), a row + column
  effect plus a rank-``rank`` term, fitted by iterative SVD imputation ("hard impute": the
  missing entries are replaced by the model's reconstruction until they stop moving).
* :func:`closest_reference` — the fingerprint of a new job (its completed row) and the nearest
  reference job (L2 distance in log space, or cosine).
* :func:`held_out_error` / :func:`estimator_report` — hide random measured entries, complete,
  and report the relative error on them (seeded), against the baseline alone.

>>> matrix, rows, cols = reference_matrix("isolated")
>>> matrix.shape, cols[:3]
((83, 6), ['v100', 'p100', 'k80'])
>>> error = held_out_error(matrix, fraction=0.2, rank=1, seed=0)
>>> error["held_out"] > 0, error["median_relative_error"] < 0.5
(True, True)
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from fleetplan.instances.allocation.generator import gavel_throughputs

ISOLATED_TYPES = ["v100", "p100", "k80", "v100_unconsolidated", "p100_unconsolidated", "k80_unconsolidated"]


def reference_matrix(kind: Literal["isolated", "colocated"] = "isolated") -> tuple[np.ndarray, list[str], list[str]]:
    """The measured throughputs as ``(matrix, row names, column names)``; NaN where not measured.

    ``isolated``: 83 job types x the 6 worker types. ``colocated``: single-GPU job types x
    ``"{worker type}|{partner}"``, the row job's throughput when sharing one GPU with the partner
    (pairs that cannot share, listed as 0, are left unmeasured; empty rows and columns dropped).
    """
    table = gavel_throughputs()
    if kind == "isolated":
        rows = [entry["job_type"] if entry["scale_factor"] == 1 else f"{entry['job_type']} x{entry['scale_factor']}"
                for entry in table["jobs"]]
        matrix = np.array([[entry["throughput"].get(t, np.nan) or np.nan for t in ISOLATED_TYPES]
                           for entry in table["jobs"]], dtype=float)
        return matrix, rows, list(ISOLATED_TYPES)
    if kind != "colocated":
        raise ValueError(f"unknown matrix kind '{kind}' (isolated or colocated)")
    jobs = sorted({pair["a"] for pair in table["colocated"]} | {pair["b"] for pair in table["colocated"]})
    types = sorted({pair["worker_type"] for pair in table["colocated"]})
    cols = [f"{t}|{b}" for t in types for b in jobs]
    row_of = {job: i for i, job in enumerate(jobs)}
    col_of = {name: j for j, name in enumerate(cols)}
    matrix = np.full((len(jobs), len(cols)), np.nan)
    for pair in table["colocated"]:
        value_a, value_b = pair["throughput"]
        if value_a > 0 and value_b > 0:
            matrix[row_of[pair["a"]], col_of[f"{pair['worker_type']}|{pair['b']}"]] = value_a
            matrix[row_of[pair["b"]], col_of[f"{pair['worker_type']}|{pair['a']}"]] = value_b
    # A partner that never shares a type with anyone (memory) leaves an empty column.
    rows_kept = np.isfinite(matrix).any(axis=1)
    cols_kept = np.isfinite(matrix).any(axis=0)
    return (matrix[np.ix_(rows_kept, cols_kept)], [j for j, k in zip(jobs, rows_kept, strict=True) if k],
            [c for c, k in zip(cols, cols_kept, strict=True) if k])


def _baseline(log_values: np.ndarray, mask: np.ndarray, sweeps: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Row and column effects r, c minimizing the squared error of r[i] + c[j] on the observed
    entries (alternating means)."""
    row = np.zeros(log_values.shape[0])
    col = np.zeros(log_values.shape[1])
    observed = np.where(mask, log_values, 0.0)
    rows_seen = np.maximum(mask.sum(axis=1), 1)
    cols_seen = np.maximum(mask.sum(axis=0), 1)
    for _ in range(sweeps):
        row = ((observed - col[None, :]) * mask).sum(axis=1) / rows_seen
        col = ((observed - row[:, None]) * mask).sum(axis=0) / cols_seen
    return row, col


def complete_matrix(matrix: np.ndarray, rank: int = 1, *, max_iter: int = 500, tol: float = 1e-7) -> np.ndarray:
    """Fill the NaN entries of a positive matrix by low-rank completion in log space.

    ``rank=0`` keeps only the additive baseline (job effect + configuration effect). Entries
    that were measured are returned unchanged.

    >>> m = np.outer([1.0, 2.0, 4.0], [1.0, 3.0])
    >>> m[2, 1] = np.nan
    >>> round(float(complete_matrix(m, rank=0)[2, 1]), 6)
    12.0
    """
    matrix = np.asarray(matrix, dtype=float)
    mask = np.isfinite(matrix)
    if (matrix[mask] <= 0).any():
        raise ValueError("throughputs must be positive (leave unmeasured entries as NaN)")
    if rank < 0:
        raise ValueError("rank must be >= 0")
    if not mask.any(axis=1).all() or not mask.any(axis=0).all():
        raise ValueError("every row and column needs at least one measured entry")
    logs = np.where(mask, np.log(np.where(mask, matrix, 1.0)), 0.0)
    row, col = _baseline(logs, mask)
    filled = np.where(mask, logs, row[:, None] + col[None, :])
    if rank > 0:
        for _ in range(max_iter):
            # Double-centre the filled matrix (exact row and column effects), keep the best
            # rank-r part of the rest, and put the model back into the missing entries only.
            row_mean = filled.mean(axis=1, keepdims=True)
            col_mean = filled.mean(axis=0, keepdims=True)
            base = row_mean + col_mean - filled.mean()
            u, s, vt = np.linalg.svd(filled - base, full_matrices=False)
            model = base + (u[:, :rank] * s[:rank]) @ vt[:rank]
            updated = np.where(mask, logs, model)
            change = np.linalg.norm(updated - filled) / max(np.linalg.norm(filled), 1e-12)
            filled = updated
            if change < tol:
                break
    return np.where(mask, matrix, np.exp(filled))


def closest_reference(profiled: np.ndarray, references: np.ndarray, rank: int = 1,
                      metric: Literal["l2", "cosine"] = "l2") -> tuple[int, np.ndarray]:
    """Map a new job to its closest reference job (Gavel §3.3, Figure 7).

    ``profiled`` is the new job's row with NaN where it was not profiled; ``references`` the
    reference jobs' (complete or partly measured) matrix. The new row is completed together with
    the references (its *fingerprint*) and compared with every completed reference row in log
    space. Returns the index of the closest reference and the fingerprint.

    >>> refs = np.array([[10.0, 5.0, 2.0], [100.0, 20.0, 4.0]])
    >>> index, fingerprint = closest_reference(np.array([90.0, np.nan, np.nan]), refs)
    >>> index
    1
    """
    profiled = np.asarray(profiled, dtype=float).reshape(1, -1)
    if not np.isfinite(profiled).any():
        raise ValueError("the new job needs at least one profiled throughput")
    completed = complete_matrix(np.vstack([references, profiled]), rank=rank)
    logs = np.log(completed)
    fingerprint, reference_logs = logs[-1], logs[:-1]
    if metric == "l2":
        distance = np.linalg.norm(reference_logs - fingerprint, axis=1)
    elif metric == "cosine":
        centered = reference_logs - reference_logs.mean(axis=1, keepdims=True)
        target = fingerprint - fingerprint.mean()
        norms = np.linalg.norm(centered, axis=1) * max(np.linalg.norm(target), 1e-12)
        distance = 1.0 - centered @ target / np.maximum(norms, 1e-12)
    else:
        raise ValueError(f"unknown metric '{metric}' (l2 or cosine)")
    return int(np.argmin(distance)), completed[-1]


def _hide(mask: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A random set of measured entries to hide, keeping at least one entry per row and column."""
    hidden = np.zeros_like(mask)
    for i, j in rng.permutation(np.argwhere(mask)):
        if hidden.sum() >= round(fraction * mask.sum()):
            break
        kept = mask & ~hidden
        if kept[i].sum() > 1 and kept[:, j].sum() > 1:
            hidden[i, j] = True
    return hidden


def held_out_error(matrix: np.ndarray, fraction: float = 0.2, rank: int = 1, seed: int = 0) -> dict[str, float]:
    """Hide ``fraction`` of the measured entries at random (seeded), complete the rest, and
    measure ``|estimate - truth| / truth`` on the hidden ones."""
    if not 0 < fraction < 1:
        raise ValueError("fraction must be in (0, 1)")
    mask = np.isfinite(matrix)
    hidden = _hide(mask, fraction, np.random.default_rng(seed))
    estimate = complete_matrix(np.where(hidden, np.nan, matrix), rank=rank)
    error = np.abs(estimate[hidden] - matrix[hidden]) / matrix[hidden]
    return {"held_out": float(hidden.sum()), "median_relative_error": float(np.median(error)),
            "mean_relative_error": float(error.mean()), "p90_relative_error": float(np.quantile(error, 0.9))}


def reference_match_error(matrix: np.ndarray, profiled_columns: int = 2, rank: int = 1, seed: int = 0,
                          metric: Literal["l2", "cosine"] = "l2") -> dict[str, float]:
    """Leave-one-out test of reference matching: each job in turn is removed from the references,
    profiled on ``profiled_columns`` random measured configurations, and mapped to its closest
    reference; the error is measured on its other measured entries, for the reference job's
    throughputs and for the completed fingerprint itself."""
    rng = np.random.default_rng(seed)
    match_errors, fingerprint_errors = [], []
    for i in range(matrix.shape[0]):
        measured = np.flatnonzero(np.isfinite(matrix[i]))
        if len(measured) <= profiled_columns:
            continue
        shown = rng.choice(measured, size=profiled_columns, replace=False)
        rest = np.setdiff1d(measured, shown)
        new_row = np.full(matrix.shape[1], np.nan)
        new_row[shown] = matrix[i, shown]
        others = np.delete(matrix, i, axis=0)
        keep = np.isfinite(others).any(axis=0)  # configurations some reference measured
        index, fingerprint = closest_reference(new_row[keep], others[:, keep], rank=rank, metric=metric)
        reference_row = complete_matrix(others[:, keep], rank=rank)[index]
        truth = matrix[i, keep]
        evaluated = np.isin(np.flatnonzero(keep), rest)
        match_errors.append(np.abs(reference_row[evaluated] - truth[evaluated]) / truth[evaluated])
        fingerprint_errors.append(np.abs(fingerprint[evaluated] - truth[evaluated]) / truth[evaluated])
    match = np.concatenate(match_errors)
    fingerprint = np.concatenate(fingerprint_errors)
    return {"jobs": float(len(match_errors)), "reference_median_relative_error": float(np.median(match)),
            "fingerprint_median_relative_error": float(np.median(fingerprint))}


def estimator_report(seed: int = 0, fractions: tuple[float, ...] = (0.1, 0.3, 0.5),
                     ranks: tuple[int, ...] = (0, 1, 2, 3)) -> str:
    """A plain-text table of held-out errors on the real tables (and of reference matching),
    for several hidden fractions and ranks; rank 0 is the row + column baseline alone."""
    lines = [f"Gavel throughput estimator: held-out relative error (seed {seed})",
             "matrix      hidden  rank  entries  median   mean     p90"]
    for kind in ("isolated", "colocated"):
        matrix, _, _ = reference_matrix(kind)
        for fraction in fractions:
            for rank in ranks:
                e = held_out_error(matrix, fraction, rank, seed)
                lines.append(f"{kind:<10}  {fraction:>6.0%}  {rank:>4}  {int(e['held_out']):>7}  "
                             f"{e['median_relative_error']:.4f}  {e['mean_relative_error']:.4f}  "
                             f"{e['p90_relative_error']:.4f}")
    lines.append("reference matching (leave one job out, 2 profiled entries; median relative error)")
    lines.append("matrix      rank  jobs  closest-reference  fingerprint")
    for kind in ("isolated", "colocated"):
        matrix, _, _ = reference_matrix(kind)
        for rank in (1, 2):
            e = reference_match_error(matrix, 2, rank, seed)
            lines.append(f"{kind:<10}  {rank:>4}  {int(e['jobs']):>4}  {e['reference_median_relative_error']:>17.4f}  "
                         f"{e['fingerprint_median_relative_error']:>11.4f}")
    return "\n".join(lines)
