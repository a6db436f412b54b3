# The compiled side of eigen.pxd: the kernels' own solver chain (csrc/_eigen.pxd)
# behind function pointers that cimporting modules fetch at import.
cimport _eigen

from _layout cimport offset


cdef int eig_work_init(EigWork *ws, int n, int m, bint evd_first) noexcept nogil:
    return _eigen.eig_work_init(<_eigen.EigWork *> ws, n, m, evd_first)


cdef void eig_work_free(EigWork *ws) noexcept nogil:
    _eigen.eig_work_free(<_eigen.EigWork *> ws)


cdef int eig_top(EigWork *ws, int first, int n, const double *A, int lda, double sc,
                 int m, double *w, double *Z, int ldz, double *B, bint vectors) noexcept nogil:
    return _eigen.eig_top(<_eigen.EigWork *> ws, first, n, A, lda, sc, m, w, Z, ldz, B, vectors)


cdef int eig_all(EigWork *ws, int first, int n, const double *A, int lda,
                 double *w, double *V) noexcept nogil:
    return _eigen.eig_all(<_eigen.EigWork *> ws, first, n, A, lda, w, V)


# The public struct is the kernels' struct under its public name: a caller
# allocates it and reads its counters, the solver fills the rest. Same size,
# same place for the fields a caller reads, or the module refuses to load.
cdef EigWork _pub
cdef _eigen.EigWork _own
if (sizeof(EigWork) != sizeof(_eigen.EigWork)
        or offset(&_pub, &_pub.fallbacks) != offset(&_own, &_own.fallbacks)
        or offset(&_pub, &_pub.last_info) != offset(&_own, &_own.last_info)
        or (EIG_EVR, EIG_EVD, EIG_EV, EIG_JACOBI) != (_eigen.EIG_EVR, _eigen.EIG_EVD,
                                                      _eigen.EIG_EV, _eigen.EIG_JACOBI)):
    raise ImportError("streamfit.cython.eigen: EigWork differs from the kernels' struct")
