# Pool adjacent violators: the projection that keeps several quantiles'
# predictions at a row ordered (sgd_multi's NONCROSS_PROJECT).


cdef inline void pav_increasing(double *v, Py_ssize_t m, double *level,
                                double *size) noexcept nogil:
    # v <- its least-squares projection onto {v_1 <= ... <= v_m} (pool adjacent
    # violators, equal weights); level/size: m work values each
    cdef Py_ssize_t i, j, nb = 0
    cdef Py_ssize_t k
    for i in range(m):
        level[nb] = v[i]
        size[nb] = 1.0
        nb += 1
        while nb > 1 and level[nb - 2] > level[nb - 1]:
            level[nb - 2] = (level[nb - 2] * size[nb - 2] + level[nb - 1] * size[nb - 1]) / \
                (size[nb - 2] + size[nb - 1])
            size[nb - 2] += size[nb - 1]
            nb -= 1
    i = 0
    for j in range(nb):
        for k in range(<Py_ssize_t> size[j]):
            v[i] = level[j]
            i += 1
