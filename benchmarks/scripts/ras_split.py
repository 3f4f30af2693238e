"""The primal side at 10^6 servers: a plan from a per-datacenter split of the
datacenter relaxation (fleetplan/models/reservation/relaxation.py), measured against that
relaxation's bound. An experiment, not a solver: benchmarks/results/reservation.md ("RAS at
10^6: what the primal side tried") has what it gave.

    .venv/bin/python benchmarks/scripts/ras_split.py 100000
    .venv/bin/python benchmarks/scripts/ras_split.py 1000000 --per 20 --lns 120

Steps, each printing its objective, CPU, wall and load:

1. the datacenter relaxation's LP: the bound, and per (reservation, type, datacenter) counts;
2. *split*, one datacenter after another: the aggregated model restricted to that datacenter's
   counts, the others fixed (the datacenters not done yet at the relaxation's counts spread over
   their fault domains by supply), each reservation's total RRU held at the relaxation's (a
   penalised shortfall), its guarantee rows penalised too, the disruption budget shared as the
   relaxation moves servers; the sub-LP first, then the sub-MIP within the LP's floor and
   ceiling (RENS), for ``--per`` seconds;
3. *pass 2*: each datacenter again, every other one now at its integer counts, the guarantee rows
   penalised, the current counts (with their shortfalls) as the start;
4. *fix*: the reservations still short freed together (the others fixed), penalised;
5. *LNS*: 20 random reservations freed at a time, the others fixed, exact sub-MIP, for ``--lns``
   seconds; then the hill climb (fleetplan/solvers/reservation/heuristics.py) for 60 s.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ras_speed import cpu_now, region  # noqa: E402

from fleetplan.models.linear import LinearProgram  # noqa: E402
from fleetplan.models.reservation import (  # noqa: E402
    build,
    full_solution,
    satisfies,  # noqa: E402
)
from fleetplan.models.reservation.relaxation import datacenter_relaxation  # noqa: E402
from fleetplan.solvers import highs as runner  # noqa: E402
from fleetplan.solvers.deadline import Deadline  # noqa: E402
from fleetplan.solvers.reservation.bounded import bounded_mip  # noqa: E402
from fleetplan.solvers.reservation.heuristics import climb  # noqa: E402
from fleetplan.solvers.reservation.repair import set_counts  # noqa: E402
from fleetplan.solvers.reservation.state import RasState  # noqa: E402

SHORT_PENALTY = 1e3  # per RRU short of a guarantee or of the relaxation's total
BUDGET_PENALTY = 20.0  # per server moved beyond a datacenter's share of the budget


class Experiment:
    def __init__(self, servers: int) -> None:
        self.cpu, self.wall = cpu_now(), time.perf_counter()
        self.arrays = region(servers).arrays()
        self.model = build(self.arrays)
        lp = self.lp = self.model.lp
        arrays, groups = self.arrays, self.model.groups
        self.key_dc = groups.dc[self.model.key_group]
        self.csc = lp.matrix.tocsc()
        num_dcs = arrays.num_dcs
        self.col_dc = np.full(lp.num_cols, -1)
        self.col_res = np.full(lp.num_cols, -1)
        with_c0 = np.flatnonzero(self.model.key_c0 > 0)
        for name, dcs, res in (("x", self.key_dc, self.model.key_res),
                               ("m", self.key_dc[with_c0], self.model.key_res[with_c0])):
            self.col_dc[lp.names[name]], self.col_res[lp.names[name]] = dcs, res
        self.col_res[lp.names["T"]] = np.arange(arrays.num_reservations)
        if self._size("z"):
            self.col_res[lp.names["z"]] = np.flatnonzero(~arrays.res_ml)
        for name, chosen in (("y", arrays.res_ml), ("e", ~np.isnan(arrays.res_ratio))):
            if self._size(name):
                keys = np.flatnonzero(chosen[self.model.key_res])
                pairs = np.unique(self.model.key_res[keys] * num_dcs + self.key_dc[keys])
                self.col_dc[lp.names[name]], self.col_res[lp.names[name]] = pairs % num_dcs, pairs // num_dcs
        self.bound = None

    def _size(self, name: str) -> int:
        block = self.lp.names[name]
        return block.stop - block.start

    def say(self, what: str) -> None:
        print(f"{what}; cpu {cpu_now() - self.cpu:.1f} s, wall {time.perf_counter() - self.wall:.1f} s, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)

    def objective(self, values: np.ndarray) -> float:
        return float(self.lp.cost @ values + self.model.constant)

    def violation(self, values: np.ndarray) -> float:
        activity = self.lp.matrix @ values
        return float((np.maximum(self.lp.row_lower - activity, 0) + np.maximum(activity - self.lp.row_upper, 0)).sum())

    def relaxation(self) -> np.ndarray:
        relaxed = datacenter_relaxation(self.model, self.arrays)
        highs = runner.new_highs(None, 1, 0)
        runner.pass_lp(highs, relaxed, "simplex")
        highs.setOptionValue("solve_relaxation", True)
        highs.run()
        self.bound = highs.getInfo().objective_function_value + self.model.constant
        self.relaxed, self.point = relaxed, np.asarray(highs.getSolution().col_value)
        self.say(f"datacenter relaxation: bound {self.bound:.1f}")
        return self.point

    def restricted(self, values: np.ndarray, free: np.ndarray, rows_of: np.ndarray | None = None):
        """The model with the columns not ``free`` fixed at ``values``: its columns and rows
        (those with a free column, or with one in ``rows_of``), bounds shifted."""
        import scipy.sparse as sp

        cols = np.flatnonzero(free)
        fixed = np.flatnonzero(~free)
        matrix = self.csc[:, cols].tocsr()
        touch = self.csc[:, np.flatnonzero(rows_of)].tocsr() if rows_of is not None else matrix
        rows = np.flatnonzero(np.diff(touch.indptr) > 0)
        constant = self.csc[:, fixed] @ values[fixed]
        lp = self.lp
        sub = LinearProgram(cost=lp.cost[cols].copy(), matrix=sp.csr_matrix(matrix[rows]),
                            row_lower=lp.row_lower[rows] - constant[rows], row_upper=lp.row_upper[rows] - constant[rows],
                            col_lower=lp.col_lower[cols].copy(), col_upper=lp.col_upper[cols].copy(),
                            integrality=lp.integrality[cols].copy())
        return cols, rows, sub

    @staticmethod
    def add_columns(sub: LinearProgram, rows: np.ndarray, signs: np.ndarray, cost: float) -> LinearProgram:
        """One penalised slack column per row of ``rows`` (coefficient ``signs``)."""
        import scipy.sparse as sp

        extra = sp.csr_matrix((signs, (rows, np.arange(rows.size))), shape=(sub.matrix.shape[0], rows.size))
        return dataclasses.replace(
            sub, cost=np.concatenate([sub.cost, np.full(rows.size, cost)]),
            matrix=sp.hstack([sub.matrix, extra]).tocsr(),
            col_lower=np.concatenate([sub.col_lower, np.zeros(rows.size)]),
            col_upper=np.concatenate([sub.col_upper, np.full(rows.size, np.inf)]),
            integrality=np.concatenate([sub.integrality, np.zeros(rows.size, dtype=sub.integrality.dtype)]))

    @staticmethod
    def mip(sub: LinearProgram, seconds: float, gap: float, start: np.ndarray | None = None):
        return bounded_mip(sub, time.perf_counter() + seconds, 1, 0, gap, start)

    def split(self, per: float) -> np.ndarray:
        """Step 2 of the module docstring; the counts."""
        arrays, model, lp, relaxed, point = self.arrays, self.model, self.lp, self.relaxed, self.point
        groups, num_dcs = model.groups, arrays.num_dcs
        code = (model.key_res * arrays.num_types + groups.type[model.key_group]) * num_dcs + self.key_dc
        aggregate, of_key = np.unique(code, return_inverse=True)
        available = groups.available[model.key_group].astype(float)
        supply = np.bincount(of_key, weights=available, minlength=aggregate.size)
        spread = point[relaxed.names["x"]][of_key] * available / supply[of_key]
        target = point[relaxed.names["T"]]
        moved = np.bincount(of_key, weights=model.key_c0, minlength=aggregate.size) > 0
        share = np.bincount(aggregate[moved] % num_dcs, weights=point[relaxed.names["m"]], minlength=num_dcs)
        values = full_solution(model, spread)
        values[lp.names["T"]] = target
        if self._size("z"):
            values[lp.names["z"]] = point[relaxed.names["z"]]
        xs, ts, zs = lp.names["x"], lp.names["T"], lp.names["z"]
        counts = spread.copy()
        left = arrays.budget - model.forced
        budget_row = None
        if self._size("m"):
            rows = np.flatnonzero(np.diff(self.csc[:, lp.names["m"]].tocsr().indptr) > 0)
            budget_row = next((int(r) for r in rows if np.isfinite(lp.row_upper[r]) and np.isinf(lp.row_lower[r])), None)
        for d in range(num_dcs):
            started = time.perf_counter()
            local = self.col_dc == d
            free = local.copy()
            free[ts] = free[zs] = True
            cols, rows, sub = self.restricted(values, free, rows_of=local)
            at_t = np.flatnonzero((cols >= ts.start) & (cols < ts.stop))
            if self._size("z"):  # the relaxation's spread is a floor it pays anyway
                at_z = np.flatnonzero((cols >= zs.start) & (cols < zs.stop))
                sub.col_lower[at_z] = point[relaxed.names["z"]][cols[at_z] - zs.start]
            import scipy.sparse as sp

            # Each reservation's total at least the relaxation's (penalised shortfall).
            hold = sp.csr_matrix((np.ones(at_t.size), (np.arange(at_t.size), at_t)), shape=(at_t.size, cols.size))
            sub = dataclasses.replace(sub, matrix=sp.vstack([sub.matrix, hold]).tocsr(),
                                      row_lower=np.concatenate([sub.row_lower, target[cols[at_t] - ts.start]]),
                                      row_upper=np.concatenate([sub.row_upper, np.full(at_t.size, np.inf)]))
            count = rows.size + at_t.size
            sub = self.add_columns(sub, np.arange(rows.size, count), np.ones(at_t.size), SHORT_PENALTY)
            guarantees = np.flatnonzero(np.isfinite(sub.row_lower[:rows.size]) & (sub.row_lower[:rows.size] > 0))
            sub = self.add_columns(sub, guarantees, np.ones(guarantees.size), SHORT_PENALTY)
            if budget_row is not None and budget_row in rows:
                at = int(np.flatnonzero(rows == budget_row)[0])
                sub.row_upper[at] = max(left - share[d + 1:].sum(), 0.0)
                sub = self.add_columns(sub, np.array([at]), np.array([-1.0]), BUDGET_PENALTY)
            linear = runner.new_highs(per, 1, 0)
            runner.pass_lp(linear, sub, "simplex")
            linear.setOptionValue("solve_relaxation", True)
            linear.run()
            fractional = np.asarray(linear.getSolution().col_value)
            integer = sub.integrality > 0
            lower, upper = sub.col_lower.copy(), sub.col_upper.copy()
            lower[integer] = np.maximum(np.floor(fractional[integer] + 1e-9), lower[integer])
            upper[integer] = np.minimum(np.ceil(fractional[integer] - 1e-9), upper[integer])
            ran = self.mip(dataclasses.replace(sub, col_lower=lower, col_upper=upper), per, 1e-3)
            found = ran.values if ran.values is not None else np.where(integer, np.round(fractional), fractional)
            values[cols] = found[:cols.size]
            mine = np.flatnonzero(self.key_dc == d)
            counts[mine] = np.round(values[xs.start + mine])
            values[xs.start + mine] = counts[mine]
            left -= np.maximum(0, model.key_c0[mine] - counts[mine]).sum()
            print(f"  split datacenter {d}: {sub.num_cols} columns, {ran.status}"
                  f"{'' if ran.values is not None else ' (LP rounded)'}, {time.perf_counter() - started:.1f} s",
                  flush=True)
        values = full_solution(model, counts)
        self.say(f"split: {self.objective(values):.1f}, violation {self.violation(values):.1f}")
        return values

    def pass_two(self, values: np.ndarray, per: float) -> np.ndarray:
        """Step 3 of the module docstring."""
        lp = self.lp
        for d in range(self.arrays.num_dcs):
            free = self.col_dc == d
            free[lp.names["T"]] = free[lp.names["z"]] = True
            values = self._penalised(values, free, per)
        self.say(f"pass 2: {self.objective(values):.1f}, violation {self.violation(values):.2f}")
        return values

    def _penalised(self, values: np.ndarray, free: np.ndarray, per: float) -> np.ndarray:
        """The restriction to ``free`` with its guarantee rows penalised, from ``values`` (with
        their shortfalls as the slack); the result if it is less short, or as short and cheaper."""
        cols, rows, sub = self.restricted(values, free)
        guarantees = np.flatnonzero(np.isfinite(sub.row_lower) & (sub.row_lower > 0))
        sub = self.add_columns(sub, guarantees, np.ones(guarantees.size), SHORT_PENALTY)
        activity = sub.matrix[:, :cols.size] @ values[cols]
        start = np.concatenate([values[cols], np.maximum(sub.row_lower[guarantees] - activity[guarantees], 0.0)])
        ran = self.mip(sub, per, 1e-3, start)
        if ran.values is None:
            return values
        trial = values.copy()
        trial[cols] = ran.values[:cols.size]
        trial = full_solution(self.model, np.round(trial[self.lp.names["x"]]))
        before, after = self.violation(values), self.violation(trial)
        if after < before - 1e-6 or (after <= before + 1e-6 and self.objective(trial) < self.objective(values)):
            return trial
        return values

    def fix(self, values: np.ndarray, seconds: float) -> np.ndarray:
        """Step 4: the reservations on a violated row freed together."""
        activity = self.lp.matrix @ values
        broken = (self.lp.row_lower - activity > 1e-6) | (activity - self.lp.row_upper > 1e-6)
        touched = np.unique(self.col_res[np.unique(self.csc[broken.nonzero()[0], :].indices)])
        touched = touched[touched >= 0]
        values = self._penalised(values, np.isin(self.col_res, touched), seconds)
        self.say(f"fix ({touched.size} reservations free): {self.objective(values):.1f}, "
                 f"violation {self.violation(values):.2f}")
        return values

    def lns(self, values: np.ndarray, seconds: float, per: float, size: int = 20) -> np.ndarray:
        """Step 5's neighbourhoods: ``size`` random reservations at a time, the others fixed."""
        rng = np.random.default_rng(0)
        stop = time.perf_counter() + seconds
        best = self.objective(values)
        while time.perf_counter() < stop:
            chosen = rng.choice(self.arrays.num_reservations, size=min(size, self.arrays.num_reservations), replace=False)
            free = np.isin(self.col_res, chosen)
            cols, _, sub = self.restricted(values, free)
            ran = self.mip(sub, min(per, max(stop - time.perf_counter(), 0.1)), 1e-5, values[cols])
            if ran.values is None:
                continue
            trial = values.copy()
            trial[cols] = ran.values
            trial = full_solution(self.model, np.round(trial[self.lp.names["x"]]))
            if satisfies(self.model, trial) and self.objective(trial) < best - 1e-9:
                values, best = trial, self.objective(trial)
        self.say(f"LNS: {best:.1f}")
        return values

    def climb(self, values: np.ndarray, seconds: float) -> float:
        state = RasState(self.arrays)
        set_counts(state, self.model.key_res, self.model.key_group, values[self.lp.names["x"]])
        climb(state, Deadline(seconds), True, lambda *args: None, [])
        return state.objective()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("servers", type=int)
    parser.add_argument("--per", type=float, default=10.0, help="seconds per datacenter sub-MIP")
    parser.add_argument("--fix", type=float, default=30.0, help="seconds for the fix")
    parser.add_argument("--lns", type=float, default=30.0, help="seconds of LNS")
    args = parser.parse_args()
    experiment = Experiment(args.servers)
    experiment.say(f"region and model: {experiment.model.sizes}")
    experiment.relaxation()
    values = experiment.pass_two(experiment.split(args.per), args.per)
    if not satisfies(experiment.model, values):
        values = experiment.fix(values, args.fix)
    if not satisfies(experiment.model, values):
        experiment.say("no feasible plan: stopped")
        return
    values = experiment.lns(values, args.lns, 5.0)
    objective = experiment.climb(values, 60.0)
    experiment.say(f"hill climb: {objective:.1f}, {(objective - experiment.bound) / objective:.2%} above the "
                   f"relaxation's bound {experiment.bound:.1f}")


if __name__ == "__main__":
    main()
