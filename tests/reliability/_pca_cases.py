"""What the online PCA reliability suites share: the estimators in their main
configurations, degenerate streams (eigenvalue ties, repeated rows, rank one
with zero rows, PSD projections), and bit-for-bit state comparisons.
Imported relatively (pytest's importlib mode puts no test folder
on sys.path)."""
import os
import sys

import numpy as np

from streamfit import FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA  # noqa: F401
from streamfit.pca import regret_bound

try:
    from .._registry import spec
except ImportError:
    # the interrupt tests' child processes import this file as a top-level
    # module (tests/reliability on sys.path): the registry is in its parent
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _registry import spec


# name -> (class, keyword arguments), from the registry (tests/_registry.py);
# FPL once per noise process
ALGOS = {"fpl": spec("fpl-fixed"), "fpl-random_walk": spec("fpl-random_walk"),
         "fpl-independent": spec("fpl-independent"), "ftl": spec("ftl"),
         "meg": spec("meg-auto"), "gd": spec("gd-auto")}
FOUR = ("fpl", "ftl", "meg", "gd")
# Follow the Leader with dropout, in the suites that take it (its own tests are
# in tests/pca/test_dropout.py)
DROPOUT = {"dropout": spec("dropout-lazy"), "dropout-fresh": spec("dropout-fresh")}


def make(algo, k=2, **kw):
    cls, base = ALGOS[algo] if algo in ALGOS else DROPOUT[algo]
    return cls(k, **{**base, **kw})


# -- streams ------------------------------------------------------------------------------

def rotation(n, seed=0):
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))[0]


def cyclic(T, n):
    """x_t = e_{t mod n}: the cumulative matrix is diagonal with ties."""
    return np.eye(n)[np.arange(T) % n]


def rotated_cyclic(T, n, seed=0):
    """x_t = Q e_{t mod n}: the same spectrum, in a rotated basis."""
    return cyclic(T, n) @ rotation(n, seed).T


def repeated_rows(T, n, seed=0):
    """The same unit row over and over: one eigenvalue T, n - 1 zeros."""
    u = np.random.default_rng(seed).standard_normal(n)
    return np.tile(u / np.linalg.norm(u), (T, 1))


def rank_one(T, n, seed=0):
    """c_t u, the scales c_t including 0 (zero rows) and sign flips."""
    u = np.random.default_rng(seed).standard_normal(n)
    c = np.array([1.0, -2.0, 0.0, 0.5, 3.0, -1.0, 0.0])[np.arange(T) % 7]
    return c[:, None] * (u / np.linalg.norm(u))


def dense_projections(T, n, seed=None, m=2):
    """X_t = projection onto span(e_t, ..., e_{t+m-1}) (indices mod n), rotated
    by a fixed Q when seed is given: PSD, eigenvalues 0 and 1 only."""
    m = min(m, n)
    Q = np.eye(n) if seed is None else rotation(n, seed)
    Xs = np.zeros((T, n, n))
    for t in range(T):
        cols = Q[:, [(t + j) % n for j in range(m)]]
        Xs[t] = cols @ cols.T
    return Xs


# -- states ------------------------------------------------------------------------------

def learnt(est):
    """The whole learnt state: the estimator's state object as its plain
    dict (every array, counter and setting, its bit generators' states),
    arrays as bytes; None before a fit. Equal means bit-identical."""
    state = est.__dict__.get("_state")
    if state is None:
        return {}
    return {k: (v.dtype.str, v.shape, v.tobytes()) if isinstance(v, np.ndarray) else v
            for k, v in state.to_state().items()}


def assert_same_state(a, b, learnt=learnt):
    """Bit-identical learnt states; ``learnt`` takes the snapshot (the
    quantile suites pass theirs)."""
    la, lb = learnt(a), learnt(b)
    assert la.keys() == lb.keys()
    for key in la:
        assert la[key] == lb[key], key


def assert_sane(est, X=None):
    """Finite orthonormal components, gains within [0, the stream's energy],
    regret within the algorithm's bound."""
    V = est.components_
    k = est.n_components_
    assert V.shape == (k, est.n_features_in_) and np.isfinite(V).all()
    np.testing.assert_allclose(V @ V.T, np.eye(k), rtol=0, atol=1e-10)
    C = est.cumulative_matrix()
    energy = float(np.trace(C))
    gain, best, regret = est.cumulative_gain_, est.best_gain_, est.regret_
    assert np.isfinite([gain, best, regret]).all()
    tiny = 1e-9 * max(energy, 1.0)
    assert -tiny <= gain <= energy + tiny
    assert -tiny <= best <= energy + tiny
    assert regret <= bound(est) + tiny, (regret, bound(est))


def bound(est):
    """The regret bound each algorithm is held to here: MEG/GD their own
    (expected gains, deterministic); FPL the paper's at its noise scale and the
    largest instance seen; FTL, which has no sublinear bound, the trivial one
    (regret <= the best gain)."""
    T = est.n_trials_
    if T == 0:
        return 0.0
    if isinstance(est, (MatrixEGPCA, MatrixGDPCA)):
        return est.regret_bound()
    if isinstance(est, FollowTheLeaderPCA) or est.sigma_ == 0.0:
        return est.best_gain_
    scale = est._state.scale_
    if est.instances_ == "vector":
        return regret_bound(T, est.n_features_in_, est.n_components_, est.sigma_, scale=scale)
    return regret_bound(T, est.n_features_in_, est.n_components_, est.sigma_,
                        instances="dense", scale=scale, max_trace_sq=est._state.max_frob_ ** 2)
