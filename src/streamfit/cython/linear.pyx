# The compiled side of linear.pxd: LinearSGD's C API, taken from the capsule
# its module hands out (csrc/_linear_api.pxd declares both sides).
from cpython.pycapsule cimport PyCapsule_GetPointer

from _linear_api cimport LinearAPI, LINEAR_API_NAME

from streamfit._kernels import _quantile

cdef LinearAPI *_api = <LinearAPI *> PyCapsule_GetPointer(_quantile._C_API, LINEAR_API_NAME)
if _api.version != 1:
    raise ImportError("streamfit.cython.linear: the linear state object's C API differs "
                      "from this module's")


cdef int learn_one(object state, const double *x, double y, double weight) except -1:
    return _api.learn_one(state, x, y, weight)


cdef int predict_one(object state, const double *x, double *out) except -1:
    return _api.predict_one(state, x, out)


cdef int learn(object state, const double *X, const double *y, const double *weight,
               Py_ssize_t n) except -1:
    return _api.learn(state, X, y, weight, n)


cdef int shape(object state, Py_ssize_t *n_features, Py_ssize_t *n_quantiles) except -1:
    return _api.shape(state, n_features, n_quantiles)
