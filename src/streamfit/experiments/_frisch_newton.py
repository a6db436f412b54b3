"""The offline comparator of the quantile experiments: the Frisch-Newton
interior-point method of Portnoy & Koenker (1997), the algorithm of R's
``quantreg`` (``rq(..., method="fn")``), which the paper ran for its offline
benchmark.

It solves the dual of the quantile regression LP,

    max_a y'a   s.t.  X'a = (1 - tau) X'1,  0 <= a <= 1,

by a primal-dual path-following method with Mehrotra's predictor-corrector
step; the coefficients are the equality constraints' multipliers. Each
iteration solves one d x d system X' diag(q) X, so a problem of n = 50,000
rows and d = 100 takes ~20 iterations of ~5e8 multiply-adds: a second or two
on one core, where scipy's HiGHS interior point (the library's
:func:`~streamfit.quantile.offline_quantile_regression`) took ~12 s. The two
agree to the solvers' tolerances (tests/experiments); the experiments'
errors are four or more orders of magnitude larger.
"""
from __future__ import annotations

import numpy as np
from scipy import linalg
from scipy.linalg import blas

__all__ = ["frisch_newton"]


def _step_to_boundary(v, dv):
    """The largest alpha with v + alpha dv >= 0 (inf when dv >= 0)."""
    neg = dv < 0
    if not neg.any():
        return np.inf
    return float(np.min(-v[neg] / dv[neg]))


def frisch_newton(X, y, tau, *, tol=1e-10, max_iter=100, shrink=0.99995):
    """Exact linear quantile regression (no intercept column is added):
    argmin_b sum_i rho_tau(y_i - x_i'b), by the Frisch-Newton interior point.

    Parameters
    ----------
    X : ndarray (n, d), y : ndarray (n,), tau : float in (0, 1)
    tol : float
        Stop when the duality gap is below ``tol`` times (1 + |objective|).
    max_iter : int
    shrink : float
        Fraction of the step to the boundary taken (keeps the iterates
        interior).

    Returns
    -------
    coef : ndarray (d,)

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.experiments._frisch_newton import frisch_newton
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((500, 3))
    >>> y = X @ [1.0, -2.0, 0.5] + rng.standard_t(2, 500)
    >>> coef = frisch_newton(X, y, 0.5)
    >>> np.round(coef, 1)
    array([ 1. , -2.1,  0.5])
    >>> from streamfit.quantile import offline_quantile_regression
    >>> exact, _ = offline_quantile_regression(X, y, 0.5)   # HiGHS on the LP
    >>> bool(np.allclose(coef, exact, atol=1e-6))
    True
    """
    X = np.ascontiguousarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    n, d = X.shape
    # the dual in standard form: min c'a, A a = b, 0 <= a <= 1 (A = X')
    c = -y
    a = np.full(n, 1.0 - tau)            # a feasible start: X'a = b by construction
    b = X.T @ a
    s = 1.0 - a                          # slack of the upper bound
    # dual start from least squares: multipliers b_ls, reduced costs r = c - X b
    coef = -linalg.lstsq(X, y, lapack_driver="gelsy")[0]
    r = c - X @ coef
    r = np.where(r == 0.0, 1e-3, r)
    z = np.maximum(r, 0.0)               # multipliers of a >= 0
    w = z - r                            # multipliers of a <= 1
    with np.errstate(all="ignore"):
        for _ in range(max_iter):
            gap = c @ a - coef @ b + w.sum()
            if gap <= tol * (1.0 + abs(c @ a)):
                break
            step = _iterate(X, c, b, a, s, coef, z, w, n, shrink)
            if step is None:
                break               # at rounding level: the last iterate is the answer
            a, s, coef, z, w = step
    return -coef


def _iterate(X, c, b, a, s, coef, z, w, n, shrink):
    """One predictor-corrector step; None when it would leave the finite
    range or the interior (the gap is then at rounding level)."""
    # predictor (affine) step: solve (X' Q X) dy = X' Q (z - w), Q = diag(q)
    q = 1.0 / (z / a + w / s)
    rz = z - w
    XQ = X * q[:, None]
    # X' Q X as (Q^1/2 X)' (Q^1/2 X) by dsyrk: half the multiply-adds of a
    # general product, and the iteration's main cost (n d^2 / 2)
    half = (X * np.sqrt(q)[:, None]).T           # (d, n), Fortran-ordered: no copy
    gram = blas.dsyrk(1.0, half, trans=0, lower=0)
    try:
        chol = linalg.cho_factor(gram, lower=False, check_finite=False)
    except linalg.LinAlgError:
        return None                 # the weights left X' Q X singular: at the end

    rhs = XQ.T @ rz
    dcoef = linalg.cho_solve(chol, rhs, check_finite=False)
    da = q * (X @ dcoef - rz)
    ds = -da
    dz = -z * (1.0 + da / a)
    dw = -w * (1.0 + ds / s)
    fp = min(shrink * min(_step_to_boundary(a, da), _step_to_boundary(s, ds)), 1.0)
    fd = min(shrink * min(_step_to_boundary(z, dz), _step_to_boundary(w, dw)), 1.0)
    if min(fp, fd) < 1.0:
        # corrector: a centring target mu from the affine step's progress
        mu = z @ a + w @ s
        g = (z + fd * dz) @ (a + fp * da) + (w + fd * dw) @ (s + fp * ds)
        mu = mu * (g / mu) ** 3 / (2 * n)
        dadz, dsdw = da * dz, ds * dw
        xi = mu * (1.0 / a - 1.0 / s)
        extra = dadz - dsdw - xi
        dcoef = linalg.cho_solve(chol, rhs + XQ.T @ extra, check_finite=False)
        da = q * (X @ dcoef + xi - rz - dadz + dsdw)
        ds = -da
        dz = mu / a - z - z / a * da - dadz
        dw = mu / s - w - w / s * ds - dsdw
        fp = min(shrink * min(_step_to_boundary(a, da), _step_to_boundary(s, ds)), 1.0)
        fd = min(shrink * min(_step_to_boundary(z, dz), _step_to_boundary(w, dw)), 1.0)
    out = (a + fp * da, s + fp * ds, coef + fd * dcoef, z + fd * dz, w + fd * dw)
    if not all(np.isfinite(v).all() for v in out) or min(out[0].min(), out[1].min()) <= 0:
        return None
    return out
