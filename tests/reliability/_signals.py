"""Delivering SIGINT at an exact line of streamfit's Python code, and asking
whether a lock was left held. Imported relatively (pytest's importlib mode
puts no test folder on sys.path)."""
import os
import threading

import streamfit
# the contract suite's tracer: the tests interrupt calls exactly as
# check_interrupt does
from streamfit.utils.estimator_checks import _traced

SRC = os.path.dirname(streamfit.__file__)


def lines_run(call, prefix=SRC):
    """How many lines of the Python code under ``prefix`` call() executes."""
    return _traced(call, (prefix,))


def interrupted_at(line, call, prefix=SRC):
    """call() with a SIGINT at its line-th line under ``prefix`` (the handler
    installed then is called, as Python's signal machinery would: a
    KeyboardInterrupt): whether call() finished."""
    try:
        _traced(call, (prefix,), at_line=line)
        return True
    except KeyboardInterrupt:
        return False


def blocked_elsewhere(obj, timeout=30.0):
    """Whether a call on ``obj`` (a state object, or a first call's gate)
    from another thread would wait: their locks are C structs, so ask by
    calling from a second thread with a deadline."""
    done = []

    def probe():
        if hasattr(obj, "to_state"):
            obj.to_state()
        else:
            obj.run(lambda: None)
        done.append(True)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return not done
