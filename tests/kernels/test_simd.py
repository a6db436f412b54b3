"""_simd.h's dispatch and the kernels written over it, on whatever path this
build and CPU run (CI runs this file on the default, portable and clang
builds; .ci/c/check_kernels.c checks the same loops without Python, for
aarch64 under qemu-user too).

_dense.h's loops against exact oracles in their own summation order: every
value the same operations in the same order, each ``d += a * b`` one fused
multiply-add where the path fuses (the "fma" clone; Clang on an FMA target) and two
roundings elsewhere -- so the portable path and the default clone are the
same function of their inputs, and the oracle pins both. _skinny.h's panel
kernels against NumPy (their order is their own), for every edge of w, m, k
and leading dimensions, reading nothing outside the matrices."""
import os
import platform
from fractions import Fraction

import numpy as np
import pytest

from streamfit._kernels import _simd

PATHS = _simd.paths()
FUSED = PATHS["fused"]
GEMM_PATHS = ["auto", "portable"] + (["avx512"] if PATHS["avx512_active"] else [])


def test_the_paths_are_consistent_and_as_ci_expects():
    assert PATHS["portable"] == (not (PATHS["vector"] or PATHS["clones"] or PATHS["avx512"]))
    assert not PATHS["clones"] or PATHS["vector"]
    assert not PATHS["avx512_active"] or PATHS["avx512"]
    assert not (PATHS["portable"] and (PATHS["fused"] or PATHS["sse2"]))
    assert not PATHS["pair"] or PATHS["portable"]
    expect = os.environ.get("STREAMFIT_EXPECT_SIMD")
    if expect == "portable":
        assert PATHS["portable"]
        # x86-64 and aarch64 always have the 2-double registers
        if platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64"):
            assert PATHS["pair"]
    elif expect == "vector":
        assert PATHS["vector"]
    elif expect is not None:
        pytest.fail(f"STREAMFIT_EXPECT_SIMD must be 'portable' or 'vector', got {expect!r}")


# -- _dense.h: exact oracles -----------------------------------------------------------------

def madd(d, a, b):
    """d + a * b as this path computes it: rounded once where it fuses,
    twice elsewhere (Fraction arithmetic is exact; float() rounds to
    nearest)."""
    if FUSED:
        return float(Fraction(a) * Fraction(b) + Fraction(d))
    return d + a * b


def hsum8(acc):
    """The two 4-lane accumulators added lane by lane, then _simd.h's
    SF_V4_HSUM: (l0 + l2) + (l1 + l3)."""
    v = [acc[i] + acc[4 + i] for i in range(4)]
    return (v[0] + v[2]) + (v[1] + v[3])


def padded(x, n):
    """x's values in chunks of 8, the last padded with zeros"""
    return [float(x[j]) if j < n else 0.0 for j in range(-(-n // 8) * 8)]


def oracle_dot2(x, w):
    n = len(x)
    xs, ws = padded(x, n), padded(w, n)
    acc, q = [0.0] * 8, [0.0] * 8
    for j in range(len(xs)):
        acc[j % 8] = madd(acc[j % 8], xs[j], ws[j])
        q[j % 8] = madd(q[j % 8], xs[j], xs[j])
    return hsum8(acc), hsum8(q)


def oracle_axpy(a, x, w):
    return np.array([madd(w[j], a, x[j]) for j in range(len(x))])


SIZES = [0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 100]


def _vectors(n, count, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n) * rng.choice([1e-3, 1.0, 1e3]) for _ in range(count)]


@pytest.mark.parametrize("n", SIZES)
def test_dot_and_dot2_sum_in_their_lane_order(n):
    x, w = _vectors(n, 2, n)
    s, xx = oracle_dot2(x, w)
    assert _simd.dot(x, w) == s
    assert _simd.dot2(x, w) == (s, xx)


@pytest.mark.parametrize("n", SIZES)
def test_axpy_and_axpy_dot2_update_and_sum_as_the_oracle(n):
    x, w, z = _vectors(n, 3, 100 + n)
    a = -0.37
    expect_w = oracle_axpy(a, x, w)
    w1 = w.copy()
    _simd.axpy(a, x, w1)
    np.testing.assert_array_equal(w1, expect_w)
    w2 = w.copy()
    assert _simd.axpy_dot2(a, x, w2, z) == oracle_dot2(z, expect_w)
    np.testing.assert_array_equal(w2, expect_w)


@pytest.mark.parametrize("n", SIZES)
def test_a_float32_next_row_gives_what_its_float64_values_give(n):
    x, w, z = _vectors(n, 3, 200 + n)
    z32 = z.astype(np.float32)
    w64, w32 = w.copy(), w.copy()
    xout = np.full(n, np.nan)
    ref = _simd.axpy_dot2(0.5, x, w64, z32.astype(np.float64))
    assert _simd.axpy_dot2_f32(0.5, x, w32, z32, xout) == ref
    np.testing.assert_array_equal(w32, w64)
    np.testing.assert_array_equal(xout, z32.astype(np.float64))
    np.testing.assert_array_equal(_simd.widen(z32), z32.astype(np.float64))


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 7])
def test_many_quantiles_in_one_pass_are_each_one_quantiles_numbers(n, m):
    rng = np.random.default_rng(300 + 10 * n + m)
    ldw = max(8, -(-n // 8) * 8)
    W = np.zeros((m, ldw))
    W[:, :n] = rng.standard_normal((m, n))
    a = rng.standard_normal(m)
    upd = (rng.random(m) < 0.7).astype(np.uint8)
    x, z = _vectors(n, 2, 400 + n)
    expect = []
    for q in range(m):
        wq = oracle_axpy(a[q], x, W[q, :n]) if upd[q] else W[q, :n].copy()
        expect.append((oracle_dot2(z, wq)[0], wq))
    s, xx = _simd.multi_axpy_dot2(a, upd, x, W, z)
    assert xx == oracle_dot2(z, z)[1]
    for q in range(m):
        assert s[q] == expect[q][0]
        np.testing.assert_array_equal(W[q, :n], expect[q][1])
    assert not W[:, n:].any()          # the padding stays zero


@pytest.mark.parametrize("n", SIZES)
def test_average_plug_in_pass_and_row_update_as_the_oracle(n):
    x, w, wbar, xbar, wwbar, s, N = _vectors(n, 7, 500 + n)
    inv, invx = 0.2, 0.3
    got = wbar.copy()
    _simd.average(inv, w, got)
    np.testing.assert_array_equal(got, [madd(wbar[j], w[j] - wbar[j], inv) for j in range(n)])

    # plug_in_pass: whole chunks of 8 as vectors, then a scalar tail, where
    # a fusing path may round the two sums' products apart (GCC vectorises
    # the products and adds them in order): both are accepted there
    def plug_in(fuse_sums):
        b, c, e = wbar.copy(), xbar.copy(), wwbar.copy()
        acc, lag = [0.0] * 8, [0.0] * 8
        nf = n // 8 * 8
        for j in range(nf):
            acc[j % 8] = madd(acc[j % 8], x[j], b[j])
            b[j] = madd(b[j], w[j] - b[j], inv)
            c[j] = madd(c[j], x[j] - c[j], invx)
            e[j] = madd(e[j], b[j] - e[j], inv)
            lag[j % 8] = madd(lag[j % 8], c[j], e[j] - b[j])
        sv, lv = hsum8(acc), hsum8(lag)
        for j in range(nf, n):
            sv = madd(sv, x[j], b[j]) if fuse_sums else sv + x[j] * b[j]
            b[j] = madd(b[j], w[j] - b[j], inv)
            c[j] = madd(c[j], x[j] - c[j], invx)
            e[j] = madd(e[j], b[j] - e[j], inv)
            lv = madd(lv, c[j], e[j] - b[j]) if fuse_sums else lv + c[j] * (e[j] - b[j])
        return (sv, lv), b, c, e

    wb, xb, wwb = wbar.copy(), xbar.copy(), wwbar.copy()
    got = _simd.plug_in_pass(inv, invx, x, w, wb, xb, wwb)
    variants = [plug_in(True)] + ([plug_in(False)] if FUSED else [])
    assert any(got == v[0] and all((g == e).all() for g, e in zip((wb, xb, wwb), v[1:]))
               for v in variants), (got, [v[0] for v in variants])

    for xi, a, xs, Ns in [(0.7, -1.3, x, N), (0.7, 0.0, x, None), (0.0, -1.3, None, N)]:
        got = s.copy()
        _simd.row_update(got, xi, xs, a, Ns)
        expect = s.copy()
        for j in range(n):
            if xs is not None:
                expect[j] = madd(expect[j], xi, xs[j])
            if Ns is not None:
                expect[j] = madd(expect[j], a, Ns[j])
        np.testing.assert_array_equal(got, expect)


# -- _skinny.h: the panel kernels ------------------------------------------------------------

def _case(kind, w, m, k, seed, pad=(3, 2, 1)):
    """Column-major A, B, C with leading dimensions past their rows; the
    values past the rows are NaN (a kernel that read them would show it)."""
    rng = np.random.default_rng(seed)
    rows_a, cols_a = (k, w) if kind == "tn" else (w, k)
    lda, ldb, ldc = max(rows_a, 1) + pad[0], max(k, 1) + pad[1], max(w, 1) + pad[2]

    def mat(rows, cols, ld):
        full = np.full((max(cols, 1), ld), np.nan)
        full[:cols, :rows] = rng.standard_normal((cols, rows))
        return full

    A, B, C = mat(rows_a, cols_a, lda), mat(k, m, ldb), mat(w, m, ldc)
    return A, lda, B, ldb, C, ldc


def _expected(kind, w, m, k, alpha, A, B, C):
    """C + alpha op(A) B in _case's layout (row c of an array is column c),
    and the bound |op(A)| |B| on the terms' sizes"""
    opA = A[:w, :k] if kind == "tn" else A[:k, :w].T      # (w, k)
    Bm = B[:m, :k].T                                      # (k, m)
    out = C.copy()
    out[:m, :w] = C[:m, :w] + alpha * (opA @ Bm).T
    return out, np.abs(opA) @ np.abs(Bm)


SHAPES = [(w, m, k) for w in (0, 1, 2, 5, 7, 8, 9, 16, 17, 130)
          for m in (0, 1, 4, 5, 8, 9, 15, 16) for k in (0, 1, 3, 8, 33, 300)]


@pytest.mark.parametrize("path", GEMM_PATHS)
@pytest.mark.parametrize("kind", ["tn", "nn"])
def test_the_panel_kernels_are_the_product_for_every_shape(kind, path):
    for i, (w, m, k) in enumerate(SHAPES):
        A, lda, B, ldb, C, ldc = _case(kind, w, m, k, i)
        expect, bound = _expected(kind, w, m, k, -0.75, A, B, C)
        got = C.copy()
        _simd.gemm(kind, w, m, k, -0.75, A.ravel(), lda, B.ravel(), ldb, got.ravel(), ldc,
                   path=path)
        inside = np.zeros_like(C, dtype=bool)
        inside[:m, :w] = True
        # outside the w x m block (NaN padding, columns past m): untouched
        np.testing.assert_array_equal(got[~inside], C[~inside], err_msg=f"{(w, m, k)}")
        np.testing.assert_allclose(got[inside], expect[inside], rtol=0,
                                   atol=1e-14 * (k + 1) * (bound.max() if bound.size else 1.0),
                                   err_msg=f"{kind} {(w, m, k)}")
        again = C.copy()
        _simd.gemm(kind, w, m, k, -0.75, A.ravel(), lda, B.ravel(), ldb, again.ravel(), ldc,
                   path=path)
        np.testing.assert_array_equal(again, got)


@pytest.mark.parametrize("path", GEMM_PATHS)
@pytest.mark.parametrize("kind", ["tn", "nn"])
def test_k_zero_or_less_leaves_c_untouched(kind, path):
    A, lda, B, ldb, C, ldc = _case(kind, 9, 6, 4, 0)
    C[:, :] = -0.0
    C[0, 0] = np.inf
    for k in (0, -1):
        got = C.copy()
        _simd.gemm(kind, 9, 6, k, 2.0, A.ravel(), lda, B.ravel(), ldb, got.ravel(), ldc,
                   path=path)
        assert got.tobytes() == C.tobytes()


def test_the_dispatch_runs_the_kernel_it_reports():
    chosen = "avx512" if PATHS["avx512_active"] else "portable"
    for kind in ("tn", "nn"):
        A, lda, B, ldb, C, ldc = _case(kind, 130, 15, 300, 1)
        out = {}
        for path in ("auto", chosen):
            out[path] = C.copy()
            _simd.gemm(kind, 130, 15, 300, 1.0, A.ravel(), lda, B.ravel(), ldb,
                       out[path].ravel(), ldc, path=path)
        assert out["auto"].tobytes() == out[chosen].tobytes()


@pytest.mark.parametrize("path", GEMM_PATHS)
@pytest.mark.parametrize("w", [0, 1, 5, 16, 17, 40, 128, 130])
def test_symm_diag_reads_the_upper_triangle_only(path, w):
    rng = np.random.default_rng(w)
    m = 15
    lda, ldb, ldc = w + 2, w + 1, w + 3
    S = rng.standard_normal((w, w))
    S = S + S.T
    A = np.full((max(w, 1), lda), np.nan)            # column c at A[c, :]
    for c in range(w):
        A[c, :c + 1] = S[:c + 1, c]                  # rows 0..c of column c: the upper triangle
    B = np.full((m, ldb), np.nan)
    B[:, :w] = rng.standard_normal((m, w))
    C = np.full((m, ldc), np.nan)
    got = C.copy()
    _simd.symm_diag(w, m, 1.5, A.ravel(), lda, B.ravel(), ldb, got.ravel(), ldc, path=path)
    expect = 1.5 * (S @ B[:, :w].T)
    np.testing.assert_allclose(got[:, :w].T, expect, rtol=0,
                               atol=1e-13 * max([1.0, *np.abs(S).sum(1)]))
    assert np.isnan(got[:, w:]).all()                 # past row w: untouched
