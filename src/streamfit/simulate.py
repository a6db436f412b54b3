"""Synthetic streams for the paper experiments.

``make_linear_stream`` draws the linear quantile model of Shen, Xia & Zhou
(2025): y = x' beta* + xi with x ~ N(0, I_d) and noise xi whose tau-quantile is
zero, so that beta* is the tau-th conditional quantile coefficient.
"""
from __future__ import annotations

import numbers

import numpy as np
from scipy import special, stats

from ._validation import check_random_state, check_scalar

__all__ = ["make_linear_stream", "noise_mean_abs", "noise_sparsity"]

_NOISES = ("t", "gaussian")


def _check_noise(noise, df):
    if noise not in _NOISES:
        raise ValueError(f"noise must be one of {_NOISES}, got {noise!r}")
    if noise == "t":
        check_scalar(df, "df", low=1, low_open=True)


def _dist(noise, df):
    return stats.t(df) if noise == "t" else stats.norm()


def noise_mean_abs(noise="t", df=1.1):
    """E|eps| of the standard noise (before the shift to a zero tau-quantile)."""
    _check_noise(noise, df)
    if noise == "gaussian":
        return float(np.sqrt(2 / np.pi))
    # E|T_nu| = 2 sqrt(nu) Gamma((nu+1)/2) / (sqrt(pi) (nu-1) Gamma(nu/2))
    return float(2 * np.sqrt(df) * np.exp(special.gammaln((df + 1) / 2) - special.gammaln(df / 2))
                 / (np.sqrt(np.pi) * (df - 1)))


def noise_sparsity(tau=0.5, noise="t", df=1.1, noise_scale=1.0):
    """1 / f(Q(tau)) of the noise, Koenker's sparsity (the paper's b0)."""
    _check_noise(noise, df)
    dist = _dist(noise, df)
    return float(noise_scale / dist.pdf(dist.ppf(tau)))


def make_linear_stream(n_samples, n_features, *, tau=0.5, noise="t", df=1.1, snr=20.0,
                       noise_scale=1.0, beta=None, random_state=None):
    """Draw (X, y, beta) from the paper's simulation model.

    Parameters
    ----------
    n_samples, n_features : int
    tau : float in (0, 1)
        The noise is shifted so that its tau-quantile is 0.
    noise : {"t", "gaussian"}
        Student t with ``df`` degrees of freedom (the paper uses 1.1) or Gaussian.
    snr : float
        ||beta*|| / E|eps| (the paper's signal-to-noise ratio); ignored if
        ``beta`` is given.
    noise_scale : float
        Scale of the noise.
    beta : array of shape (n_features,), optional
        The true coefficients; by default a uniformly random direction.
    random_state : None, int or numpy Generator

    Returns
    -------
    X : (n_samples, n_features) float64, rows N(0, I)
    y : (n_samples,) float64
    beta : (n_features,) the true tau-quantile coefficients

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(1000, 5, tau=0.25, random_state=0)
    >>> X.shape, y.shape, round(float(np.linalg.norm(beta)), 2)
    ((1000, 5), (1000,), 142.58)
    """
    check_scalar(n_samples, "n_samples", kind=numbers.Integral, low=0)
    check_scalar(n_features, "n_features", kind=numbers.Integral, low=1)
    check_scalar(tau, "tau", low=0, high=1, low_open=True, high_open=True)
    check_scalar(snr, "snr", low=0)
    check_scalar(noise_scale, "noise_scale", low=0, low_open=True)
    _check_noise(noise, df)
    rng = check_random_state(random_state)
    if beta is None:
        direction = rng.standard_normal(n_features)
        direction /= np.linalg.norm(direction)
        beta = snr * noise_mean_abs(noise, df) * noise_scale * direction
    else:
        beta = np.asarray(beta, dtype=np.float64).copy()
        if beta.shape != (n_features,):
            raise ValueError(f"beta must have shape ({n_features},), got {beta.shape}")
    X = rng.standard_normal((n_samples, n_features))
    if noise == "t":
        eps = rng.standard_t(df, n_samples)
    else:
        eps = rng.standard_normal(n_samples)
    eps -= _dist(noise, df).ppf(tau)
    y = X @ beta + noise_scale * eps
    return X, y, beta
