"""Online low-rank matrix quantile regression by Riemannian sub-gradient descent.

The estimator converts input and parameters; the whole state -- the
factors, the schedule's records and residual window, the work space -- is
one compiled object, :class:`streamfit._kernels._lowrank.LowRankState`,
which checks what enters it, runs the sample loop and commits a call by
swapping its buffers. Publishing a fresh fit is one assignment.
"""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Literal

import numpy as np
from sklearn.metrics import d2_pinball_score, r2_score

from .._base import StreamRegressor
from .._kernels import _lowrank as _k
from .._validation import _as_float64, check_scalar, check_vector
from ..exceptions import _warn_if_warming_up
from ..schedules import ConstantSchedule, InverseTimeSchedule, StatisticalSchedule, \
    resolve_schedule

if TYPE_CHECKING:
    from typing import Any, TypeVar

    from .._typing import ArrayIn, Float64Array, ScheduleLike

    # fit and partial_fit return the estimator they were called on
    _LowRankT = TypeVar("_LowRankT", bound="OnlineLowRankQuantileRegressor")

__all__ = ["OnlineLowRankQuantileRegressor"]

_LOSSES = {"quantile": _k.LOSS_CHECK, "squared": _k.LOSS_SQUARED}
_KERNEL_KINDS = (StatisticalSchedule, ConstantSchedule, InverseTimeSchedule)
_REFIT = "Set it back, or call fit() to start afresh"
_KINDS = {"statistical": _k.KIND_STATISTICAL, "constant": _k.KIND_CONSTANT,
          "inverse_time": _k.KIND_INVERSE_TIME}


def _parse_X(X, shape, name="X"):
    """(form, X for the state object, n, (d1, d2)) for the three forms of X
    (see the class docstring): converted and shaped; the state object
    checks the values (finite, indices in range) as it reads them."""
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
        return "rank1", (A, B), A.shape[0], (A.shape[1], B.shape[1])
    if isinstance(X, np.ndarray) and X.dtype.kind in "iu":
        if X.ndim != 2 or X.shape[1] != 2:
            raise ValueError(f"{name} as an integer array must be (T, 2) (row, column) "
                             f"index pairs of matrix completion, got shape {X.shape}")
        if shape is None:
            raise ValueError(f"{name} holds index pairs (matrix completion): give the "
                             f"matrix's size as shape=(d1, d2)")
        if X.dtype.kind == "u" and X.size and X.max() > np.iinfo(np.intp).max:
            raise ValueError(f"{name}: an index pair lies outside shape={tuple(shape)}")
        return "index", np.ascontiguousarray(X, dtype=np.intp), X.shape[0], tuple(shape)
    arr = _as_float64(X, name)
    if arr.ndim != 3:
        raise ValueError(f"{name} must be a float array of shape (T, d1, d2), a tuple (A, B) "
                         f"of rank-one factors or an integer (T, 2) array of index pairs, "
                         f"got an array of shape {arr.shape}")
    if arr.shape[1] == 0 or arr.shape[2] == 0:
        raise ValueError(f"{name}: d1 and d2 must be at least 1, got shape {arr.shape}")
    return "dense", arr, arr.shape[0], arr.shape[1:]


def _parse_x(x, shape, name="x"):
    """(x for the state object, (d1, d2)) for one sample: a (d1, d2) array,
    a pair of vectors (a, b), or a pair of ints (i, j)."""
    if isinstance(x, (tuple, list)) and len(x) == 2 and all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in x):
        if shape is None:
            raise ValueError(f"{name} is an index pair (matrix completion): give the "
                             f"matrix's size as shape=(d1, d2)")
        i, j = int(x[0]), int(x[1])
        if not (0 <= i < shape[0] and 0 <= j < shape[1]):
            raise ValueError(f"{name}: the index pair ({i}, {j}) lies outside "
                             f"shape={tuple(shape)}")
        return (i, j), tuple(shape)
    if isinstance(x, tuple):
        if len(x) != 2:
            raise ValueError(f"{name} as a tuple must be (a, b), the factors of a rank-one "
                             f"sample a b^T, or (i, j), got a tuple of {len(x)} items")
        a = _as_float64(x[0], f"{name}[0] (a)")
        b = _as_float64(x[1], f"{name}[1] (b)")
        if a.ndim != 1 or b.ndim != 1 or not a.size or not b.size:
            raise ValueError(f"{name} = (a, b) needs two non-empty vectors, got shapes "
                             f"{a.shape} and {b.shape}")
        return (a, b), (a.shape[0], b.shape[0])
    arr = _as_float64(x, name)
    if arr.ndim != 2 or not arr.size:
        raise ValueError(f"{name} must be a (d1, d2) array, a pair (a, b) of vectors or a "
                         f"pair (i, j) of ints, got an array of shape {arr.shape}")
    return arr, arr.shape


def _native_x(x, shape):
    """x as the state object takes it, converted only when it is not
    already: a float64 C-ordered (d1, d2) array, a pair of such vectors, or
    a pair of ints."""
    if type(x) is tuple and len(x) == 2:
        a, b = x
        if type(a) is int and type(b) is int:
            return x            # the state object checks the range
        if (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == np.float64
                and b.dtype == np.float64 and a.ndim == 1 and b.ndim == 1
                and a.flags.c_contiguous and b.flags.c_contiguous):
            return x
    elif (type(x) is np.ndarray and x.dtype == np.float64 and x.ndim == 2
          and x.flags.c_contiguous):
        return x
    xk, dims = _parse_x(x, shape)
    if tuple(dims) != tuple(shape):
        raise ValueError(f"x describes a matrix of shape {tuple(dims)}, but this "
                         f"estimator learnt from {tuple(shape)}")
    return xk


def _target(y, name="y"):
    if isinstance(y, (bool, np.bool_)) or not isinstance(y, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {y!r}")
    return float(y)


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

    **One sample at a time**: ``learn_one(x, y)`` and ``predict_one(x)``
    (river's names) take one matrix: a (d1, d2) array, a pair (a, b) of
    vectors, or a pair (i, j) of ints; they cost one compiled call.

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

    One event at a time:

    >>> est = est.learn_one((A[0], B[0]), float(y[0]))
    >>> round(est.predict_one((3, 4)) - float(est.coef_[3, 4]), 12)
    0.0
    """

    def __init__(self, rank: int = 1, tau: float = 0.5, *,
                 loss: Literal["quantile", "squared"] = "quantile",
                 schedule: ScheduleLike = "statistical",
                 shape: tuple[int, int] | None = None) -> None:
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

    def _params(self, dims):
        """The state object's parameter record (a dict) for matrices of
        shape ``dims``, every parameter checked."""
        schedule = self._check_params(dims)
        d1, d2 = dims
        r = int(self.rank)
        if r > min(d1, d2):
            raise ValueError(f"rank={r} exceeds min(d1, d2) = {min(d1, d2)}")
        loss = _LOSSES[self.loss]
        params = schedule._kernel_params(loss, "single", r * (d1 + d2 - r))
        # The state object runs the vector family's schedule, warm-start
        # clock included, but a warm start of the factors is not offered, and
        # the clock alone (a fresh M treated as t0 iterates old) would only
        # shrink the first steps.
        if params.pop("t0", 0.0):
            raise ValueError("schedule.t0 (a warm start's clock) is not supported by "
                             "OnlineLowRankQuantileRegressor; leave it at 0")
        params.update(tau=float(self.tau), loss=loss, mode=_k.MODE_SINGLE)
        return params

    def _state_for(self, dims):
        """The state object to learn into: the fitted one with the current
        parameters (those that belong to the learnt state must not have
        changed), or a fresh one (not yet published)."""
        state = self.__dict__.get("_state")
        params = self._params(dims)
        if state is None:
            return _k.LowRankState(dims, int(self.rank), params), True
        if state.rank != self.rank:
            raise ValueError(f"rank changed from {state.rank} to {self.rank!r} since the "
                             f"first call; the learnt state belongs to the old rank. {_REFIT}")
        if tuple(dims) != state.shape:
            raise ValueError(f"X describes matrices of shape {tuple(dims)}, but this "
                             f"estimator learnt from {state.shape}")
        try:
            state.set_params(params)
        except ValueError as exc:
            raise ValueError(f"{exc}. {_REFIT}") from None
        return state, False

    def _fitted_shape(self):
        state = self.__dict__.get("_state")
        return state.shape if state is not None else self._shape()

    # -- fitting ----------------------------------------------------------------
    def partial_fit(self: _LowRankT, X: ArrayIn, y: ArrayIn) -> _LowRankT:
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
        form, Xk, n, dims = _parse_X(X, self._fitted_shape())
        y = check_vector(y, n, "y", finite=False)
        state, fresh = self._state_for(dims)
        if n == 0:
            return self
        state.learn(Xk, y)
        if fresh:
            self._state = state
        return self

    def fit(self: _LowRankT, X: ArrayIn, y: ArrayIn) -> _LowRankT:
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
        form, Xk, n, dims = _parse_X(X, self._shape())
        if n == 0:
            raise ValueError(f"X has 0 samples while a minimum of 1 is required by "
                             f"{type(self).__name__}.fit; the estimator keeps its "
                             "previous state")
        y = check_vector(y, n, "y", finite=False)
        params = self._params(dims)
        state = _k.LowRankState(dims, int(self.rank), params)
        state.learn(Xk, y)
        self._state = state
        _warn_if_warming_up(self, [params], state.n_updates, n, after=1)
        return self

    def learn_one(self: _LowRankT, x: ArrayIn, y: float) -> _LowRankT:
        """Learn from one sample: one step.

        The learnt state's settings (rank, tau, loss, the schedule's kind)
        are compared on every call; new constants of the same schedule kind
        take effect at the next ``partial_fit`` or ``fit`` (which check every
        parameter).

        Parameters
        ----------
        x : ndarray (d1, d2), tuple (a, b) of vectors or tuple (i, j) of ints
            The sensing matrix: dense, rank one (a b^T) or the entry (i, j)
            (matrix completion; needs ``shape``).
        y : float

        Returns
        -------
        self

        Examples
        --------
        >>> from streamfit.lowrank import OnlineLowRankQuantileRegressor
        >>> from streamfit.schedules import ConstantSchedule
        >>> est = OnlineLowRankQuantileRegressor(
        ...     rank=1, shape=(2, 2), schedule=ConstantSchedule(0.5))
        >>> est.learn_one((0, 1), 3.0).predict_one((0, 1))
        0.25
        """
        state = self.__dict__.get("_state")
        if state is None or not self._same_settings(state):
            # the first sample, or changed settings: every parameter checked
            xk, dims = _parse_x(x, self._fitted_shape())
            y = _target(y)
            state, fresh = self._state_for(dims)
            state.learn_one(xk, y)
            if fresh:
                self._state = state
            return self
        state.learn_one(_native_x(x, state.shape), _target(y))
        return self

    def _same_settings(self, state):
        """Whether the parameters that belong to the learnt state (rank,
        tau, loss, the schedule's kind) are still those it was made with:
        a few compares, so that a stream of learn_one calls does not check
        every schedule constant each row (new constants of the same kind take
        effect at the next partial_fit or fit, which check them)."""
        kind = _KINDS.get(self.schedule) if isinstance(self.schedule, str) else \
            getattr(type(self.schedule), "_kind", None)
        return (self.rank == state.rank and self.tau == state.tau
                and _LOSSES.get(self.loss) == state.loss_code and kind == state.kind
                and (self.shape is None or tuple(self.shape) == state.shape))

    # -- learnt attributes ------------------------------------------------------
    @property
    def coef_(self) -> Float64Array:
        """The iterate M, shape (d1, d2)."""
        return self._fitted_state().coef

    @property
    def U_(self) -> Float64Array:
        """Left singular vectors of M, shape (d1, rank)."""
        return self._fitted_state().U.T.copy()

    @property
    def V_(self) -> Float64Array:
        """Right singular vectors of M, shape (d2, rank)."""
        return self._fitted_state().V.T.copy()

    @property
    def singular_values_(self) -> Float64Array:
        """Singular values of M, descending (0 for unused directions)."""
        return self._fitted_state().s

    @property
    def n_samples_seen_(self) -> int:
        """Samples received so far."""
        return self._fitted_state().n_seen

    @property
    def n_updates_(self) -> int:
        """Steps taken (the statistical schedule's warm-up takes none)."""
        return self._fitted_state().n_updates

    @property
    def cumulative_loss_(self) -> float:
        """Prequential loss: each sample's loss under the iterate before its step."""
        return self._fitted_state().loss

    @property
    def schedule_state_(self) -> dict[str, Any]:
        """The schedule's phase, last stepsize, D0, b0 and Cl (as in the vector case)."""
        return self._fitted_state().schedule_state

    def predict(self, X: ArrayIn) -> Float64Array:
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
        state = self._fitted_state()
        form, Xk, n, dims = _parse_X(X, state.shape)
        if tuple(dims) != state.shape:
            raise ValueError(f"X describes matrices of shape {tuple(dims)}, but this "
                             f"estimator learnt from {state.shape}")
        return state.predict(Xk)

    def predict_one(self, x: ArrayIn) -> float:
        """<X, M> for one sample.

        Parameters
        ----------
        x : ndarray (d1, d2), tuple (a, b) of vectors or tuple (i, j) of ints

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit.lowrank import OnlineLowRankQuantileRegressor
        >>> X = np.random.default_rng(0).standard_normal((200, 4, 4))
        >>> est = OnlineLowRankQuantileRegressor(rank=2).fit(X, X[:, 0, 0])
        >>> bool(abs(est.predict_one(X[0]) - est.predict(X[:1])[0]) < 1e-12)
        True
        """
        state = self._fitted_state()
        return state.predict_one(_native_x(x, state.shape))

    def score(self, X: ArrayIn, y: ArrayIn, sample_weight: ArrayIn | None = None) -> float:
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
