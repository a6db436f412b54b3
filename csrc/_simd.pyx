# The SIMD dispatch (_simd.h) seen from Python: which paths this build
# compiled and which this CPU runs, and `def` twins of _dense.h's loops and of
# _skinny.h's panel kernels on NumPy arrays -- for the tests that compare them
# with exact oracles (tests/kernels/test_simd.py), for the cross-build check
# of the portable path against the vector one (.ci/simd_states.py), and for
# the benchmarks. Test entries, not API: no validation beyond what keeps the
# kernels inside the arrays.
import numpy as np

cdef extern from "_simd.h" nogil:
    enum: SF_SIMD_PATHS
    int sf_simd_fused()

from _dense cimport (sf_dot, sf_dot2, sf_axpy, sf_average, sf_plug_in_pass, sf_axpy_dot2,
                     sf_axpy_dot2_f32, sf_multi_axpy_dot2, sf_widen, sf_row_update)

ctypedef void (*gemm_fn)(Py_ssize_t w, Py_ssize_t m, Py_ssize_t k, double alpha,
                         const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb,
                         double *C, Py_ssize_t ldc) noexcept nogil
ctypedef void (*diag_fn)(Py_ssize_t w, Py_ssize_t m, double alpha, const double *A,
                         Py_ssize_t lda, const double *B, Py_ssize_t ldb, double *C,
                         Py_ssize_t ldc) noexcept nogil

from _skinny cimport (sf_skinny_ok, sf_gemm_tn, sf_gemm_nn, sf_symm_diag, sf_gemm_tn_c,
                      sf_gemm_nn_c, sf_symm_diag_c)

# The AVX-512 kernels by name where they are built; NULL elsewhere.
cdef extern from *:
    """
    #if defined(SF_SIMD_AVX512)
    #define SF_TN512 sf_gemm_tn512
    #define SF_NN512 sf_gemm_nn512
    #define SF_DIAG512 sf_symm_diag512
    #else
    #define SF_TN512 NULL
    #define SF_NN512 NULL
    #define SF_DIAG512 NULL
    #endif
    """
    gemm_fn SF_TN512
    gemm_fn SF_NN512
    diag_fn SF_DIAG512


def paths():
    """What this build compiled and what runs here: a dict of booleans --
    vector (GCC/Clang vector extensions), clones (target_clones), avx512
    (the AVX-512 kernels built), sse2 (_goe.h's streaming stores), portable
    (none of the first three), pair (the portable path's 2-double SSE2/NEON
    registers; without it, plain C), fused (_dense.h's multiply-adds fuse
    on this CPU), avx512_active (the panel kernels run their AVX-512
    versions)."""
    return {"vector": bool(SF_SIMD_PATHS & 1), "clones": bool(SF_SIMD_PATHS & 2),
            "avx512": bool(SF_SIMD_PATHS & 4), "sse2": bool(SF_SIMD_PATHS & 8),
            "portable": not (SF_SIMD_PATHS & 7), "pair": bool(SF_SIMD_PATHS & 16),
            "fused": bool(sf_simd_fused()),
            "avx512_active": bool(sf_skinny_ok())}


cdef inline double *_p(double[::1] a) noexcept:
    return &a[0] if a.shape[0] else NULL


cdef inline const double *_cp(const double[::1] a) noexcept:
    return &a[0] if a.shape[0] else NULL


def dot(const double[::1] x, const double[::1] w):
    """sf_dot: x @ w"""
    if w.shape[0] < x.shape[0]:
        raise ValueError("w shorter than x")
    return sf_dot(x.shape[0], _cp(x), _cp(w))


def dot2(const double[::1] x, const double[::1] w):
    """sf_dot2: (x @ w, x @ x)"""
    cdef double xx
    if w.shape[0] < x.shape[0]:
        raise ValueError("w shorter than x")
    s = sf_dot2(x.shape[0], _cp(x), _cp(w), &xx)
    return s, xx


def axpy(double a, const double[::1] x, double[::1] w):
    """sf_axpy: w += a * x, in place"""
    if w.shape[0] < x.shape[0]:
        raise ValueError("w shorter than x")
    sf_axpy(x.shape[0], a, _cp(x), _p(w))


def axpy_dot2(double a, const double[::1] x, double[::1] w, const double[::1] xnext):
    """sf_axpy_dot2: w += a * x in place; returns (xnext @ w, xnext @ xnext)"""
    cdef double xx
    if w.shape[0] < x.shape[0] or xnext.shape[0] < x.shape[0]:
        raise ValueError("w or xnext shorter than x")
    s = sf_axpy_dot2(x.shape[0], a, _cp(x), _p(w), _cp(xnext), &xx)
    return s, xx


def axpy_dot2_f32(double a, const double[::1] x, double[::1] w, const float[::1] xnext,
                  double[::1] xout):
    """sf_axpy_dot2_f32: as axpy_dot2 with a float32 xnext, widened to xout"""
    cdef double xx
    cdef Py_ssize_t n = x.shape[0]
    if w.shape[0] < n or xnext.shape[0] < n or xout.shape[0] < n:
        raise ValueError("w, xnext or xout shorter than x")
    s = sf_axpy_dot2_f32(n, a, _cp(x), _p(w), &xnext[0] if n else NULL, _p(xout), &xx)
    return s, xx


def multi_axpy_dot2(const double[::1] a, const unsigned char[::1] upd, const double[::1] x,
                    double[:, ::1] W, const double[::1] xnext):
    """sf_multi_axpy_dot2 over the (m, ldw) rows of W (ldw a multiple of 8,
    W[:, n:] zero): returns (s (m,), xnext @ xnext); W in place"""
    cdef Py_ssize_t n = x.shape[0], m = W.shape[0], ldw = W.shape[1]
    cdef double xx
    s = np.zeros(m)
    cdef double[::1] sv = s
    if a.shape[0] < m or upd.shape[0] < m or ldw < n or ldw % 8 or xnext.shape[0] < n:
        raise ValueError("a, upd need m entries, W (m, ldw) with n <= ldw, ldw % 8 == 0")
    if m == 0:
        return s, 0.0
    sf_multi_axpy_dot2(n, m, &a[0], &upd[0], _cp(x), &W[0, 0], ldw, _cp(xnext), &sv[0], &xx)
    return s, xx


def average(double inv, const double[::1] w, double[::1] wbar):
    """sf_average: wbar += (w - wbar) * inv, in place"""
    if wbar.shape[0] < w.shape[0]:
        raise ValueError("wbar shorter than w")
    sf_average(w.shape[0], inv, _cp(w), _p(wbar))


def plug_in_pass(double inv, double invx, const double[::1] x, const double[::1] w,
                 double[::1] wbar, double[::1] xbar, double[::1] wwbar):
    """sf_plug_in_pass: returns (x @ wbar before the step, lag); the means in place"""
    cdef Py_ssize_t n = x.shape[0]
    cdef double lag
    if min(w.shape[0], wbar.shape[0], xbar.shape[0], wwbar.shape[0]) < n:
        raise ValueError("every array needs x's length")
    s = sf_plug_in_pass(n, inv, invx, _cp(x), _cp(w), _p(wbar), _p(xbar), _p(wwbar), &lag)
    return s, lag


def row_update(double[::1] s, double xi, x, double a, N):
    """sf_row_update: s += xi * x, then s += a * N (x or N None: no term)"""
    cdef Py_ssize_t n = s.shape[0]
    cdef const double[::1] xv
    cdef const double[::1] Nv
    cdef const double *xp = NULL
    cdef const double *Np = NULL
    if x is not None:
        xv = x
        if xv.shape[0] < n:
            raise ValueError("x shorter than s")
        xp = _cp(xv)
    if N is not None:
        Nv = N
        if Nv.shape[0] < n:
            raise ValueError("N shorter than s")
        Np = _cp(Nv)
    sf_row_update(n, _p(s), xi, xp, a, Np)


def widen(const float[::1] src):
    """sf_widen: src as float64"""
    cdef Py_ssize_t n = src.shape[0]
    out = np.empty(n)
    cdef double[::1] o = out
    if n:
        sf_widen(n, &src[0], &o[0])
    return out


cdef gemm_fn _gemm_kernel(str kind, str path) except NULL:
    cdef gemm_fn fn = NULL
    if path == "auto":
        fn = sf_gemm_tn if kind == "tn" else sf_gemm_nn
    elif path == "portable":
        fn = sf_gemm_tn_c if kind == "tn" else sf_gemm_nn_c
    elif path == "avx512":
        if not sf_skinny_ok():
            raise ValueError("path='avx512' needs the AVX-512 kernels built and a CPU with avx512f")
        fn = SF_TN512 if kind == "tn" else SF_NN512
    else:
        raise ValueError(f"path must be 'auto', 'portable' or 'avx512', got {path!r}")
    return fn


cdef int _need(Py_ssize_t size, Py_ssize_t cols, Py_ssize_t rows, Py_ssize_t ld,
               str name) except -1:
    # a column-major (rows x cols) matrix with leading dimension ld in size values
    if cols > 0 and rows > 0 and (ld < rows or (cols - 1) * ld + rows > size):
        raise ValueError(f"{name}: {rows} x {cols} with leading dimension {ld} does not fit "
                         f"in {size} values")
    return 0


def gemm(str kind, Py_ssize_t w, Py_ssize_t m, Py_ssize_t k, double alpha,
         const double[::1] A, Py_ssize_t lda, const double[::1] B, Py_ssize_t ldb,
         double[::1] C, Py_ssize_t ldc, str path="auto"):
    """_skinny.h's kind = "tn" (C[c, j] += alpha sum_r A[r, c] B[r, j]) or
    "nn" (C[r, j] += alpha sum_c A[r, c] B[c, j]) on flat column-major
    arrays, by the dispatch ("auto"), the portable kernel or the AVX-512 one;
    C in place."""
    cdef gemm_fn fn
    if kind not in ("tn", "nn") or w < 0 or m < 0:
        raise ValueError("kind must be 'tn' or 'nn', w and m >= 0")
    fn = _gemm_kernel(kind, path)
    if k > 0:
        if kind == "tn":
            _need(A.shape[0], w, k, lda, "A")
        else:
            _need(A.shape[0], k, w, lda, "A")
        _need(B.shape[0], m, k, ldb, "B")
    _need(C.shape[0], m, w, ldc, "C")
    cdef const double *ap = _cp(A)
    cdef const double *bp = _cp(B)
    cdef double *cp = _p(C)
    with nogil:
        fn(w, m, k, alpha, ap, lda, bp, ldb, cp, ldc)


def symm_diag(Py_ssize_t w, Py_ssize_t m, double alpha, const double[::1] A, Py_ssize_t lda,
              const double[::1] B, Py_ssize_t ldb, double[::1] C, Py_ssize_t ldc,
              str path="auto"):
    """_skinny.h's sf_symm_diag: C = alpha A B, A symmetric w x w from its
    upper triangle (column-major), by the dispatch, the portable kernels or
    the AVX-512 ones; C in place."""
    cdef diag_fn fn
    if w < 0 or m < 0:
        raise ValueError("w and m must be >= 0")
    if path == "auto":
        fn = sf_symm_diag
    elif path == "portable":
        fn = sf_symm_diag_c
    elif path == "avx512":
        if not sf_skinny_ok():
            raise ValueError("path='avx512' needs the AVX-512 kernels built and a CPU with avx512f")
        fn = SF_DIAG512
    else:
        raise ValueError(f"path must be 'auto', 'portable' or 'avx512', got {path!r}")
    _need(A.shape[0], w, w, lda, "A")
    _need(B.shape[0], m, w, ldb, "B")
    _need(C.shape[0], m, w, ldc, "C")
    cdef const double *ap = _cp(A)
    cdef const double *bp = _cp(B)
    cdef double *cp = _p(C)
    with nogil:
        fn(w, m, alpha, ap, lda, bp, ldb, cp, ldc)
