# Polling for signals from a nogil trial loop at a steady rate, whatever a
# trial costs: _common.pxd's interrupted() takes the GIL (~1 us), so the PCA
# kernels call it when a millisecond has passed since the last check, read off
# the monotonic clock (~20 ns through the vDSO) after each whole trial. A
# trial of FPL at n = 1000 (~6 ms) polls after every trial; one at n = 20
# (~20 us) every ~50 trials. Polling never changes a result.
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC

from _common cimport interrupted



cdef inline double monotonic_seconds() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double> ts.tv_sec + 1e-9 * <double> ts.tv_nsec


cdef inline double poll_start() noexcept nogil:
    # the time of the first check
    return monotonic_seconds() + 1e-3


cdef inline bint poll_interrupted(double *due) noexcept nogil:
    # interrupted(), at most once a millisecond: call between whole steps
    cdef double now = monotonic_seconds()
    if now < due[0]:
        return False
    due[0] = now + 1e-3
    return interrupted()
