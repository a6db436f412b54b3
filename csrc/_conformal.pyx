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
import math
import numbers

import numpy as np

from libc.math cimport fabs, ceil, log, tan, isnan, INFINITY, NAN, M_PI
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memmove, memset

from _owner cimport CallLock, lock_init, lock_free, lock_enter, lock_leave, sf_owner_init

sf_owner_init()

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


def aci_quantile(double level, const double[::1] srt, Py_ssize_t k):
    """The ACI offset at ``level`` of the first ``k`` values of the sorted
    ``srt`` (the kernel's own helper, for tests)."""
    if not 0 <= k <= srt.shape[0]:
        raise ValueError(f"k must lie in [0, {srt.shape[0]}], got {k}")
    return aci_offset(level, &srt[0] if srt.shape[0] else NULL, k)


_METHODS = {"aci": METHOD_ACI, "pid": METHOD_PID}
NC = sizeof(Conformal) // sizeof(double)
# PID's saturation constant: the integrator's tangent reaches pi / 2 (an
# unbounded interval) once the miscoverage since the start exceeds alpha by
# (pi / 2) CSAT / log(t + 1) = 1 / log(t + 1): 14% after 10^3 rows, 11% after
# 10^4, 7% after 10^6; below that it adds about ki scale (miscoverage gap)
# log(t) / CSAT to the offset.
CSAT = 2.0 / math.pi
cdef double C_CSAT = 2.0 / M_PI
# rows a block call hands the calibration at a time (the predictions'
# buffer: 16 bytes a row)
_CHUNK = 1 << 16
FORMAT = 1


def check_interval_settings(alpha, method, gamma, lr, ki, window):
    """The calibration's settings, checked (errors name the parameter)."""
    from streamfit._validation import check_memory, check_scalar
    check_scalar(alpha, "alpha", low=0, high=1, low_open=True, high_open=True)
    if not isinstance(method, str) or method not in _METHODS:
        raise ValueError(f"method must be one of {tuple(_METHODS)}, got {method!r}")
    check_scalar(gamma, "gamma", low=0, low_open=True)
    check_scalar(lr, "lr", low=0, low_open=True)
    check_scalar(ki, "ki", low=0)
    check_scalar(window, "window", kind=numbers.Integral, low=1)
    check_memory(16 * float(window), "window", window, "a window of scores")
    return {"alpha": float(alpha), "method": method, "gamma": float(gamma), "lr": float(lr),
            "ki": float(ki), "window": int(window)}


cdef class IntervalState:
    """The state of an online prediction interval: a pair of online
    quantiles (a :class:`~streamfit.kernels.LinearSGD` at tau = alpha / 2
    and 1 - alpha / 2) and its conformal calibration (ACI or PID), learnt
    together row by row: what :class:`~streamfit.OnlineIntervalRegressor`
    drives. Each row is scored against the interval held before it, then
    the quantiles and the offset take its update.

    One call at a time (a second thread waits); a block call keeps the
    whole rows before a signal that interrupts it, any other failure
    leaves the state as it was.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfit.kernels import IntervalState
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((5000, 2))
    >>> y = X @ [1.0, -1.0] + rng.standard_normal(5000)
    >>> band = IntervalState(2, alpha=0.2)
    >>> band.learn(X[:4000], y[:4000])
    4000
    >>> for i in range(4000, 5000):
    ...     band.learn_one(X[i], y[i])
    >>> bool(abs(band.coverage - 0.8) < 0.03), band.predict_interval(X[:1]).shape
    (True, (1, 2))
    """

    cdef CallLock _lock
    cdef Conformal c
    cdef double *ring
    cdef double *srt
    cdef readonly Py_ssize_t window
    cdef int method
    cdef double alpha, gamma, lr, ki
    cdef object q                   # the quantile pair (a LinearSGD)
    cdef object _settings
    cdef public object feature_names
    cdef public object source

    def __cinit__(self, *args, **kwargs):
        lock_init(&self._lock)
        self.ring = NULL
        self.srt = NULL

    def __dealloc__(self):
        free(self.ring)
        free(self.srt)
        lock_free(&self._lock)

    def __init__(self, n_features, *, alpha=0.1, method="aci", gamma=0.005, lr=0.1, ki=1.0,
                 window=1000, schedule="statistical", fit_intercept=True):
        from streamfit._kernels._quantile import LinearSGD
        if self.ring != NULL:
            raise RuntimeError("IntervalState is initialised once")
        settings = check_interval_settings(alpha, method, gamma, lr, ki, window)
        q = LinearSGD(n_features, tau=[settings["alpha"] / 2, 1 - settings["alpha"] / 2],
                      schedule=schedule, fit_intercept=fit_intercept)
        self._start(settings, q)

    cdef int _start(self, dict settings, object q) except -1:
        self.window = settings["window"]
        self.ring = <double *> malloc(self.window * sizeof(double))
        self.srt = <double *> malloc(self.window * sizeof(double))
        if self.ring == NULL or self.srt == NULL:
            raise MemoryError(f"IntervalState: could not allocate a window of {self.window} "
                              "scores")
        memset(self.ring, 0, self.window * sizeof(double))
        memset(self.srt, 0, self.window * sizeof(double))
        memset(&self.c, 0, sizeof(Conformal))
        self._set(settings)
        self.c.offset = 0.0 if self.method == METHOD_PID else INFINITY
        self.c.level = self.alpha if self.method == METHOD_ACI else NAN
        self.q = q
        self.feature_names = None
        self.source = None
        return 0

    cdef void _set(self, dict settings):
        self._settings = settings
        self.method = _METHODS[settings["method"]]
        self.alpha = settings["alpha"]
        self.gamma = settings["gamma"]
        self.lr = settings["lr"]
        self.ki = settings["ki"]

    @property
    def n_features(self):
        """Features of a row."""
        return self.q.n_features

    @property
    def settings(self):
        """The checked settings (a dict; a copy), the quantiles' included."""
        out = dict(self._settings)
        qs = self.q.settings
        out["schedule"] = qs["schedule"]
        out["fit_intercept"] = qs["fit_intercept"]
        return out

    def configure(self, **changes):
        """Change settings mid-stream: ``gamma``, ``lr``, ``ki`` and
        ``schedule`` take effect at the next call; ``alpha``, ``method``,
        ``window`` and ``fit_intercept`` cannot change (ValueError naming
        the setting). Returns whether anything changed."""
        lock_enter(&self._lock, "IntervalState")
        try:
            old = self.settings
            unknown = set(changes) - set(old)
            if unknown:
                raise TypeError(f"configure: unknown settings {sorted(unknown)}")
            merged = dict(old)
            merged.update(changes)
            new = check_interval_settings(merged["alpha"], merged["method"], merged["gamma"],
                                          merged["lr"], merged["ki"], merged["window"])
            for name in ("alpha", "window", "method"):
                if new[name] != old[name]:
                    raise ValueError(f"{name} changed from {old[name]!r} to {new[name]!r} "
                                     f"since the first call; the learnt state belongs to "
                                     f"{name}={old[name]!r}. Set it back, or call fit() to "
                                     "start afresh")
            if bool(merged["fit_intercept"]) != old["fit_intercept"] or \
                    not isinstance(merged["fit_intercept"], (bool, np.bool_)):
                if not isinstance(merged["fit_intercept"], (bool, np.bool_)):
                    raise TypeError(f"fit_intercept must be True or False, got "
                                    f"{merged['fit_intercept']!r}")
                raise ValueError(f"fit_intercept changed from {old['fit_intercept']!r} to "
                                 f"{merged['fit_intercept']!r} since the first call; the "
                                 "learnt state belongs to the old value. Set it back, or call "
                                 "fit() to start afresh")
            changed = self.q.configure(schedule=merged["schedule"])
            changed = changed or new != self._settings
            self._set(new)
            return changed
        finally:
            lock_leave(&self._lock)

    # -- learning -------------------------------------------------------------------
    def learn(self, X, y):
        """Learn from a block: ``X`` C-contiguous float64 (n, n_features)
        (float32 read as it is), ``y`` float64 (n,). Returns n.

        Examples
        --------
        >>> import numpy as np
        >>> from streamfit.kernels import IntervalState
        >>> IntervalState(1).learn(np.ones((3, 1)), np.ones(3))
        3
        """
        cdef Py_ssize_t n, start
        cdef Conformal saved
        lock_enter(&self._lock, "IntervalState")
        try:
            n = X.shape[0] if hasattr(X, "shape") and len(X.shape) == 2 else -1
            if n <= _CHUNK:
                return self._learn_chunk(X, y, 0)
            # several chunks commit together: a failure in a later one
            # restores the state of the call's start
            q0 = self.q.copy()
            saved = self.c
            ring0 = np.asarray(<double[:self.window]> self.ring).copy()
            srt0 = np.asarray(<double[:self.window]> self.srt).copy()
            try:
                for start in range(0, n, _CHUNK):
                    self._learn_chunk(X[start:start + _CHUNK], y[start:start + _CHUNK], start)
            except Exception:
                self.q = q0
                self.c = saved
                _copy_back(self.ring, ring0, self.window)
                _copy_back(self.srt, srt0, self.window)
                raise
            return n
        finally:
            lock_leave(&self._lock)

    cdef object _learn_chunk(self, object X, object y, Py_ssize_t first):
        cdef Py_ssize_t n, done
        q = self.q
        if type(X) is not np.ndarray or X.ndim != 2:
            raise TypeError(f"X must be a C-contiguous float64 ndarray of shape (n, "
                            f"{q.n_features})")
        n = X.shape[0]
        preds = np.empty((n, 2))
        before = q.n_samples_seen
        try:
            q.learn(X, y, None, preds)
        except BaseException:
            # an interrupt keeps the rows before it: calibrate on them too
            done = q.n_samples_seen - before
            if done > 0:
                self._calibrate(preds, y, done)
            raise
        if n:
            self._calibrate(preds, y, n)
        return n

    cdef int _calibrate(self, object preds, object y, Py_ssize_t n) except -1:
        cdef double[:, ::1] pv = preds
        cdef const double[::1] yv = y
        with nogil:
            conformal_rows(&self.c, &pv[0, 0], &yv[0], n, self.method, self.alpha, self.gamma,
                           self.lr, self.ki, C_CSAT, self.window, self.ring, self.srt)
        return 0

    def learn_one(self, x, y):
        """Learn from one row ``x`` (a 1-D array or sequence of n_features
        numbers) with target ``y``: scored against the interval held before
        it, then learnt from."""
        cdef double pair[2]
        cdef double yv
        lock_enter(&self._lock, "IntervalState")
        try:
            q = self.q
            before = q.predict_one(x)      # (sorted: lo, hi) under the iterates
            q.learn_one(x, y)
            pair[0] = before[0]
            pair[1] = before[1]
            yv = y
            conformal_rows(&self.c, pair, &yv, 1, self.method, self.alpha, self.gamma, self.lr,
                           self.ki, C_CSAT, self.window, self.ring, self.srt)
        finally:
            lock_leave(&self._lock)

    # -- predictions --------------------------------------------------------------
    def predict_interval(self, X):
        """The calibrated intervals [lo - q, hi + q] of the rows of ``X``
        (C-contiguous float64): an empty interval (q < -(hi - lo) / 2) is
        given as the midpoint twice; q = +inf gives (-inf, inf)."""
        lock_enter(&self._lock, "IntervalState")
        try:
            pair = self.q.predict(X)
            q = self.c.offset
        finally:
            lock_leave(&self._lock)
        lo, hi = pair[:, 0], pair[:, 1]
        mid = 0.5 * (lo + hi)
        with np.errstate(invalid="ignore"):
            lower, upper = np.minimum(lo - q, mid), np.maximum(hi + q, mid)
        return np.column_stack([lower, upper])

    def predict(self, X):
        """The midpoint of the quantile pair for the rows of ``X``."""
        pair = self.q.predict(X)
        return 0.5 * (pair[:, 0] + pair[:, 1])

    def predict_one(self, x):
        """The midpoint of the quantile pair for one row."""
        pair = self.q.predict_one(x)
        return 0.5 * (pair[0] + pair[1])

    # -- read-only state ----------------------------------------------------------
    @property
    def calibration(self):
        """The calibration record as a dict of floats (a copy)."""
        lock_enter(&self._lock, "IntervalState")
        try:
            raw = np.asarray(<double[:NC]> &self.c.n).copy()
        finally:
            lock_leave(&self._lock)
        return dict(zip(STATE_FIELDS, raw.tolist()))

    @property
    def coverage(self):
        """Prequential coverage of the calibrated intervals."""
        c = self.calibration
        return c["n_covered"] / c["n"] if c["n"] else math.nan

    @property
    def quantiles(self):
        """The quantile pair (a copy of the LinearSGD)."""
        return self.q.copy()

    @property
    def n_samples_seen(self):
        """Rows learnt from."""
        return self.q.n_samples_seen

    @property
    def coef(self):
        """The quantile pair's coefficients (2, n_features): iterates."""
        return self.q.iterate[0]

    @property
    def intercept(self):
        """The quantile pair's intercepts (2,)."""
        return self.q.iterate[1]

    @property
    def warm_up_rows(self):
        return self.q.warm_up_rows

    @property
    def n_updates(self):
        return self.q.n_updates

    # -- copies and pickling ----------------------------------------------------
    def copy(self):
        """An independent copy."""
        new = IntervalState.from_state(self._state(False), False)
        new.feature_names = self.feature_names
        new.source = self.source
        return new

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        return (_rebuild_interval, (self._state(False),))

    def to_state(self):
        """The whole state as plain data (see ``LinearSGD.to_state``)."""
        return self._state(True)

    cdef dict _state(self, bint plain):
        lock_enter(&self._lock, "IntervalState")
        try:
            names = self.feature_names
            return {"format": FORMAT, "settings": dict(self._settings),
                    "calibration": np.asarray(<double[:NC]> &self.c.n).copy(),
                    "ring": np.asarray(<double[:self.window]> self.ring).copy(),
                    "sorted": np.asarray(<double[:self.window]> self.srt).copy(),
                    "quantiles": self.q.to_state() if plain else self.q.__reduce__()[1][0],
                    "feature_names": None if names is None else [str(v) for v in names]}
        finally:
            lock_leave(&self._lock)

    @staticmethod
    def from_state(state, plain=True):
        """Rebuild from ``to_state()``'s dict, every field checked
        (ValueError naming it)."""
        from streamfit._kernels._quantile import LinearSGD, _from_state
        keys = {"format", "settings", "calibration", "ring", "sorted", "quantiles",
                "feature_names"}
        if not isinstance(state, dict) or set(state) != keys:
            raise ValueError(f"an IntervalState state must be a dict with the keys "
                             f"{sorted(keys)} (a corrupted or foreign state?)")
        if type(state["format"]) is not int or state["format"] != FORMAT:
            raise ValueError(f"this IntervalState state has format {state['format']!r:.40}; "
                             f"this streamfit reads format {FORMAT}")
        s = state["settings"]
        if not isinstance(s, dict) or set(s) != {"alpha", "method", "gamma", "lr", "ki",
                                                 "window"}:
            raise ValueError("state field 'settings' must hold alpha, method, gamma, lr, ki "
                             "and window (a corrupted or foreign state?)")
        try:
            settings = check_interval_settings(s["alpha"], s["method"], s["gamma"], s["lr"],
                                               s["ki"], s["window"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"state field 'settings': {exc}") from None
        q = _from_state(state["quantiles"], plain)
        qs = q.settings
        if not (isinstance(qs["tau"], tuple) and len(qs["tau"]) == 2 and
                qs["tau"] == (settings["alpha"] / 2, 1 - settings["alpha"] / 2) and
                qs["mode"] == "single" and not qs["average"] and qs["loss"] == "check" and
                qs["noncrossing"] == "rearrange" and qs["drift"] is None and
                qs["scale"] is None and not qs["inference"]):
            raise ValueError("state field 'quantiles' is not the pair at alpha / 2 and "
                             "1 - alpha / 2 (a corrupted or foreign state?)")
        w = settings["window"]
        cal, ring, srt = state["calibration"], state["ring"], state["sorted"]
        for name, a, shape in (("calibration", cal, (NC,)), ("ring", ring, (w,)),
                               ("sorted", srt, (w,))):
            if not (isinstance(a, np.ndarray) and a.dtype == np.float64 and a.shape == shape):
                raise ValueError(f"state field {name!r} must be a float64 array of shape "
                                 f"{shape} (a corrupted or foreign state?)")
        rec = dict(zip(STATE_FIELDS, cal.tolist()))
        counts = [rec[k] for k in ("n", "n_covered", "n_base", "n_bounded")]
        fill, head = rec["fill"], rec["head"]
        # values the recurrence would take silently and turn into a wrong
        # coverage or offset
        # (float.is_integer: False for inf and NaN, where int() would raise
        # OverflowError on an infinite n)
        if not (all(0 <= c <= counts[0] and c.is_integer() for c in counts)
                and 0 <= fill <= w and fill.is_integer()
                and 0 <= head < w and head.is_integer()):
            raise ValueError("state field 'calibration': the counts (n, n_covered, n_base, "
                             "n_bounded) must be whole numbers with none above n, and fill "
                             "and head whole positions in the window (a corrupted or foreign "
                             "state?)")
        if not all(math.isfinite(rec[k]) for k in ("width_sum", "base_width", "p_offset",
                                                   "integral", "scale")) or \
                math.isnan(rec["offset"]) or (settings["method"] == "aci") == \
                math.isnan(rec["level"]):
            raise ValueError("state field 'calibration': its sums must be finite, the offset "
                             "a number (possibly infinite), the level a number for ACI and "
                             "NaN for PID (a corrupted or foreign state?)")
        kept = srt[:int(fill)]
        if not (np.isfinite(ring[:int(fill)]).all() and np.isfinite(kept).all()
                and np.all(np.diff(kept) >= 0)):
            raise ValueError("state field 'sorted': the score window is not finite and "
                             "sorted (a corrupted or foreign state?)")
        names = state["feature_names"]
        if names is not None and not (isinstance(names, list) and len(names) == q.n_features
                                      and all(isinstance(v, str) for v in names)):
            raise ValueError("state field 'feature_names' must be None or a list of "
                             f"{q.n_features} strings")
        cdef IntervalState new = IntervalState.__new__(IntervalState)
        new._start(settings, q)
        _copy_back(&new.c.n, cal, NC)
        _copy_back(new.ring, ring, w)
        _copy_back(new.srt, srt, w)
        new.feature_names = None if names is None else np.asarray(names, dtype=object)
        return new


cdef void _copy_back(double *dst, object src, Py_ssize_t n):
    cdef const double[::1] v = np.ascontiguousarray(src, dtype=np.float64)
    memcpy(dst, &v[0], n * sizeof(double))


def _rebuild_interval(state):
    return IntervalState.from_state(state, False)
