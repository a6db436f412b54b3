"""Delivering SIGINT at an exact line of streamfit's Python code, and asking
whether a lock was left held. Imported relatively (pytest's importlib mode
puts no test folder on sys.path)."""
import os
import signal
import sys
import threading

import streamfit

SRC = os.path.dirname(streamfit.__file__)


def sigint_at_line(count, prefix=SRC):
    """A trace function delivering SIGINT at the `count`-th line executed in
    files under ``prefix`` (streamfit's Python code by default): it calls the
    SIGINT handler installed at that moment, as Python's signal machinery
    would -- KeyboardInterrupt there, or deferred_signals' recorder inside a
    commit."""
    seen = [0]

    def local(frame, event, arg):
        if event == "line":
            seen[0] += 1
            if seen[0] == count:
                handler = signal.getsignal(signal.SIGINT)
                if callable(handler):
                    handler(signal.SIGINT, frame)
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(prefix) else None

    return tracer


def lines_run(call, prefix=SRC):
    """How many lines of the Python code under ``prefix`` call() executes."""
    seen = [0]

    def local(frame, event, arg):
        seen[0] += event == "line"
        return local

    outer = sys.gettrace()
    sys.settrace(lambda f, e, a: local if f.f_code.co_filename.startswith(prefix) else None)
    try:
        call()
    finally:
        sys.settrace(outer)
    return seen[0]


def interrupted_at(line, call, prefix=SRC):
    """call() with a SIGINT at its line-th line: whether it finished."""
    outer = sys.gettrace()
    sys.settrace(sigint_at_line(line, prefix))
    try:
        call()
        return True
    except KeyboardInterrupt:
        return False
    finally:
        sys.settrace(outer)


def held_elsewhere(lock):
    """Whether another thread would wait for ``lock`` now (an RLock is
    re-entrant for the thread holding it, so ask from a second thread)."""
    got = []

    def probe():
        if lock.acquire(blocking=False):
            got.append(True)
            lock.release()

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    return not got
