# Online PCA by Follow the Leader with dropout perturbations (van Erven,
# Kotlowski & Warmuth, COLT 2014), lazy form: each instance gets one Bernoulli
# weight b_t ~ B(p) when it arrives, and the leader is the top-k of the kept
# sum S = sum_{s<t} b_s X_s. One state object, DropoutState, owns the kept sum,
# the sum of every instance, the block of leader estimates, the counters, its
# bit generator and the solver's work space; its trial loop -- play, gain,
# draw, update, warm-started top-k -- runs without the GIL, updating the state
# in place (as _pca.pyx's, for the same reasons: nothing in a trial can fail,
# a signal stops a call only between trials, a fork mid-call marks the
# child's copy torn) and stopping, on a signal, only between whole trials.
# "fresh" resampling, the paper's reference form, redraws every kept weight
# each trial and solves exactly: O(t n^2) a trial, played in numpy.
#
# Layout as in _pca.pyx: symmetric n x n matrices (S, C, a dense instance) are
# C-order with the row-major lower triangle valid (BLAS's column-major upper);
# the block V is a C-order (b, n) array of orthonormal rows.
#
from libc.math cimport sqrt, isfinite
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport PyCapsule_GetPointer

import numpy as np

from _common cimport bitgen_t, random_standard_uniform, OK, ERR_INTERRUPTED, pending_exception
from _work_poll cimport WorkHook, Poll, new_work_hook, arm_hook, poll_init, poll_quiet, poll_stop
from _topk cimport (TopKState, TopKWork, topk_work_init, topk_work_free, topk_solve,
                    leader_flush, leader_gain, leader_dense_hint, rank_one_rows, rows_dot_plain)
from _symm_par cimport symm_product

from _dense cimport sf_row_update, sf_dot
from _blas cimport syrk_upper
from _owner cimport CallLock, lock_init, lock_free, lock_enter, lock_leave, sf_owner_init
from _pca_sizes cimport sumsq, vector_block_check, dense_block_check, dense_sizes, SIZE_OK
from _pca_state cimport array_ptr, enter_whole, topk_stats, topk_fields, read_topk

import numbers
import sys

from streamfit._kernels._pca_api import (StateReader, bit_generator_text, refuse_version,
                                         check_orthonormal)
from streamfit._kernels._pca import (_size_error, _note, _symmetric, _positive, _names,
                                     _Seed, _rows2d, _vector_row, _dense_block, _wrong_kind,
                                     _what, _integer, _finite_or_raise)

cpdef enum:
    INSTANCE_VECTOR = 0
    INSTANCE_DENSE = 1

cpdef enum:
    SOLVER_EXACT = 0        # the eigen-solver chain (dsyevr first) at every solve
    SOLVER_KRYLOV = 1       # warm-started block Krylov, the chain as fallback


ctypedef struct Counters:
    long long t         # trials played so far
    long long kept      # instances kept in S (b_s = 1) so far
    long long pending   # rows of `rows` not yet added to C (vector instances)
    double scale        # vector: max ||x||^2; dense: max of an upper bound on ||X||_2
    double gain         # cumulative gain
    TopKState topk      # the top-k solver's counters and back-off


cdef WorkHook _hook = new_work_hook()      # this module's polling rate and test hook


def _interrupt_at(long long polls, int signum):
    """Tests: raise the real signal `signum` at the trial loop's poll number
    `polls` (one poll before each trial of a call, counted across calls);
    polls < 0 disarms."""
    arm_hook(&_hook, polls, signum)


cdef struct Ctx:
    int n, k, b, kind, solver, nrows
    double p, tol
    double *S           # the kept sum
    double *C           # every instance's sum (the regret's comparator)
    double *rows        # vector instances not yet in C (nrows of room)
    double *V
    Counters *st
    bitgen_t *rng
    double *row         # n scratch
    TopKWork *w


cdef inline double tolerance(Ctx *c, double t_next) noexcept nogil:
    # tol times the per-trial increment of sqrt(k t) L (vector) or k sqrt(t) L
    # (dense): the gaps then add at most tol times the minimax-rate regret
    cdef double r = sqrt(<double> c.k) if c.kind == INSTANCE_VECTOR else <double> c.k
    return c.tol * r * c.st.scale / (2.0 * sqrt(t_next))


cdef int trials(Ctx *c, const double *X, Py_ssize_t T, Py_ssize_t *done,
                Poll *pl) noexcept nogil:
    # Play T trials; stops early only before a trial, on a signal. Each
    # instance's size (||x||^2; a dense one's bound on ||X||_2) is computed as
    # its trial starts, as the caller's check computed it.
    cdef int n = c.n, k = c.k, code = OK
    cdef Py_ssize_t t, i, step = n * (n if c.kind == INSTANCE_DENSE else 1)
    # a trial's work in _work_poll.pxd's units (~1 ns): O(n^2 b) and ~20 us
    cdef double g, scale, frob, work = <double> n * n * (c.b / 8.0 + 1.0) + 2e4
    cdef bint keep
    cdef const double *x
    cdef const double *hint
    for t in range(T):
        if poll_stop(pl, work):
            code = ERR_INTERRUPTED
            break
        x = X + t * step
        # one uniform per instance, drawn whether or not p is 0 or 1: the
        # stream of draws is the same for every p
        keep = random_standard_uniform(c.rng) < c.p
        if c.kind == INSTANCE_DENSE:
            dense_sizes(n, x, &scale, &frob)
            # tr(V_k^T X V_k) by the panelled product (no BLAS, see _topk.pxd)
            symm_product(1, n, k, 1.0, x, c.V, c.w.tmp)
            g = rows_dot_plain(n, k, c.w.tmp, c.V)
            for i in range(n):
                sf_row_update(i + 1, c.C + i * n, 0.0, NULL, 1.0, x + i * n)
                if keep:
                    sf_row_update(i + 1, c.S + i * n, 0.0, NULL, 1.0, x + i * n)
            hint = leader_dense_hint(n, x)
        else:
            scale = sumsq(n, x)
            g = leader_gain(n, k, c.V, x, c.row)
            if keep:
                rank_one_rows(n, 1.0, x, c.S)
            memcpy(c.rows + c.st.pending * n, x, n * sizeof(double))
            c.st.pending += 1
            if c.st.pending == c.nrows:
                leader_flush(1, n, &c.st.pending, c.rows, c.C)
            hint = x
        c.st.gain += g
        if scale > c.st.scale:
            c.st.scale = scale
        c.st.t += 1
        if keep:
            # a dropped instance leaves S, and so the leader, as they were
            c.st.kept += 1
            code = topk_solve(c.w, c.S, c.V, &c.st.topk,
                              tolerance(c, <double> c.st.t + 1.0), hint,
                              <unsigned long long> c.st.t, c.solver == SOLVER_KRYLOV)
        done[0] = t + 1
        if code != OK:
            break
    return code



# --- the state object ------------------------------------------------------------------

INSTANCES = ("vector", "dense")
RESAMPLES = ("lazy", "fresh")
SOLVERS = ("auto", "krylov", "exact")
# vector instances wait in a buffer of this many rows before one product adds
# them to the data's cumulative matrix C (as in the FPL kernel)
ROW_BUFFER = 64
FORMAT_VERSION = 1

sf_owner_init()


cdef class DropoutState:
    """The state of Follow the Leader with dropout perturbations, and its
    trial loop.

    One object owns a run: the kept sum S = sum_{s<t} b_s X_s (lazy), the sum
    C of every instance (with the last rows in a buffer), the block of b >= k
    leader estimates, the counters, its own bit generator (seeded from
    ``random_state``, whose generator is copied, never drawn from) and the
    solver's work space; "fresh" resampling keeps every row instead.
    :class:`streamfit.DropoutPCA` is this object and scikit-learn's
    conventions around it.

    Parameters
    ----------
    n : int >= 1
    k : int in [1, n]
    p : float in (0, 1], default 0.5
    resample : {"lazy", "fresh"}, default "lazy"
    instances : {"vector", "dense"}, default "vector" ("fresh": vector only)
    solver, tol : as :class:`streamfit.DropoutPCA`'s; :meth:`configure`
        changes them between calls.
    random_state : None, int, SeedSequence or numpy Generator
    feature_names : sequence of str or None

    Examples
    --------
    >>> from streamfit.kernels import DropoutState
    >>> from streamfit.simulate import make_spiked_stream
    >>> X = make_spiked_stream(400, 20, n_spikes=2, random_state=0)
    >>> state = DropoutState(20, 2, random_state=0)
    >>> state.learn(X)
    >>> state.n_trials_, 0.4 < state.kept_fraction_ < 0.6
    (400, True)
    """
    cdef CallLock _lock
    cdef readonly int n, k, b
    cdef int kind, fresh, maxiter, eig_first, nrows, solver
    cdef double prob, tol
    cdef object _solver_name
    cdef Counters st
    cdef object _S, _C, _rows, _V, _H      # _H: fresh's rows so far (capacity >= t)
    cdef object _bitgen
    cdef bitgen_t *rng
    cdef object _seed, _feature_names      # _seed: _pca.pyx's _Seed
    cdef TopKWork w
    cdef bint has_work
    cdef bint _interrupted      # the last call stopped on a signal, trials kept
    cdef long long best_t
    cdef double best

    def __cinit__(self, *args, **kwargs):
        lock_init(&self._lock)
        self.has_work = False
        self.best_t = -1
        memset(&self.st, 0, sizeof(Counters))
        memset(&self.w, 0, sizeof(TopKWork))

    def __dealloc__(self):
        if self.has_work:
            topk_work_free(&self.w)
        lock_free(&self._lock)

    def __init__(self, n, k, *, p=0.5, resample="lazy", instances="vector", solver="auto",
                 tol=0.01, random_state=None, feature_names=None, eig_first=0):
        from streamfit.kernels.pca import default_block_size, default_max_iter
        from streamfit._validation import check_scalar
        n = _integer(n, "n", 1, 1 << 24)
        k = _integer(k, "n_components", 1, n, f"n_components must be in [1, n_features] = "
                                               f"[1, {n}] (n_features = {n}), got {k!r}")
        check_scalar(p, "p", low=0, high=1, low_open=True)
        if not isinstance(resample, str) or resample not in RESAMPLES:
            raise ValueError(f"resample must be one of {RESAMPLES}, got {resample!r}")
        if instances not in INSTANCES:
            raise ValueError(f"instances must be one of {INSTANCES}, got {instances!r}")
        self.n, self.k = n, k
        self.b = default_block_size(n, k)
        self.maxiter = default_max_iter(n, self.b)
        self.prob = float(p)
        self.fresh = resample == "fresh"
        self.kind = INSTANCES.index(instances)
        self.eig_first = _integer(eig_first, "eig_first", 0, 3)
        self._configure(solver, tol)
        if self.fresh and self.kind == INSTANCE_DENSE:
            raise ValueError("resample='fresh' keeps every instance to redraw them each "
                             "trial: vector instances only (partial_fit); use "
                             "resample='lazy' for dense ones")
        self._bitgen, self._seed = _Seed.own(random_state)
        self._feature_names = _names(feature_names, n)
        lazy = not self.fresh
        square, empty = (n, n), (0, 0)
        V = np.zeros((self.b, n))
        V[np.arange(self.b), np.arange(self.b)] = 1.0      # the first k axes lead
        self._adopt(np.zeros(square if lazy else empty), np.zeros(square if lazy else empty),
                    np.zeros((ROW_BUFFER if lazy and self.kind == INSTANCE_VECTOR else 0, n)),
                    V, np.zeros((0, n)))
        self._allocate()

    cdef _adopt(self, S, C, rows, V, H):
        self._S, self._C, self._rows, self._V, self._H = S, C, rows, V, H
        self.nrows = rows.shape[0]
        self.rng = <bitgen_t *> PyCapsule_GetPointer(self._bitgen.capsule, "BitGenerator")

    cdef _allocate(self):
        if not self.fresh:
            if topk_work_init(&self.w, self.n, self.k, self.b, self.maxiter) != OK:
                topk_work_free(&self.w)
                raise MemoryError(f"DropoutState: no memory for the solver's work space "
                                  f"(n = {self.n})")
            self.has_work = True
            self.w.first = self.eig_first

    cdef _configure(self, solver, tol):
        if not isinstance(solver, str) or solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
        if solver == "krylov" and 2 * self.b > self.n:
            raise ValueError(f"solver='krylov' needs n_features >= 2 * (n_components + "
                             f"{self.b - self.k}) = {2 * self.b}, got {self.n}; use "
                             f"solver='auto' or 'exact'")
        tol_value = _positive(tol, "tol")
        self.solver = SOLVER_KRYLOV if solver == "krylov" or (
            solver == "auto" and 4 * self.b <= self.n) else SOLVER_EXACT
        self.tol = tol_value
        self._solver_name = solver

    def configure(self, *, solver="auto", tol=0.01):
        """Set the solver and tolerance (as :class:`streamfit.DropoutPCA`'s),
        from the next trial on; a refused value changes nothing."""
        self._enter()
        try:
            self._configure(solver, tol)
        finally:
            lock_leave(&self._lock)

    cdef int _enter(self) except -1:
        enter_whole(&self._lock, "DropoutState")
        self._interrupted = False
        return 0

    # -- the calls -----------------------------------------------------------------------
    def learn(self, X):
        """Play one trial per row of X (C-contiguous float64, (T, n))."""
        cdef const double[:, ::1] A
        self._enter()
        try:
            self._kind(INSTANCE_VECTOR, "X")
            if not (isinstance(X, np.ndarray) and X.dtype == np.float64):
                raise TypeError(f"X must be a C-contiguous float64 array of shape "
                                f"(T, {self.n}), got {_what(X)}")
            A = _rows2d(X, self.n, "X")
            self._vectors(A, "X", True)
        finally:
            lock_leave(&self._lock)

    def learn_one(self, x):
        """Play one trial with the row x (a 1-D float64 array or a sequence
        of n real numbers): :meth:`learn` on ``x[None]``, bit for bit."""
        self._enter()
        try:
            self._kind(INSTANCE_VECTOR, "x")
            self._vectors(_vector_row(x, self.n, "DropoutPCA")[None], "x", False)
        finally:
            lock_leave(&self._lock)

    def learn_dense(self, Xs):
        """Play one trial per matrix of Xs (C-contiguous float64, (T, n, n),
        symmetric (checked) PSD (the caller's to check))."""
        cdef const double[:, :, ::1] A
        cdef int res
        cdef Py_ssize_t at = 0
        cdef double top = 0.0, asym = 0.0
        self._enter()
        try:
            self._kind(INSTANCE_DENSE, "Xs")
            A = _dense_block(Xs, self.n, "DropoutPCA")
            with nogil:
                res = dense_block_check(self.n, &A[0, 0, 0] if A.shape[0] else NULL,
                                        A.shape[0], &top, &at, &asym)
            if res != SIZE_OK:
                _size_error(res, "Xs", at, A.shape[0], asym)
            self._check_range("Xs", top, A.shape[0])
            self._lazy(&A[0, 0, 0] if A.shape[0] else NULL, A.shape[0], True)
        finally:
            lock_leave(&self._lock)

    cdef _kind(self, int kind, str name):
        if kind != self.kind:
            _wrong_kind(self.kind, kind, name, "DropoutPCA")

    cdef _vectors(self, const double[:, ::1] A, str name, bint block):
        cdef int res
        cdef Py_ssize_t at = 0, T = A.shape[0]
        cdef double top = 0.0
        cdef const double *X = &A[0, 0] if T else NULL
        with nogil:
            res = vector_block_check(self.n, X, NULL, T, &top, &at)
        if res != SIZE_OK:
            _size_error(res, name, at, T)
        self._check_range(name, top, T)
        if self.fresh:
            self._fresh(np.asarray(A))
        else:
            self._lazy(X, T, block)

    cdef _check_range(self, str name, double top, Py_ssize_t T):
        cdef double t = <double> self.st.t
        if self.st.scale > top:
            top = self.st.scale
        if T and top > 1e300 / (4.0 * (t + T)):
            raise ValueError(f"{name} is too large for float64 arithmetic: the cumulative "
                             f"matrix would overflow; rescale the data")

    cdef _lazy(self, const double *X, Py_ssize_t T, bint block):
        cdef Ctx c
        cdef Poll pl
        cdef int code
        cdef Py_ssize_t done = 0
        self.best_t = -1
        if T == 0:
            return
        memset(&c, 0, sizeof(Ctx))
        c.n, c.k, c.b, c.kind, c.solver = self.n, self.k, self.b, self.kind, self.solver
        c.p, c.tol, c.nrows = self.prob, self.tol, self.nrows
        c.S = array_ptr(self._S)
        c.C = array_ptr(self._C)
        c.rows = array_ptr(self._rows)
        c.V = array_ptr(self._V)
        c.st = &self.st
        c.rng = self.rng
        c.w = &self.w
        c.row = self.w.tmp      # n doubles: the solver's n x 3b scratch is free outside a solve
        if block:
            poll_init(&pl, &_hook)
        else:
            poll_quiet(&pl, &_hook)
        with nogil:
            code = trials(&c, X, T, &done, &pl)
        if code == ERR_INTERRUPTED:
            self._interrupted = True
            exc = pending_exception()
            _note(exc, "DropoutPCA", done, T, self.st.t)
            raise exc

    cdef _fresh(self, X):
        # The paper's dropout: every trial redraws b_1..b_{t-1} and solves the
        # kept sum exactly. Each trial is computed whole, then committed (no
        # Python code between its stores): an interrupt leaves whole trials,
        # and the generator where the last whole trial left it.
        from streamfit._kernels._linalg import eigh_top
        cdef Py_ssize_t i, t, T = X.shape[0]
        cdef int code
        cdef const double[:, ::1] A = X
        gen = np.random.Generator(self._bitgen)
        axes = np.eye(self.k, self.n)
        self.best_t = -1
        for i in range(T):
            t = self.st.t
            saved = self._bitgen.state
            try:
                kept = gen.random(t) < self.prob
                K = self._H[:t][kept]
                if K.shape[0] == 0:
                    V = axes
                else:
                    code, _, Z, _, _ = eigh_top(np.ascontiguousarray(K.T @ K), self.k, True,
                                                self.eig_first)
                    if code != OK:
                        raise np.linalg.LinAlgError("DropoutPCA: every LAPACK routine of the "
                                                    "eigen-solver chain failed")
                    V = Z[::-1]
                g = float(np.sum((V @ X[i]) ** 2))
                scale = sumsq(self.n, &A[i, 0])
                H = self._H
                if H.shape[0] < t + 1:
                    H = np.zeros((max(2 * t, 16), self.n))
                    H[:t] = self._H[:t]
                H[t] = X[i]
                Vnew = self._V.copy()
                Vnew[:self.k] = V
                n_kept = int(kept.sum())
            except BaseException:
                self._bitgen.state = saved
                self._interrupted = i > 0 or not isinstance(
                    sys.exc_info()[1], (ValueError, TypeError, np.linalg.LinAlgError))
                raise
            # commit (C stores only)
            self._H = H
            self._V = Vnew
            self.st.kept = n_kept
            self.st.gain += g
            self.st.t = t + 1
            self.st.scale = scale if scale > self.st.scale else self.st.scale

    # -- reading the state ----------------------------------------------------------------
    @property
    def components_(self):
        """(k, n) orthonormal rows: the subspace the next trial plays (lazy);
        with resample="fresh", the last trial's leader."""
        self._enter()
        try:
            return self._V[:self.k].copy()
        finally:
            lock_leave(&self._lock)

    def transform_one(self, x):
        """The coordinates of the row x on components_ (k,)."""
        cdef const double[::1] r
        cdef double[::1] out
        cdef int j
        cdef double[:, ::1] V
        self._enter()
        try:
            r = _vector_row(x, self.n, "DropoutPCA")
            V = self._V
            out = np.empty(self.k)
            for j in range(self.k):
                out[j] = sf_dot(self.n, &V[j, 0], &r[0])
            # as LeaderState.transform_one: a NaN or inf in x is refused naming
            # it (x is read again only when the result is not finite)
            for j in range(self.k):
                if not isfinite(out[j]):
                    _finite_or_raise(np.asarray(r), "x")
            return np.asarray(out)
        finally:
            lock_leave(&self._lock)

    @property
    def n_trials_(self):
        return self.st.t

    @property
    def cumulative_gain_(self):
        return self.st.gain

    @property
    def kept_fraction_(self):
        """Fraction of instances in the kept sum (fresh: the last redraw's
        fraction of the instances before the last trial)."""
        cdef long long base = self.st.t if not self.fresh else self.st.t - 1
        return float(self.st.kept) / base if base > 0 else 0.0

    @property
    def scale_(self):
        return self.st.scale

    @property
    def solver_stats_(self):
        return topk_stats(&self.st.topk)

    @property
    def started(self):
        return True

    @property
    def interrupted(self):
        """Whether the last call was stopped by a signal (holding the trials
        played before it), rather than refused or ended."""
        return bool(self._interrupted)

    @property
    def torn(self):
        """Whether a fork caught another thread inside a call on this object."""
        lock_enter(&self._lock, "DropoutState")
        lock_leave(&self._lock)
        return bool(self._lock.forked_mid_call)

    @property
    def instances(self):
        return INSTANCES[self.kind]

    @property
    def resample(self):
        return RESAMPLES[self.fresh]

    @property
    def p(self):
        return self.prob

    @property
    def feature_names(self):
        return self._feature_names

    def same_random_state(self, random_state):
        return self._seed.same(random_state)

    def _link_random_state(self, random_state):
        self._seed.link(random_state)

    def random_state_repr(self):
        return repr(self._seed)

    def cumulative_matrix(self):
        """sum_t X_t over every instance (dropped ones included), full and
        symmetric."""
        cdef double[:, ::1] C
        cdef double[:, ::1] R
        cdef Py_ssize_t i, m, n = self.n
        self._enter()
        try:
            if self.fresh:
                H = self._H[:self.st.t]
                return H.T @ H
            m = self.st.pending
            C = self._C.copy()
            R = self._rows
            if m == 1:
                for i in range(n):
                    sf_row_update(i + 1, &C[i, 0], R[0, i], &R[0, 0], 0.0, NULL)
            elif m > 1:
                syrk_upper(<int> n, <int> m, 1.0, &R[0, 0], 1.0, &C[0, 0])
            return _symmetric(np.asarray(C))
        finally:
            lock_leave(&self._lock)

    def dropout_matrix(self):
        """S = sum_{s<=t} b_s X_s, the kept sum (lazy only)."""
        self._enter()
        try:
            if self.fresh:
                raise ValueError("resample='fresh' redraws the kept sum every trial: there "
                                 "is no one dropout matrix")
            return _symmetric(self._S)
        finally:
            lock_leave(&self._lock)

    @property
    def best_gain_(self):
        """lambda_{1:k} of the sum of every instance."""
        from streamfit._kernels._linalg import eigh_top
        if self.best_t != self.st.t:
            if self.st.t == 0:
                value = 0.0
            else:
                code, w, _, _, _ = eigh_top(self.cumulative_matrix(), self.k, False)
                if code != OK:
                    raise np.linalg.LinAlgError("best_gain_: every LAPACK routine of the "
                                                "eigen-solver chain failed")
                value = float(w.sum())
            self.best, self.best_t = value, self.st.t
        return self.best

    @property
    def regret_(self):
        return self.best_gain_ - self.st.gain

    # -- copies and pickling -------------------------------------------------------------
    def copy(self):
        """An independent copy (arrays, counters, bit generator)."""
        return DropoutState.from_state(self.to_state())

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        return (_rebuild, (FORMAT_VERSION, self.to_state()))

    def to_state(self):
        """The whole state as a dict of plain values (what pickling and the
        safe model format store), read back by :meth:`from_state`."""
        self._enter()
        try:
            return {
                "n": self.n, "k": self.k, "p": self.prob, "resample": RESAMPLES[self.fresh],
                "instances": INSTANCES[self.kind], "solver": self._solver_name,
                "tol": self.tol, "eig_first": self.eig_first,
                "seed_kind": self._seed.kind, "seed": self._seed.value,
                "feature_names": None if self._feature_names is None
                else list(self._feature_names),
                "rng": bit_generator_text(self._bitgen),
                "t": self.st.t, "kept": self.st.kept, "pending": self.st.pending,
                "scale": self.st.scale, "gain": self.st.gain, **topk_fields(&self.st.topk),
                "S": self._S.copy(), "C": self._C.copy(), "rows": self._rows.copy(),
                "V": self._V.copy(), "history": self._H[:self.st.t].copy(),
            }
        finally:
            lock_leave(&self._lock)

    @staticmethod
    def from_state(state):
        """A DropoutState from :meth:`to_state`'s dict, every field checked: a
        ValueError naming the field for anything off."""
        from streamfit.kernels.pca import default_block_size, default_max_iter
        cdef DropoutState self = DropoutState.__new__(DropoutState)
        r = StateReader(state, "DropoutState")
        n = r.integer("n", 1, 1 << 24)
        k = r.integer("k", 1, n)
        self.n, self.k = n, k
        self.b = default_block_size(n, k)
        self.maxiter = default_max_iter(n, self.b)
        self.prob = r.real("p", 0)
        if not 0 < self.prob <= 1:
            raise r.error("p", f"is {self.prob!r}, expected a probability in (0, 1]")
        self.fresh = RESAMPLES.index(r.choice("resample", RESAMPLES))
        self.kind = INSTANCES.index(r.choice("instances", INSTANCES))
        if self.fresh and self.kind == INSTANCE_DENSE:
            raise r.error("resample", "is 'fresh' with dense instances")
        self.eig_first = r.integer("eig_first", 0, 3)
        solver, tol = r.get("solver"), r.get("tol")
        try:
            self._configure(solver, tol)
        except (TypeError, ValueError) as exc:
            raise r.error("solver or tol", f"is refused: {exc}") from None
        self._seed = _Seed.read(r)
        self._feature_names = r.names("feature_names", n)
        self._bitgen = r.bit_generator("rng")
        st = &self.st
        st.t = r.integer("t", 0, 2 ** 53)
        st.kept = r.integer("kept", 0, max(st.t, 0))
        st.scale = r.real("scale", 0)
        st.gain = r.real("gain")
        read_topk(r, &st.topk)
        lazy = not self.fresh
        square, empty = (n, n), (0, 0)
        S = r.array("S", square if lazy else empty)
        C = r.array("C", square if lazy else empty)
        rows = r.array("rows", (ROW_BUFFER if lazy and self.kind == INSTANCE_VECTOR else 0, n))
        st.pending = r.integer("pending", 0, max(rows.shape[0] - 1, 0))
        V = r.array("V", (self.b, n))
        check_orthonormal(V[:k] if self.fresh else V, r, "V")
        H = r.array("history", (st.t if self.fresh else 0, n))
        r.done()
        self._adopt(S, C, rows, V, H)
        self._allocate()
        return self


def _rebuild(version, state):
    """Unpickling: a DropoutState from its format version and state dict."""
    if version != FORMAT_VERSION:
        raise refuse_version("DropoutState", version, FORMAT_VERSION)
    return DropoutState.from_state(state)
