# Compiled entries of streamfit.kernels.pca, the public low-level PCA API: GOE
# draws, one warm-started top-k solve, and the symmetric low-rank updates
# between solves. Each entry checks shapes and records, then runs a nogil
# primitive of _goe.pxd / _topk.pxd -- the same ones the FPL trial loop runs,
# so a caller composing them reproduces PerturbedLeaderPCA's decisions.
#
# Layout as in _pca.pyx: symmetric n x n matrices are C-order with the
# row-major lower triangle valid; blocks of vectors are C-order (b, n) rows.
from libc.math cimport isfinite, NAN
from libc.string cimport memcpy
from cpython.pycapsule cimport PyCapsule_GetPointer
from cpython.float cimport PyFloat_CheckExact, PyFloat_AS_DOUBLE

import json
import numbers

import numpy as np

from _blas cimport blas_int, syrk_upper

from _dense cimport sf_row_update
from _common cimport bitgen_t, OK, ERR_NOMEM
from _goe cimport goe_fill
from _topk cimport (TopKState, TopKWork, topk_work_init, topk_work_free)
from _topk cimport TOPK_MAX_ITER as MAX_ITER, check_topk_state as check_topk_state_values
from _topk cimport topk_solve as solve_block

from streamfit._kernels._common import check_struct

cdef TopKState _topk_proto
TOPK_STATE_DTYPE = np.asarray(<TopKState[:1]> &_topk_proto).dtype


TOPK_MAX_ITER = MAX_ITER


def check_topk_state(const TopKState[::1] state):
    """Check a top-k state record's values as topk_solve does (a ValueError
    naming the field): for records loaded from a pickle."""
    check_struct(state.base, TOPK_STATE_DTYPE, "state")
    check_topk_state_values(&state[0], "state")


def goe(double[:, ::1] out, double sigma, object capsule):
    """Fill ``out`` (n, n) with sigma (G + G^T)/2, G_ij ~ N(0, 1), drawing only
    the n(n+1)/2 independent entries, row by row along the lower triangle,
    from the bit generator behind ``capsule`` (whose lock the caller holds)."""
    cdef Py_ssize_t n = out.shape[0]
    cdef bitgen_t *rng = <bitgen_t *> PyCapsule_GetPointer(capsule, "BitGenerator")
    if out.shape[1] != n:
        raise ValueError(f"out must be square, got shape ({out.shape[0]}, {out.shape[1]})")
    if not (isfinite(sigma) and sigma >= 0.0):
        raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}")
    if n == 0:
        return
    with nogil:
        goe_fill(rng, n, sigma, &out[0, 0])


def topk_solve(const double[:, ::1] S, double[:, ::1] V, TopKState[::1] state,
               double[::1] values, int k, int maxiter, double tol, object hint,
               unsigned long long seed, bint krylov):
    """One solve of _topk.pxd: V (b, n) becomes the top-b eigenvector
    estimates of S (lower triangle), largest first, warm-started from V when
    ``krylov``; ``values`` (b) their Ritz values (NaN if every eigen-solver
    failed and V was kept). Returns OK or ERR_NOMEM (nothing changed then)."""
    check_struct(state.base, TOPK_STATE_DTYPE, "state")
    cdef int n = S.shape[0], b = V.shape[0], code, j
    cdef long long kept
    cdef TopKWork w
    cdef const double[::1] h
    cdef const double *hp = NULL
    if S.shape[1] != n or n == 0:
        raise ValueError(f"S must be a non-empty square matrix, got ({S.shape[0]}, {S.shape[1]})")
    if V.shape[1] != n or not 1 <= k <= b <= n:
        raise ValueError(f"V must have shape (b, {n}) with k = {k} <= b <= n, got "
                         f"({V.shape[0]}, {V.shape[1]})")
    if values.shape[0] != b:
        raise ValueError(f"values must have {b} entries, got {values.shape[0]}")
    if not 0 <= maxiter <= MAX_ITER:
        raise ValueError(f"maxiter must be in [0, {MAX_ITER}], got {maxiter}")
    if not (tol >= 0 and tol - tol == 0):
        raise ValueError(f"tol must be finite and >= 0, got {tol!r}")
    check_topk_state_values(&state[0], "state")
    if hint is not None:
        h = hint
        if h.shape[0] != n:
            raise ValueError(f"hint must have {n} entries, got {h.shape[0]}")
        hp = &h[0]
    code = topk_work_init(&w, n, k, b, maxiter)
    try:
        if code != OK:
            return code
        kept = state[0].kept
        with nogil:
            solve_block(&w, &S[0, 0], &V[0, 0], &state[0], tol, hp, seed, krylov)
            for j in range(b):
                values[j] = w.theta[j] if state[0].kept == kept else NAN
        return OK
    finally:
        topk_work_free(&w)


def sym_update(double[:, ::1] S, const double[:, ::1] rows, double alpha):
    """S += alpha rows^T rows on the lower triangle: for one row x, row i of
    S takes (alpha x_i) x in _dense.h's row update, the FPL loop's own (so
    the two agree bit for bit whichever kernels the BLAS picked: OpenBLAS's
    dsyr fuses some products and rounds its tails apart, by CPU type); dsyrk
    for a block."""
    cdef int n = S.shape[0], m = rows.shape[0], i
    if S.shape[1] != n or rows.shape[1] != n:
        raise ValueError(f"rows must have shape (m, {n}) for S of shape ({n}, {n})")
    if m == 0:
        return
    with nogil:
        if m == 1:
            for i in range(n):
                sf_row_update(i + 1, &S[i, 0], alpha * rows[0, i], &rows[0, 0], 0.0, NULL)
        else:
            syrk_upper(n, m, alpha, &rows[0, 0], 1.0, &S[0, 0])


def sym_add(double[:, ::1] S, const double[:, ::1] A, double alpha):
    """S += alpha A on the lower triangle (A symmetric, its lower triangle
    read), row by row in _dense.h's row update, as the FPL loop adds its
    noise."""
    cdef Py_ssize_t n = S.shape[0], i
    if S.shape[1] != n or A.shape[0] != n or A.shape[1] != n:
        raise ValueError(f"A must have the shape of S, ({n}, {n}), got ({A.shape[0]}, "
                         f"{A.shape[1]})")
    if n == 0:
        return
    with nogil:
        for i in range(n):
            sf_row_update(i + 1, &S[i, 0], 0.0, NULL, alpha, &A[i, 0])


# --- what the PCA state objects (_pca.pyx, _capped.pyx, _dropout.pyx) share:
# their own bit generators, the seed they were made from, and the checked
# reading of a state dict (unpickling, streamfit.load) ---------------------------

BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def own_bit_generator(random_state):
    """(bit generator, seed kind, seed value) for a state object: a bit
    generator of its own, seeded from ``random_state`` -- None (fresh
    entropy), a non-negative int, a SeedSequence, or a Generator or
    BitGenerator, whose state is copied (it is never drawn from: a state
    object owns its randomness, so a copy, a pickle or an interrupted fit
    never moves a generator someone else holds). The seed kind ("none",
    "int", "sequence", "generator") and value (the int, else None) let the
    owner say whether a later random_state is the one it was made from."""
    if random_state is None:
        return np.random.PCG64(), "none", None
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be None, a non-negative int or a numpy "
                             f"Generator, got {random_state!r}")
        return np.random.PCG64(int(random_state)), "int", int(random_state)
    if isinstance(random_state, np.random.SeedSequence):
        return np.random.PCG64(random_state), "sequence", None
    source = random_state.bit_generator if isinstance(random_state, np.random.Generator) \
        else random_state
    if isinstance(source, np.random.BitGenerator) and type(source).__name__ in BIT_GENERATORS:
        own = type(source)()
        own.state = source.state
        return own, "generator", None
    raise TypeError(f"random_state must be None, an int or a numpy Generator, got "
                    f"{random_state!r}")


def _plain(value):
    # a bit generator's state as JSON: numpy integer arrays as lists of ints
    if isinstance(value, dict):
        return {key: _plain(v) for key, v in value.items()}
    if isinstance(value, np.ndarray):
        return [int(v) for v in value.ravel()]
    if isinstance(value, (np.integer, int)):
        return int(value)
    return value


def bit_generator_text(bitgen):
    """A bit generator's state as a JSON string (plain data: loading it runs
    no code)."""
    return json.dumps(_plain(bitgen.state), sort_keys=True)


def bit_generator_from_text(text, where):
    """The bit generator a bit_generator_text string describes; a ValueError
    naming ``where`` for anything else."""
    try:
        state = json.loads(text)
        name = state["bit_generator"]
    except Exception:
        raise ValueError(f"{where} is not a bit generator's state (a corrupted or foreign "
                         f"state?); it was not used") from None
    if name not in BIT_GENERATORS:
        raise ValueError(f"{where} names the bit generator {name!r}, expected one of "
                         f"{BIT_GENERATORS} (a corrupted or foreign state?)")
    bitgen = getattr(np.random, name)()
    template = bitgen.state
    try:
        state = _shaped(state, template)
        bitgen.state = state
    except Exception as exc:
        raise ValueError(f"{where} is not a valid {name} state ({exc}; a corrupted or "
                         f"foreign state?); it was not used") from None
    if bit_generator_text(bitgen) != json.dumps(_plain(state), sort_keys=True):
        raise ValueError(f"{where} is not a valid {name} state (a corrupted or foreign "
                         f"state?); it was not used")
    return bitgen


def _shaped(value, template):
    # lists back into numpy arrays where the bit generator's template has one
    if isinstance(template, dict):
        if not isinstance(value, dict) or set(value) != set(template):
            raise ValueError("its fields are not the generator's")
        return {key: _shaped(value[key], template[key]) for key in template}
    if isinstance(template, np.ndarray):
        if not isinstance(value, list) or len(value) != template.size or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ValueError("an array of the wrong size or type")
        return np.array(value, dtype=template.dtype).reshape(template.shape)
    if isinstance(template, str):
        if not isinstance(value, str):
            raise ValueError("a name that is not a string")
        return value
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("a count that is not a non-negative int")
    return value


SEED_KINDS = ("none", "int", "sequence", "generator")


class StateReader:
    """Reads a state object's plain dict field by field, checking each
    (type, range, shape, finiteness) and raising a ValueError that names the
    field for anything off; ``done()`` refuses fields nobody read. The one
    loader of a state object: unpickling and streamfit.load both go through
    it."""

    def __init__(self, state, owner):
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise ValueError(f"{owner} state is not a dict of named fields (a corrupted or "
                             f"foreign state?); it was not used")
        self.state = state
        self.owner = owner
        self.seen = set()

    def error(self, field, what):
        return ValueError(f"{self.owner} state: field {field!r} {what} (a corrupted or "
                          f"foreign state?); it was not used")

    def get(self, field):
        if field not in self.state:
            raise self.error(field, "is missing")
        self.seen.add(field)
        return self.state[field]

    def integer(self, field, low=0, high=2 ** 62):
        v = self.get(field)
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise self.error(field, f"is {v!r}, expected an int in [{low}, {high}]")
        return v

    def real(self, field, low=None, finite=True):
        v = self.get(field)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.error(field, f"is {v!r}, expected a number")
        v = float(v)
        if (finite and not np.isfinite(v)) or (low is not None and not v >= low):
            raise self.error(field, f"is {v!r}, expected a "
                                    f"{'finite ' if finite else ''}number"
                                    f"{'' if low is None else f' >= {low}'}")
        return v

    def flag(self, field):
        v = self.get(field)
        if not isinstance(v, bool):
            raise self.error(field, f"is {v!r}, expected True or False")
        return v

    def choice(self, field, options):
        v = self.get(field)
        if not isinstance(v, str) or v not in options:
            raise self.error(field, f"is {v!r}, expected one of {tuple(options)}")
        return v

    def text(self, field, allow_none=False):
        v = self.get(field)
        if v is None and allow_none:
            return v
        if not isinstance(v, str):
            raise self.error(field, f"is a {type(v).__name__}, expected a string")
        return v

    def names(self, field, n):
        """None or a list of n distinct strings (feature names)."""
        v = self.get(field)
        if v is None:
            return None
        if not isinstance(v, list) or len(v) != n or not all(isinstance(s, str) for s in v):
            raise self.error(field, f"is not None or a list of {n} strings")
        return tuple(v)

    def array(self, field, shape, finite=True, dtype=np.float64):
        """A fresh C-contiguous copy of the field's array, of this shape and
        dtype (float64 by default)."""
        v = self.get(field)
        if not isinstance(v, np.ndarray) or v.dtype != dtype or v.shape != tuple(shape):
            raise self.error(field, f"is {_describe(v)}, expected a {np.dtype(dtype)} array "
                                    f"of shape {tuple(shape)}")
        v = np.array(v, dtype=dtype, order="C", copy=True)
        if finite and v.dtype.kind == "f" and not np.isfinite(v).all():
            raise self.error(field, "holds NaN or inf")
        return v

    def bit_generator(self, field):
        return bit_generator_from_text(self.text(field), f"{self.owner} state: field {field!r}")

    def done(self):
        extra = sorted(set(self.state) - self.seen)
        if extra:
            raise ValueError(f"{self.owner} state has unknown fields {extra} (a corrupted "
                             f"or foreign state?); it was not used")


def _describe(v):
    if isinstance(v, np.ndarray):
        return f"a {v.dtype} array of shape {v.shape}"
    return f"a {type(v).__name__}"


def check_orthonormal(V, reader, field, tol=1e-8):
    """Rows (or columns, for a square V read as columns) orthonormal: what a
    warm start or a played decision relies on."""
    if V.shape[0] and np.abs(V @ V.T - np.eye(V.shape[0])).max() > tol:
        raise reader.error(field, "rows are not orthonormal")


def refuse_version(owner, version, current):
    """The error for a pickle or saved state of another format."""
    return ValueError(f"this {owner} was saved in state format {version!r}; this streamfit "
                      f"reads format {current} only (states of earlier streamfit versions "
                      f"cannot be loaded: fit anew)")


# --- river's dict rows, in C: the PCA adapter's row ---------------------------------

def dict_row(dict x, tuple columns, double[::1] out, str what="x"):
    """out[j] = x[columns[j]] (0.0 for a missing key), each value a real
    number (float, int, bool, numpy's), never a string, bytes, None or a
    Decimal; finite. A TypeError or ValueError names the feature."""
    cdef Py_ssize_t j, d = len(columns)
    cdef double v
    cdef object value
    if out.shape[0] != d:
        raise ValueError(f"out must have {d} entries, got {out.shape[0]}")
    for j in range(d):
        value = x.get(columns[j], 0.0)
        if PyFloat_CheckExact(value):
            v = PyFloat_AS_DOUBLE(value)
        elif isinstance(value, numbers.Real) and not isinstance(value, (str, bytes)):
            try:
                v = float(value)
            except OverflowError:
                raise ValueError(f"{what}: the value of feature {columns[j]!r} is too large "
                                 f"for float64 ({value!r:.40}); the model is unchanged") \
                    from None
        else:
            raise TypeError(f"{what}: the values of features [{columns[j]!r}] are not "
                            f"numbers (a {type(value).__name__}: {value!r:.40}); the model "
                            f"is unchanged")
        if not isfinite(v):
            raise ValueError(f"{what}: feature {columns[j]!r} holds NaN or infinity; the "
                             f"model is unchanged (a missing feature reads as 0: leave the "
                             f"key out rather than passing NaN)")
        out[j] = v


# --- a fresh estimator's first call --------------------------------------------------

from _owner cimport CallLock, lock_init, lock_free, lock_enter, lock_leave, sf_owner_init

sf_owner_init()


cdef class FirstCall:
    """The gate of an estimator's first call: until it has a state object
    (whose own lock then serialises its calls) there is nothing to hold, so
    two threads' first calls would each make one and one's trials would be
    lost. The estimator makes one FirstCall with dict.setdefault (atomic) and
    runs its first call through :meth:`run`: the lock taken and given back in
    compiled code (a second thread waits with the GIL released, signals
    serviced), remade after a fork."""
    cdef CallLock _lock

    def __cinit__(self):
        lock_init(&self._lock)

    def __dealloc__(self):
        lock_free(&self._lock)

    def run(self, func, *args):
        """func(*args) holding the gate."""
        lock_enter(&self._lock, "the estimator's first call")
        try:
            return func(*args)
        finally:
            lock_leave(&self._lock)

    def __reduce__(self):
        return (FirstCall, ())
