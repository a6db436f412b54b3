# The linear state object's C API: the function pointers csrc/_quantile.pyx
# hands out in a capsule (_C_API) and src/streamfit/cython/linear.pyx takes
# in, so that a compiled caller drives a LinearSGD row by row without
# Python. One declaration for both sides.
cdef extern from *:
    """
    #define SF_LINEAR_API_NAME "streamfit._kernels._quantile._C_API"
    """
    const char *LINEAR_API_NAME "SF_LINEAR_API_NAME"

ctypedef int (*learn_one_t)(object, const double *, double, double) except -1
ctypedef int (*predict_one_t)(object, const double *, double *) except -1
ctypedef int (*learn_t)(object, const double *, const double *, const double *,
                        Py_ssize_t) except -1
ctypedef int (*shape_t)(object, Py_ssize_t *, Py_ssize_t *) except -1

cdef struct LinearAPI:
    int version
    learn_one_t learn_one
    predict_one_t predict_one
    learn_t learn
    shape_t shape
