"""Online inference for the averaged iterate by random scaling (Lee, Liao, Seo &
Shin, "Fast and robust online inference with stochastic gradient descent via
random scaling", AAAI 2022).

The kernel keeps, over the window of the Polyak-Ruppert average (its k steps,
z_s the s-th averaged iterate, coefficients then intercept, u_s = z_s - z_1):
sum s^2, sum s^2 u_s and sum s^2 u_s u_s' (``rs_step`` in ``csrc/_qr_inference.pxd``).
From them

    V_k = k^-2 sum_{s<=k} s^2 (z_s - z_k)(z_s - z_k)'

follows in O(d^2), and sqrt(k) (z_k - beta*)_j / sqrt(V_k,jj) has, as k grows,
the law of W(1) / sqrt(int_0^1 (W(r) - r W(1))^2 dr) (W a standard Brownian
motion), whatever the noise, the design or the stepsize constants: no density
estimate is needed. ``coef_covariance_`` is V_k / k, on the scale of the
estimate; it is a *random* scale (it does not converge to the asymptotic
covariance), to be used with this law's critical values, not normal ones.
"""
from __future__ import annotations

import numpy as np

# (the state object computes V from its sums; named here too, as before)
from .._kernels._quantile import random_scaling_matrix

__all__ = ["CRITICAL_VALUES", "critical_value", "random_scaling_matrix",
           "simulate_critical_value"]

# Two-sided critical values c_alpha: P(|W(1)| / sqrt(int (W(r) - r W(1))^2) > c) = alpha.
# 0.02, 0.05, 0.10, 0.20: Abadir & Paruolo (1997), Table 1 (the 99%, 97.5%, 95%
# and 90% quantiles 8.613, 6.747, 5.323, 3.875), also tabulated by Lee et al.
# (2022). 0.01 (the 99.5% quantile) is not tabulated there: it is ours, from
# simulate_critical_value(0.01, n_draws=10**6, seed=20221), 10.028 (standard
# error 0.004 by 20 batch means); the same run gives 8.621, 6.751, 5.324, 3.875
# for the other four, within 2 standard errors of the published values.
CRITICAL_VALUES = {0.01: 10.028, 0.02: 8.613, 0.05: 6.747, 0.10: 5.323, 0.20: 3.875}


def critical_value(alpha):
    """The random-scaling critical value for a two-sided level ``alpha``.

    Parameters
    ----------
    alpha : {0.01, 0.02, 0.05, 0.1, 0.2}

    Returns
    -------
    float

    Examples
    --------
    >>> from streamfit.quantile import critical_value
    >>> critical_value(0.05)
    6.747
    """
    for a, c in CRITICAL_VALUES.items():
        if isinstance(alpha, (int, float, np.floating)) and not isinstance(alpha, bool) \
                and abs(float(alpha) - a) < 1e-12:
            return c
    raise ValueError(f"alpha must be one of {tuple(CRITICAL_VALUES)} (the levels whose "
                     f"random-scaling critical values are tabulated), got {alpha!r}")


def simulate_critical_value(alpha, n_draws=10**6, seed=20221, terms=400):
    """Simulate the two-sided critical value of W(1) / sqrt(int_0^1 B(r)^2 dr).

    B(r) = W(r) - r W(1) is a Brownian bridge, independent of W(1); by its
    Karhunen-Loeve expansion int B^2 = sum_k xi_k^2 / (k pi)^2 (``terms``
    terms, the rest replaced by its mean). Conditioning on S = int B^2,
    P(|T| > c) = E[erfc(c sqrt(S / 2))] (no simulated normal numerator), and c
    solves that = alpha.

    Parameters
    ----------
    alpha : float in (0, 1)
    n_draws : int
    seed : int
    terms : int

    Returns
    -------
    float

    Examples
    --------
    >>> from streamfit.quantile import simulate_critical_value
    >>> c = simulate_critical_value(0.05, n_draws=20000, seed=1)
    >>> bool(abs(c - 6.747) < 0.1)       # Abadir & Paruolo (1997): 6.747
    True
    """
    from scipy.optimize import brentq
    from scipy.special import erfc

    rng = np.random.default_rng(seed)
    lam = 1.0 / (np.pi * np.arange(1, terms + 1)) ** 2
    tail = 1.0 / (np.pi ** 2 * terms) - 0.5 / (np.pi ** 2 * terms ** 2)
    parts, left = [], int(n_draws)
    while left > 0:
        m = min(left, 50000)
        parts.append((rng.standard_normal((m, terms)) ** 2) @ lam + tail)
        left -= m
    half = np.sqrt(np.concatenate(parts) / 2.0)
    return float(brentq(lambda c: erfc(c * half).mean() - alpha, 0.1, 100.0))


