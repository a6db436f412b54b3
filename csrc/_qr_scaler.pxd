# The online feature scaler of single-sample quantile regression: Welford's
# weighted running means and deviations precondition the rows while the model
# stays fixed on the original scale, and the average is taken on that scale.
from libc.math cimport fabs, sqrt
from libc.float cimport DBL_MAX

from _common cimport OK, ERR_BADINPUT
from _dense cimport sf_average
from _qr_schedule cimport SGDState


cdef inline double feature_sd(const double *sc, Py_ssize_t d, Py_ssize_t j) noexcept nogil:
    # running standard deviation of feature j (1 while it is 0 or undefined)
    cdef double sd = sqrt(sc[1 + d + j] / sc[0]) if sc[0] > 0 else 0.0
    return sd if (sd > 0 and sd <= DBL_MAX) else 1.0


cdef inline int scale_row(const double *x, Py_ssize_t d, double wi, double *sc, bint center,
                          double *z, double *sds, double *w, double *intercept) noexcept nogil:
    # Welford's weighted running mean and sum of squared deviations take the
    # row, then z = (x - mean) / sd (x / sd without centering). The iterate
    # (w on the z scale, and the intercept) is re-expressed under the new
    # statistics so that the model on the original scale does not move: the
    # statistics act as a preconditioner only (otherwise each update of them
    # would move the target by ||beta|| times their change, and the iterate
    # would chase it). ERR_BADINPUT for a non-finite entry, before anything
    # changes.
    cdef Py_ssize_t j
    cdef double *mean = sc + 1
    cdef double *m2 = sc + 1 + d
    cdef double delta, old_sd, old_mean, f, beta
    for j in range(d):
        if not (fabs(x[j]) <= DBL_MAX):
            return ERR_BADINPUT
    if wi > 0:
        for j in range(d):
            sds[j] = feature_sd(sc, d, j)      # before the row
        sc[0] += wi
        f = wi / sc[0]
        for j in range(d):
            old_sd = sds[j]
            old_mean = mean[j]
            delta = x[j] - mean[j]
            mean[j] += f * delta
            m2[j] += wi * delta * (x[j] - mean[j])
            sds[j] = feature_sd(sc, d, j)
            w[j] *= sds[j] / old_sd
            if center:
                beta = w[j] / sds[j]
                intercept[0] += (mean[j] - old_mean) * beta
    else:
        for j in range(d):
            sds[j] = feature_sd(sc, d, j)
    for j in range(d):
        z[j] = (x[j] - mean[j]) / sds[j] if center else x[j] / sds[j]
    return OK


cdef inline void average_step_scaled(Py_ssize_t d, const double *w, double *wbar,
                                     SGDState *s, const double *sc, const double *sds,
                                     bint center, double *beta) noexcept nogil:
    # The average of the iterates on the original scale (beta = w / sd,
    # b = intercept - mean' beta under the statistics of their time): the
    # statistics move while the average runs, so averaging w and converting at
    # the end would mix scales (a bias of order ||beta|| |sd_s - sd|).
    cdef Py_ssize_t j
    cdef double b = s.intercept, inv
    for j in range(d):
        beta[j] = w[j] / sds[j]
        if center:
            b -= sc[1 + j] * beta[j]
    s.n_avg += 1.0
    inv = 1.0 / s.n_avg
    sf_average(d, inv, beta, wbar)
    s.intercept_avg += (b - s.intercept_avg) * inv
