"""Estimators as bytes: what travels between the client and the workers, and
how the caller's estimator takes the cluster's result.

A task never updates an estimator object it was handed: it unpickles the
state it depends on, updates that copy and returns new bytes. So a task that
is re-run (a worker died) starts from the same state, and the caller's
estimator changes only when the whole computation has succeeded.

The caller's side is the state-object design of the estimators (issue 39):
an estimator's learnt state is one compiled object, ``__dict__["_state"]``,
which takes one call at a time under its own lock (taken in C). Taking the
state is pickling the estimator (the state object pickles itself under that
lock: a state between two calls, whatever other threads do); committing is
one assignment of the fitted estimator's state object, which no signal can
split (no bytecode runs inside it). No Python-level lock is held while the
cluster works.

Estimators without a state object (a scikit-learn estimator, or an unfitted
streamfit one) are taken the same way and committed by one assignment of
their ``__dict__``.
"""
from __future__ import annotations

import pickle

__all__ = ["take_state", "commit", "add_note"]

def _state_object(estimator):
    obj = vars(estimator).get("_state") if hasattr(estimator, "__dict__") else None
    if obj is not None and callable(getattr(obj, "to_state", None)) and \
            callable(getattr(obj, "copy", None)):
        return obj
    return None


def take_state(estimator):
    """The estimator's state as bytes (its pickle), for the workers and for
    commit() to check that nothing changed meanwhile. A state object pickles
    itself under its own lock: the state between two calls."""
    return pickle.dumps(estimator, protocol=pickle.HIGHEST_PROTOCOL)


def _changed(estimator):
    return RuntimeError(
        f"stream_fit: the {type(estimator).__name__} changed while its chunks were fitted on "
        f"the cluster (another call fitted it or set its parameters); the cluster's result "
        f"was not applied, so that neither is lost: re-run stream_fit from its current state")


def _progress(state):
    """How far a state object has learnt: its rows (the linear learners),
    trials (online PCA) or samples (low rank)."""
    for name in ("n_samples_seen", "n_trials_", "n_seen"):
        value = getattr(state, name, None)
        if value is not None:
            return value
    return None


def commit(estimator, before, fitted_bytes):
    """Make ``estimator`` hold the state the cluster fitted (bytes from a
    worker), unless it changed since ``before`` was taken (RuntimeError,
    the estimator as the other call left it)."""
    fitted = pickle.loads(fitted_bytes)
    if type(fitted) is not type(estimator):    # pragma: no cover - the tasks keep the class
        raise TypeError(f"internal error: fitted a {type(fitted).__name__}, expected "
                        f"a {type(estimator).__name__}")
    new = _state_object(fitted)
    if new is not None:
        current = vars(estimator).get("_state")
        seen = None if current is None else _progress(current)
        if take_state(estimator) != before:
            raise _changed(estimator)
        # A call from another thread since the comparison above moved the
        # state's row count (or replaced the object): refused as above. After
        # this check the assignment follows with nothing called in between,
        # so no other thread's bytecode and no signal handler runs there. (A
        # call that has fetched the state object but not yet entered it is
        # the one race left: its rows would go to the replaced object, as
        # with a concurrent fit(). Feed one estimator from one place.)
        state = vars(estimator).get("_state")
        if state is not current or (state is not None and _progress(state) != seen):
            raise _changed(estimator)
        # the learnt state is all in the state object (the fitted estimator's
        # other attributes are the parameters it was sent with)
        vars(estimator)["_state"] = new        # one assignment publishes the result
        return estimator
    # an estimator without a state object: its attributes become the fitted
    # one's, by one assignment of __dict__
    if take_state(estimator) != before:
        raise _changed(estimator)
    estimator.__dict__ = dict(vars(fitted))
    return estimator


def add_note(exc, note):
    """Say where an exception happened (PEP 678 notes, shown in tracebacks;
    they travel with the exception when a worker pickles it)."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    return exc
