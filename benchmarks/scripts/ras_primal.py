"""The primal side at 10^6 servers, continued from ras_split.py: what remains
of the split's plan once it is made feasible, why its fix step stays short, and a
large-neighbourhood search from the greedy's feasible plan. An experiment, not a solver:
benchmarks/results/reservation.md ("RAS at 10^6: what the primal side tried") has what it gave.

    .venv/bin/python -u benchmarks/scripts/ras_primal.py prepare 1000000 --cache DIR
    .venv/bin/python -u benchmarks/scripts/ras_primal.py repair 1000000 --cache DIR --seconds 120
    .venv/bin/python -u benchmarks/scripts/ras_primal.py lns 1000000 --cache DIR --seconds 400 --size 30

``prepare`` runs the datacenter relaxation, one pass of ras_split.py's split and the greedy,
and saves the two count vectors in DIR (so each later step starts from the same points without
paying for them again; their CPU and wall are printed). ``repair`` prints the rows the split's
counts break, by kind, then runs the elastic repair of fleetplan/solvers/reservation/repair.py
(short reservations free, then every count) and prints the objective left. ``lns`` frees
``--size`` reservations at a time from the greedy's plan (or, ``--start split``, the
split's, its shortfall priced), the others fixed, solves that sub-MIP (by RENS unless
``--whole``; ``--later N``: N at a time after the first pass) and keeps improvements. ``bound``
solves the datacenter relaxation as a MIP (its binaries integer) for ``--seconds``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ras_speed import cpu_now  # noqa: E402
from ras_split import Experiment  # noqa: E402

from fleetplan.models.linear import LinearProgram  # noqa: E402
from fleetplan.models.reservation import (  # noqa: E402
    counts_from_assignment,
    full_solution,
    satisfies,  # noqa: E402
)
from fleetplan.solvers.deadline import Deadline  # noqa: E402


def row_kinds(experiment: Experiment) -> np.ndarray:
    """A name per row of the model, from the block order of fleetplan.models.reservation.build."""
    lp, model, arrays = experiment.lp, experiment.model, experiment.arrays
    kinds = np.full(lp.num_rows, "other", dtype=object)
    csc = experiment.csc
    only_x = np.asarray(abs(lp.matrix[:, lp.names["m"].start:]).sum(axis=1)).ravel() == 0
    upper_only = np.isinf(lp.row_lower) & np.isfinite(lp.row_upper)
    kinds[only_x & upper_only] = "supply"
    t_rows = csc[:, lp.names["T"]].tocsr()
    touches_t = np.diff(t_rows.indptr) > 0
    positive = np.isfinite(lp.row_lower) & (lp.row_lower > 0)
    x_in = np.diff(csc[:, lp.names["x"]].tocsr().indptr) > 0
    kinds[touches_t & positive & ~x_in] = "request (T >= request)"
    res_level = arrays.res_level
    del res_level
    kinds[touches_t & positive & x_in] = "domain guarantee (T - domain >= request)"
    m_rows = np.diff(csc[:, lp.names["m"]].tocsr().indptr)
    kinds[(m_rows > 1) & upper_only] = "disruption budget"
    kinds[(m_rows == 1) & positive & ~touches_t] = "moves (x + m >= c0)"
    del model
    return kinds


def violated(experiment: Experiment, values: np.ndarray) -> None:
    lp = experiment.lp
    activity = lp.matrix @ values
    short = np.maximum(lp.row_lower - activity, 0) + np.maximum(activity - lp.row_upper, 0)
    kinds = row_kinds(experiment)
    broken = np.flatnonzero(short > 1e-6)
    for kind in np.unique(kinds[broken]):
        rows = broken[kinds[broken] == kind]
        print(f"  broken {kind}: {rows.size} rows, {short[rows].sum():.2f} in all, largest {short[rows].max():.2f}")
    budget = np.flatnonzero(kinds == "disruption budget")
    for row in budget:
        print(f"  budget row: {activity[row]:.0f} moved of {lp.row_upper[row]:.0f}")
    t = values[lp.names["T"]]
    request = experiment.arrays.res_request
    print(f"  reservations below their request in total: {int((t < request - 1e-6).sum())}")


def prepare(args) -> None:
    from fleetplan.solvers.reservation.heuristics import ras_greedy

    experiment = Experiment(args.servers)
    experiment.say(f"region and model: {experiment.model.sizes}")
    experiment.relaxation()
    values = experiment.split(args.per)
    np.save(os.path.join(args.cache, "split.npy"), values[experiment.lp.names["x"]])
    violated(experiment, values)
    cpu, wall = cpu_now(), time.perf_counter()
    instance = region_instance(args.servers)
    greedy = ras_greedy(instance, time_limit=None, seed=0, threads=1, progress=lambda *a: None)
    counts = counts_from_assignment(experiment.model, experiment.arrays, greedy.plan.assignment_array(instance))
    np.save(os.path.join(args.cache, "greedy.npy"), counts)
    print(f"greedy: {greedy.objective:.2f} ({greedy.status}); cpu {cpu_now() - cpu:.1f} s, "
          f"wall {time.perf_counter() - wall:.1f} s, load {os.getloadavg()[0]:.1f}", flush=True)
    np.save(os.path.join(args.cache, "bound.npy"), np.array([experiment.bound]))


def region_instance(servers: int):
    from ras_speed import region

    return region(servers)


def repair_split(args) -> None:
    from fleetplan.solvers.reservation.repair import repair, set_counts
    from fleetplan.solvers.reservation.state import RasState, shortfalls

    experiment = Experiment(args.servers)
    experiment.say("region and model")
    model, lp = experiment.model, experiment.lp
    counts = np.load(os.path.join(args.cache, "split.npy"))
    values = full_solution(model, counts)
    experiment.say(f"split: {experiment.objective(values):.1f}, violation {experiment.violation(values):.2f}")
    violated(experiment, values)
    state = RasState(experiment.arrays)
    set_counts(state, model.key_res, model.key_group, counts)
    short = shortfalls(state)
    experiment.say(f"state: objective {state.objective():.1f}, {int((short > 1e-6).sum())} reservations short, "
                   f"{short.sum():.1f} RRU, moved {state.moved} of budget {experiment.arrays.budget:.0f}")
    log: list[str] = []
    outcome = repair(state, Deadline(args.seconds), 1, 0, log)
    for line in log:
        print("   ", line)
    fixed = full_solution(model, state.x[model.key_res, model.key_group].astype(float))
    experiment.say(f"repair {outcome.status} {outcome.message}: {experiment.objective(fixed):.1f}, "
                   f"violation {experiment.violation(fixed):.2f}, feasible {satisfies(model, fixed)}")
    if satisfies(model, fixed):
        np.save(os.path.join(args.cache, "split_repaired.npy"), fixed[lp.names["x"]])


def lns(args) -> None:
    experiment = Experiment(args.servers)
    experiment.say("region and model")
    bound = float(np.load(os.path.join(args.cache, "bound.npy"))[0])
    name = {"greedy": "greedy.npy", "split": "split.npy", "lns": "lns_greedy.npy"}[args.start]
    values = full_solution(experiment.model, np.load(os.path.join(args.cache, name)).astype(float))
    penalised = not satisfies(experiment.model, values)
    experiment.say(f"start ({args.start}): {experiment.objective(values):.1f}, violation "
                   f"{experiment.violation(values):.2f}")
    experiment.bound = bound
    model = experiment.model
    slack = model.groups.available - np.bincount(model.key_group, weights=values[experiment.lp.names["x"]],
                                                 minlength=model.groups.available.size)
    print(f"  supply groups: {slack.size}, free servers 0: {int((slack < 0.5).sum())}, "
          f"<= {TIGHT:g}: {int((slack <= TIGHT).sum())}, median free {np.median(slack):.0f}", flush=True)
    values = search(experiment, values, args.seconds, args.per, args.size, penalised, not args.whole, args.later,
                    args.hood)
    suffix = "" if args.hood == "random" else f"_{args.hood}"
    np.save(os.path.join(args.cache, f"lns_{args.start}{suffix}.npy"), values[experiment.lp.names["x"]])
    objective = experiment.objective(values)
    experiment.say(f"LNS end: {objective:.2f}, {(objective - bound) / objective:.2%} above {bound:.2f}, "
                   f"feasible {satisfies(experiment.model, values)}")


def search(experiment: Experiment, values: np.ndarray, seconds: float, per: float, size: int,
           penalised: bool = False, rens: bool = True, later: int | None = None,
           hood: str = "random") -> np.ndarray:
    """ras_split.py's LNS step, printing its progress every 30 s: ``size`` random reservations
    freed at a time, the others fixed, the sub-MIP solved from the current plan (so never
    worse), improvements kept. ``penalised``: the start may break guarantee rows; each sub-MIP
    prices their shortfall (SHORT_PENALTY per RRU) and half of each neighbourhood is drawn
    from the reservations still short; a plan is kept when it is less short, or as short and
    cheaper. ``rens``: the neighbourhoods are the reservations of a random order taken ``size``
    at a time, and each sub-MIP is solved within the floor and ceiling of its LP optimum (the
    relaxation-induced neighbourhood, RENS) without a start; else random reservations, the
    whole sub-MIP from the current plan (which found no improvement in 5-10 s at 10^6).
    ``hood="related"``: each neighbourhood is a seed reservation (a random order, one per
    sub-MIP) and the ``size - 1`` reservations sharing most of its tight supply groups (a
    group's free servers at most TIGHT), ties at random; ``"mixed"``: related and random
    neighbourhoods in turn."""
    import dataclasses

    from ras_split import SHORT_PENALTY

    from fleetplan.solvers import highs as runner

    rng = np.random.default_rng(0)
    stop = time.perf_counter() + seconds
    lp = experiment.lp
    num_res = experiment.arrays.num_reservations
    tried = kept = 0
    last = time.perf_counter()
    short_res = _short_reservations(experiment, values)
    order = np.zeros(0, dtype=np.int64)
    seeds = np.zeros(0, dtype=np.int64)
    while time.perf_counter() < stop:
        if hood == "related" or (hood == "mixed" and tried % 2 == 0):
            if seeds.size == 0:
                seeds = rng.permutation(num_res)
            chosen, seeds = related(experiment, values, seeds[0], size, rng), seeds[1:]
        elif rens and not (penalised and short_res.size):
            if order.size == 0:
                if tried:  # a pass is over: later passes take ``later`` reservations at a time
                    size = later or size
                order = rng.permutation(num_res)
            chosen, order = order[:size], order[size:]
        elif penalised and short_res.size:
            some = rng.choice(short_res, size=min(size // 2, short_res.size), replace=False)
            others = rng.choice(num_res, size=size, replace=False)
            chosen = np.unique(np.concatenate([some, others]))[:size]
            chosen = np.unique(np.concatenate([some, chosen]))
        else:
            chosen = rng.choice(num_res, size=min(size, num_res), replace=False)
        free = np.isin(experiment.col_res, chosen)
        cols, _, sub = experiment.restricted(values, free)
        start = values[cols]
        if penalised:
            rows = np.flatnonzero(np.isfinite(sub.row_lower) & (sub.row_lower > 0))
            activity = sub.matrix @ start
            sub = experiment.add_columns(sub, rows, np.ones(rows.size), SHORT_PENALTY)
            start = np.concatenate([start, np.maximum(sub.row_lower[rows] - activity[rows], 0.0)])
        left = min(per, max(stop - time.perf_counter(), 0.1))
        if rens:
            linear = runner.new_highs(left, 1, 0)
            runner.pass_lp(linear, sub, "simplex")
            linear.setOptionValue("solve_relaxation", True)
            linear.run()
            if linear.modelStatusToString(linear.getModelStatus()) != "Optimal":
                continue
            fractional = np.asarray(linear.getSolution().col_value)
            integer = sub.integrality > 0
            lower, upper = sub.col_lower.copy(), sub.col_upper.copy()
            lower[integer] = np.maximum(np.floor(fractional[integer] + 1e-9), lower[integer])
            upper[integer] = np.minimum(np.ceil(fractional[integer] - 1e-9), upper[integer])
            ran = experiment.mip(dataclasses.replace(sub, col_lower=lower, col_upper=upper),
                                 min(per, max(stop - time.perf_counter(), 0.1)), 1e-4)
        else:
            ran = experiment.mip(sub, left, 1e-5, start)
        tried += 1
        if ran.values is not None:
            trial = values.copy()
            trial[cols] = ran.values[:cols.size]
            trial = full_solution(experiment.model, np.round(trial[lp.names["x"]]))
            before, after = experiment.violation(values), experiment.violation(trial)
            if after < before - 1e-6 or (after <= before + 1e-6
                                         and experiment.objective(trial) < experiment.objective(values) - 1e-9):
                values = trial
                kept += 1
                if penalised:
                    short_res = _short_reservations(experiment, values)
        if time.perf_counter() - last > 30:
            last = time.perf_counter()
            experiment.say(f"  LNS {tried} sub-MIPs, {kept} improved: {experiment.objective(values):.2f}, "
                           f"violation {experiment.violation(values):.2f}, {short_res.size} reservations short")
    experiment.say(f"LNS {tried} sub-MIPs, {kept} improved: {experiment.objective(values):.2f}, "
                   f"violation {experiment.violation(values):.2f}")
    return values


TIGHT = 2.0  # servers: a supply group with at most this many free is tight


def related(experiment: Experiment, values: np.ndarray, seed: int, size: int, rng) -> np.ndarray:
    """``seed`` and the ``size - 1`` reservations holding keys in most of the seed's tight
    supply groups (all its groups when none is tight), ties broken at random, topped up at
    random when fewer share a group."""
    model, lp = experiment.model, experiment.lp
    counts = values[lp.names["x"]]
    used = np.bincount(model.key_group, weights=counts, minlength=model.groups.available.size)
    slack = model.groups.available - used
    mine = np.unique(model.key_group[model.key_res == seed])
    tight = mine[slack[mine] <= TIGHT]
    groups = tight if tight.size else mine
    keys = np.isin(model.key_group, groups) & (model.key_res != seed)
    score = np.bincount(model.key_res[keys], minlength=experiment.arrays.num_reservations).astype(float)
    score += rng.random(score.size) * 0.5
    score[seed] = -1
    others = np.argsort(-score)[:size - 1]
    others = others[score[others] >= 1]
    if others.size < size - 1:
        rest = np.setdiff1d(np.arange(score.size), np.concatenate([others, [seed]]))
        others = np.concatenate([others, rng.choice(rest, size=size - 1 - others.size, replace=False)])
    return np.concatenate([[seed], others]).astype(np.int64)


def _short_reservations(experiment: Experiment, values: np.ndarray) -> np.ndarray:
    """The reservations on a row the plan breaks."""
    lp = experiment.lp
    activity = lp.matrix @ values
    broken = np.flatnonzero((lp.row_lower - activity > 1e-6) | (activity - lp.row_upper > 1e-6))
    touched = experiment.col_res[np.unique(experiment.csc[broken, :].indices)] if broken.size else np.zeros(0, int)
    return np.unique(touched[touched >= 0])


def relaxation_mip(args) -> None:
    """The datacenter relaxation with its integrality kept (``--integer y``: only the ML
    datacenter binaries; ``all``: also the summed counts, integers as sums of the model's):
    still a relaxation of the model, so HiGHS's dual bound on it is a bound on the model; the
    LP leaves the binaries fractional (compactness 6,028 in the LP, 8,660 in the search's plan)."""
    from fleetplan.models.reservation.relaxation import datacenter_relaxation
    from fleetplan.solvers import highs as runner
    from fleetplan.solvers.highs import interrupt_at
    from fleetplan.solvers.reservation.bounded import run_bounded

    experiment = Experiment(args.servers)
    experiment.say("region and model")
    relaxed = datacenter_relaxation(experiment.model, experiment.arrays)
    integrality = relaxed.integrality.copy()
    if args.integer == "y":
        integrality[relaxed.names["x"]] = 0
    import dataclasses

    highs = runner.new_highs(args.seconds, 1, 0)
    runner.pass_lp(highs, dataclasses.replace(relaxed, integrality=integrality), "simplex")
    highs.setOptionValue("solver", "choose")
    highs.setOptionValue("presolve", "off")
    highs.setOptionValue("mip_rel_gap", 1e-4)
    highs.changeObjectiveOffset(float(experiment.model.constant))
    stop = time.perf_counter() + args.seconds
    interrupt_at(highs, stop)
    ran = run_bounded(highs, stop)
    experiment.say(f"datacenter relaxation as a MIP ({args.integer} integer): {ran.status}, "
                   f"incumbent {ran.objective:.2f}, bound {ran.bound:.2f}")


def exact(args) -> None:
    """One reservation at a time (a random order), from the saved search plan (lns_greedy.npy):
    its whole sub-MIP (not RENS), the others fixed, the current plan as its start, the
    disruption budget's row replaced by ``lam`` per server moved (the relaxation's dual by
    default) and by the rule that the plan's moves stay within the budget; a change is kept when
    the plan costs less and keeps every row."""

    from fleetplan.solvers import highs as runner
    from fleetplan.solvers.reservation.bounded import highs_solution, run_bounded

    experiment = Experiment(args.servers)
    lp, model = experiment.lp, experiment.model
    m_cols = np.arange(lp.names["m"].start, lp.names["m"].stop)
    per_row = np.diff(experiment.csc[:, m_cols].tocsr().indptr)
    budget = int(np.argmax(per_row))
    lam = args.lam if args.lam is not None else datacenter_relaxation_lp(experiment)
    cost = lp.cost.copy()
    cost[m_cols] += lam
    name = {"greedy": "greedy.npy", "lns": "lns_greedy.npy"}.get(args.start, "lns_greedy.npy")
    values = full_solution(model, np.load(os.path.join(args.cache, name)).astype(float))
    experiment.say(f"start ({args.start}): {experiment.objective(values):.2f}")
    rng = np.random.default_rng(0)
    order = rng.permutation(experiment.arrays.num_reservations)
    if args.ml_only:
        order = order[experiment.arrays.res_ml[order]]
    stop = time.perf_counter() + args.seconds
    last, tried, kept = time.perf_counter(), 0, 0
    activity = experiment.csc @ values
    for r in order:
        if time.perf_counter() > stop:
            break
        cols = np.flatnonzero(experiment.col_res == r)
        matrix = experiment.csc[:, cols].tocsr()
        rows = np.flatnonzero(np.diff(matrix.indptr) > 0)
        rows = rows[rows != budget]
        constant = activity - matrix @ values[cols]
        sub = LinearProgram(cost=cost[cols], matrix=matrix[rows], row_lower=lp.row_lower[rows] - constant[rows],
                            row_upper=lp.row_upper[rows] - constant[rows], col_lower=lp.col_lower[cols].copy(),
                            col_upper=lp.col_upper[cols].copy(), integrality=lp.integrality[cols].copy())
        highs = runner.new_highs(args.per, 1, 0)
        runner.pass_lp(highs, sub, "simplex")
        highs.setOptionValue("presolve", "off")
        highs.setOptionValue("mip_rel_gap", 1e-4)
        highs.setSolution(highs_solution(values[cols]))
        ran = run_bounded(highs, time.perf_counter() + args.per)
        tried += 1
        if ran.values is not None:
            trial = values.copy()
            trial[cols] = np.round(ran.values)
            trial = full_solution(model, trial[lp.names["x"]])
            if experiment.objective(trial) < experiment.objective(values) - 1e-9 and satisfies(model, trial):
                values, kept = trial, kept + 1
                activity = experiment.csc @ values
        if time.perf_counter() - last > 30:
            last = time.perf_counter()
            experiment.say(f"  {tried} reservations, {kept} improved: {experiment.objective(values):.2f}")
    np.save(os.path.join(args.cache, "exact.npy"), values[lp.names["x"]])
    objective = experiment.objective(values)
    bound = float(np.load(os.path.join(args.cache, "bound.npy"))[0])
    experiment.say(f"exact pass end: {tried} reservations, {kept} improved: {objective:.2f}, "
                   f"{(objective - bound) / objective:.2%} above {bound:.2f}, feasible {satisfies(model, values)}")


def lagrange(args) -> None:
    """A Lagrangian bound on the model: the disruption budget priced at ``lam`` per server moved
    (default: the budget row's dual in the datacenter relaxation's LP) and every other
    reservation taken out of the supply rows (their counts are >= 0 on rows ``<= available``,
    so dropping them only loosens the rows). What is left splits into one MIP per reservation
    with its own fault domains, guarantees and datacenter binaries; the sum of their dual bounds,
    less ``lam`` times the budget, is a bound on the model for any ``lam >= 0``."""
    from fleetplan.solvers import highs as runner

    experiment = Experiment(args.servers)
    experiment.say("region and model")
    lp, model = experiment.lp, experiment.model
    m_cols = np.arange(lp.names["m"].start, lp.names["m"].stop)
    per_row = np.diff(experiment.csc[:, m_cols].tocsr().indptr)
    budget = int(np.argmax(per_row))
    assert per_row[budget] > 1, "no disruption budget row"
    room = float(lp.row_upper[budget])
    lam = args.lam
    if lam is None:
        relaxed = datacenter_relaxation_lp(experiment)
        lam = relaxed
    cost = lp.cost.copy()
    cost[m_cols] += lam
    zeros = np.zeros(lp.num_cols)
    plan = full_solution(model, np.load(os.path.join(args.cache, "lns_greedy.npy")).astype(float))
    priced = np.bincount(np.maximum(experiment.col_res, 0), weights=cost * plan, minlength=experiment.arrays.num_reservations)
    if args.report:  # the saved per-reservation bounds against the plan, by kind, without solving
        bounds = np.load(os.path.join(args.cache, "lagrange_bounds.npy"))
        done = ~np.isnan(bounds)
        room_r = priced - np.where(done, bounds, 0.0)
        ml = experiment.arrays.res_ml
        print(f"  {int(done.sum())} reservations bounded: bounds {bounds[done].sum():.1f}, plan priced "
              f"{priced[done].sum():.1f}; room on the {int((done & ml).sum())} ML ones {room_r[done & ml].sum():.1f}, "
              f"on the {int((done & ~ml).sum())} others {room_r[done & ~ml].sum():.1f}")
        return
    bounds = np.full(experiment.arrays.num_reservations, np.nan)
    total, proved, worst = 0.0, 0, 0.0
    num_res = experiment.arrays.num_reservations
    for r in range(num_res if args.count is None else args.count):
        free = experiment.col_res == r
        cols, rows, sub = experiment.restricted(zeros, free)
        keep = rows != budget
        import dataclasses
        sub = dataclasses.replace(sub, cost=cost[cols], matrix=sub.matrix[np.flatnonzero(keep)],
                                  row_lower=sub.row_lower[keep], row_upper=sub.row_upper[keep])
        highs = runner.new_highs(args.per, 1, 0)
        runner.pass_lp(highs, sub, "simplex")
        highs.setOptionValue("presolve", "off")
        highs.setOptionValue("mip_rel_gap", args.gap)
        highs.run()
        info = highs.getInfo()
        status = highs.modelStatusToString(highs.getModelStatus())
        bound = float(info.mip_dual_bound)
        if status == "Optimal":
            proved += 1
        else:
            worst = max(worst, float(info.mip_gap))
        total += bound
        bounds[r] = bound
        if r % 100 == 99:
            np.save(os.path.join(args.cache, "lagrange_bounds.npy"), bounds)
            experiment.say(f"  {r + 1} reservations, partial sum {total:.1f}, {proved} optimal; the saved plan "
                           f"(lns_greedy.npy) priced the same on these: {priced[:r + 1].sum():.1f}")
    value = total - lam * room + model.constant
    experiment.say(f"Lagrangian bound (budget at {lam:.4f} per server, room {room:.0f}): {value:.2f}; "
                   f"{proved} of {num_res} sub-MIPs optimal, largest gap of the others {worst:.2e}")


def datacenter_relaxation_lp(experiment: Experiment) -> float:
    """The disruption budget row's dual in the datacenter relaxation's LP (a price per server moved, >= 0)."""
    from fleetplan.models.reservation.relaxation import datacenter_relaxation
    from fleetplan.solvers import highs as runner

    relaxed = datacenter_relaxation(experiment.model, experiment.arrays)
    highs = runner.new_highs(None, 1, 0)
    runner.pass_lp(highs, relaxed, "simplex")
    highs.setOptionValue("solve_relaxation", True)
    highs.run()
    m = np.arange(relaxed.names["m"].start, relaxed.names["m"].stop)
    per_row = np.diff(relaxed.matrix.tocsc()[:, m].tocsr().indptr)
    row = int(np.argmax(per_row))
    dual = float(np.asarray(highs.getSolution().row_dual)[row])
    experiment.say(f"datacenter relaxation: {highs.getInfo().objective_function_value + experiment.model.constant:.2f}, "
                   f"budget row dual {dual:.4f}")
    return abs(dual)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("step", choices=["prepare", "repair", "lns", "bound", "lagrange", "exact"])
    parser.add_argument("--report", action="store_true", help="lagrange: the saved bounds against the plan, by kind")
    parser.add_argument("--ml-only", action="store_true", help="exact: only the ML reservations")
    parser.add_argument("--gap", type=float, default=1e-6, help="lagrange: relative gap of each sub-MIP")
    parser.add_argument("--count", type=int, default=None, help="lagrange: the first COUNT reservations only")
    parser.add_argument("--lam", type=float, default=None, help="lagrange: price per server moved")
    parser.add_argument("servers", type=int)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--per", type=float, default=20.0, help="seconds per sub-MIP")
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--size", type=int, default=20, help="reservations freed at a time (lns)")
    parser.add_argument("--later", type=int, default=None, help="lns: reservations at a time after the first pass")
    parser.add_argument("--start", choices=["greedy", "split", "lns"], default="greedy",
                        help="lns: the random search's saved plan (lns_greedy.npy)")
    parser.add_argument("--hood", choices=["random", "related", "mixed"], default="random",
                        help="lns: neighbourhoods (related: reservations sharing tight supply groups)")
    parser.add_argument("--integer", choices=["y", "all"], default="y", help="bound: which columns stay integer")
    parser.add_argument("--whole", action="store_true", help="whole sub-MIPs from the plan, not RENS")
    args = parser.parse_args()
    os.makedirs(args.cache, exist_ok=True)
    {"prepare": prepare, "repair": repair_split, "lns": lns, "bound": relaxation_mip, "lagrange": lagrange, "exact": exact}[args.step](args)


if __name__ == "__main__":
    main()
