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
  pickling, copying or cloning.
- **Pickling a consistent state.** ``__getstate__`` takes the lock and copies
  the state arrays, so pickling from one thread while another fits gives the
  state between two calls, never one half-updated by a kernel.
- **Atomic commits.** ``with deferred_signals():`` around the few assignments
  that publish a call's new state: a Ctrl-C that arrives there is held back
  until they are all done, and raised then.
"""
from __future__ import annotations

import contextlib
import functools
import signal
import threading

import numpy as np
from sklearn.base import BaseEstimator

from ._kernels._threads import call_holding

__all__ = ["StreamEstimator", "deferred_signals", "serialized"]

# Attributes that are never pickled: the lock, and caches rebuilt on demand.
_TRANSIENT = ("_lock",)


@contextlib.contextmanager
def deferred_signals():
    """Hold SIGINT back for the duration of the block, then deliver it.

    Python runs signal handlers in the main thread only, between bytecodes,
    so a KeyboardInterrupt can land between two assignments of a commit and
    leave an estimator half-updated. Inside this block the handler only
    records the signal; the original handler runs when the block ends. Other
    threads never receive KeyboardInterrupt, so there the block does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        previous = signal.getsignal(signal.SIGINT)
    except ValueError:      # pragma: no cover - not the main interpreter
        yield
        return
    if not callable(previous):
        # SIG_IGN or SIG_DFL: nothing Python-level to defer
        yield
        return
    received = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append((signum, frame)))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            previous(*received[0])


def serialized(method):
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
    def call(self, *args, **kwargs):
        return call_holding(self._serialized(), method, self, *args, **kwargs)
    return call


class StreamEstimator(BaseEstimator):
    """scikit-learn's BaseEstimator with a per-estimator call lock (see the
    module docstring). Subclasses list in ``_TRANSIENT_ATTRS`` the private
    caches that pickling should drop."""

    _TRANSIENT_ATTRS = ()

    def _serialized(self):
        lock = self.__dict__.get("_lock")
        if lock is None:
            # dict.setdefault is atomic under the GIL: two threads racing on a
            # fresh estimator get the same lock
            lock = self.__dict__.setdefault("_lock", threading.RLock())
        return lock

    @serialized
    def __getstate__(self):
        state = super().__getstate__()
        return {key: (value.copy() if isinstance(value, np.ndarray) else value)
                for key, value in state.items()
                if key not in _TRANSIENT and key not in self._TRANSIENT_ATTRS}

    def __setstate__(self, state):
        state = {key: value for key, value in state.items() if key not in _TRANSIENT}
        super().__setstate__(state)
