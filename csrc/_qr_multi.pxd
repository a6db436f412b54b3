# The multi-quantile pass's work space (sgd_multi): one allocation, carved
# up for the predictions, residuals, PAV and the iterates' aligned copy.
from libc.stdlib cimport malloc
from libc.string cimport memset

from _common cimport OK, ERR_NOMEM


cdef struct MultiWork:
    # sgd_multi's work space: one allocation, carved up in multi_work_init
    double *work          # the schedule's order statistics (window capacity)
    double *pred          # m predictions (then PAV's), mq values each below
    double *res           # m residuals
    double *pav           # 2 mq: PAV's levels and sizes
    double *dots          # the next row's m predictions x'w_q
    double *coef          # m update coefficients: w_q += coef[q] x
    double *step          # m weighted steps eta wi (the plug-in intercept's)
    double *W0            # the iterates, rows 32-byte aligned, ld apart
    double *cur           # two float32 rows widened
    double *nxt
    unsigned char *upd    # m flags: 1 where w_q moves this row


cdef inline int multi_work_init(MultiWork *mw, Py_ssize_t m, Py_ssize_t d, Py_ssize_t ld,
                         Py_ssize_t wcap) noexcept:
    # The iterates are worked on in a copy whose rows start on 32-byte
    # boundaries, ld apart (the fused pass's stores then stay within cache
    # lines; NumPy gives 16-byte alignment and rows d apart), each padded
    # with zeros to a multiple of 8 values (the fused pass's tail chunk then
    # loads and stores whole vectors).
    cdef Py_ssize_t mq = (m + 3) & ~(<Py_ssize_t> 3)
    mw.work = <double *> malloc((max(wcap, 1) + 7 * mq + m * ld + 4 + 2 * d) * sizeof(double)
                                + m)
    if mw.work == NULL:
        return ERR_NOMEM
    mw.pred = mw.work + max(wcap, 1)
    mw.res = mw.pred + mq
    mw.pav = mw.pred + 2 * mq
    mw.dots = mw.pred + 4 * mq
    mw.coef = mw.pred + 5 * mq
    mw.step = mw.pred + 6 * mq
    mw.W0 = <double *> ((<size_t> (mw.pred + 7 * mq) + 31) & ~(<size_t> 31))
    mw.cur = mw.pred + 7 * mq + m * ld + 4
    mw.nxt = mw.cur + d
    mw.upd = <unsigned char *> (mw.nxt + d)
    # (a call's first pass reads no coefficient, since no quantile updates;
    # zeroed all the same, so that no uninitialised value is ever loaded)
    memset(mw.pred, 0, 7 * mq * sizeof(double))
    memset(mw.W0, 0, m * ld * sizeof(double))
    return OK
