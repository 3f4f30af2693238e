"""MAST's Global ML Scheduler (GMS) scan: the <priority, credit> order of the global queue.

MAST, OSDI 2024, §4.2 (and §5.4 for the scan's cost). For every pending workload GMS computes a
*credit* (eqs. 10-11)::

    credit(W) = W_workload_age * min(W.age, C_age_cap)
              + W_fair_share * (1 - window_avg(W.tenant.resources_used)
                                    / window_avg(all_tenants.resources_used))

sorts the workloads by credit and scans them, keeping a ``resources_used`` per tenant that
starts at what the tenant's running workloads hold: a workload whose GPUs and CPUs still fit in
its tenant's quota is *within quota*, inherits its tenant's priority and is added to
``resources_used``; otherwise it is *over quota* and gets the lowest priority
(:data:`OVER_QUOTA_PRIORITY`), and ``resources_used`` is left as it was — so a later, smaller
workload of the same tenant may still fit. The queue is then ordered by (priority ascending,
credit descending, index ascending), 0 being the highest of MAST's seven levels.

Why this lives with the MAST simulator: GMS orders a scheduler's queue — it decides which
workload is offered to the regions first — and answers no problem kind of its own; it is part
of the scheduler the simulator runs (:mod:`fleetplan.sim.mast.schedulers`), beside the RMS
that places each offered workload (the ``binpack`` kind's greedy, a solver). It keeps an exact
reference (:func:`sequential_quota_scan`) and a benchmark of its own
(``benchmarks/scripts/gms_scan.py``), and a scheduler that embeds fleetplan may call it.

The paper's Python scan takes about 34 s for 6,000-10,000 workloads (§5.4). Here the credits and
the sort are numpy operations, and the sequential quota scan is done with per-tenant cumulative
sums in *rounds*: in one round every tenant admits the longest prefix of its undecided workloads
(credit order) that fits its remaining quota and refuses the workload just after it; workloads
too large for what is left are refused at once (what is left only shrinks). A round is a few
numpy calls over all tenants together, and a tenant needs one round per refusal that is not
settled by size alone (usually one or two). The result equals the plain sequential scan
(:func:`sequential_quota_scan`, the reference the tests compare with).

Modelling choices the paper leaves open:

* Both GPUs and CPUs must fit ("the quota specifies the maximum number of GPUs and CPUs").
* "Fits" is ``used + demand <= quota``, counted exactly in thousandths of a GPU or CPU (amounts
  are rounded to 0.001; 0.1 + 0.2 CPUs fit a quota of 0.3). A quota may be ``inf`` (no quota);
  finite amounts are at most :data:`MAX_AMOUNT`.
* A tenant already above its quota by its running workloads admits nothing, not even a
  workload asking for nothing.
* The fair-share term's denominator is the mean over all tenants; when every tenant's window
  usage is zero the ratio is taken as 0 (the term is ``W_fair_share * 1``). The term is negative
  for a tenant that used more than twice the mean, as eq. 11 says.
* §4.2's priority mix (3%, 20%, 16%, 54%, 0.2%, 0.5%, 0.02%, and 6% with no priority, treated as
  the lowest level) adds up to 99.72%; :data:`PRIORITY_MIX` scales it to sum to 1.

Example
-------
>>> import numpy as np
>>> from fleetplan.sim.mast.gms import gms_scan
>>> scan = gms_scan(
...     tenant=np.array([0, 0, 1]), age_hours=np.array([1.0, 3.0, 2.0]),
...     gpus=np.array([8, 8, 8]), cpus=np.array([1, 1, 1]),
...     tenant_priority=np.array([1, 2]), tenant_gpu_quota=np.array([8, 64]),
...     tenant_cpu_quota=np.array([100, 100]), tenant_gpus_used=np.array([0, 0]),
...     tenant_cpus_used=np.array([0, 0]), tenant_window_usage=np.array([0.0, 0.0]))
>>> scan.credit.tolist()
[2.0, 4.0, 3.0]
>>> scan.within_quota.tolist(), scan.priority.tolist()
([False, True, True], [6, 1, 2])
>>> scan.order.tolist()
[1, 2, 0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fleetplan.instances.base import InstanceError
from fleetplan.instances.binpack import PRIORITY_LEVELS

OVER_QUOTA_PRIORITY = PRIORITY_LEVELS - 1  # lowest of MAST's seven levels 0 (highest) .. 6 (lowest)

# §4.2's shares of workloads per level, highest first; the 6% "no priority" counts as the lowest.
PAPER_PRIORITY_SHARES: tuple[float, ...] = (0.03, 0.20, 0.16, 0.54, 0.002, 0.005, 0.0002 + 0.06)
PRIORITY_MIX: tuple[float, ...] = tuple(s / math.fsum(PAPER_PRIORITY_SHARES) for s in PAPER_PRIORITY_SHARES)

# The quota scan counts GPUs and CPUs in thousandths, as int64: sums are exact in any order of
# addition (0.1 + 0.2 CPUs fit a quota of 0.3), so the vectorised scan equals the sequential one.
UNITS_PER_RESOURCE = 1000
# Largest finite amount accepted (a billion GPUs or CPUs): 10^12 units per workload, so sums over
# up to 4 million workloads stay below NO_QUOTA (4.6e18) and int64's limit (9.2e18).
MAX_AMOUNT = 1e9
NO_QUOTA = np.int64(2**62)  # an infinite quota, in units

# Rounds of cumulative sums before the undecided rest is scanned one workload at a time. A round
# settles at least one refusal per tenant; adversarial demands (say, halving sizes) could need a
# round per workload, so past this many rounds the plain loop over what is left is cheaper.
MAX_ROUNDS = 8


def workload_priority_mix() -> np.ndarray:
    """§4.2's distribution of workloads over the levels 0..6, as probabilities summing to 1."""
    return np.array(PRIORITY_MIX, dtype=np.float64)


@dataclass(frozen=True)
class GmsParameters:
    """The tunable constants of eqs. 10-11 (MAST §4.2).

    Parameters
    ----------
    age_weight : float
        W_workload_age, credit per hour of (capped) waiting time.
    fair_share_weight : float
        W_fair_share, weight of the tenant's fair-share term.
    age_cap_hours : float
        C_age_cap, age beyond which waiting earns no more credit (hours, > 0).
    window_hours : float
        Length of the window of the fair-share averages (hours, > 0); the caller keeps the
        window sums and divides by it (:meth:`window_average`).
    """

    age_weight: float = 1.0
    fair_share_weight: float = 1.0
    age_cap_hours: float = 24.0
    window_hours: float = 24.0

    def __post_init__(self) -> None:
        for name in ("age_weight", "fair_share_weight", "age_cap_hours", "window_hours"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InstanceError(name, f"must be a finite number, got {value!r}")
            if value < 0 or (value == 0 and name in ("age_cap_hours", "window_hours")):
                raise InstanceError(name, f"must be {'> 0' if name in ('age_cap_hours', 'window_hours') else '>= 0'}, "
                                          f"got {value!r}")

    def window_average(self, window_sums: np.ndarray) -> np.ndarray:
        """Per-tenant window averages from resource-hours summed over the window."""
        return np.asarray(window_sums, dtype=np.float64) / self.window_hours


@dataclass
class GmsScan:
    """One GMS-scan pass. ``order`` lists workload indices, highest <priority, credit> first;
    the other arrays are per workload, in input order."""

    order: np.ndarray          # (n,) int64
    priority: np.ndarray       # (n,) int64: the tenant's level within quota, else OVER_QUOTA_PRIORITY
    credit: np.ndarray         # (n,) float64, eqs. 10-11
    within_quota: np.ndarray   # (n,) bool


def _vector(value: np.ndarray, name: str, length: int | None, *, integer: bool = False,
            allow_inf: bool = False) -> np.ndarray:
    """``value`` as a 1-D array of ``length`` non-negative numbers, else InstanceError at ``name``."""
    array = np.asarray(value)
    if array.ndim != 1:
        raise InstanceError(name, f"must be a 1-D array, got shape {array.shape}")
    if length is not None and array.shape[0] != length:
        raise InstanceError(name, f"has {array.shape[0]} entries, expected {length}")
    if array.dtype == bool or not (np.issubdtype(array.dtype, np.number)):
        if array.size:
            raise InstanceError(name, f"must be numeric, got dtype {array.dtype}")
        array = array.astype(np.float64)
    if integer:
        if not np.issubdtype(array.dtype, np.integer):
            as_float = array.astype(np.float64)
            bad = ~np.isfinite(as_float) | (as_float != np.round(as_float))
            if bad.any():
                raise InstanceError(f"{name}[{int(np.flatnonzero(bad)[0])}]", "must be an integer")
        return array.astype(np.int64)
    array = array.astype(np.float64)
    bad = np.isnan(array) | (array < 0) | (array > MAX_AMOUNT) & np.isfinite(array)
    if not allow_inf:
        bad |= ~np.isfinite(array)
    if np.any(bad):
        position = int(np.flatnonzero(bad)[0])
        must = f"a non-negative number up to {MAX_AMOUNT:g}" + (" or inf" if allow_inf else "")
        raise InstanceError(f"{name}[{position}]", f"must be {must}, got {array[position]!r}")
    return array


def to_units(amount: np.ndarray) -> np.ndarray:
    """GPUs or CPUs as exact int64 counts of thousandths (``inf``, no quota, as :data:`NO_QUOTA`)."""
    amount = np.asarray(amount, dtype=np.float64)
    units = np.rint(np.where(np.isfinite(amount), amount, 0.0) * UNITS_PER_RESOURCE).astype(np.int64)
    return np.where(np.isfinite(amount), units, NO_QUOTA)


def sequential_quota_scan(tenant: np.ndarray, gpus: np.ndarray, cpus: np.ndarray, credit_order: np.ndarray,
                          gpu_quota: np.ndarray, cpu_quota: np.ndarray, gpus_used: np.ndarray,
                          cpus_used: np.ndarray) -> np.ndarray:
    """The paper's scan, one workload at a time in ``credit_order`` (the reference; slow).

    Takes the amounts in GPUs and CPUs like :func:`gms_scan` and returns the (n,) within-quota
    mask in input order.
    """
    g, c = to_units(gpus).tolist(), to_units(cpus).tolist()
    quota_g, quota_c = to_units(gpu_quota).tolist(), to_units(cpu_quota).tolist()
    used_g, used_c = to_units(gpus_used).tolist(), to_units(cpus_used).tolist()
    within = np.zeros(len(tenant), dtype=bool)
    for w in credit_order.tolist():
        t = int(tenant[w])
        if used_g[t] + g[w] <= quota_g[t] and used_c[t] + c[w] <= quota_c[t]:
            within[w] = True
            used_g[t] += g[w]
            used_c[t] += c[w]
    return within


def _quota_scan(tenant: np.ndarray, gpus: np.ndarray, cpus: np.ndarray, credit_order: np.ndarray,
                gpu_quota: np.ndarray, cpu_quota: np.ndarray, gpus_used: np.ndarray,
                cpus_used: np.ndarray) -> np.ndarray:
    """The same result as :func:`sequential_quota_scan`, in rounds of segmented cumulative sums.

    All amounts are int64 thousandths (:func:`to_units`): the sums are exact whatever their
    order of addition, which is what makes the rounds equal to the one-at-a-time scan.
    """
    n = len(tenant)
    within = np.zeros(n, dtype=bool)
    if n == 0:
        return within
    # Group by tenant, keeping credit order inside each tenant (stable sort).
    grouped = credit_order[np.argsort(tenant[credit_order], kind="stable")]
    seg = tenant[grouped]
    g, c = gpus[grouped], cpus[grouped]
    used_g, used_c = gpus_used.copy(), cpus_used.copy()
    undecided = np.arange(n)
    admitted = np.zeros(n, dtype=bool)
    rounds = 0
    while undecided.size and rounds < MAX_ROUNDS:
        rounds += 1
        t = seg[undecided]
        # What is left only shrinks, so a workload that alone overflows it is refused for good.
        alone = (used_g[t] + g[undecided] <= gpu_quota[t]) & (used_c[t] + c[undecided] <= cpu_quota[t])
        undecided, t = undecided[alone], t[alone]
        if not undecided.size:
            break
        cg, cc = np.cumsum(g[undecided]), np.cumsum(c[undecided])
        starts = np.flatnonzero(np.r_[True, t[1:] != t[:-1]])
        lengths = np.diff(np.r_[starts, undecided.size])
        # Sums restarted at each tenant: subtract what the earlier tenants added.
        base_g = np.repeat(cg[starts] - g[undecided[starts]], lengths)
        base_c = np.repeat(cc[starts] - c[undecided[starts]], lengths)
        ok = (used_g[t] + (cg - base_g) <= gpu_quota[t]) & (used_c[t] + (cc - base_c) <= cpu_quota[t])
        # Demands are >= 0, so within a tenant `ok` is a prefix: admit it; the first workload
        # after it fits alone but not after the prefix, so the sequential scan refuses it.
        admitted[undecided[ok]] = True
        np.add.at(used_g, t[ok], g[undecided[ok]])
        np.add.at(used_c, t[ok], c[undecided[ok]])
        refused_at = np.flatnonzero(~ok)
        if not refused_at.size:
            break
        # The first refused position of each tenant's segment; what follows it stays undecided.
        seg_of = np.repeat(np.arange(starts.size), lengths)
        first_per_seg = np.full(starts.size, undecided.size)
        np.minimum.at(first_per_seg, seg_of[refused_at], refused_at)
        undecided = undecided[np.arange(undecided.size) > first_per_seg[seg_of]]
    if undecided.size:
        # Only tenants that refused in every round are left; `undecided` is still in (tenant,
        # credit) order and `used` holds what the rounds admitted: finish one at a time.
        quota_g, quota_c = gpu_quota.tolist(), cpu_quota.tolist()
        run_g, run_c = used_g.tolist(), used_c.tolist()
        for position, t, dg, dc in zip(undecided.tolist(), seg[undecided].tolist(), g[undecided].tolist(),
                                       c[undecided].tolist(), strict=True):
            if run_g[t] + dg <= quota_g[t] and run_c[t] + dc <= quota_c[t]:
                admitted[position] = True
                run_g[t] += dg
                run_c[t] += dc
    within[grouped[admitted]] = True
    return within


def gms_scan(*, tenant: np.ndarray, age_hours: np.ndarray, gpus: np.ndarray, cpus: np.ndarray,
             tenant_priority: np.ndarray, tenant_gpu_quota: np.ndarray, tenant_cpu_quota: np.ndarray,
             tenant_gpus_used: np.ndarray, tenant_cpus_used: np.ndarray,
             tenant_window_usage: np.ndarray, params: GmsParameters = GmsParameters()) -> GmsScan:
    """One GMS-scan pass over the pending workloads (MAST §4.2, eqs. 10-11).

    Parameters
    ----------
    tenant : np.ndarray
        (n,) int, each pending workload's tenant, an index into the (T,) tenant arrays.
    age_hours : np.ndarray
        (n,) hours each workload has waited (>= 0).
    gpus : np.ndarray
        (n,) GPUs each workload asks for (>= 0).
    cpus : np.ndarray
        (n,) CPUs each workload asks for (>= 0).
    tenant_priority : np.ndarray
        (T,) int, each tenant's level, 0 (highest) to 6 (lowest).
    tenant_gpu_quota : np.ndarray
        (T,) the most GPUs the tenant may hold at once (>= 0, ``inf`` for no quota).
    tenant_cpu_quota : np.ndarray
        (T,) the most CPUs the tenant may hold at once (>= 0, ``inf`` for no quota).
    tenant_gpus_used : np.ndarray
        (T,) GPUs the tenant's running workloads hold now.
    tenant_cpus_used : np.ndarray
        (T,) CPUs the tenant's running workloads hold now.
    tenant_window_usage : np.ndarray
        (T,) each tenant's window-average resources used (e.g. GPU-hours over the window / the
        window's length); eq. 11 divides it by the mean over all tenants.
    params : GmsParameters
        The weights and the age cap of eqs. 10-11.

    Returns
    -------
    GmsScan
        The order (highest <priority, credit> first; ties by lower index) and, per workload,
        the effective priority, the credit and whether it is within its tenant's quota.

    Raises
    ------
    InstanceError
        Naming the argument (and entry) that is of the wrong length, out of range, negative or
        not finite.
    """
    prio = _vector(tenant_priority, "tenant_priority", None, integer=True)
    tenant_count = prio.shape[0]
    bad = (prio < 0) | (prio > OVER_QUOTA_PRIORITY)
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise InstanceError(f"tenant_priority[{position}]", f"must be 0..{OVER_QUOTA_PRIORITY}, got {int(prio[position])}")
    gpu_quota = _vector(tenant_gpu_quota, "tenant_gpu_quota", tenant_count, allow_inf=True)
    cpu_quota = _vector(tenant_cpu_quota, "tenant_cpu_quota", tenant_count, allow_inf=True)
    gpus_used = _vector(tenant_gpus_used, "tenant_gpus_used", tenant_count)
    cpus_used = _vector(tenant_cpus_used, "tenant_cpus_used", tenant_count)
    usage = _vector(tenant_window_usage, "tenant_window_usage", tenant_count)

    who = _vector(tenant, "tenant", None, integer=True)
    n = who.shape[0]
    bad = (who < 0) | (who >= tenant_count)
    if bad.any():
        position = int(np.flatnonzero(bad)[0])
        raise InstanceError(f"tenant[{position}]", f"must be a tenant index 0..{tenant_count - 1}, got {int(who[position])}")
    age = _vector(age_hours, "age_hours", n)
    g = _vector(gpus, "gpus", n)
    c = _vector(cpus, "cpus", n)
    if not isinstance(params, GmsParameters):
        raise InstanceError("params", f"must be GmsParameters, got {type(params).__name__}")

    # Eq. 11: the tenant's share relative to the mean; all-zero usage means nobody used more.
    mean = float(usage.mean()) if tenant_count else 0.0
    relative = usage / mean if mean > 0 else np.zeros(tenant_count)
    fair_share = params.fair_share_weight * (1.0 - relative)
    credit = params.age_weight * np.minimum(age, params.age_cap_hours) + fair_share[who]

    credit_order = np.argsort(-credit, kind="stable")  # credit descending, index ascending on ties
    within = _quota_scan(who, to_units(g), to_units(c), credit_order, to_units(gpu_quota), to_units(cpu_quota),
                         to_units(gpus_used), to_units(cpus_used))
    priority = np.where(within, prio[who], OVER_QUOTA_PRIORITY).astype(np.int64)
    order = np.lexsort((np.arange(n), -credit, priority)).astype(np.int64)
    return GmsScan(order=order, priority=priority, credit=credit, within_quota=within)


__all__ = [
    "MAX_AMOUNT", "OVER_QUOTA_PRIORITY", "PAPER_PRIORITY_SHARES", "PRIORITY_MIX", "GmsParameters", "GmsScan",
    "gms_scan", "sequential_quota_scan", "to_units", "workload_priority_mix",
]
