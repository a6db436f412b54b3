# _skinny.h's panel products (a tall matrix against a few vectors), declared
# once: the dispatchers (AVX-512 where the CPU has it, else portable) and the
# portable kernels by name (_c), which the tests compare with them.
cdef extern from "_skinny.h" nogil:
    int sf_skinny_ok()
    void sf_gemm_tn(Py_ssize_t w, Py_ssize_t m, Py_ssize_t k, double alpha,
                    const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb,
                    double *C, Py_ssize_t ldc)
    void sf_gemm_nn(Py_ssize_t w, Py_ssize_t m, Py_ssize_t k, double alpha,
                    const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb,
                    double *C, Py_ssize_t ldc)
    void sf_symm_diag(Py_ssize_t w, Py_ssize_t m, double alpha, const double *A,
                      Py_ssize_t lda, const double *B, Py_ssize_t ldb, double *C,
                      Py_ssize_t ldc)
    void sf_gemm_tn_c(Py_ssize_t w, Py_ssize_t m, Py_ssize_t k, double alpha,
                      const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb,
                      double *C, Py_ssize_t ldc)
    void sf_gemm_nn_c(Py_ssize_t w, Py_ssize_t m, Py_ssize_t k, double alpha,
                      const double *A, Py_ssize_t lda, const double *B, Py_ssize_t ldb,
                      double *C, Py_ssize_t ldc)
    void sf_symm_diag_c(Py_ssize_t w, Py_ssize_t m, double alpha, const double *A,
                        Py_ssize_t lda, const double *B, Py_ssize_t ldb, double *C,
                        Py_ssize_t ldc)
