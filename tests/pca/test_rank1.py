"""The rank-one update of a symmetric eigendecomposition (csrc/_rank1.pxd), the
step MEG and GD take per vector instance instead of a full LAPACK dsyevd:
against NumPy's eigh (LAPACK dsyevd) on random and adversarial cases, and
U's orthogonality over 10^4 chained updates.

Tolerances: a backward-stable update has residuals of a few eps times the
norm of the updated matrix times a modest function of n; the bounds below
are TOL_C * n * eps * norm with TOL_C = 20 (measured worst cases here are
under ~2 n eps norm), far below what a wrong vector, a missed deflation or a
lost rotation gives (O(1) relative error).
"""
from __future__ import annotations

import numpy as np
import pytest

from streamfit._kernels import _testing

EPS = np.finfo(float).eps
TOL_C = 20.0


def orthogonal(n, rng):
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.sign(np.diag(R))


def check(U, d, x, rho, *, K=None):
    """One update against eigh; returns the block size K the kernel reports."""
    n = len(d)
    A = (U.T * d) @ U
    B = A + rho * np.outer(x, x)
    B = (B + B.T) / 2
    Un, mu, k = _testing.rank_one_update(U, d, x, rho)
    scale = max(np.abs(d).max(), rho * (x @ x), np.finfo(float).tiny)
    tol = TOL_C * max(n, 4) * EPS * scale
    assert np.all(np.diff(mu) >= 0), "eigenvalues not ascending"
    ref = np.linalg.eigvalsh(B)
    np.testing.assert_allclose(mu, ref, rtol=0, atol=tol)
    # the new rows are eigenvectors: a small residual and orthonormal rows
    R = (Un.T * mu) @ Un - B
    assert np.abs(R).max() <= tol, (np.abs(R).max(), tol)
    O = Un @ Un.T - np.eye(n)
    assert np.abs(O).max() <= TOL_C * max(n, 4) * EPS, np.abs(O).max()
    assert 0 <= k <= n
    if K is not None:
        assert k == K, (k, K)
    return k


@pytest.mark.parametrize("n", [1, 2, 3, 5, 20, 100])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random(n, seed):
    rng = np.random.default_rng(seed)
    U = orthogonal(n, rng)
    d = np.sort(rng.standard_normal(n))
    x = rng.standard_normal(n)
    # generic d and z: nothing deflates, the whole block goes through dlaed4
    check(U, d, x, rng.uniform(0.1, 3), K=n)


@pytest.mark.parametrize("n", [6, 40])
def test_repeated_eigenvalues_deflate(n):
    rng = np.random.default_rng(3)
    U = orthogonal(n, rng)
    # MEG's capped directions (log W = 0) and GD's clipped zeros are exact ties
    groups = np.repeat([-2.0, 0.0, 1.5], [n // 3, n // 3, n - 2 * (n // 3)])
    x = rng.standard_normal(n)
    # a group of equal eigenvalues keeps one entry: K = number of groups
    check(U, groups, x, 0.7, K=3)
    # all equal (the uniform start (k/n) I): one entry
    check(U, np.full(n, 0.25), x, 2.0, K=1)
    check(U, np.full(n, np.log(0.25)), x, 2.0, K=1)


def test_nearly_equal_eigenvalues():
    # gaps of a few ulps: deflated by rotation (dlaed2's close pairs), yet
    # the result stays an eigendecomposition to working precision
    rng = np.random.default_rng(4)
    n = 30
    U = orthogonal(n, rng)
    d = np.sort(np.concatenate([1 + np.arange(10) * 4 * EPS, rng.standard_normal(20)]))
    k = check(U, d, rng.standard_normal(n), 1.3)
    assert k < n
    # and gaps just above the deflation threshold: kept, solved by dlaed4
    d = np.sort(np.concatenate([1 + np.arange(10) * 1e-9, rng.standard_normal(20)]))
    check(U, d, rng.standard_normal(n), 1.3, K=n)


def test_z_with_zero_components():
    rng = np.random.default_rng(5)
    n = 25
    U = orthogonal(n, rng)
    d = np.sort(rng.standard_normal(n))
    z = rng.standard_normal(n)
    z[[0, 3, 4, 11, 24]] = 0.0
    x = U.T @ z         # U x = z up to rounding: those entries deflate as they are
    k = check(U, d, x, 0.9)
    assert k == n - 5
    # z exactly e_j (x an eigenvector): one entry moves by rho, no other
    j = 7
    Un, mu, k = _testing.rank_one_update(U, d, U[j].copy(), 2.0)
    assert k <= 1
    check(U, d, U[j].copy(), 2.0)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_x_in_the_span_of_few_eigenvectors(m):
    rng = np.random.default_rng(6 + m)
    n = 40
    U = orthogonal(n, rng)
    d = np.sort(rng.standard_normal(n))
    idx = rng.choice(n, m, replace=False)
    x = rng.standard_normal(m) @ U[idx]
    assert check(U, d, x, 1.1) == m


def test_x_zero_leaves_the_decomposition():
    rng = np.random.default_rng(7)
    U = orthogonal(8, rng)
    d = np.sort(rng.standard_normal(8))
    Un, mu, k = _testing.rank_one_update(U, d, np.zeros(8), 1.0)
    assert k == 0
    np.testing.assert_array_equal(Un, U)
    np.testing.assert_array_equal(mu, d)


def test_a_tiny_update_deflates_everything():
    # rho ||x||^2 below the deflation tolerance of ||A||: (d, U) already is
    # the decomposition to working precision
    rng = np.random.default_rng(8)
    n = 12
    U = orthogonal(n, rng)
    d = np.sort(rng.standard_normal(n))
    assert check(U, d, rng.standard_normal(n), 1e-20) == 0


@pytest.mark.parametrize("dscale, xscale, rho", [
    (1e150, 1e70, 1.0),         # huge
    (1e-150, 1e-70, 1.0),       # tiny
    (1.0, 1e150, 1e-300),       # huge x, tiny rho
    (1e-300, 1e-140, 1e-20),    # near underflow
    (1e200, 1.0, 1e200),        # an update as large as the matrix
    (1.0, 1e5, 1.0),            # an update far larger than the matrix
    (1.0, 1e-5, 1.0),           # an update far smaller
])
def test_huge_and_tiny_scales(dscale, xscale, rho):
    rng = np.random.default_rng(9)
    n = 15
    U = orthogonal(n, rng)
    d = np.sort(rng.standard_normal(n)) * dscale
    x = rng.standard_normal(n) * xscale
    check(U, d, x, rho)


@pytest.mark.parametrize("bad", ["U", "d", "x"])
def test_non_finite_input_is_a_failure_not_a_result(bad):
    # the estimator then falls back to the full chain, which refuses it too
    rng = np.random.default_rng(10)
    U, d, x = orthogonal(5, rng), np.sort(rng.standard_normal(5)), rng.standard_normal(5)
    {"U": U, "d": d, "x": x}[bad].flat[2] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match="dlaed4"):
        _testing.rank_one_update(U, np.sort(d) if bad != "d" else d, x, 1.0)


def test_validation():
    U, d, x = np.eye(3), np.arange(3.0), np.ones(3)
    with pytest.raises(ValueError, match="rho"):
        _testing.rank_one_update(U, d, x, 0.0)
    with pytest.raises(ValueError, match="ascending"):
        _testing.rank_one_update(U, d[::-1].copy(), x, 1.0)
    with pytest.raises(ValueError, match="n x n"):
        _testing.rank_one_update(U, d, np.ones(4), 1.0)


@pytest.mark.parametrize("ties", [False, True])
def test_orthogonality_after_ten_thousand_updates(ties):
    # 10^4 chained updates, no refresh: U stays orthogonal and U^T diag(d) U
    # stays the matrix the same updates give in NumPy. The spectrum is
    # rescaled (U unchanged) to stay bounded; with ties, the lower half is
    # clipped to exact zeros every 10th step, as GD's projection does, so
    # that deflation's rotations run all along.
    rng = np.random.default_rng(11)
    n, T = 30, 10_000
    U, d = np.eye(n), np.zeros(n)
    A = np.zeros((n, n))
    blocks = []
    for t in range(T):
        x = rng.standard_normal(n) * rng.uniform(0.1, 3)
        rho = rng.uniform(0.05, 1)
        U, d, k = _testing.rank_one_update(U, d, x, rho)
        A += rho * np.outer(x, x)
        blocks.append(k)
        s = d[-1]
        d, A = d / s, A / s
        if ties and t % 10 == 9:
            d[: n // 2] = 0.0
            A = (U.T * d) @ U
    O = np.abs(U @ U.T - np.eye(n)).max()
    R = np.abs((U.T * d) @ U - (A + A.T) / 2).max()
    # measured: ~2e-14 and ~1e-14 (drift grows like sqrt(T) n eps)
    assert O <= 1e-11, O
    assert R <= 1e-11, R
    if ties:
        assert min(blocks) < n      # deflation ran
