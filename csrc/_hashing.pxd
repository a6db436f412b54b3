# Feature hashing of dict rows in C, as scikit-learn's FeatureHasher does it
# (input_type="dict", alternate_sign=True): a feature named by a string key
# with a number value v lands in column abs(h) % n_features with value
# sign(h) v, h = MurmurHash3_x86_32(utf-8 key, seed 0) as a signed 32-bit
# integer (sklearn.utils.murmurhash3_32); a string value s makes the
# feature "key=s" with value 1; values 0 are left out; features that land
# in one column add up. So a model fed dicts and one fed FeatureHasher's
# output of the same dicts see the same rows.
from cpython.unicode cimport PyUnicode_Check
from cpython.bytes cimport PyBytes_Check, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.float cimport PyFloat_Check, PyFloat_AS_DOUBLE
from cpython.long cimport PyLong_Check, PyLong_AsDouble
from cpython.bool cimport PyBool_Check
from cpython.dict cimport PyDict_Next
from cpython.ref cimport PyObject
from libc.stdint cimport int32_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, realloc, free, qsort
from libc.string cimport memcpy
from libc.math cimport fabs
from libc.float cimport DBL_MAX

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object s, Py_ssize_t *size) except NULL
    bint PyUnicode_IS_COMPACT_ASCII(object s)
    void *PyUnicode_DATA(object s)
    Py_ssize_t PyUnicode_GET_LENGTH(object s)

cdef extern from "_murmur.h" nogil:
    int32_t sf_murmurhash3_32(const void *key, Py_ssize_t length, uint32_t seed)
    void sf_hash_column(int32_t h, Py_ssize_t n_features, int alternate_sign, int32_t *column,
                        double *sign)


cdef struct HashRow:
    # one row's entries (columns sorted, each once) and a byte buffer for
    # "key=value" names; grown as rows need, freed with hash_row_free
    int *idx
    double *val
    uint64_t *key         # scratch (cap): the sort's keys, column << 32 | arrival
    double *tmp           # scratch (cap): the values in arrival order
    Py_ssize_t k, cap
    char *buf
    Py_ssize_t bufcap


cdef struct _Entry:
    int idx
    double val


cdef inline int hash_row_init(HashRow *h) except -1:
    h.k = 0
    h.cap = 64
    h.bufcap = 256
    h.idx = <int *> malloc(h.cap * sizeof(int))
    h.val = <double *> malloc(h.cap * sizeof(double))
    h.key = <uint64_t *> malloc(h.cap * sizeof(uint64_t))
    h.tmp = <double *> malloc(h.cap * sizeof(double))
    h.buf = <char *> malloc(h.bufcap)
    if h.idx == NULL or h.val == NULL or h.key == NULL or h.tmp == NULL or h.buf == NULL:
        hash_row_free(h)
        raise MemoryError("could not allocate a hashed row")
    return 0


cdef inline void hash_row_free(HashRow *h) noexcept:
    free(h.idx)
    free(h.val)
    free(h.key)
    free(h.tmp)
    free(h.buf)
    h.idx = NULL
    h.val = NULL
    h.key = NULL
    h.tmp = NULL
    h.buf = NULL
    h.cap = 0
    h.bufcap = 0


cdef inline int _reserve(HashRow *h, Py_ssize_t n) except -1:
    cdef int *i2
    cdef double *v2
    cdef uint64_t *k2
    if n <= h.cap:
        return 0
    i2 = <int *> realloc(h.idx, n * sizeof(int))
    if i2 == NULL:
        raise MemoryError("could not grow a hashed row")
    h.idx = i2
    v2 = <double *> realloc(h.val, n * sizeof(double))
    if v2 == NULL:
        raise MemoryError("could not grow a hashed row")
    h.val = v2
    k2 = <uint64_t *> realloc(h.key, n * sizeof(uint64_t))
    if k2 == NULL:
        raise MemoryError("could not grow a hashed row")
    h.key = k2
    v2 = <double *> realloc(h.tmp, n * sizeof(double))
    if v2 == NULL:
        raise MemoryError("could not grow a hashed row")
    h.tmp = v2
    h.cap = n
    return 0


cdef inline int _cmp_entry(const void *a, const void *b) noexcept nogil:
    cdef int ia = (<const _Entry *> a).idx, ib = (<const _Entry *> b).idx
    return (ia > ib) - (ia < ib)


cdef inline int _sort_merge(HashRow *h) except -1:
    # columns in increasing order, entries of one column added up (in the
    # order they came: FeatureHasher's sum_duplicates adds them so too)
    cdef Py_ssize_t i, j, k = h.k
    cdef int ci
    cdef double cv
    cdef uint64_t ki
    cdef uint64_t *key = h.key
    cdef _Entry *e
    if k <= 32:
        # insertion sort of one word an entry, the column above the arrival
        # (unique keys: stable), then the values gathered in that order and
        # the columns merged: the same sums in the same order as sorting the
        # entries themselves, for half the moves
        for i in range(k):
            key[i] = ((<uint64_t> <uint32_t> h.idx[i]) << 32) | <uint64_t> i
            h.tmp[i] = h.val[i]
        for i in range(1, k):
            ki = key[i]
            j = i - 1
            while j >= 0 and key[j] > ki:
                key[j + 1] = key[j]
                j -= 1
            key[j + 1] = ki
        j = 0
        for i in range(k):
            ci = <int> (key[i] >> 32)
            cv = h.tmp[<uint32_t> key[i]]       # (the low word: the arrival)
            if j > 0 and h.idx[j - 1] == ci:
                h.val[j - 1] += cv
            else:
                h.idx[j] = ci
                h.val[j] = cv
                j += 1
        h.k = j
        return 0
    else:
        e = <_Entry *> malloc(k * sizeof(_Entry))
        if e == NULL:
            raise MemoryError("could not sort a hashed row")
        for i in range(k):
            e[i].idx = h.idx[i]
            e[i].val = h.val[i]
        # (not stable: the values of one column may add up in another order
        # than FeatureHasher's, which changes at most the sum's last bit)
        qsort(e, k, sizeof(_Entry), _cmp_entry)
        for i in range(k):
            h.idx[i] = e[i].idx
            h.val[i] = e[i].val
        free(e)
    j = 0
    for i in range(k):
        if j > 0 and h.idx[j - 1] == h.idx[i]:
            h.val[j - 1] += h.val[i]
        else:
            h.idx[j] = h.idx[i]
            h.val[j] = h.val[i]
            j += 1
    h.k = j
    return 0


cdef inline const char *_utf8(object s, Py_ssize_t *n) except NULL:
    if PyUnicode_Check(s):
        if PyUnicode_IS_COMPACT_ASCII(s):
            # (ASCII: its UTF-8 is its data, what PyUnicode_AsUTF8AndSize
            # returns, without the call)
            n[0] = PyUnicode_GET_LENGTH(s)
            return <const char *> PyUnicode_DATA(s)
        return PyUnicode_AsUTF8AndSize(s, n)
    if PyBytes_Check(s):
        n[0] = PyBytes_GET_SIZE(s)
        return PyBytes_AS_STRING(s)
    raise TypeError(f"x: feature names must be strings to be hashed (as FeatureHasher's), "
                    f"got {type(s).__name__} {s!r:.40}")


cdef inline double _value(object key, object v, str name) except? -1.0:
    # a feature's number (bool as 0/1, NumPy's real scalars), checked finite
    cdef double out
    if PyFloat_Check(v):
        out = PyFloat_AS_DOUBLE(v)
    elif PyLong_Check(v):
        try:
            out = PyLong_AsDouble(v)
        except OverflowError:
            raise ValueError(f"{name}: feature {key!r} is {v!r:.40}, beyond float64's "
                             "range") from None
    else:
        import numbers
        import numpy as np
        if isinstance(v, (np.floating, np.integer, np.bool_)) or (
                isinstance(v, numbers.Real)):
            out = float(v)
        else:
            raise TypeError(f"{name}: the value of feature {key!r} is {type(v).__name__} "
                            f"{v!r:.40}: a number or a string is expected")
    if not (fabs(out) <= DBL_MAX):
        raise ValueError(f"{name}: feature {key!r} is {v!r}, every value must be finite; "
                         "the model is unchanged (a missing feature reads as 0: leave the "
                         "key out rather than passing NaN)")
    return out


cdef inline int hash_dict_row(HashRow *h, dict x, Py_ssize_t n_features, bint alternate_sign,
                              str name) except -1:
    # x's hashed entries into h (columns sorted, each once)
    cdef PyObject *key
    cdef PyObject *val
    cdef Py_ssize_t pos = 0, nk, nv
    cdef const char *kb
    cdef const char *vb
    cdef int32_t hv, col
    cdef double v, sign
    cdef char *b2
    cdef object vo
    h.k = 0
    _reserve(h, len(x))
    while PyDict_Next(x, &pos, &key, &val):
        vo = <object> val
        kb = _utf8(<object> key, &nk)
        if PyUnicode_Check(vo):
            # a categorical value: the feature "key=value", of value 1
            vb = _utf8(vo, &nv)
            if nk + nv + 1 > h.bufcap:
                b2 = <char *> realloc(h.buf, nk + nv + 1)
                if b2 == NULL:
                    raise MemoryError("could not hash a feature name")
                h.buf = b2
                h.bufcap = nk + nv + 1
            memcpy(h.buf, kb, nk)
            h.buf[nk] = b'='
            memcpy(h.buf + nk + 1, vb, nv)
            hv = sf_murmurhash3_32(h.buf, nk + nv + 1, 0)
            v = 1.0
        else:
            v = _value(<object> key, vo, name)
            if v == 0:
                continue
            hv = sf_murmurhash3_32(kb, nk, 0)
        sf_hash_column(hv, n_features, alternate_sign, &col, &sign)
        h.idx[h.k] = col
        h.val[h.k] = v * sign
        h.k += 1
    _sort_merge(h)
    return 0
