"""The state an online linear estimator carries between calls, and how one
call advances it: rows waiting for a full batch, stored data with spare room,
and the kernel calls of each mode.

A call works on a :class:`Work` copy of the estimator's state: the small
arrays are copied, the stored data are shared and only written past the rows
already stored (the spare room is restored if the call fails). The estimator
publishes the copy when the call succeeds, or when a signal handler stopped
the kernel (the copy then holds the effect of a whole number of rows), with
one assignment (``est._fit_ = work``): no signal handler or thread can see a
half-published state.
"""
from __future__ import annotations

import numpy as np

from .._errors import ERR_INTERRUPTED, OK
from .._kernels import _quantile as _k
from .._validation import _check_real_array, check_matrix, check_vector

__all__ = ["Work", "Plan", "Outcome", "advance", "check_layout",
           "check_loaded", "track_inference", "track_plug_in"]

# The fields of a Work object (the whole learnt state).
FIELDS = ("w", "wbar", "state", "params", "window", "pending_X", "pending_y", "pending_w",
          "store_X", "store_y", "store_w", "store_n", "names", "rs", "scaler", "plug_in",
          "drift_rows")


def check_layout(state):
    """Refuse to learn on from a state record of another layout (an estimator
    pickled by a streamfit with another ``streamfit.kernels.API_VERSION``):
    the kernels would misread it. Its fitted attributes and ``predict`` still
    work."""
    if state.dtype is not _k.STATE_DTYPE and state.dtype != _k.STATE_DTYPE:
        raise ValueError(
            "this estimator's learnt state was saved by a streamfit whose kernel state "
            f"record has another layout ({len(state.dtype.names or ())} fields, this "
            f"version's has {len(_k.STATE_DTYPE.names)}): predict and the fitted "
            "attributes work, but it cannot learn further. Call fit() to start afresh; "
            "the estimator was left as it was")


def _loaded_array(name, a, shape, *, finite=True):
    # one array of an unpickled state: float64, of this shape, finite
    if not isinstance(a, np.ndarray) or a.dtype != np.float64 or a.shape != shape:
        raise ValueError(f"the loaded state's {name!r} must be a float64 array of shape "
                         f"{shape}, got {getattr(a, 'dtype', type(a).__name__)} of shape "
                         f"{getattr(a, 'shape', None)} (a corrupted or foreign pickle?)")
    if finite and not np.isfinite(a).all():
        raise ValueError(f"the loaded state's {name!r} holds NaN or inf (a corrupted or "
                         f"foreign pickle?)")


def check_loaded(work):
    """Check a learnt state as it is unpickled (:class:`Work` or
    ``MultiWork``): every array of the dtype and shape the kernels and the
    estimator expect of it, finite, and the records' values in the ranges the
    kernels rely on (``_quantile.check_records``). A ValueError names the
    field; nothing loaded is then used. Costs one pass over the state's
    arrays (a store of data included)."""
    w = work.w
    if not (isinstance(w, np.ndarray) and w.dtype == np.float64 and w.ndim in (1, 2)
            and w.shape[-1] >= 1 and w.size):
        raise ValueError(f"the loaded state's 'w' must be a non-empty float64 array of one "
                         f"(or, for several quantiles, two) dimensions, got "
                         f"{getattr(w, 'dtype', type(w).__name__)} of shape "
                         f"{getattr(w, 'shape', None)} (a corrupted or foreign pickle?)")
    lead, d = w.shape[:-1], w.shape[-1]
    _loaded_array("w", w, w.shape)
    _loaded_array("wbar", work.wbar, w.shape)
    for name, dtype in (("state", _k.STATE_DTYPE), ("params", _k.PARAMS_DTYPE)):
        rec = getattr(work, name)
        if not isinstance(rec, np.ndarray) or rec.shape != (lead or (1,)) or \
                rec.dtype.names is None:
            raise ValueError(f"the loaded state's {name!r} must be a record array of shape "
                             f"{lead or (1,)}, got {getattr(rec, 'dtype', type(rec).__name__)} "
                             f"of shape {getattr(rec, 'shape', None)} (a corrupted or foreign "
                             f"pickle?)")
    if work.params.dtype != _k.PARAMS_DTYPE:
        raise ValueError("the loaded state's 'params' record has another layout than this "
                         "streamfit's (a corrupted or foreign pickle?)")
    if work.state.dtype == _k.STATE_DTYPE:      # (another layout: predict only, check_layout)
        _k.check_records(np.ascontiguousarray(work.state), np.ascontiguousarray(work.params))
    window = work.window
    if not (isinstance(window, np.ndarray) and window.dtype == np.float64
            and window.ndim == len(lead) + 1 and window.shape[:-1] == lead):
        raise ValueError(f"the loaded state's 'window' must be a float64 array of shape "
                         f"{lead + ('capacity',)}, got {getattr(window, 'shape', None)} (a "
                         f"corrupted or foreign pickle?)")
    _loaded_array("pending_X", work.pending_X, (work.pending_X.shape[0] if isinstance(
        work.pending_X, np.ndarray) and work.pending_X.ndim == 2 else -1, d))
    k = work.pending_X.shape[0]
    if lead and k:
        raise ValueError("the loaded state's 'pending_X' must be empty for several quantiles")
    if not lead:
        _loaded_array("pending_y", work.pending_y, (k,))
        if work.pending_w is not None:
            _loaded_array("pending_w", work.pending_w, (k,))
        store_n = work.store_n
        cap = work.store_X.shape[0] if isinstance(work.store_X, np.ndarray) else -1
        _loaded_array("store_X", work.store_X, (cap, d))
        _loaded_array("store_y", work.store_y, (cap,))
        if work.store_w is not None:
            _loaded_array("store_w", work.store_w, (cap,))
        if isinstance(store_n, bool) or not isinstance(store_n, (int, np.integer)) or \
                not 0 <= store_n <= cap:
            raise ValueError(f"the loaded state's 'store_n' must be an integer in [0, {cap}] "
                             f"(the stored rows), got {store_n!r}")
        if work.scaler is not None:
            _loaded_array("scaler", work.scaler, (2 * d + 1,))
        _check_drift_rows(work)
    da = d + bool(work.params["fit_intercept"][0])
    if work.rs is not None:
        _loaded_array("rs", work.rs, lead + (_k.rs_length(da),))
    if work.plug_in is not None:
        _loaded_array("plug_in", work.plug_in, lead + (2 * d,))
    names = work.names
    if names is not None and not (isinstance(names, np.ndarray) and names.shape == (d,)
                                  and all(isinstance(v, str) for v in names)):
        raise ValueError(f"the loaded state's 'names' must be None or {d} feature names "
                         f"(str), got {names!r:.80}")
    work.plan = Plan(work.params)      # read off the records, not trusted from the file


def _check_drift_rows(work):
    # the drift test's alarm rows: one per alarm the state counts, increasing
    # row indices of the rows seen
    rows, st = work.drift_rows, work.state[0]
    n = int(st["n_drift"]) if "n_drift" in (st.dtype.names or ()) else 0
    _loaded_array("drift_rows", rows, (n,))
    if n and not (np.all(rows == np.floor(rows)) and rows[0] >= 0
                  and np.all(np.diff(rows) > 0) and rows[-1] < float(st["n_seen"])):
        raise ValueError("the loaded state's 'drift_rows' must be increasing row indices of "
                         "the rows seen (a corrupted or foreign pickle?)")


class Plan:
    """What a call needs to know of a parameter record, read once: reading a
    record's field costs ~0.3 us, a noticeable part of a one-row call."""

    __slots__ = ("mode", "kind", "stat", "average", "window_need", "plug_in", "drift",
                 "drift_arm")

    # (inference is an estimator parameter, not a kernel one: Work.rs says
    # whether the random-scaling sums are kept)

    def __init__(self, params):
        p = params[0]
        self.mode, self.kind = int(p["mode"]), int(p["kind"])
        self.stat = self.kind == _k.KIND_STATISTICAL
        self.average = bool(p["average"])
        # the residual window's capacity, before a block's room
        self.window_need = int(max(p["window"], p["n_warmup"], 1)) + 1 if self.stat else 0
        # the averaged intercept is the plug-in one (single mode, check loss,
        # an intercept; the kernels of the other modes keep the iterate's)
        self.plug_in = self.average and self.mode == _k.MODE_SINGLE and \
            bool(p["fit_intercept"]) and int(p["loss"]) == _k.LOSS_CHECK
        # the drift test (single mode): an alarm needs drift_arm rows after
        # the one before, which bounds the alarms of a call
        self.drift = bool(p["drift"])
        self.drift_arm = float(p["drift_arm"])


def track_inference(work, on):
    """Keep the random-scaling sums (one set per quantile: the leading axes of
    ``work.w``) from the averages' next (re)start on (``on``), or drop them,
    the plug-in intercepts' running means moving out of their tails."""
    d = work.w.shape[-1]
    da = d + bool(work.params["fit_intercept"][0])
    if not on:
        if work.rs is not None and work.plug_in is None and work.state["n_avg"].any():
            core = _k.rs_length(da) - 2 * da
            work.plug_in = work.rs[..., core:core + 2 * d].copy()
        work.rs = None
    elif work.rs is None:
        work.rs = np.zeros(work.w.shape[:-1] + (_k.rs_length(da),))
        work.state["n_avg"] = 0.0       # the averages restart with the sums
        work.plug_in = None             # (which keep the plug-in's means)


def track_plug_in(work):
    """Keep the plug-in intercepts' running means (2 d a quantile) where they
    apply (``Plan.plug_in``, no scaler; inference keeps them in its sums),
    from a start before any average: means started mid-average would begin
    from zeros."""
    if not work.plan.plug_in or work.rs is not None or getattr(work, "scaler", None) is not None:
        work.plug_in = None
    elif work.plug_in is None and not work.state["n_avg"].any():
        work.plug_in = np.zeros(work.w.shape[:-1] + (2 * work.w.shape[-1],))


class Work:
    """The whole learnt state of one estimator: the iterate and its average,
    the kernel's state and parameter records, the residual window, rows
    waiting for a batch, stored data (with spare room: ``store_n`` rows are
    used) and the feature names (or None); ``plan`` is read off ``params``;
    ``rs`` the random-scaling sums of the average (None: not kept);
    ``plug_in`` the plug-in intercept's running means (None: not kept, or
    kept in the tail of ``rs``); ``drift_rows`` the rows where the drift
    test's alarms restarted the average (float64 row indices, one per alarm
    the state counts; replaced, never written, by a call)."""

    __slots__ = FIELDS + ("plan",)

    def __setstate__(self, state):
        # pickles from before the random-scaling sums (or the scaler, or the
        # plug-in intercept, or the drift test) existed
        self.rs = self.scaler = self.plug_in = None
        self.drift_rows = _NO_ROWS
        items = state[1] if isinstance(state, tuple) else state
        missing = set(FIELDS) - set(items) - {"rs", "scaler", "plug_in", "drift_rows"}
        if missing or not set(items) <= set(FIELDS) | {"plan"}:
            raise ValueError(f"the loaded state has fields {sorted(items)}, expected "
                             f"{sorted(FIELDS)} (a corrupted or foreign pickle?)")
        for key, value in items.items():
            setattr(self, key, value)
        check_loaded(self)

    @classmethod
    def fresh(cls, d, params, plan, coef_init=None, intercept_init=0.0):
        work = cls()
        work.plan = plan
        work.w = np.zeros(d) if coef_init is None else coef_init.copy()
        work.wbar = work.w.copy()
        work.state = _k.new_state()
        work.state["intercept"] = intercept_init
        work.state["intercept_avg"] = intercept_init
        work.params = params
        work.window = np.zeros(0)
        work.pending_X, work.pending_y, work.pending_w = np.zeros((0, d)), np.zeros(0), None
        work.store_X, work.store_y, work.store_w, work.store_n = np.zeros((0, d)), np.zeros(0), \
            None, 0
        work.names = None
        work.rs = None
        work.scaler = None
        work.plug_in = None
        work.drift_rows = _NO_ROWS
        return work

    track_inference = track_inference      # (shared with MultiWork / Work)
    track_plug_in = track_plug_in

    def copy(self, spare=None):
        """A working copy: copies of what the kernels write (the average and
        the residual window only when they run), so that the published state
        (or read-only loaded arrays) never changes under a call; the rest is
        shared and replaced, not written. ``spare``: a writable state record
        to copy the state into (allocating one costs microseconds)."""
        check_layout(self.state)
        work = Work()
        plan = work.plan = self.plan
        if spare is None:
            spare = _k.new_state()
        _k.copy_record(self.state, spare)
        work.w, work.state, work.params = self.w.copy(), spare, self.params
        # (the kernels take them as writable buffers even when they will not
        # write them: read-only ones, e.g. loaded with mmap_mode="r", are copied)
        work.wbar = self.wbar.copy() if plan.average or not self.wbar.flags.writeable \
            else self.wbar
        work.window = self.window.copy() if plan.stat or not self.window.flags.writeable \
            else self.window
        work.pending_X, work.pending_y, work.pending_w = self.pending_X, self.pending_y, \
            self.pending_w
        work.store_X, work.store_y, work.store_w, work.store_n = self.store_X, self.store_y, \
            self.store_w, self.store_n
        work.names = self.names
        work.rs = None if self.rs is None else self.rs.copy()
        work.scaler = None if self.scaler is None else self.scaler.copy()
        work.plug_in = None if self.plug_in is None else self.plug_in.copy()
        work.drift_rows = self.drift_rows
        return work

    def follow(self, params, plan):
        """New parameters mid-stream: the average and window may run now."""
        if plan.average and self.wbar is not None:
            self.wbar = self.wbar.copy()
        self.window = self.window.copy()
        self.params, self.plan = params, plan

    def grow_window(self, size):
        if self.window.shape[0] < size:
            grown = np.zeros(size)
            grown[:self.window.shape[0]] = self.window
            self.window = grown


class Outcome:
    """What one advance did: ``consumed`` rows of the call's X are in the
    state; ``code`` and ``exc`` come from the kernel; ``bad`` describes the
    row a kernel refused: (index in the call's X, or None for a row held from
    an earlier call; x; y; weight)."""

    __slots__ = ("consumed", "code", "exc", "bad")

    def __init__(self, consumed=0, code=OK, exc=None, bad=None):
        self.consumed, self.code, self.exc, self.bad = consumed, code, exc, bad


def _bad_row(row, X, y, sw, first):
    # the kernel's row `row` of (X, y, sw), whose first row is row `first` of the call
    if row < 0:
        return None
    i = row + first
    # (float64, as the kernel saw it: a float32 row's ||x||^2 is then judged
    # in float64, where the kernel found it finite or not)
    return (i if i >= 0 else None, np.array(X[row], dtype=np.float64), float(y[row]),
            1.0 if sw is None else float(sw[row]))


def _window_size(params, block, state):
    # the residual window (or what it already holds, if the window was made
    # smaller mid-stream) plus room for one block
    p = params[0]
    return int(max(p["window"], p["n_warmup"], state["fill"][0], 1)) + block + 1


def _join_weights(parts):
    """Concatenate the weights of (row count, weights or None) parts; None if
    every part is unweighted."""
    if all(w is None for _, w in parts):
        return None
    return np.concatenate([np.ones(n) if w is None else w for n, w in parts])


def _empty():
    return np.zeros(0)


_NO_ROWS = np.zeros(0)      # no alarm of the drift test (never written: replaced)
_NO_ROWS.flags.writeable = False
_STEPPED = object()         # a storage step taken, then interrupted
_EMPTY = _empty()           # never written: kernels take empty arrays as "none"
_EMPTY.flags.writeable = False


def _rows(a, start, stop):
    return None if a is None else a[start:stop]


def advance(work, X, y, sw, schedule, block=None):
    """Run the kernels of ``work.params``'s mode over (X, y, sw); ``block`` is
    batch mode's rows per update (None: the whole call, pending rows included).
    ``schedule`` gives user stepsizes (``stepsizes(start, count)``) when the
    kind is an array. Mutates ``work``; returns an Outcome."""
    mode = work.plan.mode
    if mode == _k.MODE_SINGLE:
        return _advance_single(work, X, y, sw, schedule)
    if mode == _k.MODE_BATCH:
        return _advance_batch(work, X, y, sw, schedule, block)
    return _advance_storage(work, X, y, sw, schedule)


def user_stepsizes(schedule, start, count):
    """The user schedule's stepsizes for updates start..start+count-1, checked:
    real numbers (no complex or strings), finite, positive, ``count`` of them."""
    name = f"schedule.stepsizes({start}, {count})"
    etas = np.ascontiguousarray(_check_real_array(schedule.stepsizes(start, count), name),
                                dtype=np.float64)
    if etas.shape != (count,) or not (np.isfinite(etas).all() and (etas > 0).all()):
        raise ValueError(f"{name} must return {count} finite, positive stepsizes, got "
                         f"shape {etas.shape}: {etas.ravel()[:4]!r}")
    return etas


def _user_etas(work, schedule, count):
    if work.plan.kind != _k.KIND_ARRAY or count == 0:
        return _EMPTY
    return user_stepsizes(schedule, int(work.state["n_updates"][0]), count)


def _advance_single(work, X, y, sw, schedule):
    etas = _EMPTY
    if work.plan.kind == _k.KIND_ARRAY:
        etas = _user_etas(work, schedule, X.shape[0] if sw is None else int(np.count_nonzero(sw)))
    if work.window.shape[0] < work.plan.window_need:
        # (the window never shrinks: it still holds whatever an earlier, larger
        # window left in it)
        work.grow_window(_window_size(work.params, 0, work.state))
    work.track_plug_in()
    alarms = None
    if work.plan.drift:
        # room for every alarm the call can raise: the test restarts at an
        # alarm and runs again only after drift_arm rows (of weight >= 1 each
        # unless weighted)
        per = max(work.plan.drift_arm, 1.0) if sw is None else \
            max(work.plan.drift_arm / max(float(sw.max(initial=0.0)), 1e-300), 1.0)
        alarms = np.zeros(int(min(X.shape[0], X.shape[0] / per + 2)))
        before = int(work.state["n_drift"][0])
    code, done, exc, row = _k.sgd_single(X, y, _EMPTY if sw is None else sw, work.w,
                                         work.wbar, work.state, work.params, work.window, etas,
                                         work.rs, work.scaler, work.plug_in, alarms)
    if alarms is not None and int(work.state["n_drift"][0]) > before:
        work.drift_rows = np.concatenate(
            [work.drift_rows, alarms[:int(work.state["n_drift"][0]) - before]])
    if code == OK:
        return Outcome(done)
    return Outcome(done, code, exc, _bad_row(row, X, y, sw, 0))


def _block_updates(w_part, block):
    # blocks of positive total weight: the ones that update
    nb = w_part.shape[0] // block if w_part is not None else 0
    return int(np.count_nonzero(w_part.reshape(nb, block).sum(axis=1) > 0))


def _advance_batch(work, X, y, sw, schedule, block):
    n = X.shape[0]
    k = work.pending_X.shape[0]
    if block is None:
        block = k + n
    if block == 0:
        return Outcome()
    # The virtual stream is the pending rows, then X. The head completes the
    # pending rows' last block with X's first h rows (a batch_size lowered
    # while rows wait gives several blocks); the rest of X goes down as it is
    # (no copy); what is short of a block waits for the next call.
    parts = []                  # (X, y, w, index in the call's X of the part's first row)
    h, rest = 0, None           # rest: the head's rows short of a block (X exhausted)
    if k:
        h = min(n, -(-k // block) * block - k)
        head_X = np.concatenate([work.pending_X, X[:h]])
        head_y = np.concatenate([work.pending_y, y[:h]])
        head_w = _join_weights([(k, work.pending_w), (h, _rows(sw, 0, h))])
        nh = head_X.shape[0] // block * block
        if nh:
            parts.append((head_X[:nh], head_y[:nh], _rows(head_w, 0, nh), -k))
        if nh < head_X.shape[0]:
            rest = (head_X[nh:], head_y[nh:], _rows(head_w, nh, None))
    n_full = (n - h) // block * block
    if n_full:
        parts.append((X[h:h + n_full], y[h:h + n_full], _rows(sw, h, h + n_full), h))
    # X rows that only wait are not seen by a kernel in this call: check them now
    first_waiting = 0 if rest is not None else h + n_full
    if first_waiting < n:
        check_matrix(X[first_waiting:], "X")
        check_vector(y[first_waiting:], n - first_waiting, "y")
    updates = sum(p[0].shape[0] // block if p[2] is None else _block_updates(p[2], block)
                  for p in parts)
    etas = _user_etas(work, schedule, updates)
    if parts:
        work.grow_window(_window_size(work.params, block, work.state))
    processed = 0               # rows of the virtual stream applied
    for X_part, y_part, w_part, first in parts:
        code, done, exc, row = _k.sgd_blocks(X_part, y_part,
                                             _EMPTY if w_part is None else w_part, block,
                                             work.w, work.wbar, work.state, work.params,
                                             work.window, etas, work.rs)
        processed += done
        if code != OK:
            if code == ERR_INTERRUPTED:
                _keep_unprocessed(work, processed, k)
            return Outcome(max(0, processed - k), code, exc,
                           _bad_row(row, X_part, y_part, w_part, first))
        etas = etas[done // block if w_part is None else _block_updates(w_part, block):]
    if rest is not None:
        work.pending_X, work.pending_y, work.pending_w = rest
    else:
        start = h + n_full
        work.pending_X, work.pending_y = X[start:].copy(), y[start:].copy()
        work.pending_w = None if sw is None else sw[start:].copy()
    return Outcome(n, OK)


def _keep_unprocessed(work, processed, k):
    # An interrupt after `processed` rows of the virtual stream: pending rows
    # not yet applied still wait; X rows not applied are not taken.
    if processed < k:
        work.pending_X = work.pending_X[processed:].copy()
        work.pending_y = work.pending_y[processed:].copy()
        work.pending_w = _rows(work.pending_w, processed, None)
    else:
        d = work.pending_X.shape[1]
        work.pending_X, work.pending_y, work.pending_w = np.zeros((0, d)), np.zeros(0), None


def _writable_store(work, n_old, n, weighted):
    # Room for n more rows, in arrays this call may write (a read-only store,
    # e.g. loaded with mmap_mode="r", is copied); spare room stays zero.
    d = work.store_X.shape[1]
    cap = work.store_X.shape[0]
    if n_old + n > cap or not (work.store_X.flags.writeable and work.store_y.flags.writeable):
        cap = max(2 * cap, n_old + n, 64) if n_old + n > cap else cap
        grown_X, grown_y = np.zeros((cap, d)), np.zeros(cap)
        grown_X[:n_old], grown_y[:n_old] = work.store_X[:n_old], work.store_y[:n_old]
        work.store_X, work.store_y = grown_X, grown_y
    if weighted or work.store_w is not None:
        if work.store_w is None or work.store_w.shape[0] != cap or \
                not work.store_w.flags.writeable:
            grown_w = np.zeros(cap)
            grown_w[:n_old] = 1.0 if work.store_w is None else work.store_w[:n_old]
            work.store_w = grown_w


def _advance_storage(work, X, y, sw, schedule):
    # All data so far, in arrays with spare capacity (amortised appends). Rows
    # are checked before they are written; they go into the spare room only
    # (rows already stored are never written), and the spare room is restored
    # if the step fails or is interrupted.
    n = X.shape[0]
    if n == 0:
        return Outcome()
    check_matrix(X, "X")
    check_vector(y, n, "y")
    n_old = int(work.store_n)
    stored = n_old + n
    _writable_store(work, n_old, n, sw is not None)
    work.store_X[n_old:stored] = X
    work.store_y[n_old:stored] = y
    if work.store_w is not None:
        work.store_w[n_old:stored] = 1.0 if sw is None else sw
    if sw is not None and not sw.any():
        # new rows of weight 0 teach nothing: no step, as if they were absent
        work.state["n_seen"] += n
        work.store_n = stored
        return Outcome(n, OK)
    code = None
    try:
        eta = 0.0
        if work.plan.kind == _k.KIND_ARRAY:
            eta = float(user_stepsizes(schedule, int(work.state["n_updates"][0]), 1)[0])
        work.grow_window(_window_size(work.params, int(work.params["window"][0]), work.state))
        code, done, exc, row = _k.sgd_storage(
            work.store_X[:stored], work.store_y[:stored],
            _EMPTY if work.store_w is None else work.store_w[:stored], n_old, work.w,
            work.wbar, work.state, work.params, work.window, eta)
        bad = _bad_row(row, work.store_X[:stored], work.store_y[:stored],
                       None if work.store_w is None else work.store_w[:stored], -n_old)
        if code == ERR_INTERRUPTED and done:
            code = _STEPPED             # interrupted after the step: the rows are in
    finally:
        if code != OK and code != _STEPPED:
            # leave the spare room as it was (zeros), whatever went wrong
            work.store_X[n_old:stored] = 0.0
            work.store_y[n_old:stored] = 0.0
            if work.store_w is not None:
                work.store_w[n_old:stored] = 0.0
    if code == _STEPPED:
        work.store_n = stored
        return Outcome(n, ERR_INTERRUPTED, exc)
    if code != OK:
        return Outcome(0, code, exc, bad)
    work.store_n = stored
    return Outcome(n, OK)
