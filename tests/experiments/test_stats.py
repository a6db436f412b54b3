"""The fits and intervals the verdicts are computed from."""
import numpy as np
import pytest

from streamfit.experiments._stats import (diff_ci, fit_boxcox_growth, fit_log_growth,
                                          fit_power_growth, last_decade_slope, loglog_slope,
                                          mean_ci)
from streamfit.experiments.qr_regret import growth


def test_loglog_slopes():
    x = np.geomspace(10, 1e5, 30)
    assert loglog_slope(x, 3 * x ** -0.5) == pytest.approx(-0.5)
    y = np.where(x < 1e4, 1.0, 1e4 / x)       # flat, then 1/t in the last decade
    assert last_decade_slope(x, y) == pytest.approx(-1.0, abs=0.05)
    assert np.isnan(loglog_slope([1, 2], [np.inf, 1.0]))


def test_log_growth_is_recovered_and_told_from_a_power():
    t = np.geomspace(100, 1e5, 40)
    rng = np.random.default_rng(0)
    log_path = 50 + 300 * np.log1p(t / 40) + rng.normal(0, 1, t.size)
    fit = fit_log_growth(t, log_path)
    assert fit["A"] == pytest.approx(300, rel=0.05) and fit["r2"] > 0.999
    assert fit_power_growth(t, log_path)["p"] < 0.1
    sqrt_path = 5 * np.sqrt(t)
    assert fit_power_growth(t, sqrt_path)["p"] == pytest.approx(0.5, abs=0.02)
    # the increment ratio over the two halves of log t: 1 for log, (T/start)^(p/2) for t^p
    _, inc_log = growth(t, 300 * np.log(t), 1000)
    _, inc_sqrt = growth(t, np.sqrt(t), 1000)
    assert inc_log == pytest.approx(1.0, abs=1e-6)
    assert inc_sqrt == pytest.approx(100 ** 0.25, rel=0.01)


def test_boxcox_exponent_is_two_sided():
    # log growth gives p ~ 0, a power its exponent, and growth that levels off
    # (slower than log) a negative p -- where b + A t^p (p >= 0) would sit at 0
    t = np.geomspace(2000, 1e5, 40)
    rng = np.random.default_rng(2)
    assert abs(fit_boxcox_growth(t, 7 + 300 * np.log(t) + rng.normal(0, 1, t.size))["p"]) < 0.03
    assert fit_boxcox_growth(t, 5 * np.sqrt(t))["p"] == pytest.approx(0.5, abs=0.02)
    assert fit_boxcox_growth(t, t)["p"] == pytest.approx(1.0, abs=0.02)
    levelling = 100 - 4000 / np.sqrt(t)                     # (t^-0.5 - 1) / -0.5 shape
    fit = fit_boxcox_growth(t, levelling)
    assert fit["p"] == pytest.approx(-0.5, abs=0.02) and fit["r2"] > 0.9999
    assert fit_power_growth(t, levelling)["p"] <= 0.01       # the pinned fit cannot say so


def test_confidence_intervals_cover_at_their_level():
    rng = np.random.default_rng(1)
    cover = []
    for _ in range(400):
        m, h = mean_ci(rng.normal(2.0, 1.0, 8))
        cover.append(abs(m - 2.0) <= h)
    assert 0.92 <= np.mean(cover) <= 0.98
    d, h = diff_ci(rng.normal(0, 1, 50), rng.normal(1, 3, 40))
    assert abs(d + 1) <= h and h > 0
