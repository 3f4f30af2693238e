"""The exact evaluation of one table's moves (``TetrisState._evaluate``, MAST §3.4) with its
per-job loops compiled (10^6 tables x 20 regions in under 60 s).

The climb evaluates exactly every move it applies (about 11,000 at 10^6 tables), each a few
hundred numpy calls on a table's few readers. Here one kernel does what is per job and per
candidate, elementwise: the jobs' regions for every candidate (``_new_regions``, with their
other tables' bytes summed in the same order), the traffic change of each (job, candidate),
the storage term, and the demand matrices the GPU terms are computed from (``_gpu_delta_of``'s
``np.add.at`` in the same order). Every reduction over jobs, regions or slices, and the sigmoid,
stays numpy's, on the same arrays: the gains and terms are the same bits as
``TetrisState._evaluate_numpy`` (the reference; ``tests/test_placement_gain_kernels.py``
checks it on random states). Conventions: :mod:`fleetplan.solvers.kernels`.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

from fleetplan.instances.placement import ML
from fleetplan.instances.placement.evaluate import TOLERANCE

TetrisState = Any  # fleetplan.solvers.placement.climb.state.TetrisState (imports point one way)

_jit = numba.njit(cache=True)


def evaluate(state: TetrisState, table: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """``TetrisState._evaluate``: the gain of moving ``table`` to every region (-inf:
    infeasible or its home), each term's change (4, R), and for ``apply`` the readers
    (``jobs``), their regions (``new_region``, and ``new_demand`` under split ML demand) and
    their other tables' bytes by region (``bytes``)."""
    a = state.arrays
    split = state.split_counted
    jobs = state.readers[state.reader_ptr[table]:state.reader_ptr[table + 1]]
    delta = np.zeros((4, a.num_regions))
    feasible, new_region, new_demand, size_in, change, rows, cpu_fits = _parts(
        table, jobs, delta, state.home, state.region, state.dregion, split, a.job_ptr, a.job_tables,
        state.pair_size, a.table_size, a.job_kind, a.job_weight, state.job_bytes, state.home_bytes,
        state.total_bytes, state.capacity_share, a.storage_capacity, a.w_storage, 1 + TOLERANCE, a.job_cpu_hours,
        a.job_app, state.cpu_room())
    info: dict = {"jobs": jobs}
    if jobs.size:
        info["bytes"], info["new_region"] = size_in, new_region
        if split:
            info["new_demand"] = new_demand
        delta[0] = a.w_traffic * change.sum(axis=0)
        ml_rows, gpu_rows = rows[0], rows[1]
        if gpu_rows.size:
            delta[1], delta[2] = _gpu_delta(state, jobs[gpu_rows], rows[2], new_demand[gpu_rows])
        if ml_rows.size:
            hp_rows = ml_rows[state.hp[jobs[ml_rows]]]
            if hp_rows.size:  # Expression 6, as TetrisState._evaluate_numpy checks it
                old_region = state.region[jobs]
                hp_jobs = jobs[hp_rows]
                hours = a.job_gpu_hours[hp_jobs]
                was = state._at_home(hp_jobs, old_region[hp_rows])
                gpu = a.job_gpu_type[hp_jobs]
                new = new_region[hp_rows]
                now = (new >= 0) & (a.gpu_supply[np.maximum(new, 0), gpu[:, None]] > 0)
                at_home = state.hp_at_home + (hours[:, None] * (now.astype(float) - was[:, None])).sum(axis=0)
                feasible &= (at_home >= state.hp_floor) | (at_home >= state.hp_at_home)
        if not cpu_fits:  # TetrisState._cpu_ok's shortcut (taken in _parts) does not apply
            old_region = state.region[jobs]
            feasible &= state._cpu_ok(jobs, old_region, new_region, new_region != old_region[:, None])
    gains = np.where(feasible, -delta.sum(axis=0), -np.inf)
    return gains, delta, info


def _gpu_delta(state: TetrisState, jobs: np.ndarray, old: np.ndarray, new: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """``TetrisState._gpu_delta``: Expressions 7 and 8's change per candidate when ``jobs``'
    demand moves from ``old`` to ``new`` (k, R)."""
    balance, overload = _gpu_delta_of(state, jobs, old, new, state.cell, state.demand, state.demand_count, None)
    if state.combined:
        _, overload = _gpu_delta_of(state, jobs, old, new, state.ocell, state.odemand, state.odemand_count,
                                    state.overload_weight)
    return balance, overload


def _gpu_delta_of(state: TetrisState, jobs: np.ndarray, old: np.ndarray, new: np.ndarray, cells: np.ndarray,
                  state_demand: np.ndarray, state_count: np.ndarray, weight: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``TetrisState._gpu_delta_of``: the demand matrices (candidate, region, slice) built by
    :func:`_demand_after` (its ``np.add.at`` steps in their order), then the slices' costs."""
    a = state.arrays
    slices = np.unique(cells[jobs])
    demand = _demand_after(jobs, old, new, cells, slices, state_demand, state_count, a.job_gpu_hours,
                           state.counted)
    balance, overload = state._slice_costs(demand, slices, weight)
    w = a.w_gpu
    return (w * (balance - state.slice_balance[slices]).sum(axis=1),
            w * (overload - state.slice_overload[slices]).sum(axis=1))


@_jit
def _demand_after(jobs, old, new, cells, slices, state_demand, state_count, gpu_hours, counted):
    """For each candidate c, the demand (R, slices) once ``jobs`` left their ``old`` regions and
    entered ``new[:, c]``: the leaving hours summed per cell in job order, added to today's
    demand, then the entering hours added in job order; a cell left with no counted job is 0."""
    R = state_demand.shape[0]
    S = slices.size
    k = jobs.size
    column = np.empty(k, dtype=np.int64)
    for i in range(k):
        column[i] = np.searchsorted(slices, cells[jobs[i]])
    shift = np.zeros((R, S))
    count_shift = np.zeros((R, S), dtype=np.int64)
    for i in range(k):
        if old[i] >= 0:
            shift[old[i], column[i]] += -gpu_hours[jobs[i]]
            count_shift[old[i], column[i]] += -(1 if counted[jobs[i]] else 0)
    demand = np.empty((R, R, S))
    count = np.empty((R, R, S), dtype=np.int64)
    for c in range(R):
        for r in range(R):
            for s in range(S):
                demand[c, r, s] = state_demand[r, slices[s]] + shift[r, s]
                count[c, r, s] = state_count[r, slices[s]] + count_shift[r, s]
    for i in range(k):
        for c in range(R):
            r = new[i, c]
            if r >= 0:
                demand[c, r, column[i]] += gpu_hours[jobs[i]]
                count[c, r, column[i]] += 1 if counted[jobs[i]] else 0
    for c in range(R):
        for r in range(R):
            for s in range(S):
                if count[c, r, s] == 0:
                    demand[c, r, s] = 0.0
    return demand


@_jit
def _parts(table, jobs, delta, home, region, dregion, split, job_ptr, job_tables, pair_size, table_size, job_kind,
           job_weight, job_bytes, hb, total_bytes, capacity_share, storage_capacity, w_storage, tol1, cpu_hours,
           job_app, room):
    """The elementwise parts of ``_evaluate_numpy``: the storage term into ``delta[3]`` and the
    storage capacity (``feasible``), each reader's region for every candidate (``new``, and
    ``dnew`` its demand region), its other tables' bytes by region, its traffic change (k, R),
    and the rows of ML readers that change region and of those whose demand region changes
    (with their demand regions now); whether the CPU-hours of the readers that change region
    fit every application's room (``TetrisState._cpu_ok``'s shortcut: then every candidate
    passes its check)."""
    R = hb.size
    k = jobs.size
    old = home[table]
    size = table_size[table]
    feasible = np.empty(R, dtype=np.bool_)
    x = hb[old] / total_bytes - capacity_share[old]
    before_old = x * x
    x = (hb[old] - size) / total_bytes - capacity_share[old]
    after_old = x * x
    for c in range(R):
        x = hb[c] / total_bytes - capacity_share[c]
        before = x * x
        x = (hb[c] + size) / total_bytes - capacity_share[c]
        after_new = x * x
        delta[3, c] = w_storage * (0.0 if c == old else after_new - before + after_old - before_old)
        feasible[c] = c != old and hb[c] + size <= storage_capacity[c] * tol1 + 1e-6
    new = np.empty((k, R), dtype=np.int64)
    dnew = np.empty((k, R), dtype=np.int64) if split else new
    size_in = np.zeros((k, R))
    change = np.empty((k, R))
    count = np.zeros(R, dtype=np.int64)
    ml_rows = np.empty(k, dtype=np.int64)
    gpu_rows = np.empty(k, dtype=np.int64)
    gpu_old = np.empty(k, dtype=np.int64)
    n_ml = n_gpu = 0
    added = np.zeros(room.size)
    for i in range(k):
        j = jobs[i]
        count[:] = 0
        for at in range(job_ptr[j], job_ptr[j + 1]):
            if job_tables[at] != table:
                r = home[job_tables[at]]
                count[r] += 1
                size_in[i, r] += pair_size[at]
        others = 0
        top = count[0]
        first_top = 0
        for r in range(R):
            others += count[r]
            if count[r] > top:
                top, first_top = count[r], r
        is_ml = job_kind[j] == ML
        if is_ml:
            common = first_top if top == others else -1
            for c in range(R):
                new[i, c] = c if others == 0 or common == c else -1
        else:
            best = -np.inf
            for r in range(R):
                if count[r] == top and size_in[i, r] > best:
                    best = size_in[i, r]
            leader = 0
            for r in range(R):
                if count[r] == top and size_in[i, r] == best:
                    leader = r
                    break
            lead_count, lead_bytes = count[leader], size_in[i, leader]
            for c in range(R):
                mine_count, mine_bytes = count[c] + 1, size_in[i, c] + size
                wins = mine_count > lead_count or (mine_count == lead_count and (
                    mine_bytes > lead_bytes or (mine_bytes == lead_bytes and c <= leader)))
                new[i, c] = c if wins or others == 0 else leader
        # Expression 1's change of this job for every candidate.
        o = region[j]
        weight, jb = job_weight[j], job_bytes[j]
        old_in = size_in[i, o] + (size if o == old else 0.0) if o >= 0 else 0.0
        traffic_old = weight * (jb - old_in)
        moves = False
        for c in range(R):
            nr = new[i, c]
            in_region = size_in[i, nr] + (size if nr == c else 0.0) if nr >= 0 else 0.0
            change[i, c] = weight * (jb - in_region) - traffic_old
            moves = moves or nr != o
        if is_ml and moves:
            ml_rows[n_ml] = i
            n_ml += 1
        if moves and cpu_hours[j] > 0:
            added[job_app[j]] += cpu_hours[j]
        # Demand regions (TetrisState._new_demand_regions) and whether they change.
        d_old = o
        if split:
            d_old = dregion[j]
            most = 0
            for r in range(1, R):
                if size_in[i, r] > size_in[i, most]:
                    most = r
            for c in range(R):
                nr = new[i, c]
                if nr < 0 and is_ml:
                    mine = size_in[i, c] + size
                    wins = c == most or mine > size_in[i, most] or (mine == size_in[i, most] and c < most)
                    nr = c if wins else most
                dnew[i, c] = nr
            gmoves = False
            for c in range(R):
                gmoves = gmoves or dnew[i, c] != d_old
        else:
            gmoves = moves
        if is_ml and gmoves:
            gpu_rows[n_gpu] = i
            gpu_old[n_gpu] = d_old
            n_gpu += 1
    cpu_fits = True
    for q in range(room.size):
        cpu_fits = cpu_fits and added[q] <= room[q]
    return feasible, new, dnew, size_in, change, (ml_rows[:n_ml], gpu_rows[:n_gpu], gpu_old[:n_gpu]), cpu_fits
