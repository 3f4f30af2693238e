"""Large-neighbourhood search for the aggregated RAS MIP (MAST §2) where the whole model is too
large for HiGHS: the primal side of ``mip-highs`` above ``LARGE_COLUMNS`` columns.

At 10^6 servers x 1,000 reservations the model's LP alone takes minutes, so the plan there was
the greedy's, 8.9 % above the datacenter relaxation's bound. The reservations are coupled only
by the supply rows (a third of the servers were free in that region) and the disruption budget
(all of it used), so most of what the greedy leaves is inside a reservation — its buffer over
its fault domains, its storage ratio, its datacenters — and a small group of reservations
re-planned together, the others fixed, recovers it. :func:`improve` takes the reservations of a
random order ``SIZE`` at a time; for each group it solves the sub-model's LP, then the sub-MIP
within the floor and ceiling of that LP's counts (the relaxation-induced neighbourhood, RENS;
the whole sub-MIP from the current plan found no improvement in 5-10 s at 10^6, RENS one in
about a second) in a child process killed at its deadline (:mod:`.bounded`), and keeps the
result when it keeps every row and costs less. Given a price per server moved (``mip-highs``
passes the budget row's dual in the datacenter relaxation), the second pass is the Lagrangian
one of :mod:`.lagrangian`: each reservation's MIP alone, moves priced, the others out of the
supply rows, whose dual bounds add up to a bound on the model, and whose solutions are tried as
moves (the others' servers put back). With two threads or more that pass runs from the start in
a child process on its own core (:class:`_Background`), its results tried as they come in. The
other passes alternate groups with the ML reservations one at a time: the reservation's whole
sub-MIP (not RENS: the group LP's floor and ceiling keep a reservation in the datacenters its
fractional binaries chose), the current plan as its start. The plan never gets worse than the
start.

Measured at 10^6 servers (benchmarks/results/reservation.md, "RAS at 10^6: what the primal
side tried" and "the Lagrangian pass"), ``mip-highs`` with a 600 s limit, from the greedy's
339,095: groups alone 316,053, 2.25 % above the datacenter relaxation's bound 308,935; groups
and single ML reservations 315,534 (2.09 %); with the Lagrangian pass inline 316,374, 1.30 %
above its bound 312,265; on its own core (``threads=2``) 315,445, 0.85 % above 312,748 (the
medians of three runs).
"""

from __future__ import annotations

import dataclasses
import itertools
import time

import numpy as np

from fleetplan.models.reservation import ReservationModel, full_solution
from fleetplan.solvers.reservation.bounded import GRACE_S, bounded_mip, can_fork, reap, start_child

# Reservations re-planned together: at 10^6 servers a RENS sub-MIP of 20 took about a second,
# one of 50 took 22 s.
SIZE = 20
# Seconds a sub-MIP may run (it keeps its best point when stopped).
PER_S = 3.0
# Seconds a single reservation's whole sub-MIP may run (it starts from the current plan).
SINGLE_S = 1.5
# The Lagrangian pass may use this share of the time left when it starts (inline, after the
# first pass of groups; on its own core, from the start); each reservation's MIP at most
# LAGRANGE_S seconds, at least LAGRANGE_MIN_S. At 10^6 servers, one thread, 600 s: shares 0.5,
# 0.8 and 0.95 (the last with 2.5 s, the others 1.5 s) ended 1.62 %, 1.38 % and 1.29 % above
# the bound: the bound gains more than the plan loses.
LAGRANGE_SHARE = 0.95
LAGRANGE_S = 2.5
LAGRANGE_MIN_S = 0.3
# Another Lagrangian pass, at the price :class:`~.lagrangian.PriceSearch` proposes, starts only
# while this many times the last pass's duration is left (a pass cut short bounds nothing).
NEXT_PASS_MARGIN = 1.5
# Relative gap at which a sub-MIP stops.
SUB_GAP = 1e-4


def column_reservation(model: ReservationModel, arrays) -> np.ndarray:
    """The reservation each column of ``model.lp`` belongs to (every column has one: counts,
    moves, totals, shortfalls, spread, datacenter binaries and ratio terms are per reservation)."""
    lp = model.lp
    owner = np.full(lp.num_cols, -1, dtype=np.int64)
    owner[lp.names["x"]] = model.key_res
    owner[lp.names["m"]] = model.key_res[model.key_c0 > 0]
    owner[lp.names["T"]] = np.arange(arrays.num_reservations)
    owner[lp.names["s"]] = np.arange(_size(lp, "s"))  # elastic models only
    if _size(lp, "z"):
        owner[lp.names["z"]] = np.flatnonzero(~arrays.res_ml)
    key_dc = model.groups.dc[model.key_group]
    for name, chosen in (("y", arrays.res_ml), ("e", ~np.isnan(arrays.res_ratio))):
        if _size(lp, name):  # one column per (reservation, datacenter) pair, in build's order
            keys = np.flatnonzero(chosen[model.key_res])
            pairs = np.unique(model.key_res[keys] * arrays.num_dcs + key_dc[keys])
            owner[lp.names[name]] = pairs // arrays.num_dcs
    return owner


def _size(lp, name: str) -> int:
    block = lp.names[name]
    return block.stop - block.start


@dataclasses.dataclass
class Searched:
    """What :func:`improve` returns: the plan (every column) and, when its Lagrangian pass ran
    to the end, that pass's bound on the model's objective (constant included; else None)."""

    values: np.ndarray
    bound: float | None = None


def improve(model: ReservationModel, arrays, values: np.ndarray, stop_at: float | None, seed: int,
            log: list[str], size: int = SIZE, per: float = PER_S, rounds: int | None = None,
            price: float | None = None, threads: int = 1) -> Searched:
    """A plan (every column) no worse than ``values`` (a feasible point of the model), improved
    by the search of the module docstring until ``stop_at`` (``time.perf_counter()``) or, when
    given, ``rounds`` sub-MIPs (of any kind); with neither, until a pass of each kind after the
    first ones improves nothing. With a ``price`` per server moved (the budget row's dual in a
    relaxation), the second pass is the Lagrangian one (:mod:`.lagrangian`), whose bound is
    returned when it finishes, followed by passes at better prices while the deadline or the
    rounds leave room for a whole pass; with ``threads`` > 1 that pass runs instead from the
    start in a child process beside the others (:class:`_Background`), waited for at the end
    (until the deadline, with one).

    Counted in ``rounds``, what the search does does not depend on the machine's speed, only
    each sub-MIP's own seconds cap does (``per``, ``SINGLE_S``, ``LAGRANGE_S``: the plan and
    bound of a sub-MIP stopped there)."""
    return _Search(model, arrays, values, stop_at, seed, log, size, per, rounds, price, threads).run()


class _Search:
    """The state of one :func:`improve`: the plan, its cost, the passes' counters."""

    def __init__(self, model, arrays, values, stop_at, seed, log, size, per, rounds, price, threads) -> None:
        from fleetplan.solvers.reservation.lagrangian import budget_row

        self.model, self.arrays, self.values = model, arrays, values
        self.stop_at, self.seed, self.log = stop_at, seed, log
        self.size, self.per, self.rounds, self.price = size, per, rounds, price
        self.lp = model.lp
        self.owner = column_reservation(model, arrays)
        self.csc = self.lp.matrix.tocsc()
        self.budget = budget_row(self.lp)
        if price is not None and self.budget is None:  # moves no row limits: pricing them bounds nothing
            self.price = 0.0
        self.best = self.first = float(self.lp.cost @ values)
        self.tried = 0
        self.counts: dict[str, list[int]] = {}  # kind -> [sub-MIPs, improved]
        self.bound: float | None = None
        self.threads = threads
        self.background: _Background | None = None

    def left(self) -> bool:
        return (self.stop_at is None or time.perf_counter() < self.stop_at) and \
            (self.rounds is None or self.tried < self.rounds)

    def run(self) -> Searched:
        started = time.perf_counter()
        rng = np.random.default_rng(self.seed)
        ml = np.flatnonzero(self.arrays.res_ml)
        kinds = ["groups"]
        if self.price is not None and self.threads > 1 and can_fork():
            self.background = _Background(self, ml)  # the Lagrangian pass on another core
        elif self.price is not None:
            kinds.append("lagrangian")
        kind, idle = "", 0
        cycle = 2 if ml.size else 1  # the kinds that alternate once the first passes are done
        while self.left():
            kind = kinds.pop(0) if kinds else ("singles" if kind == "groups" and ml.size else "groups")
            before, pass_started = self.best, time.perf_counter()
            if kind == "groups":
                self._groups(rng.permutation(self.arrays.num_reservations))
            elif kind == "singles":
                self._singles(rng.permutation(ml))
            else:
                self._lagrangian(ml)
            if self.left():  # the pass ended
                self.log.append(f"  pass of {kind}: {before + self.model.constant:.6g} -> "
                                f"{self.best + self.model.constant:.6g} in {time.perf_counter() - pass_started:.1f} s")
                idle = idle + 1 if self.best >= before - 1e-9 else 0
                if self.stop_at is None and self.rounds is None and not kinds and idle >= cycle:
                    break  # no budget: done once a pass of each kind improves nothing
        if self.background is not None:
            for cols_done, found_done in self.background.finish():
                self._try("lagrangian", cols_done, found_done)
            passes = self.background.passes
            received = int(np.isfinite(passes[0][1]).sum()) if passes else 0
            self.log.append(f"  Lagrangian pass on its own core: {received} of {self.arrays.num_reservations} "
                            f"reservations, {len(passes)} pass(es), "
                            f"{self.counts.get('lagrangian', [0, 0])[1]} of their solutions kept")
            self._set_bound(self.background.passes)
        done = "; ".join(f"{tried} {kind}, {kept} improved" for kind, (tried, kept) in self.counts.items())
        self.log.append(f"neighbourhood search: {done}; {self.first + self.model.constant:.6g} -> "
                        f"{self.best + self.model.constant:.6g} in {time.perf_counter() - started:.1f} s")
        return Searched(self.values, self.bound)

    def _groups(self, order: np.ndarray) -> None:
        for start in range(0, order.size, self.size):
            if not self.left():
                return
            cols, sub = _restricted(self.lp, self.csc, self.values, np.isin(self.owner, order[start:start + self.size]))
            self._keep("groups", cols, _rens(sub, self.stop_at, self.per, self.seed))

    def _singles(self, order: np.ndarray) -> None:
        for reservation in order.tolist():
            if not self.left():
                return
            cols, sub = _restricted(self.lp, self.csc, self.values, self.owner == reservation)
            self._keep("singles", cols, _whole(sub, self.values[cols], self.stop_at, SINGLE_S, self.seed).values)

    def _lagrangian(self, ml: np.ndarray) -> None:
        """The Lagrangian passes inline (one thread): each reservation's MIP of
        :mod:`.lagrangian`, its solution tried as a move, then the best pass's bound."""
        passes: dict[int, tuple[float, np.ndarray]] = {}
        for index, price, reservation, cols, ran in self._lagrangian_passes(ml):
            self._note_bound(passes, index, price, reservation, ran.bound)
            self._keep("lagrangian", cols, ran.values)
        self._set_bound(passes)

    def _note_bound(self, passes: dict[int, tuple[float, np.ndarray]], index: int, price: float, reservation: int,
                   bound: float) -> None:
        """Record a reservation's MIP bound in pass ``index`` (at ``price``) of ``passes``: pass
        -> (price, every reservation's bound, -inf where it has not run)."""
        passes.setdefault(index, (price, np.full(self.arrays.num_reservations, -np.inf)))[1][reservation] = bound

    def _lagrangian_passes(self, ml: np.ndarray):
        """Yield (pass, its price, reservation, its columns, what its MIP returned) for the
        Lagrangian pass at ``self.price``, then, while a deadline leaves room for a whole pass
        more, for passes at the prices :class:`~.lagrangian.PriceSearch` proposes from the
        servers each pass's solutions moved."""
        from fleetplan.solvers.reservation.lagrangian import PriceSearch, servers_moved

        positive = np.abs(self.lp.cost[self.lp.cost != 0])
        search = PriceSearch(self.price, scale=float(positive.mean()) if positive.size else 1.0)
        room = 0.0 if self.budget is None else float(self.lp.row_upper[self.budget])
        price = self.price
        for index in itertools.count():
            started, moved, done = time.perf_counter(), 0.0, 0
            for reservation, cols, ran in self._lagrangian_runs(ml, LAGRANGE_SHARE, price):
                done += 1
                moved += np.nan if ran.values is None else servers_moved(self.lp, cols, ran.values)
                yield index, price, reservation, cols, ran
            took = time.perf_counter() - started
            if (done < self.arrays.num_reservations or self.budget is None or not np.isfinite(moved)
                    or (self.stop_at is not None and self.stop_at - time.perf_counter() < NEXT_PASS_MARGIN * took)
                    or (self.rounds is not None and self.rounds - self.tried < self.arrays.num_reservations)):
                return
            proposed = search.next(moved, room)  # None once the search is done (at most MAX_PASSES)
            if proposed is None:
                return
            price = proposed

    def _lagrangian_runs(self, ml: np.ndarray, share: float, price: float):
        """Yield (reservation, its columns, what its MIP of :mod:`.lagrangian`, moves priced at
        ``price``, returned) for every reservation, within ``share`` of the time left, while
        there is time."""
        from fleetplan.solvers.reservation.lagrangian import subproblem

        others = np.setdiff1d(np.arange(self.arrays.num_reservations), ml)
        order = np.concatenate([others, ml])  # the quick ones first: the ML ones share what is left
        pass_stop = None if self.stop_at is None else time.perf_counter() + share * (self.stop_at - time.perf_counter())
        for done, reservation in enumerate(order.tolist()):
            if not self.left():
                return
            per = LAGRANGE_S
            if pass_stop is not None:
                per = min(LAGRANGE_S, max(LAGRANGE_MIN_S, (pass_stop - time.perf_counter()) /
                                          max(order.size - max(done, others.size), 1)))
            cols = np.flatnonzero(self.owner == reservation)
            sub = subproblem(self.lp, self.csc, cols, self.budget, price)
            yield reservation, cols, _whole(sub, self.values[cols], self.stop_at, per, self.seed)

    def _set_bound(self, passes: dict[int, tuple[float, np.ndarray]]) -> None:
        """The best bound of the passes that reached every reservation (each pass: its price
        and every reservation's MIP bound, -inf where it did not run)."""
        from fleetplan.solvers.reservation.lagrangian import lagrangian_bound

        found = []
        for index in sorted(passes):
            price, bounds = passes[index]
            bound = lagrangian_bound(bounds, self.lp, self.budget, price, self.model.constant)
            self.log.append(f"  Lagrangian bound (moves priced at {price:.4g}): "
                            + ("not finite" if bound is None else f"{bound:.6g}"))
            if bound is not None:
                found.append((bound, price))
        if found:
            self.bound, price = max(found)
            if len(passes) > 1:
                self.log.append(f"  Lagrangian bound: {self.bound:.6g}, the best of {len(passes)} passes "
                                f"(moves priced at {price:.4g})")

    def _keep(self, kind: str, cols: np.ndarray, found: np.ndarray | None) -> None:
        """The plan with ``found`` on ``cols`` if it keeps every row and costs less (and the
        background pass's results that came in meanwhile, likewise)."""
        if self.background is not None:
            for cols_done, found_done in self.background.drain():
                self._try("lagrangian", cols_done, found_done)
        self.tried += 1
        self._try(kind, cols, found)

    def _try(self, kind: str, cols: np.ndarray, found: np.ndarray | None) -> None:
        from fleetplan.models.reservation import satisfies

        counts = self.counts.setdefault(kind, [0, 0])
        counts[0] += 1
        if found is None:
            return
        trial = self.values.copy()
        trial[cols] = found
        trial = full_solution(self.model, np.round(trial[self.lp.names["x"]]))
        objective = float(self.lp.cost @ trial)
        if objective < self.best - 1e-9 and satisfies(self.model, trial):
            self.values, self.best = trial, objective
            counts[1] += 1


class _Background:
    """The Lagrangian pass in a forked child process, beside the search's own passes (two
    cores): the child runs the passes of :meth:`_Search._lagrangian_passes` (every
    reservation's MIP within ``LAGRANGE_SHARE`` of the time, then passes at better prices while
    there is time) and sends each result back; the search tries each solution as a move when it
    comes in and takes the best bound of the passes that reached every reservation."""

    def __init__(self, search: _Search, ml: np.ndarray) -> None:
        def work(send) -> None:
            for index, price, reservation, _, ran in search._lagrangian_passes(ml):
                send.send((index, price, reservation, ran.bound, ran.values))

        self.search = search
        self.passes: dict[int, tuple[float, np.ndarray]] = {}  # pass -> (price, bounds)
        self.pid, self.receive = start_child(work)
        self.ended = False

    def drain(self):
        """Yield (columns, solution or None) for each result that came in so far."""
        while not self.ended and self.receive.poll(0):
            try:
                index, price, reservation, bound, values = self.receive.recv()
            except EOFError:
                self.ended = True
                return
            self.search._note_bound(self.passes, index, price, reservation, bound)
            yield np.flatnonzero(self.search.owner == reservation), values

    def finish(self):
        """What is left to drain, until the child ends or the search's deadline (plus the
        grace of :mod:`.bounded`) passes (without a deadline, until the child ends: its passes
        are bounded by :data:`~.lagrangian.MAX_PASSES`); then the child is reaped."""
        try:
            while not self.ended:
                if self.search.stop_at is None:
                    self.receive.poll(None)  # a result, or the end of the pipe
                    yield from self.drain()
                    continue
                wait = self.search.stop_at + GRACE_S - time.perf_counter()
                if wait <= 0 or not self.receive.poll(wait):
                    break
                yield from self.drain()
        finally:
            reap(self.pid)
            self.receive.close()
            self.ended = True


def _restricted(lp, csc, values: np.ndarray, free: np.ndarray):
    """The model with the columns not ``free`` fixed at ``values``: the free columns and the
    rows that hold one, the fixed columns' share moved into the row bounds."""
    from fleetplan.models.linear import LinearProgram

    cols, fixed = np.flatnonzero(free), np.flatnonzero(~free)
    matrix = csc[:, cols].tocsr()
    rows = np.flatnonzero(np.diff(matrix.indptr) > 0)
    constant = csc[:, fixed] @ values[fixed]
    sub = LinearProgram(cost=lp.cost[cols].copy(), matrix=matrix[rows],
                        row_lower=lp.row_lower[rows] - constant[rows], row_upper=lp.row_upper[rows] - constant[rows],
                        col_lower=lp.col_lower[cols].copy(), col_upper=lp.col_upper[cols].copy(),
                        integrality=lp.integrality[cols].copy())
    return cols, sub


def _whole(sub, start: np.ndarray, stop_at: float | None, per: float, seed: int):
    """The sub-model's MIP from ``start`` (a feasible point of it) for at most ``per`` seconds:
    what :func:`~.bounded.bounded_mip` returned (best point or None, dual bound)."""
    return bounded_mip(sub, time.perf_counter() + _seconds(per, stop_at), 1, seed, SUB_GAP, start)


def _rens(sub, stop_at: float | None, per: float, seed: int) -> np.ndarray | None:
    """The sub-model's LP, then its MIP with every integer column within the floor and ceiling
    of the LP's value; the MIP's best point, or None."""
    from fleetplan.solvers.reservation.bounded import solved_relaxation

    linear = solved_relaxation(sub, time.perf_counter() + _seconds(per, stop_at), 1, seed)
    if linear is None:
        return None
    point = np.asarray(linear.getSolution().col_value)
    integer = sub.integrality > 0
    lower, upper = sub.col_lower.copy(), sub.col_upper.copy()
    lower[integer] = np.maximum(np.floor(point[integer] + 1e-9), lower[integer])
    upper[integer] = np.minimum(np.ceil(point[integer] - 1e-9), upper[integer])
    return bounded_mip(dataclasses.replace(sub, col_lower=lower, col_upper=upper),
                       time.perf_counter() + _seconds(per, stop_at), 1, seed, SUB_GAP).values


def _seconds(per: float, stop_at: float | None) -> float:
    """A sub-MIP's seconds: ``per``, or what is left before ``stop_at`` if less (at least 0.01)."""
    return per if stop_at is None else min(per, max(stop_at - time.perf_counter(), 0.01))
