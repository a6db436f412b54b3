# Where a field sits in a struct, for the Cython API's modules (src/streamfit/
# cython/*.pyx) to check that a public struct is laid out as the kernels' own.

cdef inline size_t offset(const void *base, const void *field) noexcept nogil:
    return <size_t> (<const char *> field - <const char *> base)
