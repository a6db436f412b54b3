"""Online low-rank matrix regression (quantile and least squares): Section 5
of Shen, Xia & Zhou (2025), Riemannian sub-gradient descent on the rank-r matrices."""
from ._sgd import OnlineLowRankQuantileRegressor

__all__ = ["OnlineLowRankQuantileRegressor"]
