"""What every online PCA estimator shares: the scikit-learn transformer
contract, instance validation (vector rows and dense PSD matrices),
fit/refit, the gain and regret attributes, and the rules for calls that change
the state.

Calls that change the state (``partial_fit``, ``partial_fit_dense``, ``fit``,
``fit_dense``, ``set_params``) run one at a time per estimator (a lock that
pickling drops); readers of the state take it too, so they never see a trial
half-applied. A call either is rejected before anything changes (bad input,
bad parameters: the error names the argument) or plays whole trials: a signal
handler that raises (Ctrl-C) stops it between two trials, leaving the state of
the trials played so far, consistent in every field.

Subclasses own their kernel: they define ``_STATE_NAMES`` (their fitted
attributes beside the common ones), ``_prepare(n, kind, X_in)`` (checks, and
the kernel's parameter record), ``_play(kind, data, params, X_in)`` (the
first decision if need be, then the trials), ``cumulative_matrix()`` and
``components_``; ``state_`` is the kernel's state record, read by field name.
"""
from __future__ import annotations

import copy
import numbers

import numpy as np
from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .._base import StreamEstimator, deferred_signals, serialized
from .._errors import ERR_INTERRUPTED, OK, raise_for
from .._kernels import _pca_api as _api
from .._kernels._linalg import eigh_top
from .._validation import _as_float64, _check_finite, _check_real_array

# Attributes every fit has, beside the subclass's state arrays (and the mark
# of a state torn by a fork mid-call, which a new fit clears).
_FIT_NAMES = ("n_features_in_", "feature_names_in_", "n_components_", "instances_", "_rng",
              "_fitted_random_state", "_regret_cache", "_torn")


def _symmetric(lower):
    # the full symmetric matrix of a kernel state array (row-major lower valid)
    low = np.tril(lower)
    return low + np.tril(low, -1).T


def _writable(a):
    """a, or a writable copy of it when it is read-only (a state loaded with
    joblib's mmap_mode="r", say): the kernels update state in place."""
    return a if a.flags.writeable else np.array(a, copy=True)


def _pow2_floor(a, axis):
    """2^e with 2^e <= max |a| along axis (1 where that is 0): dividing by it
    is exact, and keeps squares of the entries in float64's range."""
    top = np.max(np.abs(a), axis=axis, initial=0.0)
    _, e = np.frexp(top)
    return np.ldexp(1.0, np.where(top > 0, e - 1, 0))


def _same_seed(a, b):
    # random_state compared as a parameter: ints by value, generators by identity
    if isinstance(a, numbers.Integral) and isinstance(b, numbers.Integral):
        return int(a) == int(b)
    return a is b


def _buffered_sum(C, rows, pending):
    """The full symmetric sum C + rows[:pending]^T rows[:pending] of a leader
    kernel's comparator matrix C (lower triangle) and its row buffer, C
    untouched: the rows added by the kernel's own dsyrk/dsyr (numpy's matmul
    splits its sums by BLAS thread)."""
    C = np.array(C, copy=True)
    if pending:
        _api.sym_update(C, np.ascontiguousarray(rows[:pending]), 1.0)
    return _symmetric(C)


def _note_interrupt(exc, est, done, T):
    """Say on the exception how much of the call was played (Python >= 3.11)."""
    if exc is not None and hasattr(exc, "add_note"):
        exc.add_note(f"{type(est).__name__} was interrupted after {done} of the call's {T} "
                     f"trials; it holds them ({est.n_trials_} trials in all), consistent "
                     f"in every field: continue with the rest of the block")


class _OnlinePCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, StreamEstimator):
    """The scikit-learn contract, validation, fitting and regret shared by the
    online PCA estimators."""

    _STATE_NAMES: tuple[str, ...] = ()
    _TRANSIENT_ATTRS: tuple[str, ...] = ("_regret_cache",)
    _STATE_DTYPE = None         # the kernel's state record (subclasses)
    # fitted settings and their values, and the arrays a fitted state holds
    # (subclasses): checked on loading
    _LOADED_CHOICES: dict[str, tuple[object, ...]] = {}
    _LOADED_ARRAYS: tuple[str, ...] = ()
    _FLOAT32_ROWS = False       # the kernel reads float32 rows as they are (FPL)

    # -- scikit-learn -----------------------------------------------------------
    def __sklearn_is_fitted__(self):
        return "state_" in self.__dict__

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
        check_is_fitted(self)
        return self.n_components_

    def _cached_params(self, key, build):
        """The kernel's parameter record for these parameter values (key),
        built and validated by build() once: single-row calls (a stream fed
        trial by trial) reuse it. A key compared by value and identity, so
        that 1 and 1.0 or two generators never share a record."""
        cached = self.__dict__.get("_params_cache")
        try:
            if cached is not None and cached[0] == key and all(
                    a is b for a, b in zip(cached[0], key)):
                return cached[1]
        except (TypeError, ValueError):     # unhashable or array-like: validated below
            pass
        params = build()
        self._params_cache = (key, params)
        return params

    def _finish_call(self, code, done, exc, T, fresh, rng, saved):
        """After a kernel call that updated the state in place: a first call
        that could not play (no memory for the work space) leaves no fit
        behind and the generator where it was (``saved``); an interrupted
        one says on its exception how much it played; every code goes
        through raise_for."""
        if code not in (OK, ERR_INTERRUPTED) and fresh:
            self._forget()
            rng.bit_generator.state = saved
        if code == ERR_INTERRUPTED:
            _note_interrupt(exc, self, done, T)
        raise_for(code, type(self).__name__, exc=exc)

    @serialized
    def _topk_stats(self):
        # the leader kernels' top-k solver counters (their solver_stats_)
        check_is_fitted(self)
        s = self.state_["topk"][0]
        return {"solves": int(s["solves"]), "products": int(s["products"]),
                "fallbacks": int(s["fallbacks"]), "direct": int(s["direct"]),
                "eig_fallbacks": int(s["eig_fallbacks"]), "kept": int(s["kept"]),
                "last_gap": float(s["gap"]), "max_gap_ratio": float(s["max_gap_ratio"])}

    @serialized
    def set_params(self, **params):
        """Set parameters (scikit-learn's set_params), waiting for a running
        call to end: each parameter takes effect at the next call or that
        call refuses it, as the class docstring says for each."""
        return super().set_params(**params)

    # -- checks shared by the families ------------------------------------------------
    def _check_n_components(self, n):
        k = self.n_components
        if isinstance(k, bool) or not isinstance(k, numbers.Integral):
            raise TypeError(f"n_components must be an integer, got {k!r}")
        if not 1 <= k <= n:
            raise ValueError(f"n_components must be in [1, n_features] = [1, {n}] "
                             f"(n_features = {n}), got {k}")
        return int(k)

    def _check_instance(self, n, kind, X_in=None):
        """A call continuing a fit must bring the fit's instance type and
        n_features (and feature names). Checked before the parameters, so that
        the message says what is wrong with the data."""
        if not self.__sklearn_is_fitted__():
            return
        name = "X" if kind == "vector" else "Xs"
        if kind != self.instances_:
            method = "partial_fit" if self.instances_ == "vector" else "partial_fit_dense"
            raise ValueError(f"{name} holds {kind} instances, but this {type(self).__name__} "
                             f"was fitted with {self.instances_} instances ({method}); "
                             f"use one estimator per instance type")
        self._check_features(n, name, X_in)

    def _check_continues(self, k):
        """Whether the call continues a fit; if so, that the parameters the
        state was built for (n_components, random_state) have not changed."""
        if not self.__sklearn_is_fitted__():
            return False
        if k != self.n_components_:
            raise ValueError(f"n_components changed from {self.n_components_} to "
                             f"{self.n_components} since the first call; fit() starts "
                             f"afresh, or refit a new estimator")
        seed = getattr(self, "random_state", None)
        if not _same_seed(seed, self._fitted_random_state):
            raise ValueError(f"random_state changed from {self._fitted_random_state!r} to "
                             f"{seed!r} since the first call; fit() starts afresh")
        return True

    def _check_features(self, n, name, X_in):
        # scikit-learn's messages (its checks look for them): feature names
        # through its own validate_data, the count here
        if X_in is not None and (hasattr(X_in, "columns")
                                 or hasattr(self, "feature_names_in_")):
            validate_data(self, X_in, reset=False, skip_check_array=True)
        if n != self.n_features_in_:
            raise ValueError(f"{name} has {n} features, but {type(self).__name__} is "
                             f"expecting {self.n_features_in_} features as input")

    def _check_overflow(self, name, sizes):
        # float64 must hold the cumulative matrix: |C_ij| <= ||C||_2 <= (t + T) L,
        # with L the largest ||x||^2 (or bound on ||X||_2) so far
        if len(sizes) == 0:
            return
        fitted = self.__sklearn_is_fitted__()
        t = self._scalar("t") if fitted else 0.0
        top = max(self._scalar("scale") if fitted else 0.0, float(sizes.max()))
        if top > 1e300 / (4.0 * (t + len(sizes))):
            raise ValueError(f"{name} is too large for float64 arithmetic: the cumulative "
                             f"matrix would overflow; rescale the data")

    def _publish_features(self, X_in, n):
        """n_features_in_, and feature_names_in_ from a DataFrame's columns
        (part of a first call's commit)."""
        if X_in is not None and hasattr(X_in, "columns"):
            validate_data(self, X_in, reset=True, skip_check_array=True)
        else:
            self.__dict__.pop("feature_names_in_", None)
        self.n_features_in_ = n

    # -- validation -----------------------------------------------------------------
    @staticmethod
    def _vectors(X, name="X", float32=False):
        # float32=True: float32 rows stay float32 (C-contiguous) for a kernel
        # that reads them as such; everything else becomes float64
        X = _check_real_array(X, name)
        X = np.ascontiguousarray(X, dtype=np.float32 if float32 and X.dtype == np.float32
                                 else np.float64)
        if X.ndim != 2:
            raise ValueError(f"{name} must be 2-dimensional (n_trials, n_features), got an "
                             f"array of shape {X.shape}; Reshape your data (X.reshape(1, -1) "
                             f"for one row)")
        if X.shape[1] == 0:
            raise ValueError(f"{name} has 0 feature(s) (shape={X.shape}) while a minimum of "
                             f"1 is required.")
        return X

    @staticmethod
    def _vector_sizes(X, name="X"):
        """||x||^2 per row; NaN/inf rejected (one pass over X: they show up
        in the norms). float32 rows are widened (exactly) in chunks of ~4 MB,
        so the norms -- and sigma="auto" -- are those of the same rows as
        float64, without a float64 copy of the block."""
        if X.dtype == np.float32:
            sqnorm = np.empty(X.shape[0])
            step = max(1, (1 << 19) // max(X.shape[1], 1))
            buf = np.empty((min(step, X.shape[0]), X.shape[1]))
            for a in range(0, X.shape[0], step):
                B = buf[:min(step, X.shape[0] - a)]
                B[...] = X[a:a + step]
                sqnorm[a:a + step] = np.einsum("ij,ij->i", B, B)
        else:
            sqnorm = np.einsum("ij,ij->i", X, X)
        if not np.isfinite(sqnorm).all():
            _check_finite(X, name)
            raise ValueError(f"{name} is too large for float64 arithmetic: ||x||^2 "
                             f"overflows; rescale the data")
        return sqnorm

    def _dense_sizes(self, Xs, eps_in, check_psd):
        """Per instance an upper bound on ||X_t||_2 and ||X_t||_F, after
        checking symmetry, PSD and finiteness."""
        T, n = Xs.shape[0], Xs.shape[1]
        slack = 10 * n * eps_in
        spec, frob = np.empty(T), np.empty(T)
        # in chunks of ~32 MB, so the temporaries stay small whatever T is
        step = max(1, (1 << 22) // (n * n))
        for a in range(0, T, step):
            B = Xs[a:a + step]
            absB = np.abs(B)
            amax = absB.max(axis=(1, 2))
            if not np.isfinite(amax).all():
                _check_finite(B, "Xs")
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
            # ||X||_F on instances scaled by a power of two: no overflow of
            # tr(X^2) at large scales, no underflow at small ones
            u = _pow2_floor(B, axis=(1, 2))
            Bu = B / u[:, None, None]
            fr = np.sqrt(np.einsum("tij,tij->t", Bu, Bu)) * u
            if not np.isfinite(fr).all():
                raise ValueError("Xs is too large for float64 arithmetic: ||X||_F "
                                 "overflows; rescale the data")
            if check_psd:
                shifted = Bu + (slack * np.maximum(amax / u, 1e-300))[:, None, None] * np.eye(n)
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
            frob[a:a + step] = fr
            # a cheap upper bound on the spectral norm of a PSD matrix, for sigma="auto"
            spec[a:a + step] = np.minimum(fr, absB.sum(axis=2).max(axis=1))
        if not np.isfinite(spec).all():
            raise ValueError("Xs is too large for float64 arithmetic: its row sums "
                             "overflow; rescale the data")
        return spec, frob

    # -- public API ---------------------------------------------------------------
    @serialized
    def partial_fit(self, X, y=None):
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
        return self._learn_vectors(self._vectors(X, float32=self._FLOAT32_ROWS), X)

    def _learn_vectors(self, X, X_in):
        params = self._prepare(X.shape[1], "vector", X_in)
        sqnorm = self._vector_sizes(X)
        self._check_overflow("X", sqnorm)
        self._play("vector", (X, sqnorm, sqnorm), params, X_in)
        return self

    @serialized
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
        # float32's): a float32 covariance of a low-rank batch has
        # eigenvalues of -1e-8 relative
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
        params = self._prepare(n, "dense")
        spec, frob = self._dense_sizes(Xs, eps_in, check_psd)
        self._check_overflow("Xs", spec)
        self._play("dense", (Xs, spec, frob), params, None)
        return self

    @serialized
    def fit(self, X, y=None):
        """Start afresh and play every row of X as one trial.

        Parameters
        ----------
        X : array-like of shape (n_trials, n_features), at least one row
        y : ignored

        Returns
        -------
        self
        """
        Xc = self._vectors(X, float32=self._FLOAT32_ROWS)
        if Xc.shape[0] == 0:
            raise ValueError(f"X has 0 samples (shape={Xc.shape}): fit needs at least "
                             f"one trial (partial_fit accepts empty blocks)")
        return self._refit(lambda: self._learn_vectors(Xc, X))

    @serialized
    def fit_dense(self, Xs, *, check_psd=True):
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
        return self._refit(lambda: self.partial_fit_dense(Xs, check_psd=check_psd))

    def _forget(self):
        for name in (*self._STATE_NAMES, *_FIT_NAMES):
            self.__dict__.pop(name, None)

    def _refit(self, play):
        # A fit starts afresh; one that fails or is interrupted leaves the
        # previous fit in place, and its generator where it was (a Generator
        # given as random_state is shared by the old fit and the new one).
        names = (*self._STATE_NAMES, *_FIT_NAMES)
        saved = {name: self.__dict__[name] for name in names if name in self.__dict__}
        seed = getattr(self, "random_state", None)
        gen_state = seed.bit_generator.state if isinstance(seed, np.random.Generator) else None
        old_rng = saved.get("_rng")
        old_state = old_rng.bit_generator.state if old_rng is not None else None
        try:
            self._forget()
            return play()
        except BaseException:
            with deferred_signals():
                self._forget()
                self.__dict__.update(saved)
                if gen_state is not None:
                    seed.bit_generator.state = gen_state
                if old_rng is not None:
                    old_rng.bit_generator.state = old_state
            raise

    def _components_for_transform(self):
        return self.components_

    @serialized
    def transform(self, X):
        """Project rows of X onto the current components: X @ components_.T
        (uncentered, as the online PCA gain ||P x||^2 is).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        check_is_fitted(self)
        X = self._checked_rows(X)
        return X @ self._components_for_transform().T

    @serialized
    def inverse_transform(self, X):
        """Map projections back to the input space: X @ components_, the
        points of the current subspace whose coordinates X holds.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        Z = _as_float64(X, "X")
        if Z.ndim != 2 or Z.shape[1] != self.n_components_:
            raise ValueError(f"X must have shape (n_samples, {self.n_components_}), "
                             f"got {Z.shape}")
        _check_finite(Z, "X")
        return Z @ self._components_for_transform()

    def _checked_rows(self, X):
        X_in = X
        X = self._vectors(X)
        self._check_features(X.shape[1], "X", X_in)
        _check_finite(X, "X")
        return X

    @serialized
    def score(self, X, y=None):
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
        check_is_fitted(self)
        X = self._checked_rows(X)
        # a power-of-two scaling: the squares neither over- nor underflow
        u = float(_pow2_floor(X, axis=None))
        X = X / u
        total = float(np.einsum("ij,ij->", X, X))
        if total == 0.0:
            return 1.0
        return min(1.0, self._captured(X) / total)

    def _captured(self, X):
        V = self.components_
        Z = X @ V.T
        return float(np.einsum("ij,ij->", Z, Z))

    # -- attributes -----------------------------------------------------------------
    @serialized
    def _scalar(self, name):
        if not self.__sklearn_is_fitted__():
            check_is_fitted(self)       # scikit-learn's NotFittedError
        return float(self.state_[name][0])

    @property
    def n_trials_(self):
        """Trials played so far."""
        return int(self._scalar("t"))

    @property
    def cumulative_gain_(self):
        """Sum over trials of the gain tr(P_t X_t) received (MEG and GD: of its
        expectation tr(W_t X_t))."""
        return self._scalar("gain")

    @property
    @serialized
    def best_gain_(self):
        """lambda_{1:k}(sum_t X_t): the gain of the best fixed rank-k projection in
        hindsight (through the eigen-solver chain, which does not fail on a
        finite matrix)."""
        check_is_fitted(self)
        cache = self.__dict__.get("_regret_cache")
        t = self.n_trials_
        if cache is None or cache[0] != t:
            k = self.n_components_
            if t == 0:
                best = 0.0
            else:
                code, w, _, _, _ = eigh_top(self.cumulative_matrix(), k, False)
                raise_for(code, f"{type(self).__name__}.best_gain_")
                best = float(w.sum())
            cache = (t, best)
            self._regret_cache = cache
        return cache[1]

    @property
    @serialized
    def regret_(self):
        """lambda_{1:k}(sum_t X_t) - cumulative_gain_."""
        return self.best_gain_ - self.cumulative_gain_

    def __setstate__(self, state):
        # a state from another layout (an older streamfit's flat float64
        # vector, say) would be read field by field wrongly: refuse it here
        record = state.get("state_")
        if (record is not None and self._STATE_DTYPE is not None
                and getattr(record, "dtype", None) != self._STATE_DTYPE):
            raise ValueError(f"this {type(self).__name__} was pickled with another state "
                             f"layout ({getattr(record, 'dtype', type(record).__name__)}), "
                             f"not this streamfit's; fit a new estimator")
        super().__setstate__(state)
        if record is not None:
            _check_loaded(self)

    def _loaded_inconsistency(self):
        """(attribute, what is wrong) for a loaded state that the shared
        checks (_check_loaded) pass but this family cannot use, else None."""
        return None

    def __copy__(self):
        # state arrays are updated in place: a shallow copy must not share them
        return copy.deepcopy(self)


# arrays whose first dimension is a count of rows (a buffer, the solver's
# block), not the instances' dimension
_ROW_ARRAYS = ("rows_", "block_", "history_")


def _loaded_error(est, name, what):
    return ValueError(f"{type(est).__name__} pickle: {name} {what} (a corrupted or foreign "
                      f"pickle?); it was not used")


def _check_loaded(est):
    """Every attribute of a fitted state loaded by __setstate__ that the
    kernels read, checked before any is used: the sizes as integers in range,
    each array float64, C-ordered, finite and of the sizes those give (an
    n x n matrix, an n-vector, or empty where the configuration has none),
    the solver's block orthonormal, the fitted settings among their values.
    The state record's fields are checked by the kernel at the next call."""
    d = vars(est)
    missing = [name for name in (*type(est)._STATE_NAMES, "n_features_in_", "n_components_",
                                 "instances_", "_rng", "_fitted_random_state")
               if name not in d]
    if missing:
        raise _loaded_error(est, "state", f"lacks {missing}")
    if not isinstance(d["_rng"], np.random.Generator):
        raise _loaded_error(est, "_rng", f"is a {type(d['_rng']).__name__}, expected a "
                                         f"numpy Generator")
    _check_loaded_record(est, d["state_"])
    for name in type(est)._LOADED_ARRAYS:
        if not isinstance(d.get(name), np.ndarray):
            raise _loaded_error(est, name, f"is a {type(d.get(name)).__name__}, expected "
                                           f"an array")
    n, k = d.get("n_features_in_"), d.get("n_components_")
    for name, value in (("n_features_in_", n), ("n_components_", k)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise _loaded_error(est, name, f"is {value!r}, expected an integer >= 1")
    if k > n:
        raise _loaded_error(est, "n_components_", f"is {k}, more than n_features_in_ = {n}")
    if d.get("instances_") not in ("vector", "dense"):
        raise _loaded_error(est, "instances_", f"is {d.get('instances_')!r}, expected "
                                               f"'vector' or 'dense'")
    for name in type(est)._LOADED_ARRAYS:
        a = d[name]
        if a.dtype != np.float64 or not a.flags.c_contiguous or a.ndim not in (1, 2):
            raise _loaded_error(est, name, f"is a {a.dtype} array of {a.ndim} dimensions "
                                           f"(C-ordered: {a.flags.c_contiguous}), expected "
                                           f"C-ordered float64 of 1 or 2")
        if a.ndim == 1:
            ok = a.shape[0] in (0, n)
        elif name in _ROW_ARRAYS:
            ok = a.shape[1] == n or a.size == 0
        else:
            ok = a.shape in ((n, n), (0, 0))
        if not ok:
            raise _loaded_error(est, name, f"has shape {a.shape}, which does not fit "
                                           f"n_features_in_ = {n}")
        if not np.isfinite(a).all():
            raise _loaded_error(est, name, "holds a non-finite value")
    block = d.get("block_")
    if block is not None:
        b = block.shape[0]
        if not k <= b <= n:
            raise _loaded_error(est, "block_", f"has {b} rows, expected between "
                                               f"n_components_ = {k} and {n}")
        if np.abs(block @ block.T - np.eye(b)).max() > 1e-8:
            raise _loaded_error(est, "block_", "rows are not orthonormal")
    for name, allowed in type(est)._LOADED_CHOICES.items():
        if name in d and not any(d[name] == v and type(d[name]) is type(v) for v in allowed):
            raise _loaded_error(est, name, f"is {d[name]!r}, expected one of {allowed}")
    problem = est._loaded_inconsistency()
    if problem is not None:
        raise _loaded_error(est, *problem)


def _check_loaded_record(est, record):
    # the record's counts as the kernels read them (>= 0, exact in a double),
    # its real fields finite: what the estimator's attributes (n_trials_,
    # cumulative_gain_, regret_) report before any call reaches a kernel
    if not isinstance(record, np.ndarray) or record.shape != (1,):
        raise _loaded_error(est, "state_", "is not a one-element record")

    def walk(rec, prefix):
        for field in rec.dtype.names:
            value, name = rec[field], f"state_[{prefix}{field!r}]"
            if value.dtype.names is not None:
                walk(value, f"{prefix}{field!r}][")
            elif value.dtype.kind == "i":
                if not 0 <= int(value[0]) < 2 ** 53:
                    raise _loaded_error(est, name, f"is {int(value[0])}, expected a count "
                                                   f"between 0 and 2^53")
            elif not np.isfinite(value).all():
                raise _loaded_error(est, name, f"is {value[0]}, expected a finite number")

    walk(record, "")
