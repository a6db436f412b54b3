"""How river's dict rows and DataFrames map onto the fixed columns of a
streamfit estimator (see :mod:`streamfit.river`)."""
from __future__ import annotations

import itertools
import numbers

import numpy as np

_NEW_FEATURES = ("ignore", "raise")
_ZERO = itertools.repeat(0.0)
_F64 = np.dtype(np.float64)     # (compared by identity: `dtype == np.float64` makes a dtype)


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
        """The DataFrame X as a (n, d) float64 array in the order of columns:
        a view of X's values when they are float64 (pandas keeps a frame's
        columns apart, so its rows are strided: the compiled estimators copy
        what they must, once)."""
        import pandas as pd

        if not isinstance(X, pd.DataFrame):
            raise TypeError(f"X must be a pandas DataFrame, got {type(X).__name__}")
        names = X.columns
        seen = self.__dict__.get("_frame_columns")
        if seen is None or seen[1] is not columns or not names.is_(seen[0]):
            # An Index is immutable, and the row slices, heads and masks of a
            # frame share its identity (Index.is_): a frame whose columns were
            # seen equal to the model's, in order, is read as it is without
            # comparing them again (list(Index) costs ~10 us at d = 10,
            # a quarter of a 500-row learn_many)
            if not names.is_unique:
                raise ValueError(f"X has repeated column names: {list(names)!r}")
            if list(names) != list(columns):
                self._refuse_new(names, columns)
                X = X.reindex(columns=list(columns), fill_value=0.0)
            else:
                self.__dict__["_frame_columns"] = (names, columns)
        A = X.to_numpy()
        if A.dtype is _F64:
            return A
        if A.dtype.kind in "iuf":
            return A.astype(np.float64)
        bad = [c for c, t in zip(columns, X.dtypes) if getattr(t, "kind", "O") not in "biuf"]
        if bad:
            # (strings, numeric ones included, and objects are refused, as in
            # learn_one's dicts: to_numpy would convert '2.5' silently)
            raise TypeError(f"X: the values of features {bad!r} are not numbers")
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

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_frame_columns", None)       # the last frame's columns, seen in order
        state.pop("_columns_of", None)          # (_LinearRegressor: its state's columns)
        return state
