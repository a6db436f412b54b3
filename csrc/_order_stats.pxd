# Order statistics of a sample of residuals (branch-free quickselect): the median
# |r|, the error scale D0 and Siddiqui's sparsity quotient b0. The statistical
# stepsize schedule (_qr_schedule.pxd) takes them from its residual windows,
# and the vector kernel's storage mode from all its residuals; every one of
# them works in a caller's work space and never allocates.
from libc.math cimport fabs, NAN
from libc.string cimport memcpy

cdef extern from *:
    """
    /* 1 / Phi^{-1}(3/4): median |N(0, s^2)| = 0.6745 s. */
    #define SF_INV_MAD 1.482602218505602
    """
    const double INV_MAD "SF_INV_MAD"


cdef inline Py_ssize_t partition_below(double *a, Py_ssize_t lo, Py_ssize_t hi, double pivot,
                                       bint or_equal) noexcept nogil:
    # Moves the values of a[lo:hi] below pivot (or_equal: not above it) to
    # its front and returns where the rest begins. Without a branch on the
    # comparison (Lomuto's scheme, every value swapped with the first of the
    # rest): the comparisons of residuals against a pivot are coin flips,
    # and Hoare's scheme mispredicted about every other one.
    cdef Py_ssize_t i, s = lo
    cdef double v
    if or_equal:
        for i in range(lo, hi):
            v = a[i]
            a[i] = a[s]
            a[s] = v
            s += v <= pivot
    else:
        for i in range(lo, hi):
            v = a[i]
            a[i] = a[s]
            a[s] = v
            s += v < pivot
    return s


cdef inline double select_kth(double *a, Py_ssize_t n, Py_ssize_t k) noexcept nogil:
    # a is permuted; returns the k-th smallest (0-based), like np.partition(a, k)[k],
    # and leaves the k smallest in a[:k] (sparsity relies on it). Values
    # only (no NaN). Quickselect on the median of three, each round keeping
    # the side that holds k; a round that finds nothing below the pivot
    # splits off the values equal to it, so ties (a window of exact fits)
    # cost one more pass, not a pass per value. Short ranges: insertion sort.
    cdef Py_ssize_t lo = 0, hi = n, s, s2, i, j
    cdef double pivot, x, y, z, v
    while hi - lo > 16:
        x = a[lo]
        y = a[lo + ((hi - lo) >> 1)]
        z = a[hi - 1]
        # the median of x, y, z (a value of the range: a round always splits
        # something off)
        pivot = max(min(x, y), min(max(x, y), z))
        s = partition_below(a, lo, hi, pivot, False)
        if k < s:
            hi = s
        elif s > lo:
            lo = s
        else:
            s2 = partition_below(a, lo, hi, pivot, True)
            if k < s2:
                return pivot            # a[lo:s2] all equal pivot
            lo = s2
    for i in range(lo + 1, hi):
        v = a[i]
        j = i - 1
        while j >= lo and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v
    return a[k]


cdef inline double median_abs(const double *r, Py_ssize_t n, double *work) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        work[i] = fabs(r[i])
    return select_kth(work, n, n // 2)


cdef inline double error_scale(const double *r, Py_ssize_t n, double *work) noexcept nogil:
    # D0 = median |r| / 0.6745, the standard deviation of x'(beta_0 - beta*)
    # when it dominates; with more than half the residuals exactly 0 (e.g.
    # zero-inflated y) the mean |r| stands in, and 1 if all are 0.
    cdef Py_ssize_t i
    cdef double d0 = median_abs(r, n, work) * INV_MAD, acc = 0.0
    if d0 > 0:
        return d0
    for i in range(n):
        acc += fabs(r[i])
    if acc > 0:
        return acc / n * 1.2533141373155003     # sqrt(pi / 2) mean |r|
    return 1.0


cdef inline double sparsity(const double *r, Py_ssize_t n, double tau, double *work) noexcept nogil:
    # Siddiqui's difference quotient: (Q(tau + h) - Q(tau - h)) / (2h) estimates
    # 1 / f(Q(tau)), Koenker's sparsity, from the residuals r.
    cdef double h = 0.1
    cdef Py_ssize_t klo, khi
    cdef double qlo, qhi
    if h > 0.5 * tau:
        h = 0.5 * tau
    if h > 0.5 * (1.0 - tau):
        h = 0.5 * (1.0 - tau)
    if n < 2:
        return NAN
    klo = <Py_ssize_t> ((tau - h) * n)
    khi = <Py_ssize_t> ((tau + h) * n)
    if khi > n - 1:
        khi = n - 1
    if khi < 1:
        khi = 1
    if klo > khi - 1:
        klo = khi - 1
    if klo < 0:
        klo = 0
    memcpy(work, r, n * sizeof(double))
    qhi = select_kth(work, n, khi)
    qlo = select_kth(work, khi, klo)    # select left the khi smallest in front
    return (qhi - qlo) * n / <double> (khi - klo)
