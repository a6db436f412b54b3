# The plug-in intercept of single-sample quantile regression with an
# intercept (check loss): the intercept of the averaged model, extrapolated
# from two plug-in runs so that the noise's curvature does not bias it.
from libc.string cimport memcpy

from _dense cimport sf_plug_in_pass
from _qr_schedule cimport SGDState, SGDParams, LOSS_CHECK
from _qr_inference cimport rs_core, rs_step


cdef inline void plug_in_intercepts(SGDState *s, const SGDParams *p, double y, double xw,
                                    double step, bint cold, double inv) noexcept nogil:
    # The two plug-in intercepts' quantile steps (eta and 2 eta) on
    # y - x'wbar (xw: x'wbar before the step; a cold average has just set
    # them to the iterate's intercept and takes no step), and their average
    # 2 b1 - b2 over the average's 1 / inv rows. Dense (plug_in_average_step)
    # and sparse (_qr_sparse.pxd's sp_average) rows alike.
    cdef double r
    if not cold:
        r = y - xw - s.intercept_pi
        s.intercept_pi -= step * (<double> (r <= 0) - p.tau)
        r = y - xw - s.intercept_pi2
        s.intercept_pi2 -= 2.0 * step * (<double> (r <= 0) - p.tau)
    s.pi_avg += (2.0 * s.intercept_pi - s.intercept_pi2 - s.pi_avg) * inv


cdef inline void plug_in_average_step(Py_ssize_t d, const double *x, double y,
                                      const double *w, double *wbar, SGDState *s,
                                      const SGDParams *p, double step, double wi, double *rs,
                                      bint fit_b, double *tail) noexcept nogil:
    # average_step with the plug-in intercept (single mode, check loss, an
    # intercept): intercept_avg is not the average of the iterate's intercept.
    # That intercept absorbs the coefficients' fluctuation, and where the
    # noise's F is curved (every tau but a symmetric noise's median) its
    # average keeps a bias of order eta_t (Jensen; measured 2.5-3.5 standard
    # errors at d = 5, n = 20,000). Two plug-in intercepts instead take
    # quantile steps on y - x'wbar (the averaged coefficients' residual before
    # this row's step) at steps eta and 2 eta; the average of 2 b1 - b2 has a
    # bias of order eta^2 (Richardson-Romberg). Both start at the iterate's
    # intercept with a cold average (start_average sets them for a warm one).
    #
    # Each b_s fits the wbar of its time, so their average lags the last wbar
    # by m'(mean of the wbar_s - wbar), m the mean row: the intercept is
    # pi_avg + xbar'(wwbar - wbar), xbar the rows' weighted mean (the steps are
    # weighted: the plain mean cost +30% RMSE) and wwbar the plain average of
    # the wbar_s, both in tail (2 d). A warm start's prior point counts in
    # wwbar. The means restart when x_wsum is 0 (set by either start), not by
    # n_avg or t0: an average switched on restarts from zero while
    # average_prior may still say t0, and a t0 changed mid-average must not
    # move their count.
    cdef double inv, xw, lag
    cdef bint cold = s.n_avg == 0
    if cold:
        s.intercept_pi = s.intercept
        s.intercept_pi2 = s.intercept
        s.x_wsum = 0.0
    s.n_avg += 1.0
    inv = 1.0 / s.n_avg
    if s.x_wsum == 0:
        # the means start: xbar at x ((x - x) * 1 + x is x exactly: wi / wi
        # is 1), wwbar at wbar before the step (a warm start's prior
        # iterates; a cold average's weight 1 then moves it to the new wbar)
        memcpy(tail, x, d * sizeof(double))
        memcpy(tail + d, wbar, d * sizeof(double))
    s.x_wsum += wi
    xw = sf_plug_in_pass(d, inv, wi / s.x_wsum, x, w, wbar, tail, tail + d, &lag)
    plug_in_intercepts(s, p, y, xw, step, cold, inv)
    s.intercept_avg = s.pi_avg + lag
    if rs != NULL:
        rs_step(d, wbar, s, rs, fit_b)


cdef inline double *plug_in_means(const SGDParams *p, double *rs, double *given,
                                  Py_ssize_t d) noexcept nogil:
    # Where the plug-in intercept's running means (2 d) live: NULL where it
    # does not apply (no intercept, squared loss); inference's sums keep them
    # in their tail; else the caller's array (NULL: none).
    if p.fit_intercept == 0 or p.loss != LOSS_CHECK:
        return NULL
    return rs + rs_core(d + 1) if rs != NULL else given
