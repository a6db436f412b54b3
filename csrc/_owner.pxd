# One call at a time per state object, taken and given back in C.
#
# Every state object (one cdef class per learner family: the linear SGD
# learner, the interval learner, the PCA families, the low-rank learner)
# embeds a CallLock and brackets each public method that reads or writes its
# state with lock_enter / lock_leave (try/finally). Nothing else serialises
# calls: no Python-level lock, no signal-handler swapping.
#
# - A second thread waits (serialised, never refused or lost). It waits with
#   the GIL released, in slices of 20 ms between which it runs the signal
#   handlers: Ctrl-C reaches a waiting main thread.
# - The same thread entering again (a signal handler that runs inside a
#   block call's poll and calls the same object) is refused with a
#   RuntimeError: waiting for itself would hang.
# - After a fork the lock is made afresh (its holder, if any, did not follow
#   the fork); `forked_mid_call` tells a family whose calls write their state
#   in place that a call was in flight (families that commit by swapping
#   buffers are whole in the child whatever the parent was doing).
#
# One-row calls run start to end holding the GIL and call no Python code, so
# no signal handler can run inside them; block calls release the GIL, poll
# for signals by their work (_work_poll.pxd) and commit by swapping buffers.
from cpython.pythread cimport (PyThread_type_lock, PyThread_allocate_lock,
                               PyThread_free_lock, PyThread_release_lock,
                               PyThread_get_thread_ident)
from cpython.exc cimport PyErr_CheckSignals

cdef extern from "pythread.h" nogil:
    ctypedef enum PyLockStatus:
        PY_LOCK_FAILURE
        PY_LOCK_ACQUIRED
        PY_LOCK_INTR
    PyLockStatus PyThread_acquire_lock_timed(PyThread_type_lock, long long microseconds,
                                             int intr_flag)

cdef extern from "_owner.h":
    int sf_owner_init() noexcept
    long sf_owner_generation() noexcept nogil


cdef struct CallLock:
    PyThread_type_lock lock
    long generation           # sf_owner_generation() when the lock was made
    unsigned long holder      # the holding thread's ident, 0 when free
    bint forked_mid_call      # a fork found it held: the call in flight is gone


cdef inline int lock_init(CallLock *c) except -1:
    # Call once from __cinit__ (the module called sf_owner_init at import).
    c.lock = PyThread_allocate_lock()
    if c.lock == NULL:
        raise MemoryError("could not allocate a lock")
    c.generation = sf_owner_generation()
    c.holder = 0
    c.forked_mid_call = False
    return 0


cdef inline void lock_free(CallLock *c) noexcept:
    # from __dealloc__: nobody holds a lock whose object is being freed
    if c.lock != NULL:
        PyThread_free_lock(c.lock)
        c.lock = NULL


cdef inline int _lock_after_fork(CallLock *c) except -1:
    # In a child of a fork: a new lock (the old one may be held by a thread
    # that does not exist here; it is left allocated, never freed held).
    cdef PyThread_type_lock fresh = PyThread_allocate_lock()
    if fresh == NULL:
        raise MemoryError("could not allocate a lock")
    if c.holder != 0:
        c.forked_mid_call = True
    c.lock = fresh
    c.holder = 0
    c.generation = sf_owner_generation()
    return 0


cdef inline int lock_enter(CallLock *c, str owner) except -1:
    # Take the object's call lock: at once if it is free (the usual case, no
    # system call beyond the lock's own), else wait with the GIL released.
    # `owner` names the object in the re-entry error.
    cdef unsigned long me = PyThread_get_thread_ident()
    cdef PyLockStatus got
    if c.generation != sf_owner_generation():
        _lock_after_fork(c)
    if PyThread_acquire_lock_timed(c.lock, 0, 0) == PY_LOCK_ACQUIRED:
        c.holder = me
        return 0
    if c.holder == me:
        raise RuntimeError(f"{owner}: called again by the thread that is inside a call on "
                           "it (from a signal handler?); the inner call was refused, the "
                           "outer one goes on")
    while True:
        with nogil:
            got = PyThread_acquire_lock_timed(c.lock, 20000, 0)
        if got == PY_LOCK_ACQUIRED:
            break
        PyErr_CheckSignals()      # a handler that raises ends the wait (lock not taken)
    c.holder = me
    return 0


cdef inline void lock_leave(CallLock *c) noexcept:
    c.holder = 0
    PyThread_release_lock(c.lock)
