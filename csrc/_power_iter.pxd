# The largest eigenvalue of the rows' (weighted) second moment by power
# iteration: the batch and storage modes' step-size scale, computed once at
# the block that ends the warm-up (or a restart).
from libc.math cimport fabs
from libc.float cimport DBL_MAX

from _common cimport OK, ERR_INTERRUPTED
from _dense cimport sf_dot, sf_axpy
from _work_poll cimport Poll, poll_stop, ROW_WORK


cdef inline double scaled_norm(const double *v, Py_ssize_t d, double extra) noexcept nogil:
    # sqrt(||v||^2 + extra^2) without over- or underflow (as dnrm2 does):
    # the power iteration's vectors scale like ||x||^2, which may square to
    # beyond float64 even when ||x||^2 itself is fine.
    cdef Py_ssize_t j
    cdef double big = fabs(extra), acc = 0.0, t
    for j in range(d):
        if fabs(v[j]) > big:
            big = fabs(v[j])
    if not (big > 0) or not (big <= DBL_MAX):
        return big
    t = extra / big
    acc = t * t
    for j in range(d):
        t = v[j] / big
        acc += t * t
    return big * acc ** 0.5


cdef inline int top_eigenvalue(const double *X, const double *sw, Py_ssize_t m, Py_ssize_t d,
                               bint fit_b, double *v, double *av, Poll *pl,
                               double *lam_out) noexcept nogil:
    # Largest eigenvalue of [X 1]' W [X 1] / sum(W) (the 1 column with an
    # intercept; W the row weights, or 1) by 30 power iterations from the
    # all-ones vector: once, at the block that ends the warm-up (or a
    # restart). v and av hold d values each. Returns OK or ERR_INTERRUPTED.
    cdef Py_ssize_t i, j, it
    cdef double lam = -1.0, nv, vb = 1.0, sb, nold, u, wi, wsum = 0.0
    for j in range(d):
        v[j] = 1.0
    if not fit_b:
        vb = 0.0
    for i in range(m):
        wsum += sw[i] if sw != NULL else 1.0
    if not (wsum > 0):
        lam_out[0] = -1.0
        return OK
    for it in range(30):
        nold = scaled_norm(v, d, vb)
        # av = X' W (X v + vb) / sum(W);  sb = 1' W (X v + vb) / sum(W)
        for j in range(d):
            av[j] = 0.0
        sb = 0.0
        for i in range(m):
            if poll_stop(pl, d + ROW_WORK):
                return ERR_INTERRUPTED
            wi = sw[i] if sw != NULL else 1.0
            if wi == 0:
                continue
            u = wi * (sf_dot(d, &X[i * d], v) + vb) / wsum
            sf_axpy(d, u, &X[i * d], av)
            sb += u
        if not fit_b:
            sb = 0.0
        nv = scaled_norm(av, d, sb)
        if not (nv > 0 and nold > 0 and nv <= DBL_MAX):
            break
        lam = nv / nold                   # ||A v|| / ||v|| -> lambda_max
        for j in range(d):
            v[j] = av[j] / nv
        vb = sb / nv
    lam_out[0] = lam
    return OK
