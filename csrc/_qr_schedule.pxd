# The statistical stepsize schedule of online quantile (and least-squares)
# regression, Shen, Xia & Zhou, "Online Quantile Regression", JMLR 26 (2025):
# its state and parameter records, and the bookkeeping that turns residuals
# into stepsizes (warm-up, geometric phase one, the plateau and restart
# rules, the last phase's Ca / (t - t1 + Cb d) or t^-alpha steps, the
# warm-start clock t0), the data-free schedules' stepsizes, the losses'
# sub-gradients, and one single-sample row of all of it (quantile_row). One
# copy, cimported by the kernels that use it: the vector kernel
# (_quantile.pyx: the single- and multi-quantile loops take their rows
# through quantile_row, the batch and storage loops through block_eta) and
# the low-rank kernel (_lowrank.pyx: quantile_row with d the manifold's
# dimension). A quantile's fit so is the same arithmetic on every path, and
# bit-identical between them by construction.
#
# The records cross to Python as NumPy structured arrays whose dtypes each
# kernel makes from SGDState / SGDParams (record_dtypes()), so every kernel's
# records have the same fields in the same order.
from libc.math cimport fabs, pow, isnan, ceil, NAN
from libc.float cimport DBL_MAX, DBL_MIN

from _common cimport OK, ERR_NONFINITE, ERR_SCALE
from _order_stats cimport INV_MAD, median_abs, error_scale, sparsity

# Schedule kinds, modes and losses: the records' kind, mode and loss fields.
# (cdef enums, C only: each kernel module makes them Python attributes with
# globals().update(schedule_enums()).)
cdef enum:
    KIND_CONSTANT = 0
    KIND_INVERSE_TIME = 1
    KIND_STATISTICAL = 2
    KIND_ARRAY = 3        # precomputed stepsizes (a user schedule)

cdef enum:
    MODE_SINGLE = 0
    MODE_BATCH = 1
    MODE_STORAGE = 2

cdef enum:
    LOSS_CHECK = 0
    LOSS_SQUARED = 1

cdef enum:
    SETTLED_STRIDE = 4    # a compile-time constant: the modulo is a mask


cdef inline dict schedule_enums():
    return {"KIND_CONSTANT": KIND_CONSTANT, "KIND_INVERSE_TIME": KIND_INVERSE_TIME,
            "KIND_STATISTICAL": KIND_STATISTICAL, "KIND_ARRAY": KIND_ARRAY,
            "MODE_SINGLE": MODE_SINGLE, "MODE_BATCH": MODE_BATCH,
            "MODE_STORAGE": MODE_STORAGE, "LOSS_CHECK": LOSS_CHECK,
            "LOSS_SQUARED": LOSS_SQUARED}


cdef extern from *:
    """
    /* sqrt(DBL_MIN): below it x^2 leaves float64's normal range and loses precision */
    #define SF_SQRT_DBL_MIN 1.4916681462400413e-154
    /* sqrt(2 pi) / Phi^{-1}(3/4): the sparsity 1/f(0) of N(0, s^2) over its median |.| */
    #define SF_GAUSS_SPARSITY_PER_MED 3.7163326409367904
    """
    const double SQRT_DBL_MIN "SF_SQRT_DBL_MIN"
    const double GAUSS_SPARSITY_PER_MED "SF_GAUSS_SPARSITY_PER_MED"


cdef struct SGDState:
    double t              # schedule clock: updates taken (single mode: their weights' sum)
    double n_updates      # updates taken
    double n_seen         # rows seen (scored)
    double intercept
    double intercept_avg
    double loss           # prequential loss: each row scored (weighted) before its update
    double phase          # 0 warm-up, 1 geometric, 2 (const or 1/t), 3 1/t (batch)
    double eta_geo        # next phase-one stepsize
    double t_switch       # clock value where the current phase began
    double d0             # initial error scale estimate (response units)
    double b0             # sparsity 1/f(q_tau) estimate (response units)
    double cl             # mean eigenvalue of E[x x'] estimate: mean ||x||^2 / d
    double sumsq          # weighted sum of ||x||^2 seen during warm-up
    double n_sumsq        # their weights' sum
    double fill           # residuals in the current window
    double n_avg          # iterates in the Polyak-Ruppert average
    double min_med        # smallest window median |r| since phase one began (plateau test)
    double last_eta       # stepsize of the last update
    double eta_start      # stepsize at the start of the last phase
    double avg_on         # 1 once settled in the last phase: the average runs
    double n_flat         # consecutive windows without progress
    double b0_cap         # b0 at the end of phase one: later estimates stay below
    double block          # weight (rows) per update of the last block update
    double k_pow          # last-phase step index of the cached eta_pow (-1: none)
    double eta_pow        # cached eta_start (1 + k / scale)^-avg_power
    double cu             # largest eigenvalue of E[x x'] (batch / storage modes)
    double level          # running level of the window medians |r| (restart test)
    double n_high         # consecutive windows far above the level
    double n_restarts     # restarts of phase one after a jump of the residual scale
    double win_sumsq      # weighted sum of ||x||^2 (+1 with an intercept) of the window's rows
    double win_wsum       # their weights' sum
    double xmax           # largest |x_ij| over the warm-up's rows (underflow check)
    double intercept_pi   # inference: plug-in intercept, quantile steps on y - x'wbar
    double intercept_pi2  # the same at twice the steps (its Richardson-Romberg partner)
    double pi_avg         # inference: average of 2 intercept_pi - intercept_pi2
    double x_wsum         # the weights' sum of the plug-in intercept's mean row (0: restarts)
    double dr_n           # drift test (_qr_drift.pxd): rows (weight) it has seen since it
                          # started (0: it starts)
    double dr_cusum       # its CUSUM statistic, >= 0
    double n_drift        # alarms of the drift test (restarts of the average)
    double dim            # single mode: the schedule's d, the mean number of non-zero
                          # entries of the warm-up's rows (+1 with an intercept), set
                          # when the warm-up ends (0 before; see dim_of_row)
    double win_len        # the residual window's length from then on (0: p.window)
    double nnz_sum        # non-zero entries of the warm-up's rows of weight > 0
    double nnz_rows       # those rows
    double nnz_max        # the most non-zero entries of one of them


cdef struct SGDParams:
    double tau
    double loss
    double kind
    double c              # constant / inverse_time coefficient
    double eta0           # NaN: estimate from the stream
    double eta0_scale     # C in eta0 = C D0 / (d Cl tau*^2) (single), C D0 m/d / Cl (blocks)
    double decay          # single: eta *= 1 - decay / (d tau*^2); blocks: 1 - decay m/d
    double Ca
    double Cb
    double b0             # NaN: estimate from the stream
    double t_switch       # NaN: switch by the rule; else the update index
    double n_warmup       # warm-up rows (no updates) for D0, b0, Cl (single, batch)
    double window         # residual window for b0 and the plateau test
    double average        # 1: Polyak-Ruppert averaging over the last phase
    double avg_power      # alpha of the t^-alpha last phase used with averaging
    double fit_intercept
    double plateau        # a window makes progress below plateau * best median |r|
    double eta_const      # batch/storage phase two: eta = eta_const * b0 / Cu
    double ema            # weight of a new window in b0 (phase two) and the level
    double patience       # windows without progress that make a plateau (or a jump)
    double mode           # MODE_SINGLE, MODE_BATCH or MODE_STORAGE
    double C0             # batch phase two needs block >= C0 tau*^2 d (Theorem 5)
    double start          # 1: phase one after the warm-up; 2: straight to the last phase
    double restart        # a window median above restart * level for patience windows
                          # restarts phase one (0: never)
    double t0             # clock behind a warm start (start == 2): the last phase
                          # continues from it until a restart
    double drift          # 1: the drift test runs on the prequential loss (single mode)
    double drift_h        # its alarm threshold on the CUSUM of log-likelihood ratios
    double drift_arm      # rows (weight) of the average before the test runs
    double drift_clock    # 1: an alarm also restarts the last phase's clock
    double window_auto    # 1: single mode's window is max(64, 2.5 d) with d the schedule's
                          # (dim): `window` is then that of dense rows, an upper bound


cdef inline tuple record_dtypes():
    # (STATE_DTYPE, PARAMS_DTYPE): the records' dtypes, made from the structs
    # (named fields, the structs' layout); each kernel module makes its pair
    # once, at import, and checks records against those objects.
    import numpy as np
    cdef SGDState state
    cdef SGDParams params
    return (np.asarray(<SGDState[:1]> &state).dtype,
            np.asarray(<SGDParams[:1]> &params).dtype)


cdef inline object default_params(object dtype):
    # A parameter record of `dtype`, NaN where "estimate from the stream" is
    # meant (eta0, b0, t_switch).
    import numpy as np
    p = np.zeros(1, dtype)
    for name in ("eta0", "b0", "t_switch"):
        p[name] = NAN
    p["start"] = 1.0
    return p


cdef inline double row_absmax(const double *x, Py_ssize_t d, double m) noexcept nogil:
    # max(m, max_j |x_j|): warm-up rows only (the underflow check)
    cdef Py_ssize_t j
    for j in range(d):
        if fabs(x[j]) > m:
            m = fabs(x[j])
    return m


cdef inline void start_phase(SGDState *s, double phase, double eta_start,
                             bint avg_on) noexcept nogil:
    s.phase = phase
    s.t_switch = s.t
    s.eta_start = eta_start
    s.n_avg = 0        # averaging restarts with the last phase
    s.avg_on = avg_on
    s.n_flat = 0       # the next plateau is counted afresh
    s.k_pow = -1


cdef inline double tau_star2(double tau) noexcept nogil:
    # 4 max(tau, 1 - tau)^2: Theorem 1's tau*^2, scaled to 1 at the median. It
    # bounds the squared sub-gradient factor (1{r <= 0} - tau)^2, so phase one's
    # stepsize and decay shrink with it (Section 3.1's rates are for tau = 1/2).
    cdef double ts = tau if tau > 0.5 else 1.0 - tau
    return 4.0 * ts * ts


cdef inline double last_phase_eta(SGDState *s, const SGDParams *p,
                                  double scale) noexcept nogil:
    # Ca / (t - t1 + Cb d) written as eta_start / (1 + (t - t1) / (Cb d)), or
    # (.)^-alpha when averaging: 1/t steps make Polyak-Ruppert averaging useless.
    cdef double k = s.t - s.t_switch
    if p.start == 2 and s.n_restarts == 0 and s.n_drift == 0:
        k += p.t0         # a warm start continues the clock of the fit behind it
    if p.average != 0 and p.avg_power != 1.0:
        # pow() per sample would cost as much as the update at d = 100: it is
        # refreshed whenever k has grown by scale / 64, a change of at most
        # avg_power / 64 (~1%) in the stepsize.
        if s.k_pow < 0 or k < s.k_pow or k >= s.k_pow + scale * (1.0 / 64.0) \
                or not (s.eta_pow > 0):
            s.k_pow = k
            s.eta_pow = s.eta_start * pow(1.0 + k / scale, -p.avg_power)
        return s.eta_pow
    return s.eta_start * scale / (scale + k)


cdef inline double block_ratio(const SGDState *s, double d) noexcept nogil:
    # min(1, rows per update / d). The batch schedules are written for blocks
    # of at least ~d rows; a block of m < d rows is m single-sample steps
    # rolled into one, so its stepsizes and decay shrink by m / d (at m = 1,
    # single-sample scales).
    return s.block / d if s.block < d else 1.0


cdef inline double phase_start_eta(const SGDState *s, const SGDParams *p,
                                   double d, double phase) noexcept nogil:
    cdef double const
    # Stepsize at the start of phase 2 or 3, from the current sparsity estimate.
    if p.loss == LOSS_SQUARED:
        return s.eta_geo                              # continuous at t1
    if p.mode == MODE_SINGLE:
        return s.b0 * p.Ca / (s.cl * p.Cb * d)        # (b0/Cl) Ca / (Cb d)
    # Batch and storage: a step on a block's mean gradient is stable only
    # below 2 / (f Cu), Cu the block's top eigenvalue (the paper's
    # (Cl / Cu^2) b1^2 / b0 scale; for blocks of m < d rows Cu grows like
    # ||x||^2 / m, which covers the small block), and the 1/t phase starts
    # no higher than the constant phase.
    const = p.eta_const * s.b0 / s.cu
    if phase == 2:
        return const
    return min(const, p.Ca * s.b0 * block_ratio(s, d) / (s.cl * p.Cb))


cdef inline double average_prior(const SGDState *s, const SGDParams *p) noexcept nogil:
    # The iterates an average starts with: a warm start (start == 2) with t0
    # rows behind it counts its starting point (still in wbar: the average has
    # not run) as t0 iterates, until a restart of phase one (or a drift
    # alarm); else none.
    if p.start == 2 and s.n_restarts == 0 and s.n_drift == 0 and p.t0 > 0:
        return p.t0
    return 0.0


cdef inline void start_average(SGDState *s, const SGDParams *p) noexcept nogil:
    # The last phase has settled: the average runs from here. Inference's
    # plug-in intercepts start from the average's starting point (a cold
    # average resets them at its first iterate: plug_in_step).
    s.avg_on = 1
    s.n_avg = average_prior(s, p)
    s.x_wsum = 0.0          # the plug-in's means start at the average's first row
    s.intercept_pi = s.intercept_avg
    s.intercept_pi2 = s.intercept_avg
    s.pi_avg = s.intercept_avg
    s.dr_n = 0.0            # the drift test starts with the average
    s.dr_cusum = 0.0


cdef inline void end_phase_one(SGDState *s, const SGDParams *p, double d) noexcept nogil:
    # Into the last phase (the plateau rule, or start="phase2" after the warm-up).
    s.b0_cap = s.b0
    if p.mode == MODE_BATCH and s.block < p.C0 * tau_star2(p.tau) / 4.0 * d:
        # Batches too small for Theorem 5's constant phase: its one-step
        # floor b0 sqrt(tau (1 - tau) d / n) exceeds phase one's error.
        start_phase(s, 3, phase_start_eta(s, p, d, 3), True)
        start_average(s, p)
    else:
        start_phase(s, 2, phase_start_eta(s, p, d, 2), False)


cdef inline int fresh_estimates(SGDState *s, const SGDParams *p, const double *r, Py_ssize_t n,
                                double *work, double d) noexcept nogil:
    # D0, b0, the plateau test's best median, the level and phase one's first
    # stepsize from the residuals r at the current iterate: at the end of the
    # warm-up, and again when the residual scale jumped (a restart). Cl (and
    # Cu) are set by the caller first. Returns ERR_NONFINITE if phase one's
    # first stepsize overflows (y's scale too large against X's).
    cdef double med = median_abs(r, n, work)
    s.level = med
    s.n_high = 0
    if p.loss == LOSS_CHECK:
        s.d0 = error_scale(r, n, work)
        s.b0 = p.b0 if not isnan(p.b0) else sparsity(r, n, p.tau, work)
        if not (s.b0 > 1e-9 * s.d0):
            s.b0 = s.d0
        if not isnan(p.eta0):
            s.eta_geo = p.eta0
        elif p.mode == MODE_SINGLE:
            s.eta_geo = p.eta0_scale * s.d0 / (s.cl * d * tau_star2(p.tau))
        else:
            s.eta_geo = p.eta0_scale * s.d0 * block_ratio(s, d) / s.cl
    else:
        # least squares: constant eta0_scale / (d Cl) in phase one (Section 3.1)
        s.eta_geo = p.eta0 if not isnan(p.eta0) else p.eta0_scale / (s.cl * d)
    if not (s.eta_geo <= DBL_MAX):
        return ERR_NONFINITE
    if not (s.eta_geo > 0):
        s.eta_geo = 1e-12
    # single mode's plateau test starts from the warm-up's median; block
    # modes from D0's (the same number when the error dominates)
    s.min_med = med if p.mode == MODE_SINGLE else s.d0 / INV_MAD
    s.phase = 1
    s.t_switch = s.t
    s.n_avg = 0
    s.avg_on = 0
    s.n_flat = 0
    s.k_pow = -1
    if p.start == 2:
        end_phase_one(s, p, d)
    return OK


cdef inline int calibrated_cl(SGDState *s, double d) noexcept nogil:
    # Cl at the end of the warm-up: mean ||x||^2 / d. ERR_SCALE when the sum
    # overflows, or when X's entries are all so small (but not 0) that their
    # squares leave float64's normal range: the scale would be lost; X
    # exactly 0 has no scale to learn and gets Cl = 1.
    s.cl = s.sumsq / (s.n_sumsq * d)
    if not (s.cl <= DBL_MAX):
        return ERR_SCALE
    if s.xmax > 0 and s.xmax < SQRT_DBL_MIN:
        return ERR_SCALE
    if not (s.cl > 0):
        s.cl = 1.0
    return OK


cdef enum:
    JUMP_NONE = 0         # a window like the others
    JUMP_HIGH = 1         # far above the level: it teaches the estimates nothing yet
    JUMP_RESTART = 2      # the patience-th high window in a row: restart phase one


cdef inline int jump_test(SGDState *s, const SGDParams *p, double med) noexcept nogil:
    # Non-stationary starts (a stuck sensor: constant y for a while) leave
    # estimates fitted to the start: windows of (nearly) no spread say nothing
    # about the noise, and when the residual scale then jumps far above its
    # running level for `patience` windows in a row, the estimates are stale
    # and phase one restarts (fresh_estimates on the last window, with Cl from
    # its rows). `med` is the window's median |r|; the level is a running
    # average of the medians of the windows that were not high.
    if p.loss != LOSS_CHECK or not (p.restart > 0) or s.phase < 1:
        return JUMP_NONE
    if s.level > 0 and med > p.restart * s.level:
        s.n_high += 1
        return JUMP_RESTART if s.n_high >= p.patience else JUMP_HIGH
    s.n_high = 0
    s.level = med if not (s.level > 0) else s.level + p.ema * (med - s.level)
    return JUMP_NONE


cdef inline int full_window(SGDState *s, const SGDParams *p, const double *r, Py_ssize_t n,
                            double *work, double d) noexcept nogil:
    # A full window of single or batch mode: the restart rule, then (unless
    # the window is far above the level) the plateau test and b0. Returns the
    # jump; on JUMP_RESTART the caller restarts phase one on this window.
    cdef double med = median_abs(r, n, work)
    cdef int jump = jump_test(s, p, med)
    if jump == JUMP_NONE:
        window_done(s, p, r, n, med, work, d)
    return jump


cdef inline void window_done(SGDState *s, const SGDParams *p, const double *r, Py_ssize_t n,
                             double med, double *work, double d) noexcept nogil:
    # Called on each full window of residuals (med: its median |r|). Their
    # median |r| falls while the error dominates the residuals and levels off
    # at the noise. A window makes progress when its median is below
    # `plateau` times the best so far; `patience` windows in a row without
    # progress make a plateau: the error has reached the noise level (or
    # stopped moving). A plateau ends phase one (the paper: "until the error
    # is at the noise level"), ends batch phase two, and in the last phase
    # starts the Polyak-Ruppert average, which so leaves out the transient.
    # For the check loss each window also refreshes the sparsity estimate b0.
    cdef double est
    cdef bint flat
    if s.min_med <= 0 or med < p.plateau * s.min_med:
        s.n_flat = 0
    else:
        s.n_flat += 1
    if s.min_med <= 0 or med < s.min_med:
        s.min_med = med
    flat = s.n_flat >= p.patience
    if p.loss == LOSS_CHECK and isnan(p.b0):
        est = sparsity(r, n, p.tau, work)
        # ties at the quantile (exact fits, discrete y) give a 0 spacing: such
        # a window says nothing about the density
        if est > 1e-9 * s.d0:
            if s.phase >= 2 and p.mode != MODE_STORAGE:    # storage: all data, no need
                s.b0 += p.ema * (est - s.b0)
            else:
                s.b0 = est
            if s.phase >= 2 and s.b0 > s.b0_cap:
                # Residuals are noise plus x'(beta - beta*): the estimate is
                # biased up by the error. Capping it at its value at the end of
                # phase one stops a larger error from buying larger steps.
                s.b0 = s.b0_cap
    if flat and s.phase == 1 and isnan(p.t_switch) and \
            not (p.mode == MODE_SINGLE and p.loss == LOSS_CHECK and not isnan(p.b0)):
        end_phase_one(s, p, d)
    elif flat and s.phase == 2 and p.mode == MODE_BATCH:
        start_phase(s, 3, phase_start_eta(s, p, d, 3), True)
    elif flat and s.phase >= 2 and s.avg_on == 0:
        start_average(s, p)     # settled: the average (if any) starts here
    elif s.phase >= 2 and p.loss == LOSS_CHECK:
        s.eta_start = phase_start_eta(s, p, d, s.phase)
        s.k_pow = -1      # eta_start moved: recompute the cached power


cdef inline int restart(SGDState *s, const SGDParams *p, const double *r, Py_ssize_t n,
                        double *work, double d, double cu) noexcept nogil:
    # Phase one afresh from this window: the residual scale jumped. Cl from
    # the window's rows (if they give one), Cu (block modes) from the
    # caller's block.
    if s.win_wsum > 0 and s.win_sumsq / s.win_wsum >= DBL_MIN and s.win_sumsq <= DBL_MAX:
        s.cl = s.win_sumsq / (s.win_wsum * d)
    s.cu = cu if cu >= s.cl else s.cl
    s.n_restarts += 1
    return fresh_estimates(s, p, r, n, work, d)


cdef inline double single_eta(SGDState *s, const SGDParams *p, double d,
                              double weight) noexcept nogil:
    # Stepsize of the next single-sample update under the statistical schedule.
    cdef double eta
    if s.phase == 1:
        eta = s.eta_geo
        if p.loss == LOSS_CHECK:
            # the clock moves by the row's weight: so does the decay
            if weight == 1.0:
                s.eta_geo *= 1.0 - p.decay / (d * tau_star2(p.tau))
            else:
                s.eta_geo *= pow(1.0 - p.decay / (d * tau_star2(p.tau)), weight)
        if (not isnan(p.t_switch) and s.t + 1 >= p.t_switch) or \
                (p.loss == LOSS_CHECK and not isnan(p.b0) and isnan(p.t_switch)
                 and eta <= phase_start_eta(s, p, d, 2)):
            # with the noise's b0 known: the paper's continuity rule
            s.b0_cap = s.b0
            start_phase(s, 2, phase_start_eta(s, p, d, 2), False)
            s.t_switch = s.t + weight
        return eta
    if p.loss == LOSS_CHECK:
        return last_phase_eta(s, p, p.Cb * d)
    # least squares phase two: Ca / (Cl (t - t1) + Ca / eta1), continuous at t1
    return last_phase_eta(s, p, p.Ca / (s.eta_start * s.cl))


cdef inline double phase_one_cap(const SGDState *s, const SGDParams *p,
                                 Py_ssize_t da) noexcept nogil:
    # The longest stable phase-one step of batch and storage modes:
    # eta_const b / Cu, with b the sparsity 1/f of the residuals at 0 (the
    # mean gradient's slope at the iterate is f Cu: a longer step
    # overshoots). At the noise level that is b0, phase two's constant; while
    # the error dominates, the residuals at 0 are at least as sparse as a
    # centred Gaussian of their median |r| (the best window's, min_med): an
    # error in x'beta spreads them that way, and an offset (the intercept's
    # error) moves their mass off 0, where b0 -- measured at their own
    # quantile -- sees only the noise. Capping at b0 then would take steps
    # of the noise's size against an error of the offset's (issue 40).
    if p.loss == LOSS_SQUARED:
        return s.eta_geo
    return p.eta_const * max(s.b0, GAUSS_SPARSITY_PER_MED * s.min_med) / s.cu


cdef inline double block_eta(SGDState *s, const SGDParams *p,
                              Py_ssize_t da) noexcept nogil:
    # The statistical schedule's stepsize of a block update (batch and
    # storage modes), by phase: single_eta's counterpart.
    cdef double eta
    if s.phase == 1:
        # geometric, but never above phase one's stability bound
        eta = min(s.eta_geo, phase_one_cap(s, p, da))
        s.eta_geo *= 1.0 - p.decay * block_ratio(s, da)
        if not isnan(p.t_switch) and s.t + 1 >= p.t_switch:
            s.b0_cap = s.b0
            start_phase(s, 2, phase_start_eta(s, p, da, 2), False)
            s.t_switch = s.t + 1
        return eta
    if s.phase == 2:
        return s.eta_start
    return last_phase_eta(s, p, p.Cb / block_ratio(s, da))


cdef enum:
    NO_UPDATE = 1         # not an error: the row warms the schedule up, no update


cdef inline int window_event(SGDState *s, const SGDParams *p, double *win, double *work,
                             const double *x, Py_ssize_t d, double da, double xx,
                             double wi) noexcept nogil:
    # What a row does beyond the window's store and its stepsize, on the rows
    # where something happens: in the warm-up, remember ||x||^2 (no update;
    # its last row calibrates Cl and the first estimates); else the window
    # is full: its tests (a restart included), then a new window. Returns
    # NO_UPDATE (a warm-up row), OK or an error code.
    cdef int code = OK
    cdef bint warm_up = s.phase == 0
    if warm_up:
        s.sumsq += wi * (xx + (1.0 if p.fit_intercept != 0 else 0.0))
        s.n_sumsq += wi
        s.xmax = row_absmax(x, d, s.xmax)
        if s.fill < p.n_warmup:
            return NO_UPDATE
        code = calibrated_cl(s, da)
        if code == OK:
            code = fresh_estimates(s, p, win, <Py_ssize_t> s.fill, work, da)
    elif full_window(s, p, win, <Py_ssize_t> s.fill, work, da) == JUMP_RESTART:
        code = restart(s, p, win, <Py_ssize_t> s.fill, work, da, 0.0)
    if code != OK:
        return code
    s.fill = 0
    s.win_sumsq = 0
    s.win_wsum = 0
    return NO_UPDATE if warm_up else OK


cdef inline double window_len(const SGDState *s, const SGDParams *p) noexcept nogil:
    # single mode's window: set with the schedule's d at the end of the
    # warm-up (dim_decided), else the parameter
    return s.win_len if s.win_len > 0 else p.window


cdef inline double auto_window(double da) noexcept nogil:
    # the default window for the schedule's d: max(64, ceil(2.5 d))
    # (StatisticalSchedule's max(64, -(-5 d // 2)) for an integer d)
    cdef double w = ceil(2.5 * da)
    return w if w > 64.0 else 64.0


cdef inline double dim_of_row(SGDState *s, const SGDParams *p, double nnz, double da_full,
                              double wi) noexcept nogil:
    cdef double da
    # The schedule's d for quantile_row on a row with nnz non-zero entries
    # (single mode). The paper's d is the dimension of isotropic rows; a
    # sparse or hashed row has nnz << n_features non-zeros, and the model's
    # size (n_features, 2^20 hashed columns) is not what its stepsizes should
    # scale with: d is the mean number of non-zero entries of the warm-up's
    # rows (+1 with an intercept). A dense row counts as n_features whatever
    # its values (row_dim, _qr_loops.pxd), so dense streams keep the paper's
    # d = n_features + 1 exactly (the same arithmetic as before); a sparse
    # row counts its stored non-zeros. The
    # warm-up's rows of weight > 0 are counted here (as quantile_row counts
    # their ||x||^2); the warm-up's last row gets the final mean, with which
    # Cl and the first stepsizes are calibrated; dim_decided keeps it.
    if p.kind != KIND_STATISTICAL or p.mode != MODE_SINGLE:
        return da_full
    if s.phase != 0:
        return s.dim if s.dim > 0 else da_full
    if wi == 0:
        return da_full            # (scored only: quantile_row reads no d)
    s.nnz_sum += nnz
    s.nnz_rows += 1.0
    if nnz > s.nnz_max:
        s.nnz_max = nnz
    da = s.nnz_sum / s.nnz_rows + (1.0 if p.fit_intercept != 0 else 0.0)
    return da if da >= 1.0 else 1.0        # (rows of zeros: one dimension)


cdef inline void dim_decided(SGDState *s, const SGDParams *p, double da) noexcept nogil:
    # After the row that ended the warm-up (phase 0 -> 1 or 2): its d stays,
    # and so does the window it gives (the parameter's, if one was given)
    s.dim = da
    s.win_len = auto_window(da) if p.window_auto != 0 else p.window


cdef inline int stat_single_row(SGDState *s, const SGDParams *p, double *win, double *work,
                                const double *x, Py_ssize_t d, double da, double r,
                                double xx, double wi, double *eta) noexcept nogil:
    # The statistical schedule's work for one single-sample row of weight
    # wi > 0, residual r and ||x||^2 = xx: the residual window, the warm-up,
    # the window's tests (restarts included) and the stepsize of the row's
    # update. Returns OK (update with eta[0]), NO_UPDATE (a warm-up row) or an
    # error code. The caller moves the clock once it has updated. (Most rows
    # take only the window's store and single_eta; the rare rows' work is
    # one function for both call sites, window_event, whose large parts
    # (fresh_estimates, window_done) stay out of line: the whole row then
    # inlines into the row loops, with no call on the common rows.)
    cdef int code
    # Once settled (a plateau in the last phase) only b0 still learns from the
    # window: a quarter of the residuals is enough and keeps the order
    # statistics off the per-sample cost. Counted in updates, so that rows of
    # weight 0 change nothing.
    if s.avg_on == 0 or (<long long> s.n_updates) % SETTLED_STRIDE == 0:
        win[<Py_ssize_t> s.fill] = r
        s.fill += 1
        s.win_sumsq += wi * (xx + (1.0 if p.fit_intercept != 0 else 0.0))
        s.win_wsum += wi
    if s.phase == 0:
        return window_event(s, p, win, work, x, d, da, xx, wi)
    if s.fill >= window_len(s, p):
        code = window_event(s, p, win, work, x, d, da, xx, wi)
        if code != OK:
            return code
    eta[0] = single_eta(s, p, da, wi)
    return OK


# ----------------------------------------------------------------------------
# One row of the single-sample mode, written once for every kernel that
# takes rows one at a time: the vector kernel's single- and multi-quantile
# loops (_quantile.pyx) and the low-rank kernel (_lowrank.pyx). Each calls
# quantile_row per row (and per quantile) and applies the returned step to
# its own iterate, so their schedules agree bit for bit by construction.

cdef inline double check_loss(double r, double tau) noexcept nogil:
    # rho_tau(r) = r * (tau - 1{r < 0}). The indicator is a number, not a
    # branch: the residual's sign is a coin flip at tau = 0.5, and a branch
    # on it mispredicts every other row. (tau - 0.0 is tau and tau - 1.0 the
    # same operation as a branch would take: the same bits.)
    return r * (tau - <double> (r < 0))


cdef inline double loss_and_coef(double r, const SGDParams *p, double *loss,
                                 double weight) noexcept nogil:
    # Returns g with gradient = g * x and adds weight * loss: check loss
    # (1{y <= x'b} - tau), squared loss r^2 / 2 gives -r. (No branch on the
    # residual's sign: see check_loss.)
    if p.loss == LOSS_CHECK:
        loss[0] += weight * check_loss(r, p.tau)
        return <double> (r <= 0) - p.tau
    loss[0] += weight * (0.5 * r * r)
    return -r


cdef inline double fixed_eta(const SGDState *s, const SGDParams *p,
                             double eta_user) noexcept nogil:
    # The stepsize of the data-free schedules: constant, c / (t + 1), or the
    # user schedule's precomputed value.
    if p.kind == KIND_CONSTANT:
        return p.c
    if p.kind == KIND_INVERSE_TIME:
        return p.c / (s.t + 1.0)
    return eta_user


cdef inline void clock_step(SGDState *s, double eta, double weight) noexcept nogil:
    # The schedule's clock after an update of stepsize eta: it moves by the
    # row's weight (single-sample mode; a block update moves it by 1).
    s.t += weight
    s.n_updates += 1
    s.last_eta = eta


cdef inline int quantile_row(SGDState *s, const SGDParams *p, double *win, double *work,
                             const double *x, Py_ssize_t d, double da, double r,
                             double xx, double wi, double eta_user, bint fit_b,
                             double *coef, double *step) noexcept nogil:
    # One row of weight wi, residual r and ||x||^2 = xx for one iterate: the
    # row is scored (the prequential loss, n_seen), then, if it weighs
    # anything, the schedule gives its stepsize eta (statistical:
    # stat_single_row; else fixed_eta, eta_user for a user array) and the
    # state moves as the update does (intercept, clock, last_eta). Returns
    # OK with coef = -eta g wi (the caller's w += coef * x) and step = eta wi
    # (the plug-in intercept's); NO_UPDATE when the iterate stays (weight 0,
    # a warm-up row); or an error code.
    cdef double g = loss_and_coef(r, p, &s.loss, wi), eta
    cdef int code
    s.n_seen += 1
    if wi == 0:
        return NO_UPDATE          # a row of weight 0 is scored, nothing more
    if p.kind == KIND_STATISTICAL:
        code = stat_single_row(s, p, win, work, x, d, da, r, xx, wi, &eta)
        if code != OK:
            return code           # NO_UPDATE: scored and remembered only
    else:
        eta = fixed_eta(s, p, eta_user)
    coef[0] = -eta * g * wi
    step[0] = eta * wi
    if fit_b:
        s.intercept -= eta * g * wi
    clock_step(s, eta, wi)
    return OK
