# The first decision's exact solve, interruptible: see topk_exact_polled.
from _common cimport OK, ERR_INTERRUPTED
from _work_poll cimport Poll, poll_stop
from _topk cimport TopKWork, TopKState, topk_exact

cdef enum:
    # below this order an exact solve takes under ~50 ms: not worth polling
    POLLED_MIN_N = 512


cdef inline int topk_exact_polled(TopKWork *w, const double *S, double *V, TopKState *st,
                                  Poll *pl) noexcept nogil:
    # topk_exact, with polls for a signal before it
    if w.n >= POLLED_MIN_N and poll_stop(pl, 1e300):
        return ERR_INTERRUPTED
    return topk_exact(w, S, V, st)
