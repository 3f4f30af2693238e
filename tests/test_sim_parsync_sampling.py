"""ParSync's weighted sampling without replacement (Quality-first, §5.2): the rejection sampler
that replaced a scan of the whole partition draws from the same distribution as the
Efraimidis-Spirakis keys, checked against exact inclusion probabilities."""

from __future__ import annotations

import numpy as np
import pytest

from fleetplan.sim.parsync import Scenario, core
from fleetplan.sim.parsync.core import _Run


def _run(free: np.ndarray, seed: int = 0) -> _Run:
    sc = Scenario(slots=free.size, schedulers=1, partitions=1, score_power=8.0, score_variance=4.0)
    run = _Run(sc, "parsync", "quality-first", seed)
    run.local_free[0] = free
    run.free_count[0, 0] = int(free.sum())
    run.score_sum[0, 0] = run.score @ free
    run.weight_sum[0, 0] = run.weight @ free
    return run


def _exact_inclusion_k2(w: np.ndarray) -> np.ndarray:
    """P(slot j among 2 successive weighted draws without replacement)."""
    p = w / w.sum()
    second = np.array([sum(p[i] * w[j] / (w.sum() - w[i]) for i in range(w.size) if i != j)
                       for j in range(w.size)])
    return p + second


@pytest.mark.parametrize("rejection", [True, False])
def test_weighted_sample_has_the_successive_sampling_distribution(monkeypatch, rejection):
    free = np.zeros(40, dtype=bool)
    free[::2] = True                                  # 20 free slots, k = 2 well below a quarter
    run = _run(free)
    share = run.weight_sum[0, 0] / run.cumw[0, -1]
    # rejection when share >= the threshold (it is about 0.5 here), Efraimidis-Spirakis otherwise
    monkeypatch.setattr(core, "REJECTION_MIN_SHARE", 0.0 if rejection else 2.0)
    assert (share >= core.REJECTION_MIN_SHARE) == rejection
    n = 3_000
    counts = np.zeros(40)
    for _ in range(n):
        got = run.sample(0, 0, 40, int(free.sum()), 2, weighted=True)
        assert got.size == 2 and got[0] != got[1] and free[got].all()
        counts[got] += 1
    exact = np.zeros(40)
    exact[free] = _exact_inclusion_k2(run.weight[free])
    sd = np.sqrt(exact * (1 - exact) / n)
    assert np.all(np.abs(counts / n - exact) <= 5 * sd + 1e-12)
    assert counts[~free].sum() == 0


def test_rejection_sampler_takes_all_requested_distinct_free_slots():
    rng = np.random.default_rng(3)
    free = rng.random(5_000) < 0.3
    run = _run(free, seed=3)
    share = run.weight_sum[0, 0] / run.cumw[0, -1]
    got = run._weighted_by_rejection(run.local_free[0], 0, share, 100)
    assert got.size == 100 and np.unique(got).size == 100 and free[got].all()
