# The def entries of the kernels on the schedule's records (_quantile.pyx,
# _lowrank.pyx): the state and parameter records' buffers, checked, and the
# tuple every entry returns, (code, done, exc, row).
from cpython.buffer cimport (PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS,
                             PyBUF_WRITABLE)

from _common cimport ERR_INTERRUPTED, pending_exception
from _qr_schedule cimport SGDState, SGDParams


cdef inline int get_record(object arr, object dtype, str name, Py_ssize_t size, bint writable,
                           Py_buffer *buf) except -1:
    # A state or parameter record's buffer, checked: a (1,) array of exactly
    # `dtype` (names included: check_struct), C-contiguous, `size` bytes,
    # aligned for doubles, writable if asked. No buffer format is requested:
    # NumPy would spend ~3 us spelling out the record's 32 fields for Cython to
    # parse again, and the dtype check above says more than the format would.
    # The kernel's own dtype object and shape (1,) pass check_struct, so the
    # usual case skips that Python call. Release with PyBuffer_Release.
    if not (getattr(arr, "dtype", None) is dtype and getattr(arr, "shape", None) == (1,)):
        from streamfit._kernels._common import check_struct
        check_struct(arr, dtype, name)
    PyObject_GetBuffer(arr, buf, PyBUF_C_CONTIGUOUS | (PyBUF_WRITABLE if writable else 0))
    if buf.len != size or (<size_t> buf.buf) % sizeof(double) != 0:
        PyBuffer_Release(buf)
        raise ValueError(f"{name} must be an aligned record of {size} bytes")
    return 0


cdef struct Records:
    Py_buffer state
    Py_buffer params


cdef inline int take_records(object state, object state_dtype, object params,
                             object params_dtype, Records *r) except -1:
    # The two records' buffers, checked against the kernel module's dtypes
    # (its STATE_DTYPE, PARAMS_DTYPE); release with give_records.
    get_record(state, state_dtype, "state", sizeof(SGDState), True, &r.state)
    try:
        get_record(params, params_dtype, "params", sizeof(SGDParams), False, &r.params)
    except BaseException:
        PyBuffer_Release(&r.state)
        raise
    return 0


cdef inline void give_records(Records *r) noexcept:
    PyBuffer_Release(&r.params)
    PyBuffer_Release(&r.state)


cdef inline tuple result(int code, Py_ssize_t done, Py_ssize_t row):
    # (code, done, exc, row): exc is the signal handler's exception when
    # interrupted, taken off the thread state
    if code == ERR_INTERRUPTED:
        return code, done, pending_exception(), row
    return code, done, None, row
