"""Online quantile regression (Shen, Xia & Zhou 2025) and its comparators."""
from ._sgd import OnlineLeastSquaresRegressor, OnlineQuantileRegressor
from ._inference import critical_value, simulate_critical_value
from ._offline import offline_quantile_regression
from ._interval import OnlineIntervalRegressor

__all__ = ["OnlineQuantileRegressor", "OnlineLeastSquaresRegressor", "OnlineIntervalRegressor",
           "offline_quantile_regression", "critical_value", "simulate_critical_value"]
