# A change test on the prequential loss of single-sample quantile (and
# least-squares) regression, and what an alarm restarts: the Polyak-Ruppert
# average (and the last phase's clock). Polyak-Ruppert averaging keeps an old
# regime for ever; the plain iterate follows a change, so restarting the
# average from it at an alarm is the minimum that lets the average follow.
#
# The test is a CUSUM (Page 1954) on a sign statistic: is the row's loss
# above the running median of the losses since the test started? Under a
# stationary stream that is a fair coin whatever the noise's tails (t_1.1
# noise has no variance, and its check loss no useful mean: a CUSUM or
# Page-Hinkley test on the loss itself is calibrated by its largest values).
# A change that the iterate has not followed yet raises the losses: the coin
# comes up "above" more often. The CUSUM accumulates the log-likelihood ratio
# of P(above) = 2/3 against 1/2, S = max(0, S + w log(4/3)) on a row above
# and S = max(0, S + w log(2/3)) on a row below, and alarms at S > h. Its
# mean time to a false alarm on a fair coin is ~2 e^h rows (Lorden's bound
# e^h; h = 25 gives 1.6e12 rows by the Markov chain of S), and its drift
# stays negative while P(above) < log(3/2) / log(2) = 0.585: a reference
# median a little off (its estimate's noise) costs no alarms. After a change
# to P(above) = 0.75 it alarms in ~220 rows, at 0.9 in ~115.
#
# The reference median is a Robbins-Monro median of log(loss) since the test
# started, step 2 / (n + 2) after n rows (the weights' sum): scale-free, one
# multiply a row, and with its 1/n steps a median of the whole period, so
# that a gradual drift raises the losses above it too (a running median of
# recent rows would follow the drift and never alarm). While the iterate
# still converges the losses fall below the reference: the test errs on the
# quiet side. It runs only once the reference has learnt from drift_arm rows.
#
# The test starts with each Polyak-Ruppert average (start_average resets it;
# with the statistical schedule, once settled in its last phase; with the
# other schedules from the first row). An alarm restarts the average: with
# the statistical schedule the average waits for the schedule to settle
# again (its plateau test on the following windows), and so does the test.
from libc.math cimport log

from _qr_schedule cimport SGDState, SGDParams, LOSS_CHECK, KIND_STATISTICAL, check_loss

cdef extern from *:
    """
    /* log(4/3) and log(2/3): the CUSUM's steps on a row above and below the
     * reference, the log-likelihood ratio of P(above) = 2/3 against 1/2 */
    #define SF_DRIFT_UP 0.28768207245178090
    #define SF_DRIFT_DOWN (-0.40546510810816438)
    """
    const double DRIFT_UP "SF_DRIFT_UP"
    const double DRIFT_DOWN "SF_DRIFT_DOWN"


cdef inline double row_loss(double r, const SGDParams *p) noexcept nogil:
    # The row's loss up to a monotone map (the test reads only its order):
    # the check loss, or |r| for the squared loss
    if p.loss == LOSS_CHECK:
        return check_loss(r, p.tau)
    return r if r >= 0 else -r


cdef inline bint drift_alarm(SGDState *s, const SGDParams *p, double r,
                             double wi) noexcept nogil:
    # One row of weight wi > 0 and residual r (under the iterate before its
    # update) through the test; True on an alarm (the caller then calls
    # drift_restart). The reference first: the row is tested against the
    # median of the rows before it, then joins it.
    cdef double loss = row_loss(r, p), g
    cdef bint above = loss > s.dr_ref
    cdef bint alarm = False
    if s.dr_n >= p.drift_arm:
        s.dr_cusum += wi * (DRIFT_UP if above else DRIFT_DOWN)
        if s.dr_cusum < 0:
            s.dr_cusum = 0.0
        alarm = s.dr_cusum > p.drift_h
    # log(ref) += g (1 if above else -1), written as a multiply: ref * (1 + g)
    # or ref / (1 + g), symmetric in log (no bias), no log() per row
    s.dr_n += wi
    g = 2.0 * wi / (s.dr_n + 2.0)
    if not (s.dr_ref > 0):
        s.dr_ref = loss         # the first row (or all losses 0 so far)
    elif above:
        s.dr_ref *= 1.0 + g
    else:
        s.dr_ref /= 1.0 + g
    return alarm


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
    s.dr_ref = 0.0
    if p.kind != KIND_STATISTICAL:
        return
    s.avg_on = 0.0
    s.n_flat = 0.0
    s.min_med = 0.0
    s.fill = 0.0
    s.win_sumsq = 0.0
    s.win_wsum = 0.0
    if p.drift_clock != 0 and s.phase >= 2:
        s.t_switch = s.t        # larger steps again: the iterate travels faster
        s.k_pow = -1.0
