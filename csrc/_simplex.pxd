# The capped simplex {w : 0 <= w_i <= 1, sum w = k} as nogil primitives on
# eigenvalue vectors: the Euclidean projection (matrix GD), the relative-entropy
# projection ("capping", MEG) and systematic sampling of k indices with
# inclusion probabilities w. The MEG/GD kernel (_capped.pyx) and
# streamfit.kernels' project_capped_simplex / systematic_sample share them;
# Cython users cimport them from here.
#
#   euclid_project(v, n, k, u, w) -> theta     v ascending; u: n scratch
#   entropy_cap(mu, n, k, s, &logc) -> m       mu = log v ascending; s: n scratch
#   systematic_pick(w, n, k, u, out) -> k      u uniform in [0, 1)
from libc.math cimport log, exp, INFINITY


# --- projections onto the capped simplex (eigenvalues, sorted ascending) -----

cdef inline double euclid_theta(const double *v, int n, int k) noexcept nogil:
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


cdef inline double euclid_project(const double *v, int n, int k, double *u, double *w) noexcept nogil:
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


cdef inline int entropy_cap(const double *mu, int n, int k, double *s, double *logc) noexcept nogil:
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


# --- sampling ------------------------------------------------------------

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
