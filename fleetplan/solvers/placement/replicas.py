"""Extra table replicas after the home placement (MAST §3.5).

Three passes, each within the storage left in a region (capacity minus home tables minus the
replicas already placed):

1. **DR**: each table gets one replica outside its home region, where the DR policy says —
   the home region's ``dr_partner``, or the other region with the most GPU supply.
2. **Collocation**: every ML job with no region holding all its tables and its GPU type gets
   one: the regions with its GPU type are tried from the highest supply down ("If multiple
   regions have GPU2, Tetris selects the region with the highest supply"), and the first where
   the missing tables fit receives them. High-priority recurring jobs go first ("Tetris
   prioritizes first replicating data needed by high-priority jobs").
3. **Hot tables per GPU type**: for each region and GPU type, a storage quota proportional to
   that type's share of the region's GPU supply (``hot_replica_share`` of the region's
   capacity in total); tables read by jobs of that type, hottest (most readers) first, are
   replicated until the quota is used.

With ``partitions_only`` a collocation replica holds only the partitions its jobs read (the
largest ``read_fraction`` among them times the table size) instead of the whole table.
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.placement import ML, PlacementInstance, ReplicaColumns
from fleetplan.instances.placement.evaluate import hosting_regions

MIN_HOT_READERS = 2


def dr_regions(instance: PlacementInstance, home: np.ndarray) -> np.ndarray:
    """The DR region of every table under the instance's DR policy (-1: none)."""
    a = instance.arrays()
    if a.dr_policy == "none" or a.num_regions < 2:
        return np.full(len(home), -1, dtype=np.int64)
    if a.dr_policy == "partner":
        return a.dr_partner[home]
    by_supply = np.argsort(-a.gpu_supply.sum(axis=1), kind="stable")
    return np.where(home == by_supply[0], by_supply[1], by_supply[0])


class _Replicas:
    def __init__(self, instance: PlacementInstance, home: np.ndarray):
        a = self.arrays = instance.arrays()
        self.home = home
        self.free = a.storage_capacity - np.bincount(home, weights=a.table_size, minlength=a.num_regions)
        self.placed: dict[tuple[int, int], int] = {}  # (table, region) -> row in the columns
        self.table: list[int] = []
        self.region: list[int] = []
        self.bytes: list[float] = []
        self.reason: list[str] = []

    def has(self, table: int, region: int) -> bool:
        return region == self.home[table] or (table, region) in self.placed

    def add(self, table: int, region: int, size: float, reason: str) -> bool:
        """Place (or grow) a replica if it fits; True if the region then holds what is needed."""
        if region == self.home[table]:
            return True
        row = self.placed.get((table, region))
        extra = size - (self.bytes[row] if row is not None else 0.0)
        if extra <= 0:
            return True
        if extra > self.free[region]:
            return False
        self.free[region] -= extra
        if row is None:
            self.placed[(table, region)] = len(self.table)
            self.table.append(table)
            self.region.append(region)
            self.bytes.append(size)
            self.reason.append(reason)
        else:
            self.bytes[row] = size
        return True

    def add_many(self, tables: np.ndarray, region: int, sizes: np.ndarray, reason: str) -> None:
        """Place new replicas known to fit (none of them already in ``region``)."""
        start = len(self.table)
        self.table.extend(tables.tolist())
        self.region.extend([region] * len(tables))
        self.bytes.extend(sizes.tolist())
        self.reason.extend([reason] * len(tables))
        self.placed.update({(t, region): start + k for k, t in enumerate(tables.tolist())})
        self.free[region] -= float(sizes.sum())

    def columns(self) -> ReplicaColumns:
        ids, tables = self.arrays.region_ids, self.arrays.table_ids
        return ReplicaColumns.model_construct(table=[tables[t] for t in self.table],
                                              region=[ids[r] for r in self.region],
                                              bytes=[float(b) for b in self.bytes], reason=self.reason)


def add_replicas(instance: PlacementInstance, home: np.ndarray, *, partitions_only: bool = False,
                 hot_replica_share: float = 0.1) -> tuple[ReplicaColumns, str]:
    """The §3.5 replicas for a home placement, and a one-line summary.

    >>> import fleetplan
    >>> instance = fleetplan.generate("placement", {"regions": 4, "tables": 60, "jobs": 60}, seed=0)
    >>> columns, note = add_replicas(instance, instance.arrays().table_home)
    >>> set(columns.reason) <= {"dr", "collocation", "hot"}
    True
    """
    a = instance.arrays()
    home = np.asarray(home, dtype=np.int64)
    state = _Replicas(instance, home)
    readers = np.diff(a.table_ptr)

    # 1. DR: hottest tables first, so that a full region keeps the copies that matter most.
    dr = dr_regions(instance, home)
    order = np.lexsort((np.arange(a.num_tables), -readers))
    order = order[dr[order] >= 0]
    no_dr = 0
    for region in range(a.num_regions):
        tables = order[dr[order] == region]
        fits = np.cumsum(a.table_size[tables]) <= state.free[region]
        no_dr += int((~fits).sum())
        state.add_many(tables[fits], region, a.table_size[tables[fits]], "dr")

    # 2. Collocation for every ML job no region can host.
    ml = np.flatnonzero(a.job_kind == ML)
    hosts = hosting_regions(a, home, np.asarray(state.table, dtype=np.int64),
                            np.asarray(state.region, dtype=np.int64), ml)
    homeless = ml[np.diff(hosts.indptr) == 0]
    high = a.high_priority[a.job_priority[homeless]] & a.job_recurring[homeless]
    order = np.lexsort((homeless, -a.job_gpu_hours[homeless], a.job_priority[homeless], ~high))
    unplaced = 0
    # The regions by supply of each GPU type, highest first (once per type, not per job: 4 x
    # 10^4 jobs without a region at 10^6 tables).
    by_supply = [np.argsort(-a.gpu_supply[:, g], kind="stable").tolist() for g in range(a.gpu_supply.shape[1])]
    for job in homeless[order].tolist():
        tables = a.job_tables[a.job_ptr[job]:a.job_ptr[job + 1]]
        fraction = a.job_read_fraction[job] if partitions_only else 1.0
        supply = a.gpu_supply[:, a.job_gpu_type[job]]
        done = False
        for region in by_supply[a.job_gpu_type[job]]:
            if supply[region] <= 0:
                break
            missing = [t for t in tables.tolist() if not state.has(t, region)]
            need = float(a.table_size[missing].sum() * fraction) if missing else 0.0
            if need <= state.free[region]:
                for t in missing:
                    state.add(t, region, float(a.table_size[t] * fraction), "collocation")
                done = True
                break
        unplaced += not done

    # 3. Hot tables per GPU type, within a quota proportional to the type's supply.
    present = np.zeros((a.num_tables, a.num_regions), dtype=bool)
    present[np.arange(a.num_tables), home] = True
    present[np.asarray(state.table, dtype=np.int64), np.asarray(state.region, dtype=np.int64)] = True
    region_supply = a.gpu_supply.sum(axis=1)
    type_of_pair = a.job_gpu_type[a.pair_job]
    is_ml_pair = a.job_kind[a.pair_job] == ML

    for g in range(len(a.gpu_types)):
        counts = np.bincount(a.job_tables[is_ml_pair & (type_of_pair == g)], minlength=a.num_tables)
        candidates = np.flatnonzero(counts >= MIN_HOT_READERS)
        candidates = candidates[np.lexsort((candidates, -counts[candidates]))]
        for region in np.flatnonzero(a.gpu_supply[:, g] > 0).tolist():
            quota = hot_replica_share * a.storage_capacity[region] * a.gpu_supply[region, g] / region_supply[region]
            tables = candidates[~present[candidates, region]]
            fits = np.cumsum(a.table_size[tables]) <= min(quota, state.free[region])
            state.add_many(tables[fits], region, a.table_size[tables[fits]], "hot")
            present[tables[fits], region] = True

    columns = state.columns()
    counts = {reason: columns.reason.count(reason) for reason in ("dr", "collocation", "hot")}
    note = (f"replicas: {counts['dr']} DR, {counts['collocation']} for collocation, {counts['hot']} hot; "
            f"{no_dr} tables without room for a DR replica, {unplaced} ML jobs still without a region")
    return columns, note
