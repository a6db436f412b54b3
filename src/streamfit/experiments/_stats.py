"""Fits and summaries the verdicts are computed from."""
from __future__ import annotations

import warnings

import numpy as np
from scipy import optimize, stats

__all__ = ["loglog_slope", "mean_ci", "diff_ci", "fit_log_growth", "fit_power_growth",
           "median_ci", "interval", "check_inside", "check_below", "check_above",
           "fit_boxcox_growth", "boxcox_model", "last_decade_slope", "median", "log_model"]


def loglog_slope(x, y):
    """Least-squares slope of log y against log x (finite, positive points)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def last_decade_slope(t, err, decades=1.0):
    """Log-log slope of ``err`` against ``t`` over the last ``decades`` of t."""
    t = np.asarray(t, float)
    keep = t >= t[-1] / 10 ** decades
    return loglog_slope(t[keep], np.asarray(err, float)[keep])


def median(values):
    values = np.asarray(values, float)
    return float(np.median(values)) if values.size else float("nan")


def mean_ci(values, level=0.95):
    """Mean and the half-width of its Student-t confidence interval."""
    values = np.asarray(values, float)
    n = values.size
    if n < 2:
        return float(values.mean()) if n else float("nan"), float("nan")
    half = stats.t.ppf(0.5 + level / 2, n - 1) * values.std(ddof=1) / np.sqrt(n)
    return float(values.mean()), float(half)


def diff_ci(a, b, level=0.95):
    """Mean of a - b and the half-width of Welch's confidence interval."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = np.sqrt(va + vb)
    if se == 0:
        return float(a.mean() - b.mean()), 0.0
    dof = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    return float(a.mean() - b.mean()), float(stats.t.ppf(0.5 + level / 2, dof) * se)


def _least_squares(model, p0, t, r, bounds):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            p, _ = optimize.curve_fit(model, t, r, p0=p0, bounds=bounds, maxfev=20000)
        except (RuntimeError, ValueError):
            return None, float("nan")
    resid = r - model(t, *p)
    total = np.sum((r - r.mean()) ** 2)
    return p, float(1 - np.sum(resid ** 2) / total) if total > 0 else float("nan")


def _log_model(t, b, A, a):
    return b + A * np.log1p(t / a)


def _power_model(t, b, A, p):
    return b + A * t ** p


def fit_log_growth(t, r):
    """Fit r = b + A log(1 + t / a) (the paper's Figure 9 benchmark shape).

    Returns ``dict(b, A, a, r2)``; NaNs if the fit fails.
    """
    t, r = np.asarray(t, float), np.asarray(r, float)
    span = max(r[-1] - r[0], 1e-12)
    p, r2 = _least_squares(_log_model, (r[0], span / np.log1p(t[-1] / t[0]), t[0]), t, r,
                           ([-np.inf, 0, 1e-9], [np.inf, np.inf, np.inf]))
    if p is None:
        return {"b": np.nan, "A": np.nan, "a": np.nan, "r2": np.nan}
    return {"b": float(p[0]), "A": float(p[1]), "a": float(p[2]), "r2": r2}


def fit_power_growth(t, r):
    """Fit r = b + A t^p; p near 0 is logarithmic-like growth, 1/2 square-root,
    1 linear. Returns ``dict(b, A, p, r2)``."""
    t, r = np.asarray(t, float), np.asarray(r, float)
    span = max(r[-1] - r[0], 1e-12)
    p, r2 = _least_squares(_power_model, (r[0], span / t[-1] ** 0.5, 0.5), t, r,
                           ([-np.inf, 0, 0], [np.inf, np.inf, 2.0]))
    if p is None:
        return {"b": np.nan, "A": np.nan, "p": np.nan, "r2": np.nan}
    return {"b": float(p[0]), "A": float(p[1]), "p": float(p[2]), "r2": r2}


def _boxcox(u, p):
    # (u^p - 1) / p, continuous at p = 0 (log u)
    lu = np.log(u)
    small = abs(p) < 1e-8
    return lu if small else np.expm1(p * lu) / p


def boxcox_model(t, fit):
    """b + A ((t / t0)^p - 1) / p, the curve :func:`fit_boxcox_growth` fitted."""
    return fit["b"] + fit["A"] * _boxcox(np.asarray(t, float) / fit["t0"], fit["p"])


def fit_boxcox_growth(t, r):
    """Fit r = b + A ((t/t0)^p - 1) / p, A >= 0, p in [-2, 2], t0 = t[0].

    One family for every increasing shape: p = 0 is exactly logarithmic
    growth (A log(t/t0)), p > 0 a power (1/2 square root, 1 linear), p < 0
    growth that levels off, slower than log. Unlike b + A t^p with p >= 0,
    the exponent is not pinned at a bound when the truth is log or slower, so
    it can be tested on both sides of 0. Best of three starting exponents.
    Returns ``dict(b, A, p, t0, r2)``; NaNs if every fit fails.
    """
    t, r = np.asarray(t, float), np.asarray(r, float)
    t0 = float(t[0])
    span = max(r[-1] - r[0], 1e-12)
    best = None
    for p0 in (-0.5, 0.05, 0.5):
        a0 = span / max(_boxcox(t[-1] / t0, p0), 1e-12)
        p, r2 = _least_squares(lambda x, b, A, q: b + A * _boxcox(x / t0, q), (r[0], a0, p0),
                               t, r, ([-np.inf, 0, -2.0], [np.inf, np.inf, 2.0]))
        if p is not None and (best is None or r2 > best[1]):
            best = (p, r2)
    if best is None:
        return {"b": np.nan, "A": np.nan, "p": np.nan, "t0": t0, "r2": np.nan}
    (b, A, q), r2 = best
    return {"b": float(b), "A": float(A), "p": float(q), "t0": t0, "r2": r2}


def log_model(t, fit):
    return _log_model(np.asarray(t, float), fit["b"], fit["A"], fit["a"])


# -- intervals and the criteria they decide -----------------------------------------------

def median_ci(values, level=0.95):
    """Median and a distribution-free confidence interval for it: the order
    statistics whose ranks the binomial(n, 1/2) law puts around the middle
    (exact coverage >= level; for heavy tails, where a mean's t-interval is
    not to be trusted). Returns (median, lo, hi); NaN ends below 6 values."""
    v = np.sort(np.asarray(values, float))
    n = v.size
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    med = float(np.median(v))
    j = int(stats.binom.ppf((1 - level) / 2, n, 0.5))      # lower rank (0-based: j - 1)
    k = n - j                                              # symmetric upper rank
    if j < 1:
        return med, float("nan"), float("nan")
    return med, float(v[j - 1]), float(v[k])


def interval(values, center="mean", level=0.95):
    """(center, lo, hi): the mean with its Student-t interval, or the median
    with its order-statistic interval (``center="median"``)."""
    if center == "median":
        return median_ci(values, level)
    m, h = mean_ci(values, level)
    return m, m - h, m + h


def _cmp_check(values, what, *, lo=None, hi=None, center="mean", role="claim", n_of="seeds",
               fmt=".3g", level=0.95, requires=None):
    from ._types import Check

    c, a, b = interval(values, center, level)
    n = np.asarray(values).size
    if lo is not None and hi is not None:
        passed = lo <= a and b <= hi
        against = b < lo or a > hi
        need = requires or f"the whole {level:.0%} interval inside [{lo:g}, {hi:g}]"
    elif hi is not None:
        passed, against = b <= hi, a > hi
        need = requires or f"the whole {level:.0%} interval at or below {hi:g}"
    else:
        passed, against = a >= lo, b < lo
        need = requires or f"the whole {level:.0%} interval at or above {lo:g}"
    text = (f"{what}: {center} {c:{fmt}}, {level:.0%} CI [{a:{fmt}}, {b:{fmt}}] over {n} "
            f"{n_of}")
    return Check(text, bool(passed) and np.isfinite([a, b]).all(), role=role,
                 requires=need, against=bool(against))


def check_inside(values, lo, hi, what, **kw):
    """A criterion: the interval of ``values`` lies inside [lo, hi]; evidence
    against when it lies wholly outside."""
    return _cmp_check(values, what, lo=lo, hi=hi, **kw)


def check_below(values, hi, what, **kw):
    """A criterion: the interval of ``values`` lies at or below ``hi``."""
    return _cmp_check(values, what, hi=hi, **kw)


def check_above(values, lo, what, **kw):
    """A criterion: the interval of ``values`` lies at or above ``lo``."""
    return _cmp_check(values, what, lo=lo, **kw)
