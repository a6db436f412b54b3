"""streamfit's Follow the Perturbed Leader PCA as a river mini-batch transformer."""
from __future__ import annotations

from river import base as _rb

from ..pca import PerturbedLeaderPCA as _PerturbedLeaderPCA
from ._columns import _Columns

__all__ = ["PerturbedLeaderPCA"]


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
