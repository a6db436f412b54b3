"""What every online PCA estimator shares: instance validation (vector rows
and dense PSD matrices), fit/refit, the gain and regret attributes, pickling.

Subclasses own their kernel: they define ``_STATE`` (field -> index of the
kernel's state vector, with at least "t", "scale" and "gain"),
``_STATE_NAMES``, ``_prepare(n, kind)``, ``_run(kind, args, params)``,
``cumulative_matrix()`` and ``components_``.
"""
from __future__ import annotations

import copy
import numbers

import numpy as np
import scipy.linalg

from .._base import StreamEstimator
from .._validation import _as_float64, _check_finite, check_fitted, check_n_features


def _symmetric(lower):
    # the full symmetric matrix of a kernel state array (row-major lower valid)
    low = np.tril(lower)
    return low + np.tril(low, -1).T


class _OnlinePCA(StreamEstimator):
    """Validation, fitting and regret shared by the online PCA estimators."""

    _STATE = {}
    _STATE_NAMES = ()

    # -- checks shared by the families ------------------------------------------------
    def _check_n_components(self, n):
        k = self.n_components
        if isinstance(k, bool) or not isinstance(k, numbers.Integral):
            raise TypeError(f"n_components must be an integer, got {k!r}")
        if not 1 <= k <= n:
            raise ValueError(f"n_components must be in [1, n_features] = [1, {n}], got {k}")
        return int(k)

    def _check_continues(self, n, kind, k):
        """Whether the call continues a fit; if so, that it matches it: the same
        n_features, instance type and n_components."""
        if not hasattr(self, "state_"):
            return False
        name = "X" if kind == "vector" else "Xs"
        check_n_features(self, n, name)
        if kind != self.instances_:
            method = "partial_fit" if self.instances_ == "vector" else "partial_fit_dense"
            raise ValueError(f"{name} holds {kind} instances, but this {type(self).__name__} "
                             f"was fitted with {self.instances_} instances ({method}); "
                             f"use one estimator per instance type")
        if k != self.n_components_:
            raise ValueError(f"n_components changed from {self.n_components_} to "
                             f"{self.n_components} since the first call; refit a new estimator")
        return True

    def _check_overflow(self, name, sizes):
        # float64 must hold the cumulative matrix: |C_ij| <= ||C||_2 <= (t + T) L,
        # with L the largest ||x||^2 (or bound on ||X||_2) so far
        if len(sizes) == 0:
            return
        fitted = hasattr(self, "state_")
        t = float(self.state_[self._STATE["t"]]) if fitted else 0.0
        top = max(float(self.state_[self._STATE["scale"]]) if fitted else 0.0, float(sizes.max()))
        if top > 1e300 / (4.0 * (t + len(sizes))):
            raise ValueError(f"{name} is too large for float64 arithmetic: the cumulative "
                             f"matrix would overflow; rescale the data")


    # -- public API ---------------------------------------------------------------
    def partial_fit(self, X, y=None):
        """Play one trial per row of X (vector instances x_t x_t^T): gain
        ||P_t x_t||^2 with the projection played (MEG and GD count its
        expectation tr(W_t x_t x_t^T)), then update.

        Parameters
        ----------
        X : array-like of shape (n_trials, n_features)
        y : ignored

        Returns
        -------
        self
        """
        X = _as_float64(X, "X")
        if X.ndim != 2:
            raise ValueError(f"X must be 2-dimensional (n_trials, n_features), got an array "
                             f"of shape {X.shape}")
        if X.shape[1] == 0:
            raise ValueError(f"X must have at least one feature, got shape {X.shape}")
        params = self._prepare(X.shape[1], "vector")
        sqnorm = np.einsum("ij,ij->i", X, X)
        if not np.isfinite(sqnorm).all():
            # one pass over X on the way in: NaN/inf in X shows up here
            _check_finite(X, "X")
            raise ValueError("X is too large for float64 arithmetic: ||x||^2 overflows; "
                             "rescale the data")
        self._check_overflow("X", sqnorm)
        return self._run("vector", (X, sqnorm), params)

    def partial_fit_dense(self, Xs, *, check_psd=True):
        """Play one trial per matrix of Xs (dense PSD instances X_t): gain
        tr(P_t X_t) (MEG and GD: its expectation tr(W_t X_t)), then update.

        Parameters
        ----------
        Xs : array-like of shape (n_trials, n_features, n_features)
            Symmetric positive semidefinite matrices.
        check_psd : bool, default True
            Verify each X_t is PSD by a Cholesky factorisation of X_t + eps I
            (O(n^3) per instance). Symmetry and finiteness are always checked
            in O(n^2); pass False when the instances are PSD by construction
            (covariances of mini-batches, say) to save the O(n^3) check (it
            keeps FPL's trials O(k n^2)).

        Returns
        -------
        self
        """
        # PSD is checked up to the rounding of the caller's dtype (at least
        # float32's): a float32 covariance of a low-rank batch has eigenvalues
        # of -1e-8 relative
        eps_in = np.finfo(np.float64).eps
        if isinstance(Xs, np.ndarray) and np.issubdtype(Xs.dtype, np.floating):
            eps_in = min(float(np.finfo(Xs.dtype).eps), float(np.finfo(np.float32).eps))
        Xs = _as_float64(Xs, "Xs")
        if Xs.ndim == 2 and Xs.shape[0] == Xs.shape[1] and Xs.shape[0] > 0:
            raise ValueError(f"Xs must be 3-dimensional (n_trials, n_features, n_features), "
                             f"got shape {Xs.shape}; pass Xs[None] for a single instance")
        if Xs.ndim != 3 or Xs.shape[1] != Xs.shape[2]:
            raise ValueError(f"Xs must have shape (n_trials, n_features, n_features), "
                             f"got {Xs.shape}")
        if Xs.shape[1] == 0:
            raise ValueError(f"Xs must have at least one feature, got shape {Xs.shape}")
        T, n = Xs.shape[0], Xs.shape[1]
        params = self._prepare(n, "dense")
        slack = 10 * n * eps_in
        spec, trsq = np.empty(T), np.empty(T)
        # in chunks of ~32 MB, so the temporaries stay small whatever T is
        step = max(1, (1 << 22) // (n * n))
        for a in range(0, T, step):
            B = Xs[a:a + step]
            tr2 = np.einsum("tij,tij->t", B, B)
            if not np.isfinite(tr2).all():
                # NaN/inf in Xs shows up here, before the checks it would fool
                _check_finite(B, "Xs")
                raise ValueError("Xs is too large for float64 arithmetic: tr(X^2) overflows; "
                                 "rescale the data")
            absB = np.abs(B)
            amax = absB.max(axis=(1, 2))
            asym = np.abs(B - B.transpose(0, 2, 1)).max(axis=(1, 2))
            bad = np.flatnonzero(asym > 1e-10 * amax)
            if bad.size:
                raise ValueError(f"Xs[{a + bad[0]}] is not symmetric (max |X - X^T| = "
                                 f"{asym[bad[0]]:.3g}); instances must be symmetric PSD "
                                 f"matrices")
            diag = np.diagonal(B, axis1=1, axis2=2)
            floor = -slack * np.maximum(amax, 1e-300)[:, None]
            neg = np.flatnonzero((diag < floor).any(axis=1))
            if neg.size:
                raise ValueError(f"Xs[{a + neg[0]}] is not positive semidefinite (a negative "
                                 f"diagonal entry); instances must be symmetric PSD matrices")
            if check_psd:
                shifted = B + (slack * np.maximum(amax, 1e-300))[:, None, None] * np.eye(n)
                try:
                    np.linalg.cholesky(shifted)
                except np.linalg.LinAlgError:
                    for t in range(len(B)):
                        try:
                            np.linalg.cholesky(shifted[t])
                        except np.linalg.LinAlgError:
                            raise ValueError(f"Xs[{a + t}] is not positive semidefinite; "
                                             f"instances must be symmetric PSD "
                                             f"matrices") from None
                    raise   # pragma: no cover - the batch failed, no single one did
            trsq[a:a + step] = tr2
            # a cheap upper bound on the spectral norm of a PSD matrix, for sigma="auto"
            spec[a:a + step] = np.minimum(np.sqrt(tr2), absB.sum(axis=2).max(axis=1))
        self._check_overflow("Xs", spec)
        return self._run("dense", (Xs, spec, trsq), params)

    def fit(self, X, y=None):
        """Start afresh and play every row of X as one trial."""
        return self._refit(lambda: self.partial_fit(X))

    def fit_dense(self, Xs, *, check_psd=True):
        """Start afresh and play every matrix of Xs as one trial."""
        return self._refit(lambda: self.partial_fit_dense(Xs, check_psd=check_psd))

    def _forget(self):
        for name in self._STATE_NAMES:
            self.__dict__.pop(name, None)

    def _refit(self, play):
        # a rejected fit leaves the old state in place
        saved = {name: self.__dict__.pop(name) for name in self._STATE_NAMES
                 if name in self.__dict__}
        try:
            return play()
        except BaseException:
            self._forget()
            self.__dict__.update(saved)
            raise

    def transform(self, X):
        """Project rows of X onto the current components: X @ components_.T
        (uncentered, as the online PCA gain ||P x||^2 is)."""
        check_fitted(self, "state_")
        X = _as_float64(X, "X")
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have shape (n_samples, {self.n_features_in_}), "
                             f"got {X.shape}")
        _check_finite(X, "X")
        return X @ self.components_.T

    # -- attributes -----------------------------------------------------------------
    def _scalar(self, name):
        check_fitted(self, "state_")
        return float(self.state_[self._STATE[name]])

    @property
    def n_trials_(self):
        return int(self._scalar("t"))

    @property
    def cumulative_gain_(self):
        """Sum over trials of the gain tr(P_t X_t) received (MEG and GD: of its
        expectation tr(W_t X_t))."""
        return self._scalar("gain")

    @property
    def best_gain_(self):
        """lambda_{1:k}(sum_t X_t): the gain of the best fixed rank-k projection in
        hindsight."""
        check_fitted(self, "state_")
        cache = getattr(self, "_regret_cache", None)
        t = self.n_trials_
        if cache is None or cache[0] != t:
            n, k = self.n_features_in_, self.n_components_
            if t == 0:
                best = 0.0
            else:
                w = scipy.linalg.eigh(self.cumulative_matrix(), eigvals_only=True,
                                      subset_by_index=[n - k, n - 1], check_finite=False)
                best = float(w.sum())
            cache = (t, best)
            self._regret_cache = cache
        return cache[1]

    @property
    def regret_(self):
        """lambda_{1:k}(sum_t X_t) - cumulative_gain_."""
        return self.best_gain_ - self.cumulative_gain_

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_regret_cache", None)
        return state

    def __copy__(self):
        # S and C are updated in place: a shallow copy must not share them
        return copy.deepcopy(self)
