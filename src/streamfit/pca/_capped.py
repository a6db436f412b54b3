"""Online PCA over the capped simplex: Matrix Exponentiated Gradient and matrix
Gradient Descent, the comparators of "PCA with Gaussian perturbations".

Both keep a parameter W_t in the convex hull of rank-k projections
{W symmetric, 0 <= W <= I, tr W = k}, gain tr(W_t X_t) in expectation, and play
a rank-k projection P_t sampled from W_t (E[P_t] = W_t). Every update needs a
full eigendecomposition: O(n^3) per trial, against FPL's O(k n^2).

Python validates and owns the state; ``streamfit._kernels._capped`` runs the
trial loop (gains, update, LAPACK dsyevd, projection, sampling) without the GIL.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .._kernels import _capped as _k
from .._validation import (check_fitted, check_random_state, check_scalar, check_seed,
                           check_vector)
from ._common import _OnlinePCA, _symmetric

__all__ = ["MatrixEGPCA", "MatrixGDPCA", "project_capped_simplex", "mixture_decomposition",
           "systematic_sample"]

_STATE = {name: i for i, name in enumerate(_k.STATE_FIELDS)}
_KINDS = {"vector": _k.INSTANCE_VECTOR, "dense": _k.INSTANCE_DENSE}


# --- the capped simplex: projections, decomposition, sampling -----------------

def _check_k(k, n, name="k"):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {k!r}")
    if not 1 <= k <= n:
        raise ValueError(f"{name} must be in [1, {n}] (the length of the vector), got {k}")
    return int(k)


def project_capped_simplex(v, k, *, divergence="euclidean"):
    """Project v onto the capped simplex {w : 0 <= w_i <= 1, sum w = k}.

    ``divergence="euclidean"`` (GD): the Euclidean projection
    w_i = clip(v_i - theta, 0, 1), with theta solved exactly from sum w = k by
    walking the sorted breakpoints {v_i, v_i - 1} of the piecewise linear
    sum (O(n log n)).

    ``divergence="entropy"`` (MEG): the relative-entropy projection of v >= 0
    (Warmuth & Kuzmin's capping), w_i = min(1, c v_i) with sum w = k: the
    largest entries are capped at 1 and the rest rescaled. v needs at least k
    positive entries.

    Applied to the eigenvalues of a symmetric matrix, these are the matrix
    projections (both divergences are unitarily invariant).

    Examples
    --------
    >>> from streamfit.pca import project_capped_simplex
    >>> project_capped_simplex([0.2, 1.9, 0.5, 0.1], 2).round(3).tolist()
    [0.267, 1.0, 0.567, 0.167]
    >>> project_capped_simplex([1.0, 8.0, 2.0, 1.0], 2, divergence="entropy").tolist()
    [0.25, 1.0, 0.5, 0.25]
    """
    v = check_vector(v, None, "v")
    k = _check_k(k, v.shape[0])
    order = np.argsort(v, kind="stable")
    sorted_v = np.ascontiguousarray(v[order])
    out = np.empty_like(sorted_v)
    if divergence == "euclidean":
        _k.project_euclidean(sorted_v, k, out)
    elif divergence == "entropy":
        if sorted_v[0] < 0:
            raise ValueError("v must be non-negative for divergence='entropy'")
        if np.count_nonzero(sorted_v) < k:
            raise ValueError(f"v must have at least k = {k} positive entries for "
                             f"divergence='entropy', got {np.count_nonzero(sorted_v)}")
        with np.errstate(divide="ignore"):
            _k.project_entropy(np.log(sorted_v), k, out)
    else:
        raise ValueError(f"divergence must be 'euclidean' or 'entropy', got {divergence!r}")
    w = np.empty_like(out)
    w[order] = out
    return w


def _check_capped(w, k, name="w"):
    w = check_vector(w, None, name)
    k = _check_k(k, w.shape[0])
    tol = 1e-9 * max(k, 1)
    if w.min() < -tol or w.max() > 1 + tol:
        raise ValueError(f"{name} must lie in [0, 1], got entries in "
                         f"[{w.min():.3g}, {w.max():.3g}]")
    if abs(w.sum() - k) > tol:
        raise ValueError(f"{name} must sum to k = {k}, got {w.sum():.12g}")
    return np.clip(w, 0.0, 1.0), k


def mixture_decomposition(w, k):
    """Warmuth & Kuzmin's decomposition of a capped vector into k-subsets.

    For 0 <= w_i <= 1 with sum w = k, returns ``weights`` (m,) summing to 1 and
    ``subsets`` (m, k) of indices with sum_j weights[j] 1[subsets[j]] = w, with
    m <= n + 1 corners, in O(n^2). Each round takes the entries at the mean
    sum(w)/k, fills up to k with the largest others, and removes as much weight
    as keeps every entry below the new mean. Applied to the eigenvalues of W,
    W = sum_j weights[j] P_j with P_j the projection onto eigenvectors
    ``subsets[j]``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.pca import mixture_decomposition
    >>> w = np.array([0.9, 0.6, 0.3, 0.2])
    >>> weights, subsets = mixture_decomposition(w, 2)
    >>> bool(np.isclose(weights.sum(), 1.0))
    True
    >>> cover = np.zeros(4)
    >>> for p, s in zip(weights, subsets):
    ...     cover[s] += p
    >>> bool(np.allclose(cover, w))
    True
    """
    w, k = _check_capped(w, k)
    order = np.ascontiguousarray(np.argsort(-w, kind="stable"), dtype=np.intp)
    n = w.shape[0]
    weights = np.empty(n + 2)
    subsets = np.empty((n + 2, k), dtype=np.intc)
    m = _k.mixture(w, order, k, weights, subsets)
    subsets = subsets[:m].astype(np.intp)
    if (subsets < 0).any():     # pragma: no cover - w's mass is not k after all
        raise ValueError("w could not be decomposed: its entries do not sum to k")
    return weights[:m].copy(), subsets


def systematic_sample(w, k, *, size=None, random_state=None):
    """Sample k distinct indices with P(i is taken) = w_i, for 0 <= w_i <= 1 with
    sum w = k, by systematic sampling: one uniform u, then the points
    u, u + 1, ..., u + k - 1 fall in the intervals of the cumulative sums of w.
    O(n) per sample. Returns an int array (k,) or (size, k), indices ascending.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.pca import systematic_sample
    >>> w = np.array([0.9, 0.6, 0.3, 0.2])
    >>> draws = systematic_sample(w, 2, size=20000, random_state=0)
    >>> draws.shape
    (20000, 2)
    >>> freq = np.bincount(draws.ravel(), minlength=4) / 20000
    >>> bool(np.abs(freq - w).max() < 0.02)
    True
    """
    w, k = _check_capped(w, k)
    rng = check_random_state(random_state)
    if size is not None:
        check_scalar(size, "size", kind=numbers.Integral, low=0)
    u = np.ascontiguousarray(rng.random(1 if size is None else int(size)))
    out = np.empty((u.shape[0], k), dtype=np.intc)
    _k.systematic(w, k, u, out)
    out = out.astype(np.intp)
    return out[0] if size is None else out


# --- the estimators -------------------------------------------------------------

class _CappedSimplexPCA(_OnlinePCA):
    """State handling shared by MEG and GD."""

    _algo = None
    _STATE = _STATE
    _STATE_NAMES = ("state_", "parameter_", "eigenvectors_", "eigenvalues_", "cumulative_",
                    "dense_parameter_", "n_features_in_", "n_components_", "instances_",
                    "_rng", "_sample_rng", "_fitted_eta", "_regret_cache")
    # n x n float64 state, several copies: 2^15 is already 8 GB each
    _MAX_FEATURES = 1 << 15

    def __init__(self, n_components, *, eta="auto", random_state=None):
        self.n_components = n_components
        self.eta = eta
        self.random_state = random_state

    # -- parameters ------------------------------------------------------------------
    def _params(self, n, kind):
        k = self._check_n_components(n)
        if n > self._MAX_FEATURES:
            raise ValueError(f"n_features = {n} is too large for {type(self).__name__}: it "
                             f"keeps several n x n float64 matrices (at most "
                             f"{self._MAX_FEATURES} features)")
        if isinstance(self.eta, str):
            if self.eta != "auto":
                raise ValueError(f"eta must be 'auto' or a positive float, got {self.eta!r}")
            auto, value = 1.0, 0.0
        else:
            check_scalar(self.eta, "eta", low=0, low_open=True)
            if not np.isfinite(self.eta):
                raise ValueError(f"eta must be finite, got {self.eta!r}")
            auto, value = 0.0, float(self.eta)
        check_seed(self.random_state)
        return np.array([self._algo, _KINDS[kind], auto, value, k], dtype=np.float64)

    def _prepare(self, n, kind):
        params = self._params(n, kind)
        if not self._check_continues(n, kind, int(params[4])):
            return params
        if self.eta != self._fitted_eta:
            # the regret bound, and MEG's epochs, follow one rate policy per run
            raise ValueError(f"eta changed from {self._fitted_eta!r} to {self.eta!r} since the "
                             f"first call; refit a new estimator")
        return params

    # -- state -------------------------------------------------------------------------
    def _initialize(self, n, kind, params):
        rng = check_random_state(self.random_state)
        state = np.zeros(len(_k.STATE_FIELDS))
        M, U = np.zeros((n, n)), np.zeros((n, n))
        w, C = np.zeros(n), np.zeros((n, n))
        # dense MEG keeps W itself beside log W, for the gain tr(W_t X_t)
        Wd = np.zeros((n, n)) if (kind == "dense" and self._algo == _k.ALGO_MEG) else np.zeros((0, 0))
        _k.reset_state(params, M, U, w, Wd)
        state[_STATE["u"]] = rng.random()
        self._rng = rng
        # sample_projection draws from its own stream, so that auditing W
        # never changes the projections the trials play
        self._sample_rng = np.random.default_rng(int(rng.integers(2 ** 63)))
        self._fitted_eta = self.eta
        self.n_features_in_ = n
        self.n_components_ = int(params[4])
        self.instances_ = kind
        self.state_ = state
        self.parameter_ = M
        self.eigenvectors_ = U
        self.eigenvalues_ = w
        self.cumulative_ = C
        self.dense_parameter_ = Wd

    def _run(self, kind, args, params):
        n = args[0].shape[-1]
        fresh = not hasattr(self, "state_")
        top = float(np.max(args[1], initial=0.0))
        if not params[2] and top > 0 and params[3] > 1e300 / top:
            raise ValueError(f"eta = {self.eta!r} is too large for this data: eta times the "
                             f"instances' scale overflows float64")
        if fresh:
            self._initialize(n, kind, params)
        T = args[0].shape[0]
        if T == 0:
            return self
        if kind == "vector":
            # ||x x^T||_F = ||x||^2: squaring it could under- or overflow
            X, sqnorm = args
            scale = frob = sqnorm
        else:
            Xs, scale, trsq = args
            X = Xs.reshape(T, n * n)
            frob = np.sqrt(trsq)
        # a trial costs O(n^3); copying the O(n^2) state per call is noise, and
        # a failed call then leaves the estimator exactly as it was. The copies
        # are taken under the generator's lock, so concurrent calls serialise.
        rng = self._rng
        with rng.bit_generator.lock:
            new = [a.copy() for a in (self.state_, self.parameter_, self.eigenvectors_,
                                      self.eigenvalues_, self.cumulative_,
                                      self.dense_parameter_)]
            saved = rng.bit_generator.state
            code = _k.run(X, np.ascontiguousarray(scale), np.ascontiguousarray(frob), new[0],
                          params, *new[1:], rng.bit_generator.capsule)
            if code != _k.OK:
                rng.bit_generator.state = saved
            else:
                (self.state_, self.parameter_, self.eigenvectors_, self.eigenvalues_,
                 self.cumulative_, self.dense_parameter_) = new
        if code != _k.OK and fresh:
            self._forget()          # a first call that failed leaves no fit behind
        if code == _k.ERR_NOMEM:
            raise MemoryError("the MEG/GD kernel could not allocate its work space; the "
                              "estimator was left as it was before this call")
        if code != _k.OK:
            raise RuntimeError(f"LAPACK dsyevd failed (code {code}); the estimator was left "
                               f"as it was before this call")
        return self

    # -- attributes --------------------------------------------------------------------
    def _sample(self, u):
        w = self.eigenvalues_
        out = np.empty((1, self.n_components_), dtype=np.intc)
        _k.systematic(w, self.n_components_, np.array([u]), out)
        # largest weight first
        idx = out[0][np.argsort(-w[out[0]], kind="stable")]
        return self.eigenvectors_[idx]

    @property
    def components_(self):
        """(k, n) orthonormal rows: the projection the next trial plays, sampled
        from W (systematic sampling with the trial's own uniform, so it does
        not depend on how the stream was split into calls)."""
        check_fitted(self, "state_")
        return self._sample(self._scalar("u"))

    @property
    def parameter_eigenvalues_(self):
        """Eigenvalues of W, ascending: in [0, 1], summing to k."""
        check_fitted(self, "state_")
        return self.eigenvalues_.copy()

    def parameter_matrix(self):
        """W, the mixture of rank-k projections the next trial plays from (n x n)."""
        check_fitted(self, "state_")
        U, w = self.eigenvectors_, self.eigenvalues_
        return (U.T * w) @ U

    @property
    def realized_gain_(self):
        """Sum over trials of tr(P_t X_t) for the projections P_t actually sampled
        (cumulative_gain_ is its expectation, sum tr(W_t X_t))."""
        return self._scalar("realized")

    @property
    def eta_(self):
        """The learning rate of the last update (0 before any)."""
        return self._scalar("eta")

    def cumulative_matrix(self):
        """sum_t X_t (full, symmetric)."""
        check_fitted(self, "state_")
        return _symmetric(self.cumulative_)

    def sample_projection(self):
        """A rank-k projection P (n x n) drawn from W: E[P] = W. Draws from a
        generator of its own (seeded from random_state), so it never changes
        the projections the trials play.

        The draw is systematic sampling on W's eigenvalues (O(n), exact
        inclusion probabilities); :meth:`mixture_decomposition` gives the
        explicit mixture instead."""
        check_fitted(self, "state_")
        V = self._sample(self._sample_rng.random())
        return V.T @ V

    def mixture_decomposition(self):
        """W as an explicit convex combination of rank-k projections
        (Warmuth & Kuzmin): ``weights`` (m,) summing to 1 and ``bases``
        (m, k, n) of orthonormal rows, with
        W = sum_j weights[j] bases[j].T @ bases[j], m <= n + 1."""
        check_fitted(self, "state_")
        weights, subsets = mixture_decomposition(self.eigenvalues_, self.n_components_)
        return weights, self.eigenvectors_[subsets]

    def _bound_args(self, n_trials):
        check_fitted(self, "state_")
        if n_trials is None:
            return self.n_trials_
        if isinstance(n_trials, bool) or not isinstance(n_trials, numbers.Integral):
            raise TypeError(f"n_trials must be an integer, got {n_trials!r}")
        if n_trials < 0:
            raise ValueError(f"n_trials must be >= 0, got {n_trials}")
        return int(n_trials)

    def _bound_scale(self):
        check_fitted(self, "state_")
        L = self._scalar("scale")
        G = self._scalar("max_frob")
        B = 1.0 if self.instances_ == "vector" else float(self.n_components_)
        return L, G, B


class MatrixEGPCA(_CappedSimplexPCA):
    """Online PCA by Matrix Exponentiated Gradient with capping (Tsuda, Raetsch &
    Warmuth 2005; Warmuth & Kuzmin 2008), gain form.

    W_{t+1} = cap_k(exp(log W_t + eta X_t)): the exponentiated update, then the
    relative-entropy projection onto the capped simplex, which in W's eigenbasis
    caps the largest eigenvalues at 1 and rescales the rest to trace k. W_1 =
    (k/n) I. The kernel keeps log W and corrects it by a rank-(m < k) update
    after each eigendecomposition (LAPACK dsyevd, O(n^3) per trial). Trials play
    a projection sampled from W_t; ``cumulative_gain_`` is the expected gain
    sum tr(W_t X_t), ``realized_gain_`` the sampled one.

    Regret (relative entropy to W_1 is at most k ln(n/k); Golden-Thompson and
    e^x <= 1 + x + x^2 on [0, 1]): R_T <= k ln(n/k) / eta + eta B L^2 T when
    eta L <= 1, where L bounds the instances' eigenvalues (||x||^2 for vector
    instances) and B = 1 for vector instances (tr(W x x^T x x^T) <= L^2), B = k
    for dense ones. Tuned for T: eta = sqrt(k ln(n/k) / (B T)) / L and
    R_T <= 2 L sqrt(B k ln(n/k) T).

    Parameters
    ----------
    n_components : int
        k, the rank of the projections played.
    eta : "auto" or float, default "auto"
        A float is a fixed learning rate. "auto" needs no horizon: the doubling
        trick, with epochs [2^j, 2^(j+1)) that each start afresh at W = (k/n) I
        with eta = tilde_j / Lambda, tilde_j = min(1/2, sqrt(k ln(n/k) / (B 2^j))),
        Lambda the largest scale seen when the epoch started (or at its first
        non-zero instance). The rate stays fixed within a run: an instance of
        scale above 2 Lambda starts the epoch afresh at its scale instead (a
        rate that shrank with a growing scale would lose the guarantee, and a
        four-line stream shows it). Regret at most
        2 sum_j L (k ln(n/k) / tilde_j + tilde_j B len_j) + 2 B L, about 7 times
        the bound tuned for T and L (:meth:`regret_bound`). (A rate decaying
        like 1/sqrt(t) keeps no guarantee for mirror descent with an unbounded
        divergence either, which is why MEG restarts; GD does not.)
    random_state : None, int or numpy Generator
        Seeds the sampling of the played projections.

    Attributes
    ----------
    components_ : (k, n) array, the projection sampled for the next trial
    cumulative_gain_ : float, expected gain sum_t tr(W_t X_t)
    realized_gain_ : float, gain of the sampled projections
    best_gain_, regret_ : float, as for :class:`PerturbedLeaderPCA`
    parameter_eigenvalues_ : (n,) array, W's eigenvalues ascending
    n_trials_ : int
    eta_ : float, the last learning rate
    n_restarts_ : int, runs started afresh (doubling-trick epochs, scale jumps)
    state_, parameter_, eigenvectors_, eigenvalues_, cumulative_, dense_parameter_ :
        the kernel's state, pickled with the estimator (parameter_ holds log W
        for MEG and W for GD, lower triangle only); read W through
        parameter_matrix() and parameter_eigenvalues_

    Examples
    --------
    >>> from streamfit import MatrixEGPCA
    >>> from streamfit.simulate import make_spiked_stream
    >>> X = make_spiked_stream(400, 30, n_spikes=2, random_state=0)
    >>> meg = MatrixEGPCA(2, random_state=0).partial_fit(X)
    >>> meg.components_.shape, meg.n_trials_
    ((2, 30), 400)
    >>> w = meg.parameter_eigenvalues_
    >>> bool(w.min() >= 0 and w.max() <= 1 and abs(w.sum() - 2) < 1e-10)
    True
    >>> bool(0 < meg.regret_ < meg.regret_bound())
    True
    """

    _algo = _k.ALGO_MEG

    @property
    def n_restarts_(self):
        """Runs started afresh with eta="auto", counting the one the next trial
        begins: the doubling trick's epochs (after T trials, the powers of two
        in [2, T + 1]) plus the restarts of an epoch when the scale more than
        doubled."""
        return int(self._scalar("restarts") + self._scalar("scale_restarts"))

    def regret_bound(self, n_trials=None):
        """The regret bound for this estimator's eta after ``n_trials`` (default:
        the trials so far), at the largest scale L seen so far: with a fixed
        eta, k ln(n/k) / eta + eta B L^2 T (a theorem while eta L <= 1.79,
        where e^x <= 1 + x + x^2; inf beyond); with "auto", the doubling
        trick's 2 sum_j L (k ln(n/k) / tilde_j + tilde_j B len_j) + 2 B L."""
        T = self._bound_args(n_trials)
        L, _, B = self._bound_scale()
        n, k = self.n_features_in_, self.n_components_
        if T == 0 or k == n or L == 0:
            return 0.0
        D = k * np.log(n / k)
        if not isinstance(self._fitted_eta, str):
            eta = float(self._fitted_eta) * L          # in units of the scale
            return float(L * (D / eta + eta * B * T)) if eta <= 1.79 else float("inf")
        total, j = 2.0 * B * L, 0
        while 2 ** j <= T:
            length = min(2 ** j, T - 2 ** j + 1)
            tilde = min(0.5, np.sqrt(D / (B * 2 ** j)))
            total += 2.0 * L * (D / tilde + tilde * B * length)
            j += 1
        return float(total)


class MatrixGDPCA(_CappedSimplexPCA):
    """Online PCA by matrix Gradient Descent over the capped simplex (Arora,
    Cotter & Srebro 2013; Nie, Kotlowski & Warmuth 2016).

    W_{t+1} = Pi(W_t + eta_t X_t): a gradient step, then the Frobenius
    projection onto the capped simplex, which in the eigenbasis of
    W_t + eta_t X_t is w_i = clip(mu_i - theta, 0, 1) with theta solved exactly
    from sum w = k. W_1 = (k/n) I. Each trial eigendecomposes (LAPACK dsyevd,
    O(n^3)) and rebuilds W from whichever is smaller: its support or the
    clipped directions. Trials play a projection sampled from W_t;
    ``cumulative_gain_`` is the expected gain, ``realized_gain_`` the sampled
    one.

    Regret (online gradient descent; the capped simplex has Frobenius diameter
    D = sqrt(2 min(k, n - k)), gradients ||X_t||_F <= G): with a fixed eta,
    R_T <= D^2 / (2 eta) + eta G^2 T / 2, tuned R_T <= D G sqrt(T) -- for unit
    vectors sqrt(2 k T), the optimal order for vector instances.

    Parameters
    ----------
    n_components : int
        k, the rank of the projections played.
    eta : "auto" or float, default "auto"
        A float is a fixed learning rate. "auto" needs no horizon: the decaying
        eta_t = D / (G_t sqrt(t)), G_t the largest ||X_s||_F so far, with
        R_T <= D G sqrt(T) / 2 + D G sum_t 1 / (2 sqrt(t)) <= 1.5 D G sqrt(T)
        (the diameter is bounded, so no restarts are needed).
    random_state : None, int or numpy Generator
        Seeds the sampling of the played projections.

    Attributes
    ----------
    As for :class:`MatrixEGPCA` (without ``n_restarts_``).

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit import MatrixGDPCA
    >>> from streamfit.simulate import make_ftl_adversary
    >>> X = make_ftl_adversary(2000, 10, n_components=2)
    >>> gd = MatrixGDPCA(2, random_state=0).partial_fit(X)
    >>> bool(gd.regret_ < gd.regret_bound())
    True
    >>> P = gd.sample_projection()                   # a rank-2 projection drawn from W
    >>> bool(np.allclose(P @ P, P) and round(np.trace(P)) == 2)
    True
    """

    _algo = _k.ALGO_GD

    def regret_bound(self, n_trials=None):
        """The regret bound for this estimator's eta after ``n_trials`` (default:
        the trials so far), at the largest ||X_t||_F = G seen so far: with a
        fixed eta, D^2 / (2 eta) + eta G^2 T / 2; with "auto",
        D G sqrt(T) / 2 + (D G / 2) sum_t 1/sqrt(t) <= D G (1.5 sqrt(T) - 0.5)."""
        T = self._bound_args(n_trials)
        _, G, _ = self._bound_scale()
        n, k = self.n_features_in_, self.n_components_
        D = np.sqrt(2.0 * min(k, n - k))
        if T == 0 or G == 0 or D == 0:
            return 0.0
        if not isinstance(self._fitted_eta, str):
            eta = float(self._fitted_eta)
            return float(D * D / (2 * eta) + eta * G * G * T / 2)
        # sum_{t <= T} t^(-1/2) <= 1 + integral_1^T t^(-1/2) dt = 2 sqrt(T) - 1
        return float(D * G * (1.5 * math.sqrt(T) - 0.5))
