"""Descriptive statistics over repeated runs: mean, sample standard deviation, min/max and
a Student-t confidence interval for the mean.

The t quantile is computed here (no SciPy): the Student t CDF through the regularized
incomplete beta function (continued fraction, modified Lentz), inverted by bisection to
1e-12. It matches the printed tables (t(0.975, 4) = 2.776, t(0.975, 1) = 12.706).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

#: confidence level of the intervals sweeps report
LEVEL = 0.95


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 3e-16:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
          + a * math.log(x) + b * math.log1p(-x))
    front = math.exp(ln)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    x = df / (df + t * t)
    tail = 0.5 * betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (``0 < p < 1``, ``df > 0``)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile({p}, {df}): need 0 < p < 1 and df > 0")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return (lo + hi) / 2.0


def describe(values: Sequence[float], level: float = LEVEL) -> dict[str, float | int | None]:
    """``n``, ``mean``, ``sd`` (sample, n - 1), ``min``, ``max``, ``ci_low``, ``ci_high``
    (mean -+ t(1 - (1 - level) / 2, n - 1) sd / sqrt(n)); sd and the interval are None
    for fewer than two values, everything but n for none."""
    n = len(values)
    out: dict[str, float | int | None] = {"n": n, "mean": None, "sd": None, "min": None,
                                          "max": None, "ci_low": None, "ci_high": None}
    if n == 0:
        return out
    mean = statistics.fmean(values)
    out.update(mean=mean, min=min(values), max=max(values))
    if n >= 2:
        sd = statistics.stdev(values)
        half = t_quantile(1.0 - (1.0 - level) / 2.0, n - 1) * sd / math.sqrt(n)
        out.update(sd=sd, ci_low=mean - half, ci_high=mean + half)
    return out
