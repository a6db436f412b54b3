"""Synthetic streams for the paper experiments.

``make_spiked_stream`` and ``make_ftl_adversary`` are online PCA streams
(Kotlowski & Warmuth): a stochastic spiked model, and a sequence on which
Follow the Leader gains nothing.

``make_linear_stream`` draws the linear quantile model of Shen, Xia & Zhou
(2025): y = x' beta* + xi with x ~ N(0, I_d) and noise xi whose tau-quantile is
zero, so that beta* is the tau-th conditional quantile coefficient.
"""
from __future__ import annotations

import numbers

import numpy as np
from numpy.typing import ArrayLike
from scipy import special, stats

from ._validation import check_random_state, check_scalar

# what random_state= takes: None, a seed, a numpy Generator (or BitGenerator,
# SeedSequence, as numpy.random.default_rng does)
_Seed = int | np.random.Generator | np.random.BitGenerator | np.random.SeedSequence | None

__all__ = ["make_linear_stream", "noise_mean_abs", "noise_sparsity", "make_spiked_stream",
           "make_ftl_adversary", "make_dense_stream"]

_NOISES = ("t", "gaussian")


def _check_noise(noise, df):
    if noise not in _NOISES:
        raise ValueError(f"noise must be one of {_NOISES}, got {noise!r}")
    if noise == "t":
        check_scalar(df, "df", low=1, low_open=True)


def _dist(noise, df):
    return stats.t(df) if noise == "t" else stats.norm()


def noise_mean_abs(noise: str = "t", df: float = 1.1) -> float:
    """E|eps| of the standard noise (before the shift to a zero tau-quantile)."""
    _check_noise(noise, df)
    if noise == "gaussian":
        return float(np.sqrt(2 / np.pi))
    # E|T_nu| = 2 sqrt(nu) Gamma((nu+1)/2) / (sqrt(pi) (nu-1) Gamma(nu/2))
    return float(2 * np.sqrt(df) * np.exp(special.gammaln((df + 1) / 2) - special.gammaln(df / 2))
                 / (np.sqrt(np.pi) * (df - 1)))


def noise_sparsity(tau: float = 0.5, noise: str = "t", df: float = 1.1,
                   noise_scale: float = 1.0) -> float:
    """1 / f(Q(tau)) of the noise, Koenker's sparsity (the paper's b0)."""
    _check_noise(noise, df)
    dist = _dist(noise, df)
    return float(noise_scale / dist.pdf(dist.ppf(tau)))


def make_linear_stream(n_samples: int, n_features: int, *, tau: float = 0.5, noise: str = "t",
                       df: float = 1.1, snr: float = 20.0, noise_scale: float = 1.0,
                       beta: ArrayLike | None = None, random_state: _Seed = None
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    true_beta: np.ndarray
    if beta is None:
        direction = rng.standard_normal(n_features)
        direction /= np.linalg.norm(direction)
        true_beta = snr * noise_mean_abs(noise, df) * noise_scale * direction
    else:
        true_beta = np.asarray(beta, dtype=np.float64).copy()
        if true_beta.shape != (n_features,):
            raise ValueError(f"beta must have shape ({n_features},), got {true_beta.shape}")
    X = rng.standard_normal((n_samples, n_features))
    if noise == "t":
        eps = rng.standard_t(df, n_samples)
    else:
        eps = rng.standard_normal(n_samples)
    eps -= _dist(noise, df).ppf(tau)
    y = X @ true_beta + noise_scale * eps
    return X, y, true_beta


def make_spiked_stream(n_trials: int, n_features: int, *, n_spikes: int = 10,
                       strength: float = 5.0, normalize: bool = True,
                       random_state: _Seed = None) -> np.ndarray:
    """Rows x_t = U (sqrt(lambda) * z_t) + e_t, with U a random orthonormal
    n x n_spikes basis, spike variances lambda linearly from 2 * strength down to
    strength, z_t ~ N(0, I) and isotropic noise e_t ~ N(0, I_n); by default each
    row is scaled to unit norm (the paper's ||x|| <= 1).

    Examples
    --------
    >>> from streamfit.simulate import make_spiked_stream
    >>> X = make_spiked_stream(100, 20, n_spikes=2, random_state=0)
    >>> X.shape, round(float((X ** 2).sum(axis=1).max()), 12)
    ((100, 20), 1.0)
    """
    check_scalar(n_trials, "n_trials", kind=numbers.Integral, low=0)
    check_scalar(n_features, "n_features", kind=numbers.Integral, low=1)
    check_scalar(n_spikes, "n_spikes", kind=numbers.Integral, low=0, high=n_features)
    check_scalar(strength, "strength", low=0)
    rng = check_random_state(random_state)
    U = np.linalg.qr(rng.standard_normal((n_features, max(n_spikes, 1))))[0][:, :n_spikes]
    lam = strength * np.linspace(2.0, 1.0, n_spikes) if n_spikes > 1 else \
        np.full(n_spikes, float(strength))
    X = rng.standard_normal((n_trials, n_features))
    if n_spikes:
        X += (rng.standard_normal((n_trials, n_spikes)) * np.sqrt(lam)) @ U.T
    if normalize:
        X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), np.finfo(float).tiny)
    return X


def make_ftl_adversary(n_trials: int, n_features: int, n_components: int = 1) -> np.ndarray:
    """A vector sequence on which Follow the Leader gains (almost) nothing.

    A preamble of n - 1 trials x = sqrt(i / (2n)) e_i (i = 1..n-1) gives the
    coordinates the distinct offsets o_i = i / (2n) in [0, 1/2); then the unit
    vectors e_0, e_1, ..., e_{n-1} repeat cyclically. Before e_j is shown, its
    count m + o_j is the unique minimum of the diagonal cumulative matrix (the
    ones already shown this cycle have m + 1 + o_i, the later ones a larger
    offset), so the leader's top-k (k < n) never contains e_j: after the
    preamble FTL gains 0 while the best rank-k projection gains about k T / n,
    regret linear in T. Rows have norm <= 1. The sequence is the same for
    every k < n (``n_components`` is only checked against n): the best rank-k
    projection gains about k T / n of it.

    Examples
    --------
    >>> from streamfit.simulate import make_ftl_adversary
    >>> make_ftl_adversary(6, 3)
    array([[0.        , 0.40824829, 0.        ],
           [0.        , 0.        , 0.57735027],
           [1.        , 0.        , 0.        ],
           [0.        , 1.        , 0.        ],
           [0.        , 0.        , 1.        ],
           [1.        , 0.        , 0.        ]])
    """
    check_scalar(n_trials, "n_trials", kind=numbers.Integral, low=0)
    check_scalar(n_features, "n_features", kind=numbers.Integral, low=2)
    check_scalar(n_components, "n_components", kind=numbers.Integral, low=1,
                 high=n_features - 1)
    n = int(n_features)
    X = np.zeros((int(n_trials), n))
    pre = min(n - 1, int(n_trials))
    idx = np.arange(1, pre + 1)
    X[np.arange(pre), idx] = np.sqrt(idx / (2.0 * n))
    rest = np.arange(int(n_trials) - pre)
    X[pre + rest, rest % n] = 1.0
    return X


def make_dense_stream(n_trials: int, n_features: int, *, rank: int = 5, n_spikes: int = 3,
                      strength: float = 5.0, random_state: _Seed = None) -> np.ndarray:
    """Dense PSD instances: the second-moment matrix of a mini-batch of ``rank``
    rows of :func:`make_spiked_stream`, divided by ``rank`` (eigenvalues <= 1).

    Examples
    --------
    >>> from streamfit.simulate import make_dense_stream
    >>> Xs = make_dense_stream(4, 10, random_state=0)
    >>> Xs.shape, bool(np.linalg.eigvalsh(Xs).max() <= 1 + 1e-12)
    ((4, 10, 10), True)
    """
    check_scalar(rank, "rank", kind=numbers.Integral, low=1)
    X = make_spiked_stream(int(n_trials) * int(rank), n_features, n_spikes=n_spikes,
                           strength=strength, random_state=random_state)
    B = X.reshape(int(n_trials), int(rank), int(n_features))
    Xs = np.einsum("tri,trj->tij", B, B) / rank
    return (Xs + Xs.transpose(0, 2, 1)) / 2
