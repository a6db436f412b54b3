"""What the quantile test modules share: tolerances, a duck-typed user
schedule, feeding a stream in chunks, comparing two fits, reading a learnt
state's records and stopping a kernel at an exact row.

Imported relatively (``from ._cases import ...``): pytest's importlib mode
(pyproject.toml) puts no test folder on sys.path."""
import contextlib
import pickle
import signal
from types import SimpleNamespace

import numpy as np
import pytest

from streamfit._kernels import _quantile as _k
from streamfit._kernels._quantile import STATE_DTYPE

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
    ``drift_rows``, ``feature_names``. With one tau the leading (quantile)
    axis is dropped, as the estimator's ``coef_`` drops it. Copies."""
    st = raw_state(obj)
    if "quantiles" in st:
        st = st["quantiles"]
    several = isinstance(st["settings"]["tau"], (list, tuple))
    out = dict(st)
    out["records"] = state_of(obj)
    if not several:
        for name in ("records", "coef", "coef_avg", "window", "sums", "plug_in"):
            if out[name] is not None:
                out[name] = out[name][0]
    return SimpleNamespace(**out)


def state_bytes(obj):
    """The whole state as bytes: equal means bit-identical (arrays, records,
    settings, pending and stored rows)."""
    return pickle.dumps(raw_state(obj))


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
