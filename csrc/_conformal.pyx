# Conformal calibration of a pair of online quantiles (OnlineIntervalRegressor):
# the scalar recurrence that runs over each row's prequential predictions
# (sgd_multi's ``preds``) after the quantiles' own pass. The score of a row is
# conformalised quantile regression's s = max(lo - y, y - hi); the interval at
# offset q is [lo - q, hi + q], which holds y exactly when s <= q.
#
# ACI (Gibbs & Candes 2021): a running level a, a <- a + gamma (alpha - err);
# the offset is the split-conformal (1 - a) quantile of the last `window`
# scores, kept sorted (one insertion and one deletion a row: a binary search
# and a memmove of about window / 3 values). a <= 0 gives q = +inf (the whole
# line) and a >= 1 q = -inf (the empty set), which is what the long-run bound
# |mean(err) - alpha| <= (max(alpha, 1 - alpha) + gamma) / (gamma T) needs.
#
# PID (Angelopoulos, Candes & Tibshirani 2023) without the scorecaster: the
# offset is p + r_t(E), p the quantile-tracking ("P") part
# p <- p + lr scale (err - alpha), scale an exponentially weighted mean of |s|
# over about `window` rows (the step in the scores' own units), and
# r_t(E) = ki scale tan(E log(t + 1) / (csat (t + 1))) the saturating
# integrator of E = sum(err - alpha), +-inf once the tangent's argument
# reaches +-pi/2: whatever the scores, the miscoverage after t rows is then
# within (pi / 2) csat / log(t + 1) + 1 / t of alpha.
from libc.math cimport fabs, ceil, log, tan, INFINITY, M_PI
from libc.string cimport memmove

cdef struct Conformal:
    # one record of float64 fields (STATE_FIELDS, in this order)
    double n              # rows scored
    double n_covered      # rows with s <= q (inside the calibrated interval)
    double n_base         # rows with s <= 0 (inside the uncalibrated pair)
    double n_bounded      # rows whose interval was bounded (q < inf)
    double width_sum      # sum of the bounded intervals' widths
    double base_width     # sum of the uncalibrated pair's widths hi - lo
    double offset         # q for the next row
    double level          # ACI's a
    double fill           # ACI: scores in the window
    double head           # ACI: ring position of the oldest score once full
    double p_offset       # PID's quantile-tracking part p
    double integral       # PID's E = sum(err - alpha)
    double scale          # PID's weighted mean |s|

STATE_FIELDS = ("n", "n_covered", "n_base", "n_bounded", "width_sum", "base_width", "offset",
                "level", "fill", "head", "p_offset", "integral", "scale")

cpdef enum:
    METHOD_ACI = 0
    METHOD_PID = 1


cdef inline Py_ssize_t upper_bound(const double *a, Py_ssize_t k, double v) noexcept nogil:
    # the first index of sorted a[:k] holding a value > v (k if none).
    # Without a branch on the comparison (it goes either way at random: a
    # mispredicted branch a step cost more than the window's shift)
    cdef const double *base = a
    cdef Py_ssize_t half
    if k == 0:
        return 0
    while k > 1:
        half = k >> 1
        base = base + half if base[half] <= v else base
        k -= half
    return (base - a) + (base[0] <= v)


cdef inline Py_ssize_t lower_bound(const double *a, Py_ssize_t k, double v) noexcept nogil:
    # the first index of sorted a[:k] holding a value >= v (k if none)
    cdef const double *base = a
    cdef Py_ssize_t half
    if k == 0:
        return 0
    while k > 1:
        half = k >> 1
        base = base + half if base[half] < v else base
        k -= half
    return (base - a) + (base[0] < v)


cdef inline void window_push(Conformal *c, double *ring, double *srt, Py_ssize_t cap,
                             double s) noexcept nogil:
    # s joins the window; once it holds cap scores, the oldest leaves
    cdef Py_ssize_t k = <Py_ssize_t> c.fill, head, j, p
    cdef double old
    if k < cap:
        p = upper_bound(srt, k, s)
        memmove(srt + p + 1, srt + p, (k - p) * sizeof(double))    # srt[p+1:k+1] = srt[p:k]
        srt[p] = s
        ring[k] = s
        c.fill = k + 1
        return
    head = <Py_ssize_t> c.head
    old = ring[head]
    ring[head] = s
    c.head = head + 1 if head + 1 < cap else 0
    j = lower_bound(srt, k, old)            # (any copy of old will do)
    if s >= old:
        # srt[j:p] = srt[j+1:p+1]; srt[p] = s (old at j leaves, s goes after
        # the values <= s)
        p = upper_bound(srt, k, s) - 1
        memmove(srt + j, srt + j + 1, (p - j) * sizeof(double))
    else:
        # srt[p+1:j+1] = srt[p:j]; srt[p] = s
        p = upper_bound(srt, j, s)
        memmove(srt + p + 1, srt + p, (j - p) * sizeof(double))
    srt[p] = s


cdef inline double aci_offset(double level, const double *srt, Py_ssize_t k) noexcept nogil:
    # the ceil((1 - a)(k + 1))-th smallest of the k window scores; +inf past
    # the largest (and with no score yet), -inf before the smallest
    cdef double v = (1.0 - level) * (k + 1)
    if v > k:
        return INFINITY
    if v <= 0.0:
        return -INFINITY
    return srt[<Py_ssize_t> ceil(v) - 1]


cdef inline double pid_offset(const Conformal *c, double ki, double csat) noexcept nogil:
    # p + r_t(E), r_t saturating to +-inf (t = c.n rows scored)
    cdef double arg, r = 0.0
    if ki > 0.0 and c.scale > 0.0 and c.n > 0.0:
        arg = c.integral * log(c.n + 1.0) / (csat * (c.n + 1.0))
        if arg >= 0.5 * M_PI:
            return INFINITY
        if arg <= -0.5 * M_PI:
            return -INFINITY
        r = ki * c.scale * tan(arg)
    return c.p_offset + r


cdef void conformal_rows(Conformal *c, const double *pred, const double *y, Py_ssize_t n,
                         int method, double alpha, double gamma, double lr, double ki,
                         double csat, Py_ssize_t window, double *ring,
                         double *srt) noexcept nogil:
    cdef Py_ssize_t i
    cdef double lo, hi, s, q, err, width
    for i in range(n):
        lo = pred[2 * i]
        hi = pred[2 * i + 1]
        if hi < lo:                 # (predict sorts the pair the same way)
            lo, hi = hi, lo
        s = max(lo - y[i], y[i] - hi)
        q = c.offset
        err = 1.0 if s > q else 0.0
        c.n += 1.0
        c.n_covered += 1.0 - err
        c.n_base += 1.0 if s <= 0.0 else 0.0
        c.base_width += hi - lo
        if q < INFINITY:
            width = hi - lo + 2.0 * q
            c.n_bounded += 1.0
            c.width_sum += width if width > 0.0 else 0.0
        if method == METHOD_ACI:
            c.level += gamma * (alpha - err)
            window_push(c, ring, srt, window, s)
            c.offset = aci_offset(c.level, srt, <Py_ssize_t> c.fill)
        else:
            # the scale first: a row's own |s| sizes its step (a jump in the
            # scores moves the offset at once)
            c.scale += (fabs(s) - c.scale) / min(c.n, <double> window)
            c.p_offset += lr * c.scale * (err - alpha)
            c.integral += err - alpha
            c.offset = pid_offset(c, ki, csat)


def conformal_pass(const double[:, ::1] pred, const double[::1] y, double[::1] state,
                   double[::1] ring, double[::1] srt, int method, double alpha, double gamma,
                   double lr, double ki, double csat):
    """Score rows (lo, hi) = ``pred`` against ``y`` and advance the
    calibration ``state`` (the float64 fields ``STATE_FIELDS``) row by row:
    coverage counts at each row's offset, then the method's update
    (METHOD_ACI or METHOD_PID, see the module comment). ``ring``/``srt``: the
    score window (its capacity is their length; ACI's scores in arrival
    order and sorted; PID uses only its length, as the scale's window).
    Mutates ``state``, ``ring`` and ``srt``; returns None."""
    cdef Py_ssize_t n = pred.shape[0], cap = ring.shape[0]
    if pred.shape[1] != 2 or y.shape[0] != n:
        raise ValueError(f"pred must have shape ({y.shape[0]}, 2), got ({pred.shape[0]}, "
                         f"{pred.shape[1]})")
    if state.shape[0] != len(STATE_FIELDS) or srt.shape[0] != cap or cap < 1:
        raise ValueError(f"state must hold {len(STATE_FIELDS)} values and ring and srt the "
                         f"same positive length, got {state.shape[0]}, {cap}, {srt.shape[0]}")
    cdef Conformal *c = <Conformal *> &state[0]
    if not (0.0 <= c.fill <= cap and 0.0 <= c.head < cap):
        raise ValueError(f"state's fill and head must lie in [0, {cap}], got {c.fill}, "
                         f"{c.head}")
    if n == 0:
        return
    with nogil:
        conformal_rows(c, &pred[0, 0], &y[0], n, method, alpha, gamma, lr, ki, csat, cap,
                       &ring[0], &srt[0])


def aci_quantile(double level, const double[::1] srt, Py_ssize_t k):
    """The ACI offset at ``level`` of the first ``k`` values of the sorted
    ``srt`` (the kernel's own helper, for tests)."""
    if not 0 <= k <= srt.shape[0]:
        raise ValueError(f"k must lie in [0, {srt.shape[0]}], got {k}")
    return aci_offset(level, &srt[0] if srt.shape[0] else NULL, k)
