"""streamfit: online learners with guarantees, hot loops in Cython + BLAS.

Online quantile regression (Shen, Xia & Zhou, JMLR 2025) lives in
:mod:`streamfit.quantile`; stepsize schedules in :mod:`streamfit.schedules`;
synthetic streams in :mod:`streamfit.simulate`; the paper experiments in
:mod:`streamfit.experiments` (run them with ``python -m streamfit``).
"""
from .quantile import (OnlineLeastSquaresRegressor, OnlineQuantileRegressor,
                       offline_quantile_regression)

__version__ = "0.1.0"
__all__ = ["OnlineQuantileRegressor", "OnlineLeastSquaresRegressor",
           "offline_quantile_regression", "__version__"]
