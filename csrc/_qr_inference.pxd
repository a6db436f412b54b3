# Random-scaling inference sums of the quantile kernels' averaged iterate
# (Lee, Liao, Seo & Shin, "Fast and robust online inference with stochastic
# gradient descent via random scaling", AAAI 2022): the running sums from
# which the estimator's covariance follows, updated with each step of the
# average. The array also carries, in a tail of 2 da, the plug-in
# intercept's running means (_qr_plug_in.pxd) when it has no other home.
from _qr_schedule cimport SGDState


cdef inline Py_ssize_t rs_core(Py_ssize_t da) noexcept nogil:
    return 2 * da + 1 + da * (da + 1) // 2


cdef inline Py_ssize_t rs_len(Py_ssize_t da) noexcept nogil:
    # the sums, then a tail of 2 da for the plug-in intercept's lag
    return rs_core(da) + 2 * da


cdef inline void rs_step(Py_ssize_t d, const double *wbar, const SGDState *s, double *rs,
                         bint fit_b) noexcept nogil:
    # Random scaling (Lee, Liao, Seo & Shin 2022): the sums from which
    # V_k = k^-2 sum_{s<=k} s^2 (z_s - z_k)(z_s - z_k)' follows in O(da^2),
    # z_s the s-th averaged iterate (coef then intercept). V is invariant to a
    # shift of z: the sums are of u = z - z_1, which keeps their terms of the
    # size of the path's spread instead of ||beta||^2 (no cancellation when
    # ||beta|| is large against the interval). The average restarting
    # (n_avg back to 1) restarts the sums: they cover exactly its window.
    cdef Py_ssize_t da = d + (1 if fit_b else 0), i, j
    cdef double k2 = s.n_avg * s.n_avg, fi, zi
    cdef double *ref = rs
    cdef double *bsum = rs + da + 1
    cdef double *A = rs + 2 * da + 1
    if s.n_avg == 1.0:
        for i in range(d):
            ref[i] = wbar[i]
        if fit_b:
            ref[d] = s.intercept_avg
        for i in range(da, rs_core(da)):
            rs[i] = 0.0
    rs[da] += k2
    for i in range(da):
        zi = (wbar[i] if i < d else s.intercept_avg) - ref[i]
        fi = k2 * zi
        bsum[i] += fi
        # indexed from the row's start (no pointer stepping): the loop vectorises
        for j in range(i, d):
            A[j - i] += fi * (wbar[j] - ref[j])
        if i < d:
            A += d - i
        if fit_b:
            A[0] += fi * (s.intercept_avg - ref[d])
            A += 1
