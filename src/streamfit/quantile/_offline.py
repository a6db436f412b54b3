"""Offline linear quantile regression, the benchmark the paper compares against.

``method="highs"`` solves the exact linear program (its dual) with scipy's
HiGHS interior point (no extra dependency); ``"statsmodels"`` uses ``statsmodels.QuantReg`` (iteratively
reweighted least squares, an optional dependency).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .._typing import ArrayIn, Float64Array

import numpy as np
from scipy import optimize

from .._validation import check_matrix, check_scalar, check_vector

__all__ = ["offline_quantile_regression"]

_METHODS = ("highs", "statsmodels")


def _power_of_two_scale(a):
    """2^-e with 2^e the order of max |a| (1 for all zeros): multiplying by it
    is exact, so scaling and unscaling lose nothing."""
    big = float(np.max(np.abs(a))) if a.size else 0.0
    if big == 0.0:
        return 1.0
    return float(np.ldexp(1.0, -int(np.frexp(big)[1])))


def offline_quantile_regression(X: ArrayIn, y: ArrayIn, tau: float = 0.5, *,
                                fit_intercept: bool = False,
                                method: Literal["highs", "statsmodels"] = "highs"
                                ) -> tuple[Float64Array, float]:
    """Minimise sum_i rho_tau(y_i - x_i'beta - b) exactly (an LP) or by IRLS.

    The problem is equilibrated first: each column of X and y are scaled by
    powers of two to entries of order 1, solved, and the solution scaled
    back (quantile regression is equivariant: scaling a column by s scales
    its coefficient by 1/s, scaling y scales all by s). The solvers' tolerances
    are absolute, so without this X * 1e-12 came back as zeros and y * 1e-12
    13% off; with it any scale of X's columns and y within float64's range
    gives the unscaled problem's accuracy.

    Returns
    -------
    coef : (d,) array
    intercept : float (0 when ``fit_intercept=False``)

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit import offline_quantile_regression
    >>> from streamfit.simulate import make_linear_stream
    >>> X, y, beta = make_linear_stream(500, 3, random_state=0)
    >>> coef, b = offline_quantile_regression(X, y, 0.5)
    >>> bool(np.linalg.norm(coef - beta) < 0.05 * np.linalg.norm(beta))
    True
    >>> # any scale
    >>> tiny, _ = offline_quantile_regression(X * 1e-12, y * 1e-12, 0.5)
    >>> bool(np.allclose(tiny, coef, rtol=1e-6))
    True
    """
    X = check_matrix(X, "X", min_rows=1)
    y = check_vector(y, X.shape[0], "y")
    check_scalar(tau, "tau", low=0, high=1, low_open=True, high_open=True)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    col_scale = np.array([_power_of_two_scale(X[:, j]) for j in range(X.shape[1])])
    y_scale = _power_of_two_scale(y)
    Xs, ys = X * col_scale, y * y_scale
    A = np.hstack([Xs, np.ones((X.shape[0], 1))]) if fit_intercept else Xs
    if method == "statsmodels":
        try:
            from statsmodels.regression.quantile_regression import QuantReg
        except ImportError as exc:  # pragma: no cover - optional dependency
            raise ImportError("method='statsmodels' needs statsmodels: "
                              "pip install 'streamfit[offline]'") from exc
        coef = np.asarray(QuantReg(ys, A).fit(q=tau, max_iter=5000).params, dtype=np.float64)
    else:
        # Koenker's dual LP, with d equality constraints instead of n:
        #   max y'a  s.t.  A'a = (1 - tau) A'1,  0 <= a <= 1;
        # the primal coefficients are (minus) the equality duals. HiGHS's
        # interior point solves it ~10x faster than the primal LP.
        res = optimize.linprog(-ys, A_eq=A.T, b_eq=(1.0 - tau) * A.sum(axis=0), bounds=(0, 1),
                               method="highs-ipm")
        if res.status != 0:
            raise RuntimeError(f"HiGHS failed: {res.message}")
        coef = -np.asarray(res.eqlin.marginals, dtype=np.float64)
    # undo the scaling: beta_j = beta~_j s_j / s_y, b = b~ / s_y
    if fit_intercept:
        return coef[:-1] * col_scale / y_scale, float(coef[-1] / y_scale)
    return coef * col_scale / y_scale, 0.0
