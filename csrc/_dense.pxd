# _dense.h's short dense loops (the per-row products of the quantile and PCA
# kernels), declared once for every module that calls them.
cdef extern from "_dense.h" nogil:
    double sf_dot(Py_ssize_t n, const double *x, const double *w)
    double sf_dot2(Py_ssize_t n, const double *x, const double *w, double *xx)
    void sf_axpy(Py_ssize_t n, double a, const double *x, double *w)
    void sf_average(Py_ssize_t n, double inv, const double *w, double *wbar)
    double sf_plug_in_pass(Py_ssize_t n, double inv, double invx, const double *x,
                           const double *w, double *wbar, double *xbar, double *wwbar,
                           double *lag)
    double sf_axpy_dot2(Py_ssize_t n, double a, const double *x, double *w,
                        const double *xnext, double *xx)
    double sf_axpy_dot2_f32(Py_ssize_t n, double a, const double *x, double *w,
                            const float *xnext, double *xout, double *xx)
    void sf_multi_axpy_dot2(Py_ssize_t n, Py_ssize_t m, const double *a,
                            const unsigned char *upd, const double *x, double *W,
                            Py_ssize_t ldw, const double *xnext, double *s, double *xx)
    void sf_widen(Py_ssize_t n, const float *src, double *dst)
    void sf_row_update(Py_ssize_t n, double *s, double xi, const double *x, double a,
                       const double *N)
