# What every streamfit primitive shares: its return codes, the API version it
# was compiled against, and polling for signals from inside a nogil loop.
#
# Codes. Every int-returning primitive returns OK or one of the negative codes
# below. They sit far below LAPACK's `info` values (-n..n), which never travel
# as codes: a LAPACK routine that fails is retried down a fallback chain
# (streamfit.cython.eigen), and its last `info` is kept beside ERR_LAPACK.

cdef enum:
    # Compare with the installed package's streamfit.cython.API_VERSION at
    # import: a module built against another version may misread a struct.
    API_VERSION = 2

cdef enum:
    OK = 0
    ERR_NOMEM = -1001         # a work space could not be allocated (before any state changed)
    ERR_LAPACK = -1002        # every routine of a LAPACK fallback chain failed
    ERR_INTERRUPTED = -1003   # a signal handler raised (Ctrl-C): the loop stopped between steps
    ERR_NONFINITE = -1004     # the iterate left the finite range (a too large stepsize)
    ERR_BADINPUT = -1005      # a row whose residual is not finite (NaN/inf in X or y)
    ERR_SCALE = -1006         # ||x||^2 overflows float64: the features need rescaling
    ERR_LAYOUT = -1007        # a state or work array of the wrong length or layout

# LAPACK's integer, as the work spaces' fields hold it
ctypedef int blas_int


cdef bint interrupted() noexcept nogil
    # True when a Python signal handler raised (Ctrl-C); the exception stays
    # set for the caller to raise once it holds the GIL and its state is
    # consistent: with raise_pending(), not `raise KeyboardInterrupt` (an
    # exception already set makes that a SystemError). Takes the GIL for a
    # moment (~1 us): call it about once a millisecond of work and stop
    # between whole steps:
    #
    #   cdef bint stopped = False
    #   with nogil:
    #       for i in range(n):
    #           if i % 1000 == 0 and interrupted():
    #               stopped = True
    #               break
    #           ...                           # one whole step
    #   if stopped:
    #       raise_pending()                   # the handler's own exception

cdef int raise_pending() except -1
    # Raise the exception a signal handler left set (after interrupted()
    # returned True; KeyboardInterrupt if none is set). Always returns -1
    # with the exception raised.
