# Polling for signals from a nogil trial loop at a steady rate, whatever a
# trial costs: _common.pxd's interrupted() takes the GIL (~1 us), so the PCA
# kernels call it when a millisecond has passed since the last check, read
# off the monotonic clock (~20 ns through the vDSO) before each trial. A trial
# of FPL at n = 1000 (~6 ms) polls every time; one at n = 20 (~20 us) about
# every 50 trials. Polling never changes a result.
#
# A test hook makes a poll exact: armed with (polls, signum), the loop counts
# its polls (one before each trial) and raises the real signal `signum` at
# poll number `polls`, whose Python handler then runs as a Ctrl-C's would.
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from libc.signal cimport raise_

from _common cimport interrupted


ctypedef struct PollHook:
    long long countdown     # polls left before the signal is raised; -1: off
    int signum


cdef inline double monotonic_seconds() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double> ts.tv_sec + 1e-9 * <double> ts.tv_nsec


cdef inline double poll_start() noexcept nogil:
    # the time of the first check: a call shorter than that never polls
    return monotonic_seconds() + 1e-3


cdef inline bint poll_interrupted(double *due, PollHook *hook) noexcept nogil:
    # interrupted(), at most once a millisecond (or at the hook's poll):
    # call between whole steps
    cdef double now
    if hook.countdown >= 0:
        if hook.countdown > 0:
            hook.countdown -= 1
            return False
        hook.countdown = -1
        raise_(hook.signum)
        return interrupted()
    now = monotonic_seconds()
    if now < due[0]:
        return False
    due[0] = now + 1e-3
    return interrupted()
