"""streamfit's Follow the Perturbed Leader PCA as a river mini-batch transformer."""
from __future__ import annotations

import numpy as np
from river import base as _rb

from .._kernels._pca_api import FirstCall, dict_row
from ..pca import PerturbedLeaderPCA as _PerturbedLeaderPCA
from ._columns import _Columns

__all__ = ["PerturbedLeaderPCA"]


class PerturbedLeaderPCA(_Columns, _rb.MiniBatchTransformer):
    """Online PCA by Follow the Perturbed Leader as a river transformer.

    A river ``MiniBatchTransformer`` around :class:`streamfit.PerturbedLeaderPCA`
    and its compiled state object: ``learn_one(x)`` turns the dict into a
    float64 row in compiled code (real numbers only: a string, bytes, None or
    a Decimal is refused naming its feature) and plays one trial with it (the
    rank-one update and warm-started top-k solve); ``transform_one(x)`` returns the
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
    ...     pca.learn_one({"a": 3 * rng.standard_normal(),
    ...                    "b": rng.standard_normal()})
    >>> z = pca.transform_one({"a": 2.0, "b": 0.0})
    >>> {k: round(abs(v), 1) for k, v in z.items()}
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

    @classmethod
    def _unit_test_params(cls):
        yield {}
        yield {"n_components": 2, "noise": "random_walk", "seed": 1}

    def _make_estimator(self):
        self._check_common()
        return _PerturbedLeaderPCA(n_components=self.n_components, sigma=self.sigma,
                                   noise=self.noise, solver=self.solver, tol=self.tol,
                                   random_state=self.seed)

    def _row(self, x, columns):
        """x as a float64 row in the order of columns, in compiled code: real
        numbers only (a string, bytes, None or a Decimal is refused naming its
        feature, as is NaN, infinity or a number beyond float64)."""
        if not isinstance(x, dict):
            raise TypeError(f"x must be a dict of features, got {type(x).__name__}")
        self._refuse_new(x, columns)
        row = np.empty(len(columns))
        dict_row(x, columns, row)
        return row

    def _frame(self, X, columns):
        import pandas as pd

        if isinstance(X, pd.DataFrame) and X.columns.is_unique:
            bad = [c for c in columns if c in X.columns
                   and not pd.api.types.is_numeric_dtype(X[c])]
            if bad:
                raise TypeError(f"X: the values of features {bad!r} are not numbers (a "
                                f"column of strings or objects); the model is unchanged")
        # (C order, as the estimator's arrays: a strided view of the frame
        # would change the BLAS path of transform_many's product)
        return np.ascontiguousarray(super()._frame(X, columns))

    def _whole(self, est):
        # the estimator's state updated in place: a fork in another thread's
        # call leaves the child a copy that may hold part of a trial
        if est._state.torn:
            raise RuntimeError(
                f"{type(self).__name__}: this process was forked while another thread was "
                f"inside a call on this model, which updates its state in place: here it "
                f"may hold part of a trial, so it refuses every call. Start afresh with "
                f"model.clone(), or load a copy pickled before the fork")
        return est

    def _first(self, rows):
        """The first rows (a (m, d) array function of the columns): through a
        gate made once with dict.setdefault, so that two threads' first rows
        make one estimator and neither's trials are lost."""
        gate = self.__dict__.setdefault("_gate", FirstCall())
        return gate.run(self._first_inside, rows)

    def _first_inside(self, rows):
        if self._est is not None:
            return False
        columns = self._columns_for(rows.keys)
        A = rows.build(columns)
        est = self._make_estimator()
        try:
            est.partial_fit(A)
        except ValueError:
            self._check_finite(A, columns, rows.what)
            raise
        # (only once the first rows are accepted: a refused call leaves the
        # model as it was, with no columns)
        self._est, self._columns = est, columns
        return True

    def learn_one(self, x):
        """Play one trial with the row x.

        Parameters
        ----------
        x : dict
        """
        est = self._est
        if est is None and self._first(_Rows(x, "x", lambda c: self._row(x, c)[None])):
            return
        self._whole(self._est).learn_one(self._row(x, self._columns))

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
        est = self._est
        if est is None:
            return dict.fromkeys(range(self.n_components), 0.0)
        row = self._row(x, self._columns)
        return dict(enumerate(self._whole(est)._state.transform_one(row).tolist()))

    def learn_many(self, X):
        """Play one trial per row of X, in order (the same as ``learn_one``
        over its rows).

        Parameters
        ----------
        X : pandas.DataFrame
        """
        keys = X.columns if hasattr(X, "columns") else ()
        if self._est is None and self._first(_Rows(keys, "X", lambda c: self._frame(X, c))):
            return
        A = self._frame(X, self._columns)
        try:
            self._whole(self._est).partial_fit(A)
        except ValueError:
            self._check_finite(A, self._columns, "X")
            raise

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
        V = self._whole(self._est).components_
        return pd.DataFrame(A @ V.T, index=X.index, columns=range(k))

    @property
    def components(self):
        """dict: component index -> {feature: loading}."""
        if self._est is None:
            return {}
        return {i: dict(zip(self._columns, v)) for i, v in
                enumerate(self._whole(self._est).components_.tolist())}

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

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_gate", None)        # a first row's gate: not state
        return state


class _Rows:
    """A first call's rows: the keys that fix the columns, and how to build
    the (m, d) array once they are fixed."""

    def __init__(self, keys, what, build):
        self.keys, self.what, self.build = keys, what, build
