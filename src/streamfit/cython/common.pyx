# The compiled side of common.pxd: it hands interrupted() to the modules that
# cimport it (Cython's function-pointer table, as scipy.linalg.cython_blas).
cimport _common
import streamfit.cython

from cpython.exc cimport PyErr_Occurred


cdef bint interrupted() noexcept nogil:
    return _common.interrupted()


cdef int raise_pending() except -1:
    if PyErr_Occurred() == NULL:
        raise KeyboardInterrupt()
    return -1           # Cython raises the exception already set


# The declarations must say what the package and the kernels say: the version
# a Python caller reads, the codes the primitives return.
if streamfit.cython.API_VERSION != API_VERSION:
    raise ImportError("streamfit.cython.common: API_VERSION differs from common.pxd's")
if (OK, ERR_NOMEM, ERR_LAPACK, ERR_INTERRUPTED, ERR_NONFINITE, ERR_BADINPUT, ERR_SCALE,
        ERR_LAYOUT) != (_common.OK, _common.ERR_NOMEM, _common.ERR_LAPACK,
                        _common.ERR_INTERRUPTED, _common.ERR_NONFINITE, _common.ERR_BADINPUT,
                        _common.ERR_SCALE, _common.ERR_LAYOUT):
    raise ImportError("streamfit.cython.common: its codes differ from the kernels'")
