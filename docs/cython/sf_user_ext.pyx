# cython: language_level=3, boundscheck=False, wraparound=False
"""A second library's extension built on streamfit's Cython API.

Compile it with numpy.get_include() on the C compiler's include path (and
streamfit.get_include() on Cython's, needed only for an editable install);
nothing of streamfit's is linked. tests/kernels/test_cimport.py builds
exactly this file.
"""
import numpy as np
import streamfit.cython

from cpython.pycapsule cimport PyCapsule_GetPointer
from numpy.random cimport bitgen_t

from streamfit.cython.common cimport API_VERSION, OK, interrupted, raise_pending
from streamfit.cython.eigen cimport EIG_EVR, EigWork, eig_top, eig_work_free, eig_work_init
from streamfit.cython.goe cimport goe_fill
from streamfit.cython.linear cimport learn_one, predict_one, shape

# built against one version of the declarations, run against another: refuse
if streamfit.cython.API_VERSION != API_VERSION:
    raise ImportError(f"built for streamfit's Cython API {API_VERSION}, "
                      f"running with {streamfit.cython.API_VERSION}: rebuild")


def top(double[:, ::1] A, int m):
    """The m largest eigenpairs of a symmetric matrix (its upper triangle in
    column-major order, i.e. the row-major lower one, is read), by the LAPACK
    chain dsyevr -> dsyevd -> dsyev -> Jacobi. Returns (code, values, vectors):
    code 0 (OK) or a streamfit error code; values ascending, vectors as rows."""
    cdef int n = A.shape[0], code
    cdef EigWork ws
    w = np.empty(n)
    Z = np.empty((m, n))
    B = np.empty((n, n))               # the chain's scratch copy of A
    cdef double[::1] wv = w
    cdef double[:, ::1] zv = Z
    cdef double[:, ::1] bv = B
    with nogil:
        code = eig_work_init(&ws, n, m, False)
        if code == OK:
            code = eig_top(&ws, EIG_EVR, n, &A[0, 0], n, 1.0, m, &wv[0], &zv[0, 0], n,
                           &bv[0, 0], True)
        eig_work_free(&ws)             # always, whatever the code
    return code, w[:m], Z


def goe(Py_ssize_t n, double sigma, rng):
    """A GOE matrix sigma (G + G^T) / 2 drawn from a numpy Generator's bit
    generator, holding its lock as numpy's own Cython examples do."""
    out = np.empty((n, n))
    cdef double[:, ::1] ov = out
    bit_generator = rng.bit_generator
    cdef bitgen_t *bitgen = <bitgen_t *> PyCapsule_GetPointer(bit_generator.capsule,
                                                               "BitGenerator")
    with bit_generator.lock, nogil:
        goe_fill(bitgen, n, sigma, &ov[0, 0])
    return out


def prequential(state, double[:, ::1] X, double[::1] y):
    """Score each row with a streamfit.kernels.LinearSGD's prediction, then
    learn from it: the event loop of an online learner, in compiled code.
    Returns the mean absolute error of the predictions (the first quantile's
    with several taus). A bad row raises (naming it) with the state as it
    was before that row."""
    cdef Py_ssize_t i, d, m
    cdef double total = 0.0
    shape(state, &d, &m)
    if X.shape[1] != d:
        raise ValueError(f"X has {X.shape[1]} columns, the learner {d}")
    pred = np.empty(m)
    cdef double[::1] pv = pred
    for i in range(X.shape[0]):
        predict_one(state, &X[i, 0], &pv[0])
        total += abs(y[i] - pv[0])
        learn_one(state, &X[i, 0], y[i], 1.0)
    return total / X.shape[0]


def count_slowly(Py_ssize_t n):
    """A long nogil loop that stops between whole steps on Ctrl-C (or any
    signal handler that raises) and re-raises the handler's exception."""
    cdef Py_ssize_t i, done = 0
    cdef bint stopped = False
    with nogil:
        for i in range(n):
            if i % 100000 == 0 and interrupted():
                stopped = True
                break
            done += 1
    if stopped:
        raise_pending()
    return done
