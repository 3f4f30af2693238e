"""Summaries of a results table: medians over repeats, per-solver statistics, wins,
Dolan-Moré performance profiles, time-to-target curves and scaling fits.

All functions take the rows of ``results.csv`` (dicts of strings or numbers, as
:func:`~fleetplan.runs.results.read_results` returns them after
:func:`~fleetplan.runs.results.finalize`) and return plain data; :mod:`.report` draws it.

* A *problem* is one generated instance of one group scored by one objective: (group,
  instance, seed, objective name). Solvers of different policies never compete.
* A run *reaches the target* when its status is optimal/feasible/time_limit, its plan has no
  violations and its gap is at most ``target_gap``.
* Performance profile (Dolan & Moré, Math. Programming 91, 2002): with ``t[p, s]`` the median
  time solver s needs on problem p (infinite when it misses the target),
  ``rho_s(tau) = |{p : t[p, s] <= tau * min_s' t[p, s']}| / |P|``.
* Time to target: the fraction of runs (every repeat counts) that reached the target within
  ``t`` seconds, as ``t`` grows.
* Scaling: the median time per size of the swept numeric generator parameter, with the slope
  of a least-squares line through (log size, log time) — time grows like size ** slope —
  fitted only from three sizes or more.

>>> rows = [
...     {"group": "g", "kind": "k", "instance": "i", "seed": "0", "label": "a", "repeat": "0",
...      "status": "optimal", "objective": "1", "gap": "0", "wall_s": "1.0", "violations": "0",
...      "peak_mem_mb": "10", "params": '{"n": 1}'},
...     {"group": "g", "kind": "k", "instance": "i", "seed": "0", "label": "b", "repeat": "0",
...      "status": "optimal", "objective": "1", "gap": "0", "wall_s": "2.0", "violations": "0",
...      "peak_mem_mb": "10", "params": '{"n": 1}'}]
>>> profile = performance_profile(median_runs(rows), taus=[1.0, 2.0])
>>> profile["a"].tolist(), profile["b"].tolist()
([1.0, 1.0], [0.0, 1.0])
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from fleetplan.runs.results import SOLVED, as_float, exact_order, row_failed

DEFAULT_TARGET_GAP = 1e-4
# A slope through two points is just their ratio: fit one only from this many sizes.
MIN_SLOPE_SIZES = 3
# Objectives within this relative distance are ties when counting wins.
TIE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Run:
    """One (problem, solver) after taking medians over repeats."""

    group: str
    kind: str
    instance: str
    seed: str
    label: str
    params: dict[str, Any]
    repeats: int
    failed: int
    status: str
    objective: float | None
    gap: float | None
    wall_s: float | None
    peak_mem_mb: float | None
    sense: str
    objective_name: str = ""

    @property
    def problem(self) -> tuple[str, str, str, str]:
        """Runs of one problem are comparable: same instance, seed and objective."""
        return (self.group, self.instance, self.seed, self.objective_name)

    def reaches(self, target_gap: float) -> bool:
        return self.status in SOLVED and self.gap is not None and self.gap <= target_gap


def _median(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def row_reaches(row: dict[str, Any], target_gap: float) -> bool:
    gap = as_float(row.get("gap"))
    return (row["status"] in SOLVED and str(row.get("violations")) in ("0", "0.0")
            and gap is not None and gap <= target_gap)


def median_runs(rows: Iterable[dict[str, Any]]) -> list[Run]:
    """Collapse repeats: medians of time, memory, objective and gap over the repeats that
    solved; the status is the most common one (errors win ties, to be conservative)."""
    buckets: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        buckets[(str(row["group"]), str(row["instance"]), str(row["seed"]), str(row["label"]))].append(row)
    runs = []
    for (group, instance, seed, label), bucket in buckets.items():
        solved = [row for row in bucket if row["status"] in SOLVED and str(row.get("violations")) in ("0", "0.0")]
        statuses = [row["status"] for row in bucket]
        status = max(sorted(set(statuses), key=lambda s: s != "error"), key=statuses.count)
        use = solved or bucket
        runs.append(Run(
            group=group, kind=str(bucket[0]["kind"]), instance=instance, seed=seed, label=label,
            params=json.loads(bucket[0].get("params") or "{}"), repeats=len(bucket),
            failed=sum(row_failed(row) for row in bucket), status=status,
            objective=_median(as_float(row["objective"]) for row in solved),
            gap=_median(as_float(row["gap"]) for row in solved),
            wall_s=_median(as_float(row["wall_s"]) for row in use),
            peak_mem_mb=_median(as_float(row["peak_mem_mb"]) for row in use),
            sense=next((str(row["sense"]) for row in bucket if row.get("sense")), ""),
            objective_name=next((str(row["objective_name"]) for row in bucket if row.get("objective_name")), ""),
        ))
    # A failed run has no objective of its own; it belongs with the solver's other runs, so
    # that it counts as a miss on that objective's problem.
    known = {(run.group, run.label): (run.objective_name, run.sense) for run in runs if run.objective_name}
    # A solver that never returned a plan joins its group's only objective, when there is one.
    per_group: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for (group, _), objective in known.items():
        per_group[group].add(objective)
    for run in runs:
        if (run.group, run.label) not in known and len(per_group[run.group]) == 1:
            known[(run.group, run.label)] = next(iter(per_group[run.group]))
    runs = [replace(run, objective_name=known[(run.group, run.label)][0], sense=known[(run.group, run.label)][1])
            if not run.objective_name and (run.group, run.label) in known else run for run in runs]
    return runs  # in the order the rows came (cell order for a finalized table)


def labels_in_order(runs: Sequence[Run]) -> list[str]:
    return sorted({run.label for run in runs})


def wins(runs: Sequence[Run]) -> dict[str, int]:
    """Per solver, the problems it wins: it reaches the best objective found (ties within
    1e-6 relative; binpack: the best plan in the exact order) and is the fastest of those that do."""
    counts = dict.fromkeys(labels_in_order(runs), 0)
    by_problem: dict[tuple[str, str, str, str], list[Run]] = defaultdict(list)
    for run in runs:
        if run.status in SOLVED and run.objective is not None:
            by_problem[run.problem].append(run)
    for contenders in by_problem.values():
        sense = contenders[0].sense
        if exact_order(contenders[0].kind) is not None:
            # Ranked by the exact key (results.finalize): gap 0 marks the best plans; the float
            # score ties plans that differ by preemptions (2.8147506e+14 vs 2.8147499e+14).
            tied = [run for run in contenders if run.gap == 0.0]
            if not tied:
                continue
            fastest = min(tied, key=lambda run: (run.wall_s if run.wall_s is not None else math.inf, run.label))
            counts[fastest.label] += 1
            continue
        best = (max if sense == "max" else min)(run.objective for run in contenders)
        tied = [run for run in contenders
                if abs(run.objective - best) <= TIE_TOLERANCE * max(1.0, abs(best))]
        fastest = min(tied, key=lambda run: (run.wall_s if run.wall_s is not None else math.inf, run.label))
        counts[fastest.label] += 1
    return counts


def solver_table(runs: Sequence[Run], target_gap: float = DEFAULT_TARGET_GAP) -> list[dict[str, Any]]:
    """One line per solver: problems, runs, failures, target reached, mean and worst gap,
    median time, median peak memory, wins."""
    won = wins(runs)
    table = []
    for label in labels_in_order(runs):
        mine = [run for run in runs if run.label == label]
        gaps = [run.gap for run in mine if run.gap is not None]
        times = [run.wall_s for run in mine if run.wall_s is not None]
        memory = [run.peak_mem_mb for run in mine if run.peak_mem_mb is not None]
        table.append({
            "solver": label, "problems": len(mine), "runs": sum(run.repeats for run in mine),
            "failed": sum(run.failed for run in mine),
            "at_target": sum(run.reaches(target_gap) for run in mine),
            "mean_gap": statistics.fmean(gaps) if gaps else None,
            "worst_gap": max(gaps) if gaps else None,
            "median_s": statistics.median(times) if times else None,
            "median_mem_mb": statistics.median(memory) if memory else None,
            "wins": won[label],
        })
    return table


def profile_ratios(runs: Sequence[Run], target_gap: float = DEFAULT_TARGET_GAP) -> tuple[list[str], np.ndarray]:
    """The solvers, and the (problems x solvers) ratios of each median time to the fastest
    solver's on that problem (inf where a solver missed the target). Problems no solver
    reached the target on are left out: no ratio can be formed."""
    labels = labels_in_order(runs)
    problems = sorted({run.problem for run in runs})
    index = {problem: i for i, problem in enumerate(problems)}
    times = np.full((len(problems), len(labels)), np.inf)
    for run in runs:
        if run.reaches(target_gap) and run.wall_s is not None:
            # A measured 0 s would make every ratio infinite; clock resolution is ~1 us.
            times[index[run.problem], labels.index(run.label)] = max(run.wall_s, 1e-6)
    best = times.min(axis=1) if len(problems) else np.zeros(0)
    solvable = np.isfinite(best)
    return labels, times[solvable] / best[solvable, None]


def performance_profile(runs: Sequence[Run], taus: Sequence[float] | np.ndarray | None = None,
                        target_gap: float = DEFAULT_TARGET_GAP) -> dict[str, np.ndarray]:
    """Dolan-Moré profile: for each solver, rho(tau) for every tau in ``taus``
    (default :func:`profile_taus` of the ratios)."""
    labels, ratios = profile_ratios(runs, target_gap)
    taus = np.asarray(profile_taus(ratios) if taus is None else taus, dtype=float)
    if ratios.shape[0] == 0:
        return {label: np.zeros(len(taus)) for label in labels}
    return {label: (ratios[:, column][:, None] <= taus[None, :]).mean(axis=0)
            for column, label in enumerate(labels)}


def profile_taus(ratios: np.ndarray, points: int = 200) -> np.ndarray:
    """A log-spaced grid from 1 to a little past the largest finite ratio."""
    finite = ratios[np.isfinite(ratios)]
    top = max(2.0, float(finite.max()) * 1.1) if finite.size else 2.0
    return np.logspace(0.0, math.log10(top), points)


def time_to_target(rows: Iterable[dict[str, Any]],
                   target_gap: float = DEFAULT_TARGET_GAP) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per solver: sorted times of the runs that reached the target, and the fraction of all
    its runs reached by each time (an empirical CDF that stops below 1 if some runs missed)."""
    times: dict[str, list[float]] = defaultdict(list)
    total: dict[str, int] = defaultdict(int)
    for row in rows:
        label = str(row["label"])
        total[label] += 1
        wall = as_float(row["wall_s"])
        if row_reaches(row, target_gap) and wall is not None:
            times[label].append(max(wall, 1e-6))
    curves = {}
    for label in sorted(total):
        reached = np.sort(np.asarray(times[label], dtype=float))
        curves[label] = (reached, np.arange(1, len(reached) + 1) / total[label])
    return curves


def size_parameter(runs: Sequence[Run]) -> str | None:
    """The numeric generator parameter that varies most across the runs (the "size" axis),
    or None when no numeric parameter takes at least two positive values."""
    values: dict[str, set[float]] = defaultdict(set)
    for run in runs:
        for key, value in run.params.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                values[key].add(float(value))
    varying = {key: len(found) for key, found in values.items() if len(found) >= 2}
    if not varying:
        return None
    return max(sorted(varying), key=lambda key: varying[key])


@dataclass(frozen=True)
class ScalingCurve:
    label: str
    sizes: np.ndarray
    median_s: np.ndarray
    slope: float | None  # time ~ size ** slope; None with fewer than MIN_SLOPE_SIZES sizes


def scaling_curves(runs: Sequence[Run], parameter: str) -> list[ScalingCurve]:
    """Per solver: median time at each size (over seeds and other parameters) of the runs
    that returned a plan, and the fitted log-log slope."""
    curves = []
    for label in labels_in_order(runs):
        by_size: dict[float, list[float]] = defaultdict(list)
        for run in runs:
            size = run.params.get(parameter)
            if (run.label == label and run.status in SOLVED and run.objective is not None
                    and run.wall_s is not None and size is not None):
                by_size[float(size)].append(max(run.wall_s, 1e-6))
        if not by_size:
            continue
        sizes = np.array(sorted(by_size))
        medians = np.array([statistics.median(by_size[size]) for size in sizes])
        slope = (float(np.polyfit(np.log(sizes), np.log(medians), 1)[0])
                 if len(sizes) >= MIN_SLOPE_SIZES else None)
        curves.append(ScalingCurve(label, sizes, medians, slope))
    return curves
