"""The aggregated state both RAS heuristics and the repair work on (MAST §2): counts ``x[r, g]``
of servers of group g = (type, fault domain) held by reservation r, plus the free pool, with
per-reservation totals kept incrementally (see :mod:`.heuristics` for the moves over it).

Its own module because :mod:`.heuristics` (the climb, the greedy) and :mod:`.repair` (the
feasibility-first MIPs) both read it, and the climb calls the repair: neither imports the other
for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleetplan.instances.reservation import DC_LEVEL, FD_LEVEL, STORAGE, ReservationArrays
from fleetplan.models.reservation import Groups, disaggregate, type_fd_groups

SHORTFALL_PENALTY = 1e4
BLOCK = 1 << 24  # block sizes are below this (a group never holds 16 million servers)
FREE_SIDE = -1


@dataclass
class KeyView:
    """What :func:`fleetplan.models.reservation.disaggregate` reads from a model."""

    groups: Groups
    key_res: np.ndarray
    key_group: np.ndarray

    @property
    def num_keys(self) -> int:
        return int(self.key_res.size)


def _top2(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: largest value, its column, second largest."""
    if values.shape[1] == 1:
        return values[:, 0].copy(), np.zeros(len(values), dtype=np.int64), np.zeros(len(values))
    part = np.argpartition(-values, 1, axis=1)[:, :2]
    rows = np.arange(len(values))
    a, b = values[rows, part[:, 0]], values[rows, part[:, 1]]
    swap = b > a
    first = np.where(swap, part[:, 1], part[:, 0])
    return np.maximum(a, b), first, np.minimum(a, b)


class RasState:
    """Aggregated assignment with incremental costs (see the module docstring)."""

    def __init__(self, arrays: ReservationArrays) -> None:
        self.arrays = arrays
        groups = self.groups = type_fd_groups(arrays)
        num_res, num_groups = arrays.num_reservations, groups.type.size
        self.accept = arrays.accepts[:, groups.type]  # (R, G)
        self.cap = arrays.res_cap[:, groups.type]
        self.rank = np.maximum(arrays.res_rank[:, groups.type], 0).astype(float)
        self.storage = arrays.type_category[groups.type] == STORAGE
        held = (arrays.server_current >= 0) & (groups.of_server >= 0)
        counts = np.zeros((num_res, max(num_groups, 1)), dtype=np.int64)
        np.add.at(counts, (arrays.server_current[held], groups.of_server[held]), 1)
        counts = counts[:, :num_groups]
        # Servers in a reservation that no longer accepts their type must go: forced moves.
        self.forced = int((counts * ~self.accept).sum())
        self.c0 = counts * self.accept
        self.x = self.c0.copy()
        self.free = groups.available - self.x.sum(axis=0)
        self.ratio = np.nan_to_num(arrays.res_ratio, nan=0.0)
        self.has_ratio = ~np.isnan(arrays.res_ratio)
        self.general = ~arrays.res_ml
        self.level = arrays.res_level
        self.request = arrays.res_request
        self.group_items = np.arange(num_groups)
        self.candidates = [np.flatnonzero(self.accept[:, g]) for g in range(num_groups)]
        self.candidates_of = [np.flatnonzero(self.accept[r] & (groups.available > 0)) for r in range(num_res)]
        self.sizes = [1 << np.arange(int(np.log2(max(a, 1))) + 1) for a in groups.available.tolist()]
        self.moved = self.forced
        self.repair = False  # True: the cost is the guarantee shortfall alone (repair phase)
        self._totals()

    # --- bookkeeping --------------------------------------------------------------------------
    def _totals(self) -> None:
        a, g = self.arrays, self.groups
        rru = self.x * self.cap
        self.fd = np.zeros((a.num_reservations, a.num_fds))
        self.dc = np.zeros((a.num_reservations, a.num_dcs))
        self.ndc = np.zeros((a.num_reservations, a.num_dcs))
        self.sdc = np.zeros((a.num_reservations, a.num_dcs))
        np.add.at(self.fd.T, g.fd, rru.T)
        np.add.at(self.dc.T, g.dc, rru.T)
        np.add.at(self.ndc.T, g.dc, self.x.T.astype(float))
        np.add.at(self.sdc.T, g.dc[self.storage], rru.T[self.storage])
        self.total = self.fd.sum(axis=1)
        self.fd_top = _top2(self.fd)
        self.dc_top = _top2(self.dc)
        # Per reservation: datacenters used and ratio deviation, so a move's cost only
        # recomputes its own datacenter's share.
        self.used = (self.ndc > 0).sum(axis=1)
        self.dev = np.abs(self.sdc - self.ratio[:, None] * (self.dc - self.sdc)).sum(axis=1)
        self.cost = self._cost_all()

    def _refresh(self, r: int) -> None:
        for table, top in ((self.fd, self.fd_top), (self.dc, self.dc_top)):
            first, index, second = _top2(table[r:r + 1])
            top[0][r], top[1][r], top[2][r] = first[0], index[0], second[0]
        self.used[r] = (self.ndc[r] > 0).sum()
        self.dev[r] = np.abs(self.sdc[r] - self.ratio[r] * (self.dc[r] - self.sdc[r])).sum()
        self.cost[r] = self._cost(np.array([r]), 0.0, None, 0.0, None, 0.0, 0.0)[0]

    def _cost_all(self) -> np.ndarray:
        return self._cost(np.arange(self.arrays.num_reservations), 0.0, None, 0.0, None, 0.0, 0.0)

    def _cost(self, rs: np.ndarray, d_rru, f, d_fd, d, d_dc, d_n, d_storage=0.0) -> np.ndarray:
        """Cost (without moves and preference) of reservations ``rs`` after their RRU changes by
        ``d_rru`` in fault domain ``f`` and datacenter ``d`` (None: no change)."""
        a = self.arrays
        total = self.total[rs] + d_rru
        fd_max = self._max_with(self.fd_top, self.fd, rs, f, d_fd)
        dc_max = self._max_with(self.dc_top, self.dc, rs, d, d_dc)
        level = self.level[rs]
        loss = np.where(level == FD_LEVEL, fd_max, np.where(level == DC_LEVEL, dc_max, 0.0))
        # The second term (capacity short with nothing down) is zero once the guarantee holds;
        # it gives a reservation holding nothing a gain for its first server, which alone
        # guarantees nothing (a plateau a single-server move could not leave).
        short = np.maximum(0.0, self.request[rs] - (total - loss)) + 0.5 * np.maximum(0.0, self.request[rs] - total)
        if self.repair:
            return SHORTFALL_PENALTY * short
        cost = SHORTFALL_PENALTY * short + a.w_buffer * np.maximum(0.0, total - self.request[rs])
        cost += a.w_spread * np.where(self.general[rs], fd_max, 0.0)
        if d is None:
            used, dev = self.used[rs], self.dev[rs]
        else:
            before = self.ndc[rs, d]
            used = self.used[rs] + (before + d_n > 0) - (before > 0)
            s_old, c_old = self.sdc[rs, d], self.dc[rs, d] - self.sdc[rs, d]
            s_new, c_new = s_old + d_storage, c_old + (d_dc - d_storage)
            dev = self.dev[rs] - np.abs(s_old - self.ratio[rs] * c_old) + np.abs(s_new - self.ratio[rs] * c_new)
        cost += a.w_compactness * np.where(a.res_ml[rs], used, 0)
        cost += a.w_ratio * np.where(self.has_ratio[rs], dev, 0.0)
        return cost

    @staticmethod
    def _max_with(top, table, rs, column, delta) -> np.ndarray:
        first, index, second = top[0][rs], top[1][rs], top[2][rs]
        if column is None:
            return first
        other = np.where(index == column, second, first)
        return np.maximum(other, table[rs, column] + delta)

    # --- move evaluation ----------------------------------------------------------------------
    def side_deltas(self, g, b: int, sign: int, rs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Objective change and moves change of adding (sign +1) or removing (-1) b servers of
        group g (an index, or an array aligned with ``rs``) to/from each reservation in ``rs``."""
        a, groups = self.arrays, self.groups
        f, d = groups.fd[g], groups.dc[g]
        rru = sign * b * self.cap[rs, g]
        storage = np.where(self.storage[g], rru, 0.0)
        after = self._cost(rs, rru, f, rru, d, rru, sign * b, storage)
        gap = self.c0[rs, g] - self.x[rs, g]
        moves = np.maximum(0, gap - sign * b) - np.maximum(0, gap)
        change = after - self.cost[rs]
        if not self.repair:
            change = change + a.w_preference * sign * b * self.rank[rs, g] + a.w_moves * moves
        return change, moves

    def best_for(self, g: int) -> tuple[float, int, int, int, float] | None:
        """(objective change, source, target, block, moves change) of the best move of group g."""
        rs = self.candidates[g]
        if not rs.size:
            return None
        best = None
        for b in self.sizes[g].tolist():
            add, add_moves = self.side_deltas(g, b, +1, rs)
            holders = self.x[rs, g] >= b
            remove, remove_moves = self.side_deltas(g, b, -1, rs)
            remove = np.where(holders, remove, np.inf)
            # sources: free pool (change 0) or a holder; targets: free pool or any candidate.
            sources = [(0.0, FREE_SIDE, 0.0)] if self.free[g] >= b else []
            for i in np.argsort(remove, kind="stable")[:2].tolist():
                if np.isfinite(remove[i]):
                    sources.append((float(remove[i]), int(rs[i]), float(remove_moves[i])))
            targets = [(0.0, FREE_SIDE, 0.0)]
            for i in np.argsort(add, kind="stable")[:2].tolist():
                targets.append((float(add[i]), int(rs[i]), float(add_moves[i])))
            for s_change, source, s_moves in sources:
                for t_change, target, t_moves in targets:
                    if source == target:
                        continue
                    change = s_change + t_change
                    if best is None or self._better(change, s_moves + t_moves, best[0], best[4]):
                        best = (change, source, target, b, s_moves + t_moves)
        return best

    def best_shift(self, r: int) -> tuple[float, int, int, int, float] | None:
        """(objective change, source group, target group, block, moves change) of the best move
        of b of r's servers from one group to another (e.g. out of its largest fault domain)."""
        holding = np.flatnonzero(self.x[r] > 0)
        if not holding.size:
            return None
        accepted = self.candidates_of[r]
        best = None
        for b in self.shift_sizes(int(self.x[r, holding].max())):
            sources = holding[self.x[r, holding] >= b]
            if not sources.size:
                break
            removal, removal_moves = self.side_deltas(sources, b, -1, np.full(sources.size, r))
            for i in np.argsort(removal, kind="stable")[:2].tolist():
                g = int(sources[i])
                self.apply_block(g, r, FREE_SIDE, b)
                targets = accepted[(self.free[accepted] >= b) & (accepted != g)]
                # Add b2 elsewhere: b2 < b spreads and shrinks the buffer in one move; b2 > b
                # spreads over free servers (no move) so that fewer stay in the largest domain.
                for b2 in self.shift_sizes(4 * b):
                    targets = accepted[(self.free[accepted] >= b2) & (accepted != g)]
                    if not targets.size:
                        continue
                    add, add_moves = self.side_deltas(targets, b2, +1, np.full(targets.size, r))
                    j = int(np.argmin(add))
                    change = float(removal[i] + add[j])
                    moves = float(removal_moves[i] + add_moves[j])
                    if best is None or self._better(change, moves, best[0], best[4]):
                        best = (change, g, int(targets[j]), b * BLOCK + b2, moves)
                self.apply_block(g, FREE_SIDE, r, b)
        return best

    def shift_sizes(self, most: int) -> list[int]:
        return [1 << k for k in range(int(np.log2(max(most, 1))) + 1)]

    def _better(self, change: float, moves: float, best_change: float, best_moves: float) -> bool:
        """Under a finite budget, improving moves compete on gain per server moved."""
        if np.isfinite(self.arrays.budget) and change < 0 and best_change < 0:
            return change / max(moves, 1.0) < best_change / max(best_moves, 1.0) - 1e-12
        return change < best_change - 1e-12

    def exact_change(self, g: int, source: int, target: int, b: int) -> tuple[float, float] | None:
        """Objective and moves change of one specific move, or None if it is not possible."""
        change = moves = 0.0
        if source == FREE_SIDE:
            if self.free[g] < b:
                return None
        else:
            if self.x[source, g] < b:
                return None
            c, m = self.side_deltas(g, b, -1, np.array([source]))
            change, moves = change + float(c[0]), moves + float(m[0])
        if target != FREE_SIDE:
            if not self.accept[target, g]:
                return None
            c, m = self.side_deltas(g, b, +1, np.array([target]))
            change, moves = change + float(c[0]), moves + float(m[0])
        return change, moves

    def exact_shift(self, r: int, source: int, target: int, code: int) -> tuple[float, float] | None:
        """Objective and moves change of taking b of r's servers out of group source and b2 of
        group target in (``code`` = b * BLOCK + b2)."""
        b, b2 = divmod(code, BLOCK)
        if self.x[r, source] < b or not self.accept[r, target] or source == target:
            return None
        first = self.exact_change(source, r, FREE_SIDE, b)
        self.apply_block(source, r, FREE_SIDE, b)
        second = self.exact_change(target, FREE_SIDE, r, b2)
        self.apply_block(source, FREE_SIDE, r, b)
        if first is None or second is None:
            return None
        return first[0] + second[0], first[1] + second[1]

    def apply_block(self, g: int, source: int, target: int, b: int) -> None:
        groups = self.groups
        f, d = groups.fd[g], groups.dc[g]
        for r, sign in ((source, -1), (target, +1)):
            if r == FREE_SIDE:
                self.free[g] += sign * b  # the pool gives as a source, takes as a target
                continue
            before = max(0, self.c0[r, g] - self.x[r, g])
            self.x[r, g] += sign * b
            self.moved += max(0, self.c0[r, g] - self.x[r, g]) - before
            rru = sign * b * self.cap[r, g]
            self.fd[r, f] += rru
            self.dc[r, d] += rru
            self.ndc[r, d] += sign * b
            if self.storage[g]:
                self.sdc[r, d] += rru
            self.total[r] += rru
            self._refresh(r)

    def set_repair(self, repair: bool) -> None:
        self.repair = repair
        self.cost = self._cost_all()

    def objective(self) -> float:
        a = self.arrays
        return float(self.cost.sum() + a.w_preference * (self.x * self.rank).sum() + a.w_moves * self.moved)

    def assignment(self) -> np.ndarray:
        keys_r, keys_g = np.nonzero(self.accept & (self.groups.available > 0)[None, :])
        view = KeyView(self.groups, keys_r, keys_g)
        return disaggregate(view, self.arrays, self.x[keys_r, keys_g])



def penalty(state: RasState) -> float:
    """What the climb's cost adds to the judge's objective: the shortfall penalties."""
    short = shortfalls(state)
    return float(SHORTFALL_PENALTY * (short.sum() + 0.5 * np.maximum(0.0, state.request - state.total).sum()))


def shortfalls(state: RasState) -> np.ndarray:
    """RRU each reservation is short of its guarantee (its request after losing its worst fault
    domain or datacenter, as its level asks)."""
    rs = np.arange(state.arrays.num_reservations)
    fd_max, dc_max = state.fd_top[0], state.dc_top[0]
    loss = np.where(state.level == FD_LEVEL, fd_max, np.where(state.level == DC_LEVEL, dc_max, 0.0))
    return np.maximum(0.0, state.request[rs] - (state.total - loss))
