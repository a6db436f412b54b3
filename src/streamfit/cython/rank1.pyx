# The compiled side of rank1.pxd: the kernels' rank-one update
# (csrc/_rank1.pxd) behind function pointers.
cimport _rank1

from _layout cimport offset


cdef int rank1_work_init(Rank1Work *ws, int n) noexcept nogil:
    return _rank1.rank1_work_init(<_rank1.Rank1Work *> ws, n)


cdef void rank1_work_free(Rank1Work *ws) noexcept nogil:
    _rank1.rank1_work_free(<_rank1.Rank1Work *> ws)


cdef int rank1_update(Rank1Work *ws, int n, double *U, const double *d, const double *x,
                      double rho, double *mu, int *block) noexcept nogil:
    return _rank1.rank1_update(<_rank1.Rank1Work *> ws, n, U, d, x, rho, mu, block)


# The public struct is the kernels' struct under its public name (see eigen.pyx).
cdef Rank1Work _pub
cdef _rank1.Rank1Work _own
if (sizeof(Rank1Work) != sizeof(_rank1.Rank1Work)
        or offset(&_pub, &_pub.Unew) != offset(&_own, &_own.Unew)):
    raise ImportError("streamfit.cython.rank1: Rank1Work differs from the kernels' struct")
