"""streamfit: online learners with guarantees, hot loops in Cython + BLAS.

Online PCA by Follow the Perturbed Leader (Kotlowski & Warmuth) and by Follow
the Leader with dropout perturbations (van Erven, Kotlowski & Warmuth), and its
comparators MEG and matrix GD over the capped simplex, live in
:mod:`streamfit.pca`; online quantile regression (Shen, Xia & Zhou, JMLR 2025) lives in
:mod:`streamfit.quantile` (its low-rank matrix extension in
:mod:`streamfit.lowrank`); stepsize schedules in :mod:`streamfit.schedules`;
synthetic streams in :mod:`streamfit.simulate`; the paper experiments in
:mod:`streamfit.experiments` (run them with ``python -m streamfit``).
"""
from .pca import DropoutPCA, FollowTheLeaderPCA, MatrixEGPCA, MatrixGDPCA, PerturbedLeaderPCA
from .lowrank import OnlineLowRankQuantileRegressor
from .quantile import (OnlineIntervalRegressor, OnlineLeastSquaresRegressor,
                       OnlineQuantileRegressor, offline_quantile_regression)

from ._include import get_include
from ._model_file import load, save

__version__ = "0.1.0"
__all__ = ["PerturbedLeaderPCA", "FollowTheLeaderPCA", "DropoutPCA", "MatrixEGPCA", "MatrixGDPCA",
           "OnlineQuantileRegressor", "OnlineLeastSquaresRegressor", "OnlineIntervalRegressor",
           "offline_quantile_regression", "OnlineLowRankQuantileRegressor", "get_include", "save",
           "load", "__version__"]
