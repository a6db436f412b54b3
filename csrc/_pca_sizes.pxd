# The sizes of the PCA families' instances, and the checks of a block of
# them, in C: ||x||^2 of a row, and for a dense instance X an upper bound on
# ||X||_2 and ||X||_F. A block call checks every instance with these before
# it changes anything; each trial computes its instance's sizes again, alike.
#
# The sums are numpy's, operation for operation: the estimators computed these
# sizes with numpy (einsum for the squares, add.reduce for the row sums)
# before the state objects took them over, and sigma="auto", the Krylov
# tolerance and MEG/GD's rates all follow them, so the same order keeps every
# decision bit-identical to earlier versions (checked against numpy in
# tests/pca/test_contract.py).
from libc.math cimport sqrt, frexp, ldexp, fabs, isfinite

cdef enum:
    SIZE_OK = 0
    SIZE_NAN = 1        # a NaN in the instance
    SIZE_INF = 2        # an infinity
    SIZE_BIG = 3        # finite, but a size overflows float64
    SIZE_ASYM = 4       # a dense instance that is not symmetric


cdef inline double sumsq(Py_ssize_t n, const double *x) noexcept nogil:
    # sum_i x_i^2 in the order of numpy's einsum("i,i->", x, x) (its baseline
    # SIMD loop: two lanes, four pairs of them a step chained into the
    # accumulator, the tail padded with zeros, then the two lanes added)
    cdef double a0 = 0.0, a1 = 0.0, t0, t1
    cdef Py_ssize_t i = 0
    while n - i >= 8:
        t0 = x[i + 6] * x[i + 6] + a0
        t1 = x[i + 7] * x[i + 7] + a1
        t0 = x[i + 4] * x[i + 4] + t0
        t1 = x[i + 5] * x[i + 5] + t1
        t0 = x[i + 2] * x[i + 2] + t0
        t1 = x[i + 3] * x[i + 3] + t1
        a0 = x[i] * x[i] + t0
        a1 = x[i + 1] * x[i + 1] + t1
        i += 8
    while i < n:
        a0 = x[i] * x[i] + a0
        if i + 1 < n:
            a1 = x[i + 1] * x[i + 1] + a1
        i += 2
    return a0 + a1


cdef inline double sumsq_scaled(Py_ssize_t n, const double *x, double u) noexcept nogil:
    # sumsq of x / u (u a power of two: each quotient exact), without a copy
    cdef double a0 = 0.0, a1 = 0.0, t0, t1, v0, v1
    cdef Py_ssize_t i = 0, j
    while n - i >= 8:
        v0 = x[i + 6] / u
        v1 = x[i + 7] / u
        t0 = v0 * v0 + a0
        t1 = v1 * v1 + a1
        v0 = x[i + 4] / u
        v1 = x[i + 5] / u
        t0 = v0 * v0 + t0
        t1 = v1 * v1 + t1
        v0 = x[i + 2] / u
        v1 = x[i + 3] / u
        t0 = v0 * v0 + t0
        t1 = v1 * v1 + t1
        v0 = x[i] / u
        v1 = x[i + 1] / u
        a0 = v0 * v0 + t0
        a1 = v1 * v1 + t1
        i += 8
    while i < n:
        v0 = x[i] / u
        a0 = v0 * v0 + a0
        if i + 1 < n:
            v1 = x[i + 1] / u
            a1 = v1 * v1 + a1
        i += 2
    return a0 + a1


cdef inline double abs_sum(Py_ssize_t n, const double *x) noexcept nogil:
    # sum_i |x_i| in the order of numpy's add.reduce (pairwise: eight
    # accumulators on blocks of up to 128, halves above)
    cdef double r[8]
    cdef double res
    cdef Py_ssize_t i, j, n2
    if n < 8:
        res = 0.0
        for i in range(n):
            res = res + fabs(x[i])
        return res
    if n <= 128:
        for j in range(8):
            r[j] = fabs(x[j])
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] = r[j] + fabs(x[i + j])
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res = res + fabs(x[i])
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return abs_sum(n2, x) + abs_sum(n - n2, x + n2)


cdef inline int _classify(Py_ssize_t m, const double *x) noexcept nogil:
    # SIZE_NAN if x holds a NaN, else SIZE_INF if an infinity, else SIZE_BIG
    cdef Py_ssize_t j
    cdef bint inf = False
    for j in range(m):
        if x[j] != x[j]:
            return SIZE_NAN
        if not isfinite(x[j]):
            inf = True
    return SIZE_INF if inf else SIZE_BIG


cdef inline int vector_block_check(int n, const double *X, const float *X32, Py_ssize_t T,
                                   double *top, Py_ssize_t *at) noexcept nogil:
    # Every row of X (float64) or X32 (float32) finite with a finite
    # ||x||^2; top = the largest. float32 rows: their widened squares cannot
    # overflow, only their entries be non-finite.
    cdef Py_ssize_t t, j
    cdef double q, v
    cdef bint nan
    top[0] = 0.0
    for t in range(T):
        if X32 != NULL:
            q = 0.0
            nan = False
            for j in range(n):
                v = X32[t * n + j]
                q += v * v
                nan = nan or v != v
            if not isfinite(q):
                at[0] = t
                return SIZE_NAN if nan else SIZE_INF
        else:
            q = sumsq(n, X + t * n)
            if not isfinite(q):
                at[0] = t
                return _classify(n, X + t * n)
        if q > top[0]:
            top[0] = q
    return SIZE_OK


cdef inline void dense_sizes(int n, const double *x, double *spec, double *frob) noexcept nogil:
    # For the symmetric PSD n x n instance x: frob = ||x||_F, computed on x
    # scaled by a power of two below its largest entry (no overflow of the
    # squares at large scales, no underflow at small ones), and spec =
    # min(||x||_F, max row sum of |x|), an upper bound on ||x||_2.
    cdef Py_ssize_t i
    cdef double amax = 0.0, rows = 0.0, r, u = 1.0
    cdef int e
    for i in range(<Py_ssize_t> n * n):
        if fabs(x[i]) > amax:
            amax = fabs(x[i])
    for i in range(n):
        r = abs_sum(n, x + i * n)
        if r > rows:
            rows = r
    if amax > 0.0:
        frexp(amax, &e)
        u = ldexp(1.0, e - 1)
    frob[0] = sqrt(sumsq_scaled(<Py_ssize_t> n * n, x, u)) * u
    spec[0] = frob[0] if frob[0] <= rows else rows


cdef inline int dense_block_check(int n, const double *X, Py_ssize_t T, double *top,
                                  Py_ssize_t *at, double *asym) noexcept nogil:
    # Every instance finite, symmetric (max |X - X^T| <= 1e-10 max |X|) and
    # of finite sizes; top = the largest bound on ||X||_2.
    cdef Py_ssize_t t, i, j, m = <Py_ssize_t> n * n
    cdef const double *B
    cdef double amax, d, spec, frob, acc
    top[0] = 0.0
    for t in range(T):
        B = X + t * m
        at[0] = t
        acc = 0.0
        for i in range(m):
            acc += B[i] * 0.0           # NaN unless every entry is finite
        if acc != 0.0:
            return _classify(m, B)
        amax = 0.0
        d = 0.0
        for i in range(n):
            for j in range(n):
                if fabs(B[i * n + j]) > amax:
                    amax = fabs(B[i * n + j])
                if fabs(B[i * n + j] - B[j * n + i]) > d:
                    d = fabs(B[i * n + j] - B[j * n + i])
        if d > 1e-10 * amax:
            asym[0] = d
            return SIZE_ASYM
        dense_sizes(n, B, &spec, &frob)
        if not (isfinite(spec) and isfinite(frob)):
            return SIZE_BIG
        if spec > top[0]:
            top[0] = spec
    return SIZE_OK
