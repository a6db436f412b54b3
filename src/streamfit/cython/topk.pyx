# The compiled side of topk.pxd: the kernels' warm-started solver
# (csrc/_topk.pxd) behind function pointers.
cimport _topk

from _layout cimport offset


cdef int topk_work_init(TopKWork *w, int n, int k, int b, int maxiter) noexcept nogil:
    return _topk.topk_work_init(<_topk.TopKWork *> w, n, k, b, maxiter)


cdef void topk_work_free(TopKWork *w) noexcept nogil:
    _topk.topk_work_free(<_topk.TopKWork *> w)


cdef int topk_exact(TopKWork *w, const double *S, double *V, TopKState *st) noexcept nogil:
    return _topk.topk_exact(<_topk.TopKWork *> w, S, V, <_topk.TopKState *> st)


cdef int topk_solve(TopKWork *w, const double *S, double *V, TopKState *st, double tol,
                    const double *hint, unsigned long long seed, bint krylov) noexcept nogil:
    return _topk.topk_solve(<_topk.TopKWork *> w, S, V, <_topk.TopKState *> st, tol, hint,
                            seed, krylov)


# The public structs are the kernels' structs under their public names (see
# eigen.pyx); TopKState is a plain record, every field of it checked.
cdef TopKWork _pub
cdef _topk.TopKWork _own
cdef TopKState _spub
cdef _topk.TopKState _sown
if (sizeof(TopKWork) != sizeof(_topk.TopKWork)
        or offset(&_pub, &_pub.threads) != offset(&_own, &_own.threads)
        or sizeof(TopKState) != sizeof(_topk.TopKState)
        or offset(&_spub, &_spub.products) != offset(&_sown, &_sown.products)
        or offset(&_spub, &_spub.fallbacks) != offset(&_sown, &_sown.fallbacks)
        or offset(&_spub, &_spub.direct) != offset(&_sown, &_sown.direct)
        or offset(&_spub, &_spub.skip) != offset(&_sown, &_sown.skip)
        or offset(&_spub, &_spub.backoff) != offset(&_sown, &_sown.backoff)
        or offset(&_spub, &_spub.eig_fallbacks) != offset(&_sown, &_sown.eig_fallbacks)
        or offset(&_spub, &_spub.kept) != offset(&_sown, &_sown.kept)
        or offset(&_spub, &_spub.tol) != offset(&_sown, &_sown.tol)
        or offset(&_spub, &_spub.gap) != offset(&_sown, &_sown.gap)
        or offset(&_spub, &_spub.max_gap_ratio) != offset(&_sown, &_sown.max_gap_ratio)
        or TOPK_MAX_ITER != _topk.TOPK_MAX_ITER):
    raise ImportError("streamfit.cython.topk: TopKWork or TopKState differs from the "
                      "kernels' structs")
