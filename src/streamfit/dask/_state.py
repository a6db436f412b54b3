"""Estimators as bytes: what travels between the client and the workers.

A task never updates an estimator object it was handed: it unpickles the
state it depends on, updates that copy and returns new bytes. So a task that
is re-run (a worker died) starts from the same state, and the caller's
estimator changes only when the whole computation has succeeded.
"""
from __future__ import annotations

import pickle

from .._base import deferred_signals
from .._kernels._threads import call_holding

__all__ = ["snapshot", "adopt", "caller_lock", "add_note"]

# never part of a state, whatever a class's __getstate__ says
_TRANSIENT = ("_lock",)


def caller_lock(estimator, func, *args):
    """func(*args) holding the estimator's call lock (streamfit estimators;
    other estimators have none): a stream_fit takes its turn like any other
    call that changes the state, for as long as it runs. The lock is taken
    in compiled code (call_holding), as the estimators' own calls take it: a
    KeyboardInterrupt on a Python with-statement's exit line would leave it
    held and every later call waiting."""
    serialized = getattr(estimator, "_serialized", None)
    if not callable(serialized):
        return func(*args)
    had_lock = "_lock" in vars(estimator)
    out = call_holding(serialized(), func, *args)
    # A class whose __getstate__ keeps the lock (one not built on
    # StreamEstimator, whose __getstate__ leaves it out) could not be pickled
    # or copied with one: take away the lock made here.
    if not had_lock and "_lock" in estimator.__getstate__():
        vars(estimator).pop("_lock", None)
    return out


def snapshot(estimator):
    """The estimator's pickle, without its lock.

    Equivalent to ``pickle.dumps(estimator)`` for a class that pickles its
    ``__getstate__`` (scikit-learn estimators): a fresh instance gets the
    state by ``__setstate__`` and is pickled; the lock is dropped on the way
    even if a subclass's ``__getstate__`` keeps it.
    """
    cls = type(estimator)
    state = estimator.__getstate__() if hasattr(estimator, "__getstate__") else \
        dict(vars(estimator))
    if isinstance(state, dict):
        state = {key: value for key, value in state.items() if key not in _TRANSIENT}
    copy = cls.__new__(cls)
    if hasattr(copy, "__setstate__"):
        copy.__setstate__(state)
    else:       # pragma: no cover - every object has __setstate__ since Python 3.11
        vars(copy).update(state)
    return pickle.dumps(copy, protocol=pickle.HIGHEST_PROTOCOL)


def adopt(target, state):
    """Make ``target`` hold the fitted state (bytes from a worker): its
    attributes become those of the unpickled estimator, in one step that a
    Ctrl-C cannot split. The caller holds the target's lock."""
    fitted = pickle.loads(state)
    if type(fitted) is not type(target):    # pragma: no cover - the tasks keep the class
        raise TypeError(f"internal error: fitted a {type(fitted).__name__}, expected "
                        f"a {type(target).__name__}")
    new = {key: value for key, value in vars(fitted).items() if key not in _TRANSIENT}
    with deferred_signals():
        for key in [key for key in vars(target) if key not in new and key not in _TRANSIENT]:
            del vars(target)[key]
        vars(target).update(new)
    return target


def add_note(exc, note):
    """Say where an exception happened (PEP 678 notes, shown in tracebacks;
    they travel with the exception when a worker pickles it)."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    return exc
