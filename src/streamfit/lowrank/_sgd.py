"""Online low-rank matrix quantile regression by Riemannian sub-gradient descent.

Python validates input and owns the state; ``streamfit._kernels._lowrank``
runs the whole sample loop without the GIL on working copies, which a call
publishes with one assignment when it ends (or is interrupted).
"""
from __future__ import annotations

import numbers

import numpy as np
from sklearn.metrics import d2_pinball_score, r2_score
from sklearn.utils.validation import check_is_fitted

from .._base import StreamRegressor, deferred_signals, serialized
from .._errors import ERR_INTERRUPTED, ERR_SCALE, OK, raise_for
from .._kernels import _lowrank as _k
from .._validation import _as_float64, _check_finite, check_scalar, check_vector
from ..exceptions import _warn_if_warming_up
from ..schedules import ConstantSchedule, InverseTimeSchedule, StatisticalSchedule, \
    resolve_schedule

__all__ = ["OnlineLowRankQuantileRegressor"]

_LOSSES = {"quantile": _k.LOSS_CHECK, "squared": _k.LOSS_SQUARED}
_KERNEL_KINDS = (StatisticalSchedule, ConstantSchedule, InverseTimeSchedule)


class _LowRankFit:
    """The whole learnt state: the factors (U (r, d1) and V (r, d2) hold the
    singular vectors as rows; s the singular values, 0 for unused ones), the
    schedule's state and parameter records and its residual window."""

    __slots__ = ("U", "s", "V", "state", "params", "window")

    def __getstate__(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state):
        if not isinstance(state, dict) or set(state) != set(self.__slots__):
            raise ValueError("low-rank fit pickle: not the fields "
                             f"{self.__slots__} (a corrupted or foreign pickle?)")
        U, s, V, window = (state[k] for k in ("U", "s", "V", "window"))
        for name, a, ndim in (("U", U, 2), ("s", s, 1), ("V", V, 2), ("window", window, 1)):
            if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.ndim == ndim
                    and a.flags.c_contiguous):
                raise ValueError(f"low-rank fit pickle: {name} is not a C-ordered float64 "
                                 f"array of {ndim} dimensions (a corrupted or foreign "
                                 f"pickle?); it was not used")
            if name != "window" and not np.isfinite(a).all():
                raise ValueError(f"low-rank fit pickle: {name} holds a non-finite value")
        if not U.shape[0] == s.shape[0] == V.shape[0]:
            raise ValueError(f"low-rank fit pickle: U, s and V disagree on the rank "
                             f"({U.shape[0]}, {s.shape[0]}, {V.shape[0]})")
        if (s < 0).any():
            raise ValueError("low-rank fit pickle: s holds a negative singular value")
        for k, v in state.items():
            setattr(self, k, v)

    def copy(self):
        new = _LowRankFit()
        new.U, new.s, new.V = self.U.copy(), self.s.copy(), self.V.copy()
        new.state, new.window = self.state.copy(), self.window.copy()
        new.params = self.params
        return new


def _parse_X(X, shape, name="X"):
    """(form, arrays, n, (d1, d2)) for the three forms of X (see the class
    docstring); everything checked (finite, shapes, index range)."""
    if isinstance(X, tuple):
        if len(X) != 2:
            raise ValueError(f"{name} as a tuple must be (A, B), the factors of rank-one "
                             f"samples a_t b_t^T, got a tuple of {len(X)} items")
        A = _as_float64(X[0], f"{name}[0] (A)")
        B = _as_float64(X[1], f"{name}[1] (B)")
        if A.ndim != 2 or B.ndim != 2 or A.shape[0] != B.shape[0]:
            raise ValueError(f"{name} = (A, B) needs A of shape (T, d1) and B of shape "
                             f"(T, d2) with the same T, got {A.shape} and {B.shape}")
        if A.shape[1] == 0 or B.shape[1] == 0:
            raise ValueError(f"{name} = (A, B): d1 and d2 must be at least 1, got "
                             f"{A.shape} and {B.shape}")
        _check_finite(A, f"{name}[0] (A)")
        _check_finite(B, f"{name}[1] (B)")
        return "rank1", (A, B), A.shape[0], (A.shape[1], B.shape[1])
    if isinstance(X, np.ndarray) and X.dtype.kind in "iu":
        if X.ndim != 2 or X.shape[1] != 2:
            raise ValueError(f"{name} as an integer array must be (T, 2) (row, column) "
                             f"index pairs of matrix completion, got shape {X.shape}")
        if shape is None:
            raise ValueError(f"{name} holds index pairs (matrix completion): give the "
                             f"matrix's size as shape=(d1, d2)")
        idx = np.ascontiguousarray(X, dtype=np.intp)
        if idx.size and (idx.min(axis=0) < 0).any() or \
                (idx.size and ((idx[:, 0] >= shape[0]).any() or (idx[:, 1] >= shape[1]).any())):
            raise ValueError(f"{name}: an index pair lies outside shape={tuple(shape)}")
        return "index", (idx,), idx.shape[0], tuple(shape)
    arr = _as_float64(X, name)
    if arr.ndim != 3:
        raise ValueError(f"{name} must be a float array of shape (T, d1, d2), a tuple (A, B) "
                         f"of rank-one factors or an integer (T, 2) array of index pairs, "
                         f"got an array of shape {arr.shape}")
    if arr.shape[1] == 0 or arr.shape[2] == 0:
        raise ValueError(f"{name}: d1 and d2 must be at least 1, got shape {arr.shape}")
    _check_finite(arr, name)
    return "dense", (arr,), arr.shape[0], arr.shape[1:]


class OnlineLowRankQuantileRegressor(StreamRegressor):
    """Online low-rank matrix quantile regression (or least squares) by
    Riemannian sub-gradient descent on the manifold of rank-r matrices.

    The model is Y_t = <X_t, M*> + xi_t with M* of shape (d1, d2) and rank r,
    the loss rho_tau(Y_t - <X_t, M>) (Shen, Xia & Zhou 2025,
    Section 5). Each sample takes one step
    M <- SVD_r(M - eta_t P_T(G_t)), G_t = (1{Y_t < <X_t, M_t>} - tau) X_t,
    P_T(G) = U U^T G + G V V^T - U U^T G V V^T the projection on the tangent
    space at M = U diag(s) V^T. The rank-r truncation is computed from the
    factored form [U, Q_u] K [V, Q_v]^T: small QRs and the SVD of a 2r x 2r
    core ((r + 1) x (r + 1) for rank-one X), never an SVD of a d1 x d2 matrix
    once M has rank r. Cost per sample: O((d1 + d2) r^2) for rank-one sensing
    and matrix completion, O(d1 d2 r) for dense X.

    The start is M = 0. While M has rank k < r the step projects on the
    tangent cone of the rank <= r matrices instead (Schneider & Uschmajew
    2015): the unused singular directions take the top r - k singular pairs
    of (I - UU^T) G (I - VV^T) (for dense X this takes one d1 x d2 SVD, so
    generically in the first step only; for rank-one X they are the
    projected factors).

    Parameters
    ----------
    rank : int
        r, the rank of the iterate (at most min(d1, d2); dense X needs
        2 r <= min(d1, d2)).
    tau : float in (0, 1)
        The quantile (ignored with ``loss="squared"``).
    loss : {"quantile", "squared"}
        "squared" is the online low-rank least-squares version of the same
        algorithm (gradient -(Y - <X, M>) X), with the vector family's
        least-squares schedule.
    schedule : "statistical", "constant", "inverse_time" or a schedule object
        :class:`~streamfit.schedules.StatisticalSchedule` (default),
        :class:`~streamfit.schedules.ConstantSchedule` or
        :class:`~streamfit.schedules.InverseTimeSchedule`. The statistical
        schedule is the vector family's single-sample one (same code, same
        constants: geometric phase one, then (b0 / Cl) Ca / (t - t1 + Cb d)),
        with d the manifold's dimension d_eff = r (d1 + d2 - r) and Cl the
        mean eigenvalue of E[vec X vec X^T], mean ||X||_F^2 / (d1 d2), both
        estimated from the stream as in the vector case (D0, b0 and the
        plateau test from the residuals).
    shape : (int, int) or None
        (d1, d2); needed for matrix completion (X given as index pairs),
        checked against X otherwise.

    Attributes
    ----------
    coef_ : ndarray of shape (d1, d2)
        The iterate M.
    U_, singular_values_, V_ : ndarrays of shape (d1, r), (r,), (d2, r)
        Its factors (M = U_ diag(singular_values_) V_^T); columns of unused
        singular directions (value 0) are 0.
    n_samples_seen_, n_updates_, cumulative_loss_, schedule_state_

    Notes
    -----
    **Forms of X** (``partial_fit``, ``fit``, ``predict``, ``score``):

    - a float array of shape (T, d1, d2): dense sensing matrices;
    - a tuple ``(A, B)`` of float arrays of shapes (T, d1) and (T, d2):
      rank-one sensing X_t = A[t] B[t]^T (``np.outer``);
    - an integer array of shape (T, 2) of (row, column) pairs: matrix
      completion, X_t = e_i e_j^T, i.e. y_t observes entry (i, j); needs
      ``shape``.

    Forms may be mixed between calls (all describe matrices of one shape).

    **Mid-stream changes**: ``rank``, ``tau``, ``loss``, ``shape`` and the
    schedule's kind are refused with a ValueError naming the parameter (the
    learnt state belongs to the old value; ``fit`` starts afresh); new
    constants of the same schedule kind take effect at the next call.

    **Interrupts and failures** as everywhere in streamfit: a signal handler
    that raises (Ctrl-C) stops a call between two samples; the estimator then
    holds the state after the samples applied and the exception is re-raised
    with a note saying how many. Bad input (NaN, wrong shapes, an index out of
    range, complex or string data) is refused before anything is learnt, and
    any other failure leaves the estimator as before the call. Results do not
    depend on how a stream is split into calls (bit for bit); they use BLAS
    and LAPACK (scipy's), so another BLAS may change the last bits.

    Not (yet) here: sample weights, Polyak-Ruppert averaging, user
    ``stepsizes()`` schedules, intercepts.

    Examples
    --------
    Matrix completion of a 40 x 30 matrix of rank 2 from noisy entries:

    >>> import numpy as np
    >>> from streamfit.lowrank import OnlineLowRankQuantileRegressor
    >>> rng = np.random.default_rng(0)
    >>> M = rng.standard_normal((40, 2)) @ rng.standard_normal((2, 30))
    >>> rows, cols = rng.integers(0, 40, 60000), rng.integers(0, 30, 60000)
    >>> idx = np.column_stack([rows, cols])
    >>> y = M[rows, cols] + 0.1 * rng.standard_t(1.1, 60000)
    >>> est = OnlineLowRankQuantileRegressor(rank=2, shape=(40, 30))
    >>> for start in range(0, 60000, 10000):          # a stream, block by block
    ...     est = est.partial_fit(idx[start:start + 10000], y[start:start + 10000])
    >>> err = np.linalg.norm(est.coef_ - M) / np.linalg.norm(M)
    >>> bool(err < 0.05), est.n_samples_seen_
    (True, 60000)

    Rank-one sensing, X_t = a_t b_t^T:

    >>> A, B = rng.standard_normal((20000, 40)), rng.standard_normal((20000, 30))
    >>> y = np.einsum("ti,ij,tj->t", A, M, B) + rng.standard_normal(20000)
    >>> est = OnlineLowRankQuantileRegressor(rank=2).fit((A, B), y)
    >>> bool(np.linalg.norm(est.coef_ - M) < 0.1 * np.linalg.norm(M))
    True
    """

    _TRANSIENT_ATTRS = ()

    def __init__(self, rank=1, tau=0.5, *, loss="quantile", schedule="statistical",
                 shape=None):
        self.rank = rank
        self.tau = tau
        self.loss = loss
        self.schedule = schedule
        self.shape = shape

    # -- scikit-learn -----------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = False
        tags.input_tags.three_d_array = True
        return tags

    # -- parameters -------------------------------------------------------------
    def _check_params(self, dims):
        check_scalar(self.rank, "rank", kind=numbers.Integral, low=1)
        check_scalar(self.tau, "tau", low=0, high=1, low_open=True, high_open=True)
        if not isinstance(self.loss, str) or self.loss not in _LOSSES:
            raise ValueError(f"loss must be 'quantile' or 'squared', got {self.loss!r}")
        shape = self._shape()
        if shape is not None and dims is not None and tuple(dims) != shape:
            raise ValueError(f"X describes matrices of shape {tuple(dims)}, but "
                             f"shape={shape}")
        schedule = resolve_schedule(self.schedule)
        if not isinstance(schedule, _KERNEL_KINDS):
            raise TypeError(f"schedule must be 'statistical', 'constant', 'inverse_time' or "
                            f"one of their objects for {type(self).__name__}, got "
                            f"{self.schedule!r} (user stepsizes() schedules are not "
                            f"supported here)")
        return schedule

    def _shape(self):
        if self.shape is None:
            return None
        try:
            d1, d2 = self.shape
        except (TypeError, ValueError):
            raise ValueError(f"shape must be a pair (d1, d2), got {self.shape!r}") from None
        for v in (d1, d2):
            check_scalar(v, "shape", kind=numbers.Integral, low=1)
        return int(d1), int(d2)

    def _params_record(self, schedule, d1, d2):
        r = int(self.rank)
        if r > min(d1, d2):
            raise ValueError(f"rank={r} exceeds min(d1, d2) = {min(d1, d2)}")
        deff = r * (d1 + d2 - r)
        loss = _LOSSES[self.loss]
        p = _k.new_params()
        p["tau"] = self.tau
        p["loss"] = loss
        p["mode"] = _k.MODE_SINGLE
        params = schedule._kernel_params(loss, "single", deff)
        # The kernel runs the vector family's schedule (_qr_schedule.pxd),
        # warm-start clock included, but a warm start of the factors is not
        # offered, and the clock alone (a fresh M treated as t0 iterates
        # old) would only shrink the first steps.
        if params.pop("t0", 0.0):
            raise ValueError("schedule.t0 (a warm start's clock) is not supported by "
                             "OnlineLowRankQuantileRegressor; leave it at 0")
        for key, value in params.items():
            p[key] = value
        p.flags.writeable = False
        return p

    # -- fitting ----------------------------------------------------------------
    @serialized
    def partial_fit(self, X, y):
        """Learn from one block of the stream: one step per sample, in order.

        Parameters
        ----------
        X : ndarray (T, d1, d2), tuple (A, B) or integer ndarray (T, 2)
            The sensing matrices, in one of the forms of the class docstring.
        y : array-like of shape (T,)

        Returns
        -------
        self

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit.lowrank import OnlineLowRankQuantileRegressor
        >>> est = OnlineLowRankQuantileRegressor(rank=1, shape=(3, 3))
        >>> est = est.partial_fit(np.array([[0, 1], [2, 2]]), [1.0, -2.0])
        >>> est.n_samples_seen_
        2
        """
        fit = self.__dict__.get("_fit_")
        shape = None
        if fit is not None:
            shape = (fit.U.shape[1], fit.V.shape[1])
        form, arrays, n, dims = _parse_X(X, shape or self._shape())
        y = check_vector(y, n, "y")
        schedule = self._check_params(dims)
        if fit is not None and fit.s.shape[0] != self.rank:
            raise ValueError(f"rank changed from {fit.s.shape[0]} to {self.rank!r} since "
                             "the first call; the learnt state belongs to the old rank. "
                             "Set it back, or call fit() to start afresh")
        params = self._params_record(schedule, *dims)
        if fit is None:
            if n == 0:
                return self
            work = self._fresh(dims, params)
        else:
            if dims != shape:
                raise ValueError(f"X describes matrices of shape {dims}, but this "
                                 f"estimator learnt from {shape}")
            self._check_continuation(fit.params, params, fit.s.shape[0])
            if n == 0:
                return self
            work = fit.copy()
            work.params = params
        self._run(work, form, arrays, y, "partial_fit", fresh=False)
        return self

    @serialized
    def fit(self, X, y):
        """Forget what was learnt and make one pass over (X, y).

        Parameters
        ----------
        X : ndarray (T, d1, d2), tuple (A, B) or integer ndarray (T, 2)
        y : array-like of shape (T,)

        Returns
        -------
        self

        Warns
        -----
        streamfit.exceptions.WarmupWarning
            When the statistical schedule's warm-up (``n_warmup`` samples,
            default 50) outlasts X: no step was taken, M is still 0.

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit.lowrank import OnlineLowRankQuantileRegressor
        >>> X = np.random.default_rng(0).standard_normal((60, 4, 4))
        >>> OnlineLowRankQuantileRegressor(rank=2).fit(X, X[:, 0, 0]).coef_.shape
        (4, 4)
        """
        form, arrays, n, dims = _parse_X(X, self._shape())
        if n == 0:
            raise ValueError(f"X has 0 samples while a minimum of 1 is required by "
                             f"{type(self).__name__}.fit; the estimator keeps its "
                             "previous state")
        y = check_vector(y, n, "y")
        schedule = self._check_params(dims)
        params = self._params_record(schedule, *dims)
        work = self._fresh(dims, params)
        self._run(work, form, arrays, y, "fit", fresh=True)
        _warn_if_warming_up(self, params, int(work.state["n_updates"][0]), n, after=1)
        return self

    def _fresh(self, dims, params):
        d1, d2 = dims
        r = int(self.rank)
        work = _LowRankFit()
        work.U, work.s, work.V = np.zeros((r, d1)), np.zeros(r), np.zeros((r, d2))
        work.state = np.zeros(1, _k.STATE_DTYPE)
        work.params = params
        p = params[0]
        size = int(max(p["window"], p["n_warmup"])) + 1 if p["kind"] == _k.KIND_STATISTICAL \
            else 0
        work.window = np.zeros(size)
        return work

    @staticmethod
    def _check_continuation(old_params, params, rank_old):
        old, new = old_params[0], params[0]
        names = {v: k for k, v in _LOSSES.items()}
        for name, before, now in (("loss", names[int(old["loss"])], names[int(new["loss"])]),
                                  ("tau", float(old["tau"]), float(new["tau"])),
                                  ("schedule", int(old["kind"]), int(new["kind"]))):
            if before != now:
                what = "kind " if name == "schedule" else ""
                raise ValueError(f"{name} {what}changed from {before!r} to {now!r} since the "
                                 f"first call; the learnt state belongs to the old value. "
                                 f"Set it back, or call fit() to start afresh")
        if new["window"] != old["window"] or new["n_warmup"] != old["n_warmup"]:
            raise ValueError("schedule: window and n_warmup cannot change mid-stream (the "
                             "residual window is sized by them); call fit() to start afresh")

    def _run(self, work, form, arrays, y, method, fresh):
        args = (work.U, work.s, work.V, work.state, work.params, work.window)
        if form == "dense":
            code, done, exc, row = _k.run_dense(arrays[0], y, *args)
        elif form == "rank1":
            code, done, exc, row = _k.run_rank1(arrays[0], arrays[1], y, *args)
        else:
            code, done, exc, row = _k.run_index(arrays[0], y, *args)
        where = f"{type(self).__name__}.{method}"
        if code != OK and code != ERR_INTERRUPTED:
            detail = f"At sample {row} of this call." if row >= 0 else ""
            if code == ERR_SCALE and row >= 0:
                detail = (f"At sample {row} of this call, ||X||^2 or the residual "
                          "y - <X, M> overflows.")
            raise_for(code, where, detail=detail)
        if code == ERR_INTERRUPTED and done == 0 and (fresh or "_fit_" not in self.__dict__):
            if hasattr(exc, "add_note"):
                exc.add_note(f"{where} was interrupted after 0 of its {y.shape[0]} samples: "
                             "the estimator is as it was before the call")
            raise_for(ERR_INTERRUPTED, where, exc=exc)
        with deferred_signals():
            self._fit_ = work
        if code == ERR_INTERRUPTED:
            if hasattr(exc, "add_note"):
                exc.add_note(f"{where} was interrupted after {done} of its {y.shape[0]} "
                             f"samples: the estimator holds the state after them "
                             f"(n_samples_seen_ = {self.n_samples_seen_})")
            raise_for(ERR_INTERRUPTED, where, exc=exc)

    # -- learnt attributes ------------------------------------------------------
    def _fitted(self):
        fit = self.__dict__.get("_fit_")
        if fit is None:
            check_is_fitted(self)
        return fit

    @property
    def coef_(self):
        """The iterate M, shape (d1, d2)."""
        fit = self._fitted()
        return (fit.U.T * fit.s) @ fit.V

    @property
    def U_(self):
        """Left singular vectors of M, shape (d1, rank)."""
        return self._fitted().U.T.copy()

    @property
    def V_(self):
        """Right singular vectors of M, shape (d2, rank)."""
        return self._fitted().V.T.copy()

    @property
    def singular_values_(self):
        """Singular values of M, descending (0 for unused directions)."""
        return self._fitted().s.copy()

    def _field(self, name):
        return self._fitted().state[name][0]

    @property
    def n_samples_seen_(self):
        """Samples received so far."""
        return int(self._field("n_seen"))

    @property
    def n_updates_(self):
        """Steps taken (the statistical schedule's warm-up takes none)."""
        return int(self._field("n_updates"))

    @property
    def cumulative_loss_(self):
        """Prequential loss: each sample's loss under the iterate before its step."""
        return float(self._field("loss"))

    @property
    def schedule_state_(self):
        """The schedule's phase, last stepsize, D0, b0 and Cl (as in the vector case)."""
        s = self._fitted().state[0]
        return {"phase": int(s["phase"]), "stepsize": float(s["last_eta"]),
                "t_switch": int(s["t_switch"]), "d0": float(s["d0"]), "b0": float(s["b0"]),
                "cl": float(s["cl"]), "restarts": int(s["n_restarts"])}

    def predict(self, X):
        """<X_t, M> for each sample.

        Parameters
        ----------
        X : ndarray (T, d1, d2), tuple (A, B) or integer ndarray (T, 2)

        Returns
        -------
        ndarray of shape (T,)

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit.lowrank import OnlineLowRankQuantileRegressor
        >>> est = OnlineLowRankQuantileRegressor(rank=1, shape=(2, 2))
        >>> est = est.fit(np.array([[0, 0]] * 100), np.ones(100))
        >>> est.predict(np.array([[1, 1]])).round(6)
        array([0.])
        """
        fit = self._fitted()
        shape = (fit.U.shape[1], fit.V.shape[1])
        form, arrays, n, dims = _parse_X(X, shape)
        if dims != shape:
            raise ValueError(f"X describes matrices of shape {dims}, but this estimator "
                             f"learnt from {shape}")
        if form == "dense":
            return np.einsum("tij,ij->t", arrays[0], self.coef_)
        if form == "rank1":
            return ((arrays[0] @ fit.U.T) * fit.s * (arrays[1] @ fit.V.T)).sum(axis=1)
        idx = arrays[0]
        return (fit.U.T[idx[:, 0]] * fit.s * fit.V.T[idx[:, 1]]).sum(axis=1)

    def score(self, X, y, sample_weight=None):
        """D^2 pinball at ``tau`` (``loss="quantile"``) or R^2 (``"squared"``).

        Parameters
        ----------
        X : ndarray (T, d1, d2), tuple (A, B) or integer ndarray (T, 2)
        y : array-like of shape (T,)
        sample_weight : array-like of shape (T,) or None

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit.lowrank import OnlineLowRankQuantileRegressor
        >>> X = np.random.default_rng(0).standard_normal((3000, 6, 6))
        >>> y = X[:, 0, 0] + X[:, 1, 1]
        >>> bool(OnlineLowRankQuantileRegressor(rank=2).fit(X, y).score(X, y) > 0.5)
        True
        """
        pred = self.predict(X)
        if self.loss == "squared":
            return float(r2_score(y, pred, sample_weight=sample_weight))
        return float(d2_pinball_score(y, pred, sample_weight=sample_weight, alpha=self.tau))
