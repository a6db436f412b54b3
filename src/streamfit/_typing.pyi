# The names streamfit's annotations use, for type checkers only: this module
# has no .py (nothing imports it at run time; the estimators import it under
# ``if TYPE_CHECKING:`` and, with ``from __future__ import annotations``, their
# annotations stay unevaluated strings).
#
# scikit-learn ships no type information, so its base classes are ``Any`` to
# a type checker, and a class with an ``Any`` base accepts every attribute:
# ``est.partial_fitt(...)`` would pass. The estimators therefore inherit, for
# the type checker only, the typed stand-ins below: the part of scikit-learn's
# BaseEstimator and mixins (sklearn/base.py, 1.6) that streamfit's users call.
from typing import Any, Literal, TypeVar

import numpy as np
from numpy.typing import ArrayLike as ArrayLike, NDArray

from .schedules import Schedule

_T = TypeVar("_T")
Float64Array = NDArray[np.float64]
# random_state parameters: a seed or a Generator (numpy's RandomState is also taken)
RandomStateLike = int | np.random.Generator | np.random.RandomState | None
# a stepsize schedule: one of streamfit.schedules' names or a Schedule object
ScheduleLike = Literal["statistical", "constant", "inverse_time"] | Schedule

class BaseEstimator:
    def get_params(self, deep: bool = True) -> dict[str, Any]: ...
    def set_params(self: SelfT, **params: Any) -> SelfT: ...
    def __sklearn_tags__(self) -> Any: ...
    def __getstate__(self) -> dict[str, Any]: ...
    def __setstate__(self, state: dict[str, Any]) -> None: ...
    @classmethod
    def _get_param_names(cls) -> list[str]: ...

class RegressorMixin:
    def score(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float: ...
    def __sklearn_tags__(self) -> Any: ...

class TransformerMixin:
    def fit_transform(self, X: ArrayLike, y: Any = None, **fit_params: Any) -> Float64Array: ...
    def set_output(self: _T, *, transform: str | None = None) -> _T: ...
    def __sklearn_tags__(self) -> Any: ...

class ClassNamePrefixFeaturesOutMixin:
    def get_feature_names_out(self, input_features: ArrayLike | None = None) -> NDArray[np.object_]: ...

# what fit / partial_fit / set_params return: the estimator they were called on
SelfT = TypeVar("SelfT", bound=BaseEstimator)

# what the estimators take as data: array-likes, and (where the docstrings
# say so) DataFrames, sparse matrices or dict rows; checked at run time
ArrayIn = Any

# the estimators streamfit.save writes and streamfit.load returns
# (streamfit._model_file.ESTIMATORS)
import os
from typing import BinaryIO

from .lowrank import OnlineLowRankQuantileRegressor
from .pca import DropoutPCA, FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA, PerturbedLeaderPCA
from .quantile import (OnlineIntervalRegressor, OnlineLeastSquaresRegressor,
                       OnlineQuantileRegressor)

Estimator = (PerturbedLeaderPCA | FollowTheLeaderPCA | DropoutPCA | MatrixEGPCA | MatrixGDPCA
             | OnlineQuantileRegressor | OnlineLeastSquaresRegressor | OnlineIntervalRegressor
             | OnlineLowRankQuantileRegressor)
# a path, or a binary file object
FileLike = str | os.PathLike[str] | BinaryIO
