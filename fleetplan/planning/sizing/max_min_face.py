"""The box test of sizing under max-min fairness: can any purchase in a box meet the targets there?

Max-min fairness (Gavel §4.1) gives every job ``m`` at least ``t*(N) w_m E_m(N) / s_m`` of
throughput, where ``t*(N)`` is its optimal level on the cluster ``N``, ``E_m(N) = T_m @ N / sum(N)``
the job's throughput under the equal share, ``w_m`` its weight and ``s_m`` its scale factor. Which
of its many optimal allocations the policy returns is its solver's choice, but every one of them
lies on that *optimal face*: each job at least the level times its reference, and, once the level
is kept, the largest sum of the scores (the policy's refinement). So a purchase can pass only if
some allocation on the face meets the targets, and for a box ``a <= N <= b`` of clusters
(``a = N0 + lo``, ``b = N0 + hi``) that is relaxed to one LP whose cluster ``N`` is a variable
between the corners and whose objective is the purchase's cost:

- the level is at least ``sum_v theta_v t_v``, the levels ``t_v`` of max-min fairness measured at
  points ``v`` of the box (the smallest cluster, it with one type at its largest, the largest) on
  the smallest cluster's columns with every job against the largest ``E_m`` the box allows:
  concave and nondecreasing in the cluster, so no more than the level at ``N`` for any weights
  ``theta`` with ``sum_v theta_v v <= N``; each job's reference is its least ``E_m`` over the box
  (a ratio of linear functions: its extremes lie at the box's corners);
- the sum of the scores is at least what an allocation on the smallest cluster reaches while
  giving every job the most the level can ask of it anywhere in the box (no job runs faster than
  alone on its fastest type, which caps the level);
- every target that fixes a job's throughput or time from below holds with references the box
  cannot undercut: the fastest type among those the smallest cluster already fits (more types
  only raise it), makespan and SLO rows (fixed), the time share and the total throughput; a
  target whose reference can fall as the cluster grows (the isolated share) is left out, which
  only weakens the test.

If that LP is infeasible, no purchase in the box passes under max-min fairness; otherwise its
optimum bounds what any passing purchase in the box costs. On a box of one purchase it is the
face itself, so boxes shrink to the policy's own answer (up to its ties). The test holds for any
solver that returns *an* optimum of the max-min LP, refined; allocations that mix jobs on shared
GPUs (colocation pairs) are outside it (the caller does not use it there).

>>> import fleetplan
>>> instance = fleetplan.load_instance("examples/allocation-gavel-4.1.json")
>>> from fleetplan.planning.targets import Target
>>> test = MaxMinFaceTest(instance.arrays(), [Target("min_throughput_vs_fastest", ">=", 0.9)], [2.0, 1.0])
>>> test(np.array([0, 0]), np.array([0, 0]))  # nothing bought: no allocation on the face meets it
inf
>>> round(test(np.array([0, 0]), np.array([40, 40])), 2)  # up to 40 of each: at least this much
3.03
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from fleetplan.instances.allocation import AllocationArrays
from fleetplan.models.linear import INF, LinearProgram
from fleetplan.planning.targets import Target

# The policy's own LP is feasible to about 1e-7: its allocation is granted this much slack.
FACE_SLACK = 1e-5
# Above this many types whose counts vary in a box, E_m's bounds are the slowest and fastest
# of its types instead of the corners' (2^k of them).
MAX_CORNER_TYPES = 10
# Above this many jobs the refinement's row is left out (it compares every pair of jobs).
MAX_RATIO_JOBS = 2000


class MaxMinFaceTest:
    """``test(lo, hi)``: a lower bound on the cost ``price @ add`` of every purchase
    ``lo <= add <= hi`` that can pass under max-min fairness, ``inf`` when none can (module
    docstring). The level LP is kept and re-solved warm; the box's cost LP is built per box."""

    def __init__(self, arrays: AllocationArrays, targets: Sequence[Target], price: Sequence[float] | None = None, *,
                 weighted: bool = True) -> None:
        self.throughput = np.asarray(arrays.throughput, dtype=float)
        self.scale = np.asarray(arrays.scale_factor, dtype=float)
        weight = np.asarray(arrays.weight, dtype=float) if weighted else np.ones(len(self.scale))
        self.demand_per_level = weight / self.scale  # t * w / s * E is a job's throughput at level t
        self.base = np.asarray(arrays.num_workers, dtype=float)
        self.price = np.zeros(len(self.base)) if price is None else np.asarray(price, dtype=float)
        self.floor = np.zeros(len(self.scale))  # per job, throughput every passing allocation needs
        self.min_time, self.total, self.per_fastest = 0.0, None, 0.0
        for target in targets:
            self._add_target(target, arrays)
        self.tests = 0
        self._cells = self._cell_rows()
        self._level_lp = self._build_level()

    def _add_target(self, target: Target, arrays: AllocationArrays) -> None:
        relaxed = target.value * (1 - FACE_SLACK) - FACE_SLACK
        if target.metric == "min_time_share":
            self.min_time = max(self.min_time, relaxed)
        elif target.metric == "min_throughput_vs_fastest":
            self.per_fastest = max(self.per_fastest, relaxed)
        elif target.metric == "total_throughput":
            self.total = max(self.total or 0.0, relaxed)
        elif target.metric == "makespan_s" and target.value > 0 and not np.isnan(arrays.steps_left).any():
            self.floor = np.maximum(self.floor, arrays.steps_left / target.value * (1 - FACE_SLACK))
        elif target.metric == "slo_missed_jobs" and target.value < 1:
            needed = np.where(np.isfinite(arrays.slo_seconds), arrays.steps_left / arrays.slo_seconds, 0.0)
            self.floor = np.maximum(self.floor, np.nan_to_num(needed) * (1 - FACE_SLACK) - FACE_SLACK)

    def _cell_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The allocation's entries: job m's throughput row m, its time row jobs + m, type k's
        capacity row 2 jobs + k (row, column, value)."""
        jobs, types = self.throughput.shape
        cells = jobs * types
        job_of, type_of = np.repeat(np.arange(jobs), types), np.tile(np.arange(types), jobs)
        rows = np.concatenate([job_of, jobs + job_of, 2 * jobs + type_of])
        values = np.concatenate([self.throughput.ravel(), np.ones(cells), np.repeat(self.scale, types)])
        return rows, np.tile(np.arange(cells), 3), values

    def _build_level(self):
        """max t: T_m @ x_m - d_m t >= 0 (d_m set per box), time <= 1, capacity (set per box)."""
        from fleetplan.solvers import highs as runner

        jobs, types = self.throughput.shape
        cells = jobs * types
        rows, cols, values = self._cells
        rows, cols = np.concatenate([rows, np.arange(jobs)]), np.concatenate([cols, np.full(jobs, cells)])
        values = np.concatenate([values, -np.ones(jobs)])
        matrix = sp.csr_matrix((values, (rows, cols)), shape=(2 * jobs + types, cells + 1))
        cost = np.zeros(cells + 1)
        cost[-1] = 1.0
        lp = LinearProgram(cost=cost, matrix=matrix,
                           row_lower=np.concatenate([np.zeros(2 * jobs), np.full(types, -INF)]),
                           row_upper=np.concatenate([np.full(jobs, INF), np.ones(jobs), self.base]),
                           col_lower=np.zeros(cells + 1), col_upper=np.append(np.ones(cells), INF), sense="max")
        highs = runner.new_highs(None, 1, 0)
        runner.pass_lp(highs, lp, "simplex")
        return highs

    def __call__(self, lo: np.ndarray, hi: np.ndarray) -> float:
        """A lower bound on the cost (``price @ add``) of every purchase in ``[lo, hi]`` that can
        pass; ``inf`` when none can."""
        self.tests += 1
        smallest, largest = self.base + lo, self.base + hi
        shares = self._corner_shares(smallest, largest)
        low_share, high_share = shares.min(axis=1), shares.max(axis=1)
        points = self._level_points(smallest, largest)
        levels = self._levels(smallest, points, self.demand_per_level * high_share)
        fastest = np.where(self._runnable(smallest), self.throughput, 0.0).max(axis=1)
        need = np.maximum(self.floor, self.per_fastest * fastest)
        low_demand = self.demand_per_level * low_share
        refined = self._refined_least(smallest, largest, shares, high_share)
        return self._cheapest(smallest, largest, need, low_demand, points, levels, refined)

    def _runnable(self, cluster: np.ndarray) -> np.ndarray:
        return (self.throughput > 0) & (cluster[None, :] >= self.scale[:, None])

    def _corner_shares(self, smallest: np.ndarray, largest: np.ndarray) -> np.ndarray:
        """``E_m(N)`` at the box's corners, (jobs, corners): a ratio of linear functions of ``N``
        (as is ``E_m / E_i``), so its extremes over the box are among them. With more varying
        types than :data:`MAX_CORNER_TYPES`, each job's slowest and fastest type present instead
        (bounds, not corners)."""
        varying = np.flatnonzero(largest > smallest)
        if len(varying) > MAX_CORNER_TYPES:
            speeds = np.where((largest > 0)[None, :], self.throughput, np.nan)
            return np.column_stack([np.nanmin(speeds, axis=1), np.nanmax(speeds, axis=1)])
        corners = np.repeat(smallest[None, :], 2 ** len(varying), axis=0)
        for row, choice in enumerate(itertools.product((False, True), repeat=len(varying))):
            corners[row, varying[list(choice)]] = largest[varying[list(choice)]]
        corners = corners[corners.sum(axis=1) > 0]
        return self.throughput @ (corners / corners.sum(axis=1, keepdims=True)).T

    def _refined_least(self, smallest: np.ndarray, largest: np.ndarray, shares: np.ndarray,
                       high_share: np.ndarray) -> float:
        """A lower bound, over the box, on the refinement's optimum: the sum of the scores
        ``T_m @ x_m / d_m(N)`` (``d_m = w_m E_m / s_m``) that max-min fairness maximizes once its
        level ``t*`` is kept. No job runs faster than alone on its fastest type, so
        ``t* d_m(N) <= min_i F_i(N) d_m(N) / d_i(N)``; an allocation on the smallest cluster that
        gives every job that much at the box's worst ratio ``E_m / E_i`` keeps the level on every
        cluster of the box, and its sum of scores against the largest ``E`` is below the
        refinement's there. -inf when there is none (or the jobs are too many for the pairs)."""
        from fleetplan.solvers import highs as runner

        jobs, types = self.throughput.shape
        if jobs > MAX_RATIO_JOBS or shares.shape[1] < 1 or not np.all(shares > 0):
            return -INF
        ratio = (shares[:, None, :] / shares[None, :, :]).max(axis=2)  # max over corners of E_m / E_i
        fastest = np.where(self._runnable(largest), self.throughput, 0.0).max(axis=1)
        per = self.demand_per_level
        ceiling = (fastest[None, :] / per[None, :] * per[:, None] * ratio).min(axis=1)
        cells = jobs * types
        rows, cols, values = self._cells
        demand = per * high_share
        lp = LinearProgram(
            cost=(self.throughput / demand[:, None]).ravel(), sense="max",
            matrix=sp.csr_matrix((values, (rows, cols)), shape=(2 * jobs + types, cells)),
            row_lower=np.concatenate([ceiling * (1 + FACE_SLACK), np.zeros(jobs), np.full(types, -INF)]),
            row_upper=np.concatenate([np.full(jobs, INF), np.ones(jobs), smallest]),
            col_lower=np.zeros(cells), col_upper=self._runnable(smallest).ravel().astype(float))
        outcome = runner.solve_lp(lp, algorithm="simplex")
        if outcome.status != "optimal" or outcome.objective is None:
            return -INF
        return float(outcome.objective) * (1 - FACE_SLACK) - FACE_SLACK

    @staticmethod
    def _level_points(smallest: np.ndarray, largest: np.ndarray) -> np.ndarray:
        """Clusters where the level is measured: the smallest, the smallest with one type at its
        largest (each type that varies), and the largest."""
        varying = np.flatnonzero(largest > smallest)
        points = [smallest]
        for k in varying:
            point = smallest.copy()
            point[k] = largest[k]
            points.append(point)
        if len(varying) > 1:
            points.append(largest)
        return np.array(points)

    def _levels(self, smallest: np.ndarray, points: np.ndarray, demand: np.ndarray) -> np.ndarray:
        """Max-min fairness's level at each point (capacity), on the columns the smallest
        cluster fits, job m needing ``demand_m`` times the level: with every job against its
        largest ``E``, a concave, nondecreasing function of the cluster below the level of every
        cluster of the box."""
        from fleetplan.solvers import highs as runner

        highs = self._level_lp
        jobs, types = self.throughput.shape
        cells = jobs * types
        upper = self._runnable(smallest).ravel().astype(float)
        highs.changeColsBounds(cells, np.arange(cells, dtype=np.int32), np.zeros(cells), upper)
        for job, coefficient in enumerate(demand.tolist()):
            highs.changeCoeff(job, cells, -coefficient)
        capacity_rows = np.arange(2 * jobs, 2 * jobs + types, dtype=np.int32)
        levels = np.zeros(len(points))
        for index, point in enumerate(points):
            highs.changeRowsBounds(types, capacity_rows, np.full(types, -INF), point)
            outcome = runner.run(highs)
            if outcome.status == "optimal" and outcome.objective is not None:
                levels[index] = max(float(outcome.objective), 0.0)
        return levels

    def _cheapest(self, smallest: np.ndarray, largest: np.ndarray, need: np.ndarray, low_demand: np.ndarray,
                  points: np.ndarray, levels: np.ndarray, refined: float) -> float:
        """The least ``price @ (N - N0)`` over clusters ``smallest <= N <= largest`` (continuous) on
        which an allocation gives every job its ``need`` and ``low_demand`` times a level below
        max-min fairness's there, keeps the scores' sum (against ``low_demand``) at least
        ``refined``, and meets the time and total rows. The level is
        ``sum_v theta_v levels_v`` for weights ``theta`` with ``sum_v theta_v points_v <= N``: by
        concavity and monotonicity no more than the level at ``N``, whichever weights the LP picks."""
        from fleetplan.solvers import highs as runner

        jobs, types = self.throughput.shape
        cells, count = jobs * types, len(points)
        n_col, theta_col, level_col = cells, cells + types, cells + types + count
        rows, cols, values = self._cells
        capacity_rows = 2 * jobs + np.arange(types)
        mix_rows, sum_row, level_row = 2 * jobs + types + np.arange(types), 2 * jobs + 2 * types, 2 * jobs + 2 * types + 1
        need_rows = level_row + 1 + np.arange(jobs)
        job_of = np.repeat(np.arange(jobs), types)
        parts = [
            (rows, cols, values),
            (np.arange(jobs), np.full(jobs, level_col), -(1 - FACE_SLACK) * low_demand),  # T_m @ x_m >= d_m level
            (capacity_rows, n_col + np.arange(types), -np.ones(types)),  # capacity <= N
            (np.repeat(mix_rows, count), np.tile(theta_col + np.arange(count), types), points.T.ravel()),
            (mix_rows, n_col + np.arange(types), -np.ones(types)),  # sum theta_v points_v <= N
            (np.full(count, sum_row), theta_col + np.arange(count), np.ones(count)),
            (np.full(count, level_row), theta_col + np.arange(count), -levels), ([level_row], [level_col], [1.0]),
            (need_rows[job_of], np.arange(cells), self.throughput.ravel()),
        ]
        num_rows = need_rows[-1] + 1 if jobs else level_row + 1
        row_lower = np.concatenate([np.zeros(jobs), np.full(jobs, self.min_time), np.full(2 * types, -INF), [1.0, 0.0],
                                    need])
        row_upper = np.concatenate([np.full(jobs, INF), np.ones(jobs), np.zeros(2 * types), [1.0, 0.0],
                                    np.full(jobs, INF)])
        if self.total is not None:
            parts.append((np.full(cells, num_rows), np.arange(cells), self.throughput.ravel()))
            row_lower, row_upper = np.append(row_lower, self.total), np.append(row_upper, INF)
            num_rows += 1
        if refined > -INF:  # the refinement's sum of scores, every job against its least E
            parts.append((np.full(cells, num_rows), np.arange(cells), (self.throughput / low_demand[:, None]).ravel()))
            row_lower, row_upper = np.append(row_lower, refined), np.append(row_upper, INF)
            num_rows += 1
        num_cols = level_col + 1
        matrix = sp.csr_matrix((np.concatenate([np.asarray(p[2], dtype=float) for p in parts]),
                                (np.concatenate([np.asarray(p[0]) for p in parts]),
                                 np.concatenate([np.asarray(p[1]) for p in parts]))), shape=(num_rows, num_cols))
        cost = np.zeros(num_cols)
        cost[n_col:n_col + types] = self.price
        lp = LinearProgram(
            cost=cost, matrix=matrix, row_lower=row_lower, row_upper=row_upper, sense="min",
            col_lower=np.concatenate([np.zeros(cells), smallest, np.zeros(count), [0.0]]),
            col_upper=np.concatenate([self._runnable(largest).ravel().astype(float), largest, np.ones(count), [INF]]))
        outcome = runner.solve_lp(lp, algorithm="simplex")
        if outcome.status == "infeasible":
            return float("inf")
        if outcome.status != "optimal" or outcome.objective is None:
            return -float("inf")  # no proof either way: the box is not ruled out
        # The LP's optimum is feasible to about 1e-7: the bound keeps that much below it.
        return float(outcome.objective - self.price @ self.base) - FACE_SLACK * max(1.0, abs(outcome.objective))
