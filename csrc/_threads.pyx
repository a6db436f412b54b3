# Locks around calls, and the OpenMP runtime's thread count.
#
# Compiled, not Python, for one reason: a KeyboardInterrupt can land between
# any two lines of Python code, and in a Python with-statement it can land
# on the exit line, before __exit__ runs: the lock then stays held and the
# next call from another thread waits forever (a test delivering SIGINT at
# every line of a call found it). Compiled code runs no bytecode between the
# body and the exit, so no signal handler runs there.
cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #else
    static int omp_get_max_threads(void) { return 1; }
    #endif
    """
    int omp_get_max_threads() noexcept nogil

import os
import threading


def call_holding(lock, func, *args, **kwargs):
    """func(*args, **kwargs) holding `lock`, the exit compiled (see the top
    of this file)."""
    with lock:
        return func(*args, **kwargs)


# --- call locks that survive fork ---------------------------------------------
#
# A lock held by a thread when another thread forks stays held in the child,
# where its holder does not exist: the child's next call on that object would
# wait forever. Each object's lock is kept with the count of forks this
# process had when it was made; in a child (the count has moved) the first
# call finds it stale and makes a new one, after telling the object (its
# `_forked_mid_call` method, if it has one) when the old lock was held: the
# call in flight at the fork is gone with its thread.

cdef Py_ssize_t _forks = 0
cdef object _guard = threading.Lock()
# OpenMP's threads do not survive fork either: libgomp's pool in a child
# still counts the parent's threads, and the child's first parallel region
# waits for them forever. A process that started them marks it here; its
# forked children run their loops on one thread (effective_n_threads).
cdef bint _started = False
cdef bint _forked_after_start = False


def _after_fork_in_child():
    global _forks, _guard, _forked_after_start
    _forks += 1
    _guard = threading.Lock()     # (it may have been held at the fork too)
    _forked_after_start = _forked_after_start or _started


os.register_at_fork(after_in_child=_after_fork_in_child)


def object_lock(obj):
    """The call lock of ``obj``: an ``RLock`` kept in ``obj.__dict__`` under
    ``_lock`` (drop it when pickling or copying), made on first use, and made
    afresh in a process forked from the one that made it."""
    entry = obj.__dict__.get("_lock")
    if entry is not None and entry[0] == _forks:
        return entry[1]
    with _guard:
        entry = obj.__dict__.get("_lock")
        if entry is None or entry[0] != _forks:
            if entry is not None and not _is_free(entry[1]):
                hook = getattr(obj, "_forked_mid_call", None)
                if hook is not None:
                    hook()
            entry = (_forks, threading.RLock())
            obj.__dict__["_lock"] = entry
        return entry[1]


cdef bint _is_free(lock):
    if lock.acquire(blocking=False):
        lock.release()
        return True
    return False



def openmp_started(int threads):
    """Note that a kernel is about to run parallel regions on ``threads``
    OpenMP threads (nothing to note for one)."""
    global _started
    if threads > 1:
        _started = True


def openmp_forked():
    """Whether this process was forked from one whose OpenMP threads had
    started: its parallel regions would wait for them forever, so its
    kernels run on one thread."""
    return _forked_after_start


def openmp_max_threads():
    """The OpenMP runtime's thread count for the next parallel region of the
    calling thread (omp_get_max_threads: OMP_NUM_THREADS, or what
    threadpoolctl's ``threadpool_limits(user_api="openmp")`` set); 1 in a
    build without OpenMP."""
    return omp_get_max_threads()
