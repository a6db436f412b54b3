"""The stream-estimator contract as checks anyone can run.

In the form of scikit-learn's ``sklearn.utils.estimator_checks`` and river's
``river.checks``: :func:`check_estimator` runs every check on one estimator
and raises an ``AssertionError`` whose message starts with the name of the
check that failed; :func:`parametrize_with_checks` turns the same checks into
one pytest test per (estimator, check); :func:`yield_checks` yields them one
by one. Each check is also a public function that can be called alone.

The contract is that of a *stream* estimator: ``partial_fit(X, y)``
(supervised) or ``partial_fit(X)`` (unsupervised) takes the next rows of one
stream, and

- :func:`check_chunking_invariance`: the rows in one call or in uneven
  chunks (empty and one-row calls included) leave the same state, bit for bit;
- :func:`check_pickle_resume`: pickling and unpickling between calls changes
  nothing, bit for bit;
- :func:`check_rejected_input`: bad input (NaN, inf, wrong number of features,
  wrong length of y, wrong dtype or number of dimensions) raises a
  ``ValueError`` or ``TypeError`` whose message names the argument, and leaves
  the estimator's pickle byte-identical (a fresh estimator stays unfitted);
- :func:`check_interrupt`: a ``KeyboardInterrupt`` delivered during a call
  leaves the state of the rows before the call plus a whole number of rows;
- :func:`check_concurrent_calls`: calls from two threads are serialised or
  refused, never lost or mixed;
- :func:`check_float32_input`: float32 input gives the result of the float64
  array of the same values, bit for bit;
- :func:`check_same_seed`: two estimators with the same parameters and seed
  fed the same stream end in the same state;
- :func:`check_clone_params`: ``clone`` and ``type(est)(**get_params())`` give
  unfitted twins that learn the same state; ``partial_fit`` returns ``self``;
- :func:`check_input_not_mutated`: the caller's arrays are left as they were.

"The state" is what the estimator shows: every public attribute ending in
``_`` (arrays compared as bytes); hidden state (a generator, rows waiting for
a full batch) is compared through its consequences: both estimators are fed
one more block of the stream and compared again.

Every check starts from ``sklearn.base.clone(estimator)`` (the estimator
given is not changed) with ``random_state=0`` if it has a ``random_state``
parameter set to None. The data default to a synthetic stream: 300 rows of a
linear model with 5 features (``y`` given) when scikit-learn's tags say the
estimator needs a target, else 300 rows with 12 features. Give ``X`` (and
``y``) to use your own: the checks slice rows ``X[a:b]``, and ``X`` may be a
tuple of arrays sliced together (several inputs per row).

The interrupt check delivers SIGINT (as the ``KeyboardInterrupt`` handler
would receive it) at sampled lines of the Python code of the estimator's
package, with ``sys.settrace``: this needs nothing from the estimator. Inside
compiled loops it also stops streamfit's own kernels at an exact row, through
a private hook of the compiled module, for streamfit's estimators (and their
subclasses) only: an estimator without such a hook gets the Python-level part.

Examples
--------
>>> from streamfit import OnlineQuantileRegressor
>>> from streamfit.utils.estimator_checks import check_estimator
>>> check_estimator(OnlineQuantileRegressor(tau=0.3))

A downstream estimator built on :mod:`streamfit.kernels` (constant stepsizes,
its own input validation) passes as well:

>>> import numpy as np
>>> from sklearn.base import BaseEstimator, RegressorMixin
>>> from streamfit.kernels import LinearSGD
>>> from streamfit.schedules import ConstantSchedule
>>> class MedianSGD(RegressorMixin, BaseEstimator):
...     def __init__(self, eta=0.05):
...         self.eta = eta
...     def partial_fit(self, X, y):
...         X, y = np.asarray(X), np.asarray(y)
...         if X.dtype.kind not in "biuf" or X.ndim != 2:
...             raise TypeError("X must be a 2-dimensional array of real "
...                             "numbers")
...         if y.dtype.kind not in "biuf" or y.shape != (len(X),):
...             raise ValueError(f"y must hold {len(X)} real numbers, "
...                              "one a row of X")
...         d = X.shape[1]
...         if hasattr(self, "state_") and d != self.state_.n_features:
...             raise ValueError(f"X has {d} features, expected "
...                              f"{self.state_.n_features}")
...         # the state object rejects NaN/inf (naming X or y), leaving
...         # itself as it was
...         state = (self.state_ if hasattr(self, "state_") else
...                  LinearSGD(d, schedule=ConstantSchedule(self.eta)))
...         state.configure(schedule=ConstantSchedule(self.eta))
...         state.learn(np.ascontiguousarray(X, dtype=np.float64),
...                     np.ascontiguousarray(y, dtype=np.float64))
...         self.state_ = state
...         return self
...     @property
...     def coef_(self):
...         return self.state_.coef
...     @property
...     def n_samples_seen_(self):
...         return self.state_.n_samples_seen
>>> # pickle finds a class by its module: one defined here cannot be pickled
>>> check_estimator(MedianSGD(),
...                 skip={"check_pickle_resume": "defined in a doctest"})

The checks are per-estimator pytest tests with :func:`parametrize_with_checks`
(in a test module)::

    @parametrize_with_checks([OnlineQuantileRegressor(tau=0.3), MedianSGD()])
    def test_stream_contract(estimator, check):
        check(estimator)
"""
from __future__ import annotations

import copy
import functools
import os
import pickle
import re
import signal
import sys
import threading

import numpy as np
from sklearn.base import clone
from sklearn.utils import get_tags

from .._sklearn_checks import expected_failed_checks

__all__ = [
    "BAD_INPUT",
    "check_estimator",
    "yield_checks",
    "parametrize_with_checks",
    "check_clone_params",
    "check_same_seed",
    "check_chunking_invariance",
    "check_pickle_resume",
    "check_float32_input",
    "check_input_not_mutated",
    "check_rejected_input",
    "check_interrupt",
    "check_concurrent_calls",
    "expected_failed_checks",
]

# Uneven chunks over the default 300-row stream: empty calls, a one-row call,
# and boundaries that fall inside blocks of 16 and 40 rows.
_BOUNDS = (0, 0, 1, 37, 37, 38, 150, 173, 211)
# Rows the checks build a state from before the call under test.
_PREFIT = 60


# -- data -------------------------------------------------------------------------------

def _default_data(estimator):
    from ..simulate import make_linear_stream, make_spiked_stream

    try:
        supervised = get_tags(estimator).target_tags.required
    except Exception:       # not a scikit-learn estimator: guess from partial_fit
        import inspect
        params = inspect.signature(estimator.partial_fit).parameters
        supervised = "y" in params and params["y"].default is inspect.Parameter.empty
    if supervised:
        X, y, _ = make_linear_stream(300, 5, tau=0.3, snr=5.0, random_state=0)
        return X, y
    return make_spiked_stream(300, 12, n_spikes=3, random_state=0), None


def _length(X):
    return len(X[0]) if isinstance(X, tuple) else len(X)


def _rows(X, a, b):
    if X is None:
        return None
    if isinstance(X, tuple):
        return tuple(part[a:b] for part in X)
    return X[a:b]


def _feed(est, X, y, a, b):
    args = (_rows(X, a, b),) if y is None else (_rows(X, a, b), y[a:b])
    return est.partial_fit(*args)


def _feed_chunks(est, X, y, bounds):
    for a, b in zip(bounds[:-1], bounds[1:]):
        _feed(est, X, y, a, b)
    return est


def _is_fitted(est):
    # scikit-learn's rule (check_is_fitted), without its demand for a fit method
    if hasattr(est, "__sklearn_is_fitted__"):
        return bool(est.__sklearn_is_fitted__())
    return any(k.endswith("_") and not k.startswith("__") for k in vars(est))


def _fresh(estimator):
    """An unfitted clone, seeded when its random_state is None."""
    est = clone(estimator)
    params = est.get_params(deep=False)
    if "random_state" in params and params["random_state"] is None:
        est.set_params(random_state=0)
    return est


# -- the state, as the estimator shows it --------------------------------------------------

def _value(v):
    """A comparable form of an attribute value: arrays (and scalars) by
    dtype, shape and bytes, so that -0.0 != 0.0 and NaN == NaN."""
    if isinstance(v, (np.ndarray, np.generic, float, complex)):
        a = np.asarray(v)
        if a.dtype.kind == "O":
            return ("object-array", a.shape, tuple(_value(x) for x in a.ravel()))
        return (a.dtype.str, a.shape, a.tobytes())
    if isinstance(v, dict):
        return ("dict", tuple((k, _value(x)) for k, x in sorted(v.items(), key=repr)))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_value(x) for x in v))
    if v is None or isinstance(v, (bool, int, str, bytes)):
        return v
    try:
        return ("pickle", pickle.dumps(v))
    except Exception:
        return ("repr", repr(v))


def _state(est):
    """Every public attribute ending in "_" that the estimator has, in the
    comparable form of _value; an attribute that raises counts as absent."""
    out = {}
    for name in dir(est):
        if name.startswith("_") or not name.endswith("_"):
            continue
        try:
            value = getattr(est, name)
        except Exception:       # unfitted, or not meaningful in this configuration
            continue
        if callable(value) and not isinstance(value, np.ndarray):
            continue
        out[name] = _value(value)
    return out


def _differences(a, b):
    sa, sb = _state(a), _state(b)
    return sorted(name for name in set(sa) | set(sb) if sa.get(name) != sb.get(name))


def _assert_same(a, b, what, X=None, y=None, cont=None):
    """a and b show the same state; and again after both are fed rows
    cont = (start, stop) of the stream, which brings out hidden state."""
    diff = _differences(a, b)
    assert not diff, f"{what}: the attributes {diff} differ"
    if cont is not None:
        _feed(a, X, y, *cont)
        _feed(b, X, y, *cont)
        diff = _differences(a, b)
        assert not diff, f"{what}: the attributes {diff} differ after one more call"


def _named(check):
    """The check with its data defaulted; whatever it raises becomes an
    AssertionError whose message starts with the check's name."""
    @functools.wraps(check)
    def run(estimator, X=None, y=None):
        if X is None:
            X, y = _default_data(estimator)
        try:
            return check(estimator, X, y)
        except AssertionError as exc:
            raise AssertionError(f"{check.__name__} failed for "
                                 f"{type(estimator).__name__}: {exc}") from exc
        except Exception as exc:    # an error where the contract expects none
            raise AssertionError(f"{check.__name__} failed for "
                                 f"{type(estimator).__name__}: "
                                 f"{type(exc).__name__}: {exc}") from exc
    return run


# -- the checks ---------------------------------------------------------------------------

@_named
def check_clone_params(estimator, X=None, y=None):
    """``clone(est)`` and ``type(est)(**est.get_params(deep=False))`` are
    unfitted, have est's parameters (``set_params`` round trip), and learn
    the state that est learns; ``partial_fit`` returns ``self``.

    Examples
    --------
    >>> from streamfit import MatrixEGPCA
    >>> from streamfit.utils.estimator_checks import check_clone_params
    >>> check_clone_params(MatrixEGPCA(2, eta=0.5))
    """
    est = _fresh(estimator)
    params = est.get_params(deep=False)
    assert _feed(est, X, y, 0, _PREFIT) is est, "partial_fit did not return self"
    twin = type(est)(**params)
    assert sorted(twin.get_params(deep=False)) == sorted(params), \
        "the parameters of type(est)(**get_params()) differ"
    copied = clone(est)
    for other, name in ((twin, "type(est)(**est.get_params())"), (copied, "clone(est)")):
        assert not _is_fitted(other), f"{name} of a fitted estimator is fitted"
    assert copied.set_params(**copied.get_params(deep=False)) is copied, \
        "set_params did not return self"
    _feed(twin, X, y, 0, _PREFIT)
    _feed(copied, X, y, 0, _PREFIT)
    _assert_same(twin, est, "type(est)(**est.get_params()) and est")
    _assert_same(copied, est, "clone(est) and est", X, y, (_PREFIT, _PREFIT + 40))


@_named
def check_same_seed(estimator, X=None, y=None):
    """Two estimators with the same parameters (and seed) fed the same chunks
    of a stream end in the same state.

    Examples
    --------
    >>> from streamfit import PerturbedLeaderPCA
    >>> from streamfit.utils.estimator_checks import check_same_seed
    >>> check_same_seed(PerturbedLeaderPCA(2, random_state=3))
    """
    bounds = (0, 37, 150, _length(X) - 40)
    a = _feed_chunks(_fresh(estimator), X, y, bounds)
    b = _feed_chunks(_fresh(estimator), X, y, bounds)
    _assert_same(a, b, "two estimators of the same seed", X, y, (bounds[-1], _length(X)))


@_named
def check_chunking_invariance(estimator, X=None, y=None):
    """The rows in one ``partial_fit`` call, or in uneven chunks (empty and
    one-row calls included), leave the same state, bit for bit.

    Examples
    --------
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.utils.estimator_checks import check_chunking_invariance
    >>> est = OnlineQuantileRegressor(mode="batch", batch_size=16)
    >>> check_chunking_invariance(est)
    """
    end = _BOUNDS[-1]
    one = _feed(_fresh(estimator), X, y, 0, end)
    chunked = _feed_chunks(_fresh(estimator), X, y, _BOUNDS)
    _assert_same(chunked, one, f"chunks {_BOUNDS} and one call",
                 X, y, (end, _length(X)))


@_named
def check_pickle_resume(estimator, X=None, y=None):
    """An estimator pickled and unpickled between every two calls ends in the
    state of one fed the same calls without pickling, bit for bit.

    Examples
    --------
    >>> from streamfit import DropoutPCA
    >>> from streamfit.utils.estimator_checks import check_pickle_resume
    >>> check_pickle_resume(DropoutPCA(2, random_state=0))
    """
    bounds = (0, 37, 150, 173, 211)
    ref = _feed_chunks(_fresh(estimator), X, y, bounds)
    est = pickle.loads(pickle.dumps(_fresh(estimator)))
    for a, b in zip(bounds[:-1], bounds[1:]):
        est = pickle.loads(pickle.dumps(_feed(est, X, y, a, b)))
    _assert_same(est, ref, "pickled between calls and never pickled",
                 X, y, (bounds[-1], _length(X)))


def _as_float32(a):
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.kind == "f" else a


def _float32_pair(X):
    if isinstance(X, tuple):
        pairs = [_float32_pair(part) for part in X]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    x32 = _as_float32(X)
    return x32, (x32.astype(np.float64) if x32.dtype == np.float32 else x32)


@_named
def check_float32_input(estimator, X=None, y=None):
    """float32 input (X and y) gives the state of the float64 arrays of the
    same values, bit for bit: converted once, exactly.

    Examples
    --------
    >>> from streamfit import OnlineLeastSquaresRegressor
    >>> from streamfit.utils.estimator_checks import check_float32_input
    >>> check_float32_input(OnlineLeastSquaresRegressor())
    """
    X32, X64 = _float32_pair(X)
    y32, y64 = (None, None) if y is None else _float32_pair(y)
    bounds = (0, 37, 211)
    a = _feed_chunks(_fresh(estimator), X32, y32, bounds)
    b = _feed_chunks(_fresh(estimator), X64, y64, bounds)
    _assert_same(a, b, "float32 input and its float64 values")


@_named
def check_input_not_mutated(estimator, X=None, y=None):
    """``partial_fit`` leaves the caller's arrays as they were.

    Examples
    --------
    >>> from streamfit import FollowTheLeaderPCA
    >>> from streamfit.utils.estimator_checks import check_input_not_mutated
    >>> check_input_not_mutated(FollowTheLeaderPCA(2))
    """
    Xc, yc = copy.deepcopy(X), copy.deepcopy(y)
    _feed_chunks(_fresh(estimator), Xc, yc, (0, 37, 150))
    olds, news = (X, Xc) if isinstance(X, tuple) else ((X,), (Xc,))
    for old, new in zip(olds, news):
        assert _value(np.asarray(old)) == _value(np.asarray(new)), "X was changed"
    if y is not None:
        assert _value(np.asarray(y)) == _value(np.asarray(yc)), "y was changed"


def _pickled(est):
    """The pickle of est's state, its attributes in name order (a call that
    puts back a dict it replaced changes no state, only the order)."""
    state = est.__getstate__() if hasattr(est, "__getstate__") else vars(est)
    if isinstance(state, dict):
        state = {key: state[key] for key in sorted(state)}
    return pickle.dumps(state)


def _names(arg):
    """A regex matching a message that names ``arg`` as a word."""
    return rf"(?<![\w.']){re.escape(arg)}(?![\w'])"


def _with_value(a, value, where):
    a = np.array(a, dtype=np.float64 if np.asarray(a).dtype.kind in "biu" else None)
    a.flat[where] = value
    return a


def _on_x(transform):
    """transform applied to X (to the first array of a tuple X)."""
    def apply(X, y):
        if isinstance(X, tuple):
            return (transform(X[0]),) + X[1:], y
        return transform(X), y
    return apply


def _on_y(transform):
    return lambda X, y: (X, transform(y))


#: The bad input of :func:`check_rejected_input`. name: (the argument the
#: error must name, a transform of one block ``(X, y)``, whether it needs y).
BAD_INPUT = {
    "X-nan": ("X", _on_x(lambda a: _with_value(a, np.nan, 7)), False),
    "X-inf": ("X", _on_x(lambda a: _with_value(a, np.inf, 7)), False),
    "X-minus-inf": ("X", _on_x(lambda a: _with_value(a, -np.inf, 7)), False),
    # in the last row: after a kernel has taken the rows before it
    "X-nan-last-row": ("X", _on_x(lambda a: _with_value(a, np.nan, -1)), False),
    "X-too-few-dimensions": ("X", _on_x(lambda a: a[:, 0]), False),
    "X-too-many-dimensions": ("X", _on_x(lambda a: a[..., None]), False),
    "X-strings": ("X", _on_x(lambda a: a.astype(str)), False),
    "X-complex": ("X", _on_x(lambda a: a + 1j), False),
    "X-n-features": ("X", _on_x(lambda a: a[:, :-1]), False),
    "y-nan": ("y", _on_y(lambda a: _with_value(a, np.nan, 7)), True),
    "y-inf": ("y", _on_y(lambda a: _with_value(a, np.inf, 7)), True),
    "y-nan-last-row": ("y", _on_y(lambda a: _with_value(a, np.nan, -1)), True),
    "y-length": ("y", _on_y(lambda a: a[:-1]), True),
    "y-2-columns": ("y", _on_y(lambda a: np.column_stack([a, a])), True),
    "y-strings": ("y", _on_y(lambda a: a.astype(str)), True),
}


@_named
def check_rejected_input(estimator, X=None, y=None):
    """Every case of :data:`BAD_INPUT` given to ``partial_fit`` (and the NaN
    cases to ``fit``) raises a ``ValueError`` or ``TypeError`` whose message
    names the argument (``X`` or ``y``); the fitted estimator's pickle is
    byte-identical afterwards, it carries on as if the call had never
    happened, and an unfitted estimator stays unfitted.

    Examples
    --------
    >>> from streamfit import MatrixGDPCA
    >>> from streamfit.utils.estimator_checks import check_rejected_input
    >>> check_rejected_input(MatrixGDPCA(2, random_state=0))
    """
    block = _rows(X, _PREFIT, _PREFIT + 20), _rows(y, _PREFIT, _PREFIT + 20)
    est = _feed_chunks(_fresh(estimator), X, y, (0, 40, _PREFIT))
    before = _pickled(est)
    for case, (arg, transform, supervised) in BAD_INPUT.items():
        if supervised and y is None:
            continue
        bad = transform(*block)
        calls = [("partial_fit", est)]
        if case.endswith("nan") and hasattr(est, "fit"):
            calls.append(("fit", est))
        if case != "X-n-features":
            calls.append(("partial_fit on an unfitted estimator", _fresh(estimator)))
        for method, target in calls:
            try:
                getattr(target, method.split()[0])(*(bad[:1] if y is None else bad))
            except (ValueError, TypeError) as exc:
                assert re.search(_names(arg), str(exc)), \
                    f"{case}: {method}'s error does not name {arg!r}: {exc}"
            except Exception as exc:
                raise AssertionError(f"{case}: {method} raised {type(exc).__name__}, not "
                                     f"ValueError or TypeError: {exc}") from exc
            else:
                raise AssertionError(f"{case}: {method} accepted the bad input")
            if target is est:
                assert _pickled(est) == before, \
                    f"{case}: the state changed in the rejected {method} call"
            else:
                assert not _is_fitted(target), f"{case}: the rejected call fitted the estimator"
    ref = _feed_chunks(_fresh(estimator), X, y, (0, 40, _PREFIT))
    _assert_same(est, ref, "after the rejected calls", X, y, (_PREFIT, _PREFIT + 50))


# -- interrupts ---------------------------------------------------------------------------

# Compiled modules with a private hook that raises a signal when a kernel
# loop polls for the `at`-th time (before row `at`): class name -> module.
_KERNEL_HOOKS = {
    "OnlineQuantileRegressor": "streamfit._kernels._quantile",
    "OnlineLeastSquaresRegressor": "streamfit._kernels._quantile",
    "OnlineIntervalRegressor": "streamfit._kernels._quantile",
    "PerturbedLeaderPCA": "streamfit._kernels._pca",
    "FollowTheLeaderPCA": "streamfit._kernels._pca",
    "MatrixEGPCA": "streamfit._kernels._capped",
    "MatrixGDPCA": "streamfit._kernels._capped",
    "DropoutPCA": "streamfit._kernels._dropout",
    "OnlineLowRankQuantileRegressor": "streamfit._kernels._lowrank",
}


def _kernel_hook(estimator):
    import importlib

    for cls in type(estimator).__mro__:
        name = _KERNEL_HOOKS.get(cls.__name__)
        if name is not None and cls.__module__.startswith("streamfit."):
            return getattr(importlib.import_module(name), "_interrupt_at", None)
    return None


def _source_prefixes(estimator):
    """The files of the packages (or modules) that define the estimator's
    classes, scikit-learn's and the standard library's left out."""
    out = set()
    for cls in type(estimator).__mro__:
        module = sys.modules.get(cls.__module__)
        top = cls.__module__.split(".")[0]
        if module is None or top in ("builtins", "sklearn", "abc", "typing"):
            continue
        top_module = sys.modules.get(top, module)
        path = getattr(top_module, "__file__", None) or getattr(module, "__file__", None)
        if path is None:
            continue
        out.add(os.path.dirname(path) if path.endswith("__init__.py") else path)
    return tuple(sorted(out))


def _traced(call, prefixes, at_line=None):
    """Run call() counting the lines it runs in files under prefixes; at line
    at_line, call the SIGINT handler installed then, as Python's signal
    machinery would. Returns the number of lines run."""
    seen = [0]

    def local(frame, event, arg):
        if event == "line":
            seen[0] += 1
            if seen[0] == at_line:
                handler = signal.getsignal(signal.SIGINT)
                if callable(handler):
                    handler(signal.SIGINT, frame)
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(prefixes) else None

    outer = sys.gettrace()
    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(outer)
    return seen[0]


def _counter(est):
    for name in ("n_samples_seen_", "n_trials_"):
        try:
            return name, int(getattr(est, name))
        except Exception:
            continue
    return None, None


def _assert_whole_steps(est, estimator, X, y, start, stop, what, count0):
    """est, interrupted while fed rows start:stop after rows 0:start, shows
    the state of the rows before the call plus a whole number of rows
    (counted by n_samples_seen_ or n_trials_ when it has one, count0 before
    the call, else none or all of them)."""
    name, count = _counter(est)
    if name is not None:
        taken = [count - count0]
        assert 0 <= taken[0] <= stop - start, f"{what}: {name} = {count} is outside the call"
    else:
        taken = [0, stop - start]
    for m in taken:
        ref = _feed(_feed(_fresh(estimator), X, y, 0, start), X, y, start, start + m)
        if not _differences(est, ref):
            _assert_same(est, ref, f"{what}, after {m} rows of the call", X, y,
                         (start + m, start + m + 30))
            return
    raise AssertionError(f"{what}: the state is not that of a whole number of rows "
                         f"(tried {taken})")


@_named
def check_interrupt(estimator, X=None, y=None):
    """A KeyboardInterrupt delivered during ``partial_fit`` leaves the state
    of the rows before the call plus a whole number of the call's rows
    (counted by ``n_samples_seen_`` or ``n_trials_`` when the estimator has
    one), every attribute consistent with it: delivered at lines of the
    Python code of the estimator's package spread over the call, and, for
    streamfit's estimators, inside the compiled loop at its polls 0, 1 and 64
    (POSIX only). Signal handlers run in the main thread only: in another
    thread the check does nothing.

    Examples
    --------
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.utils.estimator_checks import check_interrupt
    >>> check_interrupt(OnlineQuantileRegressor(mode="batch", batch_size=4))
    """
    if threading.current_thread() is not threading.main_thread():
        return      # signal handlers run in the main thread only
    start, stop = 40, 120
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        prefixes = _source_prefixes(estimator)
        probe = _feed(_fresh(estimator), X, y, 0, start)
        count0 = _counter(probe)[1]
        n_lines = _traced(lambda: _feed(probe, X, y, start, stop), prefixes)
        lines = sorted({int(v) for v in np.linspace(1, n_lines, 5)})
        for line in lines:
            est = _feed(_fresh(estimator), X, y, 0, start)
            try:
                _traced(lambda: _feed(est, X, y, start, stop), prefixes, at_line=line)
            except KeyboardInterrupt:
                pass
            _assert_whole_steps(est, estimator, X, y, start, stop,
                                f"interrupted at Python line {line} of {n_lines}", count0)
    finally:
        signal.signal(signal.SIGINT, previous)

    hook = _kernel_hook(estimator)
    if hook is None or not hasattr(signal, "SIGUSR1"):
        return

    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt()

    old = signal.signal(signal.SIGUSR1, raise_interrupt)
    try:
        for at in (0, 1, 64):
            est = _feed(_fresh(estimator), X, y, 0, start)
            try:
                hook(at, signal.SIGUSR1)
                _feed(est, X, y, start, stop)
            except KeyboardInterrupt:
                pass
            finally:
                hook(-1, 0)
            _assert_whole_steps(est, estimator, X, y, start, stop,
                                f"interrupted in the kernel at poll {at}", count0)
    finally:
        signal.signal(signal.SIGUSR1, old)


@_named
def check_concurrent_calls(estimator, X=None, y=None):
    """Two threads calling ``partial_fit`` on one estimator at once: each
    call is either taken whole (in one order or the other) or refused with
    an exception, never lost or mixed with the other.

    Examples
    --------
    >>> from streamfit import MatrixEGPCA
    >>> from streamfit.utils.estimator_checks import check_concurrent_calls
    >>> check_concurrent_calls(MatrixEGPCA(2, random_state=0))
    """
    n = _length(X)
    blocks = [(40, 40 + (n - 40) // 2), (40 + (n - 40) // 2, n)]
    est = _feed(_fresh(estimator), X, y, 0, 40)
    barrier = threading.Barrier(2)
    done = [None, None]

    def run(i):
        barrier.wait()
        try:
            _feed(est, X, y, *blocks[i])
            done[i] = True
        except Exception:       # refused: allowed, if it changed nothing
            done[i] = False

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    taken = [i for i in range(2) if done[i]]
    orders = [taken, taken[::-1]] if len(taken) == 2 else [taken]
    for order in orders:
        ref = _feed(_fresh(estimator), X, y, 0, 40)
        for i in order:
            _feed(ref, X, y, *blocks[i])
        if not _differences(est, ref):
            return
    raise AssertionError(f"the calls taken ({len(taken)} of 2) do not explain the state: "
                         f"attributes {_differences(est, ref)} differ from every order")


# -- running them ----------------------------------------------------------------------------

_CHECKS = (check_clone_params, check_same_seed, check_chunking_invariance, check_pickle_resume,
           check_float32_input, check_input_not_mutated, check_rejected_input, check_interrupt,
           check_concurrent_calls)


def yield_checks(estimator, X=None, y=None, *, skip=None):
    """The checks for one estimator, one at a time.

    Parameters
    ----------
    estimator : estimator
        A stream estimator with ``partial_fit(X, y)`` or ``partial_fit(X)``;
        it is cloned, never changed.
    X, y : array-like, optional
        The stream the checks slice (at least 300 rows); default: a synthetic
        stream (see the module docstring).
    skip : dict of {str: str}, optional
        Checks that do not apply to this estimator, by name, with the reason.

    Yields
    ------
    check : callable
        ``check(estimator)`` runs one check; ``check.__name__`` is its name
        (``functools.partial`` objects with the data bound).

    Examples
    --------
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.utils.estimator_checks import yield_checks
    >>> est = OnlineQuantileRegressor(mode="storage", batch_size=40)
    >>> skip = {"check_chunking_invariance": "one full-gradient step per call"}
    >>> for check in yield_checks(est, skip=skip):
    ...     check(est)
    >>> [c.__name__ for c in yield_checks(est, skip=skip)][:2]
    ['check_clone_params', 'check_same_seed']
    """
    skip = skip or {}
    unknown = set(skip) - {c.__name__ for c in _CHECKS}
    if unknown:
        raise ValueError(f"skip names unknown checks {sorted(unknown)}")
    if X is None:
        X, y = _default_data(estimator)
    for check in _CHECKS:
        if check.__name__ in skip:
            continue
        bound = functools.partial(check, X=X, y=y)
        functools.update_wrapper(bound, check)
        yield bound


def check_estimator(estimator, X=None, y=None, *, skip=None):
    """Run every check of the stream contract on an estimator.

    Parameters
    ----------
    estimator : estimator
        A stream estimator with ``partial_fit(X, y)`` or ``partial_fit(X)``;
        it is cloned, never changed.
    X, y : array-like, optional
        The stream (at least 300 rows); default: a synthetic one.
    skip : dict of {str: str}, optional
        Checks that do not apply, by name, with the reason.

    Raises
    ------
    AssertionError
        From the first check that fails; the message starts with its name.

    Examples
    --------
    >>> from streamfit import PerturbedLeaderPCA
    >>> from streamfit.utils.estimator_checks import check_estimator
    >>> check_estimator(PerturbedLeaderPCA(2, noise="random_walk"))
    """
    for check in yield_checks(estimator, X, y, skip=skip):
        check(estimator)


def parametrize_with_checks(estimators, *, skip=None):
    """A pytest decorator: one test per (estimator, check), as
    scikit-learn's ``parametrize_with_checks``.

    Parameters
    ----------
    estimators : list
        Estimators, or ``(estimator, X, y)`` tuples to give one its data.
    skip : callable, optional
        ``skip(estimator) -> {check name: reason}``: checks that do not
        apply to an estimator; they are reported as skipped with the reason.

    Returns
    -------
    decorator
        ``pytest.mark.parametrize("estimator, check", ...)``, with ids
        ``<estimator repr>-<check name>``.

    Examples
    --------
    >>> from streamfit import OnlineQuantileRegressor
    >>> from streamfit.utils.estimator_checks import parametrize_with_checks
    >>> @parametrize_with_checks([OnlineQuantileRegressor(tau=0.3)])
    ... def test_stream_contract(estimator, check):
    ...     check(estimator)
    >>> len(test_stream_contract.pytestmark[0].args[1])
    9
    """
    import pytest

    params = []
    for item in estimators:
        est, X, y = item if isinstance(item, tuple) else (item, None, None)
        skipped = skip(est) if skip is not None else {}
        name = " ".join(repr(est).split())
        for check in yield_checks(est, X, y):
            marks = ()
            if check.__name__ in skipped:
                marks = pytest.mark.skip(reason=skipped[check.__name__])
            params.append(pytest.param(est, check, marks=marks,
                                       id=f"{name}-{check.__name__}"))
    return pytest.mark.parametrize("estimator, check", params)
