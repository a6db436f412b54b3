"""Online low-rank matrix regression (quantile and least squares): seed 001's
Section 5, Riemannian sub-gradient descent on the rank-r matrices."""
from ._sgd import OnlineLowRankQuantileRegressor

__all__ = ["OnlineLowRankQuantileRegressor"]
