"""streamfit's online linear regressors as river mini-batch regressors."""
from __future__ import annotations

import numbers

import numpy as np
from river import base as _rb

from ..quantile import OnlineLeastSquaresRegressor as _OnlineLeastSquares
from ..quantile import OnlineQuantileRegressor as _OnlineQuantile
from .._kernels._quantile import river_learn_one as _river_learn_one
from .._kernels._quantile import river_predict_one as _river_predict_one
from ._columns import _F64, _Columns

__all__ = ["QuantileRegressor", "LeastSquaresRegressor"]


class _LinearRegressor(_Columns, _rb.MiniBatchRegressor):
    """learn_one/predict_one/learn_many/predict_many over the compiled state
    of a streamfit linear estimator (``_make_estimator`` gives its
    parameters): a dict row goes to the state object, which reads it through
    its feature index in compiled code."""

    _state = None           # (set in the instance by the first row learnt)
    hashing = None

    def __init__(self):
        pass

    def _new_state(self, columns):
        est = self._make_estimator()
        if self.hashing is not None:
            # dict rows hashed in compiled code: no columns to fix, new
            # features welcome
            return est._new_state(self.hashing)
        state = est._new_state(len(columns))
        state.feature_index = {key: j for j, key in enumerate(columns)}
        state.refuse_new = self.new_features == "raise"
        return state

    def _check_hashing(self):
        from .._validation import check_scalar

        check_scalar(self.hashing, "hashing", kind=numbers.Integral, low=1, high=2**31 - 1,
                     allow_none=True)
        if self.hashing is not None and self.features is not None:
            raise ValueError("features and hashing exclude each other: hashed features "
                             "have no columns to declare")

    def _hashed(self, X):
        """A DataFrame's rows as the hashed CSR rows learn_one would make."""
        import pandas as pd

        from .._kernels._quantile import hash_rows

        if not isinstance(X, pd.DataFrame):
            raise TypeError(f"X must be a pandas DataFrame, got {type(X).__name__}")
        if not X.columns.is_unique:
            raise ValueError(f"X has repeated column names: {list(X.columns)!r}")
        return hash_rows(X.to_dict("records"), self.hashing, "X")

    @property
    def _columns(self):
        state = self._state
        if state is None or self.hashing is not None:
            return None
        seen = self.__dict__.get("_columns_of")
        if seen is not None and seen[0] is state:
            return seen[1]
        # (made once per state: learn_many and predict_many read them on
        # every call, and _frame knows the columns it saw by their identity)
        index = state.feature_index
        keys = [None] * len(index)
        for key, j in index.items():
            keys[j] = key
        keys = tuple(keys)
        self.__dict__["_columns_of"] = (state, keys)
        return keys

    # learn_one / predict_one: compiled (the dict row of a model that has
    # learnt goes straight to its state object; see river_learn_one)
    learn_one = _river_learn_one
    predict_one = _river_predict_one

    def _learn_one_slow(self, x, y):
        if not isinstance(x, dict):
            raise TypeError(f"x must be a dict of features, got {type(x).__name__}")
        x = x if type(x) is dict else dict(x)
        state = self._state
        if state is None:
            self._learn_first(x, y)
        else:
            state.learn_one(x, y)

    def _learn_first(self, x, y):
        # The first row fixes the columns; published only once learnt (a
        # refused row leaves the model without columns). Two threads' first
        # rows: one state wins, the other's row is learnt into it.
        self._check_hashing()
        new = self._new_state(None if self.hashing is not None else self._columns_for(x))
        new.learn_one(x, y)
        state = self.__dict__.setdefault("_state", new)
        if state is not new:
            state.learn_one(x, y)

    def _predict_one_slow(self, x):
        if not isinstance(x, dict):
            raise TypeError(f"x must be a dict of features, got {type(x).__name__}")
        state = self._state
        if state is None:
            return 0.0
        return state.predict_one(x if type(x) is dict else dict(x))

    def learn_many(self, X, y):
        """Update the model with a mini-batch: the same model as ``learn_one``
        over its rows in order.

        Parameters
        ----------
        X : pandas.DataFrame
        y : pandas.Series
        """
        state = self._state
        if self.hashing is not None:
            self._check_hashing()
            A, columns = self._hashed(X), None
        else:
            columns = self._columns if state is not None else \
                self._columns_for(X.columns if hasattr(X, "columns") else ())
            A = self._frame(X, columns)
        target = _target(y, A.shape[0])
        if state is None:
            state = self._new_state(columns)
        try:
            state.learn(A, target)
        except ValueError:
            if columns is not None:
                self._check_finite(A, columns, "X")
            raise
        if self._state is None:
            self.__dict__.setdefault("_state", state)

    def predict_many(self, X):
        """Predictions for the rows of X.

        Parameters
        ----------
        X : pandas.DataFrame

        Returns
        -------
        pandas.Series
            Indexed like X.
        """
        import pandas as pd

        if self._state is None:
            if not isinstance(X, pd.DataFrame):
                raise TypeError(f"X must be a pandas DataFrame, got {type(X).__name__}")
            return pd.Series(0.0, index=X.index, dtype=np.float64)
        if self.hashing is not None:
            return pd.Series(self._state.predict(self._hashed(X)), index=X.index,
                             dtype=np.float64)
        A = self._frame(X, self._columns)
        self._check_finite(A, self._columns, "X")
        return pd.Series(self._state.predict(A), index=X.index, dtype=np.float64)

    @property
    def weights(self):
        """dict: feature -> coefficient ({} before the first row is learnt);
        with ``hashing``, hashed column -> coefficient for the columns whose
        coefficient is not 0 (a hash cannot be turned back into a name)."""
        if self._state is None:
            return {}
        coef = self._state.coef
        if self.hashing is not None:
            nz = np.flatnonzero(coef)
            return dict(zip(nz.tolist(), coef[nz].tolist()))
        return dict(zip(self._columns, coef.tolist()))

    @property
    def intercept(self):
        """float: the intercept (0.0 before the first row is learnt)."""
        return 0.0 if self._state is None else float(self._state.intercept)

    @property
    def estimator(self):
        """The streamfit estimator of this model's parameters holding its
        state (None before the first row is learnt; it shares the state with
        this model); its ``coef_`` is in the order of :attr:`columns`."""
        if self._state is None:
            return None
        est = self._make_estimator()
        est._state = self._state
        return est

    @property
    def columns(self):
        """tuple: the features, in the order of the wrapped estimator's
        columns (None before the first row is learnt)."""
        return self._columns



def _target(y, n):
    """A mini-batch's targets as float64: numbers only, n of them (a view of
    y's values when they are float64: the state object copies what it must)."""
    values = y.to_numpy() if hasattr(y, "to_numpy") else np.asarray(y)
    if values.dtype is not _F64 or values.shape != (n,):
        if values.dtype.kind not in "biuf":
            raise TypeError(f"y must hold numbers, got dtype {values.dtype}")
        if values.shape != (n,):
            raise ValueError(f"y must have {n} values (X's rows), got shape {values.shape}")
        return values.astype(np.float64)
    return values


class QuantileRegressor(_LinearRegressor):
    """Online quantile regression (streamfit's compiled kernel) as a river
    regressor.

    A river ``MiniBatchRegressor`` around
    :class:`streamfit.OnlineQuantileRegressor` in mode "single": each row
    (``learn_one``, or each row of ``learn_many``'s DataFrame, in order) is
    one sub-gradient step on the check loss at ``tau``, with the paper's
    statistical stepsize schedule by default (no learning rate to tune). See
    :mod:`streamfit.river` for how dict keys map to the kernel's columns.

    Parameters
    ----------
    tau : float, default 0.5
        The quantile, in (0, 1).
    schedule : str or schedule object, default "statistical"
        As :class:`streamfit.OnlineQuantileRegressor`'s: "statistical",
        "constant", "inverse_time" or an object of :mod:`streamfit.schedules`.
    average : bool, default False
        Polyak-Ruppert averaging of the iterates (the accurate estimate; see
        :class:`streamfit.OnlineQuantileRegressor`). The default is the
        paper's plain iterate, which follows a changing stream faster.
    fit_intercept : bool, default True
    scale : None or "online", default None
        "online": standardise each feature by its running mean and standard
        deviation inside the kernel (an alternative to a river
        ``StandardScaler`` in front).
    features : sequence of keys or None, default None
        The model's columns, in order. None: the keys of the first row
        learnt from, sorted when they are sortable.
    new_features : {"ignore", "raise"}, default "ignore"
        What a key outside the columns does: ignored, or a ``ValueError``.
    hashing : None or int, default None
        None: the model's columns are the dicts' keys, fixed by the first row
        (or ``features``). An int n: every key is hashed into n columns as
        scikit-learn's ``FeatureHasher(n_features=n)`` hashes it (string
        keys; a string value v makes the feature "key=v" of value 1), in
        compiled code at O(the row's features): features are taken as they
        come, never ignored (collisions add up). ``weights`` then maps
        hashed columns to coefficients. Excludes ``features``.

    Attributes
    ----------
    weights : dict
        Feature -> coefficient.
    intercept : float
    estimator : streamfit.OnlineQuantileRegressor or None
        The wrapped estimator.
    columns : tuple or None

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.river import QuantileRegressor
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(5000, 3, tau=0.9, random_state=0)
    >>> model = QuantileRegressor(tau=0.9, average=True)
    >>> for row, target in zip(X.tolist(), y.tolist()):
    ...     x = {"a": row[0], "b": row[1], "c": row[2]}
    ...     model.learn_one(x, target)
    >>> w = np.array([model.weights[k] for k in "abc"])
    >>> bool(np.linalg.norm(w - beta) < 0.01 * np.linalg.norm(beta))
    True
    >>> # "c" reads as 0
    >>> isinstance(model.predict_one({"a": 1.0, "b": 0.0}), float)
    True

    Open feature sets, hashed (new keys and categorical values are taken as
    they come):

    >>> hashed = QuantileRegressor(tau=0.9, average=True, hashing=2 ** 18)
    >>> for row, target in zip(X.tolist(), y.tolist()):
    ...     x = {"a": row[0], "b": row[1], "c": row[2], "city": "Lyon"}
    ...     hashed.learn_one(x, target)
    >>> isinstance(hashed.predict_one({"a": 1.0, "new": 2.0}), float)
    True

    In a pipeline, with river's scaler in front:

    >>> from river import preprocessing
    >>> pipe = preprocessing.StandardScaler() | QuantileRegressor(tau=0.9)
    >>> for row, target in zip(X[:500].tolist(), y[:500].tolist()):
    ...     pipe.learn_one({"a": row[0], "b": row[1], "c": row[2]}, target)
    >>> isinstance(pipe.predict_one({"a": 0.5, "b": 1.0, "c": 0.0}), float)
    True
    """

    def __init__(self, tau=0.5, *, schedule="statistical", average=False, fit_intercept=True,
                 scale=None, features=None, new_features="ignore", hashing=None):
        super().__init__()
        self.hashing = hashing
        self.tau = tau
        self.schedule = schedule
        self.average = average
        self.fit_intercept = fit_intercept
        self.scale = scale
        self.features = features
        self.new_features = new_features

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"tau": 0.9, "average": True}

    def _make_estimator(self):
        self._check_common()
        if isinstance(self.tau, (list, tuple, np.ndarray)):
            raise ValueError("tau must be one number for a river regressor (predict_one "
                             f"returns one float), got {self.tau!r}")
        return _OnlineQuantile(tau=self.tau, schedule=self.schedule, average=self.average,
                               fit_intercept=self.fit_intercept, scale=self.scale,
                               hashing=self.hashing)


class LeastSquaresRegressor(_LinearRegressor):
    """Online least squares (streamfit's compiled kernel) as a river
    regressor.

    A river ``MiniBatchRegressor`` around
    :class:`streamfit.OnlineLeastSquaresRegressor`: one gradient step on the
    squared loss per row, with the statistical schedule for least squares by
    default. See :mod:`streamfit.river` for how dict keys map to the
    kernel's columns.

    Parameters
    ----------
    schedule : str or schedule object, default "statistical"
    average : bool, default False
    fit_intercept : bool, default True
    features : sequence of keys or None, default None
        The model's columns, in order (None: the keys of the first row).
    new_features : {"ignore", "raise"}, default "ignore"
    hashing : None or int, default None
        As :class:`QuantileRegressor`'s: keys hashed into this many columns
        (FeatureHasher's hashing), new features taken as they come.

    Attributes
    ----------
    weights : dict
    intercept : float
    estimator : streamfit.OnlineLeastSquaresRegressor or None
    columns : tuple or None

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.river import LeastSquaresRegressor
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(5000, 2, noise="gaussian", random_state=0)
    >>> model = LeastSquaresRegressor()
    >>> for row, target in zip(X.tolist(), y.tolist()):
    ...     model.learn_one({"u": row[0], "v": row[1]}, target)
    >>> w = np.array([model.weights["u"], model.weights["v"]])
    >>> bool(np.linalg.norm(w - beta) < 0.01 * np.linalg.norm(beta))
    True
    """

    def __init__(self, *, schedule="statistical", average=False, fit_intercept=True,
                 features=None, new_features="ignore", hashing=None):
        super().__init__()
        self.hashing = hashing
        self.schedule = schedule
        self.average = average
        self.fit_intercept = fit_intercept
        self.features = features
        self.new_features = new_features

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"average": True, "fit_intercept": False}

    def _make_estimator(self):
        self._check_common()
        return _OnlineLeastSquares(schedule=self.schedule, average=self.average,
                                   fit_intercept=self.fit_intercept, hashing=self.hashing)
