# FPL's one-BLAS-thread policy (see streamfit.pca._common: why one thread).
#
# Compiled, not Python, for one reason: a KeyboardInterrupt can land between
# any two lines of Python code, and one landing inside these bodies left the
# lock held (the next call waited forever) or the count taken with no exit to
# give it back (a test delivering SIGINT at every line of a call found both).
# Here the count changes in C right after the lock is taken, with no bytecode
# in between; only threadpoolctl's own Python code can still be interrupted,
# and then the count is already right.
import os
import threading

from threadpoolctl import ThreadpoolController


cdef _set_threads(lib, int count):
    # threadpoolctl (>= 3.6) lets only one "controlling" Python thread change
    # a pthreads OpenBLAS's process-wide count and silently ignores the others,
    # so a fit in a worker thread would keep the multi-threaded BLAS. The count
    # below already keeps concurrent calls from fighting over it: the library's
    # own setter, where threadpoolctl has one.
    getattr(lib, "_real_set_num_threads", lib.set_num_threads)(count)


cdef class OneBlasThread:
    """Runs the BLAS of the calls inside it on one thread and restores the
    libraries' counts when the last call still inside ends (a count shared by
    concurrent calls: the first one in sets it, the last one out restores it)."""

    cdef object _lock
    cdef Py_ssize_t _users
    cdef list _saved
    cdef object _blas

    def __cinit__(self):
        self._lock = threading.Lock()
        self._users = 0
        self._saved = []
        self._blas = None

    @property
    def users(self):
        return self._users

    @property
    def concurrent_calls_safe(self):
        """Whether every BLAS library threadpoolctl finds may be called from
        several threads at once (FPL's trial loop does, on its own threads):
        OpenBLAS built on pthreads (its other builds are only safe with
        USE_LOCKING, which they do not report), MKL, BLIS. False until a
        call has looked the libraries up, and for anything unknown."""
        if not self._blas:
            return False
        for lib in self._blas:
            api = lib.internal_api
            if api == "openblas":
                if getattr(lib, "threading_layer", None) != "pthreads":
                    return False
            elif api not in ("mkl", "blis"):
                return False
        return True

    @property
    def outer_threads(self):
        """Inside a call: the largest BLAS thread count the libraries had
        before the limit (what the caller set: threadpoolctl,
        OPENBLAS_NUM_THREADS); 0 when unknown or outside a call."""
        if self._users == 0:
            return 0
        return max([c for c in self._saved if c is not None] or [0])

    def __enter__(self):
        with self._lock:
            self._users += 1
            if self._users == 1:
                try:
                    if self._blas is None:
                        # after the kernels loaded scipy's BLAS (they import it)
                        self._blas = ThreadpoolController().select(
                            user_api="blas").lib_controllers
                    self._saved = [lib.num_threads for lib in self._blas]
                    for lib, count in zip(self._blas, self._saved):
                        if count is not None and count != 1:   # None: count unknown
                            _set_threads(lib, 1)
                except BaseException:
                    self._users -= 1
                    self._restore()
                    raise
        return self

    def __exit__(self, *exc):
        with self._lock:
            self._users -= 1
            if self._users == 0:
                self._restore()
        return False

    cdef _restore(self):
        if self._blas is None:
            return
        for lib, count in zip(self._blas, self._saved):
            if count is not None and count != 1:
                _set_threads(lib, count)


one_blas_thread = OneBlasThread()


def call_one_blas_thread(lock, func, *args):
    """func(*args) holding `lock` (a bit generator's) and on one BLAS thread.

    The with-statements are here, compiled, because in Python the exit path of
    a with-statement starts with a line of its own, where a KeyboardInterrupt
    can land before __exit__ runs: the lock then stays held and the next call
    waits forever. Compiled code runs no bytecode between the body and the
    exits, so no signal handler runs there.
    """
    with lock:
        with one_blas_thread:
            return func(*args)


def call_holding(lock, func, *args, **kwargs):
    """func(*args, **kwargs) holding `lock`, the exit compiled (see
    call_one_blas_thread)."""
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


def _after_fork_in_child():
    global _forks, _guard
    _forks += 1
    _guard = threading.Lock()     # (it may have been held at the fork too)


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
