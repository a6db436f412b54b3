# What every kernel shares at its boundary: return codes, numpy's random
# declarations, and polling for signals from inside a nogil loop.
#
# Codes. Every kernel entry returns one of these (Python turns them into
# exceptions in one place, streamfit._errors). They sit far below LAPACK's
# `info` values (-n..n), which never travel as codes: a LAPACK routine that
# fails is retried down a fallback chain (_eigen.pxd), and its last `info`
# is reported beside ERR_LAPACK, not as the code.
from numpy.random cimport bitgen_t   # numpy's own declaration of the bit generator

cdef extern from "numpy/random/distributions.h" nogil:
    # numpy's ziggurat and uniform: the same draws as Generator.standard_normal
    # and Generator.random
    void random_standard_normal_fill(bitgen_t *state, Py_ssize_t count, double *out)
    double random_standard_uniform(bitgen_t *state)

cdef enum:
    OK = 0
    ERR_NOMEM = -1001         # a work space could not be allocated (before any state changed)
    ERR_LAPACK = -1002        # every routine of a LAPACK fallback chain failed
    ERR_INTERRUPTED = -1003   # a signal handler raised (Ctrl-C): the loop stopped between steps
    ERR_NONFINITE = -1004     # the iterate left the finite range (a too large stepsize)
    ERR_BADINPUT = -1005      # a row whose residual is not finite (NaN/inf in X or y)
    ERR_SCALE = -1006         # ||x||^2 overflows float64: the features need rescaling
    ERR_LAYOUT = -1007        # a state or work array of the wrong length or layout

cdef extern from "Python.h":
    # Runs the Python-level signal handlers (main thread only; elsewhere 0).
    # Declared without Cython's exception check: a handler's exception (Ctrl-C's
    # KeyboardInterrupt) stays set for pending_exception() to take once the
    # loop has stopped and its state is consistent.
    int _check_signals_raw "PyErr_CheckSignals" () noexcept


cdef inline bint interrupted() noexcept nogil:
    # True when a signal handler raised; the caller stops between two whole
    # steps and returns ERR_INTERRUPTED. A GIL round trip costs ~1 us, so
    # loops call this about once a millisecond of work, not every step.
    cdef int r
    with gil:
        r = _check_signals_raw()
    return r != 0


cdef inline int _raise_set_exception() except -1:
    # Returning the error value makes Cython raise the exception already set.
    return -1


cdef inline object pending_exception():
    # The exception a signal handler left set (see interrupted()), taken off
    # the thread state; call only after interrupted() returned True.
    try:
        _raise_set_exception()
    except BaseException as exc:
        return exc
    return None


# Checking records a user may hand in (a state edited by hand, an edited
# pickle): a field outside the range a kernel relies on is refused before
# any of it is used as an index, count or loop bound.
cdef inline bint is_int(double v, double low, double high) noexcept nogil:
    # an integer value in [low, high] (NaN fails every compare)
    return v >= low and v <= high and v == <double> <long long> v


cdef inline bint is_real(double v, double low) noexcept nogil:
    # finite and >= low
    return v >= low and v - v == 0


cdef inline int bad_field(str record, str field, object value, str expect) except -1:
    raise ValueError(f"{record} record: field {field!r} is {value!r}, expected {expect} "
                     f"(a corrupted or foreign record?); it was not used")
