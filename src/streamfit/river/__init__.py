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

try:
    import river  # noqa: F401  (the check only: the submodules use it)
except ImportError as exc:          # pragma: no cover - exercised in a river-less venv
    raise ImportError(
        "streamfit.river needs the river package, which is an optional dependency of "
        "streamfit: install it with  pip install 'streamfit[river]'  (or  pip install river)"
    ) from exc

from ._linear import LeastSquaresRegressor, QuantileRegressor
from ._pca import PerturbedLeaderPCA

__all__ = ["QuantileRegressor", "LeastSquaresRegressor", "PerturbedLeaderPCA"]

# Public under streamfit.river: their pickles and reprs name the module users
# import, so that moving code between the private modules breaks neither.
for _cls in (QuantileRegressor, LeastSquaresRegressor, PerturbedLeaderPCA):
    _cls.__module__ = __name__
del _cls
