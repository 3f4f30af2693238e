"""The storage cost and the hard rows of the neighbourhood model
(:mod:`fleetplan.models.placement.neighbourhood`): Expression 9 (storage balance) by tangents at
the subset sums of the free tables' sizes, and the rows the hill climb keeps: CPU per
application and region, home training (Expression 6) and the daily move quota, each at most what
it allows or no worse than today. Split from that module, whose docstring describes the whole
formulation.
"""

from __future__ import annotations

import numpy as np

from fleetplan.instances.placement import PlacementArrays
from fleetplan.models.placement import ROW_SAFETY, subset_sums
from fleetplan.models.placement.neighbourhood_base import Background, _Builder

# Coefficients below this are folded into the row's constant at their worst (HiGHS drops
# |a| < 1e-9 by itself, which would make a tangent over-estimate).
SMALL = 1e-9


def _storage(a: PlacementArrays, b: _Builder, free: np.ndarray, allowed: dict, x_col: dict, base: np.ndarray,
             home_now: np.ndarray, touched: list[int], total_bytes: float, max_exact: int, tangents: int) -> bool:
    """Expression 9 of the touched regions by tangents (exact at the subset sums of the free
    sizes when they are few); the other regions' bytes do not change."""
    size = a.table_size
    capacity_share = a.storage_capacity / max(a.storage_capacity.sum(), 1e-300)
    w = a.w_storage
    exact = True
    for r in touched:
        movers = [t for t in free.tolist() if r in allowed[t]]
        values = size[movers] if movers else np.zeros(0)
        sums = subset_sums(values, float(base[r]), max(max_exact, 4 * tangents))
        if sums is None:
            exact = False
            sums = np.linspace(base[r], base[r] + values.sum(), tangents)
        now = base[r] + home_now[r]
        gap_now = now / total_bytes - capacity_share[r]
        e = b.col(1.0, 0.0, np.inf, False, w * gap_now * gap_now)
        for p in sums.tolist():
            gap = p / total_bytes - capacity_share[r]
            value, slope = w * gap * gap, 2 * w * gap / total_bytes
            terms = {e: 1.0}
            folded = 0.0
            for t in movers:
                coefficient = slope * float(size[t])
                if abs(coefficient) > SMALL:
                    terms[x_col[t, r]] = -coefficient
                else:
                    folded += min(coefficient, 0.0)
            b.row(terms, value + slope * (base[r] - p) + folded, np.inf)
    return exact


def _cpu_rows(a: PlacementArrays, b: _Builder, bg: Background, jobs: np.ndarray, ind: dict[int, dict[int, int]]) -> None:
    """Each application's CPU-hours per region within its capacity, or no more than today."""
    movers = [j for j in jobs.tolist() if a.job_cpu_hours[j] > 0 and ind[j]]
    if not movers:
        return
    fixed = bg.cpu.copy()
    for j in movers:
        r = int(bg.region[j])
        if r >= 0:
            fixed[a.job_app[j], r] -= a.job_cpu_hours[j]
    apps = sorted(set(int(a.job_app[j]) for j in movers))
    for app in apps:
        members = [j for j in movers if a.job_app[j] == app]
        scale = float(a.job_cpu_hours[members].sum())
        for r in range(a.num_regions):
            terms = {ind[j][r]: float(a.job_cpu_hours[j]) / scale for j in members if r in ind[j]}
            if not terms:
                continue
            cap = float(a.cpu_capacity[app, r])
            limit = max(cap - ROW_SAFETY * max(cap, 1.0), float(bg.cpu[app, r])) - fixed[app, r]
            if sum(terms.values()) > limit / scale:
                b.row(terms, -np.inf, limit / scale)


def _home_training_row(a: PlacementArrays, b: _Builder, bg: Background, jobs: np.ndarray,
                       ind: dict[int, dict[int, int]]) -> None:
    """Expression 6: high-priority GPU-hours trained where their type is, at least the
    threshold's share, or no less than today."""
    hp = [j for j in jobs.tolist() if a.high_priority_ml[j]]
    if not hp or a.home_training_threshold <= 0:
        return
    total = float(a.job_gpu_hours[a.high_priority_ml].sum())
    if total <= 0:
        return
    fixed = bg.hp_at_home
    for j in hp:
        r = int(bg.region[j])
        if r >= 0 and a.gpu_supply[r, a.job_gpu_type[j]] > 0:
            fixed -= float(a.job_gpu_hours[j])
    floor = (a.home_training_threshold + ROW_SAFETY) * total
    need = min(floor, bg.hp_at_home) - fixed
    terms = {}
    for j in hp:
        for r, c in ind[j].items():
            if a.gpu_supply[r, a.job_gpu_type[j]] > 0:
                terms[c] = float(a.job_gpu_hours[j]) / total
    if need > 0:
        b.row(terms, need / total, np.inf)


def _quota_row(a: PlacementArrays, b: _Builder, bg: Background, free: np.ndarray, x_col: dict,
               allowed: dict) -> None:
    """The daily byte quota: bytes the free tables move away from today's homes, within what
    the fixed tables leave of it."""
    if not np.isfinite(a.move_quota_bytes):
        return
    size = a.table_size
    original = a.table_home
    moved_fixed = float(size[bg.home != original].sum()) - float(size[free][bg.home[free] != original[free]].sum())
    room = max(a.move_quota_bytes * (1 - ROW_SAFETY) - moved_fixed,
               float(size[free][bg.home[free] != original[free]].sum()))
    unit = max(float(size[free].sum()), 1e-300)
    terms, constant = {}, 0.0
    for t in free.tolist():
        o = int(original[t])
        if o in allowed[t]:
            constant += float(size[t])
            terms[x_col[t, o]] = -float(size[t]) / unit
        else:
            constant += float(size[t])
    if constant > room:
        b.row(terms, -np.inf, (room - constant) / unit)
