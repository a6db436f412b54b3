"""Offline linear quantile regression, the benchmark the paper compares against.

``method="highs"`` solves the exact linear program (its dual) with scipy's
HiGHS interior point (no extra dependency); ``"statsmodels"`` uses ``statsmodels.QuantReg`` (iteratively
reweighted least squares, an optional dependency).
"""
from __future__ import annotations

import numpy as np
from scipy import optimize

from .._validation import check_matrix, check_scalar, check_vector

__all__ = ["offline_quantile_regression"]

_METHODS = ("highs", "statsmodels")


def offline_quantile_regression(X, y, tau=0.5, *, fit_intercept=False, method="highs"):
    """Minimise sum_i rho_tau(y_i - x_i'beta - b) exactly (an LP) or by IRLS.

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
    """
    X = check_matrix(X, "X", min_rows=1)
    y = check_vector(y, X.shape[0], "y")
    check_scalar(tau, "tau", low=0, high=1, low_open=True, high_open=True)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    A = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
    if method == "statsmodels":
        try:
            from statsmodels.regression.quantile_regression import QuantReg
        except ImportError as exc:  # pragma: no cover - optional dependency
            raise ImportError("method='statsmodels' needs statsmodels: "
                              "pip install 'streamfit[offline]'") from exc
        coef = np.asarray(QuantReg(y, A).fit(q=tau, max_iter=5000).params, dtype=np.float64)
    else:
        # Koenker's dual LP, with d equality constraints instead of n:
        #   max y'a  s.t.  A'a = (1 - tau) A'1,  0 <= a <= 1;
        # the primal coefficients are (minus) the equality duals. HiGHS's
        # interior point solves it ~10x faster than the primal LP.
        res = optimize.linprog(-y, A_eq=A.T, b_eq=(1.0 - tau) * A.sum(axis=0), bounds=(0, 1),
                               method="highs-ipm")
        if res.status != 0:
            raise RuntimeError(f"HiGHS failed: {res.message}")
        coef = -np.asarray(res.eqlin.marginals, dtype=np.float64)
    if fit_intercept:
        return coef[:-1].copy(), float(coef[-1])
    return coef.copy(), 0.0
