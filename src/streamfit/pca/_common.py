"""What every online PCA estimator shares: scikit-learn's conventions around
one compiled state object.

An estimator stores its parameters and, once fitted, one attribute: ``_state``,
the state object of its family (``streamfit._kernels``: LeaderState for
FPL/FTL, CappedState for MEG/GD, DropoutState). A call converts its input with
scikit-learn's conventions, checks the parameters the state was built with,
hands the others to the object (``configure``) and lets it play; every fitted
attribute is a property reading the object. A first call or ``fit`` builds a
new object and publishes it with one assignment once it holds a decision
(``fit``: once it has played every trial), so an interrupted ``fit`` leaves
the previous fit. The object takes one call at a time (a second thread waits)
and stops a block only between trials.

Subclasses define ``_new_state(n, kind, names)`` (a fresh object from the
parameters) and ``_settings(state)`` (refuse a parameter the state was built
with if it changed, then configure the rest).
"""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import numpy as np
from sklearn.utils.validation import _get_feature_names, check_is_fitted, validate_data

from .._base import StreamEstimator
from .._kernels._pca_api import FirstCall
from .._validation import (_as_float64, _check_finite, _check_real_array, as_matrix,
                           check_matrix, fitted_feature_names)

if TYPE_CHECKING:   # scikit-learn's bases, typed (see streamfit/_typing.pyi)
    from typing import Any, Literal, TypeVar

    from .._typing import ArrayIn, ClassNamePrefixFeaturesOutMixin, Float64Array, TransformerMixin

    # fit and partial_fit return the estimator they were called on
    _PCAT = TypeVar("_PCAT", bound="_OnlinePCA")
else:
    from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin


def _pow2_floor(a, axis):
    """2^e with 2^e <= max |a| along axis (1 where that is 0): dividing by it
    is exact, and keeps squares of the entries in float64's range."""
    top = np.max(np.abs(a), axis=axis, initial=0.0)
    _, e = np.frexp(top)
    return np.ldexp(1.0, np.where(top > 0, e - 1, 0))


def check_n_components(k, n):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"n_components must be an integer, got {k!r}")
    if not 1 <= k <= n:
        raise ValueError(f"n_components must be in [1, n_features] = [1, {n}] "
                         f"(n_features = {n}), got {k}")
    return int(k)


def refuse_change(name, old, new):
    raise ValueError(f"{name} changed from {old} to {new!r} since the first call; fit() "
                     f"starts afresh")


# the attributes of a state pickled by streamfit before the state objects
_OLD_LAYOUT = ("state_", "block_", "eigenvectors_", "history_", "_rng")


class _OnlinePCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, StreamEstimator):
    """The scikit-learn contract around a PCA state object (copies and
    unpickling as :class:`~streamfit._base.StreamEstimator`'s)."""

    _FLOAT32_ROWS = False       # the state reads float32 rows as they are (FPL)

    if TYPE_CHECKING:   # what the subclasses define (see the module docstring)
        def _settings(self, state: Any) -> None: ...

    # -- scikit-learn -----------------------------------------------------------
    def __sklearn_is_fitted__(self):
        return "_state" in self.__dict__

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        tags.target_tags.required = False
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags

    @property
    def _n_features_out(self):
        # get_feature_names_out: one output per component
        return self._fitted().k

    def _fitted(self):
        state = self.__dict__.get("_state")
        if state is None:
            check_is_fitted(self)       # scikit-learn's NotFittedError
        if state.torn:
            raise RuntimeError(
                f"{type(self).__name__}: this process was forked while another thread was "
                f"inside a call on this estimator, whose state is updated in place: here "
                f"it may hold part of a trial. Call fit() to start afresh, or load a copy "
                f"pickled before the fork")
        return state

    # -- input ------------------------------------------------------------------
    def _dense(self, Xs, check_psd):
        """Xs as a C-contiguous float64 (T, n, n) array of symmetric PSD
        instances (PSD up to the rounding of the caller's dtype, at least
        float32's: a float32 covariance of a low-rank batch has eigenvalues
        of -1e-8 relative; the Cholesky check is O(n^3) an instance, skipped
        with check_psd=False)."""
        eps_in = np.finfo(np.float64).eps
        if isinstance(Xs, np.ndarray) and np.issubdtype(Xs.dtype, np.floating):
            eps_in = min(float(np.finfo(Xs.dtype).eps), float(np.finfo(np.float32).eps))
        Xs = _as_float64(Xs, "Xs")
        if Xs.ndim == 2 and Xs.shape[0] == Xs.shape[1] and Xs.shape[0] > 0:
            raise ValueError(f"Xs must be 3-dimensional (n_trials, n_features, "
                             f"n_features), got shape {Xs.shape}; pass Xs[None] for a "
                             f"single instance")
        if Xs.ndim != 3 or Xs.shape[1] != Xs.shape[2]:
            raise ValueError(f"Xs must have shape (n_trials, n_features, n_features), "
                             f"got {Xs.shape}")
        if Xs.shape[1] == 0:
            raise ValueError(f"Xs must have at least one feature, got shape {Xs.shape}")
        n = Xs.shape[1]
        slack = 10 * n * eps_in
        # in chunks of ~32 MB, so the temporaries stay small whatever T is
        step = max(1, (1 << 22) // (n * n))
        for a in range(0, Xs.shape[0], step):
            B = Xs[a:a + step]
            amax = np.abs(B).max(axis=(1, 2))
            if not np.isfinite(amax).all():
                _check_finite(B, "Xs")
            asym = np.abs(B - B.transpose(0, 2, 1)).max(axis=(1, 2))
            bad = np.flatnonzero(asym > 1e-10 * amax)
            if bad.size:
                raise ValueError(f"Xs[{a + bad[0]}] is not symmetric (max |X - X^T| = "
                                 f"{asym[bad[0]]:.3g}); instances must be symmetric PSD "
                                 f"matrices")
            floor = -slack * np.maximum(amax, 1e-300)[:, None]
            neg = np.flatnonzero((np.diagonal(B, axis1=1, axis2=2) < floor).any(axis=1))
            if neg.size:
                raise ValueError(f"Xs[{a + neg[0]}] is not positive semidefinite (a negative "
                                 f"diagonal entry); instances must be symmetric PSD matrices")
            if check_psd:
                u = _pow2_floor(B, axis=(1, 2))
                shifted = B / u[:, None, None] + (
                    slack * np.maximum(amax / u, 1e-300))[:, None, None] * np.eye(n)
                for t in range(len(B)):
                    try:
                        np.linalg.cholesky(shifted[t])
                    except np.linalg.LinAlgError:
                        raise ValueError(f"Xs[{a + t}] is not positive semidefinite; "
                                         f"instances must be symmetric PSD matrices") from None
        return Xs

    def _checked_rows(self, X, state):
        X_in, X = X, check_matrix(X, "X")
        self._check_features(state, X.shape[1], "X", X_in)
        return X

    def _check_features(self, state, n, name, X_in):
        # scikit-learn's messages (its checks look for them): feature names
        # through its own validate_data, the count here
        if X_in is not None and (hasattr(X_in, "columns") or state.feature_names is not None):
            validate_data(self, X_in, reset=False, skip_check_array=True)
        if n != state.n:
            raise ValueError(f"{name} has {n} features, but {type(self).__name__} is "
                             f"expecting {state.n} features as input")

    def _continue(self, kind, n, X_in=None):
        """The fitted state, once the call is checked against it: features,
        and the parameters (refused, or configured). (Instances of the other
        kind: the state's learn and learn_dense refuse them, naming the
        argument and the kind it was fitted with, as its learn_one does.)"""
        state = self._fitted()
        self._check_features(state, n, "X" if kind == "vector" else "Xs", X_in)
        self._settings(state)
        return state

    def _first(self, kind, n, X_in, play):
        """A first call: through the estimator's gate, so that two threads'
        first calls make one state (the second continues from the first's).
        Returns the state to continue with, or None when this call made it."""
        gate = self.__dict__.setdefault("_gate", FirstCall())
        return gate.run(self._first_inside, kind, n, X_in, play)

    def _first_inside(self, kind, n, X_in, play):
        state = self.__dict__.get("_state")
        if state is None:
            self._start(kind, n, X_in, play)
        return state

    def _start(self, kind, n, X_in, play, publish_partial=True):
        """A fresh state for a first call (or fit), played and published;
        with ``publish_partial`` also when a signal stopped its trials (it
        then holds whole ones), never when it refused or failed."""
        names = _get_feature_names(X_in) if X_in is not None else None
        state = self._new_state(n, kind, None if names is None else list(names))
        try:
            play(state)
        except BaseException:
            # a signal that stopped the trials: the state holds whole ones
            if publish_partial and state.started and state.interrupted:
                self._state = state
            raise
        self._state = state
        return self

    # -- public API ---------------------------------------------------------------
    def partial_fit(self: _PCAT, X: ArrayIn, y: Any = None) -> _PCAT:
        """Play one trial per row of X (vector instances x_t x_t^T): gain
        ||P_t x_t||^2 with the projection played (MEG and GD count its
        expectation tr(W_t x_t x_t^T)), then update.

        Parameters
        ----------
        X : array-like of shape (n_trials, n_features)
            A block of the stream; an empty block plays nothing (but a first
            call still sets up the first decision). Follow the (Perturbed)
            Leader reads float32 rows as float32 (no float64 copy of the
            block) and makes the decisions of the same rows as float64;
            other dtypes are converted to float64.
        y : ignored

        Returns
        -------
        self
        """
        X_in = X
        X = as_matrix(X, float32=self._FLOAT32_ROWS)
        if "_state" not in self.__dict__ and \
                self._first("vector", X.shape[1], X_in, lambda s: s.learn(X)) is None:
            return self
        state = self._continue("vector", X.shape[1], X_in)
        if X.shape[0] == 1 and X.dtype == np.float64:
            state.learn_one(X[0])
        else:
            state.learn(X)
        return self

    def learn_one(self, x: ArrayIn) -> None:
        """Play one trial with the row x (river's name): the same trial as
        ``partial_fit(x[None])``.

        Parameters
        ----------
        x : 1-D array or sequence of n_features real numbers

        Returns
        -------
        None
        """
        state = self.__dict__.get("_state")
        if state is None or state.torn:
            self.partial_fit(self._one_row(x))
            return
        self._settings(state)
        state.learn_one(x)

    @staticmethod
    def _one_row(x):
        x = _check_real_array(x, "x")
        if x.ndim != 1:
            raise ValueError(f"x must be 1-dimensional (one row of n_features values), got "
                             f"an array of shape {x.shape}")
        return x[None]

    def partial_fit_dense(self: _PCAT, Xs: ArrayIn, *, check_psd: bool = True) -> _PCAT:
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
        Xs = self._dense(Xs, check_psd)
        if "_state" not in self.__dict__ and \
                self._first("dense", Xs.shape[1], None, lambda s: s.learn_dense(Xs)) is None:
            return self
        self._continue("dense", Xs.shape[1]).learn_dense(Xs)
        return self

    def fit(self: _PCAT, X: ArrayIn, y: Any = None) -> _PCAT:
        """Start afresh and play every row of X as one trial (an interrupted
        or failed fit leaves the previous one).

        Parameters
        ----------
        X : array-like of shape (n_trials, n_features), at least one row
        y : ignored

        Returns
        -------
        self
        """
        X_in = X
        X = as_matrix(X, float32=self._FLOAT32_ROWS)
        if X.shape[0] == 0:
            raise ValueError(f"X has 0 samples (shape={X.shape}): fit needs at least "
                             f"one trial (partial_fit accepts empty blocks)")
        return self._start("vector", X.shape[1], X_in, lambda s: s.learn(X), False)

    def fit_dense(self: _PCAT, Xs: ArrayIn, *, check_psd: bool = True) -> _PCAT:
        """Start afresh and play every matrix of Xs as one trial.

        Parameters
        ----------
        Xs : array-like of shape (n_trials, n_features, n_features)
        check_psd : bool, default True
            As for :meth:`partial_fit_dense`.

        Returns
        -------
        self
        """
        Xs = self._dense(Xs, check_psd)
        return self._start("dense", Xs.shape[1], None, lambda s: s.learn_dense(Xs), False)

    def transform(self, X: ArrayIn) -> Float64Array:
        """Project rows of X onto the current components: X @ components_.T
        (uncentered, as the online PCA gain ||P x||^2 is).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        state = self._fitted()
        return self._checked_rows(X, state) @ state.components_.T

    def transform_one(self, x: ArrayIn) -> Float64Array:
        """The coordinates of the row x on the current components (river's
        name), V x with V = ``components_``.

        Parameters
        ----------
        x : 1-D array or sequence of n_features real numbers

        Returns
        -------
        ndarray of shape (n_components,)
        """
        return self._fitted().transform_one(x)

    def inverse_transform(self, X: ArrayIn) -> Float64Array:
        """Map projections back to the input space: X @ components_, the
        points of the current subspace whose coordinates X holds.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        state = self._fitted()
        Z = check_matrix(X, "X")
        if Z.shape[1] != state.k:
            raise ValueError(f"X must have shape (n_samples, {state.k}), got {Z.shape}")
        return Z @ state.components_

    def score(self, X: ArrayIn, y: Any = None) -> float:
        """The fraction of X's energy the current decision captures:
        sum_i ||P x_i||^2 / sum_i ||x_i||^2, in [0, 1] (1 for X of zero
        energy), with P the projection onto ``components_`` (MEG and GD: the
        expected fraction under W, sum_i x_i^T W x_i / sum_i ||x_i||^2).
        Higher is better; held-out data measure how well the learnt subspace
        generalises.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        float
        """
        state = self._fitted()
        X = self._checked_rows(X, state)
        # a power-of-two scaling: the squares neither over- nor underflow
        X = X / float(_pow2_floor(X, axis=None))
        total = float(np.einsum("ij,ij->", X, X))
        if total == 0.0:
            return 1.0
        return min(1.0, self._captured(state, X) / total)

    def _captured(self, state, X):
        Z = X @ state.components_.T
        return float(np.einsum("ij,ij->", Z, Z))

    # -- fitted attributes: the state object's ---------------------------------------
    @property
    def components_(self) -> Float64Array:
        """(k, n) orthonormal rows: the subspace the next trial plays."""
        return self._fitted().components_

    @property
    def n_components_(self) -> int:
        return self._fitted().k

    @property
    def n_features_in_(self) -> int:
        return self._fitted().n

    @property
    def feature_names_in_(self) -> Any:
        return fitted_feature_names(self, self._fitted().feature_names)

    @property
    def instances_(self) -> Literal["vector", "dense"]:
        """"vector" or "dense": the instances the fit plays."""
        return self._fitted().instances

    @property
    def n_trials_(self) -> int:
        """Trials played so far."""
        return self._fitted().n_trials_

    @property
    def cumulative_gain_(self) -> float:
        """Sum over trials of the gain tr(P_t X_t) received (MEG and GD: of its
        expectation tr(W_t X_t))."""
        return self._fitted().cumulative_gain_

    @property
    def best_gain_(self) -> float:
        """lambda_{1:k}(sum_t X_t): the gain of the best fixed rank-k projection in
        hindsight (through the eigen-solver chain, which does not fail on a
        finite matrix; computed once per trial count)."""
        return self._fitted().best_gain_

    @property
    def regret_(self) -> float:
        """lambda_{1:k}(sum_t X_t) - cumulative_gain_."""
        return self._fitted().regret_

    def cumulative_matrix(self) -> Float64Array:
        """sum_t X_t, the unperturbed cumulative instance matrix (full,
        symmetric), kept apart from any noise: exact sums of the instances."""
        return self._fitted().cumulative_matrix()

    # -- copies and pickles -------------------------------------------------------
    def __copy__(self):
        new = super().__copy__()
        new.__dict__.pop("_gate", None)     # a first call's gate: the original's own
        return new

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_gate", None)        # a first call's gate: not state
        return state

    def __setstate__(self, state):
        if isinstance(state, dict):     # (anything else: StreamEstimator refuses it)
            if any(name in state for name in _OLD_LAYOUT):
                raise ValueError(f"this {type(self).__name__} was pickled by an earlier "
                                 f"streamfit (its state in attributes, before the state "
                                 f"objects); it cannot be loaded: fit a new estimator")
            fitted = state.get("_state")
            if fitted is not None and type(fitted) is not self._STATE_TYPE:
                raise ValueError(f"{type(self).__name__} pickle: its state is a "
                                 f"{type(fitted).__name__}, expected a "
                                 f"{self._STATE_TYPE.__name__} (a corrupted or foreign "
                                 f"pickle?)")
            # (a class setting a test overrode on the instance, _full_every
            # say, travels with it)
            unknown = sorted(name for name in set(state) - set(self._get_param_names())
                             - {"_state", "_sklearn_version"} if not hasattr(type(self), name))
            if unknown:
                raise ValueError(f"{type(self).__name__} pickle: unknown attributes {unknown} "
                                 f"(a corrupted or foreign pickle?)")
        super().__setstate__(state)     # (then: every parameter there)
        fitted = self.__dict__.get("_state")
        if fitted is not None:
            fitted._link_random_state(getattr(self, "random_state", None))
