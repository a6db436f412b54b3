"""What the quantile test modules share: tolerances, a duck-typed user
schedule, feeding a stream in chunks, comparing two fits, reading a learnt
state's records and stopping a kernel at an exact row.

Imported relatively (``from ._cases import ...``): pytest's importlib mode
(pyproject.toml) puts no test folder on sys.path."""
import contextlib
import io
import pickle
import signal
from types import SimpleNamespace

import numpy as np
import pytest

from streamfit._kernels import _quantile as _k
from streamfit._kernels._quantile import STATE_DTYPE, LinearSGD

# float32 input is converted once; results then agree to float32's rounding
RTOL = {np.float32: 1e-6, np.float64: 1e-12}


class SqrtSchedule:
    """A user schedule, duck-typed (no streamfit base class): c / sqrt(t + 1);
    `bad` makes it return a wrong length, negative or NaN stepsizes."""

    def __init__(self, c=0.05, bad=None):
        self.c = c
        self.bad = bad

    def stepsizes(self, start, count):
        eta = self.c / np.sqrt(np.arange(start, start + count) + 1.0)
        if self.bad == "length":
            return np.append(eta, self.c)
        if self.bad == "negative":
            return -eta
        if self.bad == "nan":
            eta[-1] = np.nan
        return eta


def feed(est, X, y, bounds=(0, 37, 150, 173, 290, 400)):
    # uneven chunks; in batch mode (16 rows) most calls leave rows pending
    for a, b in zip(bounds[:-1], bounds[1:]):
        est.partial_fit(X[a:b], y[a:b])
    return est


def assert_same_results(est, ref, rtol=0.0):
    """Bit for bit (rtol = 0, schedule state included), or to rtol."""
    if rtol == 0.0:
        np.testing.assert_array_equal(est.coef_, ref.coef_)
        assert est.intercept_ == ref.intercept_
        assert est.cumulative_loss_ == ref.cumulative_loss_
        assert est.schedule_state_ == ref.schedule_state_
    else:
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=rtol)
        np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=rtol)
        np.testing.assert_allclose(est.cumulative_loss_, ref.cumulative_loss_, rtol=rtol)
    assert est.n_updates_ == ref.n_updates_
    assert est.n_samples_seen_ == ref.n_samples_seen_


def raw_state(obj):
    """The whole state of an estimator (its ``_state``) or of a LinearSGD /
    IntervalState as the object's own state dict (``to_state()``'s, except
    that a user schedule object stays an object: ``to_state()`` refuses what
    is not plain data). A copy: editing it changes nothing."""
    state = getattr(obj, "_state", obj)
    return type(state).__reduce__(state)[1][0]


def state_of(obj):
    """The schedule state records of an estimator (or a LinearSGD), one per
    quantile, with their fields named (``STATE_DTYPE``): shape (m,), a copy.
    OnlineIntervalRegressor: its quantile pair's."""
    st = raw_state(obj)
    if "quantiles" in st:
        st = st["quantiles"]
    return np.ascontiguousarray(st["records"]).view(STATE_DTYPE).reshape(-1)


def learnt(obj):
    """The learnt state of an estimator (or a state object) by section, as
    ``to_state()`` names them: ``records`` (the schedule state records, fields
    named), ``coef`` (the iterates), ``coef_avg`` (their averages),
    ``window`` (the residual windows, up to their fill), ``sums`` (the
    random-scaling sums), ``plug_in`` (the plug-in intercepts' means),
    ``scaler``, ``pending_X``/``_y``/``_w``, ``store_X``/``_y``/``_w``,
    ``drift_rows``, ``feature_names``. With one tau the arrays' leading
    (quantile) axis is dropped, as the estimator's ``coef_`` drops it; the
    records keep it (shape (m,)). Copies."""
    st = raw_state(obj)
    if "quantiles" in st:
        st = st["quantiles"]
    several = isinstance(st["settings"]["tau"], (list, tuple))
    out = dict(st)
    out["records"] = state_of(obj)
    if not several:
        for name in ("coef", "coef_avg", "window", "sums", "plug_in"):
            if out[name] is not None:
                out[name] = out[name][0]
    return SimpleNamespace(**out)


def _canonical(value):
    # a value of a state dict as bytes, the same for equal contents (pickle's
    # bytes also depend on which equal strings are one object)
    if isinstance(value, dict):
        return b"{" + b",".join(_canonical(k) + b":" + _canonical(v)
                                for k, v in sorted(value.items())) + b"}"
    if isinstance(value, (list, tuple)):
        return b"[" + b",".join(_canonical(v) for v in value) + b"]"
    if isinstance(value, np.ndarray):
        return f"{value.dtype.str}{value.shape}".encode() + \
            np.ascontiguousarray(value).tobytes()
    if isinstance(value, (type(None), bool, int, float, str, np.generic)):
        # (repr keeps a float's bits, -0.0 and NaN included)
        return f"{type(value).__name__}:{value!r}".encode()
    # a schedule object: its class and parameters
    return type(value).__qualname__.encode() + _canonical(dict(vars(value)))


def state_bytes(obj):
    """The whole state as bytes: equal means bit-identical (arrays, records,
    settings, pending and stored rows)."""
    return _canonical(raw_state(obj))


def edited_pickle(obj, edit, kind=None):
    """A pickle of ``obj`` (an estimator or a state object) whose state
    object's state dict went through ``edit(state)`` (in place) on the way:
    what a damaged or hostile file holds. ``kind``: the state object's type
    (default LinearSGD; IntervalState for OnlineIntervalRegressor)."""
    kind = kind or LinearSGD
    buf = io.BytesIO()

    class Editing(pickle.Pickler):
        def reducer_override(self, o):
            if type(o) is kind:
                rebuild, (state,) = o.__reduce__()
                edit(state)
                return rebuild, (state,)
            return NotImplemented

    Editing(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def records_of(state):
    """The records of a state dict (``to_state()``'s or a pickle's) as a
    writable view with named fields, shape (m,): edits change the dict."""
    return state["records"].view(STATE_DTYPE).reshape(-1)


class Stop(Exception):
    """What the SIGUSR1 handler of :func:`stopped_at` raises."""


@contextlib.contextmanager
def stopped_at(at):
    """The kernel call in the block is stopped by a real SIGUSR1, raised when
    it polls before row ``at`` (its handler raises Stop); the block must raise
    Stop. POSIX only."""
    def handler(signum, frame):
        raise Stop()

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        _k._interrupt_at(at, signal.SIGUSR1)
        with pytest.raises(Stop):
            yield
    finally:
        _k._interrupt_at(-1, 0)
        signal.signal(signal.SIGUSR1, old)
