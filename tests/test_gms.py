"""GMS scan (MAST §4.2, eqs. 10-11): hand-computed credits and order, quota demotion, equality
with a plain one-workload-at-a-time scan, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.instances import InstanceError
from fleetplan.sim.mast.gms import (
    OVER_QUOTA_PRIORITY,
    PRIORITY_MIX,
    GmsParameters,
    gms_scan,
    sequential_quota_scan,
    workload_priority_mix,
)

BIG = 1e9


def scan(tenant, age, gpus, cpus, prio, gpu_quota, cpu_quota, gpus_used, cpus_used, usage, params=None):
    return gms_scan(
        tenant=np.asarray(tenant), age_hours=np.asarray(age, dtype=float), gpus=np.asarray(gpus, dtype=float),
        cpus=np.asarray(cpus, dtype=float), tenant_priority=np.asarray(prio),
        tenant_gpu_quota=np.asarray(gpu_quota, dtype=float), tenant_cpu_quota=np.asarray(cpu_quota, dtype=float),
        tenant_gpus_used=np.asarray(gpus_used, dtype=float), tenant_cpus_used=np.asarray(cpus_used, dtype=float),
        tenant_window_usage=np.asarray(usage, dtype=float), params=params or GmsParameters())


def reference_scan(tenant, age, gpus, cpus, prio, gpu_quota, cpu_quota, gpus_used, cpus_used, usage, params):
    """The paper's pass written out one workload at a time in plain Python."""
    n, t_count = len(tenant), len(prio)
    mean = sum(usage) / t_count if t_count else 0.0
    credit = []
    for w in range(n):
        ratio = usage[tenant[w]] / mean if mean > 0 else 0.0
        credit.append(params.age_weight * min(age[w], params.age_cap_hours)
                      + params.fair_share_weight * (1.0 - ratio))
    by_credit = sorted(range(n), key=lambda w: (-credit[w], w))

    def units(values):  # thousandths of a GPU or CPU, exact (the module's documented rounding)
        return [v if math.isinf(v) else round(v * 1000.0) for v in values]

    gpus, cpus, gpu_quota, cpu_quota = units(gpus), units(cpus), units(gpu_quota), units(cpu_quota)
    used_g, used_c = units(gpus_used), units(cpus_used)
    within = [False] * n
    for w in by_credit:
        t = tenant[w]
        if used_g[t] + gpus[w] <= gpu_quota[t] and used_c[t] + cpus[w] <= cpu_quota[t]:
            within[w] = True
            used_g[t] += gpus[w]
            used_c[t] += cpus[w]
    priority = [prio[tenant[w]] if within[w] else OVER_QUOTA_PRIORITY for w in range(n)]
    order = sorted(range(n), key=lambda w: (priority[w], -credit[w], w))
    return order, priority, credit, within


def test_hand_made_queue_follows_eqs_10_11():
    # W_age = 2 per hour, W_fair_share = 10, age cap 5 h. Window usage 30, 0, 60: mean 30, so the
    # fair-share terms are 10*(1-1) = 0, 10*(1-0) = 10, 10*(1-2) = -10.
    params = GmsParameters(age_weight=2.0, fair_share_weight=10.0, age_cap_hours=5.0)
    tenant = [0, 1, 2, 2, 0, 1, 0]
    age = [1.0, 0.5, 10.0, 4.0, 6.0, 0.0, 5.0]
    result = scan(tenant, age, [8] * 7, [1] * 7, prio=[1, 3, 0], gpu_quota=[BIG] * 3, cpu_quota=[BIG] * 3,
                  gpus_used=[0] * 3, cpus_used=[0] * 3, usage=[30.0, 0.0, 60.0], params=params)
    expected_credit = [
        2 * 1.0 + 0,     # w0: tenant 0
        2 * 0.5 + 10,    # w1: tenant 1 used nothing
        2 * 5.0 - 10,    # w2: 10 h capped at 5 h; tenant 2 used twice the mean
        2 * 4.0 - 10,    # w3
        2 * 5.0 + 0,     # w4: 6 h capped at 5 h
        2 * 0.0 + 10,    # w5
        2 * 5.0 + 0,     # w6: 5 h, ties with w4
    ]
    assert result.credit.tolist() == pytest.approx(expected_credit)
    assert result.within_quota.all()
    assert result.priority.tolist() == [1, 3, 0, 0, 1, 3, 1]
    # Priority 0 first (w2 before w3 by credit), then level 1 (w4 and w6 tie at 10: lower index
    # first, then w0), then level 3 (w1 at 11 before w5 at 10).
    assert result.order.tolist() == [2, 3, 4, 6, 0, 1, 5]
    assert result.order.dtype == np.int64 and result.priority.dtype == np.int64
    assert result.credit.dtype == np.float64 and result.within_quota.dtype == bool


def test_all_tenants_idle_gives_full_fair_share_term():
    result = scan([0, 1], [0.0, 30.0], [1, 1], [1, 1], prio=[2, 2], gpu_quota=[BIG] * 2, cpu_quota=[BIG] * 2,
                  gpus_used=[0, 0], cpus_used=[0, 0], usage=[0.0, 0.0],
                  params=GmsParameters(age_weight=0.5, fair_share_weight=3.0, age_cap_hours=24.0))
    assert result.credit.tolist() == pytest.approx([3.0, 0.5 * 24 + 3.0])
    assert result.order.tolist() == [1, 0]


def test_over_quota_demoted_and_a_later_small_workload_still_fits():
    # Tenant 0 (level 1, 16 GPUs, 4 running): credits put a (8 GPUs) first, then b (16), c (4),
    # d (1). a fits (12); b would make 28 > 16: refused, over quota; c fits after b's refusal
    # (16); d no longer fits (17). Tenant 1 (level 0) holds 10 CPUs of a quota of 8 already: even
    # a workload asking for nothing is over quota. Tenant 2 (level 2): GPUs fit, CPUs do not.
    tenant = [0, 0, 0, 0, 1, 1, 2]
    age = [4.0, 3.0, 2.0, 1.0, 5.0, 0.0, 1.0]
    gpus = [8, 16, 4, 1, 0, 8, 1]
    cpus = [1, 1, 1, 1, 0, 1, 33]
    result = scan(tenant, age, gpus, cpus, prio=[1, 0, 2], gpu_quota=[16, 64, 64], cpu_quota=[100, 8, 32],
                  gpus_used=[4, 0, 0], cpus_used=[0, 10, 0], usage=[1.0, 1.0, 1.0])
    assert result.within_quota.tolist() == [True, False, True, False, False, False, False]
    assert result.priority.tolist() == [1, 6, 1, 6, 6, 6, 6]
    # Within quota first (level 1: a, c), then every demoted one by credit (ages: 5, 3, 1, 1, 0).
    assert result.order.tolist() == [0, 2, 4, 1, 3, 6, 5]


def test_exactly_full_quota_fits_and_fractional_sums_are_not_refused_by_rounding():
    result = scan([0, 0, 0], [3.0, 2.0, 1.0], [1, 1, 0], [0.1, 0.2, 0.0], prio=[0], gpu_quota=[2], cpu_quota=[0.3],
                  gpus_used=[0], cpus_used=[0], usage=[0])
    assert result.within_quota.tolist() == [True, True, True]


def test_infinite_quota_admits_everything():
    result = scan([0, 0], [1.0, 2.0], [1e6, 1e6], [1e6, 1e6], prio=[4], gpu_quota=[math.inf], cpu_quota=[math.inf],
                  gpus_used=[5], cpus_used=[5], usage=[2.0])
    assert result.within_quota.all() and result.priority.tolist() == [4, 4]


def random_case(rng: np.random.Generator, n: int, t_count: int, integer: bool):
    tenant = rng.integers(0, t_count, n)
    age = rng.exponential(10.0, n) * (rng.random(n) < 0.9)
    if integer:
        gpus = rng.choice([0, 1, 8, 16, 64, 128], n).astype(float)
        cpus = rng.integers(0, 200, n).astype(float)
        gpu_quota = rng.integers(0, 400, t_count).astype(float)
        cpu_quota = rng.integers(0, 2000, t_count).astype(float)
        gpus_used = rng.integers(0, 300, t_count).astype(float)
        cpus_used = rng.integers(0, 1500, t_count).astype(float)
    else:
        gpus, cpus = rng.random(n) * 50, rng.random(n) * 50
        gpu_quota, cpu_quota = rng.random(t_count) * 200, rng.random(t_count) * 200
        gpus_used, cpus_used = rng.random(t_count) * 100, rng.random(t_count) * 100
    usage = rng.exponential(5.0, t_count) * (rng.random(t_count) < 0.8)
    prio = rng.integers(0, 7, t_count)
    params = GmsParameters(age_weight=float(rng.choice([0.0, 1.0, 2.5])),
                           fair_share_weight=float(rng.choice([0.0, 1.0, 7.0])),
                           age_cap_hours=float(rng.choice([1.0, 24.0])))
    return tenant, age, gpus, cpus, prio, gpu_quota, cpu_quota, gpus_used, cpus_used, usage, params


@pytest.mark.parametrize("seed", range(150))
def test_vectorised_scan_equals_sequential_reference(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    t_count = int(rng.integers(1, 12))
    case = random_case(rng, n, t_count, integer=seed % 3 != 0)
    tenant, age, gpus, cpus, prio, gpu_quota, cpu_quota, gpus_used, cpus_used, usage, params = case
    result = scan(*case)
    order, priority, credit, within = reference_scan(
        tenant.tolist(), age.tolist(), gpus.tolist(), cpus.tolist(), prio.tolist(), gpu_quota.tolist(),
        cpu_quota.tolist(), gpus_used.tolist(), cpus_used.tolist(), usage.tolist(), params)
    assert result.within_quota.tolist() == within
    assert result.priority.tolist() == priority
    assert result.credit.tolist() == pytest.approx(credit)
    assert result.order.tolist() == order
    # The module's own reference agrees too (it is what the docs point to).
    by_credit = np.argsort(-result.credit, kind="stable")
    assert sequential_quota_scan(tenant, gpus, cpus, by_credit, gpu_quota, cpu_quota, gpus_used,
                                 cpus_used).tolist() == within


@pytest.mark.parametrize("max_rounds", [0, 1, 8, 10_000])
def test_many_rounds_and_the_loop_fallback_agree(monkeypatch, max_rounds):
    # One tenant, halving sizes against half the total: nearly every refusal needs its own round
    # of cumulative sums, so past MAX_ROUNDS the rest is scanned one at a time.
    import fleetplan.sim.mast.gms as gms

    monkeypatch.setattr(gms, "MAX_ROUNDS", max_rounds)
    rng = np.random.default_rng(7)
    n = 2000
    gpus = 2.0 ** rng.integers(0, 20, n) / 1000.0
    tenant, prio = np.array([0, 1] * (n // 2)), np.array([0, 5])
    case = (tenant, rng.random(n), gpus, np.zeros(n), prio, np.array([gpus.sum() / 4, gpus.sum() / 3]),
            np.array([1.0, 1.0]), np.array([0.0, 0.0]), np.array([0.0, 0.0]), np.array([1.0, 2.0]), GmsParameters())
    result = scan(*case)
    _, priority, _, within = reference_scan(*(a.tolist() if isinstance(a, np.ndarray) else a for a in case))
    assert result.within_quota.tolist() == within
    assert result.priority.tolist() == priority
    assert 0 < sum(within) < n


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20), st.integers(0, 6), st.integers(0, 6)),
                max_size=40),
       st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(0, 8), st.integers(0, 8)),
                min_size=4, max_size=4))
def test_quota_scan_property(workloads, tenants):
    # Small integer demands against small quotas: many refusals followed by fits.
    tenant = np.array([w[0] for w in workloads], dtype=np.int64)
    age = np.array([w[1] for w in workloads], dtype=float)
    gpus = np.array([w[2] for w in workloads], dtype=float)
    cpus = np.array([w[3] for w in workloads], dtype=float)
    gpu_quota = np.array([t[0] for t in tenants], dtype=float)
    cpu_quota = np.array([t[1] for t in tenants], dtype=float)
    gpus_used = np.array([t[2] for t in tenants], dtype=float)
    cpus_used = np.array([t[3] for t in tenants], dtype=float)
    usage = np.zeros(4)
    prio = np.array([0, 1, 2, 3])
    params = GmsParameters()
    result = scan(tenant, age, gpus, cpus, prio, gpu_quota, cpu_quota, gpus_used, cpus_used, usage, params)
    order, priority, _, within = reference_scan(
        tenant.tolist(), age.tolist(), gpus.tolist(), cpus.tolist(), prio.tolist(), gpu_quota.tolist(),
        cpu_quota.tolist(), gpus_used.tolist(), cpus_used.tolist(), usage.tolist(), params)
    assert result.within_quota.tolist() == within
    assert result.order.tolist() == order


def test_priority_mix_is_the_papers_distribution():
    mix = workload_priority_mix()
    assert len(PRIORITY_MIX) == 7 and math.isclose(sum(PRIORITY_MIX), 1.0, rel_tol=0, abs_tol=1e-12)
    assert mix.sum() == pytest.approx(1.0)
    shares = np.array([0.03, 0.20, 0.16, 0.54, 0.002, 0.005, 0.0002 + 0.06])
    assert mix == pytest.approx(shares / shares.sum())
    assert int(np.argmax(mix)) == 3 and mix[6] > mix[0]


GOOD = dict(tenant=[0, 1], age=[1.0, 2.0], gpus=[1, 2], cpus=[1, 2], prio=[0, 1], gpu_quota=[8, 8],
            cpu_quota=[8, 8], gpus_used=[0, 0], cpus_used=[0, 0], usage=[1.0, 1.0])


@pytest.mark.parametrize(("change", "path"), [
    ({"age": [1.0]}, "age_hours"),
    ({"gpus": [1, 2, 3]}, "gpus"),
    ({"tenant": [0, 2]}, "tenant[1]"),
    ({"tenant": [-1, 0]}, "tenant[0]"),
    ({"tenant": [0.5, 1]}, "tenant[0]"),
    ({"gpus": [1, -2]}, "gpus[1]"),
    ({"cpus": [math.inf, 1]}, "cpus[0]"),
    ({"age": [math.nan, 1.0]}, "age_hours[0]"),
    ({"age": [-1.0, 1.0]}, "age_hours[0]"),
    ({"prio": [0, 7]}, "tenant_priority[1]"),
    ({"gpu_quota": [8]}, "tenant_gpu_quota"),
    ({"cpu_quota": [8, -1]}, "tenant_cpu_quota[1]"),
    ({"gpus_used": [math.inf, 0]}, "tenant_gpus_used[0]"),
    ({"usage": [1.0, math.nan]}, "tenant_window_usage[1]"),
    ({"gpus": [1, 2e9]}, "gpus[1]"),
    ({"gpu_quota": [8, 1e10]}, "tenant_gpu_quota[1]"),
])
def test_bad_input_names_the_argument(change, path):
    case = {**GOOD, **change}
    with pytest.raises(InstanceError) as error:
        scan(**case)
    assert error.value.path == path


@pytest.mark.parametrize(("field", "value"), [
    ("age_weight", -1.0), ("fair_share_weight", math.nan), ("age_cap_hours", 0.0), ("window_hours", math.inf),
    ("window_hours", 0), ("age_weight", "1"),
])
def test_bad_parameters_name_the_field(field, value):
    with pytest.raises(InstanceError) as error:
        GmsParameters(**{field: value})
    assert error.value.path == field


def test_window_average_divides_by_the_window():
    assert GmsParameters(window_hours=8.0).window_average(np.array([16.0, 0.0])).tolist() == [2.0, 0.0]
