"""What every streamfit estimator shares on top of scikit-learn's BaseEstimator:
one call at a time per estimator, pickling without the lock, and commits that
a signal cannot split.

- **Serialised calls.** ``@serialized`` on every call that changes or reads
  the state (``fit``, ``partial_fit``, fitted attributes, ...): two threads
  feeding one estimator take turns instead of losing or mixing updates. The
  lock is taken and given back in compiled code
  (:func:`streamfit._kernels._threads.call_holding`), never by a Python
  ``with`` statement: a KeyboardInterrupt on a with-statement's exit line,
  before ``__exit__`` runs, would leave the lock held and the next call from
  another thread waiting forever. The lock is an
  ``RLock`` made on first use (``__init__`` only stores parameters, as
  scikit-learn requires), kept in ``__dict__`` under ``_lock`` and dropped when
  pickling, copying or cloning; a process forked while a call held it makes
  a new one (:func:`streamfit._kernels._threads.object_lock`).
- **Pickling a consistent state.** ``__getstate__`` takes the lock and copies
  the state arrays, so pickling from one thread while another fits gives the
  state between two calls, never one half-updated by a kernel.
- **Atomic commits.** ``with deferred_signals():`` around the few assignments
  that publish a call's new state: a Ctrl-C (or a timer's signal) that
  arrives there is held back until they are all done, and raised then.
"""
from __future__ import annotations

import contextlib
import functools
import signal
import threading
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:   # scikit-learn's bases, typed (see streamfit/_typing.pyi)
    from collections.abc import Callable, Iterator
    from typing import Any

    from ._typing import P, R, BaseEstimator, RegressorMixin
else:
    from sklearn.base import BaseEstimator, RegressorMixin

from ._kernels._threads import call_holding, object_lock

__all__ = ["StreamEstimator", "deferred_signals", "serialized"]

# Attributes that are never pickled: the lock, and caches rebuilt on demand.
_TRANSIENT = ("_lock",)


# The signals whose Python handlers a commit holds back: SIGINT
# (KeyboardInterrupt), and those a program or a test harness commonly turns
# into exceptions (timers, termination, user signals).
_DEFERRED = tuple(getattr(signal, name) for name in
                  ("SIGINT", "SIGALRM", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")
                  if hasattr(signal, name))


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold signals with Python handlers back for the duration of the block,
    then deliver them.

    Python runs signal handlers in the main thread only, between bytecodes,
    so a KeyboardInterrupt (or an exception raised by a timer's handler) can
    land between two assignments of a commit and leave an estimator
    half-updated. Inside this block the handlers of SIGINT, SIGALRM, SIGTERM,
    SIGHUP, SIGUSR1 and SIGUSR2 (where they are Python callables) only record
    the signal; the original handlers run, in arrival order, when the block
    ends. Other threads never run signal handlers, so there the block does
    nothing.

    Examples
    --------
    >>> from streamfit._base import deferred_signals
    >>> with deferred_signals():
    ...     state = {"coef": 1.0}
    ...     state["n"] = 2              # a signal here waits for the block's end
    >>> state
    {'coef': 1.0, 'n': 2}
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    try:
        for signum in _DEFERRED:
            handler = signal.getsignal(signum)
            if callable(handler):       # SIG_IGN, SIG_DFL: nothing Python-level to defer
                previous[signum] = handler
    except ValueError:      # pragma: no cover - not the main interpreter
        previous = {}
    if not previous:
        yield
        return
    received = []
    for signum in previous:
        signal.signal(signum, lambda signum, frame: received.append((signum, frame)))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum, frame in received:
            previous[signum](signum, frame)

def serialized(method: Callable[P, R]) -> Callable[P, R]:
    """Run ``method`` holding its estimator's call lock (see the module
    docstring).

    >>> class Counter(StreamEstimator):
    ...     @serialized
    ...     def bump(self):
    ...         self.n_ = getattr(self, "n_", 0) + 1
    ...         return self
    >>> Counter().bump().bump().n_
    2
    """
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        lock = self._serialized()
        if "_torn" in self.__dict__ and method.__name__ not in _REFITS:
            raise RuntimeError(
                f"{type(self).__name__}.{method.__name__}: this process was forked while "
                f"another thread was inside a call on this estimator, which updates its "
                f"arrays in place: its state here may hold part of a trial. Call fit() to "
                f"start afresh, or load a copy pickled before the fork")
        return call_holding(lock, method, self, *args, **kwargs)
    # (the wrapper's own signature is the method's, through functools.wraps)
    return call  # type: ignore[return-value]


# calls that start afresh, and so may run on a state torn by a fork
_REFITS = ("fit", "fit_dense")


class StreamEstimator(BaseEstimator):
    """scikit-learn's BaseEstimator with a per-estimator call lock (see the
    module docstring). Subclasses list in ``_TRANSIENT_ATTRS`` the private
    caches that pickling should drop."""

    _TRANSIENT_ATTRS: tuple[str, ...] = ()

    def _serialized(self):
        return object_lock(self)

    def _forked_mid_call(self):
        # This process was forked while another thread was inside a call on
        # this estimator. Estimators that publish a new state with one
        # assignment at the end of a call keep the state before it; those
        # whose kernels update their arrays in place (_IN_PLACE) may hold
        # part of a trial: they refuse every call but fit until refitted.
        if getattr(self, "_IN_PLACE", ()):
            self.__dict__["_torn"] = True

    @serialized
    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        return {key: (value.copy() if isinstance(value, np.ndarray) else value)
                for key, value in state.items()
                if key not in _TRANSIENT and key not in self._TRANSIENT_ATTRS}

    def __copy__(self) -> Any:
        # copy.copy: the parameters shared, a state object copied (the
        # original's later calls must not change the copy)
        new = type(self).__new__(type(self))
        new.__dict__.update({key: (value.copy() if hasattr(value, "to_state") else value)
                             for key, value in self.__dict__.items() if key not in _TRANSIENT})
        return new

    def __setstate__(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict):
            raise ValueError(f"{type(self).__name__} pickle: the state is a "
                             f"{type(state).__name__}, not a dict (a corrupted or foreign "
                             f"pickle?)")
        missing = sorted(set(self._get_param_names()) - set(state))
        if missing:
            raise ValueError(f"{type(self).__name__} pickle: no value for the parameters "
                             f"{missing} (a corrupted or foreign pickle?)")
        state = {key: value for key, value in state.items() if key not in _TRANSIENT}
        super().__setstate__(state)


class StreamRegressor(RegressorMixin, StreamEstimator):
    """A StreamEstimator that is a scikit-learn regressor: finite input, a
    required 1-d target, fitted once ``_fit_`` holds a state, and
    ``poor_score`` (an online pass over the few hundred rows of scikit-learn's
    checks does not reach the offline R^2 of 0.5 they ask of regressors)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.target_tags.required = True
        tags.target_tags.single_output = True
        tags.regressor_tags.poor_score = True
        return tags

    def __sklearn_is_fitted__(self) -> bool:
        return "_fit_" in self.__dict__
