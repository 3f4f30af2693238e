"""The analytic conflict model of ParSync §4.1 (eqs. 1-4).

N schedulers each pick K distinct slots uniformly among S_idle idle slots, all from the same
(synchronised) state, in one round. X_i, the number of schedulers picking slot i, is
Binomial(N, K/S_idle); slot i causes Y_i = max(X_i - 1, 0) conflicts (every request after the
first granted one is rejected).

>>> round(expected_conflicts(10, 100, 10_000), 3)
43.821
"""

from __future__ import annotations

import math


def _check(n: float, k: float, s_idle: float) -> None:
    if n <= 0 or k < 0 or s_idle <= 0 or k > s_idle:
        raise ValueError(f"need n > 0, 0 <= k <= s_idle, s_idle > 0 (got n={n}, k={k}, s_idle={s_idle})")


def expected_conflicts_per_slot(n: float, k: float, s_idle: float) -> float:
    """Eq. (1): E[Y_i] = NK/S_idle - 1 + (1 - K/S_idle)^N."""
    _check(n, k, s_idle)
    p = k / s_idle
    # expm1/log1p keep the tiny difference exact when K << S_idle
    return n * p + math.expm1(n * math.log1p(-p)) if p < 1 else n * p - 1.0


def expected_conflicts(n: float, k: float, s_idle: float) -> float:
    """Eq. (2): E[sum_i Y_i] = NK - S_idle + S_idle (1 - K/S_idle)^N, conflicts in one round."""
    return s_idle * expected_conflicts_per_slot(n, k, s_idle)


def conflict_variance(n: int, k: int, s_idle: int) -> float:
    """Var[sum_i Y_i] under the same model, for the statistical tolerance of a simulated round.

    Schedulers are independent; each picks K distinct slots, so X_i ~ Binomial(N, p) with
    p = K/S_idle, and for i != j the picks of one scheduler are hypergeometric-correlated.
    We use sum Y_i = NK - (number of distinct slots picked) and compute the variance of the
    number of untouched slots U: Var[U] = S q_1 + S(S-1) q_2 - (S q_1)^2 with q_1 = (1-p)^N,
    q_2 = (P[neither of two given slots is picked by one scheduler])^N.
    """
    _check(n, k, s_idle)
    s = s_idle
    q1 = (1 - k / s) ** n
    q2 = ((s - k) * (s - k - 1) / (s * (s - 1))) ** n if s > 1 else 0.0
    return max(s * q1 + s * (s - 1) * q2 - (s * q1) ** 2, 0.0)


def conflicts_with_more_schedulers(a: float, n: float, k: float, s_idle: float) -> float:
    """Eq. (3): A*N schedulers with K/A tasks each, f(A) = NK - S_idle + S_idle (1 - K/(A S_idle))^(AN)."""
    if a <= 0:
        raise ValueError(f"need A > 0 (got {a})")
    return expected_conflicts(a * n, k / a, s_idle)


def conflicts_eq4(a: float, n: float, k: float, s_idle: float) -> float:
    """Eq. (4): the same as eq. (3) written C1 + C2 (1 - 1/x)^(x C3), x = A S_idle / K."""
    c1, c2, c3 = n * k - s_idle, s_idle, n * k / s_idle
    x = a * s_idle / k
    return c1 + c2 * (1 - 1 / x) ** (x * c3)
