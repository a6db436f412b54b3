# A change test on the prequential loss of single-sample quantile (and
# least-squares) regression, and what an alarm restarts: the Polyak-Ruppert
# average (and the last phase's clock). Polyak-Ruppert averaging keeps an old
# regime for ever; the plain iterate follows a change, so restarting the
# average from it at an alarm is the minimum that lets the average follow.
#
# The test is a CUSUM (Page 1954) on a paired, bounded statistic: does the
# averaged iterate predict the row worse than the plain iterate? With pa, pp
# the two predictions (before the row's update),
#   z = (rho(y - pa) - rho(y - pp)) / (max(tau, 1 - tau) |pa - pp|)
# lies in [-1, 1] (rho is max(tau, 1 - tau)-Lipschitz). At tau = 1/2 it is
# the sign of loss(avg) - loss(plain) for every y outside [pa, pp]: heavy
# tails cannot make it large (t_1.1 noise has no variance, and its check
# loss no useful mean: a CUSUM or Page-Hinkley test on the loss itself is
# calibrated by its largest values). At other taus the plain sign would be
# decided by which prediction is lower (y is above both with probability
# 1 - tau); z weighs the two sides by tau and 1 - tau instead, and for x
# ~ N(0, I) its mean has the sign of ||e_avg||^2 - ||e_plain||^2 (the two
# iterates' errors): negative on a stationary stream, where the average is
# the better fit, positive after a change or along a drift, which the plain
# iterate follows and the average does not. The plain iterate's prequential
# loss alone would miss a drift it tracks while the average falls behind
# (measured: beta turning 1 rad over 3e5 rows leaves the iterate 0.03 off
# and the average 0.34).
#
# S = max(0, S + w (C1 z - C0)) with C1 = log(3/2) / 2, C0 = -log(0.96) / 2:
# for z = +-1 the log-likelihood ratio of P(worse) = 0.6 against 1/2. For
# any z in [-1, 1] of mean <= 0, E exp(C1 z - C0) <= cosh(C1) exp(-C0) = 1,
# so (Lorden) the mean time to a false alarm at threshold h is at least
# e^h rows (h = 25: 7e10; the Markov chain of S on a fair coin gives
# 7.8e12), and it only grows as the average gets better than the iterate.
# The drift is positive once E z > C0 / C1 = 0.10 (P(worse) > 0.55 at
# tau = 1/2): at P(worse) = 0.6 it alarms in ~1,200 rows, at 0.7 in ~410.
# (A design at P(worse) = 2/3 alarms ~3x faster on large changes but missed
# a change of every coefficient by 0.1 ||beta|| / sqrt(d) in 2 of 3 streams.)
#
# The test starts with each Polyak-Ruppert average (start_average resets it;
# with the statistical schedule, once settled in its last phase; with the
# other schedules from the first update) and runs once the average holds
# drift_arm rows. An alarm restarts the average from the current iterate:
# with the statistical schedule the average (and the test) waits for the
# schedule to settle again (its plateau test on the following windows), and
# the last phase's clock restarts: larger steps again, so the iterate
# travels to the new regime faster. Measured (d = 20, t_1.1, a change of
# every coefficient by 0.1-1 ||beta|| / sqrt(d), 9 streams): with it one
# alarm per change and within 1.5x of a fresh fit 2,000-4,000 rows after
# it; without it the average, restarted while the iterate still travels,
# lags again (up to 8 alarms per change, up to 14,000 rows to recover).
from _qr_schedule cimport (SGDState, SGDParams, LOSS_CHECK, KIND_STATISTICAL, check_loss,
                           start_phase)

cdef extern from *:
    """
    /* the CUSUM's scale and drift allowance: log(3/2) / 2 and -log(0.96) / 2 */
    #define SF_DRIFT_C1 0.2027325540540822
    #define SF_DRIFT_C0 0.020410997260127583
    """
    const double DRIFT_C1 "SF_DRIFT_C1"
    const double DRIFT_C0 "SF_DRIFT_C0"


cdef inline double worse_score(double r, double r_avg, const SGDParams *p) noexcept nogil:
    # z in [-1, 1]: how much worse the average predicts the row than the
    # iterate, per unit of their predictions' gap (the squared loss is
    # compared as tau = 1/2's check loss: |r|)
    cdef double tau = p.tau if p.loss == LOSS_CHECK else 0.5
    cdef double gap = r - r_avg, z
    if gap == 0:
        return 0.0
    if gap < 0:
        gap = -gap
    z = (check_loss(r_avg, tau) - check_loss(r, tau)) / ((tau if tau > 0.5 else 1.0 - tau) * gap)
    return 1.0 if z > 1.0 else (-1.0 if z < -1.0 else z)


cdef inline bint drift_alarm(SGDState *s, const SGDParams *p, double r, double r_avg,
                             double wi) noexcept nogil:
    # One row of weight wi > 0 through the test: r and r_avg are its
    # residuals under the plain and the averaged iterate before its update.
    # True on an alarm (the caller then calls drift_restart).
    s.dr_n += wi
    if s.dr_n <= p.drift_arm:
        return False
    s.dr_cusum += wi * (DRIFT_C1 * worse_score(r, r_avg, p) - DRIFT_C0)
    if s.dr_cusum < 0:
        s.dr_cusum = 0.0
    return s.dr_cusum > p.drift_h


cdef inline void drift_restart(SGDState *s, const SGDParams *p) noexcept nogil:
    # An alarm: the average restarts from the current iterate and the test
    # with it. The statistical schedule first settles again: its plateau test
    # starts afresh on windows of the rows after the alarm (every row's
    # residual until settled), and start_average then restarts the average,
    # the plug-in intercepts and the test. Other schedules average every
    # update: the average restarts at the next one (n_avg = 0 is a cold start
    # for the average, its plug-in intercepts and inference's sums).
    s.n_drift += 1
    s.n_avg = 0.0
    s.x_wsum = 0.0
    s.dr_n = 0.0
    s.dr_cusum = 0.0
    if p.kind != KIND_STATISTICAL:
        return
    s.avg_on = 0.0
    s.n_flat = 0.0
    s.min_med = 0.0
    s.fill = 0.0
    s.win_sumsq = 0.0
    s.win_wsum = 0.0
    if p.drift_clock != 0 and s.phase >= 2:
        # the last phase's clock restarts: larger steps again, so that the
        # iterate travels faster
        start_phase(s, s.phase, s.eta_start, False)
