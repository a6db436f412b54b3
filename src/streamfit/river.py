"""river adapters: streamfit's online estimators as river models.

`river <https://riverml.xyz>`_ feeds models one row at a time as a dict
(``learn_one(x, y)``, ``predict_one(x)``) and in mini-batches as pandas
DataFrames (``learn_many``, ``predict_many``), and chains them in pipelines
(``preprocessing.StandardScaler() | model``). The classes here are river
estimators that own a streamfit estimator and hand each row to its compiled
kernel:

- :class:`QuantileRegressor` wraps :class:`~streamfit.OnlineQuantileRegressor`
  (``river.base.MiniBatchRegressor``);
- :class:`LeastSquaresRegressor` wraps
  :class:`~streamfit.OnlineLeastSquaresRegressor` (``river.base.MiniBatchRegressor``);
- :class:`PerturbedLeaderPCA` wraps :class:`~streamfit.PerturbedLeaderPCA`
  (``river.base.MiniBatchTransformer``).

river is an optional dependency (``pip install 'streamfit[river]'``);
``import streamfit`` never imports it.

**Features.** A streamfit kernel works on a fixed number of columns (the
statistical schedule's constants and the PCA's matrices are sized by it), so
each adapter fixes its columns once: the keys given as ``features``, or else
the keys of the first row (or the columns of the first DataFrame) it learns
from, sorted when they are sortable (so the order in which a dict lists its
keys never matters). After that:

- a key that is missing from a row reads as 0.0 (as in river's linear models,
  where an absent feature contributes nothing);
- a key outside the columns is ignored with ``new_features="ignore"`` (the
  default: river's models keep working when features appear, and this one
  stays the model on its columns) or refused with ``new_features="raise"`` (a
  ``ValueError`` naming the keys, the model unchanged). Declare the columns
  up front with ``features=[...]`` when the first rows do not carry every
  feature.

Values must be numbers (bool counts as 0/1); NaN, infinities and strings are
refused with an error naming the feature, and the model is left unchanged,
as by the wrapped estimators. Everything the wrapped estimator guarantees
carries over: a model pickled mid-stream resumes bit-identically, and
``learn_many`` on a DataFrame gives the same model as ``learn_one`` over its
rows. Calls from several threads are serialised by the wrapped estimator
(and the first rows, which make it, by the adapter). The wrapped estimator
(``estimator``) is there to be read: rows fed to it directly bypass the
adapter's columns and the coefficients ``predict_one`` keeps between
updates.
"""
from __future__ import annotations

import itertools
import math
import numbers
import operator

try:
    from river import base as _rb
except ImportError as exc:          # pragma: no cover - exercised in a river-less venv
    raise ImportError(
        "streamfit.river needs the river package, which is an optional dependency of "
        "streamfit: install it with  pip install 'streamfit[river]'  (or  pip install river)"
    ) from exc

import numpy as np

from ._kernels._threads import call_holding, object_lock
from .pca import PerturbedLeaderPCA as _PerturbedLeaderPCA
from .quantile import OnlineLeastSquaresRegressor as _OnlineLeastSquares
from .quantile import OnlineQuantileRegressor as _OnlineQuantile

__all__ = ["QuantileRegressor", "LeastSquaresRegressor", "PerturbedLeaderPCA"]

_NEW_FEATURES = ("ignore", "raise")
_ZERO = itertools.repeat(0.0)
_VERSIONS = itertools.count(1)


def _sorted_keys(keys):
    """The keys in sorted order when they compare, else in the given order."""
    keys = list(keys)
    try:
        return tuple(sorted(keys))
    except TypeError:
        return tuple(keys)


class _Columns:
    """Maps river's dict rows and DataFrames onto the fixed columns of a
    streamfit estimator (see the module docstring). Subclasses set
    ``self._columns = None`` and ``self._est = None`` in ``__init__``."""

    def _check_common(self):
        if self.features is not None and (isinstance(self.features, (str, bytes)) or
                                          not hasattr(self.features, "__iter__")):
            raise TypeError(f"features must be a sequence of keys or None, got "
                            f"{self.features!r}")
        if not isinstance(self.new_features, str) or self.new_features not in _NEW_FEATURES:
            raise ValueError(f"new_features must be one of {_NEW_FEATURES}, got "
                             f"{self.new_features!r}")
        if self.features is not None:
            features = list(self.features)
            if not features or len(set(features)) != len(features):
                raise ValueError(f"features must be distinct keys, at least one, got "
                                 f"{self.features!r}")

    def _columns_for(self, keys):
        """The columns in use, or those a first row with these keys fixes."""
        if self._columns is not None:
            return self._columns
        self._check_common()
        if self.features is not None:
            return tuple(self.features)
        return _sorted_keys(keys)

    def _refuse_new(self, keys, columns):
        if self.new_features == "raise":
            new = set(keys).difference(columns)
            if new:
                names = ", ".join(sorted(map(repr, new)))
                raise ValueError(f"features {names} are not among the model's columns (fixed "
                                 f"at {len(columns)} features by the first row or by "
                                 "`features`) and new_features='raise'; the model is "
                                 "unchanged. Pass new_features='ignore' to ignore them, or "
                                 "declare every feature in `features`")

    def _row(self, x, columns):
        """x as a (1, d) float64 row in the order of columns."""
        if not isinstance(x, dict):
            raise TypeError(f"x must be a dict of features, got {type(x).__name__}")
        self._refuse_new(x, columns)
        try:
            row = np.fromiter(map(x.get, columns, _ZERO), np.float64, len(columns))
        except (TypeError, ValueError):
            bad = [k for k in columns if not isinstance(x.get(k, 0.0), numbers.Real)]
            raise TypeError(f"x: the values of features {bad!r} are not numbers") from None
        return row.reshape(1, -1)

    def _frame(self, X, columns):
        """The DataFrame X as a (n, d) float64 array in the order of columns."""
        import pandas as pd

        if not isinstance(X, pd.DataFrame):
            raise TypeError(f"X must be a pandas DataFrame, got {type(X).__name__}")
        if not X.columns.is_unique:
            raise ValueError(f"X has repeated column names: {list(X.columns)!r}")
        self._refuse_new(X.columns, columns)
        X = X.reindex(columns=list(columns), fill_value=0.0)
        try:
            return X.to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            bad = [c for c in columns if not pd.api.types.is_numeric_dtype(X[c])]
            raise TypeError(f"X: the values of features {bad!r} are not numbers") from None

    @staticmethod
    def _check_finite(A, columns, what):
        """Raise a ValueError naming the features of A that hold NaN or
        infinity. Called only once something failed or came out non-finite:
        the estimators check every row already, and a second check on the
        hot path would cost more than the row's update."""
        bad = ~np.isfinite(A).all(axis=0)
        if bad.any():
            names = [columns[j] for j in np.flatnonzero(bad)]
            raise ValueError(f"{what}: features {names!r} hold NaN or infinity; the model "
                             "is unchanged (a missing feature reads as 0: leave the key "
                             "out rather than passing NaN)")

    def _learn_first_or(self, method, *args):
        """method(*args); the calls that may make the estimator (before the
        first rows are learnt) one at a time, so that two threads' first
        rows never make two estimators and lose one's rows."""
        if self._est is None:
            call_holding(object_lock(self), method, *args)
        else:
            method(*args)

    def _learn(self, A, y, columns, what):
        """Feed rows A (n, d) and targets y to the wrapped estimator, fixing
        the columns on the first call that the estimator accepts."""
        est = self._est
        try:
            if est is None:
                est = self._make_estimator()
                est.partial_fit(A, y) if y is not None else est.partial_fit(A)
                # (only once the first rows are accepted: a refused call
                # leaves the model as it was, with no columns)
                self._est, self._columns = est, columns
            elif y is not None:
                est.partial_fit(A, y)
            else:
                est.partial_fit(A)
        except ValueError:
            self._check_finite(A, columns, what)
            raise
        # a new version of the coefficients: a cached copy is stale (a fresh
        # number from a shared counter, so that two threads' updates never
        # leave the same version)
        self._version = next(_VERSIONS)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_lock", None)                # the call lock of object_lock
        if "_solution" in state:
            state["_solution"] = None           # a cache, rebuilt on demand
        return state


class _LinearRegressor(_Columns, _rb.MiniBatchRegressor):
    """learn_one/predict_one/learn_many/predict_many over a streamfit linear
    estimator (``_make_estimator``)."""

    def __init__(self):
        self._est = None
        self._columns = None
        self._version = 0
        # (version, coef as a tuple, intercept) for predict_one: reading
        # coef_ and intercept_ costs more than the prediction itself, so
        # they are read once per version of the coefficients
        self._solution = None

    def learn_one(self, x, y):
        """Update the model with one row.

        Parameters
        ----------
        x : dict
            Features (keys of the model's columns; missing keys read as 0).
        y : float
            The target.
        """
        if self._est is None:
            self._learn_first_or(self._learn_row, x, (y,))
        else:                   # (the hot path, inlined)
            columns = self._columns
            self._learn(self._row(x, columns), (y,), columns, "x")

    def _learn_row(self, x, y):
        columns = self._columns_for(x)
        self._learn(self._row(x, columns), y, columns, "x")

    def predict_one(self, x):
        """The prediction x' coef_ + intercept_ (0.0 before the first row is learnt).

        Parameters
        ----------
        x : dict

        Returns
        -------
        float
        """
        if self._est is None:
            return 0.0
        columns = self._columns
        solution = self._solution
        if solution is None or solution[0] != self._version:
            # (the version read before the coefficients: an update that
            # lands in between leaves a copy already stale, never a stale
            # copy taken for current)
            version, est = self._version, self._est
            solution = self._solution = (version, tuple(est.coef_.tolist()),
                                         float(est.intercept_))
        if not isinstance(x, dict):
            raise TypeError(f"x must be a dict of features, got {type(x).__name__}")
        self._refuse_new(x, columns)
        try:
            # intercept + sum_j coef_j x_j, in plain Python: for the d of a
            # dict row, faster than building a NumPy row for one dot product
            pred = float(sum(map(operator.mul, map(x.get, columns, _ZERO), solution[1]),
                             solution[2]))
        except (TypeError, OverflowError):
            self._row(x, columns)               # raises, naming the features
            raise
        if not math.isfinite(pred):
            self._check_finite(self._row(x, columns), columns, "x")
        return pred

    def learn_many(self, X, y):
        """Update the model with a mini-batch: the same model as ``learn_one``
        over its rows in order.

        Parameters
        ----------
        X : pandas.DataFrame
        y : pandas.Series
        """
        self._learn_first_or(self._learn_frame, X, y)

    def _learn_frame(self, X, y):
        columns = self._columns_for(X.columns if hasattr(X, "columns") else ())
        self._learn(self._frame(X, columns), y, columns, "X")

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

        if self._est is None:
            if not isinstance(X, pd.DataFrame):
                raise TypeError(f"X must be a pandas DataFrame, got {type(X).__name__}")
            return pd.Series(0.0, index=X.index, dtype=np.float64)
        A = self._frame(X, self._columns)
        self._check_finite(A, self._columns, "X")
        return pd.Series(A @ self._est.coef_ + float(self._est.intercept_), index=X.index,
                         dtype=np.float64)

    @property
    def weights(self):
        """dict: feature -> coefficient ({} before the first row is learnt)."""
        if self._est is None:
            return {}
        return dict(zip(self._columns, self._est.coef_.tolist()))

    @property
    def intercept(self):
        """float: the intercept (0.0 before the first row is learnt)."""
        return 0.0 if self._est is None else float(self._est.intercept_)

    @property
    def estimator(self):
        """The wrapped streamfit estimator (None before the first row is
        learnt); its ``coef_`` is in the order of :attr:`columns`."""
        return self._est

    @property
    def columns(self):
        """tuple: the features, in the order of the wrapped estimator's
        columns (None before the first row is learnt)."""
        return self._columns


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
    >>> isinstance(model.predict_one({"a": 1.0, "b": 0.0}), float)     # "c" reads as 0
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
                 scale=None, features=None, new_features="ignore"):
        super().__init__()
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
                               fit_intercept=self.fit_intercept, scale=self.scale)


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
                 features=None, new_features="ignore"):
        super().__init__()
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
                                   fit_intercept=self.fit_intercept)


class PerturbedLeaderPCA(_Columns, _rb.MiniBatchTransformer):
    """Online PCA by Follow the Perturbed Leader as a river transformer.

    A river ``MiniBatchTransformer`` around :class:`streamfit.PerturbedLeaderPCA`:
    ``learn_one(x)`` plays one trial with the row x (the kernel's rank-one
    update and warm-started top-k solve); ``transform_one(x)`` returns the
    coordinates of x on the current components, ``{0: v_0'x, ..., k-1:
    v_{k-1}'x}`` (integer keys, as river's random projectors use), uncentered
    as the online PCA gain is (put a ``StandardScaler`` in front to center).
    Before the first row is learnt every coordinate is 0.0. See
    :mod:`streamfit.river` for how dict keys map to the kernel's columns.

    Parameters
    ----------
    n_components : int, default 1
        k, at most the number of columns.
    sigma : "auto" or float, default "auto"
    noise : {"fixed", "random_walk", "independent"}, default "fixed"
    solver : {"auto", "krylov", "exact"}, default "auto"
    tol : float, default 0.01
        As :class:`streamfit.PerturbedLeaderPCA`'s.
    seed : int or None, default None
        Seeds the perturbation (river's name for ``random_state``): the same
        seed gives the same components.
    features : sequence of keys or None, default None
    new_features : {"ignore", "raise"}, default "ignore"

    Attributes
    ----------
    estimator : streamfit.PerturbedLeaderPCA or None
    columns : tuple or None
    components : dict
        Component index -> {feature: loading} ({} before the first row).

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.river import PerturbedLeaderPCA
    >>> rng = np.random.default_rng(0)
    >>> pca = PerturbedLeaderPCA(n_components=1, seed=0)
    >>> for _ in range(500):                 # most variance along feature "a"
    ...     pca.learn_one({"a": 3 * rng.standard_normal(), "b": rng.standard_normal()})
    >>> {k: round(abs(v), 1) for k, v in pca.transform_one({"a": 2.0, "b": 0.0}).items()}
    {0: 2.0}
    """

    def __init__(self, n_components=1, *, sigma="auto", noise="fixed", solver="auto", tol=0.01,
                 seed=None, features=None, new_features="ignore"):
        self.n_components = n_components
        self.sigma = sigma
        self.noise = noise
        self.solver = solver
        self.tol = tol
        self.seed = seed
        self.features = features
        self.new_features = new_features
        self._est = None
        self._columns = None
        self._version = 0

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"n_components": 2, "noise": "random_walk", "seed": 1}

    def _make_estimator(self):
        self._check_common()
        return _PerturbedLeaderPCA(n_components=self.n_components, sigma=self.sigma,
                                   noise=self.noise, solver=self.solver, tol=self.tol,
                                   random_state=self.seed)

    def learn_one(self, x):
        """Play one trial with the row x.

        Parameters
        ----------
        x : dict
        """
        self._learn_first_or(self._learn_row, x, None)

    def _learn_row(self, x, y):
        columns = self._columns_for(x)
        self._learn(self._row(x, columns), y, columns, "x")

    def transform_one(self, x):
        """The coordinates of x on the current components.

        Parameters
        ----------
        x : dict

        Returns
        -------
        dict
            {0: v_0'x, ..., n_components - 1: ...}.
        """
        k = self.n_components
        if self._est is None:
            return dict.fromkeys(range(k), 0.0)
        row = self._row(x, self._columns)
        self._check_finite(row, self._columns, "x")
        return dict(enumerate((self._est.components_ @ row[0]).tolist()))

    def learn_many(self, X):
        """Play one trial per row of X, in order (the same as ``learn_one``
        over its rows).

        Parameters
        ----------
        X : pandas.DataFrame
        """
        self._learn_first_or(self._learn_frame, X, None)

    def _learn_frame(self, X, y):
        columns = self._columns_for(X.columns if hasattr(X, "columns") else ())
        self._learn(self._frame(X, columns), y, columns, "X")

    def transform_many(self, X):
        """The coordinates of the rows of X on the current components.

        Parameters
        ----------
        X : pandas.DataFrame

        Returns
        -------
        pandas.DataFrame
            Columns 0, ..., n_components - 1, indexed like X.
        """
        import pandas as pd

        k = self.n_components
        if self._est is None:
            if not isinstance(X, pd.DataFrame):
                raise TypeError(f"X must be a pandas DataFrame, got {type(X).__name__}")
            return pd.DataFrame(0.0, index=X.index, columns=range(k))
        A = self._frame(X, self._columns)
        self._check_finite(A, self._columns, "X")
        return pd.DataFrame(A @ self._est.components_.T, index=X.index, columns=range(k))

    @property
    def components(self):
        """dict: component index -> {feature: loading}."""
        if self._est is None:
            return {}
        return {i: dict(zip(self._columns, v)) for i, v in
                enumerate(self._est.components_.tolist())}

    @property
    def estimator(self):
        """The wrapped :class:`streamfit.PerturbedLeaderPCA` (None before the
        first row is learnt)."""
        return self._est

    @property
    def columns(self):
        """tuple: the features, in the order of the wrapped estimator's
        columns (None before the first row is learnt)."""
        return self._columns
