"""Online quantile regression and online least squares by (sub-)gradient descent.

The estimators convert input and parameters with scikit-learn's conventions
and drive one compiled state object, :class:`streamfit.kernels.LinearSGD`,
which owns the learnt state, checks what enters it and runs every loop.
"""
from __future__ import annotations

import numbers
import warnings
from typing import TYPE_CHECKING, Literal

import numpy as np
from sklearn.metrics import d2_pinball_score
from sklearn.utils.validation import validate_data

from .._base import StreamRegressor
from .._kernels._quantile import LinearSGD
from .._validation import (as_csr, as_matrix, as_target, as_weights, check_matrix,
                           check_memory, check_scalar, feature_names, fitted_feature_names,
                           is_sparse)
from ..exceptions import _caller_level, _warn_if_warming_up
from ._inference import critical_value

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, TypeVar

    from .._typing import ArrayIn, Float64Array, RandomStateLike, ScheduleLike

    # fit and partial_fit return the estimator they were called on
    _LinearT = TypeVar("_LinearT", bound="_OnlineLinearSGD")

__all__ = ["OnlineQuantileRegressor", "OnlineLeastSquaresRegressor"]


def _publish_first(est, new, learn):
    """A first call: ``new`` published in ``est`` before ``learn(state)``
    runs on it, so that a concurrent first call learns into the same state
    (whichever was published first); a failure or an interrupt before any
    row leaves the estimator unfitted, as before the call."""
    state = est.__dict__.setdefault("_state", new)
    try:
        learn(state)
    except BaseException:
        if state is new and state.n_samples_seen == 0:
            est.__dict__.pop("_state", None)
        raise


def _checked(est, state, X, convert):
    """``X`` by ``convert``, checked against the fitted ``state`` (None: a
    first call, nothing to check against) with scikit-learn's messages, which
    its checks look for: feature names by its validate_data, then the width."""
    if state is not None and (state.feature_names is not None or type(X) is not np.ndarray
                              and feature_names(X) is not None):
        validate_data(est, X, reset=False, skip_check_array=True, ensure_2d=False)
    X = convert(X)
    if state is not None and X.shape[1] != state.n_features:
        raise ValueError(f"X has {X.shape[1]} features, but {type(est).__name__} is "
                         f"expecting {state.n_features} features as input.")
    return X


class _OnlineLinearSGD(StreamRegressor):
    """What the online linear estimators share: parameters -> a LinearSGD,
    input -> its calls, its state -> the fitted attributes."""

    _loss = "check"
    # least squares has no tau, mode or batch_size parameters
    mode = "single"
    tau: float | Sequence[float] | Float64Array = 0.5
    batch_size: int | None = None
    inference = False
    noncrossing = "rearrange"
    scale: str | None = None
    drift: str | None = None
    hashing: int | None = None

    # -- scikit-learn -----------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # CSR/CSC/COO... blocks: mode "single" reads them at O(nnz) a row;
        # batch and storage steps are dense (the block is densified)
        tags.input_tags.sparse = True
        return tags

    def _expected_failed_checks(self):
        """scikit-learn's checks this configuration fails by design, with the
        reason (read by ``streamfit.utils.estimator_checks.expected_failed_checks``)."""
        why = ("a weight scales one step where a repeat takes several, and an online fit "
               "depends on the order of the rows (storage mode: one step per block of "
               "batch_size rows, so repeats make more steps); the check compares weighted "
               "rows, shuffled, with repeated rows in order")
        failures = {"check_sample_weight_equivalence_on_dense_data": why,
                    "check_sample_weight_equivalence_on_sparse_data": why}
        if isinstance(self.tau, (list, tuple, np.ndarray)):
            shape = ("several quantiles predict one column each: predict returns shape "
                     "(n_samples, len(tau)) for a 1-D y")
            failures["check_regressors_train"] = shape
            # (sparse input is taken; the check then reads predict's shape)
            failures["check_estimator_sparse_array"] = shape
            failures["check_estimator_sparse_matrix"] = shape
        return failures

    # -- parameters -> the state object -------------------------------------------
    def _settings(self):
        """The parameters as the state object takes them."""
        return {"tau": self.tau, "loss": self._loss, "mode": self.mode,
                "schedule": self.schedule, "batch_size": self.batch_size,
                "average": self.average, "fit_intercept": self.fit_intercept,
                "inference": self.inference, "scale": self.scale, "drift": self.drift,
                "noncrossing": self.noncrossing, "hashing": self.hashing is not None}

    def _key(self):
        """What the state was configured from: the class (its messages name
        it) and the parameters' values (a schedule object's by value, as
        ``set_params(schedule__Ca=...)`` changes it in place)."""
        tau, sched = self.tau, self.schedule
        if isinstance(tau, np.ndarray):
            tau = tuple(tau.tolist())
        return (type(self).__name__, tau, self.mode,
                sched if isinstance(sched, str) or not hasattr(sched, "__dict__")
                else (type(sched), dict(vars(sched))),
                self.batch_size, self.average, self.fit_intercept, self.inference,
                self.noncrossing, self.scale, self.drift, self.hashing)

    def _new_state(self, d, coef_init=None, intercept_init=None):
        check_scalar(self.hashing, "hashing", kind=numbers.Integral, low=1, high=2**31 - 1,
                     allow_none=True)
        if self.hashing is not None and d != self.hashing:
            raise ValueError(f"X has {d} features, but hashing={self.hashing} hashes dict rows "
                             f"into {self.hashing} columns: rows given as arrays or sparse "
                             f"matrices must have {self.hashing} columns (FeatureHasher("
                             f"n_features={self.hashing})'s output)")
        state = LinearSGD(d, coef_init=coef_init, intercept_init=intercept_init,
                          **self._settings())
        state.source = self._key()
        return state

    def _unchanged(self, state):
        """Whether the state's settings are the parameters' values already
        (same types, equal): configuring it would change nothing."""
        have = state.settings
        return all(type(v) is type(have.get(k)) and (v == have[k]) is True
                   for k, v in self._settings().items())

    # -- learning ---------------------------------------------------------------
    def partial_fit(self: _LinearT, X: Any, y: ArrayIn, sample_weight: ArrayIn | None = None,
                    coef_init: ArrayIn | None = None,
                    intercept_init: float | ArrayIn | None = None) -> _LinearT:
        """Learn from one block of the stream.

        ``mode="single"``: one update per row, in order. ``"batch"``: one update
        per ``batch_size`` rows (rows short of a full batch wait for the next
        call); with ``batch_size=None`` the whole call is one batch.
        ``"storage"``: the rows join all data seen so far and one sub-gradient
        step is taken on the loss over all of it. A call with no rows does
        nothing. A one-row call takes :meth:`learn_one`'s path.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            float32 rows are read as they are in mode "single"
            (see "float32 rows" in the class docstring).
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), float or None
            Non-negative row weights (see the class docstring).
        coef_init, intercept_init : array-like of shape (n_features,), float
            The starting point of a fresh estimator (a warm start); refused
            once the estimator has learnt something. With the default
            ``schedule="statistical"`` a warm start warns: pass
            ``StatisticalSchedule(start="phase2", t0=n)``, n the rows the start
            was fitted on (see ``fit``).

        Returns
        -------
        self
        """
        state = self.__dict__.get("_state")
        if type(X) is np.ndarray and type(y) is np.ndarray and state is not None and \
                X.ndim == 2 and X.shape[0] == 1 and y.shape == (1,) and \
                X.shape[1] == state.n_features and sample_weight is None and \
                coef_init is None and intercept_init is None and self.mode == "single" and \
                state.feature_names is None and state.source == self._key():
            # one row of an event loop: learn_one's path, the checks it needs
            # done above (its own check of the row and target follow)
            state.learn_one(X[0], y[0])
            return self
        # (_checked's checks, written out: the call and its second
        # feature_names cost ~1,500 instructions a call, 3% of the gate's
        # wrapper-partial-fit)
        names = None if type(X) is np.ndarray else feature_names(X)
        if state is not None and (names is not None or state.feature_names is not None):
            validate_data(self, X, reset=False, skip_check_array=True, ensure_2d=False)
        X = self._rows(X)
        n, d = X.shape
        if state is not None and d != state.n_features:
            raise ValueError(f"X has {d} features, but {type(self).__name__} is expecting "
                             f"{state.n_features} features as input.")
        y = as_target(y, n, type(self).__name__)
        sw = as_weights(sample_weight, n)
        if state is None:
            new = self._new_state(d, coef_init, intercept_init)
            if n == 0:
                return self
            new.feature_names = names
            self._warn_if_phase_one_restarts(coef_init, intercept_init)
            _publish_first(self, new, lambda state: self._learn(state, X, y, sw))
            return self
        if coef_init is not None or intercept_init is not None:
            raise ValueError("coef_init and intercept_init start a fresh fit: this "
                             f"{type(self).__name__} has already learnt from "
                             f"{state.n_samples_seen} rows. Call fit() to start afresh from "
                             "them")
        key = self._key()
        before = None
        if state.source != key:     # (one comparison on the common path: every call)
            # parameters set since the last call. Equal to the state's
            # settings already (an unpickled state, whose source is not
            # saved; a set_params to equal values): nothing to configure, no
            # copy. Else a refused call must leave the old ones in force: the
            # state is kept as it was (settings changes are rare; the copy
            # costs one state's size); configure refuses a parameter the
            # learnt state cannot take, naming it, the state unchanged.
            if not self._unchanged(state):
                before = state.copy()
                state.configure(**self._settings())
            state.source = key
        try:
            self._learn(state, X, y, sw)
        except BaseException:
            if before is not None and state.n_samples_seen == before.n_samples_seen:
                self.__dict__["_state"] = before
            raise
        return self

    def _learn(self, state, X, y, sw):
        n = X.shape[0]
        if n == 1 and self.mode == "single" and type(X) is np.ndarray:
            state.learn_one(X[0], y[0], 1.0 if sw is None else sw[0])
        elif n:
            state.learn(X, y, sw)

    def _rows(self, X):
        """X as the state object reads it: a C-contiguous float64 (or float32)
        array, or CSR rows (mode "single"; batch and storage steps are dense,
        so there a sparse block is densified, if it fits in memory)."""
        if type(X) is np.ndarray or not is_sparse(X):   # (an array: no call, ~400 instr.)
            return as_matrix(X, float32=True)
        X = as_csr(X)
        if self.mode != "single":
            check_memory(8.0 * X.shape[0] * X.shape[1], "X", f"<sparse {X.shape}>",
                         f"a dense copy for mode {self.mode!r}")
            X = np.ascontiguousarray(X.toarray())
        return X

    def fit(self: _LinearT, X: Any, y: ArrayIn, sample_weight: ArrayIn | None = None,
            coef_init: ArrayIn | None = None,
            intercept_init: float | ArrayIn | None = None) -> _LinearT:
        """Forget what was learnt and make one pass over (X, y) in the chosen
        mode; in batch and storage modes the data arrive in blocks of
        ``batch_size`` rows (default max(2 (d + 1), 16)), the last block may be
        shorter. If the call fails, the estimator keeps its previous state; if
        a signal handler interrupts it, the estimator holds the fresh fit of
        the rows before the interruption.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), n_samples >= 1
            float32 rows are read as they are in mode "single"
            (see "float32 rows" in the class docstring).
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), float or None
        coef_init, intercept_init : array-like of shape (n_features,), float
            Starting point (a warm start); default zeros. The statistical
            schedule's phase one would start over from it with its largest
            steps, so with the default ``schedule="statistical"`` a warm start
            warns (``UserWarning``) and names the fix:
            ``schedule=StatisticalSchedule(start="phase2", t0=n)``, n the rows
            the start was fitted on, continues that clock (an explicit
            ``StatisticalSchedule(start="phase1")`` restarts phase one without
            a warning).

        Returns
        -------
        self

        Warns
        -----
        streamfit.exceptions.WarmupWarning
            When the statistical schedule's warm-up (``n_warmup`` rows,
            default 50) outlasts X: no step was taken, the coefficients are
            still their start.
        """
        names = feature_names(X)
        X = self._rows(X)
        n, d = X.shape
        if n == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape=({n}, {d})) while a "
                             f"minimum of 1 is required by {type(self).__name__}.fit; "
                             "the estimator keeps its previous state")
        y = as_target(y, n, type(self).__name__)
        sw = as_weights(sample_weight, n)
        if sw is not None and not sw.any():
            raise ValueError("sample_weight: every weight is zero, so there is nothing to "
                             "learn (Sample weights must contain at least one non-zero "
                             "number); the estimator keeps its previous state")
        new = self._new_state(d, coef_init, intercept_init)
        new.feature_names = names
        self._warn_if_phase_one_restarts(coef_init, intercept_init)
        bs = self.batch_size or max(2 * (d + 1), 16)
        if self.mode == "single":
            spans = [(0, n, None)]
        elif self.mode == "batch":
            # whole batches of bs rows, then the rest as one batch
            n_full = n // bs * bs
            spans = [(0, n_full, bs)] + ([(n_full, n, n - n_full)] if n_full < n else [])
        else:
            # one step per block of bs rows
            spans = [(a, min(a + bs, n), None) for a in range(0, n, bs)]
        for a, b, block in spans:
            seen = new.n_samples_seen
            try:
                if b > a:
                    # (a sparse block whole: slicing one copies it)
                    new.learn(X if (a, b) == (0, n) else X[a:b], y[a:b],
                              None if sw is None else sw[a:b], batch_size=block)
            except BaseException:
                # a failed call leaves the state as it was; an interrupted one
                # keeps the rows before the signal: the estimator then holds
                # the fresh fit of those
                if new.n_samples_seen > seen:
                    self._state = new
                raise
        self._state = new             # one assignment publishes the fit
        # single mode steps from the row after the warm-up, batch mode on the
        # block that completes it (storage mode steps on its first block: it
        # never warns)
        _warn_if_warming_up(self, new.warm_up_rows, new.n_updates, n,
                            after=int(self.mode == "single"))
        return self

    def _warn_if_phase_one_restarts(self, coef_init, intercept_init):
        """A warm start under the default schedule: phase one, a descent from
        a poor start with the largest steps, would start over from it and
        undo much of it (d = 20, an offline start from 20,000 rows, 10,000
        further rows: 4.3x the start's error, 2.0x averaged). The rows behind
        the start are not known here, so the fix is the caller's to give."""
        if (coef_init is None and intercept_init is None) or not (
                isinstance(self.schedule, str) and self.schedule == "statistical"):
            return
        warnings.warn(
            "coef_init/intercept_init with the default schedule='statistical': its phase one "
            "(the largest steps) starts over from the warm start and can end worse than the "
            "start. If the start was fitted on n rows, pass schedule=StatisticalSchedule("
            "start='phase2', t0=n) (streamfit.schedules) to continue its clock; to restart "
            "phase one on purpose, pass schedule=StatisticalSchedule(start='phase1')",
            UserWarning, stacklevel=_caller_level())

    # -- one event at a time (river's names) ----------------------------------------
    def learn_one(self, x: Any, y: float, weight: float = 1.0) -> None:
        """Learn from one row: ``x`` a 1-D array or a sequence of n_features
        real numbers, ``y`` a real number, ``weight`` >= 0 (river's names and
        argument order). Exactly what ``partial_fit`` does with a one-row
        block, at the cost of one compiled call. Parameters changed with
        ``set_params`` take effect at the next ``partial_fit`` or ``fit`` (a
        learner's parameters stay fixed while it learns event by event, as
        in river).

        Examples
        --------
        >>> from streamfit import OnlineQuantileRegressor
        >>> from streamfit.simulate import make_linear_stream
        >>> X, y, beta = make_linear_stream(5000, 3, tau=0.5, random_state=0)
        >>> est = OnlineQuantileRegressor(average=True)
        >>> for xi, yi in zip(X, y):
        ...     est.learn_one(xi, yi)
        >>> est.n_samples_seen_, float(est.predict_one(X[0]) - est.predict(X[:1])[0])
        (5000, 0.0)
        """
        try:
            self._state.learn_one(x, y, weight)
        except AttributeError:
            if "_state" in self.__dict__:
                raise
            self._learn_first(x, y, weight)

    def _learn_first(self, x, y, weight):
        if isinstance(x, dict) and self.hashing is not None:
            d = self.hashing
        elif is_sparse(x):
            d = x.shape[-1]
        else:
            if isinstance(x, dict):
                raise TypeError(f"x: a dict row needs hashing=n_features (dict rows hashed "
                                f"as FeatureHasher(n_features) does) on {type(self).__name__}; "
                                "or use streamfit.river's adapters, whose columns are the "
                                "dicts' keys")
            row = np.asarray(x) if not isinstance(x, (str, bytes)) else x
            if getattr(row, "ndim", 0) != 1 or row.shape[0] < 1:
                raise ValueError(f"x must be a 1-D array of at least one value, got "
                                 f"{type(x).__name__} of shape {getattr(row, 'shape', None)}")
            d = row.shape[0]
        _publish_first(self, self._new_state(d), lambda state: state.learn_one(x, y, weight))

    def predict_one(self, x: Any) -> float | Float64Array:
        """The prediction for one row ``x`` (a float; with several taus an
        array of the m quantiles, sorted). See :meth:`learn_one`."""
        try:
            return self._state.predict_one(x)
        except AttributeError:
            self._fitted_state()
            raise

    # -- learnt attributes ------------------------------------------------------
    @property
    def coef_(self) -> Float64Array:
        """Coefficients (the Polyak-Ruppert average when ``average=True``)."""
        return self._fitted_state().coef

    @property
    def intercept_(self) -> float | Float64Array:
        """Intercept (averaged with ``average=True``); 0 without ``fit_intercept``."""
        return self._fitted_state().intercept

    @property
    def n_features_in_(self) -> int:
        """Features seen by the first call (or ``fit``)."""
        return self._fitted_state().n_features

    @property
    def feature_names_in_(self) -> Any:
        """Column names of the DataFrame the estimator learnt from (only then)."""
        return fitted_feature_names(self, self._fitted_state().feature_names)

    @property
    def n_samples_seen_(self) -> int:
        """Rows received so far (including rows waiting for a full batch,
        whatever their weight)."""
        return self._fitted_state().n_samples_seen

    @property
    def n_updates_(self) -> int:
        """Updates taken: rows of positive weight (single mode), blocks of
        positive weight (batch mode), calls with new weight (storage mode);
        statistical schedules take none during their warm-up."""
        return self._fitted_state().n_updates

    @property
    def drift_restart_rows_(self) -> Float64Array:
        """Rows of the stream (0-based, counted over every call since the
        first, as ``n_samples_seen_`` counts them) at which the drift test
        (``drift="restart"``) raised an alarm and restarted the average, in
        order; empty without an alarm (and with ``drift=None``)."""
        return self._fitted_state().drift_rows

    @property
    def n_drift_restarts_(self) -> int:
        """Alarms of the drift test so far: ``len(drift_restart_rows_)``."""
        return int(self.drift_restart_rows_.shape[0])

    @property
    def cumulative_loss_(self) -> float | Float64Array:
        """Prequential loss: each sample's (weighted) loss under the iterate
        before the update it causes (check loss; squared loss r^2 / 2 for
        least squares); with several taus an array, one per tau."""
        return self._fitted_state().cumulative_loss

    @property
    def schedule_state_(self) -> dict[str, Any] | list[dict[str, Any]]:
        """The schedule's estimates and phase, for inspection: phase (0 warm-up,
        1 geometric, 2 and 3 as in the paper), stepsize of the last update,
        start of the current phase (t_switch, on the schedule's clock), D0,
        sparsity b0, Cl, and how often a jump of the residual scale restarted
        phase one (restarts)."""
        return self._fitted_state().schedule_state

    def predict(self, X: Any) -> Float64Array:
        """Predicted tau-quantiles (conditional means for least squares).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        state = self._fitted_state()
        if type(X) is np.ndarray and X.dtype == np.float64 and X.ndim == 2 and \
                state.feature_names is None:
            return state.predict(X)   # (checks the width and finiteness)
        if is_sparse(X):
            return state.predict(as_csr(X))   # (checks the width and every value)
        return state.predict(_checked(self, state, X, check_matrix))


_COMMON_NOTES = """
    **Sample weights** (``sample_weight`` in ``fit``/``partial_fit``): a row of
    weight w counts w times in the loss and its (sub-)gradient, the weighted
    check loss sum_i w_i rho_tau(y_i - x_i'beta). In single mode the
    schedule's clock moves by w (a 1/t stepsize ages as over w rows; phase
    one's geometric decay is raised to the power w); in batch and storage
    modes a step uses the weighted mean gradient and a block counts its
    weights as its size. A row of weight 0 is as if absent (it is scored at
    weight 0 and counted in ``n_samples_seen_``, nothing else); a storage call
    whose new rows all weigh 0 takes no step. The schedule's order statistics
    (D0, b0, the plateau test) use the residuals of rows of positive weight,
    unweighted. With a constant stepsize small enough that no residual
    changes sign, a weight of 2 in single mode is the row given twice.

    **Mid-stream parameter changes** (``set_params`` between ``partial_fit``
    calls; ``fit`` always starts afresh):

    - ``mode``, ``tau`` and ``fit_intercept`` are refused with a ValueError
      naming the parameter: the learnt state (iterate, sparsity estimate,
      stored or pending rows) belongs to the old value.
    - ``batch_size`` takes effect at the next call; rows already waiting for a
      batch are kept and go first (lowered below what waits, they make
      several batches).
    - ``average`` takes effect at the next call: switched on, the average
      restarts from the next update (in the statistical schedule's last phase,
      once settled); switched off, ``coef_`` is the last iterate.
    - ``schedule``: a new schedule object, or new constants of the current one
      (``schedule__Ca=...``), take effect at the next call. Constants used
      once (``eta0``, ``eta0_scale``, ``n_warmup``, ``start``) act at the next
      warm-up, which happens only when the statistical schedule takes over
      from another schedule (it then warms up afresh from the current
      iterate). A user schedule's ``stepsizes(start, count)`` is indexed by
      ``n_updates_``.
    - ``drift`` takes effect at the next call; the test starts afresh
      (``drift_restart_rows_`` keeps the alarms so far).
    - ``random_state`` has no effect (the updates are deterministic).

    **Interrupts, failures, threads.** The kernels check for signals about
    once a millisecond: Ctrl-C (or a signal handler that raises, e.g. a
    SIGALRM timeout) stops a call between two whole rows (single mode), two
    whole batches (batch mode) or before the step (storage mode); the
    estimator then holds the state after the rows applied, every field
    consistent (``n_samples_seen_`` counts exactly them, pending rows
    included), and the exception is re-raised with a note saying how many
    rows were taken. Continuing the stream from the next row gives the same
    state as an uninterrupted run. Any other failure (bad input, a diverging
    iterate) leaves the estimator exactly as before the call. Calls on one
    estimator from several threads take turns (nothing is lost or mixed).

    **float32 rows.** In mode "single" (one tau with any schedule, weights,
    ``average``, ``inference``, ``scale``; or several taus), a float32
    ndarray ``X`` is read as float32: no float64 copy of the block is made,
    and every result is bit-identical to that of the same rows given as
    float64 (each row is widened exactly as it is read; every sum and the
    state are float64). Batch and storage modes, ``predict`` and ``score``
    convert float32 to float64 once (a copy of the call's rows).

    **Sparse input.** ``fit``, ``partial_fit``, ``predict`` and ``score`` take
    scipy.sparse matrices and arrays (CSR as it is; other formats convert;
    64-bit indices that fit become 32-bit), ``learn_one``/``predict_one`` a
    one-row sparse matrix (or a dict, with ``hashing``). In mode "single" a
    sparse row costs O(its non-zeros) whatever n_features: the update, the
    Polyak-Ruppert average (kept lazily), the drift test and the online
    scaler touch only the row's columns; the coefficients equal those of the
    same rows given dense to 1e-12 (relative). Batch and storage steps are
    dense: a sparse block is densified there. ``scale="online"`` on sparse
    rows scales each feature by the root mean square of its non-zero values,
    without centring (centring would make every row dense); a model's first
    rows fix which scaler it keeps. ``inference=True`` keeps d x d sums:
    sparse rows are taken dense up to 4,096 features and refused above. The
    statistical schedule's d (its geometric decay, its 1/t phase's time scale
    and its window) is n_features (+1 with an intercept) for dense rows, the
    paper's d, and for sparse rows the mean number of stored non-zeros of the
    warm-up's rows (+1): a row's own size, not the hashed width. So under
    that schedule a sparse block and its dense copy agree (to 1e-12) only
    when the rows store every column; the other schedules agree on any rows.
    See the user guide's "Sparse and hashed features".

    **Reproducibility.** The kernels call no BLAS: every result is the same
    for any BLAS library and thread count, and for any split of a stream into
    ``partial_fit`` calls in single mode (bit for bit); on another CPU
    (with or without FMA instructions) results may differ in the last bits.
"""


class OnlineQuantileRegressor(_OnlineLinearSGD):
    __doc__ = """Online linear quantile regression by sub-gradient descent on the check loss.

    Implements Shen, Xia & Zhou, "Online Quantile Regression" (JMLR 2025): the
    update beta <- beta - eta_t mean_i (1{y_i <= x_i'beta} - tau) x_i over one
    sample (``mode="single"``), one batch (``"batch"``) or all data so far
    (``"storage"``), with the paper's statistical stepsizes by default and
    nothing about the data given by the user (see
    :class:`~streamfit.schedules.StatisticalSchedule` for the estimation rules).

    Parameters
    ----------
    tau : float in (0, 1), or a list of them
        The quantile; a strictly increasing list of m taus fits m quantiles
        in one pass (mode "single" only; each with its own schedule state,
        bit-identical to m separate fits unless ``noncrossing="project"``):
        ``coef_`` is then (m, n_features), ``intercept_`` (m,), ``predict``
        (n_samples, m), sorted per row, and ``score`` the mean D^2 pinball
        over the taus.
    mode : {"single", "batch", "storage"}
    schedule : str or schedule object
        "statistical" (default), "constant", "inverse_time", or an object from
        :mod:`streamfit.schedules` (or any object with ``stepsizes(start, count)``).
    batch_size : int or None
        Rows per update in batch mode; block size of ``fit`` in batch/storage mode.
    average : bool
        Polyak-Ruppert averaging of the iterates over the schedule's last phase
        (whose decay becomes t^-2/3); ``coef_`` is then the average. Off by
        default so that the defaults are the paper's (Ca = 20, plain iterate)
        and reproduce its figures; but with Ca = 20 the plain iterate's error
        is about sqrt(Ca^2 / (2 Ca - 1)) = 3.2 times the efficient one
        (Robbins-Monro; measured 3.2-3.9x the offline estimator at n = 20,000
        -50,000, ``python -m streamfit --only qr-efficiency``), where the
        average is 1.1-1.5x. For estimates, use ``average=True`` (or
        ``StatisticalSchedule(Ca=2)``: 1.2x, at a larger short-term cost early
        in phase two, Remark 3). On a stream whose early rows are not
        representative (a file in sorted order) the plain iterate forgets them
        and the average does not. In mode "single" with an intercept,
        ``intercept_`` is then not the average of the iterate's intercept,
        which is biased at every tau but a symmetric noise's median (the
        coefficients' fluctuation smooths the residuals: a bias of the order
        of the stepsize that averaging keeps; 1.9-3.3 standard errors at
        d = 5, n = 20,000, and an RMSE of 0.90-0.99 against 0.14 under t_1.1
        noise at tau = 0.1, 0.9), but the average of two plug-in intercepts
        taking the same quantile steps (and twice them) on y - x' coef_,
        extrapolated (Richardson-Romberg), moved to the last ``coef_``: about
        3 d more work per averaged update. Batch mode, ``scale="online"`` and
        ``streamfit.kernels.sgd`` keep the iterate's average.
    fit_intercept : bool
    random_state : None, int or Generator
        Accepted for a uniform API; the updates are deterministic.
    inference : bool
        Keep the random-scaling sums (Lee, Liao, Seo & Shin, AAAI 2022) for
        :meth:`conf_int` and ``coef_covariance_``: O((d+1)^2 / 2) more work
        per update, inside the kernel. Needs ``average=True`` and mode
        "single" or "batch" (storage mode's steps use all data so far, not a
        stochastic-gradient path, so the theory does not apply: refused).
        The intercept's interval is centred on the plug-in intercept (see
        ``average``; it covers 0.94-0.975 at d = 5, n = 20,000, tau = 0.1,
        0.25, 0.9, where the iterate's average covered 82-92%). ``coef_`` and
        ``intercept_`` are the same as without inference. With several taus
        each quantile keeps its own sums (m times the work): ``conf_int``
        gives one block of intervals per quantile, each the same as its
        separate fit's.
    scale : None or "online"
        "online": each row joins running (weighted) means and standard
        deviations of the features and the model learns on the standardised
        row z = (x - mean) / sd (x / sd without an intercept), a diagonal
        preconditioner that the statistical schedule calibrates on (its Cl is
        that of z); ``coef_`` and ``intercept_`` are reported on the original
        scale. Mode "single", one tau, no ``inference``, no ``coef_init``
        (refused otherwise); cannot change mid-stream. Default None (the
        paper's algorithm on the raw features): results stay bit-identical to
        earlier versions and to the paper's experiments, and a standardised
        stream gains nothing from it (it costs one more pass over each row).
    noncrossing : {"rearrange", "project"}
        Several taus only (ignored with one). "rearrange": the quantiles learn
        independently and ``predict`` sorts the m predictions of each row
        (rearrangement, Chernozhukov, Fernandez-Val & Galichon, Econometrica
        2010), so they never cross. "project": also during training, the m
        predictions at each x_t are projected onto the ordered cone (pool
        adjacent violators) before the residuals that give the sub-gradients
        are taken; takes effect at the next call.
    drift : None or "restart"
        "restart": a change test on the prequential check loss (is the
        averaged iterate's loss on each row, before its update, worse than
        the plain iterate's? a CUSUM of that bounded comparison) restarts the
        Polyak-Ruppert average from the current iterate at an alarm (with
        the statistical schedule once it has settled again, and its last
        phase's clock with it), so that the average follows a change or a
        drift of the coefficients instead of keeping the old regime. Needs
        ``average=True``, mode "single", one tau and ``scale=None``. On a
        stationary stream the mean time to a false alarm exceeds 7e10 rows
        whatever the noise's tails, and without an alarm every result is
        bit-identical to ``drift=None``'s (the default). With
        ``schedule="constant"`` the average is also restarted once or twice
        in the first ~1,000 rows (it lags the travelling iterate there).
        "inverse_time" is refused: under O(1/t) steps the last iterate beats
        its average on any stream, and the test would fire every few hundred
        rows. See the user guide's "Streams that change".
    hashing : None or int
        None (the default): rows are arrays or sparse matrices of the
        columns the first call fixes. An int n: ``learn_one`` and
        ``predict_one`` also take dict rows ``{feature: value}``, hashed into
        n columns as scikit-learn's ``FeatureHasher(n_features=n)`` hashes
        them (the signed MurmurHash3 of each string key picks a column and a
        sign; a string value v makes the feature "key=v" of value 1), at
        O(the row's features): features are taken as they come, with no
        vocabulary to fix. Arrays and sparse matrices must then have n
        columns (FeatureHasher's output, which gives the same model). Cannot
        change mid-stream.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_samples_seen_ : int
    n_updates_ : int
    cumulative_loss_ : float
    schedule_state_ : dict
    drift_restart_rows_ : ndarray of int64
        Rows of the stream (0-based, over all calls) where the drift test
        restarted the average (empty with ``drift=None``).
    n_drift_restarts_ : int
        Their number.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when fitted on a DataFrame with string column names.
    coef_covariance_ : ndarray of shape (n_features + 1, n_features + 1)
        With ``inference=True``: the random-scaling matrix of (coef_,
        intercept_) (no intercept row/column without ``fit_intercept``); see
        :meth:`conf_int`.

    Notes
    -----
    The paper's stepsizes are scalars tuned to E[x x'] with eigenvalues in
    [Cl, Cu] of one order: standardize features on very different scales,
    or the small ones learn slowly (the schedule stays stable, it is not a
    preconditioner). With an intercept, center the features too. Rows whose
    ||x||^2 overflows float64 (entries beyond ~1e154) are refused with an
    error naming the row.

    ``score`` is D^2 pinball at ``tau`` (:func:`sklearn.metrics.d2_pinball_score`):
    1 - the check loss of the predictions / that of the constant tau-quantile
    of y.
    """ + _COMMON_NOTES + """
    Examples
    --------
    >>> import numpy as np
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(20000, 10, tau=0.75, random_state=0)
    >>> est = OnlineQuantileRegressor(tau=0.75, average=True)
    >>> for start in range(0, 20000, 1000):          # a stream, block by block
    ...     est = est.partial_fit(X[start:start + 1000], y[start:start + 1000])
    >>> err = np.linalg.norm(est.coef_ - beta) / np.linalg.norm(beta)
    >>> bool(err < 0.02), est.n_samples_seen_
    (True, 20000)
    >>> bool(est.score(X, y) > 0.9)                  # D^2 pinball at tau = 0.75
    True

    Several quantiles in one pass, never crossing:

    >>> fan = OnlineQuantileRegressor(tau=[0.1, 0.5, 0.9]).fit(X, y)
    >>> fan.coef_.shape, fan.predict(X[:4]).shape
    ((3, 10), (4, 3))
    >>> bool(np.all(np.diff(fan.predict(X), axis=1) >= 0))
    True

    Features on very different scales, standardised on the fly:

    >>> scales = np.r_[1e4, np.ones(9)]             # one feature 10^4 x larger
    >>> est = OnlineQuantileRegressor(tau=0.75, average=True, scale="online")
    >>> est = est.fit(X * scales, y)
    >>> err = np.linalg.norm(est.coef_ * scales - beta) / np.linalg.norm(beta)
    >>> bool(err < 0.02)
    True

    Confidence intervals for the coefficients, updated online:

    >>> est = OnlineQuantileRegressor(tau=0.75, average=True, inference=True)
    >>> est = est.fit(X, y)
    >>> ci = est.conf_int(alpha=0.05)                # rows: coef_ then intercept_
    >>> ci.shape
    (11, 2)
    >>> bool(np.all(ci[:, 0] < ci[:, 1]))
    True

    A stream whose coefficients change: the average restarts at the change.

    >>> X2, y2, beta2 = make_linear_stream(20000, 10, tau=0.75, random_state=1)
    >>> est = OnlineQuantileRegressor(tau=0.75, average=True, drift="restart")
    >>> est = est.fit(np.vstack([X, X2]), np.r_[y, y2])
    >>> est.n_drift_restarts_, bool(20000 <= est.drift_restart_rows_[0] < 21000)
    (1, True)
    >>> bool(np.linalg.norm(est.coef_ - beta2) < 0.02 * np.linalg.norm(beta2))
    True
    """

    _loss = "check"

    def __init__(self, tau: float | Sequence[float] | Float64Array = 0.5, *,
                 mode: Literal["single", "batch", "storage"] = "single",
                 schedule: ScheduleLike = "statistical", batch_size: int | None = None,
                 average: bool = False, fit_intercept: bool = True,
                 random_state: RandomStateLike = None, inference: bool = False,
                 noncrossing: Literal["rearrange", "project"] = "rearrange",
                 scale: Literal["online"] | None = None, drift: Literal["restart"] | None = None,
                 hashing: int | None = None) -> None:
        self.hashing = hashing
        self.tau = tau
        self.mode = mode
        self.schedule = schedule
        self.batch_size = batch_size
        self.average = average
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.inference = inference
        self.noncrossing = noncrossing
        self.scale = scale
        self.drift = drift

    @property
    def coef_covariance_(self) -> Float64Array:
        """The random-scaling matrix V_k / k of (coef_, intercept_) (shape
        (d + 1, d + 1), intercept last; (d, d) without an intercept; with
        several taus one per quantile, (m, d + 1, d + 1)), with
        V_k = k^-2 sum_{s<=k} s^2 (z_s - z_k)(z_s - z_k)' over the k steps of
        the average (z_s: the s-th averaged iterate). It is a random scale,
        not a consistent estimate of the covariance: divide by it and use the
        critical values of :meth:`conf_int`, not normal ones."""
        return self._fitted_state().random_scaling()[1]

    def conf_int(self, alpha: float = 0.05) -> Float64Array:
        """Confidence intervals for the coefficients and the intercept, by
        random scaling (Lee, Liao, Seo & Shin, AAAI 2022).

        (z_k - beta*)_j / sqrt(coef_covariance_[j, j]) is asymptotically
        distributed as W(1) / sqrt(int_0^1 (W(r) - r W(1))^2 dr) (W a Brownian
        motion); the interval is z_k,j +- c_alpha sqrt(coef_covariance_[j, j])
        with c_alpha that law's two-sided critical value (6.747 at
        alpha = 0.05; see :func:`streamfit.quantile.critical_value`). The
        window is the average's: the iterates since the statistical schedule
        settled in its last phase (every update with another schedule), one
        step per update (single mode: per row of positive weight; batch mode:
        per batch). Sample weights enter the sub-gradients (the target is the
        minimiser of the weighted expected check loss); the intervals are
        valid when the weights are drawn with the rows (i.i.d.), not for
        weights that drift along the stream.

        Parameters
        ----------
        alpha : {0.01, 0.02, 0.05, 0.1, 0.2}
            One minus the coverage.

        Returns
        -------
        ndarray of shape (n_features + 1, 2), or (m, n_features + 1, 2) with m taus
            Lower and upper bounds: rows for ``coef_`` in order, then (with
            ``fit_intercept``) one for ``intercept_`` (with several taus, one
            such block per quantile, in the order of ``tau``).

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit import OnlineQuantileRegressor
        >>> from streamfit.simulate import make_linear_stream
        >>> X, y, beta = make_linear_stream(20000, 3, tau=0.5, random_state=1)
        >>> est = OnlineQuantileRegressor(average=True, inference=True).fit(X, y)
        >>> lo, hi = est.conf_int(0.05)[:3].T
        >>> bool(np.all((lo < beta) & (beta < hi)))
        True
        """
        c = critical_value(alpha)
        z, V = self._fitted_state().random_scaling()      # (read in one call)
        half = c * np.sqrt(np.maximum(np.diagonal(V, axis1=-2, axis2=-1), 0.0))
        return np.stack([z - half, z + half], axis=-1)

    def score(self, X: Any, y: ArrayIn, sample_weight: ArrayIn | None = None) -> float:
        """D^2 pinball score at the fitted ``tau``: the fraction of the check
        loss of the best constant (the tau-quantile of y) that the model
        explains (1 is perfect, 0 no better than the constant, may be < 0).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,) or None

        Returns
        -------
        float
        """
        pred = self.predict(X)          # (one column per tau of the fitted state)
        pred = pred.reshape(pred.shape[0], -1)
        taus = np.atleast_1d(self._fitted_state().settings["tau"])
        return float(np.mean([d2_pinball_score(y, pred[:, q], sample_weight=sample_weight,
                                               alpha=float(t)) for q, t in enumerate(taus)]))


class OnlineLeastSquaresRegressor(_OnlineLinearSGD):
    __doc__ = """Online least squares by single-sample gradient descent (the paper's
    comparator, Section 3.1).

    The gradient of (y - x'beta)^2 / 2 is -(y - x'beta) x. The statistical
    schedule is the two-phase one the paper derives for least squares: a
    constant eta = 0.5 / (d Cl) until the errors stop falling (the window
    median of |residual| has not dropped 10% below its best for 3 windows),
    then Ca / (Cl (t - t1) + Ca / eta), an O(1/(t + d)) decay continuous at
    the switch. ``average=True`` (beyond the paper) averages the iterates
    from the next plateau on, under a t^-2/3 decay. ``score`` is R^2.

    Parameters
    ----------
    schedule : str or schedule object
    average : bool
    fit_intercept : bool
    drift : None or "restart"
        As :class:`OnlineQuantileRegressor`'s (the test compares the average's
        and the iterate's absolute residuals): "restart" restarts the average
        when the stream changes; needs ``average=True``.
    hashing : None or int
        As :class:`OnlineQuantileRegressor`'s: dict rows hashed into this many
        columns (FeatureHasher's hashing).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_samples_seen_, n_updates_, cumulative_loss_, schedule_state_, n_features_in_
    drift_restart_rows_, n_drift_restarts_

    Notes
    -----
    """ + _COMMON_NOTES + """
    Examples
    --------
    >>> import numpy as np
    >>> from streamfit import OnlineLeastSquaresRegressor
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(20000, 10, noise="gaussian",
    ...                                 random_state=0)
    >>> est = OnlineLeastSquaresRegressor().fit(X, y)
    >>> bool(np.linalg.norm(est.coef_ - beta) < 0.02 * np.linalg.norm(beta))
    True
    >>> X2, y2, beta2 = make_linear_stream(20000, 10, noise="gaussian",
    ...                                    random_state=1)
    >>> est = OnlineLeastSquaresRegressor(average=True, drift="restart")
    >>> est.fit(np.vstack([X, X2]), np.r_[y, y2]).n_drift_restarts_
    1
    """

    _loss = "squared"

    def __init__(self, *, schedule: ScheduleLike = "statistical", average: bool = False,
                 fit_intercept: bool = True, drift: Literal["restart"] | None = None,
                 hashing: int | None = None) -> None:
        self.hashing = hashing
        self.schedule = schedule
        self.average = average
        self.fit_intercept = fit_intercept
        self.drift = drift
