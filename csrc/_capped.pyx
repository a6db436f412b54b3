# Online PCA over the capped simplex W = {W symmetric, 0 <= W <= I, tr W = k}:
# Matrix Exponentiated Gradient (MEG) and matrix Gradient Descent (GD), with
# their Bregman projections ("capping"), the Warmuth-Kuzmin mixture
# decomposition and a systematic sampler. The trial loop -- expected and
# sampled gain, update, full eigendecomposition, projection -- runs here
# without the GIL; Python validates and owns the state arrays.
#
# Papers: Tsuda, Raetsch & Warmuth (JMLR 2005); Warmuth & Kuzmin (JMLR 2008);
# Arora, Cotter & Srebro (NIPS 2013); Nie, Kotlowski & Warmuth (JMLR 2016).
#
# Layout as in _pca.pyx: symmetric n x n matrices are C-order with the
# row-major lower triangle valid (BLAS's column-major 'U'); eigenvectors are
# C-order rows (dsyevd's columns), ascending with their eigenvalues.
from libc.math cimport sqrt, log, exp, frexp, ldexp, fma, fabs, INFINITY
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memmove, memset
from cpython.pycapsule cimport PyCapsule_GetPointer

from _blas cimport (blas_int, dot, gemv_rows, syr_upper, syrk_upper, syevd_all, axpy_upper,
                    quad_rows)

cdef extern from "numpy/random/bitgen.h":
    ctypedef struct bitgen_t:
        pass

cdef extern from "numpy/random/distributions.h" nogil:
    # the same draw as Generator.random()
    double random_standard_uniform(bitgen_t *state)

# Field names, in memory order, of the state struct below.
STATE_FIELDS = ("t", "eta", "scale", "max_frob", "gain", "realized", "u", "restarts",
                "rebuilds", "segment", "scale_restarts")

cpdef enum:
    ALGO_MEG = 0
    ALGO_GD = 1

cpdef enum:
    INSTANCE_VECTOR = 0
    INSTANCE_DENSE = 1

cpdef enum:
    OK = 0
    ERR_NOMEM = -1
    ERR_LAPACK = -2

ctypedef struct CappedState:
    double t            # trials played so far
    double eta          # the learning rate of the last update
    double scale        # L: vector max ||x||^2; dense max of a bound on ||X||_2
    double max_frob     # G: max ||X||_F (vector: ||x||^2)
    double gain         # expected gain, sum_t tr(W_t X_t)
    double realized     # gain of the sampled projections, sum_t tr(P_t X_t)
    double u            # the uniform that samples the next trial's projection
    double restarts     # MEG doubling-trick restarts (epochs)
    double rebuilds     # GD updates that rebuilt W from its support, not corrected it
    double segment      # MEG "auto": the scale Lambda this run of the epoch is tuned to
    double scale_restarts   # MEG "auto": restarts because the scale passed 2 Lambda


# --- projections onto the capped simplex (eigenvalues, sorted ascending) -----

cdef double euclid_theta(const double *v, int n, int k) noexcept nogil:
    # theta with sum_i clip(v_i - theta, 0, 1) = k, v ascending, 1 <= k < n.
    # g(theta) is piecewise linear and non-increasing with breakpoints
    # {v_i, v_i - 1}; walk them downwards by merging the two sorted lists (no
    # sort needed), find the segment where g reaches k, and solve there. While
    # walking, entries a+1..b are active (0 < v - theta < 1) and entries above
    # b are capped at 1.
    cdef int a = n - 1, b = n - 1, n_act = 0, n_cap = 0, i
    cdef double sum_act = 0.0, beta = 0.0
    cdef bint enter
    while b >= 0:
        enter = a >= 0 and v[a] >= v[b] - 1.0
        beta = v[a] if enter else v[b] - 1.0
        if n_cap + sum_act - n_act * beta >= k:
            break
        if enter:
            sum_act += v[a]
            n_act += 1
            a -= 1
        else:
            sum_act -= v[b]
            n_act -= 1
            n_cap += 1
            b -= 1
    if n_act == 0:
        return beta         # g is flat at k here
    # the running sum steered the walk; the answer uses a fresh one
    sum_act = 0.0
    for i in range(a + 1, b + 1):
        sum_act += v[i]
    return (n_cap + sum_act - k) / n_act


cdef double euclid_project(const double *v, int n, int k, double *u, double *w) noexcept nogil:
    # The Euclidean projection of v (ascending) onto the capped simplex into w;
    # returns theta (w = clip(v - theta, 0, 1)). The answer depends on
    # differences only, and theta lies in [v_(k+1) - 1, v_(k)] (k largest
    # values v_(1) >= ...): fewer than k positive entries, or more than k
    # capped ones, cannot sum to k. So entries below v_(k+1) - 1 are 0 and
    # above v_(k) + 1 are 1 whatever they are, and the walk runs on
    # u = v - v_(k) clamped to that window, in [-2, 1]: no overflow, and no
    # loss of the +-1 breakpoints at |v| > 2^53.
    cdef int i
    cdef double hi, lo, theta, wi, d
    if k >= n:
        for i in range(n):
            w[i] = 1.0
        return v[0] - 1.0   # every v - theta >= 1
    hi = v[n - k]
    lo = v[n - k - 1]
    if hi - lo > 1.0:
        # a gap wider than the box: the top k capped, the rest 0
        for i in range(n):
            w[i] = 1.0 if i >= n - k else 0.0
        return hi - 1.0
    for i in range(n):
        # on differences: hi + 1 would round back to hi beyond 2^53
        d = v[i] - hi
        if d >= 1.0:
            u[i] = 1.0
        elif v[i] - lo <= -1.0:
            u[i] = (lo - hi) - 1.0
        else:
            u[i] = d
    theta = euclid_theta(u, n, k)
    for i in range(n):
        wi = u[i] - theta
        w[i] = 0.0 if wi < 0.0 else (1.0 if wi > 1.0 else wi)
    return hi + theta


cdef int entropy_cap(const double *mu, int n, int k, double *s, double *logc) noexcept nogil:
    # The relative-entropy projection of exp(mu) (mu ascending, log domain) onto
    # the capped simplex: w_i = min(1, c exp(mu_i)) with sum w = k (Warmuth &
    # Kuzmin's capping). Cap the top m = 0, 1, ... and rescale the rest to mass
    # k - m; stop at the first m where the largest rescaled entry is <= 1.
    # s_j = sum_{i <= j} exp(mu_i - mu_j) by a stable ascending recurrence, so
    # the rescaled top entry is (k - m) / s_{n-1-m}. Returns m, sets log c;
    # entries equal to -inf (zero weight) are skipped.
    cdef int j, f = 0, m
    while f < n and mu[f] == -INFINITY:
        f += 1
    s[f] = 1.0
    for j in range(f + 1, n):
        s[j] = 1.0 + s[j - 1] * exp(mu[j - 1] - mu[j])
    for m in range(k):
        j = n - 1 - m
        if s[j] >= k - m or m == k - 1:
            logc[0] = log(<double> (k - m)) - mu[j] - log(s[j])
            return m
    return 0                # unreachable: m = k - 1 always qualifies


def project_euclidean(const double[::1] v, int k, double[::1] out):
    """w = clip(v - theta, 0, 1) with sum w = k, for v sorted ascending; returns theta."""
    cdef int n = v.shape[0]
    cdef double theta
    cdef double *u = <double *> malloc(n * sizeof(double))
    if u == NULL:
        raise MemoryError()
    with nogil:
        theta = euclid_project(&v[0], n, k, u, &out[0])
    free(u)
    return theta


def project_entropy(const double[::1] logv, int k, double[::1] out):
    """w = min(1, c v) with sum w = k, from log v sorted ascending; returns the
    number of entries capped at 1."""
    cdef int n = logv.shape[0], i, m
    cdef double logc = 0.0, wi
    cdef double *s = <double *> malloc(n * sizeof(double))
    if s == NULL:
        raise MemoryError()
    with nogil:
        m = entropy_cap(&logv[0], n, k, s, &logc)
        for i in range(n):
            wi = exp(logv[i] + logc)
            out[i] = 1.0 if (i >= n - m or wi > 1.0) else wi
    free(s)
    return m


# --- mixture decomposition and sampling ------------------------------------

# Double-double numbers (hi + lo, |lo| <= ulp(hi) / 2) for the decomposition:
# its entries go through up to n rounds of subtractions, and entries that tie
# in exact arithmetic must still tie, so it carries ~32 digits.

ctypedef struct dd:
    double hi
    double lo


cdef inline dd dd_norm(double s, double e) noexcept nogil:
    # TwoSum (not Fast2Sum: after a cancellation |s| can be below |e|)
    cdef dd r
    cdef double v
    r.hi = s + e
    v = r.hi - s
    r.lo = (s - (r.hi - v)) + (e - v)
    return r


cdef inline dd dd_sub(dd a, dd b) noexcept nogil:
    # a - b (TwoSum on the high parts)
    cdef double s = a.hi - b.hi
    cdef double v = s - a.hi
    cdef double e = (a.hi - (s - v)) + (-b.hi - v)
    return dd_norm(s, e + (a.lo - b.lo))


cdef inline dd dd_add(dd a, double b) noexcept nogil:
    cdef double s = a.hi + b
    cdef double v = s - a.hi
    cdef double e = (a.hi - (s - v)) + (b - v)
    return dd_norm(s, e + a.lo)


cdef inline double dd_cmp(dd a, dd b) noexcept nogil:
    # the sign of a - b
    return dd_sub(a, b).hi


cdef inline dd dd_div(dd a, double m) noexcept nogil:
    # a / m, the remainder exact by fma
    cdef double q = a.hi / m
    return dd_norm(q, (fma(-q, m, a.hi) + a.lo) / m)


def mixture(const double[::1] w, const Py_ssize_t[::1] order, int k, double[::1] weights,
            int[:, ::1] subsets):
    """Warmuth & Kuzmin's decomposition of w (0 <= w_i <= 1, sum w = k) into at
    most n + 1 corners (k-subsets) with weights summing to 1: returns their
    number. ``order`` lists the indices of w in descending order of w.

    Each round takes S = {entries at the mean m = sum(w)/k} filled up with the
    largest others, p = min(min_S w, m - max_{not S} w), records (p, S) and
    takes p off S. Then either an entry of S hits 0 or the largest entry
    outside S reaches the new mean and stays in every later S, so there are at
    most n rounds of O(n) work: the entries outside the mean set are kept
    sorted by merging the decreased chosen prefix with the untouched rest.

    Rounding: entries, the mean and p are double-double, and the entries that
    set p move exactly (to 0, or to the mean, which is then set to their
    value); entries within tol = 4 (n + 16) (rounds + 1) eps^2 m_0 (2e-25 at
    n = 1000 after 1000 rounds) of the mean join the mean set, within as much
    of 0 leave. In double precision the subtractions of ~n rounds left
    ties a few ulps apart and the reconstruction 1e-12 off at n = 1000."""
    cdef Py_ssize_t n = order.shape[0], i, j, a, b, nr, nn, nz = 0
    cdef int nt = 0, r, rounds = 0
    cdef dd total, mean, p, s, gap, zero
    cdef double mean0, tol, snap
    cdef bint to_mean
    cdef dd *val = <dd *> malloc((2 * n + 1) * sizeof(dd))
    cdef Py_ssize_t *idx = <Py_ssize_t *> malloc((3 * n + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t *tight = <Py_ssize_t *> malloc((k + 1) * sizeof(Py_ssize_t))
    if val == NULL or idx == NULL or tight == NULL:
        free(val); free(idx); free(tight)
        raise MemoryError()
    cdef dd *nval = val + n
    cdef Py_ssize_t *nidx = idx + n
    cdef Py_ssize_t *zeros = idx + 2 * n      # entries at 0, to fill a last corner
    with nogil:
        zero.hi = 0.0
        zero.lo = 0.0
        total = zero
        for i in range(n):
            total = dd_add(total, w[order[i]])
        mean = dd_div(total, k)
        mean0 = mean.hi
        # double-double rounding: ~eps^2 m_0 per subtraction, up to n a round
        tol = 4.0 * (n + 16) * 4.93e-32 * mean0
        # w carries its caller's rounding: sum w = k + delta. Entries within
        # |delta| (and 4 ulps) of the mean -- 1, when delta = 0 -- are at it.
        gap = total
        gap.hi -= k             # exact for |total - k| small against k
        snap = mean.hi * 4.0 * 2.220446049250313e-16 + 2.0 * fabs(gap.hi + gap.lo) / k
        nr = 0
        for i in range(n):
            if w[order[i]] <= 0.0:
                zeros[nz] = order[i]
                nz += 1
            elif nt < k and w[order[i]] >= mean.hi - snap:
                tight[nt] = order[i]
                nt += 1
            else:
                val[nr].hi = w[order[i]]
                val[nr].lo = 0.0
                idx[nr] = order[i]
                nr += 1
        # w sums to k only up to rounding (its caller's): the mean set gets
        # the mean of what the others leave for it, so that they carry exactly
        # r times the mean and no last corner comes up short; entries at or
        # above that mean join the mean set too
        b = 0
        while nt < k and b < nr:
            total = zero
            for j in range(b, nr):
                total = dd_add(dd_add(total, val[j].hi), val[j].lo)
            mean = dd_div(total, k - nt)
            if dd_cmp(val[b], mean) < -tol:
                break
            tight[nt] = idx[b]
            nt += 1
            b += 1
        memmove(val, val + b, (nr - b) * sizeof(dd))
        memmove(idx, idx + b, (nr - b) * sizeof(Py_ssize_t))
        nr -= b
        while mean.hi > tol:
            r = k - nt
            if r == 0 or nr <= r:
                # the last corner: the mean set and what is left (in exact
                # arithmetic r == 0 here; rounding could leave entries of
                # rounding size, filled up with entries at 0 if need be)
                for j in range(nt):
                    subsets[rounds, j] = <int> tight[j]
                for j in range(r):
                    if j < nr:
                        subsets[rounds, nt + j] = <int> idx[j]
                    elif j - nr < nz:
                        subsets[rounds, nt + j] = <int> zeros[j - nr]
                    else:
                        subsets[rounds, nt + j] = -1
                weights[rounds] = mean.hi + mean.lo
                rounds += 1
                break
            s = val[r - 1]
            gap = dd_sub(mean, val[r])
            to_mean = dd_cmp(gap, s) <= 0.0
            p = gap if to_mean else s
            for j in range(nt):
                subsets[rounds, j] = <int> tight[j]
            for j in range(r):
                subsets[rounds, nt + j] = <int> idx[j]
            weights[rounds] = p.hi + p.lo
            rounds += 1
            tol = 4.0 * (n + 16) * 4.93e-32 * mean0 * (rounds + 1)
            mean = val[r] if to_mean else dd_sub(mean, p)
            for j in range(r):
                val[j] = dd_sub(val[j], p)
            # merge chosen (0..r-1) with the rest (r..nr-1); entries at 0
            # leave, entries at the mean join the mean set
            a = 0
            b = r
            nn = 0
            while a < r or b < nr:
                if b >= nr or (a < r and dd_cmp(val[a], val[b]) >= 0.0):
                    i = a
                    a += 1
                else:
                    i = b
                    b += 1
                if val[i].hi <= tol:
                    zeros[nz] = idx[i]
                    nz += 1
                elif nt < k and dd_cmp(val[i], mean) >= -tol:
                    tight[nt] = idx[i]
                    nt += 1
                else:
                    nval[nn] = val[i]
                    nidx[nn] = idx[i]
                    nn += 1
            memcpy(val, nval, nn * sizeof(dd))
            memcpy(idx, nidx, nn * sizeof(Py_ssize_t))
            nr = nn
    free(val); free(idx); free(tight)
    return rounds


cdef inline int systematic_pick(const double *w, int n, int k, double u,
                                int *out) noexcept nogil:
    # Systematic sampling: the points u, u + 1, ..., u + k - 1 fall in the
    # intervals [c_{i-1}, c_i) of the cumulative sums c of w; interval i is
    # hit with probability w_i <= 1, at most once, and exactly k are hit. The
    # last cumulative sum is set to k so that rounding cannot lose a point.
    cdef int i, cnt = 0, j
    cdef double c = 0.0, nxt = u
    for i in range(n):
        c = k if i == n - 1 else c + w[i]
        if cnt < k and nxt < c:
            out[cnt] = i
            cnt += 1
            nxt += 1.0
    # a rounding tie can push a point past the last interval: take the largest
    # entries not yet taken (measure zero in exact arithmetic)
    i = n - 1
    while cnt < k and i >= 0:
        for j in range(cnt):
            if out[j] == i:
                break
        else:
            # insert i in order: the indices stay ascending
            j = cnt
            while j > 0 and out[j - 1] > i:
                out[j] = out[j - 1]
                j -= 1
            out[j] = i
            cnt += 1
        i -= 1
    return cnt


def systematic(const double[::1] w, int k, const double[::1] u, int[:, ::1] out):
    """One systematic sample of k indices of w per uniform in u (rows of out)."""
    cdef Py_ssize_t i
    cdef int n = w.shape[0]
    with nogil:
        for i in range(u.shape[0]):
            systematic_pick(&w[0], n, k, u[i], &out[i, 0])


# --- the trial loop ----------------------------------------------------------

cdef struct Ctx:
    int n, k, algo, kind, eta_auto
    double eta_value
    double *M       # MEG: log W; GD: W (lower triangle)
    double *U       # eigenvectors of W_t, rows, ascending
    double *w       # eigenvalues of W_t, ascending
    double *C       # sum of the instances (lower triangle)
    double *Wd      # dense MEG: W_t itself, for tr(W_t X_t)
    CappedState *st
    bitgen_t *rng
    double *B       # n x n: scaled eigenvector rows for dsyrk
    double *z       # n
    double *mu      # n: eigenvalues of the updated matrix
    double *s       # n: capping scratch
    double *Y       # k x n: the sampled rows (dense)
    double *Z       # k x n: X @ Y^T (dense)
    int *sel        # k
    double *work
    blas_int lwork
    blas_int *iwork
    blas_int liwork


cdef inline double trace_lower(const double *A, const double *X, int n) noexcept nogil:
    # tr(A X) for symmetric A (lower triangle valid) and symmetric X (full)
    cdef int i
    cdef double acc = 0.0
    for i in range(n):
        acc += 2.0 * dot(i, A + i * n, X + i * n) + A[i * n + i] * X[i * n + i]
    return acc


cdef void reset(Ctx *c) noexcept nogil:
    # W = (k/n) I: the uniform mixture, where both algorithms start
    cdef int n = c.n, i
    cdef double w0 = (<double> c.k) / n
    memset(c.M, 0, n * n * sizeof(double))
    memset(c.U, 0, n * n * sizeof(double))
    for i in range(n):
        c.M[i * n + i] = log(w0) if c.algo == ALGO_MEG else w0
        c.U[i * n + i] = 1.0
        c.w[i] = w0
    if c.Wd != NULL:
        memset(c.Wd, 0, n * n * sizeof(double))
        for i in range(n):
            c.Wd[i * n + i] = w0


cdef double next_eta(Ctx *c) noexcept nogil:
    # the learning rate of the update after trial t ("auto" derivations in the
    # Python docstrings: MEG by the doubling trick, GD decaying with 1/sqrt(t))
    cdef int n = c.n, k = c.k, e
    cdef double t = c.st.t, epoch, tilde, d
    if not c.eta_auto:
        return c.eta_value
    if c.algo == ALGO_GD:
        d = sqrt(2.0 * (k if 2 * k <= n else n - k))
        return d / (c.st.max_frob * sqrt(t))
    frexp(t, &e)
    epoch = ldexp(1.0, e - 1)          # 2^j <= t < 2^(j+1)
    tilde = sqrt(k * log((<double> n) / k) / ((1.0 if c.kind == INSTANCE_VECTOR else k) * epoch))
    # eta X's eigenvalues stay <= 2 tilde <= 1 while the scale is <= 2 Lambda
    return (tilde if tilde < 0.5 else 0.5) / c.st.segment


cdef int rows_scaled(Ctx *c, const double *coef, int lo, int hi, int sign) noexcept nogil:
    # B's rows = sqrt(|coef_i|) U_i for i in [lo, hi) with sign * coef_i > 0
    # (U: the eigenvectors of the update just decomposed)
    cdef int i, r = 0, j, n = c.n
    cdef double f
    for i in range(lo, hi):
        if sign * coef[i] > 0.0:
            f = sqrt(sign * coef[i])
            for j in range(n):
                c.B[r * n + j] = f * c.U[i * n + j]
            r += 1
    return r


cdef int update(Ctx *c, double eta, const double *x, int dense) noexcept nogil:
    # W_{t+1} from W_t and eta X_t; returns OK or ERR_LAPACK
    cdef int n = c.n, k = c.k, i, m, r, npos, ncorr
    cdef double logc = 0.0, theta, wi
    if dense:
        axpy_upper(n, eta, x, c.M)
    else:
        syr_upper(n, eta, x, c.M, n)
    # W_t's eigenvectors have served (the trial is played): decompose in U
    memcpy(c.U, c.M, n * n * sizeof(double))
    if syevd_all(n, c.U, n, c.mu, c.work, c.lwork, c.iwork, c.liwork) != 0:
        return ERR_LAPACK
    if c.algo == ALGO_MEG:
        # log W_{t+1} = min(0, mu + log c) in the new eigenbasis, which is
        # M + log c I minus the capped directions' excess: a rank-m (m < k)
        # correction instead of an O(n^3) rebuild
        m = entropy_cap(c.mu, n, k, c.s, &logc)
        for i in range(n):
            c.M[i * n + i] += logc
            wi = exp(c.mu[i] + logc)
            c.w[i] = 1.0 if (i >= n - m or wi > 1.0) else wi
            c.s[i] = c.mu[i] + logc if i >= n - m else 0.0
        r = rows_scaled(c, c.s, n - m, n, 1)
        syrk_upper(n, r, -1.0, c.B, 1.0, c.M)
        if c.Wd != NULL:
            r = rows_scaled(c, c.w, 0, n, 1)
            syrk_upper(n, r, 1.0, c.B, 0.0, c.Wd)
    else:
        theta = euclid_project(c.mu, n, k, c.s, c.w)
        npos = 0
        ncorr = 0
        for i in range(n):
            wi = c.w[i]
            # > 0 capped, < 0 clipped at 0; active directions keep mu - theta
            c.s[i] = c.mu[i] - theta - wi if (wi == 0.0 or wi == 1.0) else 0.0
            npos += wi > 0.0
            ncorr += c.s[i] != 0.0
        if npos <= ncorr:
            # W_{t+1} = sum_{w_i > 0} w_i e_i e_i^T: cheaper than the correction
            r = rows_scaled(c, c.w, 0, n, 1)
            syrk_upper(n, r, 1.0, c.B, 0.0, c.M)
            c.st.rebuilds += 1
        else:
            # W_{t+1} = M - theta I - sum_i s_i e_i e_i^T over the clipped i
            for i in range(n):
                c.M[i * n + i] -= theta
            r = rows_scaled(c, c.s, 0, n, 1)
            syrk_upper(n, r, -1.0, c.B, 1.0, c.M)
            r = rows_scaled(c, c.s, 0, n, -1)
            syrk_upper(n, r, 1.0, c.B, 1.0, c.M)
    return OK


cdef int trials(Ctx *c, const double *X, const double *scale, const double *frob,
                Py_ssize_t T) noexcept nogil:
    cdef int n = c.n, k = c.k, i, j, code
    cdef int dense = c.kind == INSTANCE_DENSE
    cdef Py_ssize_t t
    cdef const double *x
    cdef double g, realized, eta, mant
    cdef int e
    cdef bint meg_auto
    cdef CappedState *st = c.st
    for t in range(T):
        x = X + t * n * (n if dense else 1)
        # play: expected gain tr(W_t X_t), and the gain of P_t sampled with u_t
        systematic_pick(c.w, n, k, st.u, c.sel)
        g = 0.0
        realized = 0.0
        if dense:
            g = trace_lower(c.Wd if c.algo == ALGO_MEG else c.M, x, n)
            for j in range(k):
                memcpy(c.Y + j * n, c.U + c.sel[j] * n, n * sizeof(double))
            realized = quad_rows(n, k, x, c.Y, c.Z)
            axpy_upper(n, 1.0, x, c.C)
        else:
            gemv_rows(n, n, 1.0, c.U, x, 0.0, c.z)
            for i in range(n):
                g += c.w[i] * c.z[i] * c.z[i]
            for j in range(k):
                realized += c.z[c.sel[j]] * c.z[c.sel[j]]
            syr_upper(n, 1.0, x, c.C, n)
        st.t += 1
        st.gain += g
        st.realized += realized
        if scale[t] > st.scale:
            st.scale = scale[t]
        if frob[t] > st.max_frob:
            st.max_frob = frob[t]
        # next decision
        mant = frexp(st.t + 1.0, &e)
        meg_auto = c.algo == ALGO_MEG and c.eta_auto
        if meg_auto and mant == 0.5:
            # doubling trick: trial t + 1 = 2^j starts an epoch afresh, tuned
            # to the scale seen so far
            reset(c)
            st.restarts += 1
            st.segment = st.scale
        elif frob[t] > 0.0:
            if meg_auto and st.segment == 0.0:
                st.segment = scale[t]
            if meg_auto and scale[t] > 2.0 * st.segment:
                # a rate tuned to Lambda no longer bounds eta X: start this
                # epoch afresh at the new scale (no update with X_t, which the
                # old run played); the scales of such restarts more than
                # double each time, so they cost O(L) regret in all
                reset(c)
                st.scale_restarts += 1
                st.segment = scale[t]
            else:
                eta = next_eta(c)
                code = update(c, eta, x, dense)
                if code != OK:
                    return code
                st.eta = eta
        st.u = random_standard_uniform(c.rng)
    return OK


def run(const double[:, ::1] X, const double[::1] scale, const double[::1] frob,
        double[::1] state, const double[::1] params, double[:, ::1] M, double[:, ::1] U,
        double[::1] w, double[:, ::1] C, double[:, ::1] Wd, object capsule):
    """Play the trials of X: rows (vector instances) or, with params' kind
    dense, X of shape (T, n*n) holding full symmetric matrices; scale and
    frob are per trial the eigenvalue bound and ||X_t||_F. params =
    [algo, kind, eta_auto, eta_value, k]. State arrays are updated in place
    (the caller passes copies); returns OK or an error code."""
    cdef Ctx c
    cdef int n = U.shape[0], code = OK
    cdef double wq = 0.0
    cdef blas_int iwq = 0
    c.n = n
    c.algo = <int> params[0]
    c.kind = <int> params[1]
    c.eta_auto = <int> params[2]
    c.eta_value = params[3]
    c.k = <int> params[4]
    c.M = &M[0, 0]
    c.U = &U[0, 0]
    c.w = &w[0]
    c.C = &C[0, 0]
    c.Wd = &Wd[0, 0] if Wd.shape[0] > 0 else NULL
    c.st = <CappedState *> &state[0]
    c.rng = <bitgen_t *> PyCapsule_GetPointer(capsule, "BitGenerator")
    c.B = <double *> malloc((<size_t> n * n + 3 * <size_t> n + 2 * <size_t> c.k * n)
                            * sizeof(double))
    c.sel = <int *> malloc(c.k * sizeof(int))
    c.work = NULL
    c.iwork = NULL
    if c.B == NULL or c.sel == NULL:
        free(c.B); free(c.sel)
        return ERR_NOMEM
    c.z = c.B + n * n
    c.mu = c.z + n
    c.s = c.mu + n
    c.Y = c.s + n
    c.Z = c.Y + c.k * n
    try:
        with nogil:
            # dsyevd's workspace, queried once per call
            if syevd_all(n, c.U, n, c.mu, &wq, -1, &iwq, -1) != 0:
                code = ERR_LAPACK
            else:
                c.lwork = <blas_int> wq
                c.liwork = iwq
                c.work = <double *> malloc(c.lwork * sizeof(double))
                c.iwork = <blas_int *> malloc(c.liwork * sizeof(blas_int))
                if c.work == NULL or c.iwork == NULL:
                    code = ERR_NOMEM
                else:
                    code = trials(&c, &X[0, 0], &scale[0], &frob[0], X.shape[0])
    finally:
        free(c.B); free(c.sel); free(c.work); free(c.iwork)
    return code


def reset_state(const double[::1] params, double[:, ::1] M, double[:, ::1] U, double[::1] w,
                double[:, ::1] Wd):
    """W = (k/n) I in the kernel's representation (MEG: log W)."""
    cdef Ctx c
    c.n = U.shape[0]
    c.algo = <int> params[0]
    c.k = <int> params[4]
    c.M = &M[0, 0]
    c.U = &U[0, 0]
    c.w = &w[0]
    c.Wd = &Wd[0, 0] if Wd.shape[0] > 0 else NULL
    reset(&c)
