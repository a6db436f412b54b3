# Polling for signals from a nogil loop by the work done: every kernel (the
# quantile and low-rank rows, the PCA trials) counts about one element
# operation a nanosecond and calls _common.pxd's interrupted() (a GIL round
# trip, ~1 us) after POLL_WORK of it, ~1 ms: polling adds ~0.1% and never
# changes a result. Counting work needs no clock, so nothing here depends on
# the platform.
#
# Signals run in the main thread only; other threads never poll (a GIL round
# trip there would buy nothing).
#
# A test hook makes a poll exact: armed with (polls, signum), the loop polls
# before every step and raises the real signal `signum` with C's raise() at
# poll number `polls` (0-based, counted across calls) of the main thread,
# once; its Python handler decides what happens (a raising handler stops the
# kernel), and polling goes back to its usual rate. Module globals cannot live
# in a .pxd: each kernel module owns one WorkHook (its rate and test hook)
# and a two-line def _interrupt_at that arms it.
from cpython.pythread cimport PyThread_get_thread_ident
from libc.signal cimport raise_

from _common cimport interrupted

cdef enum:
    POLL_WORK = 1 << 20   # work between two polls: ~1 ms
    ROW_WORK = 48         # a row's overhead beyond its d products, in element operations


ctypedef struct WorkHook:
    unsigned long main_thread   # the thread that runs signal handlers
    double every                # work between two polls: POLL_WORK, 0 while armed
    long long countdown         # polls left before the test signal; -1: off
    int signum


cdef struct Poll:
    WorkHook *hook        # the module's rate and test hook
    bint on               # the main thread: poll for signals
    double work           # work since the last poll


cdef inline WorkHook new_work_hook():
    # a module's hook at import: disarmed, the usual rate
    import threading
    cdef WorkHook h
    h.main_thread = threading.main_thread().ident
    h.every = POLL_WORK
    h.countdown = -1
    h.signum = 0
    return h


cdef inline void arm_hook(WorkHook *h, long long polls, int signum) noexcept:
    # _interrupt_at's body: polls < 0 disarms
    h.countdown = polls
    h.signum = signum
    h.every = 0.0 if polls >= 0 else POLL_WORK


cdef inline void poll_init(Poll *pl, WorkHook *hook) noexcept:
    pl.hook = hook
    pl.on = PyThread_get_thread_ident() == hook.main_thread
    pl.work = 0.0


cdef inline void poll_quiet(Poll *pl, WorkHook *hook) noexcept nogil:
    # A poller that never polls, for work that must not be interrupted (or
    # runs where no signal is wanted).
    pl.hook = hook
    pl.on = False
    pl.work = 0.0


cdef inline void hook_step(WorkHook *h) noexcept nogil:
    # one poll of the armed hook: the signal at its poll, else count down
    if h.countdown == 0:
        h.countdown = -1
        h.every = POLL_WORK
        raise_(h.signum)      # a real signal: the Python handler runs in interrupted()
    else:
        h.countdown -= 1


cdef inline bint poll_stop(Poll *pl, double work) noexcept nogil:
    # True when a signal handler raised: the caller stops before its next
    # whole step. Called once per step with that step's work.
    pl.work += work
    if pl.work < pl.hook.every:
        return False
    pl.work = 0.0
    if pl.hook.countdown >= 0 and pl.on:
        hook_step(pl.hook)
    return pl.on and interrupted()


cdef inline bint poll_final(Poll *pl) noexcept nogil:
    # After the last whole step of a call that did work since its last poll
    # (a storage step's order statistics, the tail of a long loop): a signal
    # that came meanwhile is reported with the state after those steps,
    # instead of surfacing in Python after the call (which then discards
    # them). Short calls skip it: a GIL round trip costs ~1 us.
    if pl.work < pl.hook.every * 0.125:
        return False
    pl.work = 0.0
    if pl.hook.countdown >= 0 and pl.on:
        hook_step(pl.hook)
    return pl.on and interrupted()
